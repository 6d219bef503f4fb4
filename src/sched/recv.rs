//! Receiving: opening a peer's message, checking it, and landing its payload — a copy or a
//! reduction, host bytes or a device range — into the destination, or parking it in staging
//! while the destination is still lent out. Runs of receive-reduces into one range fuse into
//! one multi-source kernel.

use super::{Blocked, InFlight, Msgs, OpRun, Parked, Progress, Resolved, Staged};
use crate::algo::{Span, Step};
use crate::device::{Device, Range, Source};
use crate::error::{CollectiveError, Result};
use crate::mem::HostRegion;
use crate::transport::{Opened, Payload};
use crate::types::Rank;

impl<D: Device> OpRun<D> {
    pub(super) fn recv(&mut self, peer: Rank, dst: Span, acc: Option<Span>, size: usize) -> Result<Progress> {
        if !self.ctx.link().has_message(self.ctx.rank, peer) {
            return Ok(Progress::Blocked(Blocked::Message(peer)));
        }
        let d = self.bufs.resolve(dst, size)?;
        let parking = d.range.len > 0 && self.lent(d.key());
        if parking && self.inflight.iter().any(|f| f.staging) {
            // The staging memory is still being read by the previous parked receive.
            return Ok(Progress::Blocked(Blocked::Device));
        }
        // A plain copy into memory the host can write: the transport may land the bytes there
        // itself, in one copy (a large message read out of a peer process's memory).
        let direct = (acc.is_none() && !parking && self.ctx.link().can_land())
            .then(|| self.dev.host_view(&d.range.buf))
            .flatten()
            .map(|mem| HostRegion { mem, off: d.range.off, len: d.range.len });
        let (msg, landed) = self.open(peer, d.range.len, direct.as_ref())?;
        self.received[peer] += 1;
        if landed {
            self.ctx.link().release(self.ctx.rank, &msg);
            return Ok(Progress::Advanced);
        }
        let source = match self.source(&msg) {
            Ok(s) => s,
            Err(e) => {
                self.ctx.link().close(self.ctx.rank, &msg);
                return Err(e);
            }
        };
        if parking {
            // The destination is still lent out: move the bytes to staging and release the
            // message as soon as that copy completes (the peer may be waiting for the release
            // before it reads our lend), then land them once the range is free.
            let (staged, event) = match self.stage_incoming(&source, d.range.len) {
                Ok(s) => s,
                Err(e) => {
                    self.ctx.link().close(self.ctx.rank, &msg);
                    return Err(e);
                }
            };
            match event {
                None => self.ctx.link().release(self.ctx.rank, &msg),
                Some(event) => {
                    self.inflight.push(InFlight { event, writes: None, msgs: smallvec::smallvec![msg], staging: false })
                }
            }
            self.parked = Some(Box::new(Parked { source: staged, dst: d, acc }));
            return Ok(Progress::Advanced);
        }
        let landed = self.land(&source, &d, acc, size);
        match landed {
            Ok(event) => {
                // As `track`, without building a one-message list first when the work is done.
                if matches!(self.dev.poll(&event), Ok(true)) {
                    self.ctx.link().release(self.ctx.rank, &msg);
                } else {
                    self.inflight.push(InFlight::writing(event, d.key(), smallvec::smallvec![msg]));
                }
                Ok(Progress::Advanced)
            }
            Err(e) => {
                self.ctx.link().close(self.ctx.rank, &msg);
                Err(e)
            }
        }
    }
    /// Device work that writes `key` and reads `msgs`: the messages are released once it
    /// completes. Work that is complete already (the host device's copies and reductions)
    /// releases them now and is not tracked at all: nothing is in flight, so nothing to retire.
    fn track(&mut self, event: D::Event, key: (usize, usize, usize), msgs: Msgs) {
        if matches!(self.dev.poll(&event), Ok(true)) {
            for m in &msgs {
                self.ctx.link().release(self.ctx.rank, m);
            }
            return;
        }
        // Not done, or the device failed: `retire` polls it again (and reports the error).
        self.inflight.push(InFlight::writing(event, key, msgs));
    }

    /// Lands a parked receive once its destination is no longer lent.
    pub(super) fn finish_parked(&mut self, size: usize) -> Result<Option<Blocked>> {
        let Some(p) = &self.parked else { return Ok(None) };
        if let Some(b) = self.hazard(p.dst.key()) {
            return Ok(Some(b));
        }
        let Some(p) = self.parked.take() else { return Ok(None) };
        let event = self.land(&p.source, &p.dst, p.acc, size)?;
        self.inflight.push(InFlight { staging: true, ..InFlight::writing(event, p.dst.key(), Msgs::new()) });
        Ok(None)
    }
    /// The `Mismatch` of an `all_to_all_single_with_splits` message of `got` bytes where this
    /// rank expects `want`: the two ranks sized the block differently. Between threads, and
    /// over a network below a chunk, a block is one message, so both lengths are the blocks';
    /// a longer one travels in pieces ([`crate::algo::block_messages`]), and the piece that
    /// differs is named.
    fn block_mismatch(&self, peer: Rank, msg: &Opened, want: usize) -> CollectiveError {
        let (me, dt, got) = (self.ctx.rank, self.ctx.dtype, msg.payload.len());
        let size = dt.size().max(1);
        // The piece size `prepare` cut the blocks to: whole elements of the chunk.
        let chunk = self.ctx.shared.config.chunk_elems(size) * size;
        // Pieces where any peer is across a network: plans cut blocks for every peer then.
        let network = self.ctx.link().network(me, self.ctx.shared.world);
        let whole = !network || (msg.header.index == 0 && got < chunk && want < chunk);
        let message = if whole {
            format!(
                "rank {peer} sends this rank a block of {} x {dt} (its input_splits[{me}] rows), but this rank \
                 expects {} x {dt} (its output_splits[{peer}] rows)",
                got / size,
                want / size
            )
        } else {
            format!(
                "rank {peer}'s block for this rank (its input_splits[{me}] rows) and the block this rank expects \
                 from it (its output_splits[{peer}] rows) differ in length: piece {} of the block is {} x {dt} \
                 where this rank expects {} x {dt} (blocks of a chunk or more travel in chunk-sized pieces and \
                 an empty one)",
                msg.header.index,
                got / size,
                want / size
            )
        };
        CollectiveError::new(crate::error::ErrorKind::Mismatch, message).with_peer(peer)
    }

    /// Opens the next message from `peer` (which has arrived) and checks its header and size.
    /// On error the message is put back unread. With `into`, the transport may land the bytes
    /// there once the checks pass (then `true`: the copy is done).
    fn open(&mut self, peer: Rank, want: usize, into: Option<&HostRegion>) -> Result<(Opened, bool)> {
        let me = self.ctx.rank;
        let opened = match into {
            Some(dst) => {
                let link = self.ctx.link().clone();
                let accept =
                    |h: &crate::transport::Header, len: usize| len == want && self.check_header(peer, h).is_ok();
                link.open_into(me, peer, dst, &accept)
            }
            None => self.ctx.link().open(me, peer).map(|m| (m, false)),
        };
        let link = self.ctx.link();
        let Some((msg, landed)) = opened else {
            // Only a sender that failed takes messages back, and it poisons the link first.
            return Err(self
                .poisoned()
                .unwrap_or_else(|| CollectiveError::protocol("a message vanished from the mailbox").with_peer(peer)));
        };
        let checked = self.check_header(peer, &msg.header).and_then(|()| {
            if msg.payload.len() == want {
                Ok(())
            } else if self.ctx.fp.desc.kind == crate::op::OpKind::AllToAllV {
                // The one op whose blocks the ranks size themselves: a block of another length
                // is their disagreement, not a broken peer.
                Err(self.block_mismatch(peer, &msg, want))
            } else {
                Err(CollectiveError::protocol(format!(
                    "rank {peer} sent {} bytes where {want} were expected",
                    msg.payload.len()
                ))
                .with_peer(peer))
            }
        });
        match checked {
            Ok(()) => {
                link.accept(me, &msg);
                Ok((msg, landed))
            }
            Err(e) => {
                link.close(me, &msg);
                Err(e)
            }
        }
    }
    /// What a message's payload is to this rank's device.
    fn source(&self, msg: &Opened) -> Result<Source<D::Buffer>> {
        match &msg.payload {
            Payload::Host(r) => Ok(Source::Host(r.clone())),
            Payload::Device(any, _) => {
                any.downcast_ref::<Range<D::Buffer>>().cloned().map(Source::Device).ok_or_else(|| {
                    CollectiveError::protocol(format!(
                        "rank {} sent device memory this rank's device ({}) cannot use",
                        msg.from,
                        self.dev.describe()
                    ))
                    .with_peer(msg.from)
                })
            }
        }
    }
    /// Copies a received payload into this rank's staging memory: host bytes to host staging
    /// (done when this returns: no event), a device range to device scratch (so ranks sharing
    /// a device never cross the host; the event completes the copy).
    fn stage_incoming(&mut self, source: &Source<D::Buffer>, len: usize) -> Result<Staged<D>> {
        match source {
            Source::Host(r) => {
                let dev = &self.dev;
                let mem = super::staging::get(&mut self.stage).recv_host(len, |n| dev.alloc_staging(n))?;
                mem.write(0, len)?.copy_from_slice(&r.read()?);
                Ok((Source::Host(HostRegion { mem, off: 0, len }), None))
            }
            Source::Device(r) => {
                let dev = &self.dev;
                let buf = super::staging::get(&mut self.stage).recv_device(len, |n| dev.alloc(n), |b| dev.len(b))?;
                let dst = Range::new(buf, 0, len);
                let event = self.dev.copy(r, &dst)?;
                Ok((Source::Device(dst), Some(event)))
            }
        }
    }
    /// Writes received bytes into their destination: a copy, or a reduction with `acc`.
    fn land(
        &self,
        source: &Source<D::Buffer>,
        d: &Resolved<D::Buffer>,
        acc: Option<Span>,
        size: usize,
    ) -> Result<D::Event> {
        match (acc, source) {
            (None, Source::Host(r)) => self.dev.upload(&d.range, r),
            (None, Source::Device(r)) => self.dev.copy(r, &d.range),
            (Some(a), _) => {
                let a = self.bufs.resolve(a, size)?;
                self.dev.reduce(&d.range, &a.range, std::slice::from_ref(source), self.ctx.dtype, self.ctx.combine)
            }
        }
    }
    /// A run of receive-reduces into one range as one fused kernel, once every message has
    /// arrived. `Unfused` (nothing consumed) when the destination is lent or being written, so
    /// the caller takes one step at a time.
    pub(super) fn recv_reduce_many(&mut self, run: &[Step], size: usize) -> Result<Progress> {
        let Step::RecvReduce { acc: first_acc, dst, .. } = run[0] else { return Ok(Progress::Unfused) };
        let d = self.bufs.resolve(dst, size)?;
        if d.range.len > 0 && (self.lent(d.key()) || self.being_written(d.key())) {
            return Ok(Progress::Unfused);
        }
        let peers: smallvec::SmallVec<[Rank; 4]> =
            run.iter().filter_map(|s| if let Step::RecvReduce { peer, .. } = *s { Some(peer) } else { None }).collect();
        let (me, link) = (self.ctx.rank, self.ctx.link().clone());
        if let Some(&p) = peers.iter().find(|&&p| !link.has_message(me, p)) {
            return Ok(Progress::Blocked(Blocked::Message(p)));
        }
        let mut msgs = Msgs::with_capacity(peers.len());
        let mut sources: smallvec::SmallVec<[Source<D::Buffer>; 4]> = smallvec::SmallVec::with_capacity(peers.len());
        let opened = (|| -> Result<()> {
            for &peer in &peers {
                let (msg, _) = self.open(peer, d.range.len, None)?;
                msgs.push(msg);
                sources.push(self.source(msgs.last().ok_or_else(|| CollectiveError::protocol("no message"))?)?);
            }
            Ok(())
        })();
        let event = opened.and_then(|()| {
            let a = self.bufs.resolve(first_acc, size)?;
            self.dev.reduce(&d.range, &a.range, &sources, self.ctx.dtype, self.ctx.combine)
        });
        match event {
            Ok(event) => {
                for &peer in &peers {
                    self.received[peer] += 1;
                }
                self.track(event, d.key(), msgs);
                Ok(Progress::Fused)
            }
            Err(e) => {
                for m in &msgs {
                    link.close(me, m);
                }
                Err(e)
            }
        }
    }
}
