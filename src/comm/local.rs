//! Group calls that need no messages: when one thread issues the same collective for every
//! rank of a communicator whose ranks share one device (the host, or the seed's four logical
//! ranks on GPU 0), it holds every buffer the op touches, and the op is a few device
//! operations — one multi-source reduce and the copies of its result — instead of a plan of
//! sends and receives driven rank by rank. Same bits, same checks, same flight-recorder
//! entries and sequence numbers; a fraction of the work (an 8-byte all_reduce across four
//! ranks drops from ~54,000 instructions to a few thousand).
//!
//! Anything outside that case runs the general path: sends and receives, a rank missing from
//! the group, a communicator over sockets, ranks on different devices, a chosen algorithm
//! (the caller asked for that plan), `PreMulSum` (its per-rank scaling sets the bits),
//! calls that disagree (the general path reports the `Mismatch`), a failed communicator,
//! buffers shared between ranks, an in-place all_to_all, or lists of output tensors.

mod host;

use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;

use super::group::Locks;
use super::validate::{Call, Io};
use super::{Communicator, next_seq};
use crate::config::Algorithm;
use crate::device::{Device, Range, Reach, Source};
use crate::error::{CollectiveError, Result};
use crate::op::{OpDesc, OpKind};
use crate::sched::Binding;
use crate::transport::Link;
use crate::types::{Rank, ReduceOp, Scale};

/// One rank's bound buffer, lent by its call.
struct Buf<'b, B> {
    buf: &'b B,
    /// Base offset in bytes.
    base: usize,
    /// Memory id.
    id: usize,
}

/// A rank's buffer, `None` when the call binds none.
type Slot<'b, B> = Option<Buf<'b, B>>;

/// One entry per rank, inline for the usual world sizes (no allocation per op).
type PerRank<T> = SmallVec<[T; 8]>;

/// Runs a group of collectives directly when it qualifies (see the module docs); `None`
/// leaves it to the general path (nothing run, nothing handed to `each`). `checked[i]` is
/// `calls[i]` checked, lending the call's buffers; `held` holds every communicator's locked
/// state. When the group runs here, each call's result is handed to `each`, in call order.
pub(super) fn try_run<'a, D: Device>(
    calls: &[(&'a Communicator<D>, Call<'a, D>)],
    checked: &[(OpDesc, Io<&'a D::Buffer>)],
    held: &mut Locks<'a, D>,
    each: &mut impl FnMut(Result<()>),
) -> Option<()> {
    // One call per communicator.
    if held.len() != calls.len() {
        return None;
    }
    let (by_rank, seq) = qualify(calls, checked, held)?;
    let first = calls[0].0;
    let desc = checked[0].0;
    let mut plan = Plan { inputs: PerRank::new(), outputs: PerRank::new() };
    for &i in &by_rank {
        let io = &checked[i].1;
        plan.inputs.push(slot(&io.input));
        plan.outputs.push(slot(&io.output));
    }
    let started = Instant::now();
    let board = &first.shared.board;
    for ((c, _), (d, _)) in calls.iter().zip(checked) {
        // Every local was found by `qualify`; each takes the op's number, `seq`.
        if let Some(l) = held.local(c) {
            next_seq(l, &desc);
        }
        board.start_at(c.rank, seq, *d, Algorithm::Direct, started);
    }
    // One clock read for the start, the deadline and every rank's entry.
    let deadline = crate::config::deadline_from(started, first.shared.config.timeout());
    // Ranks on one GPU run the op as one piece (a device splits what it cannot bind at once);
    // host memory keeps its cache-sized chunks.
    let chunk = if first.unchunked { usize::MAX } else { first.shared.config.chunk_bytes() };
    let outcome = match host::run(&first.device, &desc, &plan, chunk) {
        Some(r) => r,
        None => execute(&first.device, &desc, &plan, chunk, deadline),
    };
    // Every rank's entry started at `started`: one duration for all of them.
    let took = started.elapsed();
    for ((c, _), (d, _)) in calls.iter().zip(checked) {
        board.finish_after(c.rank, outcome.is_ok(), took);
        each(outcome.clone().map_err(|e| {
            let e = e.with_rank(c.rank).with_op(d.to_string()).with_seq(seq);
            if let Some(l) = held.local(c) {
                l.failed = Some(e.clone());
            }
            e
        }));
    }
    if let Err(e) = &outcome {
        // Every rank is here and has failed; the poison stops any later call at once.
        first.shared.link.poison(first.rank, e.clone().with_rank(first.rank).with_seq(seq));
    }
    Some(())
}

/// Each rank's input and output, indexed by rank.
struct Plan<'b, B> {
    inputs: PerRank<Slot<'b, B>>,
    outputs: PerRank<Slot<'b, B>>,
}

/// Whether the group qualifies; if so, the index in `calls` of each rank's call, by rank,
/// and the op's sequence number (the same on every rank).
fn qualify<'a, D: Device>(
    calls: &[(&'a Communicator<D>, Call<'a, D>)],
    checked: &[(OpDesc, Io<&'a D::Buffer>)],
    held: &mut Locks<'a, D>,
) -> Option<(PerRank<usize>, u64)> {
    let first = calls.first()?.0;
    let world = first.shared.world;
    let desc = checked.first()?.0;
    let kinds_ok = matches!(
        desc.kind,
        OpKind::AllReduce
            | OpKind::Reduce
            | OpKind::Broadcast
            | OpKind::AllGather
            | OpKind::ReduceScatter
            | OpKind::AllToAll
            | OpKind::Gather
            | OpKind::Scatter
            | OpKind::Barrier
    );
    if calls.len() != world
        || !kinds_ok
        || !matches!(first.shared.link, Link::InProc(_))
        || first.shared.config.algorithm() != Algorithm::Auto
        || desc.op.and_then(|o| o.premul(desc.dtype, world)).is_some()
        || (desc.kind == OpKind::AllToAll && desc.in_place)
        // Every communicator checked below shares `first`'s in-process link, whose poison
        // is the same for every rank: one look for the group.
        || first.shared.link.poisoned(first.rank).is_some()
    {
        return None;
    }
    // `usize::MAX`: no call for that rank yet.
    let mut by_rank: PerRank<usize> = smallvec::smallvec![usize::MAX; world];
    // (rank, memory id) of every buffer seen so far: no memory may be shared between ranks
    // (a rank's own input and output may be, in the in-place layouts `validate` accepted).
    let mut mems: SmallVec<[(Rank, usize); 16]> = SmallVec::new();
    let seq = held.local(first)?.seq;
    let root = desc.root.unwrap_or(0);
    for (i, ((c, _), (d, io))) in calls.iter().zip(checked).enumerate() {
        let r = c.rank;
        // An identical call has the same fingerprint: compare them only when they differ.
        let same_call = *d == desc || d.fingerprint().compatible(&desc.fingerprint());
        if !Arc::ptr_eq(&c.shared, &first.shared)
            || std::mem::replace(by_rank.get_mut(r)?, i) != usize::MAX
            || d.algorithm.is_some()
            || !same_call
            || d.in_place != desc.in_place
            || (d.op.is_some() && !c.device.supports(d.dtype))
            || c.reach.iter().any(|&x| x != Reach::Same)
        {
            return None;
        }
        let l = held.local(c)?;
        if l.failed.is_some() || l.seq != seq {
            return None;
        }
        let (input, output) = (contig(&io.input)?, contig(&io.output)?);
        // The buffers the op needs on this rank.
        let needed = match desc.kind {
            OpKind::Barrier => true,
            OpKind::Broadcast => output.is_some() && (r != root || input.is_some()),
            OpKind::Reduce | OpKind::Gather => input.is_some() && (r != root || output.is_some()),
            OpKind::Scatter => output.is_some() && (r != root || input.is_some()),
            _ => input.is_some() && output.is_some(),
        };
        if !needed {
            return None;
        }
        for id in input.into_iter().chain(output) {
            if mems.iter().any(|&(q, m)| q != r && m == id) {
                return None;
            }
            mems.push((r, id));
        }
    }
    (root < world).then_some((by_rank, seq))
}

/// The memory id of a binding the direct path can use: one buffer or none (never a list of
/// tensors, which fails the group's qualification: `None`).
fn contig<B>(b: &Binding<B>) -> Option<Option<usize>> {
    match b {
        Binding::Unbound => Some(None),
        Binding::Contig { id, .. } => Some(Some(*id)),
        Binding::Blocks { .. } => None,
    }
}

/// A binding [`contig`] accepted, as the plan holds it.
#[inline]
fn slot<'b, B>(b: &Binding<&'b B>) -> Slot<'b, B> {
    match *b {
        Binding::Contig { buf, base, id } => Some(Buf { buf, base, id }),
        Binding::Unbound | Binding::Blocks { .. } => None,
    }
}

/// The device work of the op, chunk by chunk (a GPU binds at most so many bytes at once),
/// through the device's own operations (devices whose memory is not the host's, or buffers
/// [`host::run`] does not take).
fn execute<D: Device>(dev: &D, desc: &OpDesc, p: &Plan<'_, D::Buffer>, chunk: usize, deadline: Instant) -> Result<()> {
    let size = desc.dtype.size();
    let n = p.inputs.len();
    let block = desc.count * size;
    let chunk = (chunk / size).max(1) * size;
    let x = Exec { dev, desc, deadline };
    let root = desc.root.unwrap_or(0);
    let range = Exec::<D>::range;
    let (ins, outs) = (&p.inputs[..], &p.outputs[..]);
    match desc.kind {
        OpKind::AllReduce => each_chunk(block, chunk, |o, len| {
            // Rank 0's result is the source of every copy.
            let d = range(&outs[0], o, len)?;
            let srcs = sources(ins[1..].iter().map(|b| range(b, o, len)))?;
            x.reduce(&d, &range(&ins[0], o, len)?, &srcs)?;
            outs[1..].iter().try_for_each(|b| x.copy_range(&d, &outs[0], o, b, o))
        }),
        OpKind::Reduce => each_chunk(block, chunk, |o, len| {
            let acc = range(&ins[root], o, len)?;
            let srcs = sources((0..n).filter(|&r| r != root).map(|r| range(&ins[r], o, len)))?;
            x.reduce(&range(&outs[root], o, len)?, &acc, &srcs)
        }),
        OpKind::Broadcast => {
            each_chunk(block, chunk, |o, len| (0..n).try_for_each(|r| x.copy(&ins[root], o, &outs[r], o, len)))
        }
        OpKind::AllGather => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| (0..n).try_for_each(|q| x.copy(&ins[q], o, &outs[r], q * block + o, len)))
        }),
        OpKind::ReduceScatter => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| {
                let at = r * block + o;
                let acc = range(&ins[r], at, len)?;
                let srcs = sources((0..n).filter(|&q| q != r).map(|q| range(&ins[q], at, len)))?;
                x.reduce(&range(&outs[r], o, len)?, &acc, &srcs)
            })
        }),
        OpKind::AllToAll => each_chunk(block, chunk, |o, len| {
            (0..n)
                .try_for_each(|r| (0..n).try_for_each(|q| x.copy(&ins[q], r * block + o, &outs[r], q * block + o, len)))
        }),
        OpKind::Gather => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|q| x.copy(&ins[q], o, &outs[root], q * block + o, len))
        }),
        OpKind::Scatter => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| x.copy(&ins[root], r * block + o, &outs[r], o, len))
        }),
        _ => Ok(()),
    }
}

/// A reduce's sources, pushed one by one (a `Result` collect's adapter cost more than the
/// few ranges it moves).
fn sources<B>(ranges: impl Iterator<Item = Result<Range<B>>>) -> Result<PerRank<Source<B>>> {
    let mut srcs = PerRank::new();
    for r in ranges {
        srcs.push(Source::Device(r?));
    }
    Ok(srcs)
}

/// Calls `f(offset, len)` over `0..total` in pieces of at most `chunk` bytes (once for 0).
fn each_chunk(total: usize, chunk: usize, mut f: impl FnMut(usize, usize) -> Result<()>) -> Result<()> {
    let mut o = 0;
    loop {
        let len = chunk.min(total - o);
        f(o, len)?;
        o += len;
        if o >= total {
            return Ok(());
        }
    }
}

/// The error of a plan without a buffer its op needs (`qualify` let none through).
fn missing() -> CollectiveError {
    CollectiveError::protocol("a direct group op is missing a buffer")
}

/// The device operations, each waited for before the next reads what it wrote.
struct Exec<'a, D: Device> {
    dev: &'a D,
    desc: &'a OpDesc,
    deadline: Instant,
}

impl<D: Device> Exec<'_, D> {
    /// `len` bytes from `off` of a rank's buffer, with a handle of its own.
    fn range(b: &Slot<'_, D::Buffer>, off: usize, len: usize) -> Result<Range<D::Buffer>> {
        let b = b.as_ref().ok_or_else(missing)?;
        Ok(Range::new(b.buf.clone(), b.base + off, len))
    }

    /// `d = acc (op) srcs...` (the first as the accumulator); then the average's division.
    fn reduce(&self, d: &Range<D::Buffer>, acc: &Range<D::Buffer>, srcs: &[Source<D::Buffer>]) -> Result<()> {
        let combine = self.desc.op.map_or(crate::types::Combine::Sum, ReduceOp::combine);
        let ev = self.dev.reduce(d, acc, srcs, self.desc.dtype, combine)?;
        self.dev.wait(&ev, Some(self.deadline))?;
        if self.desc.op == Some(ReduceOp::Avg) {
            let ev = self.dev.scale(d, d, self.desc.dtype, Scale::DivBy(srcs.len() as u64 + 1))?;
            self.dev.wait(&ev, Some(self.deadline))?;
        }
        Ok(())
    }

    /// `dst[dst_off..] = src[src_off..]`, unless they are the same bytes (in place).
    fn copy(
        &self,
        src: &Slot<'_, D::Buffer>,
        src_off: usize,
        dst: &Slot<'_, D::Buffer>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        let s = Self::range(src, src_off, len)?;
        self.copy_range(&s, src, src_off, dst, dst_off)
    }

    /// [`copy`](Self::copy) from `s`, the range `src[src_off..]` the caller already holds.
    fn copy_range(
        &self,
        s: &Range<D::Buffer>,
        src: &Slot<'_, D::Buffer>,
        src_off: usize,
        dst: &Slot<'_, D::Buffer>,
        dst_off: usize,
    ) -> Result<()> {
        let same = match (src, dst) {
            (Some(a), Some(b)) => a.id == b.id && a.base + src_off == b.base + dst_off,
            (_, None) => return Err(missing()),
            _ => false,
        };
        if same || s.len == 0 {
            return Ok(());
        }
        let ev = self.dev.copy(s, &Self::range(dst, dst_off, s.len)?)?;
        self.dev.wait(&ev, Some(self.deadline))
    }
}
