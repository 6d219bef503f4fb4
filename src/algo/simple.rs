//! Direct plans: pairwise all_to_all, flat gather and scatter, dissemination barrier.

use super::{Slot, Span, Step, sub_mod};
use crate::types::Rank;

/// Pairwise exchange: at step `s` rank `r` sends block `r+s` to `r+s` and receives block
/// `r-s` from `r-s`. In place, the input is first copied to scratch.
pub(super) fn all_to_all(r: Rank, n: usize, count: usize, in_place: bool) -> (Vec<Step>, usize) {
    let mut steps = Vec::new();
    let (src, scratch) = if in_place {
        steps.push(Step::Copy {
            src: Span::new(Slot::Input, 0, n * count),
            dst: Span::new(Slot::Scratch, 0, n * count),
        });
        (Slot::Scratch, n * count)
    } else {
        (Slot::Input, 0)
    };
    let block = |slot, k: usize| Span::new(slot, k * count, count);
    for s in 1..n {
        let to = (r + s) % n;
        let from = sub_mod(r, s, n);
        steps.push(Step::Send { peer: to, src: block(src, to) });
        steps.push(Step::Recv { peer: from, dst: block(Slot::Output, from) });
    }
    steps.push(Step::Copy { src: block(src, r), dst: block(Slot::Output, r) });
    (steps, scratch)
}

/// Flat gather: every rank lends its input to the root, which receives block by block.
pub(super) fn gather(r: Rank, n: usize, root: Rank, count: usize) -> Vec<Step> {
    let block = |k: usize| Span::new(Slot::Output, k * count, count);
    if r != root {
        return vec![Step::Send { peer: root, src: Span::new(Slot::Input, 0, count) }];
    }
    let mut steps: Vec<Step> = (1..n).map(|s| (root + s) % n).map(|k| Step::Recv { peer: k, dst: block(k) }).collect();
    steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: block(root) });
    steps
}

/// Flat scatter: the root lends block `k` of its input to rank `k`.
pub(super) fn scatter(r: Rank, n: usize, root: Rank, count: usize) -> Vec<Step> {
    let out = Span::new(Slot::Output, 0, count);
    if r != root {
        return vec![Step::Recv { peer: root, dst: out }];
    }
    let mut steps: Vec<Step> = (1..n)
        .map(|s| (root + s) % n)
        .map(|k| Step::Send { peer: k, src: Span::new(Slot::Input, k * count, count) })
        .collect();
    steps.push(Step::Copy { src: Span::new(Slot::Input, root * count, count), dst: out });
    steps
}

/// Dissemination barrier: in round `k` rank `r` signals `r + 2^k` and waits for `r - 2^k`.
pub(super) fn barrier(r: Rank, n: usize) -> Vec<Step> {
    let empty = Span::new(Slot::Scratch, 0, 0);
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        steps.push(Step::Send { peer: (r + d) % n, src: empty });
        steps.push(Step::Recv { peer: sub_mod(r, d, n), dst: empty });
        d <<= 1;
    }
    steps
}
