//! Sweeps of the reducing collectives (all_reduce, reduce, reduce_scatter): every dtype ×
//! every reduce op × the element counts of [`counts`], out of place and in place, with
//! shuffled arrival, compared bit for bit with the host reference. Every rank compares with
//! the same reference, so every rank holding identical bits is checked too.

use ruccl::{DType, ReduceOp};

use crate::harness::{Ctx, Opts, TestDevice, run};
use crate::reference::counts;
use crate::vals;

pub fn all_reduce<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        for dt in DType::ALL {
            all_reduce_as::<D>(ctx, dt);
        }
    });
}

fn all_reduce_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    for (salt, n) in counts(ctx.world).into_iter().enumerate() {
        for op in ReduceOp::ALL {
            let what = format!("all_reduce({op}, {n} x {})", dt);
            let mine = vals::reduce_input(dt, op, ctx.rank, n, salt);
            let want = vals::reduced(dt, op, ctx.world, n, salt);

            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, op), &what);
            ctx.check_vals(&y, &want, format!("{what} out of place"));
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.all_reduce(&mut t, op), &what);
            ctx.check_vals(&t, &want, format!("{what} in place"));
        }
    }
}

pub fn reduce<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        for dt in DType::ALL {
            reduce_as::<D>(ctx, dt);
        }
    });
}

fn reduce_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let mut call = 0;
    for (salt, n) in counts(ctx.world).into_iter().enumerate() {
        for op in ReduceOp::ALL {
            // Every root in turn (roots other than 0 included).
            let root = call % ctx.world;
            call += 1;
            let what = format!("reduce({op}, {n} x {}, root {root})", dt);
            let mine = vals::reduce_input(dt, op, ctx.rank, n, salt);
            let want = vals::reduced(dt, op, ctx.world, n, salt);

            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            ctx.arrive();
            ctx.ok(ctx.comm.reduce_into(&mut y, &x, op, root), &what);
            if ctx.rank == root {
                ctx.check_vals(&y, &want, format!("{what} out of place, on the root"));
            } else {
                ctx.check_vals(&y, &vals::sentinel(dt, n), format!("{what} out of place: a non-root output must not be written"));
            }
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.reduce(&mut t, op, root), &what);
            if ctx.rank == root {
                ctx.check_vals(&t, &want, format!("{what} in place, on the root"));
            } else {
                ctx.check_vals(&t, &mine, format!("{what} in place: a non-root tensor must be unchanged"));
            }
        }
    }
}

pub fn reduce_scatter<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        for dt in DType::ALL {
            reduce_scatter_as::<D>(ctx, dt);
        }
    });
}

fn reduce_scatter_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for op in ReduceOp::ALL {
            let what = format!("reduce_scatter({op}, {n} x {} per rank)", dt);
            let mine = vals::reduce_input(dt, op, r, w * n, salt);
            let all = vals::reduced(dt, op, w, w * n, salt);
            let want = all.slice(r * n..(r + 1) * n);

            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            ctx.arrive();
            ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, op), &what);
            ctx.check_vals(&y, &want, format!("{what} out of place"));
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.reduce_scatter_tensor_in_place(&mut t, op), &what);
            // Only this rank's block is specified after an in-place reduce_scatter.
            let got = ctx.read(&t, &what).slice(r * n..(r + 1) * n);
            vals::assert_vals(&got, &want, format!("{what} in place, block {r}"));
        }
    }
}
