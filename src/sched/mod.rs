//! The scheduler: runs one rank's [`Plan`] by driving the transport (messages) and the device
//! (copies and kernels). It is the only layer that sees both. Its rules:
//!
//! - a `Send` lends the source range (or a host staging copy of it) and does not wait;
//! - a range that is lent is never written until the peer releases it: a receive into it
//!   first copies the message to host staging and releases it, then waits;
//! - hazards are tracked by memory (the device's `mem_id` and byte ranges), never by the role
//!   a buffer plays, so an input that is also an output is protected like any other range;
//! - every wait has the op's deadline, and ends early on abort, on a departed peer, or on a
//!   mismatch seen in a message header or in the peer's flight recorder;
//! - the op ends only when every lend has been released — on success — or, on failure, once
//!   the link is poisoned (peers learn at once) and every lend is reclaimed: unopened messages
//!   taken back, readers in progress awaited. A returned tensor is never read by anyone else.

mod failure;
mod staging;
mod wait;

use std::time::{Duration, Instant};

pub(crate) use failure::{Now, after_failure};
use staging::SendSlot;
pub use staging::Staging;

use crate::algo::{Plan, Slot, Span, Step};
use crate::comm::flight::Board;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::mem::{HostMem, HostRegion};
use crate::op::Fingerprint;
use crate::trace::{debug_event, trace_event};
use crate::transport::{Header, Link, Opened};
use crate::types::{Combine, DType, Rank, Scale};

/// Where a slot's spans live.
pub(crate) enum Binding<'a, B> {
    /// Not used by this op.
    Unbound,
    /// One buffer, spans offset by `base` bytes. `id` is the buffer's memory id
    /// ([`Device::mem_id`]): two bindings of the same memory share it.
    Contig { buf: &'a B, base: usize, id: usize },
    /// One buffer per block of `block` bytes (all_gather into a list of tensors), with their
    /// memory ids.
    Blocks { bufs: Vec<(&'a B, usize)>, block: usize },
}

/// The three slots of a plan.
pub(crate) struct Bindings<'a, B> {
    pub input: Binding<'a, B>,
    pub output: Binding<'a, B>,
    pub scratch: Binding<'a, B>,
}

/// Everything about the op the scheduler needs besides the plan and buffers.
pub(crate) struct OpCtx<'a> {
    pub rank: Rank,
    pub world: usize,
    pub seq: u64,
    pub p2p: bool,
    pub fp: Fingerprint,
    pub deadline: Instant,
    pub dtype: DType,
    pub combine: Combine,
    pub link: &'a Link,
    pub board: &'a Board,
    pub comm_name: &'a str,
}

struct Resolved<'a, B> {
    buf: &'a B,
    off: usize,
    len: usize,
    id: usize,
}

struct Lend {
    peer: Rank,
    ticket: u64,
    /// The lent device range (`id`, byte offset, byte length), unless a staging copy was lent.
    range: Option<(usize, usize, usize)>,
}

impl<B> Bindings<'_, B> {
    fn resolve(&self, s: Span, size: usize) -> Result<Resolved<'_, B>> {
        let b = match s.slot {
            Slot::Input => &self.input,
            Slot::Output => &self.output,
            Slot::Scratch => &self.scratch,
        };
        let (off, len) = (s.off * size, s.len * size);
        match b {
            Binding::Contig { buf, base, id } => Ok(Resolved { buf, off: base + off, len, id: *id }),
            Binding::Blocks { bufs, block } => {
                let (k, inner) = if *block == 0 { (0, 0) } else { (off / block, off % block) };
                match bufs.get(k) {
                    Some(&(buf, id)) if inner + len <= *block || len == 0 => Ok(Resolved { buf, off: inner, len, id }),
                    _ => Err(CollectiveError::protocol(format!("plan span {s:?} does not fit the output list"))),
                }
            }
            Binding::Unbound => Err(CollectiveError::protocol(format!("plan uses unbound slot {:?}", s.slot))),
        }
    }
}

/// How long a failed op waits, past its own deadline if need be, for a peer that is in the
/// middle of reading this rank's memory (a copy or a kernel, never a wait) to finish.
const RECLAIM_GRACE: Duration = Duration::from_secs(10);

/// Runs `plan` to completion. On failure the link is poisoned first (so peers stop at once,
/// with this error) and then every lend is reclaimed before returning.
pub(crate) fn execute<D: Device>(
    dev: &D,
    plan: &Plan,
    bufs: &Bindings<'_, D::Buffer>,
    ctx: &OpCtx<'_>,
    stage: &mut Staging,
) -> Result<()> {
    let mut run = Run {
        dev,
        bufs,
        ctx,
        stage,
        lends: Vec::new(),
        sent: vec![0; ctx.world],
        received: vec![0; ctx.world],
        noted_wait: false,
    };
    let result = run.all(plan).and_then(|()| run.wait_lends(|_| true));
    result.map_err(|e| {
        fail(ctx, &e);
        run.reclaim();
        // The poison may name an earlier op (where the ranks diverged); the caller's error
        // is about the call it made.
        if ctx.p2p { e } else { e.at_seq(ctx.seq) }
    })
}

/// Poisons the communicator's link with `err`, so every peer's wait ends at once with it.
/// Only a collective's sequence number goes with the poison (the op's own, unless `err`
/// already names the earlier op where ranks diverged): it is how other ranks tell whether
/// they are in the failed op, behind it or past it ([`after_failure`]).
pub(crate) fn fail(ctx: &OpCtx<'_>, err: &CollectiveError) {
    let poison = err.clone().with_rank(ctx.rank).with_op(ctx.fp.desc.to_string());
    ctx.link.poison(if ctx.p2p { poison } else { poison.with_seq(ctx.seq) });
}

/// How many steps from the start of `steps` form a fusable run: receive-reduces from distinct
/// peers into the same range, each after the first accumulating in place.
fn fusable_run(steps: &[Step]) -> usize {
    let Some(&Step::RecvReduce { dst, .. }) = steps.first() else { return 0 };
    let mut n = 1;
    while let Some(&Step::RecvReduce { peer, acc, dst: d }) = steps.get(n) {
        let repeat = steps[..n].iter().any(|s| matches!(*s, Step::RecvReduce { peer: p, .. } if p == peer));
        if d != dst || acc != dst || repeat {
            break;
        }
        n += 1;
    }
    n
}

struct Run<'r, 'a, D: Device> {
    dev: &'r D,
    bufs: &'r Bindings<'a, D::Buffer>,
    ctx: &'r OpCtx<'r>,
    stage: &'r mut Staging,
    lends: Vec<Lend>,
    sent: Vec<u32>,
    received: Vec<u32>,
    noted_wait: bool,
}

impl<'r, D: Device> Run<'r, '_, D> {
    fn all(&mut self, plan: &Plan) -> Result<()> {
        let size = self.ctx.dtype.size();
        let steps = &plan.steps;
        let mut i = 0;
        while i < steps.len() {
            trace_event!(rank = self.ctx.rank, index = i, step = ?steps[i], "step");
            let fused = fusable_run(&steps[i..]);
            if fused > 1 && self.recv_reduce_many(&steps[i..i + fused], size)? {
                i += fused;
                continue;
            }
            match steps[i] {
                Step::Send { peer, src } => self.send(peer, src, size)?,
                Step::Recv { peer, dst } => self.recv(peer, dst, None, size)?,
                Step::RecvReduce { peer, acc, dst } => self.recv(peer, dst, Some(acc), size)?,
                Step::Copy { src, dst } => {
                    let (s, d) = (self.bufs.resolve(src, size)?, self.bufs.resolve(dst, size)?);
                    if (s.id, s.off) != (d.id, d.off) && d.len > 0 {
                        self.wait_hazards(d.id, d.off, d.len)?;
                        self.dev.copy(s.buf, s.off, d.buf, d.off, d.len)?;
                    }
                }
                Step::Average { span } => {
                    let d = self.bufs.resolve(span, size)?;
                    self.wait_hazards(d.id, d.off, d.len)?;
                    let n = self.ctx.world as u64;
                    self.dev.scale(d.buf, d.off, d.buf, d.off, span.len, self.ctx.dtype, Scale::DivBy(n))?;
                }
            }
            i += 1;
        }
        debug_event!(rank = self.ctx.rank, seq = self.ctx.seq, steps = plan.steps.len(), "plan done");
        Ok(())
    }

    fn header(&mut self, peer: Rank) -> Header {
        let index = self.sent[peer];
        self.sent[peer] += 1;
        Header { seq: self.ctx.seq, p2p: self.ctx.p2p, index, fp: self.ctx.fp }
    }

    fn send(&mut self, peer: Rank, src: Span, size: usize) -> Result<()> {
        let s = self.bufs.resolve(src, size)?;
        let (region, range, slot) = match self.dev.host_view(s.buf) {
            Some(mem) => (HostRegion { mem, off: s.off, len: s.len }, Some((s.id, s.off, s.len)), None),
            None => {
                let i = self.send_slot(s.len)?;
                let mem = self.stage.send[i].mem.clone();
                self.dev.download(s.buf, s.off, &mut mem.write(0, s.len)?)?;
                (HostRegion { mem, off: 0, len: s.len }, None, Some(i))
            }
        };
        let header = self.header(peer);
        let ticket = self.ctx.link.send(self.ctx.rank, peer, header, region);
        if let Some(i) = slot {
            self.stage.send[i].held_by = Some((peer, ticket));
        }
        self.lends.push(Lend { peer, ticket, range });
        Ok(())
    }

    /// The index of a free send staging slot of at least `len` bytes. Slots come back when
    /// their lend is released; when none is free the pool grows, never waits: a plan may
    /// lend many chunks before it receives anything, and waiting here for a peer that first
    /// needs this rank's later messages would deadlock. The pool is kept across ops, so it
    /// grows to the largest in-flight volume once and is reused after that.
    fn send_slot(&mut self, len: usize) -> Result<usize> {
        let (link, me) = (self.ctx.link, self.ctx.rank);
        let slots = &mut self.stage.send;
        for slot in slots.iter_mut() {
            if let Some((p, t)) = slot.held_by
                && link.is_released(me, p, t)
            {
                slot.held_by = None;
            }
        }
        if let Some(i) = slots.iter().position(|x| x.held_by.is_none() && x.mem.len() >= len) {
            return Ok(i);
        }
        if let Some(i) = slots.iter().position(|x| x.held_by.is_none()) {
            slots[i].mem = HostMem::zeroed(len)?;
            return Ok(i);
        }
        slots.push(SendSlot { mem: HostMem::zeroed(len)?, held_by: None });
        Ok(slots.len() - 1)
    }

    fn recv(&mut self, peer: Rank, dst: Span, acc: Option<Span>, size: usize) -> Result<()> {
        let msg = self.next_message(peer)?;
        let d = self.bufs.resolve(dst, size)?;
        self.check_len(peer, msg.region(), d.len)?;
        self.received[peer] += 1;
        if d.len > 0 && self.hazard(d.id, d.off, d.len) {
            // The destination is still lent out: take the bytes into staging and release the
            // message at once (the peer may be waiting for it before it reads our lend).
            let st = self.stage.recv(d.len)?;
            st.write(0, d.len)?.copy_from_slice(&msg.region().read()?);
            msg.release();
            self.wait_hazards(d.id, d.off, d.len)?;
            return self.land(&st.read(0, d.len)?, &d, acc, size);
        }
        self.land(&msg.region().read()?, &d, acc, size)?;
        msg.release();
        Ok(())
    }

    /// Writes received bytes into their destination: a copy, or a reduction with `acc`.
    fn land(&self, bytes: &[u8], d: &Resolved<'_, D::Buffer>, acc: Option<Span>, size: usize) -> Result<()> {
        match acc {
            None => self.dev.upload(d.buf, d.off, bytes),
            Some(a) => {
                let a = self.bufs.resolve(a, size)?;
                self.dev.reduce_host(d.buf, d.off, a.buf, a.off, bytes, self.ctx.dtype, self.ctx.combine)
            }
        }
    }

    /// Runs a run of receive-reduces into one range as one fused kernel: waits for every
    /// message, opens and checks each, reduces all sources in one pass, then releases them.
    /// Returns `false` (having consumed nothing) when the destination is still lent out, so
    /// that the caller falls back to one step at a time.
    fn recv_reduce_many(&mut self, run: &[Step], size: usize) -> Result<bool> {
        let Step::RecvReduce { acc: first_acc, dst, .. } = run[0] else { return Ok(false) };
        let d = self.bufs.resolve(dst, size)?;
        if d.len > 0 && self.hazard(d.id, d.off, d.len) {
            return Ok(false);
        }
        let peers: Vec<Rank> =
            run.iter().filter_map(|s| if let Step::RecvReduce { peer, .. } = *s { Some(peer) } else { None }).collect();
        // Wait for all before opening any: an opened message must never be held across a wait.
        for &peer in &peers {
            self.await_message(peer)?;
        }
        let mut msgs = Vec::with_capacity(peers.len());
        for &peer in &peers {
            let msg = self.next_message(peer)?;
            self.check_len(peer, msg.region(), d.len)?;
            msgs.push(msg);
        }
        let a = self.bufs.resolve(first_acc, size)?;
        let guards = msgs.iter().map(|m| m.region().read()).collect::<Result<Vec<_>>>()?;
        let srcs: Vec<&[u8]> = guards.iter().map(|g| &**g).collect();
        self.dev.reduce_host_many(d.buf, d.off, a.buf, a.off, &srcs, self.ctx.dtype, self.ctx.combine)?;
        drop(guards);
        for (msg, peer) in msgs.into_iter().zip(peers) {
            self.received[peer] += 1;
            msg.release();
        }
        Ok(true)
    }

    /// Waits until a message from `peer` has arrived.
    fn await_message(&mut self, peer: Rank) -> Result<()> {
        let (me, link) = (self.ctx.rank, self.ctx.link);
        if !link.has_message(me, peer) {
            let index = self.received[peer];
            let what = move || format!("rank {peer} to send message {index} of this op");
            self.wait_for(peer, &what, &mut || link.has_message(me, peer))?;
        }
        Ok(())
    }

    /// Waits for the next message from `peer`, opens it and checks its header. Dropping the
    /// result unreleased (on any error) puts the message back unread.
    fn next_message(&mut self, peer: Rank) -> Result<Opened<'r>> {
        self.await_message(peer)?;
        let Some(msg) = self.ctx.link.open(self.ctx.rank, peer) else {
            // Only a sender that failed takes messages back, and it poisons the link first.
            return Err(self
                .poisoned()
                .unwrap_or_else(|| CollectiveError::protocol("a message vanished from the mailbox").with_peer(peer)));
        };
        self.check_header(peer, msg.header())?;
        Ok(msg)
    }

    fn check_len(&self, peer: Rank, region: &HostRegion, want: usize) -> Result<()> {
        if region.len != want || !region.mem.check(region.off, region.len) {
            return Err(CollectiveError::protocol(format!(
                "rank {peer} sent {} bytes where {want} were expected",
                region.len
            ))
            .with_peer(peer));
        }
        Ok(())
    }

    /// Whether an unreleased lend overlaps the range.
    fn hazard(&self, id: usize, off: usize, len: usize) -> bool {
        let (link, me) = (self.ctx.link, self.ctx.rank);
        self.lends.iter().any(|l| {
            l.range.is_some_and(|(i, o, n)| i == id && n > 0 && o < off + len && off < o + n)
                && !link.is_released(me, l.peer, l.ticket)
        })
    }

    /// Waits until no unreleased lend overlaps the range.
    fn wait_hazards(&mut self, id: usize, off: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.wait_lends(|l| l.range.is_some_and(|(i, o, n)| i == id && n > 0 && o < off + len && off < o + n))
    }

    /// Waits for every lend selected by `which`; forgets the released ones.
    fn wait_lends(&mut self, which: impl Fn(&Lend) -> bool) -> Result<()> {
        let pending: Vec<(Rank, u64)> = self.lends.iter().filter(|l| which(l)).map(|l| (l.peer, l.ticket)).collect();
        for (p, t) in pending {
            self.wait_released(p, t)?;
        }
        let (link, me) = (self.ctx.link, self.ctx.rank);
        self.lends.retain(|l| !link.is_released(me, l.peer, l.ticket));
        Ok(())
    }

    /// After a failure: takes back every message still lent, and waits (with a grace period,
    /// as the op's own deadline may be what failed) for peers reading one in place.
    fn reclaim(&mut self) {
        let deadline = self.ctx.deadline.max(crate::config::deadline_after(RECLAIM_GRACE));
        let mut peers: Vec<Rank> = self.lends.iter().map(|l| l.peer).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            if !self.ctx.link.reclaim(self.ctx.rank, peer, deadline) {
                debug_event!(rank = self.ctx.rank, peer, "a peer kept reading a lent range past the grace period");
            }
        }
        self.lends.clear();
    }
}
