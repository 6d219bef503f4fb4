//! Plans: each rank's list of steps for one operation. Pure functions of the op, the rank,
//! the world size and the config — no I/O, no clock — so they are tested exhaustively by a
//! simulator that runs every rank's plan against every other's.
//!
//! # Algorithms and thresholds
//!
//! | op | `Auto` picks | alternatives |
//! |---|---|---|
//! | all_reduce | recursive doubling up to [`SMALL_BYTES`]; direct above (ranks share memory), ring above (some peer over the network) | `Ring` (pipelined reduce-scatter + all-gather), `Tree` (binomial reduce + broadcast), `KaryTree(k)` and `Centralized` (k-ary / star reduce + broadcast) |
//! | broadcast | binomial tree up to [`SMALL_BYTES`]; pipelined chain above | `KaryTree(k)` (pipelined k-ary tree), `Centralized` (the root talks to every rank) |
//! | reduce | binomial tree up to [`SMALL_BYTES`]; direct above (ranks share memory: each reduces one segment, the root gathers them), pipelined chain above (some peer over the network) | `Ring` (the chain), `KaryTree(k)`, `Centralized` |
//! | all_gather, reduce_scatter | direct (ranks share memory); ring (some peer over the network) | `Ring`, `Direct` |
//! | all_to_all | pairwise exchange | — |
//! | gather, scatter | direct (root talks to each rank) | — |
//! | barrier | dissemination | — |
//!
//! Before any of these: when every rank is a thread of one process on a device whose memory
//! is host memory, `Auto` runs every collective whose largest part ([`exchange_part`]) fits
//! 4 KiB as an exchange ([`Step::Exchange`], [`Algorithm::Exchange`]): each rank publishes its
//! part in a slot, reads the others' and computes its own result — no messages, no releases.
//! The communicator makes that choice (it knows the devices); [`build`] makes message plans.
//!
//! Messages between two ranks are matched in order, so a sender's k-th send to a peer is
//! that peer's k-th receive from it in the same op; every builder keeps that invariant.

mod direct;
mod kary;
mod ring;
mod simple;
mod tree;

#[cfg(test)]
mod sim;

use crate::config::Algorithm;
use crate::op::{OpDesc, OpKind};
use crate::types::{Rank, ReduceOp};

/// Messages up to this many bytes per rank use the latency-optimal algorithms.
pub const SMALL_BYTES: usize = 64 * 1024;

/// Which of the op's buffers a span refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The op's input (the output itself for in-place ops).
    Input,
    /// The op's output.
    Output,
    /// The rank's scratch buffer ([`Plan::scratch_elems`] elements).
    Scratch,
}

/// A range of elements of one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The buffer.
    pub slot: Slot,
    /// First element.
    pub off: usize,
    /// Element count.
    pub len: usize,
}

impl Span {
    /// `len` elements of `slot` from `off`.
    pub fn new(slot: Slot, off: usize, len: usize) -> Self {
        Span { slot, off, len }
    }
}

/// One step of a plan. `peer` is always another rank of the communicator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Lend `src` to `peer` (it reads it when it is ready; the op ends only once it has).
    Send {
        /// Receiver.
        peer: Rank,
        /// What is lent.
        src: Span,
    },
    /// Receive the next message from `peer` into `dst`.
    Recv {
        /// Sender.
        peer: Rank,
        /// Where it lands.
        dst: Span,
    },
    /// Receive the next message from `peer` and write `dst = acc ⊕ message`.
    RecvReduce {
        /// Sender.
        peer: Rank,
        /// The local operand (identical to `dst` or disjoint from it).
        acc: Span,
        /// Where the result lands.
        dst: Span,
    },
    /// Local copy.
    Copy {
        /// From.
        src: Span,
        /// To.
        dst: Span,
    },
    /// Divide `span` by the rank count in place (the `Avg` finish).
    Average {
        /// What is divided.
        span: Span,
    },
    /// Multiply `span` in place by `2^k`, the power of two f16 `Avg`'s inputs were divided
    /// by first (see [`ReduceOp::Avg`]), after its [`Average`](Step::Average). [`build`]
    /// never makes it: the communicator adds it to the plans of f16 `Avg`.
    Rescale {
        /// What is multiplied.
        span: Span,
        /// The power of two's exponent.
        k: u32,
    },
    /// The whole op in one step, without messages: publish this rank's part in its exchange
    /// slot, read every peer's, compute the result locally. What small ops between threads of
    /// one process run (see [`exchange_part`]); [`build`] never makes it.
    Exchange,
}

/// The plan of an f16 `Avg` whose inputs were pre-multiplied by `2^-k`
/// ([`ReduceOp::avg_prescale`]): with `world` a power of two the prescale was the whole
/// division, and the [`Average`](Step::Average) steps go; otherwise each is followed by a
/// [`Rescale`](Step::Rescale) by `2^k`.
pub(crate) fn prescaled_avg(steps: &[Step], world: usize, k: u32) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len() + 2);
    for &step in steps {
        match step {
            Step::Average { .. } if world.is_power_of_two() => {}
            Step::Average { span } => out.extend([step, Step::Rescale { span, k }]),
            _ => out.push(step),
        }
    }
    out
}

/// What one rank does for one op.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The algorithm that produced them.
    pub algorithm: Algorithm,
    /// Elements of scratch the plan uses.
    pub scratch_elems: usize,
}

/// Offset and length of segment `k` when `count` elements are cut into `n` near-equal parts
/// (the first `count % n` parts are one longer).
pub fn segment(count: usize, n: usize, k: usize) -> (usize, usize) {
    let base = count / n;
    let rem = count % n;
    (k * base + k.min(rem), base + usize::from(k < rem))
}

/// Cuts `off..off + len` into pipelining chunks of at most `chunk` elements; an empty range
/// is one empty chunk, so every segment is at least one message.
pub fn chunks(off: usize, len: usize, chunk: usize) -> impl Iterator<Item = (usize, usize)> {
    let chunk = chunk.max(1);
    let n = len.div_ceil(chunk).max(1);
    (0..n).map(move |i| {
        let o = i * chunk;
        (off + o, chunk.min(len.saturating_sub(o)))
    })
}

/// `(a - b) mod n` for ring arithmetic.
pub(crate) fn sub_mod(a: usize, b: usize, n: usize) -> usize {
    (a + n - (b % n)) % n
}

/// The bytes the largest part of an exchanged op holds (see [`Step::Exchange`]): what each
/// rank publishes — its input, or the root's for broadcast and scatter — or `None` for ops
/// that are not exchanged (point-to-point, split). The same on every rank for matching calls.
pub fn exchange_part(desc: &OpDesc, world: usize) -> Option<usize> {
    let block = desc.bytes();
    match desc.kind {
        OpKind::AllReduce | OpKind::Reduce | OpKind::Broadcast | OpKind::AllGather | OpKind::Gather => Some(block),
        OpKind::ReduceScatter | OpKind::AllToAll | OpKind::Scatter => block.checked_mul(world),
        OpKind::Barrier => Some(0),
        OpKind::Send | OpKind::Recv | OpKind::Split | OpKind::AllToAllV => None,
    }
}

/// The algorithm `Auto` resolves to, or the forced one where it applies. `network`: some
/// peer is reached over a network (TCP) rather than through shared memory; the direct plans,
/// which move `n - 1` times a ring's bytes through each link, are then not chosen by `Auto`.
pub fn choose(desc: &OpDesc, world: usize, forced: Algorithm, network: bool) -> Algorithm {
    // `build` makes message plans: an exchange the communicator could not run is `Auto`.
    let forced = if forced == Algorithm::Exchange { Algorithm::Auto } else { forced };
    let small = desc.bytes() <= SMALL_BYTES;
    match desc.kind {
        OpKind::AllReduce => match forced {
            Algorithm::Auto if small || world <= 1 => Algorithm::RecursiveDoubling,
            Algorithm::Auto if network => Algorithm::Ring,
            Algorithm::Auto => Algorithm::Direct,
            f => f,
        },
        OpKind::Broadcast | OpKind::Reduce => match forced {
            Algorithm::Auto if small => Algorithm::Tree,
            Algorithm::Auto if desc.kind == OpKind::Reduce && world > 1 && !network => Algorithm::Direct,
            Algorithm::Auto | Algorithm::RecursiveDoubling => Algorithm::Ring,
            Algorithm::Direct if desc.kind == OpKind::Broadcast => Algorithm::Ring,
            f => f,
        },
        OpKind::AllGather | OpKind::ReduceScatter => match forced {
            Algorithm::Ring => Algorithm::Ring,
            Algorithm::Direct => Algorithm::Direct,
            _ if network => Algorithm::Ring,
            _ => Algorithm::Direct,
        },
        OpKind::Split => Algorithm::Ring,
        _ => Algorithm::Auto,
    }
}

/// Builds `rank`'s plan for `desc` on `world` ranks. `forced` is the communicator's configured
/// algorithm, overridden by the op's own ([`OpDesc::algorithm`]) when it names one.
/// `chunk_elems` is the pipelining chunk, and with `network` (as in [`choose`]) the
/// longest message too ([`split_messages`]).
pub fn build(desc: &OpDesc, rank: Rank, world: usize, forced: Algorithm, chunk_elems: usize, network: bool) -> Plan {
    debug_assert!(rank < world);
    // An op that names its own algorithm (the peer API's strategies) runs it; the others run
    // the communicator's.
    let algorithm = choose(desc, world, desc.algorithm.unwrap_or(forced), network);
    // Messages that cross a socket or a shared segment are copied into the receiver's own
    // buffers: none larger than a chunk. Between threads the receiver reads the sender's
    // memory in place, in one piece.
    let max_message = if network { chunk_elems } else { usize::MAX };
    if let Some(plan) = kary::build(desc, rank, world, algorithm, chunk_elems.max(1)) {
        return Plan { steps: split_messages(plan.steps, max_message), ..plan };
    }
    let avg = desc.op == Some(ReduceOp::Avg);
    let n = desc.count;
    let c = chunk_elems.max(1);
    let (steps, scratch_elems) = match desc.kind {
        OpKind::AllReduce => match algorithm {
            Algorithm::Ring => (ring::all_reduce(rank, world, n, c, avg), 0),
            Algorithm::Tree => (tree::all_reduce(rank, world, n, avg), 0),
            Algorithm::Direct => (direct::all_reduce(rank, world, n, c, avg), 0),
            _ => (tree::recursive_doubling(rank, world, n, avg), n),
        },
        OpKind::Broadcast => {
            let root = desc.root.unwrap_or(0);
            if algorithm == Algorithm::Tree {
                (tree::broadcast(rank, world, root, n, true), 0)
            } else {
                (tree::chain_broadcast(rank, world, root, n, c), 0)
            }
        }
        OpKind::Reduce if algorithm == Algorithm::Direct => {
            direct::reduce(rank, world, desc.root.unwrap_or(0), n, c, avg)
        }
        OpKind::Reduce => {
            let root = desc.root.unwrap_or(0);
            let acc = if rank == root { Slot::Output } else { Slot::Scratch };
            let scratch = if rank == root { 0 } else { n };
            let steps = if algorithm == Algorithm::Tree {
                tree::reduce(rank, world, root, n, acc, avg)
            } else {
                tree::chain_reduce(rank, world, root, n, c, acc, avg)
            };
            (steps, scratch)
        }
        OpKind::AllGather if algorithm == Algorithm::Direct => (direct::all_gather(rank, world, n, c), 0),
        OpKind::AllGather | OpKind::Split => (ring::all_gather(rank, world, n, c), 0),
        OpKind::ReduceScatter if algorithm == Algorithm::Direct => (direct::reduce_scatter(rank, world, n, c, avg), 0),
        OpKind::ReduceScatter => (ring::reduce_scatter(rank, world, n, c, avg), if world > 2 { 2 * n } else { 0 }),
        OpKind::AllToAll => simple::all_to_all(rank, world, n, desc.in_place),
        // The communicator builds this op's plan from its blocks ([`all_to_all_v`]); from the
        // descriptor alone, its input is taken as even blocks.
        OpKind::AllToAllV => simple::all_to_all(rank, world, n / world.max(1), false),
        OpKind::Gather => (simple::gather(rank, world, desc.root.unwrap_or(0), n), 0),
        OpKind::Scatter => (simple::scatter(rank, world, desc.root.unwrap_or(0), n), 0),
        OpKind::Barrier => (simple::barrier(rank, world), 1),
        OpKind::Send => (vec![Step::Send { peer: desc.peer.unwrap_or(0), src: Span::new(Slot::Input, 0, n) }], 0),
        OpKind::Recv => (vec![Step::Recv { peer: desc.peer.unwrap_or(0), dst: Span::new(Slot::Output, 0, n) }], 0),
    };
    Plan { steps: split_messages(steps, max_message), algorithm, scratch_elems }
}

/// Cuts every message of `steps` longer than `chunk` elements into consecutive messages of
/// at most `chunk`, as [`chunks`] cuts a range: what [`build`] does to the plans of ranks
/// that talk over a network (`network`: every rank of the communicator alike). No message
/// is then larger than a chunk, so a receiver that cannot read the sender's memory (TCP,
/// shared memory) never holds a buffer of a whole block (a 1 GiB `send` was received into
/// a 1 GiB buffer), and the pieces pipeline: the receiver lands one while the next is on
/// its way. The two ends cut alike: ranks whose calls are compatible agree on every
/// message's length (collectives on the count, a send and its recv on count and dtype),
/// and `chunk` is the communicator's. Relative order is kept, so each peer pair's messages
/// still pair up in order, and a deadlock-free plan stays so (sends never block).
pub fn split_messages(steps: Vec<Step>, chunk: usize) -> Vec<Step> {
    let chunk = chunk.max(1);
    let long = |s: &Step| match *s {
        Step::Send { src: span, .. } | Step::Recv { dst: span, .. } | Step::RecvReduce { dst: span, .. } => {
            span.len > chunk
        }
        _ => false,
    };
    if !steps.iter().any(long) {
        return steps;
    }
    let piece = |span: Span, o: usize, l: usize| Span::new(span.slot, span.off + o, l);
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        if !long(&step) {
            out.push(step);
            continue;
        }
        match step {
            Step::Send { peer, src } => {
                out.extend(chunks(0, src.len, chunk).map(|(o, l)| Step::Send { peer, src: piece(src, o, l) }));
            }
            Step::Recv { peer, dst } => {
                out.extend(chunks(0, dst.len, chunk).map(|(o, l)| Step::Recv { peer, dst: piece(dst, o, l) }));
            }
            Step::RecvReduce { peer, acc, dst } => {
                out.extend(chunks(0, dst.len, chunk).map(|(o, l)| Step::RecvReduce {
                    peer,
                    acc: piece(acc, o, l),
                    dst: piece(dst, o, l),
                }))
            }
            other => out.push(other),
        }
    }
    out
}

/// `rank`'s plan of `all_to_all_single_with_splits` on `world` ranks: `blocks` holds its
/// input's block for each peer, then its output's block from each peer, each (first element,
/// length). At step `s` it sends its block for rank `rank + s` and receives rank `rank - s`'s
/// (as the even all_to_all), then copies its own block; every block is a message, empty ones
/// too, so that a peer expecting another length finds out.
///
/// `max_message`: over a network (`Some(chunk)`, as [`build`]'s `network`) a block of at
/// least `chunk` elements travels as [`block_messages`] cuts it — pieces, then an empty
/// message that ends it — so that no receive buffer holds a whole block, and a receiver whose
/// block is longer or shorter than the sender's still finds a piece of another length.
pub fn all_to_all_v(rank: Rank, world: usize, blocks: &[(usize, usize)], max_message: Option<usize>) -> Plan {
    let block = |slot, k: usize| {
        let (first, len) = blocks.get(k).copied().unwrap_or_default();
        Span::new(slot, first, len)
    };
    let mut steps = Vec::with_capacity(2 * world);
    for s in 1..world {
        let (to, from) = ((rank + s) % world, sub_mod(rank, s, world));
        steps.extend(block_messages(block(Slot::Input, to), max_message).map(|src| Step::Send { peer: to, src }));
        let dst = block(Slot::Output, world + from);
        steps.extend(block_messages(dst, max_message).map(|dst| Step::Recv { peer: from, dst }));
    }
    steps.push(Step::Copy { src: block(Slot::Input, rank), dst: block(Slot::Output, world + rank) });
    Plan { steps, algorithm: Algorithm::Auto, scratch_elems: 0 }
}

/// The messages an `all_to_all_single_with_splits` block travels as: one, or with
/// `max_message` (`Some(chunk)`) and a block of at least `chunk` elements, the block cut into
/// chunks and an empty message after the last. Unlike the other ops' messages, a block's
/// length is not part of the call both ranks check, and cut alone a longer block begins with
/// every piece of a shorter one (the receiver would take the shorter block and leave the
/// rest). With the empty end no block's lengths are a prefix of another's: an empty message
/// only ever ends a sequence, and below `chunk` a block is one message shorter than a chunk
/// (proved in `block_messages_of_different_blocks_differ`).
///
/// ```
/// use ruccl::algo::{Slot, Span, block_messages};
/// let lengths = |len, cut| block_messages(Span::new(Slot::Input, 0, len), cut).map(|s| s.len).collect::<Vec<_>>();
/// assert_eq!(lengths(9, Some(4)), [4, 4, 1, 0]);
/// assert_eq!(lengths(8, Some(4)), [4, 4, 0]);
/// assert_eq!(lengths(3, Some(4)), [3]);
/// assert_eq!(lengths(9, None), [9]);
/// ```
pub fn block_messages(span: Span, max_message: Option<usize>) -> impl Iterator<Item = Span> {
    let cut = max_message.map(|c| c.max(1)).filter(|&c| span.len >= c);
    let (whole, pieces) = match cut {
        Some(c) => (None, Some(chunks(0, span.len, c))),
        None => (Some(span), None),
    };
    let end = cut.map(|_| Span::new(span.slot, span.off + span.len, 0));
    whole
        .into_iter()
        .chain(pieces.into_iter().flatten().map(move |(o, l)| Span::new(span.slot, span.off + o, l)))
        .chain(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_exactly() {
        for count in 0..50 {
            for n in 1..10 {
                let mut next = 0;
                for k in 0..n {
                    let (o, l) = segment(count, n, k);
                    assert_eq!(o, next);
                    next += l;
                }
                assert_eq!(next, count);
            }
        }
    }

    #[test]
    fn chunks_cover_exactly() {
        for len in 0..40 {
            for c in 1..9 {
                let v: Vec<_> = chunks(5, len, c).collect();
                assert!(!v.is_empty());
                assert_eq!(v.iter().map(|x| x.1).sum::<usize>(), len);
                assert_eq!(v[0].0, 5);
            }
        }
    }
}
