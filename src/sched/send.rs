//! Sending: lending a source range to a peer — host memory in place, a device range to a
//! peer whose device reaches it, or a host staging copy once its download completes — and
//! numbering each message for the peer's checks.

use std::sync::Arc;

use super::{Blocked, Lend, OpRun, Progress, StagedSend, overlaps, staging};
use crate::algo::Span;
use crate::device::{Device, Reach};
use crate::error::Result;
use crate::mem::HostRegion;
use crate::transport::{Header, Payload};
use crate::types::Rank;

impl<D: Device> OpRun<D> {
    pub(super) fn header(&mut self, peer: Rank) -> Header {
        let index = self.sent[peer];
        self.sent[peer] += 1;
        Header { seq: self.ctx.seq, p2p: self.ctx.p2p, index, fp: self.ctx.fp }
    }

    /// Whether device work in flight writes memory overlapping `key`.
    pub(super) fn being_written(&self, key: (usize, usize, usize)) -> bool {
        self.inflight.iter().any(|f| f.writes.is_some_and(|w| overlaps(w, key)))
    }

    pub(super) fn send(&mut self, peer: Rank, src: Span, size: usize) -> Result<Progress> {
        let s = self.bufs.resolve(src, size)?;
        if self.being_written(s.key()) {
            return Ok(Progress::Blocked(Blocked::Device));
        }
        let payload = match self.dev.host_view(&s.range.buf) {
            Some(mem) => Payload::Host(HostRegion { mem, off: s.range.off, len: s.range.len }),
            None if self.reach.get(peer).is_some_and(|r| *r != Reach::Host) => {
                Payload::Device(Arc::new(s.range.clone()), s.range.len)
            }
            None => {
                let len = s.range.len;
                let slot = self.send_slot(len)?;
                let stage = staging::get(&mut self.stage);
                let region = HostRegion { mem: stage.send[slot].mem.clone(), off: 0, len };
                let event = self.dev.download(&s.range, &region)?;
                stage.send[slot].held_by = Some((peer, u64::MAX));
                self.staged_send = Some(StagedSend { event, peer, slot, len });
                return Ok(Progress::Advanced);
            }
        };
        let header = self.header(peer);
        let ticket = self.ctx.link().send(self.ctx.rank, peer, header, payload);
        self.lends.push(Lend { peer, ticket, range: Some(s.key()) });
        Ok(Progress::Advanced)
    }

    /// Sends a staged copy once its download completed. Steps after the send wait for it, so
    /// messages to a peer leave in plan order.
    pub(super) fn finish_staged_send(&mut self) -> Result<Option<Blocked>> {
        let Some(s) = &self.staged_send else { return Ok(None) };
        if !self.dev.poll(&s.event)? {
            return Ok(Some(Blocked::Device));
        }
        let Some(s) = self.staged_send.take() else { return Ok(None) };
        let region = HostRegion { mem: staging::get(&mut self.stage).send[s.slot].mem.clone(), off: 0, len: s.len };
        let header = self.header(s.peer);
        let ticket = self.ctx.link().send(self.ctx.rank, s.peer, header, Payload::Host(region));
        staging::get(&mut self.stage).send[s.slot].held_by = Some((s.peer, ticket));
        self.lends.push(Lend { peer: s.peer, ticket, range: None });
        Ok(None)
    }

    /// The index of a free send staging slot of at least `len` bytes. Slots come back when
    /// their lend is released; when none is free the pool grows, never waits: a plan may
    /// lend many chunks before it receives anything, and waiting here for a peer that first
    /// needs this rank's later messages would deadlock.
    fn send_slot(&mut self, len: usize) -> Result<usize> {
        let (link, me, dev) = (self.ctx.link(), self.ctx.rank, &self.dev);
        let stage = staging::get(&mut self.stage);
        stage.reclaim_released(|p, t| link.is_released(me, p, t));
        stage.send_slot(len, |n| dev.alloc_staging(n))
    }
}
