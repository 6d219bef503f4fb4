//! Invalid arguments: each fails on the calling rank with `InvalidArgument`, naming the rank,
//! the op and what is wrong, before anything is sent — so the communicator stays usable, as a
//! successful collective on every rank afterwards shows.

use ruccl::{DType, ErrorKind, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TestDevice, run};
use crate::reference::{data, reduce_input, reduced};

const BAD: ErrorKind = ErrorKind::InvalidArgument;

/// Every rank runs `body` (which provokes errors), then a checked all_reduce.
fn then_usable<D: TestDevice>(world: usize, body: impl Fn(&Ctx<D>) + Sync) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        body(ctx);
        assert!(ctx.comm.is_usable(), "rank {}: unusable after invalid arguments", ctx.rank);
        let op = ReduceOp::Sum;
        let mut t = ctx.tensor(&reduce_input::<f32>(op, ctx.rank, 5, 0));
        ctx.arrive();
        ctx.ok(ctx.comm.all_reduce(&mut t, op), "all_reduce after invalid arguments");
        ctx.check(&t, &reduced::<f32>(op, ctx.world, 5, 0), "all_reduce after invalid arguments");
    });
}

fn zeros<D: TestDevice>(ctx: &Ctx<D>, dtype: DType, n: usize) -> Tensor<D> {
    Tensor::zeros(&ctx.dev, dtype, &[n]).unwrap()
}

pub fn all_gather_wrong_sizes<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let x = zeros(ctx, DType::F32, 4);
        let mut y = zeros(ctx, DType::F32, 13);
        let r = ctx.comm.all_gather_into_tensor(&mut y, &x);
        ctx.expect_err(r, BAD, &["all_gather", "13", "12"], "all_gather_into_tensor, 13 for 3 x 4");
        let mut list: Vec<_> = (0..2).map(|_| zeros(ctx, DType::F32, 4)).collect();
        let r = ctx.comm.all_gather(&mut list, &x);
        ctx.expect_err(r, BAD, &["all_gather", "2 tensors"], "all_gather into 2 of 3 outputs");
        let mut list: Vec<_> = [4, 3, 4].iter().map(|&n| zeros(ctx, DType::F32, n)).collect();
        let r = ctx.comm.all_gather(&mut list, &x);
        ctx.expect_err(r, BAD, &["all_gather", "output[1]"], "all_gather, list[1] of 3 elements");
        let mut y = zeros(ctx, DType::F32, 10);
        let r = ctx.comm.all_gather_into_tensor_in_place(&mut y);
        ctx.expect_err(r, BAD, &["all_gather(10 x f32 in all)", "not divisible"], "in-place all_gather of 10 on 3");
    });
}

pub fn reduce_scatter_wrong_sizes<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let x = zeros(ctx, DType::I32, 12);
        let mut y = zeros(ctx, DType::I32, 5);
        let r = ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &["reduce_scatter", "12"], "reduce_scatter, output 5 for 12 on 3");
        let x = zeros(ctx, DType::I32, 13);
        let mut y = zeros(ctx, DType::I32, 4);
        let r = ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &["reduce_scatter", "not divisible"], "reduce_scatter of 13 on 3");
        let mut t = zeros(ctx, DType::I32, 7);
        let r = ctx.comm.reduce_scatter_tensor_in_place(&mut t, ReduceOp::Max);
        ctx.expect_err(r, BAD, &["7 x i32 in all", "not divisible"], "in-place reduce_scatter of 7");
    });
}

pub fn all_to_all_not_divisible<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let x = zeros(ctx, DType::U8, 7);
        let mut y = zeros(ctx, DType::U8, 7);
        let r = ctx.comm.all_to_all_single(&mut y, &x);
        ctx.expect_err(r, BAD, &["all_to_all(7 x u8 in all)", "not divisible"], "all_to_all of 7 on 3");
        let r = ctx.comm.all_to_all_single_in_place(&mut y);
        ctx.expect_err(r, BAD, &["all_to_all(7 x u8 in all)", "not divisible"], "in-place all_to_all of 7 on 3");
        let x = zeros(ctx, DType::U8, 6);
        let mut y = zeros(ctx, DType::U8, 9);
        let r = ctx.comm.all_to_all_single(&mut y, &x);
        ctx.expect_err(r, BAD, &["all_to_all", "9", "6"], "all_to_all 6 into 9");
    });
}

pub fn dtype_mismatch<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let x = zeros(ctx, DType::F32, 6);
        let mut y = zeros(ctx, DType::F64, 6);
        let r = ctx.comm.all_reduce_into(&mut y, &x, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &["all_reduce", "f32", "f64"], "all_reduce_into f32 -> f64");
        // The input is only read (and checked) on the root.
        let r = ctx.comm.broadcast_into(&mut y, Some(&x), ctx.rank);
        ctx.expect_err(r, BAD, &["broadcast", "f32", "f64"], "broadcast_into f32 -> f64 on the root");
        let mut y = zeros(ctx, DType::I32, 2);
        let r = ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &["reduce_scatter", "f32", "i32"], "reduce_scatter f32 -> i32");
        let mut list = vec![zeros(ctx, DType::F32, 6), zeros(ctx, DType::BF16, 6), zeros(ctx, DType::F32, 6)];
        let r = ctx.comm.all_gather(&mut list, &x);
        ctx.expect_err(r, BAD, &["all_gather", "f32", "bf16"], "all_gather with a bf16 output");
        let mut y = zeros(ctx, DType::U32, 18);
        let r = ctx.comm.gather(Some(&mut y), &x, ctx.rank);
        ctx.expect_err(r, BAD, &["gather", "f32", "u32"], "gather f32 -> u32 on the root");
    });
}

pub fn root_out_of_range<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let mut t = zeros(ctx, DType::F32, 3);
        let x = zeros(ctx, DType::F32, 3);
        let need = ["root 3", "out of range"];
        let r = ctx.comm.broadcast(&mut t, 3);
        ctx.expect_err(r, BAD, &["broadcast", need[0], need[1]], "broadcast root 3 of 3");
        let r = ctx.comm.reduce(&mut t, ReduceOp::Sum, 7);
        ctx.expect_err(r, BAD, &["reduce", "root 7"], "reduce root 7 of 3");
        let r = ctx.comm.reduce_into(&mut t, &x, ReduceOp::Sum, 3);
        ctx.expect_err(r, BAD, &["reduce", need[0]], "reduce_into root 3 of 3");
        let mut y = zeros(ctx, DType::F32, 9);
        let r = ctx.comm.gather(Some(&mut y), &x, 3);
        ctx.expect_err(r, BAD, &["gather", need[0]], "gather root 3 of 3");
        let r = ctx.comm.scatter(&mut t, Some(&y), usize::MAX);
        ctx.expect_err(r, BAD, &["scatter", "out of range"], "scatter root usize::MAX");
    });
}

pub fn peer_out_of_range_and_self<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let mut t = zeros(ctx, DType::I64, 3);
        // The error's context names the peer too, as its message does.
        let peer = |r: &ruccl::Result<()>| r.as_ref().err().and_then(|e| e.context().peer);
        let r = ctx.comm.send(&t, 3);
        assert_eq!(peer(&r), Some(3), "send to rank 3 of 3: {r:?}");
        ctx.expect_err(r, BAD, &["send", "peer 3", "out of range"], "send to rank 3 of 3");
        let r = ctx.comm.recv(&mut t, 9);
        assert_eq!(peer(&r), Some(9), "recv from rank 9 of 3: {r:?}");
        ctx.expect_err(r, BAD, &["recv", "peer 9"], "recv from rank 9 of 3");
        let r = ctx.comm.send(&t, ctx.rank);
        assert_eq!(peer(&r), Some(ctx.rank), "send to self: {r:?}");
        ctx.expect_err(r, BAD, &["send", "itself"], "send to self");
        let r = ctx.comm.recv(&mut t, ctx.rank);
        ctx.expect_err(r, BAD, &["recv", "itself"], "recv from self");
    });
}

pub fn tensor_on_another_device<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let other = D::foreign(ctx.rank);
        let theirs = other.describe();
        let ours = ctx.dev.describe();
        assert_ne!(theirs, ours, "the foreign device must be told apart in messages");
        let need = ["all_reduce", theirs.as_str(), ours.as_str()];
        let mut t = Tensor::from_slice(&other, &[1.0f32, 2.0], &[2]).unwrap();
        let r = ctx.comm.all_reduce(&mut t, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &need, "all_reduce of a tensor on another device");
        let x = ctx.tensor(&[1.0f32, 2.0]);
        let r = ctx.comm.all_reduce_into(&mut t, &x, ReduceOp::Sum);
        ctx.expect_err(r, BAD, &need, "all_reduce_into an output on another device");
        let mut list = vec![ctx.tensor(&[0.0f32; 2]), t, ctx.tensor(&[0.0f32; 2])];
        let r = ctx.comm.all_gather(&mut list, &x);
        ctx.expect_err(r, BAD, &["all_gather", theirs.as_str()], "all_gather into a list with a foreign tensor");
        let peer = (ctx.rank + 1) % ctx.world;
        let r = ctx.comm.send(&list[1], peer);
        ctx.expect_err(r, BAD, &["send", theirs.as_str()], "send of a foreign tensor");
    });
}

pub fn missing_root_buffers<D: TestDevice>() {
    then_usable::<D>(3, |ctx| {
        let x = zeros(ctx, DType::U32, 2);
        let mut y = zeros(ctx, DType::U32, 2);
        // On the root only; elsewhere these buffers are optional and the call would wait.
        let r = ctx.comm.gather(None, &x, ctx.rank);
        ctx.expect_err(r, BAD, &["gather", "output", "root"], "gather without output on the root");
        let r = ctx.comm.scatter(&mut y, None, ctx.rank);
        ctx.expect_err(r, BAD, &["scatter", "input", "root"], "scatter without input on the root");
        let r = ctx.comm.broadcast_into(&mut y, None, ctx.rank);
        ctx.expect_err(r, BAD, &["broadcast", "input", "root"], "broadcast_into without input on the root");
        let mut small = zeros(ctx, DType::U32, 5);
        let r = ctx.comm.gather(Some(&mut small), &x, ctx.rank);
        ctx.expect_err(r, BAD, &["gather", "5", "6"], "gather into 5 of 3 x 2");
        let r = ctx.comm.reduce_into(&mut small, &x, ReduceOp::Sum, ctx.rank);
        ctx.expect_err(r, BAD, &["reduce", "5", "2"], "reduce_into 5 from 2 on the root");
    });
}

pub fn non_finite_premulsum<D: TestDevice>() {
    then_usable::<D>(2, |ctx| {
        let mut t = zeros(ctx, DType::F32, 2);
        for s in [f64::NAN, f64::INFINITY] {
            let r = ctx.comm.all_reduce(&mut t, ReduceOp::PreMulSum(s));
            ctx.expect_err(r, BAD, &["all_reduce", "PreMulSum"], format!("PreMulSum({s})"));
        }
        // On integers, a scalar the dtype does not hold (a fraction, a negative on unsigned
        // types, beyond its range) is refused: converted, it truncated or saturated silently.
        for (dtype, s) in [(DType::I32, 0.5), (DType::U32, -1.0), (DType::I8, 1000.0), (DType::U64, 2f64.powi(64))] {
            let mut t = zeros(ctx, dtype, 2);
            let r = ctx.comm.all_reduce(&mut t, ReduceOp::PreMulSum(s));
            ctx.expect_err(r, BAD, &["all_reduce", &format!("PreMulSum scalar {s} is not a value of {dtype}")], dtype);
        }
        let mut t = zeros(ctx, DType::I8, 2);
        ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::PreMulSum(-128.0)), "PreMulSum(-128) on i8");
    });
}

/// Only rank 1 errs, then calls correctly: its failed call consumed no sequence number and
/// sent nothing, so the ranks that called once all match.
pub fn one_rank_invalid_then_retries<D: TestDevice>() {
    run::<D, _>(3, &Opts::default(), |ctx| {
        let n = 4;
        let x = ctx.tensor(&data::<u64>(ctx.rank, n, 0));
        if ctx.rank == 1 {
            let mut wrong = zeros(ctx, DType::U64, 3 * n + 1);
            let r = ctx.comm.all_gather_into_tensor(&mut wrong, &x);
            ctx.expect_err(r, BAD, &["all_gather"], "rank 1's wrong all_gather");
        }
        let mut y = zeros(ctx, DType::U64, 3 * n);
        ctx.arrive();
        ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), "all_gather");
        let want: Vec<u64> = (0..3).flat_map(|k| data::<u64>(k, n, 0)).collect();
        ctx.check(&y, &want, "all_gather after rank 1's invalid call");
        let log = ctx.comm.flight_recorder();
        assert_eq!(log.len(), 1, "rank {}: only the valid call is recorded: {log:?}", ctx.rank);
    });
}

/// `all_to_all_single_with_splits` with splits that cannot describe its tensors: one entry
/// short, not adding up to the rows, a kept block that does not fit, rows of different sizes,
/// a scalar, and the output being the input.
pub fn all_to_all_v_bad_splits<D: TestDevice>() {
    then_usable::<D>(2, |ctx| {
        let r = ctx.rank;
        let x = Tensor::zeros(&ctx.dev, DType::F32, &[3, 2]).unwrap();
        let mut y = Tensor::zeros(&ctx.dev, DType::F32, &[3, 2]).unwrap();
        let op = "all_to_all_single_with_splits";
        let call = |y: &mut Tensor<D>, x: &Tensor<D>, out: &[usize], inp: &[usize]| {
            ctx.comm.all_to_all_single_with_splits(y, x, out, inp)
        };
        let (ok, other) = ([1, 2], [2, 1]);
        let kept = if r == 0 { [1, 2] } else { [2, 1] };
        ctx.expect_err(call(&mut y, &x, &kept, &[3]), BAD, &[op, "input_splits has 1 entries", "(2)"], "short splits");
        ctx.expect_err(call(&mut y, &x, &[1, 1], &kept), BAD, &[op, "output_splits add up to 2 rows", "has 3"], "sum");
        let (a, b) = if r == 0 { (ok, other) } else { (other, ok) };
        ctx.expect_err(call(&mut y, &x, &a, &b), BAD, &[op, &format!("input_splits[{r}]"), "must be equal"], "kept");
        let mut wide = Tensor::zeros(&ctx.dev, DType::F32, &[2, 3]).unwrap();
        ctx.expect_err(call(&mut wide, &x, &[1, 1], &kept), BAD, &[op, "rows"], "row sizes");
        let scalar = Tensor::zeros(&ctx.dev, DType::F32, &[]).unwrap();
        ctx.expect_err(call(&mut y, &scalar, &kept, &kept), BAD, &[op, "scalar"], "a scalar");
        let same = Tensor::from_buffer(&ctx.dev, y.buffer().clone(), DType::F32, &[3, 2]).unwrap();
        ctx.expect_err(call(&mut y, &same, &kept, &kept), BAD, &[op, "out of place only"], "in place");
    });
}
