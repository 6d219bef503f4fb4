//! The scheduler: runs one rank's [`Plan`] by driving the transport (messages) and the device
//! (copies and kernels). It is the only layer that sees both. Its rules:
//!
//! - a `Send` lends the source range (or a host staging copy of it) and does not wait;
//! - a range that is lent is never written until the peer releases it: a receive into it
//!   first copies the message to host staging and releases it, then waits;
//! - every wait has the op's deadline, and ends early on abort, on a departed peer, or on a
//!   mismatch seen in a message header or in the peer's flight recorder;
//! - the op ends only when every lend has been released.

mod staging;

use std::time::Instant;

use staging::SendSlot;
pub use staging::Staging;

use crate::algo::{Plan, Slot, Span, Step};
use crate::comm::flight::Board;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::mem::{HostMem, HostRegion};
use crate::op::Fingerprint;
use crate::trace::{debug_event, trace_event};
use crate::transport::{Header, Link, Message, WaitOutcome};
use crate::types::{Combine, DType, Rank, Scale};

/// Where a slot's spans live.
pub(crate) enum Binding<'a, B> {
    /// Not used by this op.
    Unbound,
    /// One buffer, spans offset by `base` bytes. `id` names the buffer for hazard checks
    /// (two bindings of the same memory share an id).
    Contig { buf: &'a B, base: usize, id: usize },
    /// One buffer per block of `block` bytes (all_gather into a list of tensors).
    Blocks { bufs: Vec<&'a B>, block: usize, id: usize },
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
            Binding::Blocks { bufs, block, id } => {
                let (k, inner) = if *block == 0 { (0, 0) } else { (off / block, off % block) };
                match bufs.get(k) {
                    Some(buf) if inner + len <= *block || len == 0 => Ok(Resolved { buf, off: inner, len, id: id + k }),
                    _ => Err(CollectiveError::protocol(format!("plan span {s:?} does not fit the output list"))),
                }
            }
            Binding::Unbound => Err(CollectiveError::protocol(format!("plan uses unbound slot {:?}", s.slot))),
        }
    }
}

/// Runs `plan` to completion (or to the first error, which also poisons the link).
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
    let result = run.all(plan);
    let result = result.and_then(|()| run.wait_lends(|_| true));
    if let Err(e) = &result
        && !matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::Unsupported)
    {
        // Only a collective's sequence number goes with the poison: it is how a rank that
        // arrives late at the same collective knows it is involved (see `Communicator::submit`).
        let poison = e.clone().with_rank(ctx.rank).with_op(ctx.fp.desc.to_string());
        ctx.link.poison(if ctx.p2p { poison } else { poison.with_seq(ctx.seq) });
    }
    result
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

impl<D: Device> Run<'_, '_, D> {
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
                let i = self.send_slot(s.len);
                let mem = self.stage.send[i].mem.clone();
                // SAFETY: the slot is not lent (send_slot only returns released slots) and is
                // owned by this rank, so nobody else reads or writes it.
                self.dev.download(s.buf, s.off, unsafe { mem.bytes_mut(0, s.len) })?;
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
    fn send_slot(&mut self, len: usize) -> usize {
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
            return i;
        }
        if let Some(i) = slots.iter().position(|x| x.held_by.is_none()) {
            slots[i].mem = HostMem::zeroed(len);
            return i;
        }
        slots.push(SendSlot { mem: HostMem::zeroed(len), held_by: None });
        slots.len() - 1
    }

    fn recv(&mut self, peer: Rank, dst: Span, acc: Option<Span>, size: usize) -> Result<()> {
        let (me, link) = (self.ctx.rank, self.ctx.link);
        let msg = self.next_message(peer)?;
        let d = self.bufs.resolve(dst, size)?;
        self.check_len(peer, &msg.region, d.len)?;
        self.received[peer] += 1;
        let hazard = d.len > 0 && self.hazard(d.id, d.off, d.len);
        let (mem, off) = if hazard {
            let st = self.stage.recv(d.len);
            // SAFETY: the peer does not write a lent range before we release it, and the
            // staging block is this rank's own and not lent.
            unsafe { st.bytes_mut(0, d.len).copy_from_slice(msg.region.mem.bytes(msg.region.off, d.len)) };
            link.release(me, peer);
            self.wait_hazards(d.id, d.off, d.len)?;
            (st, 0)
        } else {
            (msg.region.mem.clone(), msg.region.off)
        };
        // SAFETY: either the peer's lent range, which it does not write until released, or
        // our own staging block.
        let bytes = unsafe { mem.bytes(off, d.len) };
        match acc {
            None => self.dev.upload(d.buf, d.off, bytes)?,
            Some(a) => {
                let a = self.bufs.resolve(a, size)?;
                self.dev.reduce_host(d.buf, d.off, a.buf, a.off, bytes, self.ctx.dtype, self.ctx.combine)?;
            }
        }
        if !hazard {
            link.release(me, peer);
        }
        Ok(())
    }

    /// Runs a run of receive-reduces into one range as one fused kernel: waits for every
    /// message, checks each, reduces all sources in one pass, then releases them. Returns
    /// `false` (having consumed nothing) when the destination is still lent out, so that the
    /// caller falls back to one step at a time.
    fn recv_reduce_many(&mut self, run: &[Step], size: usize) -> Result<bool> {
        let Step::RecvReduce { acc: first_acc, dst, .. } = run[0] else { return Ok(false) };
        let d = self.bufs.resolve(dst, size)?;
        if d.len > 0 && self.hazard(d.id, d.off, d.len) {
            return Ok(false);
        }
        let (me, link) = (self.ctx.rank, self.ctx.link);
        let mut regions = Vec::with_capacity(run.len());
        for step in run {
            let Step::RecvReduce { peer, .. } = *step else { return Ok(false) };
            let msg = self.next_message(peer)?;
            self.check_len(peer, &msg.region, d.len)?;
            regions.push((peer, msg.region));
        }
        let a = self.bufs.resolve(first_acc, size)?;
        // SAFETY: each region is lent to this rank and not written by its owner until released.
        let srcs: Vec<&[u8]> = regions.iter().map(|(_, r)| unsafe { r.mem.bytes(r.off, r.len) }).collect();
        let out = self.dev.reduce_host_many(d.buf, d.off, a.buf, a.off, &srcs, self.ctx.dtype, self.ctx.combine);
        drop(srcs);
        for (peer, _) in &regions {
            self.received[*peer] += 1;
            link.release(me, *peer);
        }
        out.map(|()| true)
    }

    /// Waits for the next message from `peer` and checks its header; it stays queued until
    /// released.
    fn next_message(&mut self, peer: Rank) -> Result<Message> {
        let (me, link) = (self.ctx.rank, self.ctx.link);
        if !link.has_message(me, peer) {
            let index = self.received[peer];
            let what = move || format!("rank {peer} to send message {index} of this op");
            self.wait_for(peer, &what, &mut || link.has_message(me, peer))?;
        }
        let msg = link
            .peek(me, peer)
            .ok_or_else(|| CollectiveError::protocol("a message vanished from the mailbox").with_peer(peer))?;
        self.check_header(peer, &msg.header)?;
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

    fn check_header(&self, peer: Rank, h: &Header) -> Result<()> {
        let c = self.ctx;
        if h.p2p != c.p2p || h.seq != c.seq || !h.fp.compatible(&c.fp) {
            let theirs = if h.p2p {
                format!("{} (point-to-point #{})", h.fp.desc, h.seq)
            } else {
                format!("{} as op #{}", h.fp.desc, h.seq)
            };
            let ours = if c.p2p {
                format!("{} (point-to-point #{})", c.fp.desc, c.seq)
            } else {
                format!("{} as op #{}", c.fp.desc, c.seq)
            };
            return Err(CollectiveError::new(
                ErrorKind::Mismatch,
                format!("rank {peer} called {theirs}, but rank {} called {ours}", c.rank),
            )
            .with_peer(peer));
        }
        if h.index != self.received[peer] {
            return Err(CollectiveError::protocol(format!(
                "message {} from rank {peer} arrived where message {} was expected",
                h.index, self.received[peer]
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

    fn wait_released(&mut self, peer: Rank, ticket: u64) -> Result<()> {
        let (link, me) = (self.ctx.link, self.ctx.rank);
        if link.is_released(me, peer, ticket) {
            return Ok(());
        }
        let what = move || format!("rank {peer} to read message #{ticket} this rank sent it");
        self.wait_for(peer, &what, &mut || link.is_released(me, peer, ticket))
    }

    fn wait_for(&mut self, peer: Rank, what: &dyn Fn() -> String, ready: &mut dyn FnMut() -> bool) -> Result<()> {
        let c = self.ctx;
        let noted = &mut self.noted_wait;
        let mut watch = crate::comm::watch::WaitWatch::new(Instant::now(), c.board.warn_after());
        let mut slow = || -> Result<()> {
            let now = Instant::now();
            if watch.tick(now) {
                crate::comm::watch::warn_op(c, peer, &what(), watch.waited(now));
            }
            if !*noted {
                c.board.set_waiting(c.rank, Some(what()));
                *noted = true;
            }
            if !c.p2p
                && let Some(theirs) = c.board.collective_at(peer, c.seq)
                && !theirs.compatible(&c.fp)
            {
                return Err(CollectiveError::new(
                    ErrorKind::Mismatch,
                    format!(
                        "rank {peer} called {} as op #{}, but rank {} called {}",
                        theirs.desc, c.seq, c.rank, c.fp.desc
                    ),
                )
                .with_peer(peer));
            }
            Ok(())
        };
        match c.link.wait(c.rank, peer, c.deadline, ready, &mut slow)? {
            WaitOutcome::Ready => {
                if self.noted_wait {
                    c.board.set_waiting(c.rank, None);
                    self.noted_wait = false;
                }
                Ok(())
            }
            WaitOutcome::TimedOut => Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!("gave up at the op's deadline waiting for {}; rank {peer} never got there", what()),
            )
            .with_peer(peer)
            .with_report(c.board.report(c.comm_name))),
            WaitOutcome::PeerGone => Err(CollectiveError::new(
                ErrorKind::PeerLost,
                format!("rank {peer} dropped its communicator while this rank waited for {}", what()),
            )
            .with_peer(peer)),
            WaitOutcome::Poisoned => Err(match c.link.poisoned() {
                Some(e) => e.relayed(c.rank),
                None => CollectiveError::new(ErrorKind::Aborted, "the communicator was aborted"),
            }),
        }
    }
}
