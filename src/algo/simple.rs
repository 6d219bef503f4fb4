//! Direct plans: pairwise all_to_all, flat gather and scatter, dissemination barrier.

use super::{Slot, Span, Step, sub_mod};
use crate::types::Rank;

/// Pairwise exchange: at step `s` rank `r` sends block `r+s` to `r+s` and receives block
/// `r-s` from `r-s`.
///
/// In place, block `p` is both what goes to peer `p` and where `p`'s block lands: it is lent
/// at step `d = p - r` and written at step `n - d`. Where it is lent first ([`lent_in_place`])
/// it is lent as it is: `p` reads it at its own step `d`, before it sends the message that
/// overwrites it (its step `n - d`), so that receive never finds it still lent (which would
/// send the message through staging). The other blocks (`2d >= n`: written first, or in the
/// same step) are copied to scratch before anything is received, and lent from there.
pub(super) fn all_to_all(r: Rank, n: usize, count: usize, in_place: bool) -> (Vec<Step>, usize) {
    let mut steps = Vec::new();
    let block = |slot, k: usize| Span::new(slot, k * count, count);
    // The scratch block of the block sent at step `s` (one that is not lent in place).
    let first_staged = n.div_ceil(2);
    let scratch = |s: usize| Span::new(Slot::Scratch, (s - first_staged) * count, count);
    if !in_place {
        // Every block goes out before any comes in: a receive waits for its peer's send, and
        // a send issued only after the receive before it would make each rank's later peers
        // wait for its earlier ones.
        steps.extend((1..n).map(|s| Step::Send { peer: (r + s) % n, src: block(Slot::Input, (r + s) % n) }));
        steps.extend(
            (1..n).map(|s| sub_mod(r, s, n)).map(|from| Step::Recv { peer: from, dst: block(Slot::Output, from) }),
        );
        steps.push(Step::Copy { src: block(Slot::Input, r), dst: block(Slot::Output, r) });
        return (steps, 0);
    }
    // In place, a step's receive lands on a block sent at another step: blocks lent in place
    // go out one step at a time, interleaved with the receives; the others are staged first.
    for s in (1..n).filter(|&s| !lent_in_place(s, n)) {
        steps.push(Step::Copy { src: block(Slot::Input, (r + s) % n), dst: scratch(s) });
    }
    for s in 1..n {
        let to = (r + s) % n;
        let from = sub_mod(r, s, n);
        let src = if lent_in_place(s, n) { block(Slot::Input, to) } else { scratch(s) };
        steps.push(Step::Send { peer: to, src });
        steps.push(Step::Recv { peer: from, dst: block(Slot::Output, from) });
    }
    (steps, (n - first_staged) * count)
}

/// Whether an in-place all_to_all lends the block it sends at step `s` of `n` in place: the
/// peer reads it (its step `s`) before it sends the block that lands there (its step
/// `n - s`), which holds when `s < n - s`.
fn lent_in_place(s: usize, n: usize) -> bool {
    2 * s < n
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block of an in-place all_to_all is sent before the message from the same peer
    /// lands in it, and the peer reads it before it sends that message; the rest are staged.
    #[test]
    fn in_place_all_to_all_lends_only_blocks_read_before_they_are_written() {
        for n in 1..12 {
            for r in 0..n {
                let (steps, scratch) = all_to_all(r, n, 3, true);
                assert_eq!(scratch, n / 2 * 3, "scratch of rank {r} of {n}");
                let pos = |want: &dyn Fn(&Step) -> bool| steps.iter().position(want);
                for p in (0..n).filter(|&p| p != r) {
                    let d = sub_mod(p, r, n);
                    let out = Span::new(Slot::Output, p * 3, 3);
                    let sent = pos(&|s| matches!(*s, Step::Send { peer, .. } if peer == p)).unwrap();
                    let landed = pos(&|s| matches!(*s, Step::Recv { peer, dst } if peer == p && dst == out)).unwrap();
                    let Step::Send { src, .. } = steps[sent] else { unreachable!() };
                    if lent_in_place(d, n) {
                        assert_eq!(src, Span::new(Slot::Input, p * 3, 3), "rank {r} of {n} lends block {p} in place");
                        assert!(sent < landed, "rank {r} of {n}: block {p} is written before it is lent");
                    } else {
                        assert_eq!(src.slot, Slot::Scratch, "rank {r} of {n} stages block {p}");
                        let copied = pos(&|s| matches!(*s, Step::Copy { dst, .. } if dst == src)).unwrap();
                        assert!(copied < landed && copied < sent, "rank {r} of {n}: block {p} staged too late");
                    }
                }
                // The own block stays where it is.
                assert!(!steps.iter().any(|s| matches!(*s, Step::Copy { dst, .. } if dst.slot == Slot::Output)));
            }
        }
    }

    #[test]
    fn which_steps_lend_in_place() {
        assert!(!lent_in_place(1, 2));
        assert!(lent_in_place(1, 3) && !lent_in_place(2, 3));
        assert!(lent_in_place(1, 4) && !lent_in_place(2, 4) && !lent_in_place(3, 4));
    }
}
