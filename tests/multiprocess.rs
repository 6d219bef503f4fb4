//! Real processes on 127.0.0.1: this test binary re-runs itself as the ranks (the `child`
//! test, selected by `RUCCL_MP_ROLE`). The parent makes the `UniqueId` (so its listener is
//! the rendezvous root) or sets torchrun's variables, starts the children, and kills them
//! all if any fails or passes the deadline: no orphans, no hung run. Every child also has
//! its own hard deadline ([`CHILD_DEADLINE`]).
//!
//! Covered: every collective with f32, i64, bf16 and u8 for world sizes 2, 3 and 4 (one rank
//! per process) and 2 processes x 2 in-process ranks, then on a split of the even and of the
//! odd ranks; a peer killed mid-collective, and one stopped (`SIGSTOP`: its sockets stay
//! open, it sends nothing) past a short `RUCCL_PEER_SILENCE` (`PeerLost` naming it); a live peer that never calls the collective and a rank that
//! never comes (`Timeout` naming them); duplicate rank,
//! world and config mismatches across processes; a listener fed garbage that keeps serving;
//! `Communicator::from_env` with torchrun's variables.
//!
//! The cases that move data are stamped out per transport between processes (`shm::*`:
//! shared memory, the default on one host; `tcp::*`: `RUCCL_SHM_DISABLE=1`), and each child
//! checks that its process uses the transport asked for (a shared-memory reader thread runs,
//! or none does).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::fmt::Debug;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use half::bf16;
use ruccl::{Communicator, Element, ErrorKind, HostDevice, ReduceOp, Tensor, UniqueId};

/// The peer API over several nodes (needs the `orchestrator` feature).
#[cfg(feature = "orchestrator")]
#[path = "multiprocess/hier.rs"]
mod hier;

#[cfg(not(feature = "orchestrator"))]
#[test]
fn hierarchy_needs_the_orchestrator_feature() {
    eprintln!("skipped: the multi-node peer-API tests run with --features orchestrator");
}

/// The child's role; unset in the parent.
const ROLE: &str = "RUCCL_MP_ROLE";
/// A child exits (code 97) after this long, whatever it is doing.
const CHILD_DEADLINE: Duration = Duration::from_secs(40);
/// The parent's deadline for a group of children.
const GROUP_DEADLINE: Duration = Duration::from_secs(45);
/// Elements per rank (not a multiple of any world size tested).
const N: usize = 37;

// ---------------------------------------------------------------------------------------
// The child side.

fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_default()
}

fn num(k: &str) -> usize {
    var(k).parse().unwrap_or_else(|_| panic!("{k} is not a number: {:?}", var(k)))
}

/// The entry point of every child; does nothing in the parent.
#[test]
fn child() {
    let role = var(ROLE);
    if role.is_empty() {
        return;
    }
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_DEADLINE);
        eprintln!("child passed its deadline");
        std::process::exit(97);
    });
    let result = match role.as_str() {
        "collectives" => collectives_child(),
        "join" => join_child(),
        "victim" => victim_child(),
        "survivor" => survivor_child(),
        "waiter" => waiter_child(),
        "env" => env_child(),
        "large" => large_child(),
        "threshold" => threshold_child(),
        "streamer" => streamer_child(),
        #[cfg(feature = "orchestrator")]
        "node" => hier::node_child(),
        #[cfg(feature = "orchestrator")]
        "lonely" => hier::lonely_child(),
        #[cfg(feature = "orchestrator")]
        "mismatch" => hier::mismatch_child(),
        #[cfg(feature = "orchestrator")]
        "hier_victim" => hier::hier_victim_child(),
        #[cfg(feature = "orchestrator")]
        "hier_survivor" => hier::hier_survivor_child(),
        r => Err(format!("unknown role {r}")),
    };
    match result {
        Ok(()) => println!("child ok"),
        Err(e) => {
            eprintln!("child failed: {e}");
            std::process::exit(1);
        }
    }
}

fn join(rank: usize) -> Result<Communicator<HostDevice>, ruccl::CollectiveError> {
    let id: UniqueId = var("MP_ID").parse()?;
    Communicator::new(HostDevice::default(), num("MP_WORLD"), id, rank)
}

/// Whether a shared-memory reader thread runs in this process (threads are named).
fn shm_threads() -> bool {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "ruccl-shm-r"))
}

/// Checks that the transport is the one the parent asked for (`MP_SHM`: 1 or 0), after
/// joining a communicator whose peers are in other processes.
fn check_transport() -> Result<(), String> {
    let want = var("MP_SHM") == "1";
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    // A thread names itself once it runs: give a fresh one a moment.
    let until = Instant::now() + Duration::from_secs(2);
    while shm_threads() != want {
        if want && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        return Err(format!("shared memory in use: {}, asked for: {want}", !want));
    }
    Ok(())
}

/// Runs every collective on every local rank (`MP_RANKS`, comma-separated), one thread each.
fn collectives_child() -> Result<(), String> {
    let ranks: Vec<usize> = var("MP_RANKS").split(',').map(|r| r.parse().unwrap()).collect();
    let threads: Vec<_> = ranks
        .into_iter()
        .map(|rank| {
            std::thread::spawn(move || -> Result<(), String> {
                let comm = join(rank).map_err(|e| e.to_string())?;
                check_transport()?;
                every_collective::<f32>(&comm, |v| v as f32)?;
                every_collective::<i64>(&comm, |v| v as i64)?;
                every_collective::<bf16>(&comm, |v| bf16::from_f64(v as f64))?;
                every_collective::<u8>(&comm, |v| v as u8)?;
                // A split across processes: even and odd ranks, each a group of its own.
                let mine: Vec<usize> = (0..comm.world_size()).filter(|r| r % 2 == rank % 2).collect();
                let child = comm.split_from(&mine).map_err(|e| e.to_string())?.ok_or("left out of the split")?;
                every_collective::<f32>(&child, |v| v as f32)?;
                drop(child);
                comm.barrier().map_err(|e| e.to_string())
            })
        })
        .collect();
    threads.into_iter().try_for_each(|t| t.join().map_err(|_| "a rank panicked".to_string())?)
}

fn check<T: PartialEq + Debug>(what: &str, rank: usize, got: Vec<T>, want: Vec<T>) -> Result<(), String> {
    if got == want { Ok(()) } else { Err(format!("{what} on rank {rank}: got {got:?}, want {want:?}")) }
}

/// Every collective with small integer values (exact in every dtype), checked.
fn every_collective<T: Element + PartialEq + Debug>(
    comm: &Communicator<HostDevice>,
    of: fn(u32) -> T,
) -> Result<(), String> {
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let e = |e: ruccl::CollectiveError| e.to_string();
    let v = |r: usize, i: usize| (r + 1 + i % 5) as u32;
    let mine: Vec<T> = (0..N).map(|i| of(v(rank, i))).collect();
    let sum = |i: usize| (0..world).map(|r| v(r, i)).sum::<u32>();

    let mut t = Tensor::from_slice(&dev, &mine, &[N]).map_err(e)?;
    comm.all_reduce(&mut t, ReduceOp::Sum).map_err(e)?;
    check("all_reduce", rank, t.to_vec::<T>().map_err(e)?, (0..N).map(|i| of(sum(i))).collect())?;

    let root = world - 1;
    let mut t = Tensor::from_slice(&dev, &mine, &[N]).map_err(e)?;
    comm.reduce(&mut t, ReduceOp::Sum, root).map_err(e)?;
    if rank == root {
        check("reduce", rank, t.to_vec::<T>().map_err(e)?, (0..N).map(|i| of(sum(i))).collect())?;
    }

    let root = 1 % world;
    let mut t = Tensor::from_slice(&dev, &mine, &[N]).map_err(e)?;
    comm.broadcast(&mut t, root).map_err(e)?;
    check("broadcast", rank, t.to_vec::<T>().map_err(e)?, (0..N).map(|i| of(v(root, i))).collect())?;

    let all: Vec<T> = (0..world * N).map(|j| of(v(j / N, j % N))).collect();
    let input = Tensor::from_slice(&dev, &mine, &[N]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[world * N]).map_err(e)?;
    comm.all_gather_into_tensor(&mut out, &input).map_err(e)?;
    check("all_gather", rank, out.to_vec::<T>().map_err(e)?, all.clone())?;

    let wide: Vec<T> = (0..world * N).map(|j| of(v(rank, j))).collect();
    let input = Tensor::from_slice(&dev, &wide, &[world * N]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[N]).map_err(e)?;
    comm.reduce_scatter_tensor(&mut out, &input, ReduceOp::Sum).map_err(e)?;
    let want = (0..N).map(|i| of((0..world).map(|r| v(r, rank * N + i)).sum())).collect();
    check("reduce_scatter", rank, out.to_vec::<T>().map_err(e)?, want)?;

    let f = |from: usize, to: usize, i: usize| (from * 7 + to + i % 3) as u32;
    let sends: Vec<T> = (0..world * N).map(|j| of(f(rank, j / N, j % N))).collect();
    let input = Tensor::from_slice(&dev, &sends, &[world * N]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[world * N]).map_err(e)?;
    comm.all_to_all_single(&mut out, &input).map_err(e)?;
    let want = (0..world * N).map(|j| of(f(j / N, rank, j % N))).collect();
    check("all_to_all", rank, out.to_vec::<T>().map_err(e)?, want)?;

    let input = Tensor::from_slice(&dev, &mine, &[N]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[world * N]).map_err(e)?;
    comm.gather((rank == 0).then_some(&mut out), &input, 0).map_err(e)?;
    if rank == 0 {
        check("gather", rank, out.to_vec::<T>().map_err(e)?, all)?;
    }

    let parts: Vec<T> = (0..world * N).map(|j| of((j / N + (j % N) % 4) as u32)).collect();
    let input = Tensor::from_slice(&dev, &parts, &[world * N]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[N]).map_err(e)?;
    comm.scatter(&mut out, (rank == 0).then_some(&input), 0).map_err(e)?;
    check("scatter", rank, out.to_vec::<T>().map_err(e)?, (0..N).map(|i| of((rank + i % 4) as u32)).collect())?;

    // Point to point: rank 0 sends to every rank, then every rank answers rank 0.
    let msg = |from: usize, to: usize| -> Vec<T> { (0..N).map(|i| of((from * 3 + to + i % 2) as u32)).collect() };
    let mut got = Tensor::zeros(&dev, T::DTYPE, &[N]).map_err(e)?;
    if rank == 0 {
        for p in 1..world {
            comm.send(&Tensor::from_slice(&dev, &msg(0, p), &[N]).map_err(e)?, p).map_err(e)?;
        }
        for p in 1..world {
            comm.recv(&mut got, p).map_err(e)?;
            check("recv", rank, got.to_vec::<T>().map_err(e)?, msg(p, 0))?;
        }
    } else {
        comm.recv(&mut got, 0).map_err(e)?;
        check("recv", rank, got.to_vec::<T>().map_err(e)?, msg(0, rank))?;
        comm.send(&Tensor::from_slice(&dev, &msg(rank, 0), &[N]).map_err(e)?, 0).map_err(e)?;
    }
    comm.barrier().map_err(e)
}

/// Joins as `MP_RANK`; `MP_EXPECT` is `Kind:words in the message`, or several such separated
/// by `|` (whichever rank arrives first decides which error each gets).
fn join_child() -> Result<(), String> {
    let expect = var("MP_EXPECT");
    let fits = |e: &ruccl::CollectiveError| {
        expect
            .split('|')
            .filter_map(|x| x.split_once(':'))
            .any(|(kind, words)| format!("{:?}", e.kind()) == kind && e.to_string().contains(words))
    };
    match join(num("MP_RANK")) {
        Err(e) if fits(&e) => {
            println!("expected error: {e}");
            Ok(())
        }
        Ok(_) => Err(format!("joined, expected {expect}")),
        Err(e) => Err(format!("expected {expect}, got {:?}: {e}", e.kind())),
    }
}

/// Joins, passes a barrier, says so in `MP_MARK`, and waits to be killed.
fn victim_child() -> Result<(), String> {
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
    std::thread::sleep(CHILD_DEADLINE);
    Ok(())
}

/// Joins, passes a barrier, then all_reduces and all_gathers with a peer that gets killed: expects
/// `PeerLost` naming `MP_VICTIM` well before the timeout.
fn survivor_child() -> Result<(), String> {
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    check_transport()?;
    comm.barrier().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut t =
        Tensor::from_slice(&HostDevice::default(), &[1.0f32; 1 << 16], &[1 << 16]).map_err(|e| e.to_string())?;
    // An all_gather too: its messages (256 KiB) are lent where single copy is on, and the
    // ones lent to the victim are taken back when the op fails.
    let mut out = Tensor::zeros(&HostDevice::default(), ruccl::DType::F32, &[comm.world_size() << 16])
        .map_err(|e| e.to_string())?;
    let mut result = Ok(());
    for i in 0..1000 {
        result =
            if i % 2 == 0 { comm.all_reduce(&mut t, ReduceOp::Sum) } else { comm.all_gather_into_tensor(&mut out, &t) };
        if result.is_err() {
            break;
        }
    }
    let Err(e) = result else { return Err("every all_reduce succeeded with a killed peer".into()) };
    let named = e.context().peer == Some(victim) || e.to_string().contains(&format!("rank {victim}"));
    println!("after {:?}: {:?} {e}", started.elapsed(), e.kind());
    if e.kind() != ErrorKind::PeerLost || !named {
        return Err(format!("expected PeerLost naming rank {victim}, got {:?}: {e}", e.kind()));
    }
    if !e.to_string().contains("its process") {
        return Err(format!("a killed process is not called a dropped communicator: {e}"));
    }
    if started.elapsed() > Duration::from_secs(15) {
        return Err(format!("PeerLost came only after {:?}", started.elapsed()));
    }
    Ok(())
}

/// Joins, passes a barrier, then all_reduces with a peer that is alive but never calls it:
/// expects `Timeout` naming `MP_VICTIM`.
fn waiter_child() -> Result<(), String> {
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    let mut t = Tensor::from_slice(&HostDevice::default(), &[1.0f32; 64], &[64]).map_err(|e| e.to_string())?;
    match comm.all_reduce(&mut t, ReduceOp::Sum) {
        Err(e) if e.kind() == ErrorKind::Timeout && e.to_string().contains(&format!("rank {victim}")) => {
            println!("expected: {e}");
            Ok(())
        }
        Err(e) => Err(format!("expected a Timeout naming rank {victim}, got {:?}: {e}", e.kind())),
        Ok(()) => Err("an all_reduce without one rank succeeded".into()),
    }
}

/// Messages larger than a shared-memory record (streamed in pieces), many laps of the rings,
/// and a send and receive of 6 MiB each way between the first two ranks.
fn large_child() -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let comm = join(num("MP_RANK")).map_err(e)?;
    check_transport()?;
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let n = 4 << 20;
    let v = |r: usize, i: usize| ((r + i) % 7) as f32;
    for round in 0..3 {
        let mine: Vec<f32> = (0..n).map(|i| v(rank + round, i)).collect();
        let mut t = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.all_reduce(&mut t, ReduceOp::Sum).map_err(e)?;
        let got = t.to_vec::<f32>().map_err(e)?;
        if let Some(i) = (0..n).find(|&i| got[i] != (0..world).map(|r| v(r + round, i)).sum::<f32>()) {
            return Err(format!("all_reduce round {round}: element {i} is {}", got[i]));
        }
    }
    let m = 3 << 19;
    let msg: Vec<f32> = (0..m).map(|i| (i % 1000) as f32).collect();
    let mut got = Tensor::zeros(&dev, ruccl::DType::F32, &[m]).map_err(e)?;
    match rank {
        0 => {
            comm.send(&Tensor::from_slice(&dev, &msg, &[m]).map_err(e)?, 1).map_err(e)?;
            comm.recv(&mut got, 1).map_err(e)?;
        }
        1 => {
            comm.recv(&mut got, 0).map_err(e)?;
            comm.send(&got, 0).map_err(e)?;
        }
        _ => {}
    }
    if rank < 2 {
        check("6 MiB send/recv", rank, got.to_vec::<f32>().map_err(e)?, msg)?;
    }
    comm.barrier().map_err(e)
}

/// Messages just under and over the size that shared memory moves by single copy (128 KiB),
/// in chunks that are not a multiple of it: all_gather, broadcast and all_reduce, every
/// value checked, several ops on one communicator.
fn threshold_child() -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let comm = join(num("MP_RANK")).map_err(e)?;
    check_transport()?;
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let v = |r: usize, i: usize| ((r * 7 + i) % 13) as f32;
    for n in [(32 << 10) - 3, (32 << 10) + 5, 200_001] {
        let mine: Vec<f32> = (0..n).map(|i| v(rank, i)).collect();
        let input = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        let mut out = Tensor::zeros(&dev, ruccl::DType::F32, &[n * world]).map_err(e)?;
        comm.all_gather_into_tensor(&mut out, &input).map_err(e)?;
        let want: Vec<f32> = (0..world).flat_map(|r| (0..n).map(move |i| v(r, i))).collect();
        check(&format!("all_gather of {n}"), rank, out.to_vec::<f32>().map_err(e)?, want)?;
        let root = world - 1;
        let mut b = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.broadcast(&mut b, root).map_err(e)?;
        check(&format!("broadcast of {n}"), rank, b.to_vec::<f32>().map_err(e)?, (0..n).map(|i| v(root, i)).collect())?;
        let mut a = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.all_reduce(&mut a, ReduceOp::Sum).map_err(e)?;
        let want: Vec<f32> = (0..n).map(|i| (0..world).map(|r| v(r, i)).sum()).collect();
        check(&format!("all_reduce of {n}"), rank, a.to_vec::<f32>().map_err(e)?, want)?;
    }
    comm.barrier().map_err(e)
}

/// Moves large messages (lent, where single copy is on: 4 MiB chunks, far above its
/// threshold) round after round with a peer that gets killed in the middle of them. `MP_OP`
/// is `all_gather` (every rank lends to and reads from every other; alternating with a
/// broadcast from each rank in turn) or `p2p` (rank `MP_FROM` sends, the other receives).
/// The victim (`MP_VICTIM`) marks `MP_MARK` after a few rounds and goes on until killed;
/// every other rank expects `PeerLost` naming it, well before the timeout, then writes every
/// buffer it lent or read into (none may still be lent to the dead rank), and finds the
/// communicator refusing the next op.
fn streamer_child() -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(e)?;
    check_transport()?;
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let n = 2 << 20;
    let mine: Vec<f32> = (0..n).map(|i| ((rank + i) % 11) as f32).collect();
    let input = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, ruccl::DType::F32, &[world * n]).map_err(e)?;
    let mut b = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
    let from = num("MP_FROM");
    comm.barrier().map_err(e)?;
    let started = Instant::now();
    let mut result = Ok(());
    for round in 0..1000 {
        if rank == victim && round == 3 {
            File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
        }
        result = match var("MP_OP").as_str() {
            "all_gather" if round % 2 == 0 => comm.all_gather_into_tensor(&mut out, &input),
            "all_gather" => comm.broadcast(&mut b, round / 2 % world),
            "p2p" if rank == from => comm.send(&input, 1 - from),
            "p2p" => comm.recv(&mut b, from),
            op => return Err(format!("unknown MP_OP {op}")),
        };
        if result.is_err() {
            break;
        }
    }
    if rank == victim {
        return Err(format!("the victim was not killed: {result:?}"));
    }
    let Err(err) = result else { return Err("1000 rounds succeeded with a killed peer".into()) };
    println!("after {:?}: {:?} {err}", started.elapsed(), err.kind());
    let named = err.context().peer == Some(victim) || err.to_string().contains(&format!("rank {victim}"));
    if err.kind() != ErrorKind::PeerLost || !named {
        return Err(format!("expected PeerLost naming rank {victim}, got {:?}: {err}", err.kind()));
    }
    if !err.to_string().contains("its process") {
        return Err(format!("a killed process is not called a dropped communicator: {err}"));
    }
    if started.elapsed() > Duration::from_secs(15) {
        return Err(format!("PeerLost came only after {:?}", started.elapsed()));
    }
    // Nothing is left lent to the dead rank, nor being written: every buffer takes a write.
    let mut input = input;
    for (what, t) in [("the input", &mut input), ("the output", &mut out), ("the broadcast buffer", &mut b)] {
        let zeros = vec![0.0f32; t.numel()];
        t.copy_from_slice(&zeros).map_err(|err| format!("{what} cannot be written after the failure: {err}"))?;
    }
    match comm.all_gather_into_tensor(&mut out, &input) {
        Err(next) => println!("the next op: {:?} {next}", next.kind()),
        Ok(()) => return Err("an all_gather succeeded on a failed communicator".into()),
    }
    Ok(())
}

/// torchrun's variables: `Communicator::from_env`, an all_reduce, a barrier.
fn env_child() -> Result<(), String> {
    let comm = Communicator::from_env(HostDevice::default()).map_err(|e| e.to_string())?;
    check_transport()?;
    every_collective::<f32>(&comm, |v| v as f32)
}

// ---------------------------------------------------------------------------------------
// The parent side.

/// How the children's processes talk to each other.
#[derive(Clone, Copy, Debug)]
enum Transport {
    /// Shared memory (the default between processes of one host).
    Shm,
    /// Shared memory with ring copies only (`RUCCL_SHM_CMA=0`: no single-copy reads).
    ShmCopy,
    /// TCP (`RUCCL_SHM_DISABLE=1`).
    Tcp,
}

/// Children, killed (and reaped) when dropped.
struct Kids {
    kids: Vec<(String, Child, PathBuf)>,
    transport: Transport,
}

impl Drop for Kids {
    fn drop(&mut self) {
        for (_, c, log) in &mut self.kids {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&*log);
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let nonce: u64 = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    std::env::temp_dir().join(format!("ruccl-mp-{}-{name}-{nonce}", std::process::id()))
}

impl Kids {
    fn new(transport: Transport) -> Self {
        Kids { kids: Vec::new(), transport }
    }

    /// Starts this binary as a child with `role` and `env`.
    fn spawn(&mut self, name: &str, role: &str, env: &[(&str, String)]) {
        let log = scratch(name);
        let out = File::create(&log).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["child", "--exact", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env("RUCCL_TIMEOUT", "20")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        match self.transport {
            Transport::Shm => cmd.env("MP_SHM", "1").env_remove("RUCCL_SHM_DISABLE"),
            Transport::ShmCopy => cmd.env("MP_SHM", "1").env_remove("RUCCL_SHM_DISABLE").env("RUCCL_SHM_CMA", "0"),
            Transport::Tcp => cmd.env("MP_SHM", "0").env("RUCCL_SHM_DISABLE", "1"),
        };
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.kids.push((name.to_string(), cmd.spawn().unwrap(), log));
    }

    /// Stops `name` (`SIGSTOP`): it stays alive, its connections open, and sends nothing.
    fn stop(&mut self, name: &str) {
        let (_, c, _) = self.kids.iter_mut().find(|(n, ..)| n == name).unwrap();
        let ok = Command::new("kill").args(["-STOP", &c.id().to_string()]).status().unwrap();
        assert!(ok.success(), "kill -STOP failed");
    }

    fn kill(&mut self, name: &str) {
        let (_, c, _) = self.kids.iter_mut().find(|(n, ..)| n == name).unwrap();
        c.kill().unwrap();
    }

    /// Waits for every child; panics with their logs if one fails or the deadline passes
    /// (the children are then killed by `Drop`). `skip` names children not checked.
    fn wait(&mut self, skip: &[&str]) {
        let all: Vec<String> =
            self.kids.iter().map(|(n, ..)| n.clone()).filter(|n| !skip.contains(&n.as_str())).collect();
        self.wait_for(&all.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// Waits for the children named in `names` only, and checks them (the others are killed
    /// by `Drop`).
    fn wait_for(&mut self, names: &[&str]) {
        let deadline = Instant::now() + GROUP_DEADLINE;
        let mut failed = Vec::new();
        for (name, c, log) in &mut self.kids {
            if !names.contains(&name.as_str()) {
                continue;
            }
            let status = loop {
                match c.try_wait().unwrap() {
                    Some(s) => break Some(s),
                    None if Instant::now() > deadline => break None,
                    None => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            let text = std::fs::read_to_string(&*log).unwrap_or_default();
            let _ = std::fs::remove_file(&*log);
            if std::env::var_os("MP_SHOW").is_some() {
                println!("--- {name}: {status:?}\n{text}");
            }
            match status {
                Some(s) if s.success() && text.contains("child ok") => {}
                s => failed.push(format!("--- {name}: {s:?}\n{text}")),
            }
        }
        assert!(failed.is_empty(), "children failed:\n{}", failed.join("\n"));
    }
}

fn ranks_env(id: &UniqueId, world: usize, ranks: &[usize]) -> Vec<(&'static str, String)> {
    let list: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    vec![("MP_ID", id.to_string()), ("MP_WORLD", world.to_string()), ("MP_RANKS", list.join(","))]
}

fn one_rank_per_process(t: Transport, world: usize) {
    let id = UniqueId::new().unwrap();
    assert!(id.root_address().is_some(), "no rendezvous listener on this machine");
    let mut kids = Kids::new(t);
    for r in 0..world {
        kids.spawn(&format!("rank{r}"), "collectives", &ranks_env(&id, world, &[r]));
    }
    kids.wait(&[]);
}

fn two_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 2);
}

fn three_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 3);
}

fn four_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 4);
}

fn large_messages_cross_processes(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        // Messages of up to 6 MiB: larger than a shared-memory record.
        env.extend([("MP_RANK", r.to_string()), ("RUCCL_CHUNK_BYTES", (6 << 20).to_string())]);
        kids.spawn(&format!("rank{r}"), "large", &env);
    }
    kids.wait(&[]);
}

fn sizes_around_the_single_copy_threshold(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([("MP_RANK", r.to_string()), ("RUCCL_CHUNK_BYTES", "300004".to_string())]);
        kids.spawn(&format!("rank{r}"), "threshold", &env);
    }
    kids.wait(&[]);
}

fn two_processes_of_two_ranks_run_every_collective(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    kids.spawn("ranks0,1", "collectives", &ranks_env(&id, 4, &[0, 1]));
    kids.spawn("ranks2,3", "collectives", &ranks_env(&id, 4, &[2, 3]));
    kids.wait(&[]);
}

fn a_killed_peer_is_named_in_peer_lost(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mark = scratch("mark");
    let mut kids = Kids::new(t);
    let env = |r: usize| {
        let mut v = ranks_env(&id, 3, &[r]);
        v.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), ("MP_MARK", mark.display().to_string())]);
        v
    };
    kids.spawn("rank0", "survivor", &env(0));
    kids.spawn("rank1", "victim", &env(1));
    kids.spawn("rank2", "survivor", &env(2));
    let deadline = Instant::now() + GROUP_DEADLINE;
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the victim never passed its barrier");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    kids.kill("rank1");
    kids.wait(&["rank1"]);
    let _ = std::fs::remove_file(mark);
}

/// Starts `world` ranks that stream large messages (`op`, see `streamer_child`; `from` sends
/// in `p2p`), waits until `victim` has done a few rounds, kills it at a varying moment of the
/// next ones, and checks the survivors.
fn kill_mid_stream(t: Transport, world: usize, op: &str, from: usize, victim: usize) {
    let id = UniqueId::new().unwrap();
    let mark = scratch("mark");
    let mut kids = Kids::new(t);
    for r in 0..world {
        let mut env = ranks_env(&id, world, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_OP", op.to_string()),
            ("MP_FROM", from.to_string()),
            ("MP_VICTIM", victim.to_string()),
            ("MP_MARK", mark.display().to_string()),
            ("RUCCL_CHUNK_BYTES", (4 << 20).to_string()),
        ]);
        kids.spawn(&format!("rank{r}"), "streamer", &env);
    }
    let deadline = Instant::now() + GROUP_DEADLINE;
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the victim never did its first rounds");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A rank spends most of a round in reads of 4 MiB: a kill at any moment likely lands in one.
    let jitter = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_micros() % 20_000;
    std::thread::sleep(Duration::from_micros(u64::from(jitter)));
    kids.kill(&format!("rank{victim}"));
    kids.wait(&[&format!("rank{victim}")]);
    let _ = std::fs::remove_file(mark);
}

/// A peer killed while all_gathers and broadcasts of 8 MiB per rank cross the 3 processes:
/// the survivors were reading its lent memory, and it theirs.
fn a_peer_killed_mid_all_gather_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 3, "all_gather", 0, 1);
}

/// A sender killed while the receiver reads what it lent.
fn a_sender_killed_mid_send_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 2, "p2p", 1, 1);
}

/// A receiver killed while it reads the sender's lent memory: the sender's buffer is free again.
fn a_receiver_killed_mid_recv_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 2, "p2p", 0, 1);
}

/// A peer process that stops answering without closing its connections (stopped with
/// `SIGSTOP`, as a hung host would): no heartbeat comes for `RUCCL_PEER_SILENCE` (1 s here),
/// and the survivor fails with `PeerLost` naming it, long before the op's timeout (20 s).
fn a_stopped_peer_is_named_in_peer_lost(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mark = scratch("mark");
    let mut kids = Kids::new(t);
    for (r, role) in [(0, "survivor"), (1, "victim")] {
        let mut env = ranks_env(&id, 2, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_VICTIM", "1".into()),
            ("MP_MARK", mark.display().to_string()),
            ("RUCCL_PEER_SILENCE", "1".into()),
        ]);
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    let deadline = Instant::now() + GROUP_DEADLINE;
    while !mark.exists() {
        assert!(Instant::now() < deadline, "the victim never passed its barrier");
        std::thread::sleep(Duration::from_millis(20));
    }
    kids.stop("rank1");
    kids.wait_for(&["rank0"]);
    let _ = std::fs::remove_file(mark);
}

fn a_silent_peer_is_named_in_the_timeout(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mark = scratch("mark");
    let mut kids = Kids::new(t);
    for (r, role) in [(0, "waiter"), (1, "victim")] {
        let mut env = ranks_env(&id, 2, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_VICTIM", "1".into()),
            ("MP_MARK", mark.display().to_string()),
            ("RUCCL_TIMEOUT", "2".into()),
        ]);
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    kids.wait_for(&["rank0"]);
    let _ = std::fs::remove_file(mark);
}

#[test]
fn a_rank_that_never_comes_is_named_in_the_timeout() {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(Transport::Shm);
    for r in 0..2 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_EXPECT", "Timeout:rank(s) 2 never called".into()),
            ("RUCCL_TIMEOUT", "2".into()),
        ]);
        kids.spawn(&format!("rank{r}"), "join", &env);
    }
    kids.wait(&[]);
}

/// The rank that comes second is refused; the first waits for a rank that never comes.
const WORLD_MISMATCH: &str = "InvalidArgument:differs from the|Timeout:never called";

#[test]
fn rendezvous_errors_cross_processes() {
    let mut kids = Kids::new(Transport::Shm);
    let mut pair = |name: &str, a: Vec<(&'static str, String)>, b: Vec<(&'static str, String)>| {
        let id = UniqueId::new().unwrap();
        for (i, extra) in [a, b].into_iter().enumerate() {
            let mut env = vec![("MP_ID", id.to_string()), ("RUCCL_TIMEOUT", "3".into())];
            env.extend(extra);
            kids.spawn(&format!("{name}{i}"), "join", &env);
        }
    };
    let s = |x: &str| x.to_string();
    pair(
        "duplicate",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:joined it twice"))],
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:joined it twice"))],
    );
    pair(
        "world",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s(WORLD_MISMATCH))],
        vec![("MP_WORLD", s("3")), ("MP_RANK", s("1")), ("MP_EXPECT", s(WORLD_MISMATCH))],
    );
    pair(
        "config",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:chunk"))],
        vec![
            ("MP_WORLD", s("2")),
            ("MP_RANK", s("1")),
            ("RUCCL_CHUNK_BYTES", s("8192")),
            ("MP_EXPECT", s("InvalidArgument:chunk")),
        ],
    );
    kids.wait(&[]);
}

fn the_listener_survives_garbage_and_serves_real_peers(t: Transport) {
    use std::io::Write;
    let id = UniqueId::new().unwrap();
    let root = id.root_address().unwrap();
    let mut silent = std::net::TcpStream::connect(root).unwrap();
    for bytes in [b"GET / HTTP/1.1\r\n\r\n".repeat(8), {
        let mut h = b"RCCL".to_vec();
        h.extend_from_slice(&[9, 0]);
        h.resize(96, 0);
        h
    }] {
        let mut s = std::net::TcpStream::connect(root).unwrap();
        s.write_all(&bytes).unwrap();
    }
    silent.write_all(b"RC").unwrap();
    let mut kids = Kids::new(t);
    for r in 0..2 {
        kids.spawn(&format!("rank{r}"), "collectives", &ranks_env(&id, 2, &[r]));
    }
    kids.wait(&[]);
}

fn from_env_with_torchrun_variables(t: Transport) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let env = [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "3".to_string()),
            ("LOCAL_RANK", r.to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
        ];
        kids.spawn(&format!("rank{r}"), "env", &env);
    }
    kids.wait(&[]);
}

/// The cases with large messages again with ring copies only (`RUCCL_SHM_CMA=0`), where the
/// default moves them by single copy, and a failure without lent messages.
mod shm_copy {
    #[test]
    fn large_messages_cross_processes() {
        super::large_messages_cross_processes(super::Transport::ShmCopy);
    }
    #[test]
    fn sizes_around_the_single_copy_threshold() {
        super::sizes_around_the_single_copy_threshold(super::Transport::ShmCopy);
    }
    #[test]
    fn a_killed_peer_is_named_in_peer_lost() {
        super::a_killed_peer_is_named_in_peer_lost(super::Transport::ShmCopy);
    }
    #[test]
    fn a_peer_killed_mid_all_gather_is_named_in_peer_lost() {
        super::a_peer_killed_mid_all_gather_is_named_in_peer_lost(super::Transport::ShmCopy);
    }
}

/// Stamps the cases that move data out once per transport.
macro_rules! per_transport {
    ($($case:ident),* $(,)?) => {
        mod shm {
            $(#[test]
            fn $case() {
                super::$case(super::Transport::Shm);
            })*
        }
        mod tcp {
            $(#[test]
            fn $case() {
                super::$case(super::Transport::Tcp);
            })*
        }
    };
}

per_transport!(
    large_messages_cross_processes,
    sizes_around_the_single_copy_threshold,
    two_processes_run_every_collective,
    three_processes_run_every_collective,
    four_processes_run_every_collective,
    two_processes_of_two_ranks_run_every_collective,
    a_killed_peer_is_named_in_peer_lost,
    a_peer_killed_mid_all_gather_is_named_in_peer_lost,
    a_sender_killed_mid_send_is_named_in_peer_lost,
    a_receiver_killed_mid_recv_is_named_in_peer_lost,
    a_stopped_peer_is_named_in_peer_lost,
    a_silent_peer_is_named_in_the_timeout,
    the_listener_survives_garbage_and_serves_real_peers,
    from_env_with_torchrun_variables,
);
