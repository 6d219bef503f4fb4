//! The execution model: group calls (all ranks driven by one thread) and non-blocking calls
//! with `Work` handles — overlap, issue order, dropping a handle, abort while waiting, errors
//! surfacing from `wait`.

use std::time::{Duration, Instant};

use ruccl::{CommConfig, Communicator, DType, ErrorKind, Group, ReduceOp, Tensor};

use crate::harness::{Opts, TEST_TIMEOUT, TestDevice, assert_bits, run};
use crate::reference::{data, reduce_input, reduced};

fn comms<D: TestDevice>(world: usize) -> Vec<Communicator<D>> {
    let devices = (0..world).map(D::for_rank).collect();
    Communicator::init_all(devices, D::configure(CommConfig::default().with_timeout(TEST_TIMEOUT))).unwrap()
}

fn t<D: TestDevice, T: ruccl::Element>(c: &Communicator<D>, v: &[T]) -> Tensor<D> {
    Tensor::from_slice(c.device(), v, &[v.len()]).unwrap()
}

/// Every collective of the group API, all ranks issued and driven from this one thread.
pub fn group_drives_every_rank<D: TestDevice>(world: usize) {
    let comms = comms::<D>(world);
    let n = 5;
    for round in 0..3 {
        // all_reduce, in place.
        let mut ts: Vec<_> =
            comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Sum, c.rank(), n, round))).collect();
        let mut g = Group::new();
        for (c, x) in comms.iter().zip(ts.iter_mut()) {
            g.all_reduce(c, x, ReduceOp::Sum);
        }
        g.run().unwrap();
        for x in &ts {
            assert_bits(
                &x.to_vec::<i32>().unwrap(),
                &reduced::<i32>(ReduceOp::Sum, world, n, round),
                "group all_reduce",
            );
        }
        // broadcast from the last rank, then all_gather and reduce_scatter.
        let mut ts: Vec<_> = comms.iter().map(|c| t(c, &data::<f32>(c.rank(), n, round))).collect();
        let mut g = Group::new();
        for (c, x) in comms.iter().zip(ts.iter_mut()) {
            g.broadcast(c, x, world - 1);
        }
        g.run().unwrap();
        for x in &ts {
            assert_bits(&x.to_vec::<f32>().unwrap(), &data::<f32>(world - 1, n, round), "group broadcast");
        }
        let ins: Vec<_> = comms.iter().map(|c| t(c, &data::<u8>(c.rank(), n, round))).collect();
        let mut outs: Vec<_> =
            comms.iter().map(|c| Tensor::zeros(c.device(), DType::U8, &[n * world]).unwrap()).collect();
        let mut g = Group::new();
        for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
            g.all_gather_into_tensor(c, y, x);
        }
        g.run().unwrap();
        let want: Vec<u8> = (0..world).flat_map(|k| data::<u8>(k, n, round)).collect();
        for y in &outs {
            assert_bits(&y.to_vec::<u8>().unwrap(), &want, "group all_gather");
        }
        let ins: Vec<_> =
            comms.iter().map(|c| t(c, &reduce_input::<f64>(ReduceOp::Sum, c.rank(), n * world, round))).collect();
        let mut outs: Vec<_> = comms.iter().map(|c| Tensor::zeros(c.device(), DType::F64, &[n]).unwrap()).collect();
        let mut g = Group::new();
        for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
            g.reduce_scatter_tensor(c, y, x, ReduceOp::Sum);
        }
        g.run().unwrap();
        let all = reduced::<f64>(ReduceOp::Sum, world, n * world, round);
        for (r, y) in outs.iter().enumerate() {
            assert_bits(&y.to_vec::<f64>().unwrap(), &all[r * n..(r + 1) * n], "group reduce_scatter");
        }
    }
}

/// A ring of sends and receives, every rank's pair in one group from one thread: no deadlock,
/// even though each rank sends before it receives.
pub fn group_ring_of_sends_never_deadlocks<D: TestDevice>() {
    let world = 5;
    let comms = comms::<D>(world);
    let sends: Vec<_> = comms.iter().map(|c| t(c, &data::<i64>(c.rank(), 300, 1))).collect();
    let mut recvs: Vec<_> = comms.iter().map(|c| Tensor::zeros(c.device(), DType::I64, &[300]).unwrap()).collect();
    let mut g = Group::new();
    for ((c, s), r) in comms.iter().zip(&sends).zip(recvs.iter_mut()) {
        let me = c.rank();
        g.send(c, s, (me + 1) % world).recv(c, r, (me + world - 1) % world);
    }
    g.run().unwrap();
    for (me, r) in recvs.iter().enumerate() {
        assert_bits(&r.to_vec::<i64>().unwrap(), &data::<i64>((me + world - 1) % world, 300, 1), "ring recv");
    }
}

/// A call that fails its checks fails the whole group before anything is sent; the
/// communicators stay usable.
pub fn group_with_a_bad_call_runs_nothing<D: TestDevice>() {
    let comms = comms::<D>(3);
    let mut ts: Vec<_> = comms.iter().map(|c| t(c, &[1.0f32; 4])).collect();
    let mut bad = Tensor::zeros(comms[2].device(), DType::F32, &[5]).unwrap();
    let x = t(&comms[2], &[1.0f32; 4]);
    let mut g = Group::new();
    let (first, _) = ts.split_at_mut(2);
    for (c, y) in comms.iter().zip(first.iter_mut()) {
        g.all_reduce(c, y, ReduceOp::Sum);
    }
    g.all_reduce_into(&comms[2], &mut bad, &x, ReduceOp::Sum);
    let e = g.run().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let mut g = Group::new();
    for (c, y) in comms.iter().zip(ts.iter_mut()) {
        g.all_reduce(c, y, ReduceOp::Sum);
    }
    g.run().unwrap();
    assert_eq!(ts[0].to_vec::<f32>().unwrap(), vec![3.0; 4], "the bad group ran nothing");
}

/// A non-blocking all_reduce returns while its peer has not even arrived; the caller computes
/// meanwhile, and `wait` returns the right sum.
pub fn work_overlaps_computation<D: TestDevice>() {
    run::<D, _>(2, &Opts { shuffle: false, ..Opts::default() }, |ctx| {
        let x = ctx.tensor(&reduce_input::<f32>(ReduceOp::Sum, ctx.rank, 1000, 3));
        if ctx.rank == 1 {
            ctx.sync.wait(); // rank 0 has issued its op and seen it unfinished
        }
        let work = ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        if ctx.rank == 0 {
            assert!(!work.is_completed(), "finished before the peer arrived");
            let busy: u64 = (0..200_000u64).map(|i| i.wrapping_mul(i)).fold(0, u64::wrapping_add);
            std::hint::black_box(busy);
            assert!(!work.is_completed(), "finished before the peer arrived");
            ctx.sync.wait();
        }
        work.wait().unwrap();
        assert!(work.is_completed());
        ctx.check(&x, &reduced::<f32>(ReduceOp::Sum, 2, 1000, 3), "non-blocking all_reduce");
    });
}

/// A `Work` is a future of its op's result: pending (the latest waker of its task kept) until
/// the peer arrives, then woken and ready with the result; awaited on a runtime, every clone resolves
/// alike; a failed op's future resolves with its error.
pub fn work_is_a_future<D: TestDevice>() {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    run::<D, _>(2, &Opts { shuffle: false, ..Opts::default() }, |ctx| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let x = ctx.tensor(&reduce_input::<f32>(ReduceOp::Sum, ctx.rank, 1000, 3));
        if ctx.rank == 1 {
            ctx.sync.wait(); // rank 0 has polled its op and seen it pending
        }
        let work = ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        if ctx.rank == 0 {
            // A clone polled twice with different wakers keeps only the latest (the futures
            // contract); `work` itself is awaited below, with the runtime's waker.
            let first = Arc::new(Count(AtomicUsize::new(0)));
            let mut probe = work.clone();
            for waker in [Waker::from(first.clone()), Waker::from(count.clone())] {
                let polled = std::pin::Pin::new(&mut probe).poll(&mut Context::from_waker(&waker));
                assert!(polled.is_pending(), "ready before the peer arrived: {polled:?}");
            }
            assert_eq!(Arc::strong_count(&first), 1, "the handle still holds the waker of its first poll");
            ctx.sync.wait();
        }
        // Bounded, so that a wake-up the op never sends fails the test instead of hanging it.
        let awaited = |work: ruccl::Work| {
            let bounded = runtime.block_on(async { tokio::time::timeout(2 * TEST_TIMEOUT, work).await });
            bounded.expect("the awaited op never woke its task")
        };
        let copy = work.clone();
        awaited(work).unwrap();
        awaited(copy).unwrap();
        if ctx.rank == 0 {
            assert!(count.0.load(Ordering::SeqCst) >= 1, "the waker of the clone's last poll was never woken");
        }
        ctx.check(&x, &reduced::<f32>(ReduceOp::Sum, 2, 1000, 3), "awaited all_reduce");
        // A mismatch: the awaited result is the error `wait` returns.
        let op = if ctx.rank == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let work = ctx.comm.all_reduce_async(&x, op).unwrap();
        let waited = work.clone();
        let r = awaited(work);
        let e = ctx.expect_err(r, ErrorKind::Mismatch, &[], "awaited all_reduce, mismatched ops");
        assert_eq!(waited.wait().err().map(|w| w.to_string()), Some(e.to_string()));
    });
}

/// A pending op holds its tensors until it completes: reading its input is fine, writing it
/// is refused, and any access to its output (or a second handle on the output's memory) is
/// refused, with an error naming the op (so is another communicator's call that writes its
/// output); once `wait` returns (or a later blocking call ran
/// after it, its `Work` dropped) they are free, and the result is exact.
pub fn work_holds_its_tensors<D: TestDevice>() {
    run::<D, _>(2, &Opts { shuffle: false, ..Opts::default() }, |ctx| {
        let input = reduce_input::<f32>(ReduceOp::Sum, ctx.rank, 300, 1);
        let mut x = ctx.tensor(&input);
        let mut y = ctx.tensor(&[0.0f32; 300]);
        if ctx.rank == 1 {
            ctx.sync.wait(); // rank 0 has tried its tensors while its op waited for this rank
        }
        let work = ctx.comm.all_reduce_into_async(&y, &x, ReduceOp::Sum).unwrap();
        if ctx.rank == 0 {
            let refused = |e: ruccl::CollectiveError, held: &str| {
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                let msg = e.to_string();
                assert!(msg.contains(held) && msg.contains("all_reduce") && msg.contains("op #0 of rank 0"), "{msg}");
            };
            assert_eq!(x.to_vec::<f32>().unwrap(), input, "reading a pending op's input");
            refused(x.copy_from_slice(&[7.0f32; 300]).unwrap_err(), "is read by");
            refused(y.to_vec::<f32>().unwrap_err(), "is written by");
            let e = y.to_vec::<f32>().unwrap_err().to_string();
            assert!(e.contains("What to do: wait for that op's `Work` first"), "{e}");
            refused(y.copy_from_slice(&[7.0f32; 300]).unwrap_err(), "is written by");
            refused(y.try_clone().unwrap_err(), "is written by");
            let mut alias = Tensor::from_buffer(ctx.comm.device(), y.buffer().clone(), DType::F32, &[300]).unwrap();
            refused(alias.to_vec::<f32>().unwrap_err(), "is written by");
            // Through the device, with the buffer's handle (ruCCL's devices): the same.
            if D::guards_pending_memory() {
                let dev = ctx.comm.device();
                let e = dev.write(y.buffer(), 8, &[1u8; 4]).unwrap_err();
                assert_eq!(e.context().op.as_deref(), Some("Device::write"), "{e}");
                refused(e, "bytes 8..12 of this buffer are written by");
                refused(dev.read(y.buffer(), 0, &mut [0u8; 4]).unwrap_err(), "are written by");
                refused(dev.write(x.buffer(), 0, &[1u8; 4]).unwrap_err(), "are read by");
                let mut seen = [0u8; 4];
                dev.read(x.buffer(), 0, &mut seen).unwrap();
                assert_eq!(seen, input[0].to_le_bytes(), "reading a pending op's input through the device");
            }
            // Another communicator's call: nothing orders it after the pending op, so one that
            // writes its output is refused; one that only reads its input is fine.
            let id = ruccl::UniqueId::new().unwrap();
            let solo = Communicator::with_config(ctx.dev.clone(), 1, id, 0, D::configure(CommConfig::default())).unwrap();
            let e = solo.all_reduce(&mut alias, ReduceOp::Sum).unwrap_err();
            refused(e.clone(), "another communicator");
            assert!(solo.is_usable(), "{e}");
            let mut z = ctx.tensor(&[0.0f32; 300]);
            solo.all_reduce_into(&mut z, &x, ReduceOp::Sum).unwrap();
            assert_eq!(z.to_vec::<f32>().unwrap(), input, "another communicator reading the pending op's input");
            assert!(!work.is_completed());
            ctx.sync.wait();
        }
        work.wait().unwrap();
        ctx.check(&y, &reduced::<f32>(ReduceOp::Sum, 2, 300, 1), "all_reduce_into after refused accesses");
        x.copy_from_slice(&[1.0f32; 300]).unwrap();
        // A dropped handle: the blocking call after it runs after it, and the tensor is free.
        drop(ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap());
        ctx.ok(ctx.comm.barrier(), "barrier after a dropped Work");
        ctx.check(&x, &[2.0f32; 300], "dropped all_reduce");
        y.copy_from_slice(&[0.0f32; 300]).unwrap();
    });
}

/// A loop that repeats small calls (one, or a few in turn) runs each repeat straight from
/// what the first run worked out (the rank's memo), and each repeat is still checked as the
/// first was: another buffer of the same size is read, not the remembered one; another
/// communicator's pending op on the tensor refuses it (and the communicator stays usable);
/// and once the communicator is aborted, every repeat fails, on every rank.
pub fn repeated_calls_are_checked_each_time<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(Duration::from_secs(20)), |ctx| {
        let other = ctx.comm.split_all().unwrap();
        let mut x = ctx.tensor(&[1.0f32; 8]);
        for _ in 0..3 {
            ctx.ok(ctx.comm.all_reduce(&mut x, ReduceOp::Sum), "a repeated all_reduce");
        }
        ctx.check(&x, &[8.0f32; 8], "three repeats of one all_reduce");
        let mut y = ctx.tensor(&[(ctx.rank + 1) as f32; 8]);
        ctx.ok(ctx.comm.all_reduce(&mut y, ReduceOp::Sum), "the same all_reduce on another tensor");
        ctx.check(&y, &[3.0f32; 8], "another tensor of the same size");
        ctx.ok(ctx.comm.all_reduce(&mut x, ReduceOp::Sum), "the first tensor again");
        ctx.check(&x, &[16.0f32; 8], "the first tensor again");
        // A few calls in turn (a training step's), each remembered.
        let mut flag = ctx.tensor(&[0u8; 4]);
        for step in 1..=3u8 {
            if ctx.rank == 1 {
                flag.copy_from_slice(&[step; 4]).unwrap();
            }
            ctx.ok(ctx.comm.broadcast(&mut flag, 1), "a broadcast between all_reduces");
            ctx.check(&flag, &[step; 4], "a broadcast between all_reduces");
            ctx.ok(ctx.comm.all_reduce(&mut y, ReduceOp::Sum), "an all_reduce between broadcasts");
            ctx.ok(ctx.comm.barrier(), "a barrier between them");
        }
        ctx.check(&y, &[24.0f32; 8], "all_reduces between broadcasts");
        ctx.ok(ctx.comm.all_reduce(&mut x, ReduceOp::Sum), "a repeat");
        // Another communicator's op on `x`, pending until rank 1 issues it too.
        if ctx.rank == 1 {
            ctx.sync.wait();
        }
        let work = other.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        if ctx.rank == 0 {
            let e = ctx.comm.all_reduce(&mut x, ReduceOp::Sum).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("another communicator"), "{e}");
            assert!(ctx.comm.is_usable(), "{e}");
            ctx.sync.wait();
        }
        ctx.ok(work.wait(), "the other communicator's all_reduce");
        ctx.check(&x, &[64.0f32; 8], "after the other communicator's all_reduce");
        ctx.ok(ctx.comm.all_reduce(&mut x, ReduceOp::Sum), "a repeat after the refused one");
        ctx.check(&x, &[128.0f32; 8], "a repeat after the refused one");
        ctx.sync.wait();
        if ctx.rank == 0 {
            ctx.comm.abort();
        }
        ctx.sync.wait();
        for _ in 0..2 {
            let e = ctx.comm.all_reduce(&mut x, ReduceOp::Sum).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Aborted, "rank {}: {e}", ctx.rank);
        }
        ctx.check(&x, &[128.0f32; 8], "repeats after an abort");
    });
}

/// The in-place block forms have non-blocking forms too (torch's
/// `all_gather_into_tensor(..., async_op=True)` on a view of the output): issued back to
/// back, waited together, each with the blocking form's result.
pub fn work_in_place_block_forms<D: TestDevice>() {
    let world = 3;
    run::<D, _>(world, &Opts::default(), |ctx| {
        let (r, n, round) = (ctx.rank, 5, 2);
        let mut v = vec![0i32; n * world];
        v[r * n..(r + 1) * n].copy_from_slice(&data::<i32>(r, n, round));
        let gathered = ctx.tensor(&v);
        let op = ReduceOp::Sum;
        let scattered = ctx.tensor(&reduce_input::<i32>(op, r, n * world, round));
        let swapped = ctx.tensor(&data::<i32>(r, n * world, round));
        let works = [
            ctx.comm.all_gather_into_tensor_in_place_async(&gathered).unwrap(),
            ctx.comm.reduce_scatter_tensor_in_place_async(&scattered, op).unwrap(),
            ctx.comm.all_to_all_single_in_place_async(&swapped).unwrap(),
        ];
        works.iter().for_each(|w| w.wait().unwrap());
        let all: Vec<i32> = (0..world).flat_map(|q| data::<i32>(q, n, round)).collect();
        assert_bits(&gathered.to_vec::<i32>().unwrap(), &all, "all_gather in place, non-blocking");
        let want = reduced::<i32>(op, world, n * world, round);
        let got = scattered.to_vec::<i32>().unwrap();
        assert_bits(&got[r * n..(r + 1) * n], &want[r * n..(r + 1) * n], "reduce_scatter in place, non-blocking");
        let want: Vec<i32> = (0..world).flat_map(|q| data::<i32>(q, n * world, round)[r * n..(r + 1) * n].to_vec()).collect();
        assert_bits(&swapped.to_vec::<i32>().unwrap(), &want, "all_to_all in place, non-blocking");
    });
}

/// Ops complete in issue order; a blocking call issued after non-blocking ones runs after
/// them; dropping a `Work` without waiting leaves later ops correct.
pub fn work_issue_order_and_dropped_handles<D: TestDevice>() {
    run::<D, _>(3, &Opts::default(), |ctx| {
        let xs: Vec<_> = (0..12).map(|i| ctx.tensor(&reduce_input::<i64>(ReduceOp::Sum, ctx.rank, 7, i))).collect();
        let works: Vec<_> = xs.iter().map(|x| ctx.comm.all_reduce_async(x, ReduceOp::Sum).unwrap()).collect();
        drop(ctx.comm.barrier_async().unwrap()); // dropped unfinished
        let mut y = ctx.tensor(&[ctx.rank as u32; 3]);
        ctx.ok(ctx.comm.all_reduce(&mut y, ReduceOp::Max), "blocking all_reduce after non-blocking ones");
        assert!(works.iter().all(|w| w.is_completed()), "a blocking call returned before earlier ops finished");
        for (i, (w, x)) in works.iter().zip(&xs).enumerate() {
            w.wait().unwrap();
            ctx.check(x, &reduced::<i64>(ReduceOp::Sum, 3, 7, i), format!("non-blocking all_reduce #{i}"));
        }
        ctx.check(&y, &[2u32; 3], "blocking all_reduce");
        let flight = ctx.comm.flight_recorder();
        let seqs: Vec<u64> = flight.iter().filter(|e| e.op.kind.is_collective()).map(|e| e.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "ops ran out of issue order: {seqs:?}");
    });
}

/// `abort()` from another thread wakes a rank waiting on a `Work` whose peer never comes;
/// errors surface from `wait` (and `wait_timeout` gives up without cancelling).
pub fn work_abort_and_errors<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(Duration::from_secs(20)), |ctx| {
        if ctx.rank == 1 {
            ctx.sync.wait();
            return;
        }
        let x = ctx.tensor(&[1.0f32; 8]);
        let work = ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap();
        let e = work.wait_timeout(Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        // It says the op goes on, and never that the communicator is aborted.
        assert!(e.to_string().contains("stays usable") && !e.to_string().contains("aborted"), "{e}");
        // And names the op it gave up on.
        assert!(e.to_string().contains("all_reduce(sum, 8 x f32)"), "{e}");
        assert!(!work.is_completed());
        let t0 = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                ctx.comm.abort();
            });
            let e = work.wait().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        });
        assert!(t0.elapsed() < Duration::from_secs(5), "abort took {:?} to wake the waiter", t0.elapsed());
        ctx.sync.wait();
    });
    // Mismatched non-blocking ops: the error comes out of wait.
    run::<D, _>(2, &Opts::timed(Duration::from_secs(10)), |ctx| {
        let x = ctx.tensor(&[1i32; 4]);
        let op = if ctx.rank == 0 { ReduceOp::Sum } else { ReduceOp::Min };
        let w = ctx.comm.all_reduce_async(&x, op).unwrap();
        let e = w.wait().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Mismatch, "{e}");
    });
}

/// Ops issued before their rank failed never run after it: non-blocking ops queued behind a
/// mismatch, and a group's later call on a communicator whose earlier call failed, all fail
/// (`Aborted` or the mismatch itself) on every rank, and nothing is written. Run, the later
/// op could finish on one rank (its peer's part already published) while its peer reports it
/// failed.
pub fn nothing_runs_after_a_failure<D: TestDevice>() {
    let failed = |r: &ruccl::Result<()>, what: &str| match r {
        Err(e) => assert!(matches!(e.kind(), ErrorKind::Aborted | ErrorKind::Mismatch), "{what}: {e}"),
        Ok(()) => panic!("{what} succeeded after an earlier op of its rank failed"),
    };
    for round in 0..3 {
        let comms = comms::<D>(2);
        // Mismatched sizes first, then an op both ranks agree on.
        let a: Vec<_> = comms.iter().map(|c| t(c, &vec![1.0f32; 2 + c.rank()])).collect();
        let b: Vec<_> = comms.iter().map(|c| t(c, &[10.0f32 * (c.rank() + 1) as f32])).collect();
        // The second op may be refused at issue already (`Aborted`: the first failed on its
        // rank's progress thread meanwhile, as under load): that too is not running it.
        let works: Vec<_> = comms
            .iter()
            .zip(a.iter().zip(&b))
            .map(|(c, (a, b))| (c.all_reduce_async(a, ReduceOp::Sum).unwrap(), c.all_reduce_async(b, ReduceOp::Sum)))
            .collect();
        for (r, (wa, wb)) in works.iter().enumerate() {
            let e = wa.wait().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Mismatch, "round {round}, rank {r}: {e}");
            let second = wb.as_ref().map_err(Clone::clone).and_then(|w| w.wait());
            failed(&second, &format!("round {round}, rank {r}: the all_reduce queued behind the mismatch"));
        }
        for (r, b) in b.iter().enumerate() {
            assert_eq!(b.to_vec::<f32>().unwrap(), vec![10.0 * (r + 1) as f32], "round {round}: rank {r}'s tensor was written");
        }
    }
    // A group: a send and a receive that disagree on the size, then an all_reduce.
    let comms = comms::<D>(2);
    let x = t(&comms[0], &[1.0f32]);
    let mut y = Tensor::zeros(comms[1].device(), DType::F32, &[2]).unwrap();
    let mut ts: Vec<_> = comms.iter().map(|c| t(c, &[10.0f32 * (c.rank() + 1) as f32])).collect();
    let (t0, t1) = ts.split_at_mut(1);
    let mut g = Group::new();
    g.send(&comms[0], &x, 1).all_reduce(&comms[0], &mut t0[0], ReduceOp::Sum);
    g.recv(&comms[1], &mut y, 0).all_reduce(&comms[1], &mut t1[0], ReduceOp::Sum);
    let results = g.run_each().unwrap();
    assert_eq!(results.len(), 4);
    for (i, r) in results.iter().enumerate() {
        failed(r, &format!("group call #{i}"));
    }
    assert_eq!(ts[0].to_vec::<f32>().unwrap(), vec![10.0], "the group's all_reduce wrote rank 0's tensor");
}

/// Sends and receives that wait for each other in a cycle. Non-blocking ones complete: each
/// send issued before its receive (torch's isend, then irecv), from one thread driving both
/// ranks. Blocking ones (a send before the receive on every rank) time out, and the hint says
/// what to do: non-blocking sends, or one `Group`.
pub fn p2p_cycle_timeout_says_use_a_group<D: TestDevice>() {
    let devices = (0..2).map(D::for_rank).collect();
    let comms = Communicator::init_all(devices, D::configure(CommConfig::default().with_timeout(TEST_TIMEOUT))).unwrap();
    let n = 64 << 10;
    let xs: Vec<_> = comms.iter().map(|c| t(c, &vec![c.rank() as f32 + 1.0; n])).collect();
    let ys: Vec<_> = comms.iter().map(|c| Tensor::zeros(c.device(), DType::F32, &[n]).unwrap()).collect();
    let works: Vec<_> = comms
        .iter()
        .zip(xs.iter().zip(&ys))
        .map(|(c, (x, y))| {
            let peer = 1 - c.rank();
            (c.send_async(x, peer).unwrap(), c.recv_async(y, peer).unwrap())
        })
        .collect();
    for (r, (send, recv)) in works.iter().enumerate() {
        recv.wait().unwrap_or_else(|e| panic!("rank {r}'s recv_async: {e}"));
        send.wait().unwrap_or_else(|e| panic!("rank {r}'s send_async: {e}"));
        assert_eq!(ys[r].to_vec::<f32>().unwrap(), vec![(1 - r) as f32 + 1.0; n], "rank {r} received");
    }
    drop(works);
    let opts = Opts::timed(Duration::from_millis(500));
    let errors = std::sync::Mutex::new(Vec::new());
    run::<D, _>(2, &opts, |ctx| {
        let peer = 1 - ctx.rank;
        let x = ctx.tensor(&vec![1.0f32; n]);
        let mut y = ctx.tensor(&vec![0.0f32; n]);
        let r = ctx.comm.send(&x, peer).and_then(|()| ctx.comm.recv(&mut y, peer));
        let e = r.expect_err("a cycle of blocking sends finished");
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        errors.lock().unwrap().push(e.to_string());
    });
    // The rank that gave up first has the hint; a rank that hears of it from that rank
    // quotes its cause.
    let errors = errors.into_inner().unwrap();
    assert!(errors.iter().any(|e| e.contains("Group, batch_isend_irecv") && e.contains("send_async")), "{errors:#?}");
    assert!(errors.iter().all(|e| e.contains("Group") || e.contains("wait for each other")), "{errors:#?}");
}

/// One thread making a blocking call on each of `init_all`'s communicators in turn (the
/// first waits for calls only that thread could make) times out with a note saying so and
/// what to do instead; a collective and a receive alike. A rank late on a thread of its own
/// gets no such note.
pub fn one_thread_blocking_each_rank_says_so<D: TestDevice>() {
    let short = || D::configure(CommConfig::default().with_timeout(Duration::from_millis(300)));
    let note = "made or last called on this very thread";
    for recv in [false, true] {
        let comms = Communicator::init_all((0..2).map(D::for_rank).collect(), short()).unwrap();
        let mut x = t(&comms[0], &[1.0f32; 4]);
        let e = if recv { comms[0].recv(&mut x, 1) } else { comms[0].all_reduce(&mut x, ReduceOp::Sum) };
        let e = e.expect_err("rank 0's call finished without rank 1's");
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert!(e.to_string().contains(note) && e.to_string().contains("Group"), "recv {recv}: {e}");
    }
    let id = ruccl::UniqueId::new().unwrap();
    let other = id.clone();
    let late = std::thread::spawn(move || {
        let c = Communicator::with_config(D::for_rank(1), 2, other, 1, short()).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        drop(c);
    });
    let c = Communicator::with_config(D::for_rank(0), 2, id, 0, short()).unwrap();
    let mut x = t(&c, &[1.0f32; 4]);
    let e = c.all_reduce(&mut x, ReduceOp::Sum).expect_err("rank 0's all_reduce finished without rank 1's");
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(!e.to_string().contains(note), "{e}");
    late.join().unwrap();
}

/// A group holding one collective for every rank of a communicator on one device runs
/// without messages (the flight recorder says `Direct`): every op, reduce op and dtype, in
/// place and out of place, gives the exact result; sequence numbers stay in step with the
/// general path (non-blocking ops issued after it, then a direct op again); a chosen
/// algorithm keeps the general path.
pub fn group_direct_path_every_op<D: TestDevice>(world: usize) {
    use ruccl::Algorithm;
    fn one<D: TestDevice, T: ruccl::Element + crate::reference::Elem>(comms: &[Communicator<D>], round: usize) {
        let world = comms.len();
        let n = 7;
        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod] {
            let want = reduced::<T>(op, world, n, round);
            // all_reduce, out of place and in place.
            let ins: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<T>(op, c.rank(), n, round))).collect();
            let mut outs: Vec<_> = comms.iter().map(|c| Tensor::zeros(c.device(), T::DTYPE, &[n]).unwrap()).collect();
            let mut g = Group::new();
            for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
                g.all_reduce_into(c, y, x, op);
            }
            g.run().unwrap();
            for y in &outs {
                assert_bits(&y.to_vec::<T>().unwrap(), &want, format!("direct all_reduce_into {op}"));
            }
            let mut ts: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<T>(op, c.rank(), n, round))).collect();
            let mut g = Group::new();
            for (c, x) in comms.iter().zip(ts.iter_mut()) {
                g.all_reduce(c, x, op);
            }
            g.run().unwrap();
            for x in &ts {
                assert_bits(&x.to_vec::<T>().unwrap(), &want, format!("direct all_reduce {op}"));
            }
            // reduce to the last rank, in place: only the root's tensor holds the result.
            let mut ts: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<T>(op, c.rank(), n, round))).collect();
            let mut g = Group::new();
            for (c, x) in comms.iter().zip(ts.iter_mut()) {
                g.reduce(c, x, op, world - 1);
            }
            g.run().unwrap();
            assert_bits(&ts[world - 1].to_vec::<T>().unwrap(), &want, format!("direct reduce {op}"));
            // reduce_scatter.
            let all = reduced::<T>(op, world, n * world, round);
            let ins: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<T>(op, c.rank(), n * world, round))).collect();
            let mut outs: Vec<_> = comms.iter().map(|c| Tensor::zeros(c.device(), T::DTYPE, &[n]).unwrap()).collect();
            let mut g = Group::new();
            for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
                g.reduce_scatter_tensor(c, y, x, op);
            }
            g.run().unwrap();
            for (r, y) in outs.iter().enumerate() {
                assert_bits(&y.to_vec::<T>().unwrap(), &all[r * n..(r + 1) * n], format!("direct reduce_scatter {op}"));
            }
        }
        // all_to_all: rank r's block q goes to rank q's block r.
        let ins: Vec<_> = comms.iter().map(|c| t(c, &data::<T>(c.rank(), n * world, round))).collect();
        let mut outs: Vec<_> =
            comms.iter().map(|c| Tensor::zeros(c.device(), T::DTYPE, &[n * world]).unwrap()).collect();
        let mut g = Group::new();
        for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
            g.all_to_all_single(c, y, x);
        }
        g.run().unwrap();
        for (r, y) in outs.iter().enumerate() {
            let want: Vec<T> =
                (0..world).flat_map(|q| data::<T>(q, n * world, round)[r * n..(r + 1) * n].to_vec()).collect();
            assert_bits(&y.to_vec::<T>().unwrap(), &want, "direct all_to_all");
        }
    }
    let comms = comms::<D>(world);
    for round in 0..2 {
        one::<D, f32>(&comms, round);
        one::<D, i64>(&comms, round);
        one::<D, half::bf16>(&comms, round);
        one::<D, u8>(&comms, round);
        // Non-blocking ops (the general path) after direct ones: the ranks' sequence numbers
        // still agree.
        let xs: Vec<_> = comms.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Sum, c.rank(), 9, round))).collect();
        let works: Vec<_> = comms.iter().zip(&xs).map(|(c, x)| c.all_reduce_async(x, ReduceOp::Sum).unwrap()).collect();
        for w in works {
            w.wait().unwrap();
        }
        for x in &xs {
            assert_bits(
                &x.to_vec::<i32>().unwrap(),
                &reduced::<i32>(ReduceOp::Sum, world, 9, round),
                "async after direct",
            );
        }
    }
    let direct = comms[0].flight_recorder().last().map(|e| e.algorithm);
    assert_ne!(direct, Some(Algorithm::Direct), "the non-blocking all_reduce took the general path");
    let history = comms[world - 1].flight_recorder();
    let all_direct = history.iter().rev().skip(1).take(5).all(|e| e.algorithm == Algorithm::Direct);
    assert!(all_direct || !D::direct_groups(), "group ops on one device run direct: {history:?}");
    // A chosen algorithm is the caller's: the general path runs it.
    let devices = (0..world).map(D::for_rank).collect();
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT).with_algorithm(Algorithm::Ring);
    let ring = Communicator::init_all(devices, D::configure(config)).unwrap();
    let mut ts: Vec<_> = ring.iter().map(|c| t(c, &reduce_input::<i32>(ReduceOp::Max, c.rank(), 5, 0))).collect();
    let mut g = Group::new();
    for (c, x) in ring.iter().zip(ts.iter_mut()) {
        g.all_reduce(c, x, ReduceOp::Max);
    }
    g.run().unwrap();
    for x in &ts {
        assert_bits(&x.to_vec::<i32>().unwrap(), &reduced::<i32>(ReduceOp::Max, world, 5, 0), "ring group");
    }
    assert_eq!(ring[0].flight_recorder().last().map(|e| e.algorithm), Some(Algorithm::Ring));
}

/// Small ops between threads on host memory run as one exchange, without messages (the flight
/// recorder says `exchange`); parts above 4 KiB, a chosen algorithm, other devices and sockets
/// run message plans. Every collective gets the same bits either way.
pub fn small_ops_exchange<D: TestDevice>() {
    use ruccl::Algorithm;
    use ruccl::config::Transport;
    let exchanges =
        D::configure(CommConfig::default()).transport() == Transport::InProc && D::for_rank(0).host_memory();
    for (algorithm, n, expect) in
        [(Algorithm::Auto, 8, exchanges), (Algorithm::Auto, 1025, false), (Algorithm::Tree, 8, false)]
    {
        let opts = Opts::with_config(CommConfig::default().with_timeout(TEST_TIMEOUT).with_algorithm(algorithm));
        run::<D, _>(3, &opts, |ctx| {
            let (r, w) = (ctx.rank, ctx.world);
            let what = format!("{n} x f32, {algorithm}");
            let mut x = ctx.tensor(&reduce_input::<f32>(ReduceOp::Avg, r, n, 1));
            ctx.ok(ctx.comm.all_reduce(&mut x, ReduceOp::Avg), &what);
            ctx.check(&x, &reduced::<f32>(ReduceOp::Avg, w, n, 1), &what);
            let ran = ctx.comm.flight_recorder().last().map(|e| e.algorithm);
            assert_eq!(ran == Some(Algorithm::Exchange), expect, "rank {r}, {what}: ran {ran:?}");
            let mut y = Tensor::zeros(&ctx.dev, DType::F32, &[n * w]).unwrap();
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), &what);
            let all: Vec<f32> = (0..w).flat_map(|_| reduced::<f32>(ReduceOp::Avg, w, n, 1)).collect();
            ctx.check(&y, &all, &what);
            let mut z = ctx.tensor(&data::<f32>(r, n, 2));
            ctx.ok(ctx.comm.broadcast(&mut z, 2), &what);
            ctx.check(&z, &data::<f32>(2, n, 2), &what);
        });
    }
}

/// A group of sends and receives behind this rank's non-blocking sends joins them, as a
/// blocking receive does: an `isend` then a group holding its matching receive (both ranks)
/// waited for the isend before the group, and so deadlocked until the deadline; and a ring
/// of 3 whose group adds a second send to the same peer after the pending one keeps the order.
pub fn group_after_isend_joins_it<D: TestDevice>() {
    for world in [2, 3] {
        run::<D, _>(world, &Opts::timed(Duration::from_secs(20)), |ctx| {
            let (r, n) = (ctx.rank, ctx.world);
            let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
            let first = ctx.tensor(&[r as f32; 4]);
            let second = ctx.tensor(&[10.0 + r as f32; 4]);
            let (mut a, mut b) = (ctx.tensor(&[-1.0f32; 4]), ctx.tensor(&[-1.0f32; 4]));
            let t0 = Instant::now();
            let w = ctx.comm.send_async(&first, next).unwrap();
            let mut g = Group::new();
            g.recv(&ctx.comm, &mut a, prev);
            if n == 3 {
                g.send(&ctx.comm, &second, next).recv(&ctx.comm, &mut b, prev);
            }
            let results = g.run_each().unwrap();
            assert!(results.iter().all(Result::is_ok), "rank {r}: {results:?}");
            w.wait().unwrap();
            assert!(t0.elapsed() < Duration::from_secs(10), "rank {r}: took {:?}", t0.elapsed());
            assert_eq!(a.to_vec::<f32>().unwrap(), vec![prev as f32; 4], "rank {r}: the isend's data");
            if n == 3 {
                assert_eq!(b.to_vec::<f32>().unwrap(), vec![10.0 + prev as f32; 4], "rank {r}: the group's send");
            }
        });
    }
}

/// Two pre-multiplied ops in flight at once on one rank (non-blocking, or in one group):
/// `PreMulSum` and f16 `Avg` scale their input into a buffer first, and the rank had one such
/// buffer, written when an op was issued; the first op returned the second's result, with `Ok`
/// (a stranger's review; GradientSync's f16 buckets and the peer API's pipelined chunks too).
pub fn premultiplied_ops_in_flight_keep_their_inputs<D: TestDevice>() {
    for n in [64, 1 << 16] {
        for grouped in [false, true] {
            run::<D, _>(2, &Opts::default(), |ctx| {
                let r = ctx.rank as f32;
                let what = |op: &str| format!("{n} elements, grouped {grouped}, {op}");
                let a = ctx.tensor(&vec![1.0 + r; n]);
                let b = ctx.tensor(&vec![100.0 + r; n]);
                let op = ReduceOp::PreMulSum(0.5);
                let (mut ga, mut gb) = (ctx.tensor(&vec![1.0 + r; n]), ctx.tensor(&vec![100.0 + r; n]));
                // A group's ops run on the calling thread (not handed to the shared progress
                // thread, which the one-thread stamp checks): its pre-multiplied inputs are
                // tested on the other stamps.
                if grouped && ctx.comm.config().shared_progress() {
                    return;
                }
                if grouped {
                    let mut g = Group::new();
                    g.all_reduce(&ctx.comm, &mut ga, op).all_reduce(&ctx.comm, &mut gb, op);
                    ctx.ok(g.run(), what("group"));
                    ctx.check(&ga, &vec![1.5f32; n], what("the first PreMulSum"));
                    ctx.check(&gb, &vec![100.5f32; n], what("the second PreMulSum"));
                } else {
                    let wa = ctx.ok(ctx.comm.all_reduce_async(&a, op), what("issue"));
                    let wb = ctx.ok(ctx.comm.all_reduce_async(&b, op), what("issue"));
                    ctx.ok(wa.wait().and(wb.wait()), what("wait"));
                    ctx.check(&a, &vec![1.5f32; n], what("the first PreMulSum"));
                    ctx.check(&b, &vec![100.5f32; n], what("the second PreMulSum"));
                }
                if !ctx.dev.supports(DType::F16) {
                    return;
                }
                let h = |v: f32| half::f16::from_f32(v);
                let a = ctx.tensor(&vec![h(1.0 + r); n]);
                let b = ctx.tensor(&vec![h(100.0 + r); n]);
                let wa = ctx.ok(ctx.comm.all_reduce_async(&a, ReduceOp::Avg), what("issue f16"));
                let wb = ctx.ok(ctx.comm.all_reduce_async(&b, ReduceOp::Avg), what("issue f16"));
                ctx.ok(wa.wait().and(wb.wait()), what("wait f16"));
                ctx.check(&a, &vec![h(1.5); n], what("the first f16 Avg"));
                ctx.check(&b, &vec![h(100.5); n], what("the second f16 Avg"));
            });
        }
    }
}
