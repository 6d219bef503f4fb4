//! Direct plans for ranks that share memory: every rank reads the blocks it needs straight
//! from their owners, so a reduction is one pass over all sources (the scheduler fuses a run
//! of receive-reduces into one kernel) and nothing waits on a chain of neighbours.
//!
//! - reduce-scatter: rank `k` receives block `k` from every peer and reduces it once;
//! - all-gather: every rank lends its block to every peer;
//! - all_reduce: the two back to back, chunk by chunk, so a finished chunk is lent at once.
//!
//! Over a network these move `n - 1` times more bytes through each link than a ring, so
//! they are chosen only when peers share memory.

use super::{Slot, Span, Step, chunks, segment, sub_mod};
use crate::types::Rank;

/// For each chunk of `dst`: receive-reduce the matching chunk from every peer (in a fixed
/// order, so results are deterministic), starting from `acc`; then `after(chunk)`.
fn reduce_from_all(
    steps: &mut Vec<Step>,
    (r, n): (Rank, usize),
    acc: Span,
    dst: Span,
    chunk: usize,
    avg: bool,
    lend: bool,
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
        if lend {
            for s in 1..n {
                steps.push(Step::Send { peer: (r + s) % n, src: d });
            }
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
    reduce_from_all(&mut steps, (r, n), seg(Slot::Input, r), seg(Slot::Output, r), chunk, avg, true);
    for s in 1..n {
        let k = sub_mod(r, s, n);
        for (o, l) in chunks(seg(Slot::Output, k).off, seg(Slot::Output, k).len, chunk) {
            steps.push(Step::Recv { peer: k, dst: Span::new(Slot::Output, o, l) });
        }
    }
    steps
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
    reduce_from_all(&mut steps, (r, n), block(r), out, chunk, avg, false);
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
