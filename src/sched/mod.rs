//! The scheduler: runs one rank's [`Plan`] by driving the transport (messages) and the device
//! (enqueued copies and kernels). It is the only layer that sees both.
//!
//! A running op is an [`OpRun`], a state machine: [`OpRun::poll`] never blocks — it advances
//! as far as messages, releases and device events allow and says what it waits for
//! ([`Blocked`]). Drivers (`drive.rs`) block with the op's deadline: one op on the calling
//! thread, or several ranks' ops from one thread (group calls). The rules:
//!
//! - a `Send` lends the source range — host memory in place, a device range to a peer whose
//!   device reaches it, or a host staging copy — and does not wait; a range is lent only once
//!   the device work that writes it has completed;
//! - a range that is lent is never written until the peer has released it: a receive into it
//!   first moves the message to staging and releases it, then waits;
//! - a received message is released only once the device work that reads it has completed;
//! - hazards are tracked by memory (the device's `mem_id` and byte ranges), never by the role
//!   a buffer plays, so an input that is also an output is protected like any other range;
//! - the op ends only when every lend has been released and all its device work completed —
//!   on success — or, on failure, once the link is poisoned (peers learn at once), the device
//!   work finished and every lend is reclaimed. A returned tensor is never read by anyone else.

mod bindings;
mod checks;
mod drive;
mod exchange;
mod failure;
mod recv;
mod rule;
mod send;
mod staging;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bindings::Resolved;
pub(crate) use bindings::{Binding, Bindings};
pub(crate) use checks::Deadline;
pub(crate) use drive::{Advance, Place, Turn, drive, drive_all};
pub(crate) use exchange::{Exchange, Lean, run as run_exchange};
pub(crate) use failure::{Now, after_failure};
pub use staging::Staging;

use crate::algo::{Plan, Span, Step};
use crate::comm::{RankShared, Shared};
use crate::device::{Device, Reach, Source};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::Fingerprint;
use crate::trace::{debug_event, trace_event};
use crate::transport::{Link, Opened};
use crate::types::{Combine, DType, Rank, Scale};

/// Everything about the op the scheduler needs besides the plan and buffers.
pub(crate) struct OpCtx {
    pub rank: Rank,
    pub world: usize,
    pub seq: u64,
    pub p2p: bool,
    pub fp: Fingerprint,
    pub deadline: Instant,
    pub dtype: DType,
    pub combine: Combine,
    /// This rank's own handle on the communicator's shared state: cloning it per op touches a
    /// counter no other rank writes (the inner `Arc` is shared by every rank).
    pub shared: Arc<RankShared>,
}

impl OpCtx {
    pub(crate) fn link(&self) -> &Link {
        &self.shared.link
    }

    /// The borrowed view of this context that checks and error messages read.
    #[inline]
    pub(crate) fn view(&self) -> View<'_> {
        View {
            rank: self.rank,
            seq: self.seq,
            p2p: self.p2p,
            fp: &self.fp,
            deadline: Deadline::At(self.deadline),
            shared: &self.shared,
        }
    }

    /// See [`View::mismatch`].
    pub(crate) fn mismatch(&self, peer: Rank, theirs: &str) -> CollectiveError {
        self.view().mismatch(peer, theirs)
    }
}

/// What an op's waits, checks and error messages read about it, borrowed: an [`OpRun`] lends
/// it from its [`OpCtx`]; an exchanged op driven at once (see [`exchange::run`]) builds it on
/// the stack, with no `OpRun` at all. One set of checks serves both.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub rank: Rank,
    pub seq: u64,
    pub p2p: bool,
    pub fp: &'a Fingerprint,
    pub deadline: Deadline,
    pub shared: &'a Shared,
}

impl View<'_> {
    pub(crate) fn link(&self) -> &Link {
        &self.shared.link
    }

    /// The `Mismatch` between this rank's op and what `peer` called (`theirs`, worded by
    /// [`called`]): the one wording of every mismatch the scheduler finds, whether in a
    /// message's header or in an exchanged part.
    pub(crate) fn mismatch(&self, peer: Rank, theirs: &str) -> CollectiveError {
        let ours = called(&self.fp.desc.to_string(), self.p2p, self.seq);
        CollectiveError::new(
            ErrorKind::Mismatch,
            format!("rank {peer} called {theirs}, but rank {} called {ours}", self.rank),
        )
        .with_peer(peer)
    }
}

/// How a mismatch names one side's call: "all_reduce(sum, 4 x f32) as op #3", or
/// "send(4 x i32, to 1) (point-to-point #0)".
pub(crate) fn called(desc: &str, p2p: bool, seq: u64) -> String {
    if p2p { format!("{desc} (point-to-point #{seq})") } else { format!("{desc} as op #{seq}") }
}

fn overlaps((i, o, n): (usize, usize, usize), (j, p, m): (usize, usize, usize)) -> bool {
    i == j && n > 0 && m > 0 && o < p + m && p < o + n
}

#[derive(Debug)]
struct Lend {
    peer: Rank,
    ticket: u64,
    /// The lent memory (`id`, byte offset, byte length), unless a staging copy was lent.
    range: Option<(usize, usize, usize)>,
}

/// Device work in flight: what it writes (so nobody lends or reads it before it completes)
/// and the messages it reads (released once it completes).
/// The messages one piece of device work reads (usually one; a fused reduce reads several),
/// inline so that receiving allocates nothing.
pub(super) type Msgs = smallvec::SmallVec<[Opened; 2]>;

struct InFlight<E> {
    event: E,
    writes: Option<(usize, usize, usize)>,
    msgs: Msgs,
    /// Whether it reads this rank's receive staging memory (which must not be reused before).
    staging: bool,
}

impl<E> InFlight<E> {
    fn writing(event: E, key: (usize, usize, usize), msgs: Msgs) -> Self {
        InFlight { event, writes: Some(key), msgs, staging: false }
    }
}

/// A send whose bytes are being downloaded into a staging slot.
struct StagedSend<E> {
    event: E,
    peer: Rank,
    slot: usize,
    len: usize,
}

/// A receive into a lent range, in two phases: the message moves to staging (and is
/// released), then — once the range is free — the staged bytes land.
struct Parked<B> {
    source: Source<B>,
    dst: Resolved<B>,
    acc: Option<Span>,
}

/// A received payload moved to staging, and the device event that completes the move (none
/// when the host copied it).
type Staged<D> = (Source<<D as Device>::Buffer>, Option<<D as Device>::Event>);

/// What a blocked op waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// The next message from a peer.
    Message(Rank),
    /// A peer's release of a lent message (its memory may be written again).
    Release(Rank, u64),
    /// A peer having taken a message (and checked its header): what an op's end waits for.
    Delivered(Rank, u64),
    /// Device work of this rank.
    Device,
    /// A peer's part of an exchanged op.
    Part(Rank),
    /// A peer finishing reading this rank's exchange slot (it reaches this count).
    Reading(Rank, u64),
}

/// One rank's op in progress.
pub(crate) struct OpRun<D: Device> {
    dev: D,
    plan: Arc<Plan>,
    bufs: Bindings<D::Buffer>,
    pub(crate) ctx: OpCtx,
    /// The rank's staging memory, boxed (an op is moved a few times as it is prepared):
    /// `None` until a message needs it (an exchange never does).
    stage: Option<Box<Staging<D::Buffer, D::Event>>>,
    reach: Arc<[Reach]>,
    pos: usize,
    lends: Vec<Lend>,
    sent: Vec<u32>,
    received: Vec<u32>,
    inflight: Vec<InFlight<D::Event>>,
    staged_send: Option<StagedSend<D::Event>>,
    /// Boxed: rare (a receive into a lent range), and the op is moved as it is prepared.
    parked: Option<Box<Parked<D::Buffer>>>,
    /// Whether the flight recorder says this op waits (set by the slow path).
    noted_wait: std::cell::Cell<bool>,
    started: bool,
    done: bool,
    /// Whether an exchange step has published this rank's part.
    exchanged: bool,
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

/// Poisons the communicator's link with `err`, so every peer's wait ends at once with it.
/// Only a collective's sequence number goes with the poison (the op's own, unless `err`
/// already names the earlier op where ranks diverged): it is how other ranks tell whether
/// they are in the failed op, behind it or past it ([`after_failure`]).
pub(crate) fn fail(ctx: View<'_>, err: &CollectiveError) {
    let poison = err.clone().with_rank(ctx.rank).with_op(ctx.fp.desc.to_string());
    if !ctx.p2p
        && let Some(slots) = ctx.link().slots()
    {
        // Before the poison: a peer that sees the poison finds the part gone too.
        slots.withdraw(ctx.rank, ctx.seq);
    }
    ctx.link().poison(ctx.rank, if ctx.p2p { poison } else { poison.with_seq(ctx.seq) });
}

/// How long a failed op waits, past its own deadline if need be, for a peer that is in the
/// middle of reading this rank's memory (a copy or a kernel, never a wait) to finish.
const RECLAIM_GRACE: Duration = Duration::from_secs(10);

impl<D: Device> OpRun<D> {
    /// An op ready to run. `prologue` is device work enqueued before the plan (the
    /// pre-multiplied input of `PreMulSum`, one piece per block of an input list) and the
    /// range each piece writes.
    #[inline]
    pub(crate) fn new(
        dev: D,
        plan: Arc<Plan>,
        bufs: Bindings<D::Buffer>,
        ctx: OpCtx,
        stage: Option<Box<Staging<D::Buffer, D::Event>>>,
        reach: Arc<[Reach]>,
        prologue: impl IntoIterator<Item = (D::Event, (usize, usize, usize))>,
    ) -> Self {
        let world = ctx.world;
        let mut stage = stage;
        let mut spare = stage.as_mut().map(|s| std::mem::take(&mut s.spare)).unwrap_or_default();
        let mut lends = std::mem::take(&mut spare.lends);
        lends.clear();
        // Per-peer message counters, for plans that have messages (an exchange has none).
        let messages =
            plan.steps.iter().any(|s| matches!(s, Step::Send { .. } | Step::Recv { .. } | Step::RecvReduce { .. }));
        let (sent, received) = if messages {
            (staging::counters(&mut spare.sent, world), staging::counters(&mut spare.received, world))
        } else {
            (Vec::new(), Vec::new())
        };
        let mut inflight = std::mem::take(&mut spare.inflight);
        inflight.clear();
        inflight.extend(prologue.into_iter().map(|(event, w)| InFlight::writing(event, w, Msgs::new())));
        OpRun {
            dev,
            plan,
            bufs,
            ctx,
            stage,
            reach,
            pos: 0,
            lends,
            sent,
            received,
            inflight,
            staged_send: None,
            parked: None,
            noted_wait: std::cell::Cell::new(false),
            started: false,
            done: false,
            exchanged: false,
        }
    }

    /// Takes back the staging memory (to be reused by the communicator's next op), if the
    /// op had any or sent messages: the op is over and is dropped next. An op of messages
    /// that needed no staging (small host messages) still hands back its bookkeeping vectors
    /// in an empty one, so that the next op allocates none (before, every such op allocated
    /// and freed four).
    #[inline]
    pub(crate) fn take_staging(&mut self) -> Option<Box<Staging<D::Buffer, D::Event>>> {
        // `sent` is empty only for ops without messages (an exchange, whose caller keeps the
        // staging it did not take).
        let mut stage = match self.stage.take() {
            Some(s) => s,
            None if !self.sent.is_empty() => Box::default(),
            None => return None,
        };
        let mut inflight = std::mem::take(&mut self.inflight);
        inflight.clear();
        stage.spare = staging::Spare {
            lends: std::mem::take(&mut self.lends),
            sent: std::mem::take(&mut self.sent),
            received: std::mem::take(&mut self.received),
            inflight,
        };
        Some(stage)
    }

    /// Starts the op's flight-recorder entry at `now` (a time the caller read), unless it has
    /// started: an op driven as soon as it is prepared shares the clock read of its deadline.
    #[inline]
    pub(crate) fn start_at(&mut self, now: Instant) {
        if !std::mem::replace(&mut self.started, true) {
            // The flight recorder's entry starts when the op does (a queued op is not running).
            let c = &self.ctx;
            c.shared.board.start_at(c.rank, c.seq, c.fp.desc, self.plan.algorithm, now);
        }
    }

    /// Advances the op as far as it can without blocking: `Ok(None)` when it is complete,
    /// `Ok(Some(what))` when it waits, `Err` when it failed (then call [`fail`](Self::fail)).
    pub(crate) fn poll(&mut self) -> Result<Option<Blocked>> {
        let blocked = self.advance()?;
        // Device work in flight comes first: finishing it releases messages that peers may be
        // waiting for before they can send or release what this op waits for.
        Ok(blocked.map(|b| if self.inflight.is_empty() && self.staged_send.is_none() { b } else { Blocked::Device }))
    }

    fn advance(&mut self) -> Result<Option<Blocked>> {
        if self.done {
            return Ok(None);
        }
        if !self.started {
            self.start_at(Instant::now());
        }
        let size = self.ctx.dtype.size();
        let mut steps_taken = 0u32;
        loop {
            // The deadline bounds the whole op: one that never blocks (thousands of tiny
            // chunks, their messages all there) looks at the clock every so many steps.
            steps_taken = steps_taken.wrapping_add(1);
            if steps_taken.is_multiple_of(1024) && Instant::now() >= self.ctx.deadline {
                return Err(self.overran());
            }
            self.retire()?;
            if let Some(b) = self.finish_staged_send()? {
                return Ok(Some(b));
            }
            if let Some(b) = self.finish_parked(size)? {
                return Ok(Some(b));
            }
            let steps = &self.plan.steps;
            if self.pos == steps.len() {
                if !self.inflight.is_empty() {
                    return Ok(Some(Blocked::Device));
                }
                // The op ends once every peer took what it was sent (and so checked its
                // header): a mismatch fails this call on both sides, even where the bytes
                // left early (a socket releases a lend once they are on the wire).
                let (link, me) = (self.ctx.link(), self.ctx.rank);
                self.lends.retain(|l| !link.is_delivered(me, l.peer, l.ticket));
                if let Some(l) = self.lends.first() {
                    return Ok(Some(Blocked::Delivered(l.peer, l.ticket)));
                }
                debug_event!(rank = self.ctx.rank, seq = self.ctx.seq, steps = steps.len(), "plan done");
                self.done = true;
                return Ok(None);
            }
            trace_event!(rank = self.ctx.rank, index = self.pos, step = ?steps[self.pos], "step");
            let step = steps[self.pos];
            let fused = fusable_run(&steps[self.pos..]);
            let outcome = if fused > 1 {
                let run: Vec<Step> = steps[self.pos..self.pos + fused].to_vec();
                match self.recv_reduce_many(&run, size)? {
                    Progress::Unfused => self.step(step, size)?,
                    other => other,
                }
            } else {
                self.step(step, size)?
            };
            match outcome {
                Progress::Advanced => self.pos += 1,
                Progress::Fused => self.pos += fused,
                Progress::Blocked(b) => return Ok(Some(b)),
                Progress::Unfused => {
                    return Err(CollectiveError::protocol("a single step reported itself unfusable"));
                }
            }
        }
    }

    /// One step; `Advanced` once it is enqueued.
    fn step(&mut self, step: Step, size: usize) -> Result<Progress> {
        match step {
            Step::Send { peer, src } => self.send(peer, src, size),
            Step::Recv { peer, dst } => self.recv(peer, dst, None, size),
            Step::RecvReduce { peer, acc, dst } => self.recv(peer, dst, Some(acc), size),
            Step::Copy { src, dst } => {
                let (s, d) = (self.bufs.resolve(src, size)?, self.bufs.resolve(dst, size)?);
                if (s.id, s.range.off) == (d.id, d.range.off) || d.range.len == 0 {
                    return Ok(Progress::Advanced);
                }
                if let Some(b) = self.hazard(d.key()) {
                    return Ok(Progress::Blocked(b));
                }
                let event = self.dev.copy(&s.range, &d.range)?;
                self.inflight.push(InFlight::writing(event, d.key(), Msgs::new()));
                Ok(Progress::Advanced)
            }
            Step::Exchange => self.exchange(size),
            Step::Average { span } => {
                let d = self.bufs.resolve(span, size)?;
                if let Some(b) = self.hazard(d.key()) {
                    return Ok(Progress::Blocked(b));
                }
                let n = self.ctx.world as u64;
                let event = self.dev.scale(&d.range, &d.range, self.ctx.dtype, Scale::DivBy(n))?;
                self.inflight.push(InFlight::writing(event, d.key(), Msgs::new()));
                Ok(Progress::Advanced)
            }
            // After the division, once its write is done.
            Step::Rescale { span, k } => {
                let d = self.bufs.resolve(span, size)?;
                if self.being_written(d.key()) {
                    return Ok(Progress::Blocked(Blocked::Device));
                }
                if let Some(b) = self.hazard(d.key()) {
                    return Ok(Progress::Blocked(b));
                }
                let by = Scale::MulBy(2f64.powi(k as i32));
                let event = self.dev.scale(&d.range, &d.range, self.ctx.dtype, by)?;
                self.inflight.push(InFlight::writing(event, d.key(), Msgs::new()));
                Ok(Progress::Advanced)
            }
        }
    }

    /// Retires completed device work: releases the messages it read.
    fn retire(&mut self) -> Result<()> {
        let mut i = 0;
        while i < self.inflight.len() {
            if self.dev.poll(&self.inflight[i].event)? {
                let f = self.inflight.swap_remove(i);
                for m in &f.msgs {
                    self.ctx.link().release(self.ctx.rank, m);
                }
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Whether an unreleased lend overlaps `key`.
    fn lent(&self, key: (usize, usize, usize)) -> bool {
        let (link, me) = (self.ctx.link(), self.ctx.rank);
        self.lends.iter().any(|l| l.range.is_some_and(|r| overlaps(r, key)) && !link.is_released(me, l.peer, l.ticket))
    }

    /// What writing `key` waits for: an unreleased lend that overlaps it, if any.
    fn hazard(&mut self, key: (usize, usize, usize)) -> Option<Blocked> {
        let (link, me) = (self.ctx.link(), self.ctx.rank);
        self.lends.retain(|l| !link.is_delivered(me, l.peer, l.ticket));
        self.lends
            .iter()
            .find(|l| l.range.is_some_and(|r| overlaps(r, key)) && !link.is_released(me, l.peer, l.ticket))
            .map(|l| Blocked::Release(l.peer, l.ticket))
    }

    /// After a failure: poisons the link (peers stop at once), waits for this rank's device
    /// work, puts back the messages it was reading, and takes back every message still lent,
    /// waiting (with a grace period, as the op's own deadline may be what failed) for peers
    /// reading one in place. Returns the error to report, about the call this rank made.
    pub(crate) fn fail(&mut self, err: CollectiveError) -> CollectiveError {
        fail(self.ctx.view(), &err);
        let grace = self.ctx.deadline.max(crate::config::deadline_after(RECLAIM_GRACE));
        let (me, link) = (self.ctx.rank, self.ctx.link().clone());
        if let Some(s) = self.staged_send.take() {
            let _ = self.dev.wait(&s.event, Some(grace));
        }
        for f in self.inflight.drain(..) {
            let _ = self.dev.wait(&f.event, Some(grace));
            for m in &f.msgs {
                link.close(me, m);
            }
        }
        self.parked = None;
        let mut peers: Vec<Rank> = self.lends.iter().map(|l| l.peer).collect();
        peers.sort_unstable();
        peers.dedup();
        for peer in peers {
            if !link.reclaim(me, peer, grace) {
                debug_event!(rank = me, peer, "a peer kept reading a lent range past the grace period");
            }
        }
        self.lends.clear();
        self.done = true;
        // The poison may name an earlier op (where the ranks diverged); the caller's error is
        // about the call it made.
        if self.ctx.p2p { err } else { err.at_seq(self.ctx.seq) }
    }
}

/// What one attempt at a step achieved.
enum Progress {
    /// The step is enqueued.
    Advanced,
    /// A fused run of receive-reduces is enqueued.
    Fused,
    /// The run cannot be fused now; take its steps one at a time.
    Unfused,
    /// Nothing happened; this is what it waits for.
    Blocked(Blocked),
}
