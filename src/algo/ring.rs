//! Ring plans: pipelined reduce-scatter, all-gather, and all_reduce as the two back to back.
//! Rank `r` sends to `r + 1` and receives from `r - 1`; each segment is cut into chunks, and
//! every chunk of a step is sent before the step's first receive, so neighbours overlap.

use super::{Slot, Span, Step, chunks, segment, sub_mod};
use crate::types::Rank;

/// Emits one ring step: send segment `send` of `src`, receive segment `recv` (reduced or
/// copied into `dst`), chunk by chunk. Every send of the step comes before its first
/// receive: the step's sources are final before it begins (this rank's input, or segments
/// received in earlier steps), and a send never blocks, so the right neighbour has every
/// chunk to take while this rank waits for the left one's. Interleaved (send a chunk,
/// receive a chunk), a rank waiting for chunk `j` had not yet sent chunk `j + 1`: over TCP
/// each direction carried one chunk at a time (2 processes, 64 MiB all_reduce busbw 1.1
/// GB/s, 1.45 with the sends ahead). Segment offsets are given as spans.
fn ring_step(steps: &mut Vec<Step>, right: Rank, left: Rank, src: Span, dst: Span, acc: Option<Span>, chunk: usize) {
    steps.extend(
        chunks(src.off, src.len, chunk).map(|(o, l)| Step::Send { peer: right, src: Span::new(src.slot, o, l) }),
    );
    let accs = chunks(acc.map_or(0, |a| a.off), dst.len, chunk);
    steps.extend(chunks(dst.off, dst.len, chunk).zip(accs).map(|((o, l), (ao, _))| {
        let d = Span::new(dst.slot, o, l);
        match acc {
            Some(a) => Step::RecvReduce { peer: left, acc: Span::new(a.slot, ao, l), dst: d },
            None => Step::Recv { peer: left, dst: d },
        }
    }));
}

/// Ring all_reduce of `count` elements: reduce-scatter leaves rank `r` with the final
/// segment `r + 1`, then all-gather circulates the final segments.
pub(super) fn all_reduce(r: Rank, n: usize, count: usize, chunk: usize, avg: bool) -> Vec<Step> {
    let all = Span::new(Slot::Output, 0, count);
    if n == 1 {
        return vec![Step::Copy { src: Span::new(Slot::Input, 0, count), dst: all }];
    }
    let (right, left) = ((r + 1) % n, sub_mod(r, 1, n));
    let seg = |slot, k| {
        let (o, l) = segment(count, n, k);
        Span::new(slot, o, l)
    };
    let mut steps = Vec::new();
    for s in 0..n - 1 {
        let send = sub_mod(r, s, n);
        let recv = sub_mod(r, s + 1, n);
        let src = if s == 0 { Slot::Input } else { Slot::Output };
        ring_step(
            &mut steps,
            right,
            left,
            seg(src, send),
            seg(Slot::Output, recv),
            Some(seg(Slot::Input, recv)),
            chunk,
        );
    }
    let mine = (r + 1) % n;
    if avg {
        steps.push(Step::Average { span: seg(Slot::Output, mine) });
    }
    for s in 0..n - 1 {
        let send = sub_mod(r + 1, s, n);
        let recv = sub_mod(r, s, n);
        ring_step(&mut steps, right, left, seg(Slot::Output, send), seg(Slot::Output, recv), None, chunk);
    }
    steps
}

/// Ring reduce-scatter: the input holds `n` blocks of `count`; rank `r` ends with the
/// reduced block `r` in its output. Partial sums alternate between two scratch blocks.
pub(super) fn reduce_scatter(r: Rank, n: usize, count: usize, chunk: usize, avg: bool) -> Vec<Step> {
    let out = Span::new(Slot::Output, 0, count);
    let block = |slot, k: usize| Span::new(slot, k * count, count);
    let mut steps = Vec::new();
    if n == 1 {
        steps.push(Step::Copy { src: block(Slot::Input, 0), dst: out });
    } else {
        let (right, left) = ((r + 1) % n, sub_mod(r, 1, n));
        for s in 0..n - 1 {
            let send = sub_mod(r, s + 1, n);
            let recv = sub_mod(r, s + 2, n);
            let src = if s == 0 { block(Slot::Input, send) } else { block(Slot::Scratch, (s - 1) % 2) };
            let dst = if s == n - 2 { out } else { block(Slot::Scratch, s % 2) };
            ring_step(&mut steps, right, left, src, dst, Some(block(Slot::Input, recv)), chunk);
        }
    }
    if avg {
        steps.push(Step::Average { span: out });
    }
    steps
}

/// Ring all-gather: every rank's `count` input lands in block `rank` of every output.
pub(super) fn all_gather(r: Rank, n: usize, count: usize, chunk: usize) -> Vec<Step> {
    let block = |slot, k: usize| Span::new(slot, k * count, count);
    let mut steps = Vec::new();
    if n > 1 {
        let (right, left) = ((r + 1) % n, sub_mod(r, 1, n));
        for s in 0..n - 1 {
            let send = sub_mod(r, s, n);
            let recv = sub_mod(r, s + 1, n);
            let src = if s == 0 { Span::new(Slot::Input, 0, count) } else { block(Slot::Output, send) };
            ring_step(&mut steps, right, left, src, block(Slot::Output, recv), None, chunk);
        }
    }
    steps.push(Step::Copy { src: Span::new(Slot::Input, 0, count), dst: block(Slot::Output, r) });
    steps
}
