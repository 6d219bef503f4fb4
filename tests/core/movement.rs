//! Sweeps of the data-movement collectives (broadcast, all_gather in its three forms,
//! all_to_all, gather, scatter): every dtype × the counts of [`counts`], every root in turn,
//! out of place and in place, with shuffled arrival, compared bit for bit. The sweeps hold
//! their elements as [`Vals`] (a dtype chosen at run time), so each is compiled once per
//! device, not once per device and dtype.

use ruccl::{DType, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TestDevice, run};
use crate::reference::{counts, data, reduce_input, reduced, sentinel};
use crate::vals::{self, Vals};

fn sweep<D: TestDevice>(world: usize, each: fn(&Ctx<D>, DType)) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        for dt in DType::ALL {
            each(ctx, dt);
        }
    });
}

pub fn broadcast<D: TestDevice>(world: usize) {
    sweep::<D>(world, broadcast_as::<D>);
}

fn broadcast_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for root in 0..w {
            let what = format!("broadcast({n} x {dt}, root {root})");
            let mine = vals::data(dt, r, n, salt);
            let want = vals::data(dt, root, n, salt);

            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            ctx.arrive();
            ctx.ok(ctx.comm.broadcast_into(&mut y, Some(&x), root), &what);
            ctx.check_vals(&y, &want, format!("{what} out of place"));
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

            let mut t = ctx.tensor_of(&mine);
            ctx.arrive();
            ctx.ok(ctx.comm.broadcast(&mut t, root), &what);
            ctx.check_vals(&t, &want, format!("{what} in place"));
        }
    }
}

pub fn all_gather<D: TestDevice>(world: usize) {
    sweep::<D>(world, all_gather_as::<D>);
}

fn all_gather_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        let what = format!("all_gather({n} x {dt} per rank)");
        let mine = vals::data(dt, r, n, salt);
        let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, n, salt)));
        let x = ctx.tensor_of(&mine);

        let mut list: Vec<Tensor<D>> = (0..w).map(|_| ctx.tensor_of(&vals::sentinel(dt, n))).collect();
        ctx.arrive();
        ctx.ok(ctx.comm.all_gather(&mut list, &x), format!("{what} into a list"));
        for (k, t) in list.iter().enumerate() {
            ctx.check_vals(t, &want.slice(k * n..(k + 1) * n), format!("{what}: list[{k}]"));
        }

        let mut y = ctx.tensor_of(&vals::sentinel(dt, w * n));
        ctx.arrive();
        ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), &what);
        ctx.check_vals(&y, &want, format!("{what} into a tensor"));
        ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

        let mut block = vals::sentinel(dt, w * n);
        block.put(r * n, &mine);
        let mut t = ctx.tensor_of(&block);
        ctx.arrive();
        ctx.ok(ctx.comm.all_gather_into_tensor_in_place(&mut t), &what);
        ctx.check_vals(&t, &want, format!("{what} in place"));
    }
}

pub fn all_to_all<D: TestDevice>(world: usize) {
    sweep::<D>(world, all_to_all_as::<D>);
}

fn all_to_all_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        let what = format!("all_to_all({n} x {dt} per peer)");
        let mine = vals::data(dt, r, w * n, salt);
        // Block k of the result is block r of rank k's input.
        let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, w * n, salt).slice(r * n..(r + 1) * n)));

        let x = ctx.tensor_of(&mine);
        let mut y = ctx.tensor_of(&vals::sentinel(dt, w * n));
        ctx.arrive();
        ctx.ok(ctx.comm.all_to_all_single(&mut y, &x), &what);
        ctx.check_vals(&y, &want, format!("{what} out of place"));
        ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));

        let mut t = ctx.tensor_of(&mine);
        ctx.arrive();
        ctx.ok(ctx.comm.all_to_all_single_in_place(&mut t), &what);
        ctx.check_vals(&t, &want, format!("{what} in place"));
    }
}

/// all_to_all with blocks of different sizes (`all_to_all_single_with_splits`): every dtype,
/// rows of three elements (the splits count rows of dimension 0), blocks of zero to three
/// rows per ordered pair (every rank's input and output of a different length), blocking
/// and non-blocking (the group form: `grouped::group_all_to_all_v`).
pub fn all_to_all_v<D: TestDevice>(world: usize) {
    sweep::<D>(world, all_to_all_v_as::<D>);
}

/// [`all_to_all_v`] with 16-byte chunks: over a network (sockets, shared segments) every
/// block of a chunk or more travels as pieces and an empty end message (`algo::block_messages`).
pub fn all_to_all_v_in_pieces<D: TestDevice>(world: usize) {
    let opts = Opts::with_config(Opts::default().config.with_chunk_bytes(16));
    run::<D, _>(world, &opts, |ctx| {
        for dt in DType::ALL {
            all_to_all_v_as(ctx, dt);
        }
    });
}

fn all_to_all_v_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    const ROW: usize = 3;
    let (w, r) = (ctx.world, ctx.rank);
    for salt in 0..3 {
        // rows(q, k): rows rank q sends rank k.
        let rows = |q: usize, k: usize| (salt + 2 * q + 3 * k * k) % 4;
        let input_splits: Vec<usize> = (0..w).map(|k| rows(r, k)).collect();
        let output_splits: Vec<usize> = (0..w).map(|q| rows(q, r)).collect();
        let len_of = |q: usize| (0..w).map(|k| rows(q, k)).sum::<usize>() * ROW;
        let mine = vals::data(dt, r, len_of(r), salt);
        // From each rank q in turn: q's block for this rank.
        let want = Vals::concat(
            dt,
            (0..w).map(|q| {
                let first = (0..r).map(|k| rows(q, k)).sum::<usize>() * ROW;
                vals::data(dt, q, len_of(q), salt).slice(first..first + rows(q, r) * ROW)
            }),
        );
        let out_rows: usize = output_splits.iter().sum();
        let shaped = |v: &Vals, rows: usize| {
            let t = ctx.tensor_of(v);
            Tensor::from_buffer(&ctx.dev, t.buffer().clone(), dt, &[rows, ROW]).unwrap()
        };
        let x = shaped(&mine, len_of(r) / ROW);
        let what = format!("all_to_all_single_with_splits({dt}, input_splits {input_splits:?}, salt {salt})");
        for form in ["blocking", "non-blocking"] {
            let mut y = shaped(&vals::sentinel(dt, out_rows * ROW), out_rows);
            ctx.arrive();
            if form == "blocking" {
                ctx.ok(ctx.comm.all_to_all_single_with_splits(&mut y, &x, &output_splits, &input_splits), &what);
            } else {
                let work = ctx.comm.all_to_all_single_with_splits_async(&y, &x, &output_splits, &input_splits);
                ctx.ok(ctx.ok(work, &what).wait(), &what);
            }
            ctx.check_vals(&y, &want, format!("{what}, {form}"));
        }
        ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));
    }
}

pub fn gather<D: TestDevice>(world: usize) {
    sweep::<D>(world, gather_as::<D>);
}

fn gather_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for root in 0..w {
            let what = format!("gather({n} x {dt}, root {root})");
            let mine = vals::data(dt, r, n, salt);
            let want = Vals::concat(dt, (0..w).map(|k| vals::data(dt, k, n, salt)));
            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, w * n));
            // Non-roots pass no output half the time and an ignored one otherwise.
            let pass_output = r == root || (salt + root) % 2 == 0;
            ctx.arrive();
            ctx.ok(ctx.comm.gather(pass_output.then_some(&mut y), &x, root), &what);
            if r == root {
                ctx.check_vals(&y, &want, format!("{what} on the root"));
            } else {
                ctx.check_vals(&y, &vals::sentinel(dt, w * n), format!("{what}: a non-root output must not be written"));
            }
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));
        }
    }
}

pub fn scatter<D: TestDevice>(world: usize) {
    sweep::<D>(world, scatter_as::<D>);
}

fn scatter_as<D: TestDevice>(ctx: &Ctx<D>, dt: DType) {
    let (w, r) = (ctx.world, ctx.rank);
    for (salt, n) in counts(w).into_iter().enumerate() {
        for root in 0..w {
            let what = format!("scatter({n} x {dt}, root {root})");
            let mine = vals::data(dt, r, w * n, salt);
            let want = vals::data(dt, root, w * n, salt).slice(r * n..(r + 1) * n);
            let x = ctx.tensor_of(&mine);
            let mut y = ctx.tensor_of(&vals::sentinel(dt, n));
            let pass_input = r == root || (salt + root) % 2 == 1;
            ctx.arrive();
            ctx.ok(ctx.comm.scatter(&mut y, pass_input.then_some(&x), root), &what);
            ctx.check_vals(&y, &want, &what);
            ctx.check_vals(&x, &mine, format!("{what}: input must be unchanged"));
        }
    }
}

/// `broadcast_into` reads `input` only on the root: elsewhere it may be absent, and its size
/// does not matter.
pub fn broadcast_into_ignores_non_root_input<D: TestDevice>() {
    run::<D, _>(3, &Opts::default(), |ctx| {
        let root = 1;
        let n = 10;
        let x = if ctx.rank == root {
            ctx.tensor(&data::<i32>(root, n, 0))
        } else {
            ctx.tensor(&data::<i32>(ctx.rank, ctx.rank, 0))
        };
        // Rank 0 passes none, rank 2 one of the wrong size.
        let input = (ctx.rank != 0).then_some(&x);
        let mut y = ctx.tensor(&sentinel::<i32>(n));
        ctx.arrive();
        ctx.ok(ctx.comm.broadcast_into(&mut y, input, root), "broadcast_into");
        ctx.check(&y, &data::<i32>(root, n, 0), "broadcast_into");
    });
}

/// Collectives look at element counts, not shapes: a 2-D tensor reduces like its 1-D view.
pub fn shapes_are_free<D: TestDevice>() {
    run::<D, _>(4, &Opts::default(), |ctx| {
        let op = ReduceOp::Sum;
        let mine = reduce_input::<f32>(op, ctx.rank, 12, 3);
        let mut t = Tensor::from_slice(&ctx.dev, &mine, &[3, 4]).unwrap();
        ctx.arrive();
        ctx.ok(ctx.comm.all_reduce(&mut t, op), "all_reduce of a 3x4 tensor");
        assert_eq!(t.shape(), &[3, 4]);
        ctx.check(&t, &reduced::<f32>(op, 4, 12, 3), "all_reduce of a 3x4 tensor");
        let x = Tensor::from_slice(&ctx.dev, &mine, &[2, 6]).unwrap();
        let mut y = Tensor::zeros(&ctx.dev, DType::F32, &[4, 2, 6]).unwrap();
        ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), "all_gather of 2x6 into 4x2x6");
        let want: Vec<f32> = (0..4).flat_map(|k| reduce_input::<f32>(op, k, 12, 3)).collect();
        ctx.check(&y, &want, "all_gather of 2x6 into 4x2x6");
    });
}

/// On a device that cannot reduce a dtype ([`NoF64Device`](crate::staged_device::NoF64Device)
/// refuses `f64`), every op that only moves bytes still runs on it, bit for bit, and a
/// reduction of it fails on every rank with `Unsupported` naming the op, before any rank
/// waits for another; a reduction of another dtype then still runs.
pub fn on_a_dtype_the_device_cannot_reduce<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        let dt = DType::F64;
        assert!(!ctx.dev.supports(dt) && ctx.dev.supports(DType::F32));
        for each in [broadcast_as::<D>, all_gather_as::<D>, all_to_all_as::<D>, all_to_all_v_as::<D>, gather_as::<D>, scatter_as::<D>] {
            each(ctx, dt);
        }
        for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
            let mut t = ctx.tensor_of(&vals::data(dt, ctx.rank, 5, 0));
            let e = ctx.comm.all_reduce(&mut t, op).expect_err("an f64 all_reduce on a device that cannot reduce f64");
            assert_eq!(e.kind(), ruccl::ErrorKind::Unsupported, "{e}");
            assert!(e.to_string().contains("all_reduce") && e.to_string().contains("f64"), "{e}");
        }
        let mut t = ctx.tensor_of(&vals::data(DType::F32, ctx.rank, 5, 0));
        ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Sum), "an f32 all_reduce after the refused ones");
    });
}
