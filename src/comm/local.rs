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

/// One rank's buffers: (buffer, base offset in bytes, memory id).
type Buf<B> = Option<(B, usize, usize)>;

/// One entry per rank, inline for the usual world sizes (no allocation per op).
type PerRank<T> = SmallVec<[T; 8]>;

/// Runs a group of collectives directly when it qualifies (see the module docs); `None`
/// leaves it to the general path, untouched. `calls[i]` runs on `comms[i]` with
/// `locals[i]`, its locked state.
pub(super) fn try_run<D: Device>(
    comms: &[&Communicator<D>],
    checked: &[(OpDesc, Io<D::Buffer>)],
    locals: &mut [&mut Local<D>],
) -> Option<Vec<Result<()>>> {
    let plan = qualify(comms, checked, locals)?;
    let first = comms[0];
    let desc = checked[0].0;
    let seqs: PerRank<u64> = locals.iter_mut().map(|l| next_seq(l, &desc)).collect();
    let started = Instant::now();
    for (i, c) in comms.iter().enumerate() {
        first.shared.board.start_at(c.rank, seqs[i], checked[i].0, Algorithm::Direct, started);
    }
    let deadline = crate::config::deadline_after(first.shared.config.timeout());
    let outcome = execute(&first.device, &desc, &plan, first.shared.config.chunk_bytes(), deadline);
    let mut results = Vec::with_capacity(comms.len());
    let finished = Instant::now();
    for (i, c) in comms.iter().enumerate() {
        first.shared.board.finish_at(c.rank, outcome.is_ok(), finished);
        results.push(outcome.clone().map_err(|e| {
            let e = e.with_rank(c.rank).with_op(checked[i].0.to_string()).with_seq(seqs[i]);
            locals[i].failed = Some(e.clone());
            e
        }));
    }
    if let Err(e) = &outcome {
        // Every rank is here and has failed; the poison stops any later call at once.
        first.shared.link.poison(comms[0].rank, e.clone().with_rank(comms[0].rank).with_seq(seqs[0]));
    }
    Some(results)
}

/// Each rank's input and output, indexed by rank.
struct Plan<B> {
    inputs: PerRank<Buf<B>>,
    outputs: PerRank<Buf<B>>,
}

/// Whether the group qualifies, and its buffers by rank.
fn qualify<D: Device>(
    comms: &[&Communicator<D>],
    checked: &[(OpDesc, Io<D::Buffer>)],
    locals: &[&mut Local<D>],
) -> Option<Plan<D::Buffer>> {
    let first = *comms.first()?;
    let world = first.shared.world;
    let desc = checked.first()?.0;
    let fp = desc.fingerprint();
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
    {
        return None;
    }
    let mut inputs: PerRank<Buf<D::Buffer>> = (0..world).map(|_| None).collect();
    let mut outputs: PerRank<Buf<D::Buffer>> = (0..world).map(|_| None).collect();
    let mut seen: PerRank<bool> = (0..world).map(|_| false).collect();
    let seq = locals.first()?.seq;
    for ((c, (d, io)), l) in comms.iter().zip(checked).zip(locals) {
        let r = c.rank;
        if !Arc::ptr_eq(&c.shared, &first.shared)
            || std::mem::replace(&mut seen[r], true)
            || d.algorithm.is_some()
            || !d.fingerprint().compatible(&fp)
            || d.in_place != desc.in_place
            || l.failed.is_some()
            || l.seq != seq
            || c.shared.link.poisoned(r).is_some()
            || !c.device.supports(d.dtype)
            || c.reach.iter().any(|&x| x != Reach::Same)
        {
            return None;
        }
        inputs[r] = contig(&io.input)?;
        outputs[r] = contig(&io.output)?;
    }
    let root = desc.root.unwrap_or(0);
    let bound = |bufs: &[Buf<D::Buffer>], who: &dyn Fn(Rank) -> bool| (0..world).all(|r| !who(r) || bufs[r].is_some());
    let needed = match desc.kind {
        OpKind::Barrier => true,
        OpKind::Broadcast => bound(&inputs, &|r| r == root) && bound(&outputs, &|_| true),
        OpKind::Reduce => bound(&inputs, &|_| true) && bound(&outputs, &|r| r == root),
        _ => bound(&inputs, &|_| true) && bound(&outputs, &|_| true),
    };
    if !needed || root >= world {
        return None;
    }
    // No memory may be shared between ranks (a rank's own input and output may be, in the
    // in-place layouts `validate` accepted).
    let ids = |r: Rank| [inputs[r].as_ref().map(|b| b.2), outputs[r].as_ref().map(|b| b.2)];
    for a in 0..world {
        for b in a + 1..world {
            if ids(a).iter().flatten().any(|x| ids(b).iter().flatten().any(|y| x == y)) {
                return None;
            }
        }
    }
    Some(Plan { inputs, outputs })
}

/// A binding the direct path can use: one buffer or none (never a list of tensors).
fn contig<B: Clone>(b: &Binding<B>) -> Option<Buf<B>> {
    match b {
        Binding::Unbound => Some(None),
        Binding::Contig { buf, base, id } => Some(Some((buf.clone(), *base, *id))),
        Binding::Blocks { .. } => None,
    }
}

/// The device work of the op, chunk by chunk (a GPU binds at most so many bytes at once).
fn execute<D: Device>(dev: &D, desc: &OpDesc, p: &Plan<D::Buffer>, chunk: usize, deadline: Instant) -> Result<()> {
    let size = desc.dtype.size();
    let n = p.inputs.len();
    let block = desc.count * size;
    let chunk = (chunk / size).max(1) * size;
    let x = Exec { dev, desc, deadline };
    let root = desc.root.unwrap_or(0);
    match desc.kind {
        OpKind::AllReduce => each_chunk(block, chunk, |o, len| {
            let all: PerRank<Rank> = (0..n).collect();
            x.reduce(&p.outputs[0], o, &p.inputs, &all, o, len)?;
            (1..n).try_for_each(|r| x.copy(&p.outputs[0], o, &p.outputs[r], o, len))
        }),
        OpKind::Reduce => each_chunk(block, chunk, |o, len| {
            let all: PerRank<Rank> = std::iter::once(root).chain((0..n).filter(|&r| r != root)).collect();
            x.reduce(&p.outputs[root], o, &p.inputs, &all, o, len)
        }),
        OpKind::Broadcast => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| x.copy(&p.inputs[root], o, &p.outputs[r], o, len))
        }),
        OpKind::AllGather => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| (0..n).try_for_each(|q| x.copy(&p.inputs[q], o, &p.outputs[r], q * block + o, len)))
        }),
        OpKind::ReduceScatter => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| {
                let order: PerRank<Rank> = std::iter::once(r).chain((0..n).filter(|&q| q != r)).collect();
                x.reduce(&p.outputs[r], o, &p.inputs, &order, r * block + o, len)
            })
        }),
        OpKind::AllToAll => each_chunk(block, chunk, |o, len| {
            (0..n).try_for_each(|r| {
                (0..n).try_for_each(|q| x.copy(&p.inputs[q], r * block + o, &p.outputs[r], q * block + o, len))
            })
        }),
        _ => Ok(()),
    }
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

/// The device operations, each waited for before the next reads what it wrote.
struct Exec<'a, D: Device> {
    dev: &'a D,
    desc: &'a OpDesc,
    deadline: Instant,
}

impl<D: Device> Exec<'_, D> {
    fn range(b: &Buf<D::Buffer>, off: usize, len: usize) -> Result<Range<D::Buffer>> {
        match b {
            Some((buf, base, _)) => Ok(Range::new(buf.clone(), base + off, len)),
            None => Err(CollectiveError::protocol("a direct group op is missing a buffer")),
        }
    }

    /// `dst[dst_off..] = reduce over ranks in `order` of inputs[r][src_off..]`, the first
    /// one as the accumulator; then the average's division.
    fn reduce(
        &self,
        dst: &Buf<D::Buffer>,
        dst_off: usize,
        inputs: &[Buf<D::Buffer>],
        order: &[Rank],
        src_off: usize,
        len: usize,
    ) -> Result<()> {
        let d = Self::range(dst, dst_off, len)?;
        let acc = Self::range(&inputs[order[0]], src_off, len)?;
        let srcs = order[1..]
            .iter()
            .map(|&r| Self::range(&inputs[r], src_off, len).map(Source::Device))
            .collect::<Result<PerRank<_>>>()?;
        let combine = self.desc.op.map_or(crate::types::Combine::Sum, ReduceOp::combine);
        let ev = self.dev.reduce(&d, &acc, &srcs, self.desc.dtype, combine)?;
        self.dev.wait(&ev, Some(self.deadline))?;
        if self.desc.op == Some(ReduceOp::Avg) {
            let ev = self.dev.scale(&d, &d, self.desc.dtype, Scale::DivBy(order.len() as u64))?;
            self.dev.wait(&ev, Some(self.deadline))?;
        }
        Ok(())
    }

    /// `dst[dst_off..] = src[src_off..]`, unless they are the same bytes (in place).
    fn copy(
        &self,
        src: &Buf<D::Buffer>,
        src_off: usize,
        dst: &Buf<D::Buffer>,
        dst_off: usize,
        len: usize,
    ) -> Result<()> {
        let (s, d) = (Self::range(src, src_off, len)?, Self::range(dst, dst_off, len)?);
        let same = matches!((src, dst), (Some(a), Some(b)) if a.2 == b.2 && a.1 + src_off == b.1 + dst_off);
        if same || len == 0 {
            return Ok(());
        }
        let ev = self.dev.copy(&s, &d)?;
        self.dev.wait(&ev, Some(self.deadline))
    }
}
