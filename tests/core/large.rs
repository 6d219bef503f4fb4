//! Large messages (2^20 + 3 elements, 4 MiB of f32): past the small-message threshold, so
//! `Auto` picks the pipelined ring / chain with the default 1 MiB chunks, and the count
//! splits unevenly among ranks. Kept to f32 `Sum` and `Avg` and a few collectives so the
//! suite stays fast.

use ruccl::{CommConfig, Communicator, Group, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TEST_TIMEOUT, TestDevice, assert_bits, run};
use crate::reference::{data, reduce_input, reduced, sentinel};

pub const LARGE: usize = (1 << 20) + 3;

pub fn all_reduce_large<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| all_reduce_both_ways(ctx, LARGE));
}

/// all_reduce of `n` f32, `Sum` and `Avg`, out of place (the input unchanged) and in place.
fn all_reduce_both_ways<D: TestDevice>(ctx: &Ctx<D>, n: usize) {
    for (salt, op) in [ReduceOp::Sum, ReduceOp::Avg].into_iter().enumerate() {
        let what = format!("all_reduce({op}, {n} x f32)");
        let mine = reduce_input::<f32>(op, ctx.rank, n, salt);
        let want = reduced::<f32>(op, ctx.world, n, salt);
        let x = ctx.tensor(&mine);
        let mut y = ctx.tensor(&sentinel::<f32>(n));
        ctx.arrive();
        ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, op), &what);
        ctx.check(&y, &want, format!("{what} out of place"));
        ctx.check(&x, &mine, format!("{what}: input must be unchanged"));
        let mut t = x;
        ctx.arrive();
        ctx.ok(ctx.comm.all_reduce(&mut t, op), &what);
        ctx.check(&t, &want, format!("{what} in place"));
    }
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

/// Frames larger than a socket takes at once, between small ones, 2 ranks: with 16 MiB chunks
/// an all_to_all's 6 MiB blocks are one message each, which a rank starts writing itself and
/// the writer task finishes (`Peer::direct_large`); the small all_reduces right after put
/// credits and small messages on the same connections, which must not land inside the large
/// frame. Two rounds, every block checked.
pub fn large_frames_between_small<D: TestDevice>() {
    let config = CommConfig::default().with_timeout(TEST_TIMEOUT).with_chunk_bytes(16 << 20);
    run::<D, _>(2, &Opts::with_config(config), |ctx| {
        let (w, r) = (ctx.world, ctx.rank);
        let block = (3 << 19) + 1;
        for salt in 0..2 {
            let what = format!("all_to_all_single({w} x {block} x f32, salt {salt})");
            let inputs: Vec<Vec<f32>> = (0..w).map(|q| data::<f32>(q, w * block, salt)).collect();
            let x = ctx.tensor(&inputs[r]);
            let mut y = ctx.tensor(&sentinel::<f32>(w * block));
            ctx.arrive();
            ctx.ok(ctx.comm.all_to_all_single(&mut y, &x), &what);
            let want: Vec<f32> = inputs.iter().flat_map(|v| v[r * block..(r + 1) * block].iter().copied()).collect();
            ctx.check(&y, &want, &what);
            for k in 0..10 {
                let what = format!("small all_reduce {k} after {what}");
                let mut t = ctx.tensor(&reduce_input::<f32>(ReduceOp::Sum, r, 3, k));
                ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Sum), &what);
                ctx.check(&t, &reduced::<f32>(ReduceOp::Sum, w, 3, k), &what);
            }
        }
    });
}

/// Elements of [`streamed_reductions`]: 32 MiB of f32 and a few, past the size from which the
/// host device writes a reduction's destination with non-temporal stores (`STREAM_BUFFER_MIN`).
pub const STREAMED: usize = (8 << 20) + 3;

/// all_reduce and reduce_scatter whose buffers are large enough for the streamed reduction,
/// out of place (streamed) and in place (not): through the device path, one thread a rank,
/// and through a group's direct path, which runs the kernels itself. 2 ranks, f32 `Sum` and
/// `Avg`, every element checked against the reference.
pub fn streamed_reductions<D: TestDevice>() {
    run::<D, _>(2, &Opts::default(), |ctx| {
        all_reduce_both_ways(ctx, STREAMED);
        let (op, half) = (ReduceOp::Sum, STREAMED / 2);
        let what = format!("reduce_scatter_tensor({op}, 2 x {half} x f32)");
        let x = ctx.tensor(&reduce_input::<f32>(op, ctx.rank, 2 * half, 3));
        let mut y = ctx.tensor(&sentinel::<f32>(half));
        ctx.arrive();
        ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, op), &what);
        let all = reduced::<f32>(op, ctx.world, 2 * half, 3);
        ctx.check(&y, &all[ctx.rank * half..(ctx.rank + 1) * half], &what);
    });
    let devices = (0..2).map(D::for_rank).collect();
    let config = D::configure(CommConfig::default().with_timeout(TEST_TIMEOUT));
    let comms = Communicator::init_all(devices, config).expect("init_all");
    let op = ReduceOp::Avg;
    let ins: Vec<_> = comms
        .iter()
        .map(|c| Tensor::from_slice(c.device(), &reduce_input::<f32>(op, c.rank(), STREAMED, 4), &[STREAMED]))
        .collect::<Result<_, _>>()
        .expect("inputs");
    let mut outs: Vec<_> = comms
        .iter()
        .map(|c| Tensor::from_slice(c.device(), &sentinel::<f32>(STREAMED), &[STREAMED]))
        .collect::<Result<_, _>>()
        .expect("outputs");
    let mut g = Group::new();
    for ((c, x), y) in comms.iter().zip(&ins).zip(outs.iter_mut()) {
        g.all_reduce_into(c, y, x, op);
    }
    g.run().expect("group all_reduce_into");
    let want = reduced::<f32>(op, 2, STREAMED, 4);
    for y in &outs {
        assert_bits(&y.to_vec::<f32>().expect("read back"), &want, "group all_reduce_into, streamed");
    }
}
