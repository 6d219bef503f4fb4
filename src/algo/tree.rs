//! Latency plans (binomial trees, recursive doubling) and bandwidth chains for rooted ops.
//! Ranks are renumbered relative to the root: `v = (rank - root) mod n`.

use super::{Slot, Span, Step, chunks, sub_mod};
use crate::types::Rank;

fn real(v: usize, root: Rank, n: usize) -> Rank {
    (v + root) % n
}

/// Binomial-tree broadcast of `count` elements from `root`. The root lends its input
/// (`from_input`) or its output; everyone else receives into the output and forwards it.
pub(super) fn broadcast(r: Rank, n: usize, root: Rank, count: usize, from_input: bool) -> Vec<Step> {
    let v = sub_mod(r, root, n);
    let all = |slot| Span::new(slot, 0, count);
    let mut steps = Vec::new();
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            steps.push(Step::Recv { peer: real(v - mask, root, n), dst: all(Slot::Output) });
            break;
        }
        mask <<= 1;
    }
    let src = if v == 0 && from_input { Slot::Input } else { Slot::Output };
    mask >>= 1;
    while mask > 0 {
        if v + mask < n {
            steps.push(Step::Send { peer: real(v + mask, root, n), src: all(src) });
        }
        mask >>= 1;
    }
    if v == 0 && from_input {
        steps.push(Step::Copy { src: all(Slot::Input), dst: all(Slot::Output) });
    }
    steps
}

/// Binomial-tree reduce to `root`, accumulating in `acc` (the output on the root, scratch
/// elsewhere). Leaves lend their input directly.
pub(super) fn reduce(r: Rank, n: usize, root: Rank, count: usize, acc: Slot, avg: bool) -> Vec<Step> {
    let v = sub_mod(r, root, n);
    let all = |slot| Span::new(slot, 0, count);
    let mut steps = Vec::new();
    let mut cur = Slot::Input;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            steps.push(Step::Send { peer: real(v - mask, root, n), src: all(cur) });
            return steps;
        }
        if v + mask < n {
            steps.push(Step::RecvReduce { peer: real(v + mask, root, n), acc: all(cur), dst: all(acc) });
            cur = acc;
        }
        mask <<= 1;
    }
    if cur == Slot::Input {
        steps.push(Step::Copy { src: all(Slot::Input), dst: all(acc) });
    }
    if avg {
        steps.push(Step::Average { span: all(acc) });
    }
    steps
}

/// all_reduce as a binomial reduce to rank 0 (accumulating in the output) followed by a
/// binomial broadcast of the output.
pub(super) fn all_reduce(r: Rank, n: usize, count: usize, avg: bool) -> Vec<Step> {
    let mut steps = reduce(r, n, 0, count, Slot::Output, avg);
    steps.extend(broadcast(r, n, 0, count, false));
    steps
}

/// Recursive-doubling all_reduce. For a world that is not a power of two, the first
/// `2 * extra` ranks pair up: even ones hand their input to the odd neighbour before the
/// exchange rounds and get the result back after them.
///
/// Each round writes the buffer the rank did *not* lend in that round (output and scratch
/// alternate, arranged so the last round lands in the output), so no round waits for its
/// partner to finish reading before it can write.
pub(super) fn recursive_doubling(r: Rank, n: usize, count: usize, avg: bool) -> Vec<Step> {
    let all = |slot| Span::new(slot, 0, count);
    let p = if n.is_power_of_two() { n } else { n.next_power_of_two() / 2 };
    let extra = n - p;
    let rounds = p.trailing_zeros() as usize;
    // The buffer round `k` writes; the fold writes the one round 0 does not (as round 1).
    let dst_of = |k: usize| if (rounds + k) % 2 == 1 { Slot::Output } else { Slot::Scratch };
    let mut steps = Vec::new();
    if r < 2 * extra && r.is_multiple_of(2) {
        steps.push(Step::Send { peer: r + 1, src: all(Slot::Input) });
        steps.push(Step::Recv { peer: r + 1, dst: all(Slot::Output) });
        return steps;
    }
    let mut cur = Slot::Input;
    if r < 2 * extra {
        let fold = dst_of(1);
        steps.push(Step::RecvReduce { peer: r - 1, acc: all(Slot::Input), dst: all(fold) });
        cur = fold;
    }
    let v = if r < 2 * extra { r / 2 } else { r - extra };
    let to_real = |u: usize| if u < extra { 2 * u + 1 } else { u + extra };
    for k in 0..rounds {
        let peer = to_real(v ^ (1 << k));
        steps.push(Step::Send { peer, src: all(cur) });
        steps.push(Step::RecvReduce { peer, acc: all(cur), dst: all(dst_of(k)) });
        cur = dst_of(k);
    }
    if cur != Slot::Output {
        steps.push(Step::Copy { src: all(cur), dst: all(Slot::Output) });
    }
    if avg {
        steps.push(Step::Average { span: all(Slot::Output) });
    }
    if r < 2 * extra {
        steps.push(Step::Send { peer: r - 1, src: all(Slot::Output) });
    }
    steps
}

/// Pipelined chain broadcast: `root -> root+1 -> ...`, chunk by chunk.
pub(super) fn chain_broadcast(r: Rank, n: usize, root: Rank, count: usize, chunk: usize) -> Vec<Step> {
    let v = sub_mod(r, root, n);
    let mut steps = Vec::new();
    for (o, l) in chunks(0, count, chunk) {
        if v > 0 {
            steps.push(Step::Recv { peer: real(v - 1, root, n), dst: Span::new(Slot::Output, o, l) });
        }
        if v + 1 < n {
            let src = if v == 0 { Slot::Input } else { Slot::Output };
            steps.push(Step::Send { peer: real(v + 1, root, n), src: Span::new(src, o, l) });
        }
    }
    if v == 0 {
        steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: Span::new(Slot::Output, 0, count) });
    }
    steps
}

/// Pipelined chain reduce: `root-1 -> ... -> root+1 -> root`, accumulating in `acc`.
pub(super) fn chain_reduce(
    r: Rank,
    n: usize,
    root: Rank,
    count: usize,
    chunk: usize,
    acc: Slot,
    avg: bool,
) -> Vec<Step> {
    let v = sub_mod(r, root, n);
    let mut steps = Vec::new();
    for (o, l) in chunks(0, count, chunk) {
        let mut cur = Span::new(Slot::Input, o, l);
        if v + 1 < n {
            let dst = Span::new(acc, o, l);
            steps.push(Step::RecvReduce { peer: real(v + 1, root, n), acc: cur, dst });
            cur = dst;
        }
        if v > 0 {
            steps.push(Step::Send { peer: real(v - 1, root, n), src: cur });
        }
    }
    if v == 0 {
        if n == 1 {
            steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: Span::new(acc, 0, count) });
        }
        if avg {
            steps.push(Step::Average { span: Span::new(acc, 0, count) });
        }
    }
    steps
}
