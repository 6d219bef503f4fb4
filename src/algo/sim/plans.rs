//! The shapes of plans rather than their runs: which messages a plan sends, and how long.

use super::COLLECTIVES;
use crate::algo::*;
use crate::op::{OpDesc, OpKind};
use crate::types::{DType, ReduceOp};

/// A send and its recv are one message between threads, and over a network up to a chunk,
/// cut alike beyond it.
#[test]
fn send_recv_pairs() {
    let mut s = OpDesc::new(OpKind::Send, DType::I64, 5);
    s.peer = Some(1);
    let one = vec![Step::Send { peer: 1, src: Span::new(Slot::Input, 0, 5) }];
    assert_eq!(build(&s, 0, 2, Algorithm::Auto, 8, true).steps, one);
    assert_eq!(build(&s, 0, 2, Algorithm::Auto, 4, false).steps, one);
    assert_eq!(
        build(&s, 0, 2, Algorithm::Auto, 4, true).steps,
        vec![
            Step::Send { peer: 1, src: Span::new(Slot::Input, 0, 4) },
            Step::Send { peer: 1, src: Span::new(Slot::Input, 4, 1) }
        ]
    );
    let mut r = OpDesc::new(OpKind::Recv, DType::I64, 5);
    r.peer = Some(0);
    assert_eq!(
        build(&r, 1, 2, Algorithm::Auto, 4, true).steps,
        vec![
            Step::Recv { peer: 0, dst: Span::new(Slot::Output, 0, 4) },
            Step::Recv { peer: 0, dst: Span::new(Slot::Output, 4, 1) }
        ]
    );
}

/// No plan over a network sends or receives a message longer than a chunk, whatever its
/// algorithm; a plan already in chunks is left as it is.
#[test]
fn no_message_is_longer_than_a_chunk() {
    for kind in COLLECTIVES {
        for algo in [Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling, Algorithm::Direct]
        {
            for (n, count, chunk) in [(2, 100, 7), (3, 33, 4), (5, 64, 64), (4, 1000, 1)] {
                let mut d = OpDesc::new(kind, DType::I64, count);
                d.op = Some(ReduceOp::Sum);
                d.root = Some(1);
                for r in 0..n {
                    let plan = build(&d, r, n, algo, chunk, true);
                    for s in &plan.steps {
                        if let Step::Send { src: x, .. } | Step::Recv { dst: x, .. } | Step::RecvReduce { dst: x, .. } =
                            s
                        {
                            assert!(x.len <= chunk, "{d} {algo} rank {r} of {n}, chunk {chunk}: {s:?}");
                        }
                    }
                    assert_eq!(split_messages(plan.steps.clone(), chunk), plan.steps);
                }
            }
        }
    }
}

/// `all_to_all_single_with_splits` blocks over a network: no message beyond a chunk, the
/// pieces tile the block, and two blocks of different lengths never travel as sequences one of
/// which begins the other — so a receiver expecting another length always meets a message of
/// another length (a prefix would let it take the shorter block and return, or wait for pieces
/// that never come). Without a cut, a block is one message.
#[test]
fn block_messages_of_different_blocks_differ() {
    let lengths = |len: usize, cut: Option<usize>| -> Vec<usize> {
        block_messages(Span::new(Slot::Input, 3, len), cut).map(|s| s.len).collect()
    };
    for cut in [None, Some(1), Some(2), Some(3), Some(8)] {
        for a in 0..40 {
            let pieces: Vec<Span> = block_messages(Span::new(Slot::Input, 3, a), cut).collect();
            let mut at = 3;
            for p in &pieces {
                assert!(cut.is_none_or(|c| p.len <= c), "{a} cut {cut:?}: {pieces:?}");
                assert_eq!(p.off, at, "{a} cut {cut:?}: {pieces:?}");
                at += p.len;
            }
            assert_eq!(at, 3 + a);
            if cut.is_none() {
                assert_eq!(pieces.len(), 1);
            }
            for b in 0..40 {
                let (x, y) = (lengths(a, cut), lengths(b, cut));
                let prefix = x.len().min(y.len());
                assert_eq!(a == b, x[..prefix] == y[..prefix], "{a} and {b}, cut {cut:?}: {x:?} {y:?}");
            }
        }
    }
}
