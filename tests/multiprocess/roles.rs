//! The child side: how a child reads what its parent asked for (`MP_*` variables), joins,
//! and checks its transport; and the roles that run collectives and check every value
//! (`collectives`, `env`) or expect a rendezvous error (`join`).

use std::fmt::Debug;
use std::time::{Duration, Instant};

use half::bf16;
use ruccl::{Communicator, Device, Element, HostDevice, ReduceOp, Tensor, UniqueId};

use super::N;

pub(super) fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_default()
}

pub(super) fn num(k: &str) -> usize {
    var(k).parse().unwrap_or_else(|_| panic!("{k} is not a number: {:?}", var(k)))
}

pub(super) fn join(rank: usize) -> Result<Communicator<HostDevice>, ruccl::CollectiveError> {
    let id: UniqueId = var("MP_ID").parse()?;
    Communicator::new(HostDevice::default(), num("MP_WORLD"), id, rank)
}

/// Whether a shared-memory reader thread runs in this process (threads are named).
pub(super) fn shm_threads() -> bool {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "ruccl-shm-r"))
}

/// Checks that the transport is the one the parent asked for (`MP_SHM`: 1 or 0), after
/// joining a communicator whose peers are in other processes.
pub(super) fn check_transport() -> Result<(), String> {
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
    let want = var("MP_SLOTS") == "1";
    if slots_mapped() != want {
        return Err(format!("exchange slots in use: {}, asked for: {want}", !want));
    }
    Ok(())
}

/// Checks how `comm`'s rank reaches each peer: in place within this process (`local`, the
/// ranks of this process), through shared memory or TCP to the others, as `MP_SHM` asks
/// (TCP to the ranks `MP_NO_SHM` lists, whose processes said no to shared memory).
pub(super) fn check_links(comm: &Communicator<HostDevice>, local: &[usize]) -> Result<(), String> {
    use ruccl::PeerLink;
    let no_shm: Vec<usize> = var("MP_NO_SHM").split(',').filter_map(|r| r.parse().ok()).collect();
    let shm = var("MP_SHM") == "1" && cfg!(target_os = "linux");
    for peer in 0..comm.world_size() {
        let want = match peer {
            p if p == comm.rank() => PeerLink::Itself,
            p if local.contains(&p) => PeerLink::InProcess,
            p if shm && !no_shm.contains(&p) => PeerLink::SharedMemory,
            _ => PeerLink::Tcp,
        };
        let got = comm.peer_link(peer).map_err(|e| e.to_string())?;
        if got != want {
            return Err(format!("rank {} reaches rank {peer} {got}, expected {want}", comm.rank()));
        }
    }
    Ok(())
}

/// Whether this process maps a host's exchange slots (`memfd:ruccl-slots`).
pub(super) fn slots_mapped() -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|m| m.contains("memfd:ruccl-slots"))
}

/// Runs every collective on every local rank (`MP_RANKS`, comma-separated), one thread each.
pub(super) fn collectives_child() -> Result<(), String> {
    let ranks: Vec<usize> = var("MP_RANKS").split(',').map(|r| r.parse().unwrap()).collect();
    let threads: Vec<_> = ranks
        .iter()
        .map(|&rank| {
            let local = ranks.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let comm = join(rank).map_err(|e| e.to_string())?;
                check_transport()?;
                check_links(&comm, &local)?;
                every_collective::<f32, _>(&comm, |v| v as f32)?;
                every_collective::<i64, _>(&comm, |v| v as i64)?;
                every_collective::<bf16, _>(&comm, |v| bf16::from_f64(v as f64))?;
                every_collective::<u8, _>(&comm, |v| v as u8)?;
                queued_ops(&comm)?;
                async_ring(&comm)?;
                // A split across processes: even and odd ranks, each a group of its own.
                let mine: Vec<usize> = (0..comm.world_size()).filter(|r| r % 2 == rank % 2).collect();
                let child = comm.split_from(&mine).map_err(|e| e.to_string())?.ok_or("left out of the split")?;
                every_collective::<f32, _>(&child, |v| v as f32)?;
                drop(child);
                comm.barrier().map_err(|e| e.to_string())
            })
        })
        .collect();
    threads.into_iter().try_for_each(|t| t.join().map_err(|_| "a rank panicked".to_string())?)
}

/// Non-blocking small ops queued back to back (run by the rank's progress thread, each
/// behind the last: exchanged through an `OpRun` where slots are on), then a blocking one
/// behind them; every result checked.
fn queued_ops(comm: &Communicator<HostDevice>) -> Result<(), String> {
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let e = |e: ruccl::CollectiveError| e.to_string();
    let ts: Vec<Tensor<HostDevice>> = (0..12)
        .map(|k| Tensor::from_slice(&dev, &[(rank + k) as f32; 5], &[5]))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let works: Vec<_> = ts
        .iter()
        .enumerate()
        .map(
            |(k, t)| {
                if k % 3 == 2 { comm.broadcast_async(t, k % world) } else { comm.all_reduce_async(t, ReduceOp::Sum) }
            },
        )
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let mut last = Tensor::from_slice(&dev, &[1.0f32; 3], &[3]).map_err(e)?;
    comm.all_reduce(&mut last, ReduceOp::Sum).map_err(e)?;
    for w in works {
        w.wait().map_err(e)?;
    }
    for (k, t) in ts.iter().enumerate() {
        let want = if k % 3 == 2 { (k % world + k) as f32 } else { (0..world).map(|r| (r + k) as f32).sum() };
        check("a queued op", rank, t.to_vec::<f32>().map_err(e)?, vec![want; 5])?;
    }
    check("an op behind queued ones", rank, last.to_vec::<f32>().map_err(e)?, vec![world as f32; 3])
}

/// torch's ring of `isend` to the next rank then `irecv` from the previous, small and large
/// (in chunks between processes), two rounds back to back; every result checked.
fn async_ring(comm: &Communicator<HostDevice>) -> Result<(), String> {
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let e = |e: ruccl::CollectiveError| e.to_string();
    let (next, prev) = ((rank + 1) % world, (rank + world - 1) % world);
    for n in [5, 300_000] {
        let x = Tensor::from_slice(&dev, &vec![rank as f32; n], &[n]).map_err(e)?;
        let ys: Vec<_> =
            (0..2).map(|_| Tensor::zeros(&dev, ruccl::DType::F32, &[n])).collect::<Result<_, _>>().map_err(e)?;
        let works: Vec<_> = ys
            .iter()
            .map(|y| Ok((comm.send_async(&x, next)?, comm.recv_async(y, prev)?)))
            .collect::<Result<_, ruccl::CollectiveError>>()
            .map_err(e)?;
        for ((s, r), y) in works.iter().zip(&ys) {
            r.wait().map_err(e)?;
            s.wait().map_err(e)?;
            check("an isend/irecv ring", rank, y.to_vec::<f32>().map_err(e)?, vec![prev as f32; n])?;
        }
    }
    Ok(())
}

pub(super) fn check<T: PartialEq + Debug>(what: &str, rank: usize, got: Vec<T>, want: Vec<T>) -> Result<(), String> {
    if got == want { Ok(()) } else { Err(format!("{what} on rank {rank}: got {got:?}, want {want:?}")) }
}

/// Every collective with small integer values (exact in every dtype), checked.
pub(super) fn every_collective<T: Element + PartialEq + Debug, D: Device>(
    comm: &Communicator<D>,
    of: fn(u32) -> T,
) -> Result<(), String> {
    let (rank, world, dev) = (comm.rank(), comm.world_size(), comm.device().clone());
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

    // Uneven blocks: rank `from` sends rank `to` (from + 2 to) % 4 elements (none for some).
    let len = |from: usize, to: usize| (from + 2 * to) % 4;
    let input_splits: Vec<usize> = (0..world).map(|to| len(rank, to)).collect();
    let output_splits: Vec<usize> = (0..world).map(|from| len(from, rank)).collect();
    let sends: Vec<T> = (0..world).flat_map(|to| (0..len(rank, to)).map(move |i| of(f(rank, to, i)))).collect();
    let input = Tensor::from_slice(&dev, &sends, &[sends.len()]).map_err(e)?;
    let mut out = Tensor::zeros(&dev, T::DTYPE, &[output_splits.iter().sum()]).map_err(e)?;
    comm.all_to_all_single_with_splits(&mut out, &input, &output_splits, &input_splits).map_err(e)?;
    let want = (0..world).flat_map(|from| (0..len(from, rank)).map(move |i| of(f(from, rank, i)))).collect();
    check("all_to_all_single_with_splits", rank, out.to_vec::<T>().map_err(e)?, want)?;

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
pub(super) fn join_child() -> Result<(), String> {
    expect_error(join(num("MP_RANK")).map(|_| ()))
}

/// `r` is the error `MP_EXPECT` describes.
fn expect_error(r: ruccl::Result<()>) -> Result<(), String> {
    let expect = var("MP_EXPECT");
    let fits = |e: &ruccl::CollectiveError| {
        expect
            .split('|')
            .filter_map(|x| x.split_once(':'))
            .any(|(kind, words)| format!("{:?}", e.kind()) == kind && e.to_string().contains(words))
    };
    match r {
        Err(e) if fits(&e) => {
            println!("expected error: {e}");
            Ok(())
        }
        Ok(()) => Err(format!("joined, expected {expect}")),
        Err(e) => Err(format!("expected {expect}, got {:?}: {e}", e.kind())),
    }
}

/// `Communicator::from_env` with variables that do not describe one job: the error
/// `MP_EXPECT` describes.
pub(super) fn env_join_child() -> Result<(), String> {
    expect_error(Communicator::from_env(HostDevice::default()).map(|_| ()))
}

/// torchrun's variables: `Communicator::from_env` and a barrier, then the group dropped and
/// formed again (rank 0, the root, drops its communicator a second after the others), and
/// every collective on the new one.
pub(super) fn env_again_child() -> Result<(), String> {
    let comm = Communicator::from_env(HostDevice::default()).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    if comm.rank() == 0 {
        std::thread::sleep(Duration::from_secs(1));
    }
    drop(comm);
    let comm = Communicator::from_env(HostDevice::default()).map_err(|e| format!("forming the group again: {e}"))?;
    every_collective::<f32, _>(&comm, |v| v as f32)
}

/// torchrun's variables, shared progress or not (`RUCCL_SHARED_PROGRESS`): the root of a
/// small broadcast returns at once (it runs ahead: the others read its part later) and its
/// process exits; the others, 300 ms late, still get its data. With shared progress the
/// dropped communicator's goodbye waited for the progress thread, the process exited first,
/// and the others failed with `PeerLost` "without a goodbye" (a stranger's review).
pub(super) fn eager_exit_child() -> Result<(), String> {
    let dev = HostDevice::default();
    let comm = Communicator::from_env(dev).map_err(|e| e.to_string())?;
    let r = comm.rank();
    let mut t = Tensor::from_slice(&dev, &[r as f32 + 1.0; 4], &[4]).map_err(|e| e.to_string())?;
    if r != 0 {
        std::thread::sleep(Duration::from_millis(300));
    }
    comm.broadcast(&mut t, 0).map_err(|e| format!("rank {r}: {e}"))?;
    let got = t.to_vec::<f32>().map_err(|e| e.to_string())?;
    if got != [1.0; 4] {
        return Err(format!("rank {r}: broadcast gave {got:?}"));
    }
    Ok(())
}

/// torchrun's variables: the group formed, used and dropped twice in a row, at once (no rank
/// waits for another before forming it again), shared progress or not. With shared progress
/// the old id was let go only when the progress thread retired the rank: the second
/// `from_env` was refused as "in use by a communicator that still exists".
pub(super) fn env_twice_child() -> Result<(), String> {
    for round in 0..3 {
        let comm = Communicator::from_env(HostDevice::default()).map_err(|e| format!("round {round}: {e}"))?;
        let dev = *comm.device();
        let mut t = Tensor::from_slice(&dev, &[1.0f32; 4], &[4]).map_err(|e| e.to_string())?;
        comm.all_reduce(&mut t, ReduceOp::Sum).map_err(|e| format!("round {round}: {e}"))?;
        let want = [comm.world_size() as f32; 4];
        if t.to_vec::<f32>().map_err(|e| e.to_string())? != want {
            return Err(format!("round {round}: all_reduce gave {:?}", t.to_vec::<f32>()));
        }
    }
    Ok(())
}

/// torchrun's variables: `Communicator::from_env`, an all_reduce, a barrier.
pub(super) fn env_child() -> Result<(), String> {
    let comm = Communicator::from_env(HostDevice::default()).map_err(|e| e.to_string())?;
    check_transport()?;
    every_collective::<f32, _>(&comm, |v| v as f32)
}

/// Makes a `UniqueId`, writes it to `MP_ID_FILE`, and exits once `MP_MARK` exists (the
/// ranks formed their group with it): a helper process that made the id and is gone.
pub(super) fn id_maker_child() -> Result<(), String> {
    let id = UniqueId::new().map_err(|e| e.to_string())?;
    let path = var("MP_ID_FILE");
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, id.to_string()).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &path).map_err(|e| e.to_string())?;
    wait_until(|| std::path::Path::new(&var("MP_MARK")).exists(), "the ranks never formed their group")
}

/// Waits (up to 20 s) until `done`, else fails saying `never`.
fn wait_until(done: impl Fn() -> bool, never: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        if Instant::now() > deadline {
            return Err(never.to_string());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// One rank (`MP_RANK`) of 3 whose id's maker exits once they formed (rank 0 creates
/// `MP_MARK`): once its listener is gone, every rank splits off a child of all three and
/// sums on it; then ranks 1 and 2 split off a child of two, rank 0 left out and exiting.
pub(super) fn orphan_split_child() -> Result<(), String> {
    let rank = num("MP_RANK");
    let id: UniqueId = var("MP_ID").parse().map_err(|e: ruccl::CollectiveError| e.to_string())?;
    let root = id.root_address().ok_or("the id has no root address")?;
    let comm = join(rank).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    if rank == 0 {
        std::fs::write(var("MP_MARK"), b"").map_err(|e| e.to_string())?;
    }
    let gone = || std::net::TcpStream::connect_timeout(&root, Duration::from_millis(200)).is_err();
    wait_until(gone, "the id maker's listener never went")?;
    let sum = |c: &Communicator<HostDevice>, want: f32| -> Result<(), String> {
        let mut t = Tensor::from_slice(c.device(), &[1.0f32; 3], &[3]).map_err(|e| e.to_string())?;
        c.all_reduce(&mut t, ReduceOp::Sum).map_err(|e| format!("rank {rank}: {e}"))?;
        match t.to_vec::<f32>().map_err(|e| e.to_string())? {
            v if v == [want; 3] => Ok(()),
            v => Err(format!("rank {rank}: all_reduce gave {v:?}")),
        }
    };
    let all = comm.split_all().map_err(|e| format!("rank {rank}: split_all: {e}"))?;
    sum(&all, 3.0)?;
    let list: &[usize] = if rank == 0 { &[] } else { &[1, 2] };
    match comm.split_from(list).map_err(|e| format!("rank {rank}: split_from: {e}"))? {
        Some(pair) => sum(&pair, 2.0),
        None if rank == 0 => Ok(()),
        None => Err(format!("rank {rank}: left out of its split")),
    }
}
