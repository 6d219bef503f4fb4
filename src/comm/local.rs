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

use std::sync::Arc;

use smallvec::SmallVec;
use std::time::Instant;

use super::validate::Io;
use super::{Communicator, Local, next_seq};
use crate::config::Algorithm;
use crate::device::{Device, Range, Reach, Source};
use crate::error::{CollectiveError, Result};
use crate::op::{OpDesc, OpKind};
use crate::sched::Binding;
use crate::transport::Link;
use crate::types::{Rank, ReduceOp, Scale};

/// One rank's bound buffer, moved out of its checked call: the device operation that uses it
/// last takes the handle (`buf`), the others clone it.
struct Buf<B> {
    buf: Option<B>,
    /// Base offset in bytes.
    base: usize,
    /// Memory id.
    id: usize,
}

/// A rank's buffer, `None` when the call binds none.
type Slot<B> = Option<Buf<B>>;

/// One entry per rank, inline for the usual world sizes (no allocation per op).
type PerRank<T> = SmallVec<[T; 8]>;

/// Runs a group of collectives directly when it qualifies (see the module docs); `None`
/// leaves it to the general path with `checked` untouched (and nothing handed to `each`).
/// `checked[i]` runs on `comms[i]` with `locals[i]`, its locked state; when it runs here, its
/// buffers are moved out and its result is handed to `each`, in order.
pub(super) fn try_run<D: Device>(
    comms: &[&Communicator<D>],
    checked: &mut [(OpDesc, Io<D::Buffer>)],
    locals: &mut [&mut Local<D>],
    each: &mut impl FnMut(Result<()>),
) -> Option<()> {
    let by_rank = qualify(comms, checked, locals)?;
    let first = comms[0];
    let desc = checked[0].0;
    let mut plan = Plan { inputs: PerRank::new(), outputs: PerRank::new() };
    for &i in &by_rank {
        let io = &mut checked[i].1;
        plan.inputs.push(slot(std::mem::replace(&mut io.input, Binding::Unbound)));
        plan.outputs.push(slot(std::mem::replace(&mut io.output, Binding::Unbound)));
    }
    let seqs: PerRank<u64> = locals.iter_mut().map(|l| next_seq(l, &desc)).collect();
    let started = Instant::now();
    for (i, c) in comms.iter().enumerate() {
        first.shared.board.start_at(c.rank, seqs[i], checked[i].0, Algorithm::Direct, started);
    }
    // One clock read for the start, the deadline and every rank's entry.
    let deadline = crate::config::deadline_from(started, first.shared.config.timeout());
    // Ranks on one GPU run the op as one piece (a device splits what it cannot bind at once);
    // host memory keeps its cache-sized chunks.
    let chunk = if first.unchunked { usize::MAX } else { first.shared.config.chunk_bytes() };
    let outcome = execute(&first.device, &desc, &mut plan, chunk, deadline);
    // Every rank's entry started at `started`: one duration for all of them.
    let took = started.elapsed();
    for (i, c) in comms.iter().enumerate() {
        first.shared.board.finish_after(c.rank, outcome.is_ok(), took);
        each(outcome.clone().map_err(|e| {
            let e = e.with_rank(c.rank).with_op(checked[i].0.to_string()).with_seq(seqs[i]);
            locals[i].failed = Some(e.clone());
            e
        }));
    }
    if let Err(e) = &outcome {
        // Every rank is here and has failed; the poison stops any later call at once.
        first.shared.link.poison(comms[0].rank, e.clone().with_rank(comms[0].rank).with_seq(seqs[0]));
    }
    Some(())
}

/// Each rank's input and output, indexed by rank.
struct Plan<B> {
    inputs: PerRank<Slot<B>>,
    outputs: PerRank<Slot<B>>,
}

/// Whether the group qualifies; if so, the index in `checked` of each rank's call, by rank.
fn qualify<D: Device>(
    comms: &[&Communicator<D>],
    checked: &[(OpDesc, Io<D::Buffer>)],
    locals: &[&mut Local<D>],
) -> Option<PerRank<usize>> {
    let first = *comms.first()?;
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
            | OpKind::Barrier
    );
    if comms.len() != world
        || !kinds_ok
        || !matches!(first.shared.link, Link::InProc(_))
        || first.shared.config.algorithm() != Algorithm::Auto
        || matches!(desc.op, Some(ReduceOp::PreMulSum(_)))
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
    let seq = locals.first()?.seq;
    let root = desc.root.unwrap_or(0);
    for (i, ((c, (d, io)), l)) in comms.iter().zip(checked).zip(locals).enumerate() {
        let r = c.rank;
        // An identical call has the same fingerprint: compare them only when they differ.
        let same_call = *d == desc || d.fingerprint().compatible(&desc.fingerprint());
        if !Arc::ptr_eq(&c.shared, &first.shared)
            || std::mem::replace(&mut by_rank[r], i) != usize::MAX
            || d.algorithm.is_some()
            || !same_call
            || d.in_place != desc.in_place
            || l.failed.is_some()
            || l.seq != seq
            || !c.device.supports(d.dtype)
            || c.reach.iter().any(|&x| x != Reach::Same)
        {
            return None;
        }
        let (input, output) = (contig(&io.input)?, contig(&io.output)?);
        // The buffers the op needs on this rank.
        let needed = match desc.kind {
            OpKind::Barrier => true,
            OpKind::Broadcast => output.is_some() && (r != root || input.is_some()),
            OpKind::Reduce => input.is_some() && (r != root || output.is_some()),
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
    (root < world).then_some(by_rank)
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

/// A binding [`contig`] accepted, moved into the plan.
#[inline]
fn slot<B>(b: Binding<B>) -> Slot<B> {
    match b {
        Binding::Contig { buf, base, id } => Some(Buf { buf: Some(buf), base, id }),
        Binding::Unbound | Binding::Blocks { .. } => None,
    }
}

/// The device work of the op, chunk by chunk (a GPU binds at most so many bytes at once).
fn execute<D: Device>(dev: &D, desc: &OpDesc, p: &mut Plan<D::Buffer>, chunk: usize, deadline: Instant) -> Result<()> {
    let size = desc.dtype.size();
    let n = p.inputs.len();
    let block = desc.count * size;
    let chunk = (chunk / size).max(1) * size;
    let x = Exec { dev, desc, deadline };
    let root = desc.root.unwrap_or(0);
    let range = Exec::<D>::range;
    match desc.kind {
        OpKind::AllReduce => each_chunk(block, chunk, |o, len, last| {
            // Every buffer is used once per chunk: the last chunk's operations take the
            // handles instead of cloning them. Rank 0's result is the source of every copy.
            let d = range(&mut p.outputs[0], o, len, last)?;
            let acc = range(&mut p.inputs[0], o, len, last)?;
            let srcs = sources(p.inputs[1..].iter_mut().map(|b| range(b, o, len, last)))?;
            x.reduce(&d, &acc, &srcs)?;
            let (out0, rest) = p.outputs.split_at_mut(1);
            rest.iter_mut().try_for_each(|b| x.copy_range(&d, &out0[0], o, b, o, last))
        }),
        OpKind::Reduce => each_chunk(block, chunk, |o, len, _| {
            let acc = range(&mut p.inputs[root], o, len, false)?;
            let srcs = sources((0..n).filter(|&r| r != root).map(|r| range(&mut p.inputs[r], o, len, false)))?;
            x.reduce(&range(&mut p.outputs[root], o, len, false)?, &acc, &srcs)
        }),
        OpKind::Broadcast => each_chunk(block, chunk, |o, len, _| {
            (0..n).try_for_each(|r| x.copy(&mut p.inputs, root, o, &mut p.outputs[r], o, len))
        }),
        OpKind::AllGather => each_chunk(block, chunk, |o, len, _| {
            (0..n).try_for_each(|r| {
                (0..n).try_for_each(|q| x.copy(&mut p.inputs, q, o, &mut p.outputs[r], q * block + o, len))
            })
        }),
        OpKind::ReduceScatter => each_chunk(block, chunk, |o, len, _| {
            (0..n).try_for_each(|r| {
                let at = r * block + o;
                let acc = range(&mut p.inputs[r], at, len, false)?;
                let srcs = sources((0..n).filter(|&q| q != r).map(|q| range(&mut p.inputs[q], at, len, false)))?;
                x.reduce(&range(&mut p.outputs[r], o, len, false)?, &acc, &srcs)
            })
        }),
        OpKind::AllToAll => each_chunk(block, chunk, |o, len, _| {
            (0..n).try_for_each(|r| {
                (0..n).try_for_each(|q| x.copy(&mut p.inputs, q, r * block + o, &mut p.outputs[r], q * block + o, len))
            })
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

/// Calls `f(offset, len, last)` over `0..total` in pieces of at most `chunk` bytes (once for
/// 0); `last` on the final piece.
fn each_chunk(total: usize, chunk: usize, mut f: impl FnMut(usize, usize, bool) -> Result<()>) -> Result<()> {
    let mut o = 0;
    loop {
        let len = chunk.min(total - o);
        let last = o + len >= total;
        f(o, len, last)?;
        o += len;
        if last {
            return Ok(());
        }
    }
}

/// The device operations, each waited for before the next reads what it wrote.
struct Exec<'a, D: Device> {
    dev: &'a D,
    desc: &'a OpDesc,
    deadline: Instant,
}

impl<D: Device> Exec<'_, D> {
    /// `len` bytes from `off` of a rank's buffer: its handle when `take` (its last use),
    /// a clone otherwise.
    fn range(b: &mut Slot<D::Buffer>, off: usize, len: usize, take: bool) -> Result<Range<D::Buffer>> {
        let missing = || CollectiveError::protocol("a direct group op is missing a buffer");
        let b = b.as_mut().ok_or_else(missing)?;
        let buf = if take { b.buf.take() } else { b.buf.clone() };
        Ok(Range::new(buf.ok_or_else(missing)?, b.base + off, len))
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

    /// `dst[dst_off..] = inputs[q][src_off..]`, unless they are the same bytes (in place).
    fn copy(
        &self,
        inputs: &mut [Slot<D::Buffer>],
        q: Rank,
        src_off: usize,
        dst: &mut Slot<D::Buffer>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        let s = Self::range(&mut inputs[q], src_off, len, false)?;
        self.copy_range(&s, &inputs[q], src_off, dst, dst_off, false)
    }

    /// [`copy`](Self::copy) from `s`, the range `src[src_off..]` the caller already holds;
    /// takes `dst`'s handle when `take`.
    fn copy_range(
        &self,
        s: &Range<D::Buffer>,
        src: &Slot<D::Buffer>,
        src_off: usize,
        dst: &mut Slot<D::Buffer>,
        dst_off: usize,
        take: bool,
    ) -> Result<()> {
        let same = match (src, &*dst) {
            (Some(a), Some(b)) => a.id == b.id && a.base + src_off == b.base + dst_off,
            (_, None) => return Err(CollectiveError::protocol("a direct group op is missing a buffer")),
            _ => false,
        };
        if same || s.len == 0 {
            return Ok(());
        }
        let ev = self.dev.copy(s, &Self::range(dst, dst_off, s.len, take)?)?;
        self.dev.wait(&ev, Some(self.deadline))
    }
}
