//! k-ary tree plans for reduce, broadcast and all_reduce (a tree reduce to rank 0 followed by a
//! tree broadcast), and the centralized plans, which are the k-ary tree whose root has every
//! other rank as a child: everyone sends to the root, which reduces and sends back.
//!
//! Ranks are renumbered relative to the root, `v = (rank - root) mod n`. The parent of `v > 0`
//! is `(v - 1) / k`; its children are `k v + 1 ..= k v + k` (those below `n`). Both phases are
//! cut into pipelining chunks, so a deep tree streams instead of waiting for whole messages.
//! A node reduces its own input first and then its children's, in increasing order, so the
//! result has the same bits on every run and, after the broadcast, on every rank.

use super::{Plan, Slot, Span, Step, chunks, sub_mod};
use crate::config::Algorithm;
use crate::op::{OpDesc, OpKind};
use crate::types::{Rank, ReduceOp};

/// The tree arity an algorithm stands for on `world` ranks, if it is a k-ary plan:
/// `KaryTree(k)` is `k` (at least 1: arity 1 is a chain), `Centralized` is `world - 1`.
pub(super) fn arity(algorithm: Algorithm, world: usize) -> Option<usize> {
    match algorithm {
        Algorithm::KaryTree(k) => Some(usize::try_from(k).unwrap_or(usize::MAX).max(1)),
        Algorithm::Centralized => Some(world.saturating_sub(1).max(1)),
        _ => None,
    }
}

/// The plan for `desc` when `algorithm` is a k-ary plan and the op has one (all_reduce,
/// broadcast, reduce); `None` otherwise, so the caller falls back to its own dispatch.
pub(super) fn build(desc: &OpDesc, rank: Rank, world: usize, algorithm: Algorithm, chunk: usize) -> Option<Plan> {
    let k = arity(algorithm, world)?;
    let avg = desc.op == Some(ReduceOp::Avg);
    let n = desc.count;
    let root = desc.root.unwrap_or(0);
    let (steps, scratch_elems) = match desc.kind {
        OpKind::AllReduce => (all_reduce(rank, world, n, chunk, k, avg), 0),
        OpKind::Broadcast => (broadcast(rank, world, root, n, chunk, k, true), 0),
        OpKind::Reduce if rank == root => (reduce(rank, world, root, n, chunk, k, Slot::Output, avg), 0),
        OpKind::Reduce => (reduce(rank, world, root, n, chunk, k, Slot::Scratch, avg), n),
        _ => return None,
    };
    Some(Plan { steps, algorithm, scratch_elems })
}

fn real(v: usize, root: Rank, n: usize) -> Rank {
    (v + root) % n
}

/// The real ranks of `v`'s parent and children in a `k`-ary tree of `n` rooted at `root`.
fn family(r: Rank, n: usize, root: Rank, k: usize) -> (Option<Rank>, Vec<Rank>) {
    let v = sub_mod(r, root, n);
    let parent = (v > 0).then(|| real((v - 1) / k, root, n));
    let first = v.saturating_mul(k).saturating_add(1);
    let last = first.saturating_add(k).min(n);
    let children = (first..last).map(|c| real(c, root, n)).collect();
    (parent, children)
}

/// Tree reduce to `root`, chunk by chunk, accumulating in `acc` (the output on the root,
/// scratch elsewhere). Leaves lend their input directly.
#[allow(clippy::too_many_arguments)]
pub(super) fn reduce(
    r: Rank,
    n: usize,
    root: Rank,
    count: usize,
    chunk: usize,
    k: usize,
    acc: Slot,
    avg: bool,
) -> Vec<Step> {
    let (parent, children) = family(r, n, root, k);
    let mut steps = Vec::new();
    for (o, l) in chunks(0, count, chunk) {
        let mut cur = Span::new(Slot::Input, o, l);
        for &c in &children {
            let dst = Span::new(acc, o, l);
            steps.push(Step::RecvReduce { peer: c, acc: cur, dst });
            cur = dst;
        }
        if let Some(p) = parent {
            steps.push(Step::Send { peer: p, src: cur });
        }
    }
    if parent.is_none() {
        if children.is_empty() {
            steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: Span::new(acc, 0, count) });
        }
        if avg {
            steps.push(Step::Average { span: Span::new(acc, 0, count) });
        }
    }
    steps
}

/// Tree broadcast from `root`, chunk by chunk: receive a chunk from the parent, forward it to
/// every child. The root lends its input (`from_input`, then copies it to its output) or its
/// output.
pub(super) fn broadcast(
    r: Rank,
    n: usize,
    root: Rank,
    count: usize,
    chunk: usize,
    k: usize,
    from_input: bool,
) -> Vec<Step> {
    let (parent, children) = family(r, n, root, k);
    let src = if parent.is_none() && from_input { Slot::Input } else { Slot::Output };
    let mut steps = Vec::new();
    for (o, l) in chunks(0, count, chunk) {
        if let Some(p) = parent {
            steps.push(Step::Recv { peer: p, dst: Span::new(Slot::Output, o, l) });
        }
        for &c in &children {
            steps.push(Step::Send { peer: c, src: Span::new(src, o, l) });
        }
    }
    if parent.is_none() && from_input {
        steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: Span::new(Slot::Output, 0, count) });
    }
    steps
}

/// all_reduce as a tree reduce to rank 0 (accumulating in every rank's output) followed by a
/// tree broadcast of rank 0's output.
pub(super) fn all_reduce(r: Rank, n: usize, count: usize, chunk: usize, k: usize, avg: bool) -> Vec<Step> {
    let mut steps = reduce(r, n, 0, count, chunk, k, Slot::Output, avg);
    steps.extend(broadcast(r, n, 0, count, chunk, k, false));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_of_the_trees() {
        // Binary tree of 6 rooted at 0: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5}.
        assert_eq!(family(0, 6, 0, 2), (None, vec![1, 2]));
        assert_eq!(family(1, 6, 0, 2), (Some(0), vec![3, 4]));
        assert_eq!(family(2, 6, 0, 2), (Some(0), vec![5]));
        assert_eq!(family(5, 6, 0, 2), (Some(2), vec![]));
        // Rooted at 4, rank 0 is v = 2: its parent is v = 0 (rank 4), its child v = 5 (rank 3).
        assert_eq!(family(0, 6, 4, 2), (Some(4), vec![3]));
        // Centralized: the root's children are everyone else, in rank order from the root.
        let k = arity(Algorithm::Centralized, 5).unwrap_or(0);
        assert_eq!(family(3, 5, 3, k), (None, vec![4, 0, 1, 2]));
        assert_eq!(family(1, 5, 3, k), (Some(3), vec![]));
        assert_eq!(arity(Algorithm::Centralized, 1), Some(1));
        assert_eq!(arity(Algorithm::KaryTree(0), 4), Some(1));
        assert_eq!(arity(Algorithm::Ring, 4), None);
    }

    #[test]
    fn centralized_is_a_star_not_an_alias() {
        let mut d = OpDesc::new(OpKind::AllReduce, crate::types::DType::F32, 4);
        d.op = Some(ReduceOp::Sum);
        let root = build(&d, 0, 4, Algorithm::Centralized, 64).map(|p| p.steps).unwrap_or_default();
        let receives = root.iter().filter(|s| matches!(s, Step::RecvReduce { .. })).count();
        let sends = root.iter().filter(|s| matches!(s, Step::Send { .. })).count();
        assert_eq!((receives, sends), (3, 3), "{root:?}");
        let binary = build(&d, 0, 4, Algorithm::KaryTree(2), 64).map(|p| p.steps).unwrap_or_default();
        assert_ne!(root, binary);
    }
}
