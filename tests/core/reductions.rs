//! Sweeps of the reducing collectives (all_reduce, reduce, reduce_scatter): every dtype ×
//! every reduce op × the element counts of [`counts`], out of place and in place, with
//! shuffled arrival, compared bit for bit with the host reference. Every rank compares with
//! the same reference, so every rank holding identical bits is checked too.

use half::f16;
use ruccl::{Algorithm, CommConfig, DType, ReduceOp};

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

/// `Avg` on f16 whose sum overflows f16 while the average fits (40000 and 60000, and more):
/// the inputs are pre-multiplied, as NCCL's are, so the result is the average within f16's
/// rounding, not `inf`. Every algorithm for all_reduce (the exchange of small ops among
/// them), and reduce and reduce_scatter, over 2, 3 and 5 ranks.
pub fn f16_avg_does_not_overflow<D: TestDevice>() {
    let big = [40000.0f32, 60000.0, 48000.0, 52000.0, 44000.0];
    for world in [2, 3, 5].into_iter().filter(|&w| w <= D::max_world()) {
        let exact = big[..world].iter().sum::<f32>() / world as f32;
        let close = |got: &[f16], what: &str| {
            for (i, g) in got.iter().enumerate() {
                let g = g.to_f32();
                assert!(
                    g.is_finite() && (g - exact).abs() <= exact * 2e-3,
                    "{what}, {world} ranks: element {i} is {g}, the average is {exact}"
                );
            }
        };
        let algorithms = [Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::Direct, Algorithm::RecursiveDoubling];
        for alg in algorithms {
            let config = CommConfig::default().with_algorithm(alg).with_chunk_bytes(1024);
            run::<D, _>(world, &Opts::with_config(config), |ctx| {
                let mine = f16::from_f32(big[ctx.rank]);
                for n in [4, 3000] {
                    let what = format!("all_reduce(avg, {n} x f16, algorithm {alg})");
                    let mut t = ctx.tensor(&vec![mine; n]);
                    ctx.arrive();
                    ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Avg), &what);
                    close(&t.to_vec::<f16>().unwrap(), &what);
                    if alg != Algorithm::Auto {
                        continue;
                    }
                    let what = format!("reduce(avg, {n} x f16, root 1)");
                    let mut t = ctx.tensor(&vec![mine; n]);
                    ctx.arrive();
                    ctx.ok(ctx.comm.reduce(&mut t, ReduceOp::Avg, 1), &what);
                    if ctx.rank == 1 {
                        close(&t.to_vec::<f16>().unwrap(), &what);
                    }
                    let what = format!("reduce_scatter_tensor(avg, {n} x f16 each)");
                    let x = ctx.tensor(&vec![mine; n * world]);
                    let mut y = ctx.tensor(&vec![f16::ZERO; n]);
                    ctx.arrive();
                    ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Avg), &what);
                    close(&y.to_vec::<f16>().unwrap(), &what);
                }
            });
        }
    }
}
