//! Mismatched calls: ranks that disagree on the op, count, dtype, reduce op or root — or pair
//! a send with a receive of another size, or with a collective — all get `Mismatch` naming
//! both sides, well before the (modest) deadline, so a missed detection shows up as a
//! `Timeout` rather than a hang. Afterwards the communicator is aborted.

use std::time::{Duration, Instant};

use ruccl::config::Transport;
use ruccl::{DType, ErrorKind, Rank, ReduceOp, Tensor};

use crate::harness::{Ctx, Opts, TestDevice, run};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Every rank runs `call`; every rank must get `Mismatch` mentioning all of `needles`.
fn expect_mismatch<D, F>(world: usize, needles: &[&str], call: F)
where
    D: TestDevice,
    F: Fn(&Ctx<D>) -> ruccl::Result<()> + Sync,
{
    expect_mismatch_with(&Opts::timed(TIMEOUT), world, needles, call);
}

/// [`expect_mismatch`] with `opts` (their timeout is [`TIMEOUT`]).
fn expect_mismatch_with<D, F>(opts: &Opts, world: usize, needles: &[&str], call: F)
where
    D: TestDevice,
    F: Fn(&Ctx<D>) -> ruccl::Result<()> + Sync,
{
    run::<D, _>(world, opts, |ctx| {
        let t0 = Instant::now();
        let r = call(ctx);
        let took = t0.elapsed();
        ctx.expect_err(r, ErrorKind::Mismatch, needles, "a mismatched call");
        assert!(took < TIMEOUT, "rank {}: the mismatch took {took:?}", ctx.rank);
        ctx.expect_err(ctx.comm.barrier(), ErrorKind::Aborted, &[], "barrier after a mismatch");
    });
}

fn zeros<D: TestDevice>(ctx: &Ctx<D>, dtype: DType, n: usize) -> Tensor<D> {
    Tensor::zeros(&ctx.dev, dtype, &[n]).unwrap()
}

pub fn different_op<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["all_reduce(sum, 4 x f32)", "broadcast(4 x f32, root 0)"], |ctx| {
        let mut t = zeros(ctx, DType::F32, 4);
        if ctx.rank == 0 { ctx.comm.all_reduce(&mut t, ReduceOp::Sum) } else { ctx.comm.broadcast(&mut t, 0) }
    });
}

pub fn different_count<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["4 x f32", "5 x f32"], |ctx| {
        let mut t = zeros(ctx, DType::F32, 4 + ctx.rank);
        ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
    });
}

pub fn different_dtype<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["4 x f32", "4 x i32"], |ctx| {
        let dtype = if ctx.rank == 0 { DType::F32 } else { DType::I32 };
        let mut t = zeros(ctx, dtype, 4);
        ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
    });
}

pub fn different_reduce_op<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["all_reduce(sum", "all_reduce(max"], |ctx| {
        let op = if ctx.rank == 0 { ReduceOp::Sum } else { ReduceOp::Max };
        let mut t = zeros(ctx, DType::F64, 3);
        ctx.comm.all_reduce(&mut t, op)
    });
}

/// Both ranks think they are the root: each sends to the other, or (exchanged) each publishes
/// its part and runs ahead without waiting; then at least one sees the other's part, and a
/// rank that saw nothing that disagreed returns `Ok` and gets `Mismatch` from its next call.
pub fn different_root<D: TestDevice>() {
    run::<D, _>(2, &Opts::timed(TIMEOUT), |ctx| {
        let mut t = zeros(ctx, DType::U8, 8);
        let needles = ["root 0", "root 1"];
        match ctx.comm.broadcast(&mut t, ctx.rank) {
            Ok(()) => ctx.expect_err(ctx.comm.barrier(), ErrorKind::Mismatch, &needles, "the call after it"),
            r => ctx.expect_err(r, ErrorKind::Mismatch, &needles, "a mismatched call"),
        };
    });
}

/// Both ranks think they are the root of a reduce: each waits to receive and nothing is ever
/// sent, so only the flight recorder can tell.
pub fn different_root_no_messages<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["root 0", "root 1"], |ctx| {
        let mut t = zeros(ctx, DType::I64, 8);
        ctx.comm.reduce(&mut t, ReduceOp::Sum, ctx.rank)
    });
}

/// One of four ranks calls something else; every rank finds out, directly or relayed.
pub fn different_op_world4<D: TestDevice>() {
    expect_mismatch::<D, _>(4, &["all_reduce", "all_gather"], |ctx| {
        let x = zeros(ctx, DType::F32, 6);
        if ctx.rank == 3 {
            let mut y = zeros(ctx, DType::F32, 24);
            ctx.comm.all_gather_into_tensor(&mut y, &x)
        } else {
            let mut t = x;
            ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
        }
    });
}

/// A send and a recv of different sizes, each many chunks long: over a network each is cut
/// into chunk-sized messages, and the first already tells the sizes apart (the recv must
/// not take the first 40 elements of 41 and return).
pub fn send_recv_mismatch_in_chunks<D: TestDevice>() {
    let opts = Opts::with_config(Opts::timed(TIMEOUT).config.with_chunk_bytes(16));
    expect_mismatch_with::<D, _>(&opts, 2, &["send(41 x i32, to 1)", "recv(40 x i32, from 0)"], |ctx| {
        if ctx.rank == 0 {
            ctx.comm.send(&zeros(ctx, DType::I32, 41), 1)
        } else {
            ctx.comm.recv(&mut zeros(ctx, DType::I32, 40), 0)
        }
    });
}

pub fn send_recv_mismatch<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["send(4 x i32, to 1)", "recv(5 x i32, from 0)"], |ctx| {
        if ctx.rank == 0 {
            ctx.comm.send(&zeros(ctx, DType::I32, 4), 1)
        } else {
            ctx.comm.recv(&mut zeros(ctx, DType::I32, 5), 0)
        }
    });
}

pub fn send_vs_collective<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["send", "all_reduce"], |ctx| {
        let mut t = zeros(ctx, DType::F32, 4);
        if ctx.rank == 0 { ctx.comm.send(&t, 1) } else { ctx.comm.all_reduce(&mut t, ReduceOp::Sum) }
    });
}

/// The other direction: a rank receives from a peer that runs a collective (on host memory
/// a small collective sends no message the receiver could check; the flight recorder tells).
pub fn recv_vs_collective<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["recv", "all_reduce"], |ctx| {
        let mut t = zeros(ctx, DType::F32, 4);
        if ctx.rank == 1 { ctx.comm.recv(&mut t, 0) } else { ctx.comm.all_reduce(&mut t, ReduceOp::Sum) }
    });
}

/// Counts on both sides of the exchange limit (4 KiB parts): one rank may exchange while the
/// other runs a message plan; both still learn of the mismatch at once.
pub fn exchange_vs_messages<D: TestDevice>() {
    expect_mismatch::<D, _>(3, &["4 x f32", "2000 x f32"], |ctx| {
        let mut t = zeros(ctx, DType::F32, if ctx.rank == 1 { 2000 } else { 4 });
        ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
    });
}

/// Members that pass different lists to `split_from` get `Mismatch`, and so does every other
/// rank (a rank left out, and one that formed a list of its own with a rank another list
/// names), at once; a rank whose own list is invalid gets `InvalidArgument` and the others
/// `Mismatch` naming it. The parent stays usable after each.
pub fn split_lists_differ<D: TestDevice>() {
    run::<D, _>(3, &Opts::timed(TIMEOUT), |ctx| {
        let rounds: [[&[Rank]; 3]; 4] = [
            [&[0, 1], &[1, 0], &[]],
            // Ranks 1 and 2 agree with each other; rank 0's list names rank 1.
            [&[0, 1], &[1, 2], &[1, 2]],
            [&[0, 0], &[0, 1, 2], &[0, 1, 2]],
            // Rank 1's own list is invalid: the others are told so, not that rank 1 "passed a
            // different list" (rank 0's finding, first in rank order, was named).
            [&[0, 1, 2], &[1, 1], &[0, 1, 2]],
        ];
        for (round, lists) in rounds.iter().enumerate() {
            let r = ctx.comm.split_from(lists[ctx.rank]).map(|_| ());
            let what = format!("split_from round {round}: {:?}", lists[ctx.rank]);
            match (round, ctx.rank) {
                (2, 0) | (3, 1) => ctx.expect_err(r, ErrorKind::InvalidArgument, &["twice"], what),
                (2, _) => ctx.expect_err(r, ErrorKind::Mismatch, &["split_from", "rank 0", "invalid"], what),
                (3, _) => ctx.expect_err(r, ErrorKind::Mismatch, &["split_from", "rank 1 passed an invalid"], what),
                (0, 0 | 1) => ctx.expect_err(r, ErrorKind::Mismatch, &["split", &format!("rank {}", 1 - ctx.rank)], what),
                _ => ctx.expect_err(r, ErrorKind::Mismatch, &["split_from", "rank 1", "different list"], what),
            };
            assert!(ctx.comm.is_usable(), "{round}: the parent is still usable");
        }
        let child = ctx.ok(ctx.comm.split_all(), "split_all after the failed splits");
        assert_eq!(child.world_size(), 3);
        // A split on an aborted communicator names the call made, not the all-gather inside.
        child.abort();
        let e = child.split_all().map(|_| ()).unwrap_err();
        assert_eq!(e.context().op.as_deref(), Some("split_all"), "{e}");
        let e = child.split_from(&[0]).map(|_| ()).unwrap_err();
        assert_eq!(e.context().op.as_deref(), Some("split_from"), "{e}");
    });
}

/// As [`all_to_all_v_splits_disagree`] with blocks longer than a chunk (16 bytes): over a
/// network rank 0's block of 12 x f32 travels as three pieces and an empty end, rank 1
/// expects 8 (two pieces and the end). The shorter block's messages must not be a prefix of
/// the longer's: rank 1 must not take the first 8 and return (nor, the other way round, wait
/// for a piece that never comes). Between threads the block is one message, as without
/// chunks.
pub fn all_to_all_v_mismatch_in_pieces<D: TestDevice>() {
    let opts = Opts::with_config(Opts::timed(TIMEOUT).config.with_chunk_bytes(16));
    let (short, long) = (8, 12);
    for (sends, expects) in [(long, short), (short, long)] {
        run::<D, _>(2, &opts, |ctx| {
            let (input_splits, output_splits) = if ctx.rank == 0 { ([1, sends], [1, 1]) } else { ([1, 1], [expects, 1]) };
            let x = zeros(ctx, DType::F32, input_splits.iter().sum());
            let mut y = zeros(ctx, DType::F32, output_splits.iter().sum());
            let t0 = Instant::now();
            let r = ctx.comm.all_to_all_single_with_splits(&mut y, &x, &output_splits, &input_splits);
            assert!(t0.elapsed() < TIMEOUT, "rank {}: the mismatch took {:?}", ctx.rank, t0.elapsed());
            // Over sockets the third message tells them apart (a piece against the end).
            let told = match ctx.comm.config().transport() {
                Transport::Tcp => "piece 2 of the block",
                _ => "a block of",
            };
            let needles = ["all_to_all_single_with_splits", "output_splits[0]", told];
            ctx.expect_err(r, ErrorKind::Mismatch, &needles, format!("{sends} rows sent, {expects} expected"));
            ctx.expect_err(ctx.comm.barrier(), ErrorKind::Aborted, &[], "barrier after a mismatch");
        });
    }
}

/// `all_to_all_single_with_splits` whose splits disagree across a pair: rank 0 sends rank 1
/// two rows, rank 1 expects one. Both ranks get the `Mismatch`, naming the block and the
/// splits (the lengths of the other blocks agree).
pub fn all_to_all_v_splits_disagree<D: TestDevice>() {
    expect_mismatch::<D, _>(2, &["all_to_all_single_with_splits", "2 x f32", "expects 1 x f32"], |ctx| {
        let (input_splits, output_splits) = if ctx.rank == 0 { ([1, 2], [1, 1]) } else { ([1, 1], [1, 1]) };
        let x = zeros(ctx, DType::F32, input_splits.iter().sum());
        let mut y = zeros(ctx, DType::F32, output_splits.iter().sum());
        ctx.comm.all_to_all_single_with_splits(&mut y, &x, &output_splits, &input_splits)
    });
}

/// A step of a byte-string call against a plain collective of the same shape on another
/// rank: `broadcast_bytes` on the root against a `broadcast` of 8 x u8 (its length word's
/// shape) on the other rank, which once returned `Ok` holding the length word as its data;
/// and `all_gather_bytes` against `gather_bytes`, whose first steps (an all_gather of the
/// lengths) are alike. Every rank gets `Mismatch` naming the composite call.
pub fn composite_vs_plain<D: TestDevice>() {
    let needles = ["broadcast(8 x u8, root 0)", "broadcast(8 x u8, root 0, in broadcast_bytes)"];
    run::<D, _>(2, &Opts::timed(TIMEOUT), |ctx| {
        if ctx.rank == 0 {
            // A root may finish before it hears of the mismatch (its bytes are its own, so
            // right): then its next call fails.
            match ctx.comm.broadcast_bytes(&mut b"abc".to_vec(), 0) {
                Ok(()) => ctx.expect_err(ctx.comm.barrier(), ErrorKind::Mismatch, &needles, "the call after it"),
                r => ctx.expect_err(r, ErrorKind::Mismatch, &needles, "broadcast_bytes against a broadcast"),
            };
        } else {
            let mut t = zeros(ctx, DType::U8, 8);
            let r = ctx.comm.broadcast(&mut t, 0);
            ctx.expect_err(r, ErrorKind::Mismatch, &needles, "a broadcast against broadcast_bytes");
            // Its data is not the root's length word.
            assert_eq!(t.to_vec::<u8>().unwrap(), [0; 8], "the broadcast wrote its output");
        }
    });
    let needles = ["in all_gather_bytes", "in gather_bytes"];
    expect_mismatch::<D, _>(2, &needles, |ctx| {
        let mine = [ctx.rank as u8; 3];
        if ctx.rank == 0 { ctx.comm.all_gather_bytes(&mine).map(drop) } else { ctx.comm.gather_bytes(&mine, 0).map(drop) }
    });
}
