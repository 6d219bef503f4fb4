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
