//! Failures that are nobody's arguments: a rank that never calls (→ `Timeout` at the deadline,
//! naming it, with the flight recorder), `abort()` from another thread or rank, peers that
//! drop their communicator. Afterwards every call fails at once with `Aborted`, and nothing
//! ever hangs — including `Drop`.

use std::time::{Duration, Instant};

use ruccl::{ErrorKind, ReduceOp};

use crate::harness::{Ctx, Opts, TestDevice, names_rank, run, run_owned};
use crate::reference::{data, reduce_input, reduced, sentinel};

/// How long past its deadline a timed-out call may take to return.
const SLACK: Duration = Duration::from_secs(2);
/// How soon a call on an aborted communicator, or a woken waiter, must return.
const PROMPT: Duration = Duration::from_millis(1000);

fn good_all_reduce<D: TestDevice>(ctx: &Ctx<D>, salt: usize) {
    let op = ReduceOp::Sum;
    let mut t = ctx.tensor(&reduce_input::<f32>(op, ctx.rank, 9, salt));
    ctx.ok(ctx.comm.all_reduce(&mut t, op), "all_reduce");
    ctx.check(&t, &reduced::<f32>(op, ctx.world, 9, salt), "all_reduce");
}

/// Every later call fails at once with `Aborted`.
fn assert_sticky<D: TestDevice>(ctx: &Ctx<D>, after: &str) {
    let t0 = Instant::now();
    ctx.expect_err(ctx.comm.barrier(), ErrorKind::Aborted, &["barrier"], format!("barrier after {after}"));
    let mut t = ctx.tensor(&[1u8, 2]);
    ctx.expect_err(
        ctx.comm.all_reduce(&mut t, ReduceOp::Sum),
        ErrorKind::Aborted,
        &["all_reduce"],
        format!("all_reduce after {after}"),
    );
    let took = t0.elapsed();
    assert!(took < PROMPT, "rank {}: calls after {after} took {took:?}", ctx.rank);
    assert!(!ctx.comm.is_usable());
}

/// Rank `missing` skips collective op `#skip_at`; the others time out naming it.
fn missing_rank<D: TestDevice>(world: usize, missing: usize, skip_at: usize) {
    let timeout = Duration::from_millis(400);
    run::<D, _>(world, &Opts::timed(timeout), |ctx| {
        for i in 0..skip_at {
            good_all_reduce(ctx, i);
        }
        if ctx.rank == missing {
            ctx.sync.wait();
            // The others gave up on this op: arriving late, this rank learns at once that the op
            // failed (the others' Timeout, relayed) or that the communicator is aborted.
            let t0 = Instant::now();
            let e = ctx.comm.barrier().unwrap_err();
            assert!(t0.elapsed() < PROMPT, "took {:?}", t0.elapsed());
            assert!(
                matches!(e.kind(), ErrorKind::Aborted | ErrorKind::Timeout),
                "rank {missing}: arriving late at an op that timed out elsewhere: {e}"
            );
            assert!(e.message().contains("all_gather"), "names the op that failed: {e}");
            assert_sticky(ctx, "the others timed out");
            return;
        }
        let x = ctx.tensor(&data::<i32>(ctx.rank, 5, 0));
        let mut y = ctx.tensor(&sentinel::<i32>(5 * world));
        let t0 = Instant::now();
        let r = ctx.comm.all_gather_into_tensor(&mut y, &x);
        let took = t0.elapsed();
        let e = ctx.expect_err(r, ErrorKind::Timeout, &["all_gather"], format!("all_gather without rank {missing}"));
        assert!(took < timeout + SLACK, "rank {}: timed out after {took:?}", ctx.rank);
        assert!(
            names_rank(e.message(), missing),
            "rank {}: the timeout message should name the missing rank {missing}: {e}",
            ctx.rank
        );
        let report = e.report().unwrap_or_else(|| panic!("a Timeout carries the flight recorder: {e}"));
        assert!(report.contains("flight recorder"), "{report}");
        assert!(names_rank(report, missing), "{report}");
        assert!(e.to_string().contains(report), "Display shows the report: {e}");
        assert_sticky(ctx, "a timeout");
        ctx.sync.wait();
    });
}

pub fn missing_rank_times_out<D: TestDevice>() {
    missing_rank::<D>(3, 2, 2);
}

pub fn missing_rank_on_first_op<D: TestDevice>() {
    missing_rank::<D>(4, 1, 0);
}

/// An op that keeps moving, one element per chunk (a chunk size of 1 byte), ends at its
/// deadline all the same: its waits each end in time, and it ran on for minutes. A rank
/// whose op finished first may return `Ok` (with exact data); none returns late.
pub fn a_slow_moving_op_ends_at_its_deadline<D: TestDevice>() {
    let timeout = Duration::from_millis(300);
    let opts = Opts { config: D::configure(ruccl::CommConfig::default().with_timeout(timeout).with_chunk_bytes(1).with_algorithm(ruccl::Algorithm::Ring)), ..Opts::default() };
    let n = 1 << 18;
    run::<D, _>(2, &opts, |ctx: &Ctx<D>| {
        let mut t = ctx.tensor(&reduce_input::<f32>(ReduceOp::Sum, ctx.rank, n, 0));
        let started = Instant::now();
        let r = ctx.comm.all_reduce(&mut t, ReduceOp::Sum);
        let took = started.elapsed();
        assert!(took < timeout + SLACK, "rank {} returned after {took:?}: {r:?}", ctx.rank);
        match r {
            Ok(()) => ctx.check(&t, &reduced::<f32>(ReduceOp::Sum, 2, n, 0), "an all_reduce that finished in time"),
            Err(e) => assert!(matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Aborted), "{e}"),
        }
    });
}

/// `abort()` from a helper thread wakes this rank's blocked collective, and a blocked
/// receive, which names its peer in the error's context too.
pub fn abort_wakes_blocked_rank<D: TestDevice>() {
    for recv in [false, true] {
        run::<D, _>(2, &Opts::timed(Duration::from_secs(30)), |ctx| {
            if ctx.rank == 0 {
                std::thread::scope(|s| {
                    s.spawn(|| {
                        std::thread::sleep(Duration::from_millis(150));
                        ctx.comm.abort();
                    });
                    let mut t = ctx.tensor(&[1.0f32; 4]);
                    let t0 = Instant::now();
                    let r = if recv { ctx.comm.recv(&mut t, 1) } else { ctx.comm.all_reduce(&mut t, ReduceOp::Sum) };
                    let took = t0.elapsed();
                    let e = ctx.expect_err(r, ErrorKind::Aborted, &["abort"], "aborted from another thread");
                    assert!(took < Duration::from_millis(150) + PROMPT, "woke after {took:?}");
                    if recv {
                        assert_eq!(e.context().peer, Some(1), "{e}");
                    }
                });
            }
            ctx.sync.wait();
            assert_sticky(ctx, "abort()");
        });
    }
}

/// `abort()` on one rank wakes a peer rank blocked in a collective.
pub fn abort_from_peer_rank<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(Duration::from_secs(30)), |ctx| {
        good_all_reduce(ctx, 0);
        // Ops end at different times on different ranks: abort only once all are done.
        ctx.sync.wait();
        if ctx.rank == 1 {
            std::thread::sleep(Duration::from_millis(150));
            ctx.comm.abort();
        } else {
            let x = ctx.tensor(&[7i64; 3]);
            let mut y = ctx.tensor(&[0i64; 6]);
            let t0 = Instant::now();
            let r = ctx.comm.all_gather_into_tensor(&mut y, &x);
            let took = t0.elapsed();
            let e = ctx.expect_err(r, ErrorKind::Aborted, &[], "all_gather aborted by rank 1");
            assert!(names_rank(e.message(), 1), "the message names who aborted: {e}");
            assert!(took < Duration::from_millis(150) + PROMPT, "woke after {took:?}");
        }
        ctx.sync.wait();
        assert_sticky(ctx, "rank 1's abort()");
    });
}

pub fn abort_idle_communicator<D: TestDevice>() {
    run::<D, _>(3, &Opts::timed(Duration::from_secs(30)), |ctx| {
        good_all_reduce(ctx, 0);
        ctx.sync.wait();
        if ctx.rank == 0 {
            ctx.comm.abort();
            ctx.comm.abort(); // twice is harmless
        }
        ctx.sync.wait();
        assert_sticky(ctx, "abort() between collectives");
    });
}

/// Ranks that stay away between collectives for longer than the peer-silence limit (computing,
/// their connections unread meanwhile) are not lost to each other: the heartbeats that waited
/// in the sockets count.
pub fn quiet_gap_longer_than_silence<D: TestDevice>() {
    let config = ruccl::CommConfig::default()
        .with_timeout(Duration::from_secs(30))
        // Short enough that the gap below is three limits long, long enough that a heartbeat
        // thread held off a loaded machine's cores for a while does not look silent.
        .with_peer_silence(Duration::from_millis(250));
    run::<D, _>(2, &Opts { shuffle: false, ..Opts::with_config(config) }, |ctx| {
        // Enough ops that each rank reads its connection itself at the end (it then leaves it
        // unread while it sleeps).
        for i in 0..20 {
            good_all_reduce(ctx, i);
        }
        std::thread::sleep(Duration::from_millis(800));
        good_all_reduce(ctx, 20);
    });
}

/// A rank drops its communicator between collectives; the others' next collective fails with
/// `PeerLost` (or at worst `Timeout`), never hangs.
pub fn peer_drops_mid_way<D: TestDevice>() {
    let timeout = Duration::from_secs(3);
    run_owned::<D, _>(3, &Opts::timed(timeout), |ctx| {
        good_all_reduce(&ctx, 0);
        ctx.sync.wait();
        if ctx.rank == 2 {
            let sync = ctx.sync.clone();
            let t0 = Instant::now();
            drop(ctx);
            assert!(t0.elapsed() < PROMPT, "drop took {:?}", t0.elapsed());
            sync.wait();
            return;
        }
        ctx.sync.wait();
        let mut t = ctx.tensor(&[1u32; 16]);
        let t0 = Instant::now();
        let e = ctx.comm.all_reduce(&mut t, ReduceOp::Max).unwrap_err();
        let took = t0.elapsed();
        assert!(
            matches!(e.kind(), ErrorKind::PeerLost | ErrorKind::Timeout),
            "rank {}: expected PeerLost or Timeout, got {e}",
            ctx.rank
        );
        assert!(took < timeout + SLACK, "rank {}: took {took:?}", ctx.rank);
        if e.kind() == ErrorKind::PeerLost {
            assert!(took < PROMPT, "rank {}: PeerLost after {took:?}", ctx.rank);
        }
        assert!(names_rank(e.message(), 2), "rank {}: should name rank 2: {e}", ctx.rank);
        assert_sticky(&ctx, "a peer dropped");
    });
}

/// A rank blocked in a collective wakes promptly when its peer drops the communicator.
pub fn drop_wakes_blocked_peer<D: TestDevice>() {
    run_owned::<D, _>(2, &Opts::timed(Duration::from_secs(30)), |ctx| {
        if ctx.rank == 1 {
            std::thread::sleep(Duration::from_millis(150));
            drop(ctx);
            return;
        }
        let mut t = ctx.tensor(&[1i8; 5]);
        let t0 = Instant::now();
        let e = ctx.comm.broadcast(&mut t, 1).unwrap_err();
        let took = t0.elapsed();
        assert_eq!(e.kind(), ErrorKind::PeerLost, "{e}");
        assert!(names_rank(e.message(), 1), "should name rank 1: {e}");
        assert!(took < Duration::from_millis(150) + PROMPT, "woke after {took:?}");
    });
}

/// A rank drops its communicator with a non-blocking all_reduce issued, before its peers
/// reach the op (300 ms later): the drop returns at once, the op still finishes on every
/// rank with the right sum (the rank leaves once it is done), on every transport. Then the
/// same with peers that never come: the dropped rank's `Work` fails at its deadline with a
/// `Timeout` naming a peer, not a `PeerLost` nor an error about its own departure.
pub fn drop_with_work_pending_finishes_it<D: TestDevice>() {
    run_owned::<D, _>(3, &Opts::timed(Duration::from_secs(20)), |ctx| {
        let x = ctx.tensor(&[ctx.rank as f32 + 1.0; 6]);
        if ctx.rank == 0 {
            let work = ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap();
            timed_drop("a communicator with an op pending", ctx.comm);
            work.wait().unwrap_or_else(|e| panic!("the op issued before the drop: {e}"));
            assert_eq!(x.to_vec::<f32>().unwrap(), vec![6.0; 6]);
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut y = ctx.tensor(&[ctx.rank as f32 + 1.0; 6]);
        ctx.ok(ctx.comm.all_reduce(&mut y, ReduceOp::Sum), "all_reduce with a rank that dropped its communicator");
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![6.0; 6]);
    });
    let timeout = Duration::from_millis(500);
    run_owned::<D, _>(2, &Opts::timed(timeout), |ctx| {
        let x = ctx.tensor(&[1.0f32; 6]);
        if ctx.rank == 0 {
            let work = ctx.comm.all_reduce_async(&x, ReduceOp::Sum).unwrap();
            let t0 = Instant::now();
            timed_drop("a communicator with an op pending", ctx.comm);
            let e = work.wait().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
            assert!(names_rank(e.message(), 1), "should name rank 1: {e}");
            assert!(t0.elapsed() < timeout + SLACK, "took {:?}", t0.elapsed());
        }
        // Rank 1 never calls; its communicator outlives the op's deadline.
        ctx.sync.wait();
    });
}

fn timed_drop<T>(what: &str, value: T) {
    let t0 = Instant::now();
    drop(value);
    assert!(t0.elapsed() < PROMPT, "dropping {what} took {:?}", t0.elapsed());
}

/// Dropping never waits: fresh, used, failed, aborted communicators and split children, in
/// every order.
pub fn drop_never_hangs<D: TestDevice>() {
    // Dropped right after joining.
    run_owned::<D, _>(3, &Opts::default(), |ctx| timed_drop("a fresh communicator", ctx));
    // Parents dropped before their children, children aborted, then dropped.
    run_owned::<D, _>(3, &Opts::timed(Duration::from_secs(5)), |ctx| {
        good_all_reduce(&ctx, 1);
        let child = ctx.ok(ctx.comm.split_all(), "split_all");
        ctx.sync.wait();
        timed_drop("a parent before its child", ctx.comm);
        ctx.sync.wait();
        // The child does not depend on its parent.
        let mut t = ruccl::Tensor::from_slice(&ctx.dev, &[1.0f32], &[1]).unwrap();
        child
            .all_reduce(&mut t, ReduceOp::Sum)
            .unwrap_or_else(|e| panic!("all_reduce on a child after its parent dropped: {e}"));
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0]);
        ctx.sync.wait();
        if ctx.rank == 0 {
            child.abort();
        }
        ctx.sync.wait();
        timed_drop("an aborted child", child);
    });
    // Dropped after a failure on some ranks, with one rank never having called.
    run_owned::<D, _>(2, &Opts::timed(Duration::from_millis(200)), |ctx| {
        if ctx.rank == 0 {
            let _ = ctx.comm.barrier();
        }
        timed_drop("a communicator after a timeout", ctx);
    });
}
