//! Large messages (2^20 + 3 elements, 4 MiB of f32): past the small-message threshold, so
//! `Auto` picks the pipelined ring / chain with the default 1 MiB chunks, and the count
//! splits unevenly among ranks. Kept to f32 `Sum` and `Avg` and a few collectives so the
//! suite stays fast.

use ruccl::ReduceOp;

use crate::harness::{Opts, TestDevice, run};
use crate::reference::{data, reduce_input, reduced, sentinel};

pub const LARGE: usize = (1 << 20) + 3;

pub fn all_reduce_large<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        for (salt, op) in [ReduceOp::Sum, ReduceOp::Avg].into_iter().enumerate() {
            let what = format!("all_reduce({op}, {LARGE} x f32)");
            let mine = reduce_input::<f32>(op, ctx.rank, LARGE, salt);
            let want = reduced::<f32>(op, ctx.world, LARGE, salt);
            let x = ctx.tensor(&mine);
            let mut y = ctx.tensor(&sentinel::<f32>(LARGE));
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, op), &what);
            ctx.check(&y, &want, format!("{what} out of place"));
            ctx.check(&x, &mine, format!("{what}: input must be unchanged"));
            let mut t = x;
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut t, op), &what);
            ctx.check(&t, &want, format!("{what} in place"));
        }
    });
}

/// Broadcast and reduce (pipelined chains) from the last rank.
pub fn rooted_large<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        let root = ctx.world - 1;
        let what = format!("broadcast({LARGE} x f32, root {root})");
        let mut t = ctx.tensor(&data::<f32>(ctx.rank, LARGE, 1));
        ctx.arrive();
        ctx.ok(ctx.comm.broadcast(&mut t, root), &what);
        ctx.check(&t, &data::<f32>(root, LARGE, 1), &what);

        let op = ReduceOp::Avg;
        let what = format!("reduce({op}, {LARGE} x f32, root {root})");
        let mine = reduce_input::<f32>(op, ctx.rank, LARGE, 2);
        let x = ctx.tensor(&mine);
        let mut y = ctx.tensor(&sentinel::<f32>(LARGE));
        ctx.arrive();
        ctx.ok(ctx.comm.reduce_into(&mut y, &x, op, root), &what);
        if ctx.rank == root {
            ctx.check(&y, &reduced::<f32>(op, ctx.world, LARGE, 2), &what);
        }
        ctx.check(&x, &mine, format!("{what}: input must be unchanged"));
    });
}
