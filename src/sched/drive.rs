//! Driving ops to completion: [`drive`] runs one op on the calling thread, [`drive_all`]
//! several ranks' ops from one thread (group calls), polling each until all are done. Every
//! wait has the op's deadline; a header or flight-recorder entry that disagrees is a
//! `Mismatch`; a timeout names the root cause (the rank furthest behind, or the ranks waiting
//! on each other), not merely the peer this rank happened to wait on; a poisoned link is read
//! through [`after_failure`]; waits that last warn about who is missing.

use std::time::{Duration, Instant};

use super::{Blocked, OpRun, after_failure};
use crate::comm::watch::{WaitWatch, warn_op};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::{Header, WaitOutcome};
use crate::types::Rank;

/// How long a thread waiting on device work sleeps between looks when it must also watch
/// other ranks (group calls); a single op waits on the device's own event instead.
const DEVICE_SLICE: Duration = Duration::from_micros(200);

/// Runs `run` to completion on this thread.
pub(crate) fn drive<D: Device>(run: &mut OpRun<D>) -> Result<()> {
    let mut watch: Option<WaitWatch> = None;
    loop {
        let blocked = match run.poll() {
            Ok(None) => {
                run.settle();
                return Ok(());
            }
            Ok(Some(b)) => b,
            Err(e) => return Err(run.fail(e)),
        };
        if let Err(e) = run.block_on(blocked, &mut watch) {
            return Err(run.fail(e));
        }
    }
}

/// What one op driven alongside others (by a group call or the shared progress thread)
/// waits for now, and the bookkeeping of its long waits.
#[derive(Debug, Default)]
pub(crate) struct Turn {
    blocked: Option<Blocked>,
    watch: Option<WaitWatch>,
}

/// Where [`OpRun::take_turn`] left an op.
pub(crate) enum Advance {
    /// Finished: its result (a failure has already been handled by [`OpRun::fail`]).
    Done(Result<()>),
    /// Waiting; [`OpRun::is_ready`] says when to step it again.
    Blocked,
}

impl<D: Device> OpRun<D> {
    /// Moves the op as far as it goes without blocking. An op past its deadline, or on a
    /// failed link, ends here with its error.
    pub(crate) fn take_turn(&mut self, turn: &mut Turn) -> Advance {
        match self.poll() {
            Ok(None) => {
                self.settle();
                turn.blocked = None;
                Advance::Done(Ok(()))
            }
            Err(e) => Advance::Done(Err(self.fail(e))),
            Ok(Some(b)) => {
                turn.blocked = Some(b);
                if let Some(e) = self.poisoned() {
                    return Advance::Done(Err(self.fail(e)));
                }
                if Instant::now() >= self.ctx.deadline {
                    let e = self.timeout(b);
                    return Advance::Done(Err(self.fail(e)));
                }
                Advance::Blocked
            }
        }
    }

    /// Whether stepping the op again may move it (cheap; no side effects).
    pub(crate) fn is_ready(&self, turn: &Turn) -> bool {
        turn.blocked.is_none_or(|b| self.ready(b)) || self.ctx.link().is_poisoned(self.ctx.rank)
    }

    /// Whether the op waits on its device (which rings no doorbell).
    pub(crate) fn on_device(turn: &Turn) -> bool {
        turn.blocked == Some(Blocked::Device)
    }

    /// The op's deadline.
    pub(crate) fn deadline(&self) -> Instant {
        self.ctx.deadline
    }

    /// The checks a long wait runs before it sleeps (see `slow`); an error ends the op,
    /// already failed.
    pub(crate) fn check_waiting(&mut self, turn: &mut Turn) -> Option<CollectiveError> {
        let b = turn.blocked?;
        let watch =
            turn.watch.get_or_insert_with(|| WaitWatch::new(Instant::now(), self.ctx.shared.board.warn_after()));
        let e = self.slow(b, watch).err()?;
        Some(self.fail(e))
    }
}

/// Runs every op in `runs` to completion from this thread, polling each in turn and sleeping
/// only when none can move. Ranks of one communicator waiting on each other (a ring of sends
/// and receives) never deadlock: each poll moves whatever can move.
pub(crate) fn drive_all<D: Device>(runs: &mut [&mut OpRun<D>]) -> Vec<Result<()>> {
    let mut results: Vec<Option<Result<()>>> = runs.iter().map(|_| None).collect();
    let mut turns: Vec<Turn> = runs.iter().map(|_| Turn::default()).collect();
    loop {
        let mut blocked = false;
        for (i, run) in runs.iter_mut().enumerate() {
            if results[i].is_none() {
                match run.take_turn(&mut turns[i]) {
                    Advance::Done(r) => results[i] = Some(r),
                    Advance::Blocked => blocked = true,
                }
            }
        }
        if !blocked {
            return results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect();
        }
        let blocked: Vec<(usize, Blocked)> =
            (0..runs.len()).filter(|&i| results[i].is_none()).filter_map(|i| Some((i, turns[i].blocked?))).collect();
        let now = Instant::now();
        let deadline = blocked.iter().map(|&(i, _)| runs[i].deadline()).min().unwrap_or(now);
        // Device work rings no doorbell: then sleep in short slices.
        let on_device = blocked.iter().any(|&(_, b)| b == Blocked::Device);
        let wake = if on_device { deadline.min(now + DEVICE_SLICE) } else { deadline };
        let mut failed: Option<(usize, CollectiveError)> = None;
        {
            let runs: &[&mut OpRun<D>] = runs;
            let turns = &mut turns;
            let failed = &mut failed;
            let mut ready =
                || blocked.iter().any(|&(i, b)| runs[i].ready(b) || runs[i].ctx.link().is_poisoned(runs[i].ctx.rank));
            let mut slow = || -> Result<()> {
                for &(i, b) in &blocked {
                    let watch = turns[i]
                        .watch
                        .get_or_insert_with(|| WaitWatch::new(now, runs[i].ctx.shared.board.warn_after()));
                    if let Err(e) = runs[i].slow(b, watch) {
                        *failed = Some((i, e.clone()));
                        return Err(e);
                    }
                }
                Ok(())
            };
            // Timeouts and failed links are seen by the next `take_turn`.
            let _ = crate::transport::wait_any(wake, &mut ready, &|| None, &mut slow);
        }
        if let Some((i, e)) = failed {
            results[i] = Some(Err(runs[i].fail(e)));
        }
    }
}

impl<D: Device> OpRun<D> {
    pub(super) fn check_header(&self, peer: Rank, h: &Header) -> Result<()> {
        let c = &self.ctx;
        if h.p2p != c.p2p || h.seq != c.seq || !h.fp.compatible(&c.fp) {
            let mut e = c.mismatch(peer, &super::called(&h.fp.desc.to_string(), h.p2p, h.seq));
            if !h.p2p && !c.p2p && h.seq != c.seq {
                // The ranks diverged at the earlier of the two ops: that is the op the poison
                // names, so that ranks still in it report this mismatch rather than `Aborted`.
                let first = h.seq.min(c.seq);
                if let Some(then) = c.shared.board.collective_at(c.rank, first).filter(|_| first < c.seq) {
                    e = CollectiveError::new(
                        ErrorKind::Mismatch,
                        format!("{} (this rank ran op #{first} as {})", e.message(), then.desc),
                    )
                    .with_peer(peer);
                }
                e = e.with_seq(first);
            }
            return Err(e);
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

    /// The error this rank reports for a poisoned link, if it is poisoned.
    pub(super) fn poisoned(&self) -> Option<CollectiveError> {
        let c = &self.ctx;
        let now = if c.p2p { super::Now::P2p } else { super::Now::Collective(c.seq) };
        c.link().poisoned(c.rank).map(|e| after_failure(&e, c.rank, now))
    }

    /// Whether what `b` waits for has happened (cheap; no side effects).
    fn ready(&self, b: Blocked) -> bool {
        let (link, me) = (self.ctx.link(), self.ctx.rank);
        match b {
            Blocked::Message(p) => link.has_message(me, p),
            Blocked::Release(p, t) => link.is_released(me, p, t),
            Blocked::Delivered(p, t) => link.is_delivered(me, p, t),
            Blocked::Device => self.device_event_done(),
            Blocked::Part(p) => link.slots().is_some_and(|s| s.arrived(p, self.ctx.seq)),
            Blocked::Reading(p, held) => link.slots().is_some_and(|s| s.finished(p) >= held),
        }
    }

    fn device_event_done(&self) -> bool {
        let first = self.staged_send.as_ref().map(|s| &s.event).or(self.inflight.first().map(|f| &f.event));
        first.is_none_or(|ev| self.dev.poll(ev).unwrap_or(true))
    }

    /// The peer `b` waits on, if any (cheap: no formatting, unlike [`describe`](Self::describe)).
    fn awaited(b: Blocked) -> Option<Rank> {
        match b {
            Blocked::Message(p)
            | Blocked::Release(p, _)
            | Blocked::Delivered(p, _)
            | Blocked::Part(p)
            | Blocked::Reading(p, _) => Some(p),
            Blocked::Device => None,
        }
    }

    /// "what this rank waits for", for the flight recorder and error messages.
    fn describe(&self, b: Blocked) -> (Option<Rank>, String) {
        match b {
            Blocked::Message(p) => (Some(p), format!("rank {p} to send message {} of this op", self.received[p])),
            Blocked::Release(p, t) => (Some(p), format!("rank {p} to read message #{t} this rank sent it")),
            Blocked::Delivered(p, t) => (Some(p), format!("rank {p} to take message #{t} this rank sent it")),
            Blocked::Device => (None, format!("its device ({}) to finish queued work", self.dev.describe())),
            Blocked::Part(p) => (Some(p), format!("rank {p} to publish its part of this op")),
            Blocked::Reading(p, held) => {
                (Some(p), format!("rank {p} to finish reading this rank's part of op #{}", held.saturating_sub(1)))
            }
        }
    }

    /// The checks a long wait runs each time it goes to sleep: the flight recorder says what
    /// this rank waits for, a warning names who is missing once the wait lasts, and a peer
    /// that is in this op with a different call is a `Mismatch` now rather than at the
    /// deadline.
    fn slow(&self, b: Blocked, watch: &mut WaitWatch) -> Result<()> {
        let c = &self.ctx;
        let (peer, what) = self.describe(b);
        let now = Instant::now();
        if let Some(peer) = peer
            && watch.tick(now)
        {
            warn_op(c, peer, &what, watch.waited(now));
        }
        // A failure elsewhere outranks a departure: the failed rank poisons the link before
        // it leaves, and its error is the one to report.
        // Departure is read first: once it shows, a poison set before it shows too.
        let gone = peer.filter(|&p| c.link().is_departed(c.rank, p));
        if let Some(e) = self.poisoned() {
            return Err(e);
        }
        if let Some(p) = gone
            && !self.ready(b)
        {
            return Err(CollectiveError::new(
                ErrorKind::PeerLost,
                format!("rank {p} {} while this rank waited for {what}", c.link().departure(c.rank, p)),
            )
            .with_peer(p));
        }
        c.shared.board.set_waiting(c.rank, Some(what));
        self.noted_wait.set(true);
        if let Some(peer) = peer
            && !c.p2p
            && let Some(theirs) = c.shared.board.collective_at(peer, c.seq)
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
        // An exchange reads no messages, so a peer that sends to or receives from this rank
        // instead of taking part shows only in its flight recorder (a send this rank already
        // received, which the peer is still finishing, is no mismatch). Nor is a peer that
        // published its part, finished this op and went on to a send or receive since this
        // rank last looked: its part is read after its flight record, so it shows here.
        if let Blocked::Part(p) = b
            && let Some(theirs) = c.shared.board.p2p_unmatched_with(p, c.rank)
            && !self.ready(b)
        {
            return Err(CollectiveError::new(
                ErrorKind::Mismatch,
                format!("rank {p} called {theirs}, but rank {} called {} as op #{}", c.rank, c.fp.desc, c.seq),
            )
            .with_peer(p));
        }
        Ok(())
    }

    /// Clears "waiting for" in the flight recorder once the op no longer waits.
    pub(super) fn settle(&mut self) {
        if self.noted_wait.take() {
            self.ctx.shared.board.set_waiting(self.ctx.rank, None);
        }
    }

    /// The `Timeout` error for a wait on `b` that reached the deadline.
    fn timeout(&self, b: Blocked) -> CollectiveError {
        let c = &self.ctx;
        let (peer, what) = self.describe(b);
        let e = match peer {
            Some(peer) => {
                let seq = (!c.p2p).then_some(c.seq);
                let (culprit, why) = c.shared.board.blame(c.rank, peer, seq);
                CollectiveError::new(
                    ErrorKind::Timeout,
                    format!("gave up at the op's deadline waiting for {what}: {why}"),
                )
                .with_peer(culprit)
            }
            None => {
                CollectiveError::new(ErrorKind::Timeout, format!("gave up at the op's deadline waiting for {what}"))
            }
        };
        e.with_report(c.shared.board.report(&c.shared.name))
    }

    /// Blocks this thread until what `b` waits for may have happened, the deadline passes, or
    /// the link fails.
    fn block_on(&mut self, b: Blocked, watch: &mut Option<WaitWatch>) -> Result<()> {
        let deadline = self.ctx.deadline;
        let Some(peer) = Self::awaited(b) else {
            let ev = self.staged_send.as_ref().map(|s| &s.event).or(self.inflight.first().map(|f| &f.event));
            return match ev {
                Some(ev) => self.dev.wait(ev, Some(deadline)).map_err(|e| match e.kind() {
                    ErrorKind::Timeout => self.timeout(b),
                    _ => e,
                }),
                None => Ok(()),
            };
        };
        let watch = watch.get_or_insert_with(|| WaitWatch::new(Instant::now(), self.ctx.shared.board.warn_after()));
        let outcome = {
            let this = &*self;
            this.ctx.link().wait(this.ctx.rank, peer, deadline, &mut || this.ready(b), &mut || this.slow(b, watch))?
        };
        match outcome {
            WaitOutcome::Ready => Ok(()),
            WaitOutcome::TimedOut => Err(self.timeout(b)),
            WaitOutcome::PeerGone if self.poisoned().is_none() => Err(CollectiveError::new(
                ErrorKind::PeerLost,
                format!(
                    "rank {peer} {} while this rank waited for {}",
                    self.ctx.link().departure(self.ctx.rank, peer),
                    self.describe(b).1
                ),
            )
            .with_peer(peer)),
            WaitOutcome::PeerGone | WaitOutcome::Poisoned => Err(self
                .poisoned()
                .unwrap_or_else(|| CollectiveError::new(ErrorKind::Aborted, "the communicator was aborted"))),
        }
    }
}
