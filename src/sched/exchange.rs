//! The exchange step ([`Step::Exchange`](crate::algo::Step::Exchange)): a small op between
//! threads of one process run without messages. The rank publishes its part in its slot
//! (`transport::slots`), waits until every peer whose part its result reads has published the
//! same op, checks their fingerprints, and computes its own result from the parts — in rank
//! order, so every rank gets the same bits. A rank whose result reads no peer's part (a root
//! of broadcast or scatter, a non-root of reduce or gather) does not wait: it runs ahead, up
//! to the slots' depth, and a mismatch it did not see is reported on its next call. Only
//! devices whose buffers are host memory and whose kernels are the host's run it
//! ([`Device::host_memory`]); the communicator decides, the same way on every rank.

use smallvec::SmallVec;

use super::{Binding, Blocked, OpRun, Progress};
use crate::algo::{Slot, Span};
use crate::device::{Device, kernels};
use crate::error::{CollectiveError, Result};
use crate::mem::HostMem;
use crate::op::{OpDesc, OpKind};
use crate::transport::slots::Slots;
use crate::types::{Rank, ReduceOp, Scale};

/// Whose parts a rank's result reads, and so waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    /// Every peer's.
    Every,
    /// The root's alone (non-roots of broadcast and scatter).
    Root(Rank),
    /// None but its own (a root of broadcast and scatter, non-roots of reduce and gather).
    Own,
}

impl Reads {
    /// What `me`'s result reads: every part, except that a root of broadcast and scatter
    /// reads only its own and non-roots of reduce and gather read none, so these ranks run
    /// ahead of their peers (up to the slots' depth) as an eager root does, and non-roots of
    /// broadcast and scatter wait for the root alone. Ops of the peer API (those that carry a
    /// shape digest) wait for every part: a peer whose own arguments fail enters no op but
    /// aborts the registration, and every other peer must get that error from the same
    /// call, which a rank that ran ahead would not.
    fn of(desc: &OpDesc, me: Rank) -> Self {
        let root = desc.root.unwrap_or(0);
        if desc.shape.is_some() {
            return Reads::Every;
        }
        match desc.kind {
            OpKind::Reduce | OpKind::Gather if me == root => Reads::Every,
            OpKind::Reduce | OpKind::Gather => Reads::Own,
            OpKind::Broadcast | OpKind::Scatter if me == root => Reads::Own,
            OpKind::Broadcast | OpKind::Scatter => Reads::Root(root),
            _ => Reads::Every,
        }
    }

    /// Whether the result reads peer `p`'s part.
    fn part(self, p: Rank) -> bool {
        match self {
            Reads::Every => true,
            Reads::Root(r) => p == r,
            Reads::Own => false,
        }
    }
}

impl<D: Device> OpRun<D> {
    /// Runs the exchange as far as it goes: publish (once this rank's slot is free), then,
    /// once every part has arrived, the result.
    pub(super) fn exchange(&mut self, size: usize) -> Result<Progress> {
        if !self.inflight.is_empty() {
            return Ok(Progress::Blocked(Blocked::Device));
        }
        let (me, seq, n) = (self.ctx.rank, self.ctx.seq, self.ctx.world);
        let desc = self.ctx.fp.desc;
        let fp = self.ctx.fp.words();
        let link = self.ctx.link();
        let slots = link.slots().ok_or_else(|| {
            CollectiveError::protocol("an exchanged op ran between ranks that are not threads of one process")
        })?;
        if !self.exchanged {
            if let Some((p, held)) = slots.busy(me, seq) {
                return Ok(Progress::Blocked(Blocked::Reading(p, held)));
            }
            match self.own_part(&desc)? {
                Some(span) => {
                    let (mem, off, len) = self.host(span, size)?;
                    slots.publish(me, seq, &fp, &mem.read(off, len)?);
                }
                None => slots.publish(me, seq, &fp, &[]),
            }
            // Only peers whose results read this part wait for it (non-roots' parts of
            // broadcast and scatter are read by nobody).
            let read = desc.shape.is_some()
                || !matches!(desc.kind, OpKind::Broadcast | OpKind::Scatter)
                || desc.root.unwrap_or(0) == me;
            if read {
                link.wake_peers(me);
            }
            self.exchanged = true;
            if Reads::of(&desc, me) != Reads::Every {
                // This rank does not wait for every peer: it checks the peers that have
                // published already, after a fence that pairs with theirs. Of two ranks
                // that do not wait for each other, at least one sees the other's part here
                // (each stores its part, fences, then loads the other's), and a part stays
                // in its slot until every peer finished this op, so every disagreeing pair
                // is caught by one of its two ranks; the other learns on its next call.
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                if let Some(p) = (0..n).find(|&p| p != me && slots.arrived(p, seq) && slots.fingerprint(p, seq) != fp) {
                    return Err(self.part_mismatch(p));
                }
            }
        }
        let reads = Reads::of(&desc, me);
        let waits = |p: Rank| p != me && reads.part(p);
        if reads != Reads::Own {
            if let Some(p) = (0..n).find(|&p| waits(p) && !slots.arrived(p, seq)) {
                return Ok(Progress::Blocked(Blocked::Part(p)));
            }
            if let Some(p) = (0..n).find(|&p| waits(p) && slots.fingerprint(p, seq) != fp) {
                return Err(self.part_mismatch(p));
            }
        }
        self.result(slots, &desc, size)?;
        slots.finish(me, seq);
        link.wake_peers(me);
        Ok(Progress::Advanced)
    }

    /// What this rank publishes: its input (all of it for reduce_scatter, all_to_all and the
    /// root's scatter), nothing for non-roots of broadcast and scatter and for barrier.
    fn own_part(&self, desc: &OpDesc) -> Result<Option<Span>> {
        let (me, n, count) = (self.ctx.rank, self.ctx.world, desc.count);
        let root = desc.root.unwrap_or(0);
        Ok(match desc.kind {
            OpKind::AllReduce | OpKind::Reduce | OpKind::AllGather | OpKind::Gather => {
                Some(Span::new(Slot::Input, 0, count))
            }
            OpKind::ReduceScatter | OpKind::AllToAll => Some(Span::new(Slot::Input, 0, n * count)),
            OpKind::Broadcast if me == root => Some(Span::new(Slot::Input, 0, count)),
            OpKind::Scatter if me == root => Some(Span::new(Slot::Input, 0, n * count)),
            OpKind::Broadcast | OpKind::Scatter | OpKind::Barrier => None,
            OpKind::Send | OpKind::Recv | OpKind::Split => {
                return Err(CollectiveError::protocol(format!("{} cannot be exchanged", desc.kind.name())));
            }
        })
    }

    /// This rank's result, from every rank's part.
    fn result(&self, slots: &Slots, desc: &OpDesc, size: usize) -> Result<()> {
        let (me, count) = (self.ctx.rank, desc.count);
        let (root, block) = (desc.root.unwrap_or(0), count * size);
        let out = Span::new(Slot::Output, 0, count);
        match desc.kind {
            OpKind::AllReduce => self.reduce_parts(slots, out, 0, size),
            OpKind::Reduce if me == root => self.reduce_parts(slots, out, 0, size),
            OpKind::ReduceScatter => self.reduce_parts(slots, out, me * block, size),
            OpKind::AllGather => self.copy_parts(slots, 0, size),
            OpKind::Gather if me == root => self.copy_parts(slots, 0, size),
            OpKind::AllToAll => self.copy_parts(slots, me * block, size),
            OpKind::Broadcast if !(me == root && desc.in_place) => self.copy_part(slots, root, 0, out, size),
            OpKind::Scatter => self.copy_part(slots, root, me * block, out, size),
            _ => Ok(()),
        }
    }

    /// Block `q` of the output = bytes `off..` of `q`'s part, for every rank `q` (all_gather,
    /// gather, all_to_all). An output that is one buffer is written under one guard; a list of
    /// tensors block by block.
    fn copy_parts(&self, slots: &Slots, off: usize, size: usize) -> Result<()> {
        let (n, count) = (self.ctx.world, self.ctx.fp.desc.count);
        if !matches!(self.bufs.output, Binding::Contig { .. }) {
            return (0..n)
                .try_for_each(|q| self.copy_part(slots, q, off, Span::new(Slot::Output, q * count, count), size));
        }
        let (mem, o, len) = self.host(Span::new(Slot::Output, 0, n * count), size)?;
        if len == 0 {
            return Ok(());
        }
        let mut w = mem.write(o, len)?;
        for (q, block) in w.chunks_mut(len / n).enumerate() {
            if !slots.read(q, self.ctx.seq, off, block) {
                return Err(self.short_part(q));
            }
        }
        Ok(())
    }

    /// `dst` = bytes `off..` of `q`'s part.
    fn copy_part(&self, slots: &Slots, q: Rank, off: usize, dst: Span, size: usize) -> Result<()> {
        let (mem, o, len) = self.host(dst, size)?;
        if len == 0 {
            return Ok(());
        }
        let mut w = mem.write(o, len)?;
        if slots.read(q, self.ctx.seq, off, &mut w) { Ok(()) } else { Err(self.short_part(q)) }
    }

    /// `dst` = the reduction, in rank order, of bytes `off..` of every rank's part.
    fn reduce_parts(&self, slots: &Slots, dst: Span, off: usize, size: usize) -> Result<()> {
        let (mem, o, len) = self.host(dst, size)?;
        if len == 0 {
            return Ok(());
        }
        let n = self.ctx.world;
        // The parts, copied out of the slots (their words are atomics), in words so that every
        // dtype's view of them is aligned: on the stack when they fit (built in place, never
        // moved), else on the heap.
        let (mut stack, mut heap) = ([0u64; 128], Vec::new());
        let words = (n * len).div_ceil(8);
        let parts: &mut [u64] = match stack.get_mut(..words) {
            Some(p) => p,
            None => {
                heap.resize(words, 0);
                &mut heap
            }
        };
        let parts = &mut bytemuck::cast_slice_mut::<u64, u8>(parts)[..n * len];
        for (q, p) in parts.chunks_mut(len).enumerate() {
            if !slots.read(q, self.ctx.seq, off, p) {
                return Err(self.short_part(q));
            }
        }
        let (first, rest) = parts.split_at(len);
        let srcs: SmallVec<[&[u8]; 8]> = rest.chunks(len).collect();
        let mut w = mem.write(o, len)?;
        kernels::reduce_many(self.ctx.dtype, self.ctx.combine, &mut w, Some(first), &srcs)?;
        if self.ctx.fp.desc.op == Some(ReduceOp::Avg) {
            kernels::scale(self.ctx.dtype, Scale::DivBy(n as u64), &mut w, None)?;
        }
        Ok(())
    }

    /// The host memory behind `span`: (block, byte offset, byte length).
    fn host(&self, span: Span, size: usize) -> Result<(HostMem, usize, usize)> {
        let r = self.bufs.resolve(span, size)?;
        let mem = self.dev.host_view(&r.range.buf).ok_or_else(|| {
            CollectiveError::device(format!(
                "{} says its memory is host memory, but a buffer has no host view",
                self.dev.describe()
            ))
        })?;
        Ok((mem, r.range.off, r.range.len))
    }

    fn short_part(&self, q: Rank) -> CollectiveError {
        CollectiveError::protocol(format!("rank {q}'s part of op #{} is shorter than its op needs", self.ctx.seq))
            .with_peer(q)
    }

    /// `peer` published a different op under this op's number.
    fn part_mismatch(&self, peer: Rank) -> CollectiveError {
        let c = &self.ctx;
        let theirs =
            c.shared.board.collective_at(peer, c.seq).map_or_else(|| "another op".to_string(), |f| f.desc.to_string());
        c.mismatch(peer, &super::called(&theirs, false, c.seq))
    }
}
