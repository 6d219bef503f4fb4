//! Point-to-point and barrier: a ring of sends, pairwise exchanges, several messages in a row
//! between one pair, send/recv interleaved with collectives, and barriers that really wait.
//!
//! A send returns only once its receiver has the data (as NCCL allows), so every pattern is
//! ordered to be deadlock-free: in the ring, rank 0 sends first and every other rank
//! receives first; in a pair, the lower rank sends first.

use std::sync::atomic::{AtomicUsize, Ordering};

use ruccl::{DType, ErrorKind, ReduceOp};

use crate::harness::{Ctx, Opts, TestDevice, run};
use crate::reference::{counts, data, reduce_input, reduced, sentinel};
use crate::vals;

pub fn send_recv<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        if ctx.world == 1 {
            // No peers: the only thing to check is that a rank cannot talk to itself.
            let t = ctx.tensor(&[1u8]);
            ctx.expect_err(ctx.comm.send(&t, 0), ErrorKind::InvalidArgument, &[], "send to self");
            return;
        }
        for dt in DType::ALL {
            send_recv_as::<D>(ctx, dt);
        }
    });
}

fn send_recv_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        // Ring: r -> r+1.
        let next = (r + 1) % w;
        let prev = (r + w - 1) % w;
        let what = format!("ring of send/recv ({n} x {})", dt);
        let mine = vals::data(dt, r, n, salt);
        let x = ctx.tensor_of(&mine);
        let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
        ctx.arrive();
        if r == 0 {
            ctx.ok(ctx.comm.send(&x, next), format!("{what}: send to {next}"));
            ctx.ok(ctx.comm.recv(&mut y, prev), format!("{what}: recv from {prev}"));
        } else {
            ctx.ok(ctx.comm.recv(&mut y, prev), format!("{what}: recv from {prev}"));
            ctx.arrive();
            ctx.ok(ctx.comm.send(&x, next), format!("{what}: send to {next}"));
        }
        ctx.check_vals(&y, &vals::data(dt, prev, n, salt), &what);
        ctx.check_vals(&x, &mine, format!("{what}: sent tensor must be unchanged"));

        // Pairs (2k, 2k+1) exchange three messages each way; an odd last rank sits out.
        let peer = r ^ 1;
        if peer < w {
            let what = format!("pairwise send/recv ({n} x {})", dt);
            for m in 0..3 {
                let mine = vals::data(dt, r, n, salt + m);
                let x = ctx.tensor_of(&mine);
                let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
                ctx.arrive();
                if r < peer {
                    ctx.ok(ctx.comm.send(&x, peer), format!("{what} #{m}: send"));
                    ctx.ok(ctx.comm.recv(&mut y, peer), format!("{what} #{m}: recv"));
                } else {
                    ctx.ok(ctx.comm.recv(&mut y, peer), format!("{what} #{m}: recv"));
                    ctx.ok(ctx.comm.send(&x, peer), format!("{what} #{m}: send"));
                }
                ctx.check_vals(&y, &vals::data(dt, peer, n, salt + m), format!("{what} #{m}"));
            }
        }
    }
}

/// Point-to-point calls between collectives keep their own sequence numbers.
pub fn p2p_interleaved_with_collectives<D: TestDevice>() {
    run::<D, _>(4, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        for round in 0..D::rounds(20) {
            let op = ReduceOp::ALL[round % ReduceOp::ALL.len()];
            let mut t = ctx.tensor(&reduce_input::<i32>(op, r, 7, round));
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut t, op), "all_reduce");
            ctx.check(&t, &reduced::<i32>(op, w, 7, round), format!("all_reduce, round {round}"));
            // Rank 0 sends to a different rank each round; the others do nothing.
            let to = 1 + round % (w - 1);
            if r == 0 {
                let x = ctx.tensor(&data::<u64>(round, 5, 1));
                ctx.arrive();
                ctx.ok(ctx.comm.send(&x, to), format!("send to {to}, round {round}"));
            } else if r == to {
                let mut y = ctx.tensor(&sentinel::<u64>(5));
                ctx.arrive();
                ctx.ok(ctx.comm.recv(&mut y, 0), format!("recv from 0, round {round}"));
                ctx.check(&y, &data::<u64>(round, 5, 1), format!("recv, round {round}"));
            }
        }
        ctx.ok(ctx.comm.barrier(), "final barrier");
    });
}

pub fn barrier<D: TestDevice>(world: usize) {
    let arrived = AtomicUsize::new(0);
    run::<D, _>(world, &Opts::default(), |ctx| {
        for round in 1..=D::rounds(30) {
            arrived.fetch_add(1, Ordering::SeqCst);
            ctx.arrive();
            ctx.ok(ctx.comm.barrier(), format!("barrier #{round}"));
            // Every rank counted itself before entering this barrier.
            let seen = arrived.load(Ordering::SeqCst);
            assert!(
                seen >= round * ctx.world,
                "barrier #{round} returned on rank {} after only {seen} of {} arrivals",
                ctx.rank,
                round * ctx.world
            );
        }
    });
}
