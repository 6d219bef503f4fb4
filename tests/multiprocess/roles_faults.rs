//! The child roles of the fault cases: a victim that waits to be killed or stopped, and the
//! survivors that expect `PeerLost` or `Timeout` naming it.

use std::fs::File;
use std::time::{Duration, Instant};

use ruccl::{ErrorKind, HostDevice, ReduceOp, Tensor};

use super::CHILD_DEADLINE;
use super::roles::{check_transport, join, num, var};

/// Joins, passes a barrier, says so in `MP_MARK`, and waits to be killed.
pub(super) fn victim_child() -> Result<(), String> {
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
    std::thread::sleep(CHILD_DEADLINE);
    Ok(())
}

/// Joins, passes a barrier, then all_reduces and all_gathers (of 256 KiB, or 32 bytes with
/// `MP_SMALL=1`) with a peer that gets killed: expects
/// `PeerLost` naming `MP_VICTIM` well before the timeout.
pub(super) fn survivor_child() -> Result<(), String> {
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    check_transport()?;
    comm.barrier().map_err(|e| e.to_string())?;
    let started = Instant::now();
    // 256 KiB, or with `MP_SMALL` set 32 bytes (small ops: exchanged where slots are on).
    let n = if var("MP_SMALL").is_empty() { 1 << 16 } else { 8 };
    let mut t = Tensor::from_slice(&HostDevice::default(), &vec![1.0f32; n], &[n]).map_err(|e| e.to_string())?;
    // An all_gather too: its messages (256 KiB) are lent where single copy is on, and the
    // ones lent to the victim are taken back when the op fails.
    let mut out = Tensor::zeros(&HostDevice::default(), ruccl::DType::F32, &[comm.world_size() * n])
        .map_err(|e| e.to_string())?;
    let mut result = Ok(());
    // `MP_SMALL=bcast`: 100 broadcasts of 32 bytes from rank 0, one every 20 ms.
    let bcast = var("MP_SMALL") == "bcast";
    for i in 0..if bcast { 100 } else { 1000 } {
        result = if bcast {
            std::thread::sleep(Duration::from_millis(20));
            comm.broadcast(&mut t, 0)
        } else if i % 2 == 0 {
            comm.all_reduce(&mut t, ReduceOp::Sum)
        } else {
            comm.all_gather_into_tensor(&mut out, &t)
        };
        if result.is_err() {
            break;
        }
    }
    let Err(e) = result else { return Err("every op succeeded with a killed peer".into()) };
    peer_lost(&e, victim, started)
}

/// Checks that `e` is the `PeerLost` a killed `victim` must cause: naming it (context peer
/// or message), calling it a lost process, and well before the timeout (`started`: when the
/// ops began).
fn peer_lost(e: &ruccl::CollectiveError, victim: usize, started: Instant) -> Result<(), String> {
    println!("after {:?}: {:?} {e}", started.elapsed(), e.kind());
    let named = e.context().peer == Some(victim) || e.to_string().contains(&format!("rank {victim}"));
    if e.kind() != ErrorKind::PeerLost || !named {
        return Err(format!("expected PeerLost naming rank {victim}, got {:?}: {e}", e.kind()));
    }
    if !e.to_string().contains("its process") {
        return Err(format!("a killed process is not called a dropped communicator: {e}"));
    }
    // `MP_SILENT=1`: the victim was stopped, so the survivor lost it to silence, and says so,
    // with the limit in effect (`RUCCL_PEER_SILENCE=1`).
    let silent = e.to_string().contains("longer than the peer-silence limit, 1s here (RUCCL_PEER_SILENCE");
    if silent != (var("MP_SILENT") == "1") {
        return Err(format!("lost to silence: {silent}, expected {}: {e}", var("MP_SILENT") == "1"));
    }
    if started.elapsed() > Duration::from_secs(15) {
        return Err(format!("PeerLost came only after {:?}", started.elapsed()));
    }
    Ok(())
}

/// Joins, passes a barrier, then all_reduces with a peer that is alive but never calls it:
/// expects `Timeout` naming `MP_VICTIM`, with what the victim's process answered when asked
/// for its flight recorder (idle since its barrier, op #0) in the message and the report.
/// Joins, passes a barrier, then all_reduces with a peer that gets stopped (`SIGSTOP`) and
/// whose silence limit is far off: expects `Timeout` naming `MP_VICTIM`, on time (within a
/// tenth of the timeout: the peers asked for their flight recorders first, and the stopped
/// one never answers).
pub(super) fn stopped_waiter_child() -> Result<(), String> {
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    let mut t = Tensor::from_slice(&HostDevice::default(), &[1.0f32; 64], &[64]).map_err(|e| e.to_string())?;
    // `MP_DELAY_MS`: come to the op late, so the victim is already waiting inside it.
    std::thread::sleep(Duration::from_millis(var("MP_DELAY_MS").parse().unwrap_or(0)));
    let started = Instant::now();
    // `MP_BIG=1`: a 1 MiB all_gather, whose ring has a rank wait for one that waits for
    // the victim (the victim must be blamed at the end of that chain).
    let result = if var("MP_BCAST") == "1" {
        big_broadcast(&comm)
    } else if var("MP_BIG") == "1" {
        let n = 1 << 18;
        let x = Tensor::from_slice(&HostDevice::default(), &vec![1.0f32; n], &[n]).map_err(|e| e.to_string())?;
        let mut out = Tensor::zeros(&HostDevice::default(), ruccl::DType::F32, &[comm.world_size() * n])
            .map_err(|e| e.to_string())?;
        comm.all_gather_into_tensor(&mut out, &x)
    } else {
        comm.all_reduce(&mut t, ReduceOp::Sum)
    };
    let (took, timeout) = (started.elapsed(), comm.config().timeout());
    match result {
        Err(e) if e.kind() == ErrorKind::Timeout && e.context().peer == Some(victim) => {
            println!("after {took:?} (timeout {timeout:?}): {e}");
            if took > timeout + timeout / 10 {
                return Err(format!("the Timeout came {took:?} after the op began, with a timeout of {timeout:?}"));
            }
            Ok(())
        }
        // `MP_SILENCE_FAILS=1`: lost to the peer-silence limit, long before the deadline.
        Err(e)
            if var("MP_SILENCE_FAILS") == "1"
                && e.kind() == ErrorKind::PeerLost
                && e.context().peer == Some(victim) =>
        {
            println!("after {took:?}: {e}");
            Ok(())
        }
        Ok(()) => Err("the all_reduce succeeded with a stopped peer".into()),
        Err(e) => Err(format!("expected Timeout naming rank {victim}, got {:?}: {e}", e.kind())),
    }
}

/// Joins, passes a barrier, says so (`MP_MARK`) and stops itself (`SIGSTOP`) just before
/// the next op; continued once its peer failed that op (a small all_reduce, as
/// [`stopped_waiter_child`]'s) at its deadline, it runs it at once: which must fail too, not
/// finish from the part its peer published before it gave up (the peer's `Abort` frame
/// waits in the socket for this process's reader thread, continued at the same moment).
/// `MP_BCAST=1`: a 1 MiB broadcast from rank 0, whose root waits until its peers took
/// their messages (a small op, or an all_reduce, could end on the root, or on a rank that
/// sent its part, with its peer stopped).
fn big_broadcast(comm: &ruccl::Communicator<HostDevice>) -> ruccl::Result<()> {
    let n = 1 << 18;
    let mut x = Tensor::from_slice(&HostDevice::default(), &vec![comm.rank() as f32; n], &[n])?;
    comm.broadcast(&mut x, 0)
}

pub(super) fn late_child() -> Result<(), String> {
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    let mut t = Tensor::from_slice(&HostDevice::default(), &[1.0f32; 64], &[64]).map_err(|e| e.to_string())?;
    File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
    // SAFETY: `raise` takes a signal number and touches no memory; SIGSTOP stops the whole
    // process, and the call returns once it is continued. (`kill -STOP` run as a child
    // process sometimes left this one running.)
    let stop = || match unsafe { libc::raise(libc::SIGSTOP) } {
        0 => Ok(()),
        _ => Err(format!("raise(SIGSTOP) failed: {}", std::io::Error::last_os_error())),
    };
    // `MP_INSIDE=1`: stopped while it waits inside the op (its peer comes late), and
    // continued after its peer failed the op at its deadline and left: the deadline passed
    // while it was stopped, and the news of the failure sits unread on its connection.
    let inside = var("MP_INSIDE") == "1";
    let stopper = inside.then(|| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            stop()
        })
    });
    if !inside {
        stop()?;
    }
    let result = if var("MP_BCAST") == "1" { big_broadcast(&comm) } else { comm.all_reduce(&mut t, ReduceOp::Sum) };
    if let Some(s) = stopper {
        s.join().map_err(|_| "the stopping thread panicked".to_string())??;
    }
    // `MP_SILENCE_FAILS=1`: the peer failed at the silence limit, about when this rank was
    // continued (this process may have been stopped for less than a stall).
    let silence = var("MP_SILENCE_FAILS") == "1";
    match result {
        // Over TCP the peer's whole message may be in this rank's socket when it is continued,
        // before its own deadline: it finishes the op from it (the data is right) and fails at
        // the next one (an open item: the peer's abort follows in the same socket).
        Ok(()) if silence && var("MP_SHM") != "1" => {
            println!("Ok: the peer's message had arrived whole");
            Ok(())
        }
        Ok(()) => Err("the late rank's all_reduce returned Ok, while its peer had failed it".into()),
        Err(e) if e.context().seq.is_some_and(|s| s != 1) => Err(format!("an error about another op: {e}")),
        // Its own deadline passed too, but the peer did not hold the op up: it failed first.
        // Over TCP its abort may never reach this rank (stuck behind data in a full socket
        // when it left): then the error says this process stalled, or only that the peer's
        // connection closed. Through shared memory it never waits behind data.
        Err(e) if silence && var("MP_SHM") == "1" && !e.to_string().contains("rank 0 failed first") => {
            Err(format!("expected the peer's failure (rank 0 failed first), got {:?}: {e}", e.kind()))
        }
        Err(e)
            if inside
                && !silence
                && !e.to_string().contains("rank 0 failed first")
                && !e.to_string().contains("did not run for") =>
        {
            Err(format!("expected the peer's failure (rank 0 failed first), got {:?}: {e}", e.kind()))
        }
        Err(e) => {
            println!("{:?}: {e}", e.kind());
            Ok(())
        }
    }
}

pub(super) fn waiter_child() -> Result<(), String> {
    let victim = num("MP_VICTIM");
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    comm.barrier().map_err(|e| e.to_string())?;
    let mut t = Tensor::from_slice(&HostDevice::default(), &[1.0f32; 64], &[64]).map_err(|e| e.to_string())?;
    let answered = format!("rank {victim}: (another process) idle; last finished op #0 barrier");
    // The slow wait's warnings (`RUCCL_WARN_AFTER`) ask the victim's process too, and name it.
    #[cfg(feature = "tracing")]
    let log = crate::capture::Capture::default();
    #[cfg(feature = "tracing")]
    let result = log.during(|| comm.all_reduce(&mut t, ReduceOp::Sum));
    #[cfg(not(feature = "tracing"))]
    let result = comm.all_reduce(&mut t, ReduceOp::Sum);
    #[cfg(feature = "tracing")]
    {
        let warned = format!("rank(s) {victim} have not reached op #1 yet");
        if !log.messages().iter().any(|m| m.contains(&warned)) {
            return Err(format!("no warning says {warned:?}: {:?}", log.messages()));
        }
    }
    match result {
        Err(e) if e.kind() == ErrorKind::Timeout && e.to_string().contains(&format!("rank {victim}")) => {
            println!("expected: {e:?}");
            let said = format!(
                "rank {victim} never reached op #1; rank {victim} is furthest behind (in another process, it reports: idle; last finished op #0 barrier"
            );
            if !e.to_string().contains(&said) {
                return Err(format!("the Timeout does not say what rank {victim} answered ({said}): {e}"));
            }
            if !e.report().is_some_and(|r| r.contains(&answered)) {
                return Err(format!("the report lacks rank {victim}'s answer ({answered}): {:?}", e.report()));
            }
            Ok(())
        }
        Err(e) => Err(format!("expected a Timeout naming rank {victim}, got {:?}: {e}", e.kind())),
        Ok(()) => Err("an all_reduce without one rank succeeded".into()),
    }
}

/// Moves large messages (lent, where single copy is on: 4 MiB chunks, far above its
/// threshold) round after round with a peer that gets killed in the middle of them. `MP_OP`
/// is `all_gather` (every rank lends to and reads from every other; alternating with a
/// broadcast from each rank in turn) or `p2p` (rank `MP_FROM` sends, the other receives).
/// The victim (`MP_VICTIM`) marks `MP_MARK` after a few rounds and goes on until killed;
/// every other rank expects `PeerLost` naming it, well before the timeout, then writes every
/// buffer it lent or read into (none may still be lent to the dead rank), and finds the
/// communicator refusing the next op.
pub(super) fn streamer_child() -> Result<(), String> {
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
    let mut op_started = started;
    for round in 0..1000 {
        if rank == victim && round == 3 {
            File::create(var("MP_MARK")).map_err(|e| e.to_string())?;
        }
        op_started = Instant::now();
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
    if var("MP_STOPPED") == "1" {
        // Stopped, not killed: a `Timeout` naming it, within the timeout and the second a
        // failed op may wait for a reader in another process (it is still registered as
        // reading what it was lent: the buffers are not written here).
        let (took, timeout) = (op_started.elapsed(), comm.config().timeout());
        println!("after {took:?} (timeout {timeout:?}): {:?} {err}", err.kind());
        if err.kind() != ErrorKind::Timeout || err.context().peer != Some(victim) {
            return Err(format!("expected Timeout naming rank {victim}, got {:?}: {err}", err.kind()));
        }
        if took > timeout + Duration::from_millis(2500) {
            return Err(format!("the Timeout came {took:?} after the op began, with a timeout of {timeout:?}"));
        }
        return Ok(());
    }
    peer_lost(&err, victim, started)?;
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

/// Rank 0 calls all_reduce, rank 1 all_gather, of 8 elements (small ops): each expects a
/// `Mismatch` that names both calls (the peer's from its slot words, where slots are on).
pub(super) fn odd_call_child() -> Result<(), String> {
    let comm = join(num("MP_RANK")).map_err(|e| e.to_string())?;
    check_transport()?;
    comm.barrier().map_err(|e| e.to_string())?;
    let dev = HostDevice::default();
    let mut t = Tensor::from_slice(&dev, &[1.0f32; 8], &[8]).map_err(|e| e.to_string())?;
    let mut out = Tensor::zeros(&dev, ruccl::DType::F32, &[16]).map_err(|e| e.to_string())?;
    match std::env::var("MP_ODD").as_deref() {
        Ok("size") => return odd_size(&comm, &dev),
        Ok("bcast") => return odd_bcast(&comm, &dev),
        Ok(p2p @ ("send" | "recv")) => return odd_p2p(&comm, &dev, p2p == "recv"),
        Ok("abort") => return abort_and_exit(&comm, &dev),
        _ => {}
    }
    let result = if comm.rank() == 0 {
        comm.all_reduce(&mut t, ReduceOp::Sum)
    } else {
        comm.all_gather_into_tensor(&mut out, &t)
    };
    let Err(e) = result else { return Err("mismatched calls succeeded".into()) };
    println!("expected: {:?} {e}", e.kind());
    let text = e.to_string();
    if e.kind() != ErrorKind::Mismatch || !text.contains("all_reduce") || !text.contains("all_gather") {
        return Err(format!("expected a Mismatch naming all_reduce and all_gather, got {:?}: {e}", e.kind()));
    }
    Ok(())
}

/// [`odd_call_child`] with `MP_ODD=abort`: rank 1 calls `abort()` while rank 0 waits in a
/// recv from it, and its process exits at once, with no drop (`std::process::exit`). Rank 0
/// reads why: rank 1's abort, not a connection closed without a goodbye (the abort frame was
/// still queued at the exit: 1 run in 5 over TCP, a stranger's review).
/// `MP_SENDING=1`: rank 1 aborts from another thread while it sends rank 0 16 MiB messages
/// (its abort queued behind a data frame on the socket), and rank 0 receives them: the first
/// error rank 0 sees is rank 1's abort.
fn abort_and_exit(comm: &ruccl::Communicator<HostDevice>, dev: &HostDevice) -> Result<(), String> {
    let sending = var("MP_SENDING") == "1";
    let n = if sending { 1 << 22 } else { 1 << 20 };
    let mut t = Tensor::zeros(dev, ruccl::DType::F32, &[n]).map_err(|e| e.to_string())?;
    if comm.rank() == 1 {
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(if sending { 30 } else { 200 }));
                comm.abort();
                println!("child ok");
                std::process::exit(0);
            });
            while sending && comm.send(&t, 0).is_ok() {}
        });
        return Ok(());
    }
    let result = if sending { (0..1000).try_for_each(|_| comm.recv(&mut t, 1)) } else { comm.recv(&mut t, 1) };
    let Err(e) = result else { return Err("a recv from an aborting rank succeeded".into()) };
    println!("expected: {:?} {e}", e.kind());
    if e.kind() != ErrorKind::Aborted || !e.to_string().contains("rank 1 called abort()") {
        return Err(format!("expected rank 1's abort, got {:?}: {e}", e.kind()));
    }
    Ok(())
}

/// [`odd_call_child`] with `MP_ODD=size`: rank 0 all_reduces 8 elements (a part that fits an
/// exchange slot), rank 1 2000 (8000 bytes: a plan of messages). Both get a `Mismatch` well
/// before the timeout (20 s): the rank on messages sees the other's part in its slot.
fn odd_size(comm: &ruccl::Communicator<HostDevice>, dev: &HostDevice) -> Result<(), String> {
    let n = if comm.rank() == 0 { 8 } else { 2000 };
    let mut t = Tensor::from_slice(dev, &vec![1.0f32; n], &[n]).map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let Err(e) = comm.all_reduce(&mut t, ReduceOp::Sum) else { return Err("mismatched calls succeeded".into()) };
    println!("expected: {:?} {e} after {:?}", e.kind(), t0.elapsed());
    if e.kind() != ErrorKind::Mismatch || t0.elapsed() > std::time::Duration::from_secs(10) {
        return Err(format!("expected a Mismatch at once, got {:?} after {:?}: {e}", e.kind(), t0.elapsed()));
    }
    Ok(())
}

/// [`odd_call_child`] with `MP_ODD=send` (or `recv`), 2 ranks: rank 0 sends 4 elements to
/// rank 1 where rank 1 all_reduces 4 (or rank 0 receives from rank 1 where rank 1 calls a
/// barrier). Both get a `Mismatch` well before the timeout (20 s).
fn odd_p2p(comm: &ruccl::Communicator<HostDevice>, dev: &HostDevice, recv: bool) -> Result<(), String> {
    let mut t = Tensor::from_slice(dev, &[1.0f32; 4], &[4]).map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let result = match (comm.rank(), recv) {
        (0, false) => comm.send(&t, 1),
        (0, true) => comm.recv(&mut t, 1),
        (_, false) => comm.all_reduce(&mut t, ReduceOp::Sum),
        (_, true) => comm.barrier(),
    };
    let Err(e) = result else { return Err("a send or recv against a collective succeeded".into()) };
    println!("expected: {:?} {e} after {:?}", e.kind(), t0.elapsed());
    if e.kind() != ErrorKind::Mismatch || t0.elapsed() > std::time::Duration::from_secs(10) {
        return Err(format!("expected a Mismatch at once, got {:?} after {:?}: {e}", e.kind(), t0.elapsed()));
    }
    Ok(())
}

/// [`odd_call_child`] with `MP_ODD=bcast`, 3 ranks: ranks 0 and 1 all_reduce 1000 elements,
/// rank 2 calls a broadcast from rank 0 of as many. No rank's first awaited message need be
/// a mismatched one (the all_reduce's ranks may wait on each other and on rank 2, rank 2 on
/// rank 0); every rank still gets a `Mismatch` well before the timeout (20 s).
fn odd_bcast(comm: &ruccl::Communicator<HostDevice>, dev: &HostDevice) -> Result<(), String> {
    let mut t = Tensor::from_slice(dev, &[1.0f32; 1000], &[1000]).map_err(|e| e.to_string())?;
    let t0 = std::time::Instant::now();
    let result = if comm.rank() == 2 { comm.broadcast(&mut t, 0) } else { comm.all_reduce(&mut t, ReduceOp::Sum) };
    let Err(e) = result else { return Err("mismatched calls succeeded".into()) };
    println!("expected: {:?} {e} after {:?}", e.kind(), t0.elapsed());
    if e.kind() != ErrorKind::Mismatch || t0.elapsed() > std::time::Duration::from_secs(10) {
        return Err(format!("expected a Mismatch at once, got {:?} after {:?}: {e}", e.kind(), t0.elapsed()));
    }
    Ok(())
}
