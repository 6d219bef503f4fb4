//! Errors that tell the truth on every rank: a root mismatch reaches every rank (on that call
//! or, where a rank exchanged nothing that disagreed, on its next one); a rank cut short by
//! someone else's later failure gets `Aborted` naming it; a timeout names the rank furthest
//! behind (or the deadlock); a local device failure stops the peers at once; a peer's last
//! message is delivered even when it leaves right after sending it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ruccl::{Algorithm, CommConfig, DType, ErrorKind, Rank, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TestDevice, names_rank, run, run_owned};
use crate::staged_device::{FlakyDevice, fail_next_alloc};

/// A rooted collective where ranks below `split` use root 0 and the others root `world - 1`.
fn rooted_call<D: TestDevice>(ctx: &Ctx<D>, which: usize, split: usize) -> ruccl::Result<()> {
    let (w, r) = (ctx.world, ctx.rank);
    let root: Rank = if r < split { 0 } else { w - 1 };
    let n = 6;
    match which {
        0 => {
            let mut t = ctx.tensor(&[r as f32; 6]);
            ctx.comm.broadcast(&mut t, root)
        }
        1 => {
            let mut t = ctx.tensor(&[r as i32; 6]);
            ctx.comm.reduce(&mut t, ReduceOp::Sum, root)
        }
        2 => {
            let x = ctx.tensor(&[r as u8; 6]);
            let mut y = Tensor::zeros(&ctx.dev, DType::U8, &[n * w]).unwrap();
            ctx.comm.gather((r == root).then_some(&mut y), &x, root)
        }
        _ => {
            let x = Tensor::zeros(&ctx.dev, DType::F64, &[n * w]).unwrap();
            let mut y = Tensor::zeros(&ctx.dev, DType::F64, &[n]).unwrap();
            ctx.comm.scatter(&mut y, (r == root).then_some(&x), root)
        }
    }
}

/// Ranks that disagree on the root: every rank gets `Mismatch` — from that call, or, when
/// nothing it exchanged disagreed and it returned `Ok`, from its very next call, naming the
/// earlier op. Broadcast, reduce, gather and scatter, world sizes 2 to 8, every split.
pub fn root_mismatch_reaches_every_rank<D: TestDevice>() {
    for world in 2..=8 {
        for which in 0..4 {
            for split in [1, world / 2, world - 1] {
                run::<D, _>(world, &Opts::timed(Duration::from_secs(10)), |ctx| {
                    let what = format!("rooted op {which}, world {world}, split {split}");
                    let e = match rooted_call(ctx, which, split) {
                        Err(e) => e,
                        Ok(()) => {
                            let e = ctx.comm.barrier().expect_err("the call after an unseen mismatch must fail");
                            assert!(e.message().contains("op #0"), "{what}: {e}");
                            e
                        }
                    };
                    assert_eq!(e.kind(), ErrorKind::Mismatch, "{what}, rank {}: {e}", ctx.rank);
                    assert!(e.to_string().contains("root"), "{what}: the error does not show the roots: {e}");
                });
            }
        }
    }
}

/// Ranks that disagree on the root, and a rank whose call returned `Ok` drops its
/// communicator at once: every rank that fails gets `Mismatch`, not `PeerLost` blaming the
/// rank that left (a broadcast's non-root that received from its root is done; a rank that
/// took another rank as the root waited for it). World sizes 2 to 4, every split.
pub fn root_mismatch_then_a_rank_leaves<D: TestDevice>() {
    for world in 2..=4 {
        for which in 0..4 {
            for split in 1..world {
                run_owned::<D, _>(world, &Opts::timed(Duration::from_secs(10)), |ctx| {
                    let what = format!("rooted op {which}, world {world}, split {split}, rank {}", ctx.rank);
                    if let Err(e) = rooted_call(&ctx, which, split) {
                        assert_eq!(e.kind(), ErrorKind::Mismatch, "{what}: {e}");
                    }
                });
            }
        }
    }
}

/// Rank 0 is the root of a reduce or gather — which waits for every part and publishes none
/// of its own — while every other rank calls another op with root 0 (the other of reduce and
/// gather, a broadcast, a scatter) or an all_reduce: every rank gets `Mismatch`, from that call
/// or from its next one. The non-roots that wait for nothing look at rank 0's slot and find
/// nothing there; rank 0 is the one that sees their calls. World sizes 2 to 5.
pub fn quiet_root_mismatch_reaches_every_rank<D: TestDevice>() {
    for world in 2..=5 {
        for (root_op, other) in [(1, 2), (2, 1), (1, 0), (2, 3), (1, 4), (2, 4)] {
            run::<D, _>(world, &Opts::timed(Duration::from_secs(10)), |ctx| {
                let r = ctx.rank;
                let what = format!("world {world}, rank 0 calls op {root_op}, the others op {other}, rank {r}");
                let which = if r == 0 { root_op } else { other };
                let result = if which == 4 {
                    let mut t = ctx.tensor(&[r as i32; 6]);
                    ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
                } else {
                    rooted_call(ctx, which, world)
                };
                let e = match result {
                    Err(e) => e,
                    Ok(()) => {
                        let e = ctx.comm.barrier().expect_err("the call after an unseen mismatch must fail");
                        assert!(e.message().contains("op #0"), "{what}: {e}");
                        e
                    }
                };
                assert_eq!(e.kind(), ErrorKind::Mismatch, "{what}: {e}");
            });
        }
    }
}

/// Every rank names the next one as the root of a broadcast or scatter, so each is a
/// non-root of its own call waiting for a rank that is not the root it named: every rank gets
/// `Mismatch` naming the roots (a non-root checks only its root's part; here each such part
/// disagrees). World sizes 2 to 6.
pub fn cyclic_roots_mismatch_on_every_rank<D: TestDevice>() {
    for world in 2..=6 {
        for which in [0, 3] {
            run::<D, _>(world, &Opts::timed(Duration::from_secs(10)), |ctx| {
                let (w, r) = (ctx.world, ctx.rank);
                let root = (r + 1) % w;
                let what = format!("rooted op {which}, world {w}, rank {r} naming root {root}");
                let result = if which == 0 {
                    let mut t = ctx.tensor(&[r as f32; 6]);
                    ctx.comm.broadcast(&mut t, root)
                } else {
                    let mut y = Tensor::zeros(&ctx.dev, DType::F64, &[6]).unwrap();
                    ctx.comm.scatter(&mut y, None, root)
                };
                let e = result.expect_err(&what);
                assert_eq!(e.kind(), ErrorKind::Mismatch, "{what}: {e}");
                assert!(e.to_string().contains("root"), "{what}: the error does not show the roots: {e}");
            });
        }
    }
}

/// World 4, ring plans: ranks 0 and 1 finish a broadcast (a chain 0→1→2→3) while rank 3 has
/// not arrived and rank 2 waits for it; then 0 and 1 mismatch on the next all_reduce. Rank
/// 2, still in its correct broadcast, and rank 3, arriving at it late, are cut short: both
/// get `Aborted` naming op #1 and the rank that failed first — not a `Mismatch` they never
/// had a part in.
pub fn cut_short_by_a_later_failure_is_aborted<D: TestDevice>() {
    let config = CommConfig::default().with_timeout(Duration::from_secs(10)).with_algorithm(Algorithm::Ring);
    let failed = AtomicUsize::new(0);
    run::<D, _>(4, &Opts { shuffle: false, ..Opts::with_config(config) }, |ctx| {
        let mut t = ctx.tensor(&[ctx.rank as f32; 8]);
        if ctx.rank == 3 {
            let t0 = Instant::now();
            while failed.load(Ordering::SeqCst) < 2 && t0.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let first = ctx.comm.broadcast(&mut t, 0);
        if ctx.rank >= 2 {
            let e = ctx.expect_err(first, ErrorKind::Aborted, &["op #1", "failed first"], "the cut-short broadcast");
            assert!(matches!(e.context().peer, Some(0 | 1)), "{e}");
            return;
        }
        ctx.ok(first, "broadcast");
        let op = if ctx.rank == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let e = ctx.comm.all_reduce(&mut t, op).expect_err("mismatched all_reduce");
        failed.fetch_add(1, Ordering::SeqCst);
        assert_eq!(e.kind(), ErrorKind::Mismatch, "{e}");
    });
}

/// A rank that never calls: every other rank's timeout names it (the root cause), not the
/// neighbour it happened to wait on — with a ring, rank 1 waits on rank 0.
pub fn timeout_names_the_rank_furthest_behind<D: TestDevice>() {
    let config = CommConfig::default().with_timeout(Duration::from_millis(600)).with_algorithm(Algorithm::Ring);
    run::<D, _>(4, &Opts { shuffle: false, ..Opts::with_config(config) }, |ctx| {
        if ctx.rank == 3 {
            ctx.sync.wait();
            return;
        }
        let mut t = ctx.tensor(&[1u32; 64]);
        let e = ctx.comm.all_reduce(&mut t, ReduceOp::Sum).expect_err("rank 3 never comes");
        ctx.sync.wait();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert_eq!(e.context().peer, Some(3), "rank {}: blames the wrong rank: {e}", ctx.rank);
        assert!(names_rank(e.message(), 3) && e.message().contains("never reached op #0"), "{e}");
        assert!(!e.message().contains(&format!("rank {} never", ctx.rank)), "blames itself: {e}");
    });
}

/// Two ranks that both receive from each other: the timeout says it is a deadlock, and no
/// rank names itself as its peer.
pub fn recv_recv_deadlock_is_named<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(Duration::from_millis(400)), |ctx| {
        let mut t = ctx.tensor(&[0i64; 3]);
        let e = ctx.comm.recv(&mut t, 1 - ctx.rank).expect_err("both ranks receive");
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert_eq!(e.context().peer, Some(1 - ctx.rank), "{e}");
        assert!(e.message().contains("deadlock"), "{e}");
    });
}

/// A peer that sends its last message and drops its communicator at once: the message is
/// delivered (the departure never overtakes it). Split children dropped right after their
/// all_reduce, many times, under load.
pub fn departure_never_overtakes_a_delivery<D: TestDevice>() {
    run_owned::<D, _>(3, &Opts { shuffle: false, ..Opts::default() }, |ctx| {
        for i in 0..D::rounds(40) as u64 {
            let child = ctx.ok(ctx.comm.split_all(), "split_all");
            let mut t = Tensor::from_slice(&ctx.dev, &[ctx.rank as u64 + i; 5], &[5]).unwrap();
            ctx.ok(child.all_reduce(&mut t, ReduceOp::Sum), format!("child all_reduce {i}"));
            drop(child);
            ctx.check(&t, &[3 * i + 3; 5], "child all_reduce");
        }
    });
}

/// Rank 1 cannot allocate its scratch memory before its plan starts: the peers fail at once
/// with that cause (a `Device` error naming rank 1), not after the whole timeout.
pub fn local_failure_stops_peers_at_once() {
    let timeout = Duration::from_secs(20);
    run::<FlakyDevice, _>(3, &Opts::timed(timeout), |ctx| {
        let mut t = ctx.tensor(&[1.0f32; 16]);
        if ctx.rank == 1 {
            fail_next_alloc();
        }
        let t0 = Instant::now();
        let e = ctx.comm.all_reduce(&mut t, ReduceOp::Sum).expect_err("rank 1 cannot allocate");
        assert!(t0.elapsed() < timeout / 4, "rank {} waited {:?} for a local failure", ctx.rank, t0.elapsed());
        assert_eq!(e.kind(), ErrorKind::Device, "{e}");
        assert!(e.to_string().contains("out of memory"), "{e}");
        if ctx.rank != 1 {
            assert!(e.to_string().contains("rank 1 failed first"), "{e}");
        }
    });
}
