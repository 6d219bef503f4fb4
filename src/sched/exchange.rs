//! The exchange step ([`Step::Exchange`](crate::algo::Step::Exchange)): a small op between
//! threads of one process (or processes of one host that agreed on shared slots)
//! run without messages. The rank publishes its part in its slot
//! (`transport::slots`), waits until every peer whose part its result reads has published the
//! same op, checks their fingerprints, and computes its own result from the parts — in rank
//! order, so every rank gets the same bits. A rank whose result reads no peer's part (a root
//! of broadcast or scatter, a non-root of reduce or gather) does not wait: it runs ahead, up
//! to the slots' depth, and a mismatch it did not see is reported on its next call. Whom a
//! rank waits for, whose slots it looks at and when it need not publish is `rule.rs`'s. Only
//! devices whose buffers are host memory and whose kernels are the host's run it
//! ([`Device::host_memory`]); the communicator decides, the same way on every rank.
//!
//! The exchange itself works on a small borrowed [`Exchange`] (device, buffers, the op's
//! [`View`]): an [`OpRun`] lends its own when it reaches the step (group calls, `Work`, the
//! shared progress thread), and [`run`] drives one built on the caller's stack, with no
//! `OpRun` at all (a blocking call with nothing queued ahead of it). One implementation, two
//! drivers; the waits' checks are [`View`]'s. The result computed from the parts is
//! `exchange/result.rs`'s.

use std::borrow::{Borrow, Cow};
use std::cell::Cell;
use std::time::Instant;

use super::rule::{HUB, Looks, Reads};
use super::{Binding, Bindings, Blocked, OpRun, Progress, View};
use crate::algo::{Slot, Span};
use crate::clock::coarse_now;
use crate::comm::watch::WaitWatch;
use crate::config::Algorithm;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::mem::{HostMem, Sole};
use crate::op::{Fingerprint, OpDesc, OpKind};
use crate::transport::Link;
use crate::transport::slots::{FP_WORDS, SLOT_BYTES, Slots};
use crate::transport::wait::may_spin;
use crate::types::Rank;

mod result;

/// How many ops ahead a rank that sets the pace of gather or scatter takes its slot's line
/// ([`Slots::claim`]): far enough for the line to arrive before the publish that needs it, and
/// far enough behind the slots' depth that its readers are usually done with it (1, 4 and 16
/// measured alike for gather, 16 best by a little).
const CLAIM_AHEAD: u64 = 16;

/// What a rank's exchange of one op derives from the op alone (and the rank): worked out
/// once for a call that a loop repeats (the memo keeps it, `comm::memo`), not per op. Small
/// (moved in registers, no `memcpy`): a repeated 16-byte broadcast spent ~50 instructions an
/// op working these out again.
#[derive(Clone, Copy)]
pub(crate) struct Lean {
    /// The op's fingerprint as the slots hold it.
    words: [u64; FP_WORDS],
    /// Whose parts this rank's result reads.
    reads: Reads,
    /// Whether this rank publishes nothing ([`Reads::quiet`]): its own part is read from its
    /// input.
    quiet: bool,
    /// Whether this rank's peers run ahead of it ([`Reads::behind`]).
    behind: bool,
}

impl Lean {
    /// What the exchange of the op whose fingerprint is `fp` derives, for rank `me`.
    pub(crate) fn of(fp: &Fingerprint, me: Rank) -> Self {
        let desc = &fp.desc;
        Lean {
            words: fp.words(),
            reads: Reads::of(desc, me),
            quiet: Reads::quiet(desc, me),
            behind: Reads::behind(desc, me),
        }
    }
}

/// How many times an exchange looks for what it waits for before it blocks ([`block_on`]):
/// a bounded spin, far shorter than any deadline.
const SOON: usize = 64;

/// One rank's exchanged op, borrowed: what the exchange reads and writes. Its buffers are
/// handles an `OpRun` owns (`B = D::Buffer`) or the caller's own, lent (`B = &D::Buffer`).
pub(crate) struct Exchange<'a, D: Device, B: Borrow<D::Buffer> = <D as Device>::Buffer> {
    dev: &'a D,
    bufs: &'a Bindings<B>,
    view: View<'a>,
    /// What the exchange derives from `view`'s op.
    lean: Lean,
    /// The link's exchange slots (looked up once per op).
    slots: Option<&'a Slots>,
    /// The caller's proof that it holds the output exclusively (writes skip registering).
    sole: Sole<'a>,
}

impl<'a, D: Device, B: Borrow<D::Buffer>> Exchange<'a, D, B> {
    /// The exchange of `view`'s op; `lean` must be its ([`Lean::of`] its fingerprint).
    pub(crate) fn new(dev: &'a D, bufs: &'a Bindings<B>, view: View<'a>, lean: Lean, sole: Sole<'a>) -> Self {
        Exchange { dev, bufs, view, lean, slots: view.shared.link.slots(), sole }
    }

    /// The op as its waits see it.
    pub(crate) fn view(&self) -> View<'a> {
        self.view
    }
}

impl<D: Device> OpRun<D> {
    /// Runs the exchange as far as it goes: publish (once this rank's slot is free), then,
    /// once every part has arrived, the result.
    pub(super) fn exchange(&mut self, size: usize) -> Result<Progress> {
        if !self.inflight.is_empty() {
            return Ok(Progress::Blocked(Blocked::Device));
        }
        let lean = Lean::of(&self.ctx.fp, self.ctx.rank);
        let ex = Exchange::new(&self.dev, &self.bufs, self.ctx.view(), lean, Sole::none());
        if !self.exchanged {
            if let Some(b) = ex.publish(size)? {
                return Ok(Progress::Blocked(b));
            }
            self.exchanged = true;
        }
        Ok(match ex.collect(size)? {
            Some(b) => Progress::Blocked(b),
            None => Progress::Advanced,
        })
    }
}

/// Runs an exchanged op to completion on this thread, without an `OpRun`: publish, wait for
/// the parts its result reads, the result. Waits have the op's deadline and run the same
/// checks as an `OpRun`'s ([`View::slow`]); on failure the link is poisoned (peers stop at
/// once) and the error returned is about this rank's op. An exchange lends nothing and
/// enqueues no device work, so a failure has nothing to reclaim.
///
/// It keeps the op's flight-recorder entry too. Most exchanged ops never wait: such an op
/// gets one entry, written once it is over (one coarse clock read and no lock:
/// `Board::record`). One that waits is entered as running when it first does — that clock
/// read is its start and, for a [`Deadline::OnWait`](super::Deadline::OnWait), its
/// deadline's — so that a hang shows it, and finished once over. Its times are
/// [`coarse_now`]'s: a tick's precision is plenty for a recorder and a deadline, and a precise
/// read waits for the peers' lines just loaded (`crate::clock`). Peers that look for its call in the meantime (a mismatch's message)
/// read it from its slot's words instead.
pub(crate) fn run<D: Device, B: Borrow<D::Buffer>>(ex: &Exchange<'_, D, B>) -> Result<()> {
    let v = &ex.view;
    let board = &v.shared.board;
    let mut waited = None;
    let result = ex.run_through(&mut waited);
    match &waited {
        Some(w) => {
            board.finish_at(v.rank, result.is_ok(), coarse_now());
            if result.is_ok() {
                v.settle(&w.noted);
            }
        }
        None => {
            board.record(v.rank, v.seq, &ex.lean.words, v.fp.desc.in_place, result.is_ok(), crate::clock::coarse_raw())
        }
    }
    result.map_err(|e| {
        super::fail(*v, &e);
        e.at_seq(v.seq)
    })
}

/// What an exchange run on the caller's thread keeps once it has waited (never built for
/// the many that do not).
struct Waited {
    deadline: Instant,
    watch: Option<WaitWatch>,
    /// Whether a slow check set "waiting for" in the flight recorder.
    noted: Cell<bool>,
}

/// Whether what `b` (a wait of an exchange) waits for has happened.
pub(super) fn slot_ready(link: &Link, seq: u64, b: Blocked) -> bool {
    match b {
        Blocked::Part(p) => link.slots().is_some_and(|s| s.arrived(p, seq)),
        Blocked::Reading(p, held) => link.slots().is_some_and(|s| s.finished(p) >= held),
        _ => false,
    }
}

/// What `b` (a wait of an exchange) waits for, for the flight recorder and error messages.
pub(super) fn describe(b: Blocked) -> (Option<Rank>, String) {
    match b {
        Blocked::Part(p) => (Some(p), format!("rank {p} to publish its part of this op")),
        Blocked::Reading(p, held) => {
            (Some(p), format!("rank {p} to finish reading the part of op #{} published to it", held.saturating_sub(1)))
        }
        _ => (None, format!("{b:?}")),
    }
}

impl<'a, D: Device, B: Borrow<D::Buffer>> Exchange<'a, D, B> {
    fn slots(&self) -> Result<&'a Slots> {
        self.slots
            .ok_or_else(|| CollectiveError::protocol("an exchanged op ran between ranks that share no exchange slots"))
    }

    /// Publishes this rank's part, once its slot is free (`Some(what it waits for)` while a
    /// peer still reads what the slot holds), and checks what [`Looks`] says; a non-root of
    /// broadcast or scatter whose root's part is there publishes nothing ([`Reads::lazy`]),
    /// nor does the hub as the root of reduce or gather ([`Reads::quiet`]).
    pub(super) fn publish(&self, size: usize) -> Result<Option<Blocked>> {
        if self.lean.quiet {
            return Ok(None);
        }
        let v = &self.view;
        let (me, seq, n) = (v.rank, v.seq, v.shared.world);
        let desc = &v.fp.desc;
        let fp = &self.lean.words;
        let slots = self.slots()?;
        if self.lean.reads.lazy(me).is_some_and(|r| slots.arrived(r, seq)) {
            return Ok(None);
        }
        if let Some((p, held)) = slots.busy(me, seq) {
            return Ok(Some(Blocked::Reading(p, held)));
        }
        match self.own_part(desc)? {
            Some(span) if matches!(self.bufs.input, Binding::Blocks { .. }) => self.publish_list(slots, span, size)?,
            Some(span) => {
                let (mem, off, len) = self.host(span, size)?;
                slots.publish(me, seq, fp, &mem.read_sole(self.sole, off, len)?);
            }
            None => slots.publish(me, seq, fp, &[]),
        }
        if self.lean.reads != Reads::Own {
            // Only peers whose results read this part wait for it: non-roots' parts of
            // broadcast and scatter are waited for by nobody (their roots wait for no peer,
            // unless the op carries a shape digest and everyone waits for every part; the
            // hub's look below does not wait). A rank that waits for no peer wakes them once,
            // in `collect`, which follows at once: for the part and the finish together.
            if desc.shape.is_some() || !matches!(desc.kind, OpKind::Broadcast | OpKind::Scatter) {
                v.shared.link.wake_peers(me);
            }
        }
        // The slots this rank looks at (see `Looks`), after a fence that pairs with theirs.
        let look = match self.lean.reads.looks(me) {
            Looks::None => None,
            Looks::Hub => Some(HUB..HUB + 1),
            Looks::All => Some(0..n),
        };
        if let Some(peers) = look {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if let Some(p) = peers.filter(|&p| p != me).find(|&p| slots.disagrees(p, seq, fp)) {
                return Err(self.part_mismatch(p));
            }
        }
        Ok(None)
    }

    /// Publishes an input list's part (scatter, reduce_scatter, all_to_all of lists): its
    /// blocks, one after the other, as the tensor form's one input holds them. Out of line:
    /// its slot-sized buffer would otherwise enlarge the frame of every op's publish (a stack
    /// probe and colder stack lines per call: a 16-byte broadcast measured ~20% slower).
    #[cold]
    #[inline(never)]
    fn publish_list(&self, slots: &Slots, span: Span, size: usize) -> Result<()> {
        let v = &self.view;
        let mut part = [0u8; SLOT_BYTES];
        let (block, bytes) = (v.fp.desc.count, span.len * size);
        let Some(part) = part.get_mut(..bytes) else {
            return Err(CollectiveError::protocol(format!(
                "an exchanged part of {bytes} bytes, more than a slot holds ({SLOT_BYTES})"
            )));
        };
        for (k, dst) in part.chunks_mut((block * size).max(1)).enumerate() {
            let (mem, off, len) = self.host(Span::new(Slot::Input, span.off + k * block, block), size)?;
            dst.copy_from_slice(&mem.read(off, len)?);
        }
        slots.publish(v.rank, v.seq, &self.lean.words, part);
        Ok(())
    }

    /// Once every part this rank's result reads has arrived (`Some(the part it waits for)`
    /// until then) and agrees: the result, and this rank's slot reads are finished.
    pub(super) fn collect(&self, size: usize) -> Result<Option<Blocked>> {
        let v = &self.view;
        let (me, seq, n) = (v.rank, v.seq, v.shared.world);
        let desc = &v.fp.desc;
        let slots = self.slots()?;
        let fp = &self.lean.words;
        match self.lean.reads {
            Reads::Own => {}
            Reads::Root(r) => {
                if !slots.arrived(r, seq) {
                    return Ok(Some(Blocked::Part(r)));
                }
                if !slots.agrees(r, seq, fp) {
                    return Err(self.part_mismatch(r));
                }
            }
            Reads::Every => {
                if let Some(p) = (0..n).find(|&p| p != me && !slots.arrived(p, seq)) {
                    return Ok(Some(Blocked::Part(p)));
                }
                if let Some(p) = (0..n).find(|&p| p != me && !slots.agrees(p, seq, fp)) {
                    return Err(self.part_mismatch(p));
                }
            }
        }
        self.result(slots, desc, size)?;
        slots.finish(me, seq);
        v.shared.link.wake_peers(me);
        // Hints (PERFORMANCE.md, session 39), for ops whose ranks do not run in step: the
        // next op may be another, or not exchanged, and then they cost a line's trip.
        if self.lean.behind {
            // The lines of the peers' next parts, asked for now, travel while this rank
            // returns and starts its next op. 4 ranks on 2 cores, 16-byte reduce: 0.40-0.53 us
            // became 0.30-0.33.
            (0..n).filter(|&p| p != me).for_each(|p| slots.prefetch(p, seq.wrapping_add(1)));
        } else if self.lean.reads == Reads::Own && matches!(desc.kind, OpKind::Gather | OpKind::Scatter) {
            // A rank that runs ahead of its peers and sets the pace (a non-root of gather,
            // whose root only copies; a root of scatter) takes the line of the slot it will
            // publish in a few ops from now, if no peer still reads it. 16 bytes, 4 ranks on 2
            // cores: gather 0.32 us became 0.26-0.27, scatter 0.27-0.36 became 0.25-0.29; 2
            // processes: gather 0.16-0.17 became 0.12-0.14, scatter 0.17-0.21 became
            // 0.15-0.17. Not for reduce, whose root sets the pace (0.32 became 0.35), nor the
            // root of broadcast (level).
            slots.claim(me, seq.saturating_add(CLAIM_AHEAD));
        }
        Ok(None)
    }

    /// [`run`]'s loop: publish, then the result, waiting in between as long as need be
    /// (`waited` is set at the first wait).
    fn run_through(&self, waited: &mut Option<Waited>) -> Result<()> {
        let size = self.view.fp.desc.dtype.size();
        let mut published = false;
        loop {
            let blocked = if published { self.collect(size)? } else { self.publish(size)? };
            match blocked {
                None if published => return Ok(()),
                None => published = true,
                Some(b) if waited.is_none() && self.arrives_soon(b) => {}
                Some(b) => self.block_on(b, waited)?,
            }
        }
    }

    /// Whether what `b` waits for happens within a few looks ([`SOON`]): most waits of ranks
    /// that run in step last one cache line's trip between cores, and such a wait skips
    /// [`block_on`]'s entry in the flight recorder, its clock reads and its exit. Only where
    /// every live rank has a core ([`may_spin`]): else the peer may need this core to publish
    /// (4 threads on 2 cores, 16-byte all_reduce: ~6.5 us a call without the looks, ~7.7 with).
    #[inline]
    fn arrives_soon(&self, b: Blocked) -> bool {
        let (Some(slots), seq) = (self.slots, self.view.seq) else { return false };
        if !may_spin() {
            return false;
        }
        let ready = || match b {
            Blocked::Part(p) => slots.arrived(p, seq),
            Blocked::Reading(p, held) => slots.finished(p) >= held,
            _ => false,
        };
        (0..SOON).any(|_| {
            let r = ready();
            if !r {
                std::hint::spin_loop();
            }
            r
        })
    }

    /// Blocks this thread until what `b` waits for may have happened, the deadline passes, or
    /// the link fails, running the slow-path checks whenever the wait sleeps. The first wait
    /// enters the op in the flight recorder as running and starts its deadline.
    #[cold]
    #[inline(never)]
    fn block_on(&self, b: Blocked, waited: &mut Option<Waited>) -> Result<()> {
        let v = self.view;
        let (Blocked::Part(peer) | Blocked::Reading(peer, _)) = b else {
            return Err(CollectiveError::protocol(format!("an exchange cannot wait for {b:?}")));
        };
        let w = waited.get_or_insert_with(|| {
            let now = coarse_now();
            v.shared.board.start_at(v.rank, v.seq, v.fp.desc, Algorithm::Exchange, now);
            Waited { deadline: v.deadline.at_from(now), watch: None, noted: Cell::new(false) }
        });
        let link = v.link();
        let watch = w.watch.get_or_insert_with(|| WaitWatch::new(coarse_now(), v.shared.board.warn_after()));
        let ready = || slot_ready(link, v.seq, b);
        let noted = &w.noted;
        let outcome =
            link.wait(v.rank, peer, w.deadline, &mut || ready(), &mut || v.slow(b, describe(b), &ready, watch, noted))?;
        v.outcome(outcome, peer, || describe(b))
    }

    /// What this rank publishes: its input (all of it for reduce_scatter, all_to_all and the
    /// root's scatter), nothing for non-roots of broadcast and scatter and for barrier.
    fn own_part(&self, desc: &OpDesc) -> Result<Option<Span>> {
        let (me, n, count) = (self.view.rank, self.view.shared.world, desc.count);
        let root = desc.root.unwrap_or(0);
        Ok(match desc.kind {
            OpKind::AllReduce | OpKind::Reduce | OpKind::AllGather | OpKind::Gather => {
                Some(Span::new(Slot::Input, 0, count))
            }
            OpKind::ReduceScatter | OpKind::AllToAll => Some(Span::new(Slot::Input, 0, n * count)),
            OpKind::Broadcast if me == root => Some(Span::new(Slot::Input, 0, count)),
            OpKind::Scatter if me == root => Some(Span::new(Slot::Input, 0, n * count)),
            OpKind::Broadcast | OpKind::Scatter | OpKind::Barrier => None,
            OpKind::Send | OpKind::Recv | OpKind::Split | OpKind::AllToAllV => {
                return Err(CollectiveError::protocol(format!("{} cannot be exchanged", desc.kind.name())));
            }
        })
    }

    /// The host memory behind `span`: (block, byte offset, byte length). Borrowed where the
    /// device lends its buffer's own handle (no reference-count traffic per op).
    fn host(&self, span: Span, size: usize) -> Result<(Cow<'a, HostMem>, usize, usize)> {
        let bufs: &'a Bindings<B> = self.bufs;
        let (buf, off, len, _) = bufs.locate(span, size)?;
        let buf: &'a D::Buffer = buf.borrow();
        let mem = match self.dev.host_mem(buf) {
            Some(m) => Cow::Borrowed(m),
            None => Cow::Owned(self.dev.host_view(buf).ok_or_else(|| {
                CollectiveError::device(format!(
                    "{} says its memory is host memory, but a buffer has no host view",
                    self.dev.describe()
                ))
            })?),
        };
        Ok((mem, off, len))
    }

    #[cold]
    #[inline(never)]
    fn past_slot(&self, q: Rank) -> CollectiveError {
        CollectiveError::protocol(format!("rank {q}'s part of op #{} reaches past its exchange slot", self.view.seq))
            .with_peer(q)
    }

    /// `peer` published a different op under this op's number: named from the flight
    /// recorder when the peer is a thread of this process, else from the words it published.
    #[cold]
    #[inline(never)]
    fn part_mismatch(&self, peer: Rank) -> CollectiveError {
        let c = &self.view;
        let theirs = match c.shared.board.collective_at(peer, c.seq) {
            Some(f) => f.desc.to_string(),
            None => self
                .slots
                .and_then(|s| crate::op::Fingerprint::desc_of_words(&s.fingerprint(peer, c.seq)))
                .map_or_else(|| "another op".to_string(), |d| d.to_string()),
        };
        c.mismatch(peer, &super::called(&theirs, false, c.seq))
    }
}
