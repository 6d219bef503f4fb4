//! Point-to-point and barrier: a ring of sends, pairwise exchanges, several messages in a row
//! between one pair, send/recv interleaved with collectives, and barriers that really wait.
//!
//! A send returns only once its receiver has the data (as NCCL allows), so every pattern is
//! ordered to be deadlock-free: in the ring, rank 0 sends first and every other rank
//! receives first; in a pair, the lower rank sends first.

use std::sync::atomic::{AtomicUsize, Ordering};

use ruccl::{DType, ErrorKind, Group, ReduceOp, Tensor};

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

/// torch's ring of non-blocking point-to-point calls, each rank sending to the next before it
/// receives from the previous: the calls move together and complete (`isend` then `irecv`;
/// `isend` then a blocking `recv`), several messages on one lane keep their order, and a
/// collective issued behind them runs once they are done.
pub fn async_ring<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        if w == 1 {
            return;
        }
        let (next, prev) = ((r + 1) % w, (r + w - 1) % w);
        // Small (one slot), and large (in chunks between processes).
        for (salt, n) in [(0, 3), (1, 70_000)] {
            let what = format!("{n} x i32");
            let x = ctx.tensor(&data::<i32>(r, n, salt));
            let y = ctx.tensor(&sentinel::<i32>(n));
            ctx.arrive();
            let send = ctx.ok(ctx.comm.send_async(&x, next), format!("{what}: send_async"));
            let recv = ctx.ok(ctx.comm.recv_async(&y, prev), format!("{what}: recv_async"));
            ctx.ok(recv.wait(), format!("{what}: recv_async's wait"));
            ctx.ok(send.wait(), format!("{what}: send_async's wait"));
            ctx.check(&y, &data::<i32>(prev, n, salt), format!("{what}: isend then irecv"));

            let mut y = ctx.tensor(&sentinel::<i32>(n));
            ctx.arrive();
            let send = ctx.ok(ctx.comm.send_async(&x, next), format!("{what}: send_async"));
            ctx.ok(ctx.comm.recv(&mut y, prev), format!("{what}: blocking recv behind send_async"));
            ctx.ok(send.wait(), format!("{what}: send_async's wait"));
            ctx.check(&y, &data::<i32>(prev, n, salt), format!("{what}: isend then recv"));
        }
        // Three messages of different sizes on one lane, then an all_reduce behind them.
        let sizes = [5, 70_000, 1];
        let xs: Vec<_> = sizes.iter().enumerate().map(|(m, &n)| ctx.tensor(&data::<u64>(r, n, m))).collect();
        let ys: Vec<_> = sizes.iter().map(|&n| ctx.tensor(&sentinel::<u64>(n))).collect();
        let mut sum = ctx.tensor(&reduce_input::<i32>(ReduceOp::Sum, r, 9, 0));
        ctx.arrive();
        let sends: Vec<_> = xs.iter().map(|x| ctx.ok(ctx.comm.send_async(x, next), "send_async")).collect();
        let recvs: Vec<_> = ys.iter().map(|y| ctx.ok(ctx.comm.recv_async(y, prev), "recv_async")).collect();
        ctx.ok(ctx.comm.all_reduce(&mut sum, ReduceOp::Sum), "all_reduce behind the sends and receives");
        for (m, (s, v)) in sends.iter().zip(&recvs).enumerate() {
            ctx.ok(v.wait(), format!("recv_async #{m}'s wait"));
            ctx.ok(s.wait(), format!("send_async #{m}'s wait"));
            ctx.check(&ys[m], &data::<u64>(prev, sizes[m], m), format!("message #{m} of three on one lane"));
        }
        ctx.check(&sum, &reduced::<i32>(ReduceOp::Sum, w, 9, 0), "all_reduce behind the sends and receives");
        // The same three messages in one group.
        let mut ys: Vec<_> = sizes.iter().map(|&n| ctx.tensor(&sentinel::<u64>(n))).collect();
        let mut g = Group::new();
        for x in &xs {
            g.send(&ctx.comm, x, next);
        }
        for y in ys.iter_mut() {
            g.recv(&ctx.comm, y, prev);
        }
        ctx.arrive();
        ctx.ok(g.run(), "three messages on one lane in a group");
        for (m, y) in ys.iter().enumerate() {
            ctx.check(y, &data::<u64>(prev, sizes[m], m), format!("message #{m} of three on one lane, in a group"));
        }
        // A relay down the ranks: each receives a tensor, then sends that tensor on. The send
        // reads what the receive writes, so it waits for it (issue order), non-blocking or in
        // a group alike.
        for (grouped, n) in [(false, 7), (false, 70_000), (true, 7), (true, 70_000)] {
            let what = format!("a relay of {n} x u32{}", if grouped { " in a group" } else { "" });
            let want = data::<u32>(0, n, n);
            let mut y = ctx.tensor(&if r == 0 { want.clone() } else { sentinel::<u32>(n) });
            ctx.arrive();
            if grouped {
                // A second handle on the receive's memory, for the send.
                let dev = ctx.comm.device();
                let same = ctx.ok(Tensor::from_buffer(dev, y.buffer().clone(), DType::U32, &[n]), "an alias");
                let mut g = Group::new();
                if r > 0 {
                    g.recv(&ctx.comm, &mut y, r - 1);
                }
                if r + 1 < w {
                    g.send(&ctx.comm, &same, r + 1);
                }
                ctx.ok(g.run(), &what);
            } else {
                let recv = (r > 0).then(|| ctx.ok(ctx.comm.recv_async(&y, r - 1), format!("{what}: recv_async")));
                let send = (r + 1 < w).then(|| ctx.ok(ctx.comm.send_async(&y, r + 1), format!("{what}: send_async")));
                for w in recv.iter().chain(&send) {
                    ctx.ok(w.wait(), format!("{what}: wait"));
                }
            }
            ctx.check(&y, &want, &what);
        }
    });
}

/// Sends and receives that a rank holds back, in cycles its peer closes: the `Timeout` names
/// the held-back call and why. A collective issued between `isend` and `irecv`, or added
/// between a send and a receive of one group, holds the receive back; a receive into the
/// memory a send before it reads (a swap in place, in a group or non-blocking) waits for the
/// send.
pub fn held_back_calls_are_named<D: TestDevice>() {
    for case in ["collective between", "collective between, in a group", "swap in place", "swap in place, non-blocking"] {
        let notes = std::sync::Mutex::new(Vec::new());
        run::<D, _>(2, &Opts::timed(std::time::Duration::from_millis(500)), |ctx| {
            let peer = 1 - ctx.rank;
            let x = ctx.tensor(&[ctx.rank as u32; 4]);
            let mut y = ctx.tensor(&[0u32; 4]);
            let r = if case == "collective between, in a group" {
                let mut z = ctx.tensor(&[1u32; 4]);
                let mut g = Group::new();
                g.send(&ctx.comm, &x, peer).all_reduce(&ctx.comm, &mut z, ReduceOp::Sum).recv(&ctx.comm, &mut y, peer);
                g.run()
            } else if case == "collective between" {
                (|| {
                    let s = ctx.comm.send_async(&x, peer)?;
                    let a = ctx.comm.all_reduce_async(&x, ReduceOp::Sum)?;
                    let v = ctx.comm.recv_async(&y, peer)?;
                    s.wait().and(a.wait()).and(v.wait())
                })()
            } else {
                let alias = ctx.ok(Tensor::from_buffer(ctx.comm.device(), y.buffer().clone(), DType::U32, &[4]), "alias");
                if case.ends_with("non-blocking") {
                    (|| {
                        let s = ctx.comm.send_async(&alias, peer)?;
                        let v = ctx.comm.recv_async(&y, peer)?;
                        s.wait().and(v.wait())
                    })()
                } else {
                    let mut g = Group::new();
                    g.send(&ctx.comm, &alias, peer).recv(&ctx.comm, &mut y, peer);
                    g.run()
                }
            };
            let e = ctx.expect_err(r, ErrorKind::Timeout, &[], case);
            notes.lock().unwrap().push(e.to_string());
        });
        let notes = notes.into_inner().unwrap();
        let want = if case == "collective between" {
            "is held back in its queue behind all_reduce(sum, 4 x u32)"
        } else if case == "collective between, in a group" {
            "This group's recv(4 x u32, from "
        } else {
            "is held back: it uses memory that a send or receive issued before it writes"
        };
        assert!(notes.iter().any(|n| n.contains(want)), "{case}: no rank says {want:?}: {notes:#?}");
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
