//! Many operations and many communicators: 1,000 consecutive small collectives on one
//! communicator, and several communicators driven from the same rank threads, both
//! interleaved on one thread and concurrently from several threads per rank; asking whether
//! a communicator is usable while another thread's op on it waits.

use std::time::Duration;

use ruccl::{CommConfig, Communicator, ErrorKind, ReduceOp, UniqueId};

use crate::harness::{Ctx, Opts, TEST_TIMEOUT, TestDevice, run};
use crate::reference::{data, reduce_input, reduced, sentinel};

pub fn thousand_small_all_reduces<D: TestDevice>() {
    let opts = Opts { shuffle: false, ..Opts::default() };
    let rounds = D::rounds(1000);
    run::<D, _>(4, &opts, |ctx| {
        for i in 0..rounds {
            let n = 1 + i % 8;
            let op = ReduceOp::ALL[i % ReduceOp::ALL.len()];
            let mut t = ctx.tensor(&reduce_input::<f32>(op, ctx.rank, n, i));
            // A few shuffled arrivals keep the ranks out of lockstep.
            if i % 50 == 0 {
                ctx.arrive();
            }
            ctx.ok(ctx.comm.all_reduce(&mut t, op), format!("all_reduce #{i}"));
            ctx.check(&t, &reduced::<f32>(op, 4, n, i), format!("all_reduce #{i}"));
        }
        let log = ctx.comm.flight_recorder();
        assert_eq!(log.last().map(|e| e.seq), Some(rounds as u64 - 1), "flight recorder: {log:?}");
    });
}

/// `is_usable` from another thread never waits for an op running on the communicator (a
/// small blocking op holds the rank's state lock while it runs): rank 1 asks while its
/// broadcast waits for rank 0, which joins only after the answer. Were the question to wait
/// for the op, the op would wait out its timeout and the answer would be `false`.
pub fn is_usable_never_waits_for_a_running_op<D: TestDevice>() {
    let opts = Opts { shuffle: false, ..Opts::default() };
    let answered = std::sync::Barrier::new(2);
    run::<D, _>(2, &opts, |ctx| {
        let mut t = ctx.tensor(&[ctx.rank as u32 + 7; 4]);
        if ctx.rank == 0 {
            answered.wait();
            ctx.ok(ctx.comm.broadcast(&mut t, 0), "broadcast");
            return;
        }
        let comm = &ctx.comm;
        std::thread::scope(|s| {
            let waiting = s.spawn(|| comm.broadcast(&mut t, 0));
            // Give the broadcast time to start waiting (the answer must be `true` either way).
            std::thread::sleep(std::time::Duration::from_millis(20));
            let usable = comm.is_usable();
            answered.wait();
            assert!(usable, "rank 1: unusable while its broadcast waits for rank 0");
            ctx.ok(waiting.join().expect("the broadcast's thread"), "broadcast");
        });
        ctx.check(&t, &[7u32; 4], "broadcast");
    });
}

/// Two threads of each rank hand one communicator between them one call at a time (a lock
/// around each call): one blocking all_reduces, the other issuing them without blocking and
/// waiting for each outside the lock. Every op is the same call, so any order of the two
/// threads' calls matches across ranks; each rank's ops must still run in the order they
/// took their sequence numbers (a blocking call that took its number after an op another
/// thread queued meanwhile must not run ahead of it: that deadlocks against peers running
/// the queued op first).
pub fn one_communicator_from_two_threads<D: TestDevice>() {
    let opts = Opts { shuffle: false, ..Opts::default() };
    let rounds = D::rounds(300);
    run::<D, _>(3, &opts, |ctx| {
        let (comm, w) = (&ctx.comm, ctx.world as f32);
        let ones = [ctx.tensor(&[1.0f32; 8]), ctx.tensor(&[1.0f32; 8])];
        let mut outs = [ctx.tensor(&[0.0f32; 8]), ctx.tensor(&[0.0f32; 8])];
        let [out_a, out_b] = &mut outs;
        let turn = std::sync::Mutex::new(());
        let turn = &turn;
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let (a, b) = (&ones[0], &ones[1]);
            let blocking = s.spawn(move || {
                for i in 0..rounds {
                    let _turn = turn.lock().unwrap();
                    comm.all_reduce_into(out_a, a, ReduceOp::Sum).map_err(|e| format!("blocking #{i}: {e}"))?;
                }
                Ok(())
            });
            let issuing = s.spawn(move || {
                for i in 0..rounds {
                    let work = {
                        let _turn = turn.lock().unwrap();
                        comm.all_reduce_into_async(out_b, b, ReduceOp::Sum)
                    };
                    work.and_then(|w| w.wait()).map_err(|e| format!("issued #{i}: {e}"))?;
                }
                Ok(())
            });
            [blocking, issuing].into_iter().map(|h| h.join().unwrap_or_else(|_| Err("panicked".into()))).collect()
        });
        for r in results {
            if let Err(e) = r {
                panic!("rank {}: {e}", ctx.rank);
            }
        }
        for out in &outs {
            ctx.check(out, &[w; 8], "the last all_reduce");
        }
    });
}

/// 1,000 consecutive ops cycling through every collective.
pub fn thousand_mixed_ops<D: TestDevice>() {
    let opts = Opts { shuffle: false, ..Opts::default() };
    run::<D, _>(3, &opts, |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        for i in 0..D::rounds(1000) {
            let n = i % 5;
            let root = i % w;
            let what = format!("op #{i}");
            match i % 8 {
                0 => {
                    let op = ReduceOp::ALL[(i / 8) % ReduceOp::ALL.len()];
                    let mut t = ctx.tensor(&reduce_input::<i64>(op, r, n, i));
                    ctx.ok(ctx.comm.all_reduce(&mut t, op), &what);
                    ctx.check(&t, &reduced::<i64>(op, w, n, i), &what);
                }
                1 => {
                    let mut t = ctx.tensor(&data::<u8>(r, n, i));
                    ctx.ok(ctx.comm.broadcast(&mut t, root), &what);
                    ctx.check(&t, &data::<u8>(root, n, i), &what);
                }
                2 => {
                    let op = ReduceOp::Max;
                    let mut t = ctx.tensor(&reduce_input::<f64>(op, r, n, i));
                    ctx.ok(ctx.comm.reduce(&mut t, op, root), &what);
                    if r == root {
                        ctx.check(&t, &reduced::<f64>(op, w, n, i), &what);
                    }
                }
                3 => {
                    let x = ctx.tensor(&data::<i32>(r, n, i));
                    let mut y = ctx.tensor(&sentinel::<i32>(w * n));
                    ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), &what);
                    let want: Vec<i32> = (0..w).flat_map(|k| data::<i32>(k, n, i)).collect();
                    ctx.check(&y, &want, &what);
                }
                4 => {
                    let op = ReduceOp::Sum;
                    let x = ctx.tensor(&reduce_input::<u32>(op, r, w * n, i));
                    let mut y = ctx.tensor(&sentinel::<u32>(n));
                    ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, op), &what);
                    let all = reduced::<u32>(op, w, w * n, i);
                    ctx.check(&y, &all[r * n..(r + 1) * n], &what);
                }
                5 => {
                    let mut t = ctx.tensor(&data::<i8>(r, w * n, i));
                    ctx.ok(ctx.comm.all_to_all_single_in_place(&mut t), &what);
                    let want: Vec<i8> =
                        (0..w).flat_map(|k| data::<i8>(k, w * n, i)[r * n..(r + 1) * n].to_vec()).collect();
                    ctx.check(&t, &want, &what);
                }
                6 => {
                    let x = ctx.tensor(&data::<f32>(r, n, i));
                    let mut y = ctx.tensor(&sentinel::<f32>(w * n));
                    ctx.ok(ctx.comm.gather(Some(&mut y), &x, root), &what);
                    if r == root {
                        let want: Vec<f32> = (0..w).flat_map(|k| data::<f32>(k, n, i)).collect();
                        ctx.check(&y, &want, &what);
                    }
                }
                _ => ctx.ok(ctx.comm.barrier(), &what),
            }
        }
    });
}

fn join_extra<D: TestDevice>(ctx: &Ctx<D>, id: &UniqueId) -> Communicator<D> {
    let cfg = CommConfig::default().with_timeout(TEST_TIMEOUT);
    Communicator::with_config(ctx.dev.clone(), ctx.world, id.clone(), ctx.rank, D::configure(cfg))
        .unwrap_or_else(|e| panic!("joining an extra communicator: {e}"))
}

/// Three communicators on the same threads, calls interleaved in the same order on every
/// rank.
pub fn communicators_interleaved<D: TestDevice>() {
    let ids = [UniqueId::new().unwrap(), UniqueId::new().unwrap()];
    run::<D, _>(3, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        let extra: Vec<_> = ids.iter().map(|id| join_extra(ctx, id)).collect();
        let comms = [&ctx.comm, &extra[0], &extra[1]];
        for i in 0..D::rounds(60) {
            let c = comms[i % 3];
            let op = ReduceOp::ALL[i % ReduceOp::ALL.len()];
            let mut t = ctx.tensor(&reduce_input::<f32>(op, r, 9, i));
            ctx.arrive();
            ctx.ok(c.all_reduce(&mut t, op), format!("all_reduce #{i} on communicator {}", i % 3));
            ctx.check(&t, &reduced::<f32>(op, w, 9, i), format!("all_reduce #{i}"));
            let c = comms[(i + 1) % 3];
            let mut t = ctx.tensor(&data::<half::f16>(r, 4, i));
            ctx.arrive();
            ctx.ok(c.broadcast(&mut t, i % w), format!("broadcast #{i}"));
            ctx.check(&t, &data::<half::f16>(i % w, 4, i), format!("broadcast #{i}"));
        }
    });
}

/// Each rank drives two communicators from two threads at once (and the harness's one from
/// a third).
pub fn communicators_on_separate_threads<D: TestDevice>() {
    let ids = [UniqueId::new().unwrap(), UniqueId::new().unwrap()];
    run::<D, _>(4, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        let extra: Vec<_> = ids.iter().map(|id| join_extra(ctx, id)).collect();
        std::thread::scope(|s| {
            let a = &extra[0];
            s.spawn(move || {
                for i in 0..D::rounds(200) {
                    let op = ReduceOp::Sum;
                    let mut t = ctx.tensor(&reduce_input::<i32>(op, r, 33, i));
                    ctx.ok(a.all_reduce(&mut t, op), format!("thread A: all_reduce #{i}"));
                    ctx.check(&t, &reduced::<i32>(op, w, 33, i), format!("thread A: #{i}"));
                }
            });
            let b = &extra[1];
            s.spawn(move || {
                for i in 0..D::rounds(200) {
                    let x = ctx.tensor(&data::<f64>(r, 17, i));
                    let mut y = ctx.tensor(&sentinel::<f64>(w * 17));
                    ctx.ok(b.all_gather_into_tensor(&mut y, &x), format!("thread B: all_gather #{i}"));
                    let want: Vec<f64> = (0..w).flat_map(|k| data::<f64>(k, 17, i)).collect();
                    ctx.check(&y, &want, format!("thread B: #{i}"));
                }
            });
            for i in 0..D::rounds(200) {
                let mut t = ctx.tensor(&data::<u8>(r, 3, i));
                ctx.ok(ctx.comm.broadcast(&mut t, i % w), format!("main thread: broadcast #{i}"));
                ctx.check(&t, &data::<u8>(i % w, 3, i), format!("main thread: #{i}"));
            }
        });
        for c in [&ctx.comm, &extra[0], &extra[1]] {
            assert!(c.is_usable());
            ctx.ok(c.barrier(), "barrier");
        }
    });
}

/// A call made while another thread's call on the same communicator is in flight fails with
/// `InvalidArgument` saying so, and aborts the communicator: the call in flight fails, and so
/// does the peer's, rather than pairing the data of different calls (two threads' calls can
/// be ordered differently on each rank: found returning `Ok` with wrong sums across
/// processes).
pub fn a_second_thread_in_a_call_is_refused_and_aborts<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(Duration::from_secs(30)), |ctx| {
        if ctx.rank == 0 {
            std::thread::scope(|s| {
                let first = s.spawn(|| {
                    let mut t = ctx.tensor(&[1.0f32; 4]);
                    ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
                });
                // The all_reduce waits for rank 1, which comes only later.
                std::thread::sleep(Duration::from_millis(100));
                let e = ctx.expect_err(
                    ctx.comm.barrier(),
                    ErrorKind::InvalidArgument,
                    &["barrier", "another thread's call on it was in flight", "aborted"],
                    "a second thread's call",
                );
                assert_eq!(e.context().rank, Some(0), "{e}");
                let first = first.join().unwrap();
                assert!(first.is_err(), "the call in flight must fail too: {first:?}");
            });
        } else {
            std::thread::sleep(Duration::from_millis(300));
            let mut t = ctx.tensor(&[1.0f32; 4]);
            let r = ctx.comm.all_reduce(&mut t, ReduceOp::Sum);
            assert!(r.is_err(), "rank 1's all_reduce must fail: {r:?}");
        }
        ctx.sync.wait();
        assert!(!ctx.comm.is_usable());
    });
}
