//! Direct plans for ranks that share memory: every rank reads the blocks it needs straight
//! from their owners, so a reduction is one pass over all sources (the scheduler fuses a run
//! of receive-reduces into one kernel) and nothing waits on a chain of neighbours.
//!
//! - reduce-scatter: rank `k` receives block `k` from every peer and reduces it once;
//! - all-gather: every rank lends its block to every peer;
//! - all_reduce: the two back to back, chunk by chunk, so a finished chunk is lent at once;
//! - reduce: the reduce-scatter, then every rank lends its reduced block to the root, so the
//!   reduction work is spread over all ranks instead of a chain ending at the root.
//!
//! Over a network these move `n - 1` times more bytes through each link than a ring, so
//! they are chosen only when peers share memory.

use super::{Slot, Span, Step, chunks, segment, sub_mod};
use crate::types::Rank;

/// Who gets each reduced chunk of [`reduce_from_all`].
#[derive(Clone, Copy)]
enum LendTo {
    Nobody,
    Everyone,
    Root(Rank),
}

/// For each chunk of `dst`: receive-reduce the matching chunk from every peer (in a fixed
/// order, so results are deterministic), starting from `acc`; then lend it per `lend`.
fn reduce_from_all(
    steps: &mut Vec<Step>,
    (r, n): (Rank, usize),
    acc: Span,
    dst: Span,
    chunk: usize,
    avg: bool,
    lend: LendTo,
) {
    for ((o, l), (ao, _)) in chunks(dst.off, dst.len, chunk).zip(chunks(acc.off, acc.len, chunk)) {
        let d = Span::new(dst.slot, o, l);
        for s in 1..n {
            let a = if s == 1 { Span::new(acc.slot, ao, l) } else { d };
            steps.push(Step::RecvReduce { peer: (r + s) % n, acc: a, dst: d });
        }
        if avg {
            steps.push(Step::Average { span: d });
        }
        match lend {
            LendTo::Nobody => {}
            LendTo::Everyone => {
                for s in 1..n {
                    steps.push(Step::Send { peer: (r + s) % n, src: d });
                }
            }
            LendTo::Root(root) if root != r => steps.push(Step::Send { peer: root, src: d }),
            LendTo::Root(_) => {}
        }
    }
}

/// Lends chunks of `src` to `peer`.
fn lend(steps: &mut Vec<Step>, peer: Rank, src: Span, chunk: usize) {
    for (o, l) in chunks(src.off, src.len, chunk) {
        steps.push(Step::Send { peer, src: Span::new(src.slot, o, l) });
    }
}

/// Direct all_reduce of `count` elements.
pub(super) fn all_reduce(r: Rank, n: usize, count: usize, chunk: usize, avg: bool) -> Vec<Step> {
    let seg = |slot, k| {
        let (o, l) = segment(count, n, k);
        Span::new(slot, o, l)
    };
    let mut steps = Vec::new();
    if n == 1 {
        steps.push(Step::Copy { src: seg(Slot::Input, 0), dst: seg(Slot::Output, 0) });
        return steps;
    }
    for s in 1..n {
        let k = (r + s) % n;
        lend(&mut steps, k, seg(Slot::Input, k), chunk);
    }
    reduce_from_all(&mut steps, (r, n), seg(Slot::Input, r), seg(Slot::Output, r), chunk, avg, LendTo::Everyone);
    for s in 1..n {
        let k = sub_mod(r, s, n);
        for (o, l) in chunks(seg(Slot::Output, k).off, seg(Slot::Output, k).len, chunk) {
            steps.push(Step::Recv { peer: k, dst: Span::new(Slot::Output, o, l) });
        }
    }
    steps
}

/// Direct reduce of `count` elements to `root`: rank `k` reduces segment `k` of every input
/// (into the root's output, or its own scratch, which holds one segment) and lends it to the
/// root. Returns the steps and the scratch elements needed.
pub(super) fn reduce(r: Rank, n: usize, root: Rank, count: usize, chunk: usize, avg: bool) -> (Vec<Step>, usize) {
    let seg = |slot, k| {
        let (o, l) = segment(count, n, k);
        Span::new(slot, o, l)
    };
    let mut steps = Vec::new();
    for s in 1..n {
        let k = (r + s) % n;
        lend(&mut steps, k, seg(Slot::Input, k), chunk);
    }
    let own = seg(Slot::Input, r);
    let (dst, scratch) =
        if r == root { (seg(Slot::Output, r), 0) } else { (Span::new(Slot::Scratch, 0, own.len), own.len) };
    if n == 1 {
        steps.push(Step::Copy { src: own, dst });
        if avg {
            steps.push(Step::Average { span: dst });
        }
    } else {
        reduce_from_all(&mut steps, (r, n), own, dst, chunk, avg, LendTo::Root(root));
    }
    if r == root {
        for s in 1..n {
            let k = (r + s) % n;
            for (o, l) in chunks(seg(Slot::Output, k).off, seg(Slot::Output, k).len, chunk) {
                steps.push(Step::Recv { peer: k, dst: Span::new(Slot::Output, o, l) });
            }
        }
    }
    (steps, scratch)
}

/// Direct reduce-scatter: block `r` of every input lands reduced in rank `r`'s output.
pub(super) fn reduce_scatter(r: Rank, n: usize, count: usize, chunk: usize, avg: bool) -> Vec<Step> {
    let block = |k: usize| Span::new(Slot::Input, k * count, count);
    let out = Span::new(Slot::Output, 0, count);
    let mut steps = Vec::new();
    if n == 1 {
        steps.push(Step::Copy { src: block(0), dst: out });
        if avg {
            steps.push(Step::Average { span: out });
        }
        return steps;
    }
    for s in 1..n {
        let k = (r + s) % n;
        lend(&mut steps, k, block(k), chunk);
    }
    reduce_from_all(&mut steps, (r, n), block(r), out, chunk, avg, LendTo::Nobody);
    steps
}

/// Direct all-gather: every rank lends its input to every peer.
pub(super) fn all_gather(r: Rank, n: usize, count: usize, chunk: usize) -> Vec<Step> {
    let input = Span::new(Slot::Input, 0, count);
    let mut steps = Vec::new();
    for s in 1..n {
        lend(&mut steps, (r + s) % n, input, chunk);
    }
    for s in 1..n {
        let k = sub_mod(r, s, n);
        for (o, l) in chunks(k * count, count, chunk) {
            steps.push(Step::Recv { peer: k, dst: Span::new(Slot::Output, o, l) });
        }
    }
    steps.push(Step::Copy { src: input, dst: Span::new(Slot::Output, r * count, count) });
    steps
}
