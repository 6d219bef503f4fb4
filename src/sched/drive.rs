//! Driving ops to completion: [`drive`] runs one op on the calling thread, [`drive_all`]
//! several ranks' ops from one thread (group calls), polling each until all are done. Every
//! wait has the op's deadline; a header or flight-recorder entry that disagrees is a
//! `Mismatch`; a timeout names the root cause (the rank furthest behind, or the ranks waiting
//! on each other), not merely the peer this rank happened to wait on; a poisoned link is read
//! through [`after_failure`](super::after_failure); waits that last warn about who is missing.

use std::time::{Duration, Instant};

use super::{Blocked, OpRun};
use crate::comm::watch::WaitWatch;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::Header;
use crate::types::Rank;

/// How long a thread waiting on device work sleeps between looks when it must also watch
/// other ranks (group calls) and the device does not wake it ([`Device::wakes`]); a single
/// op waits on the device's own event instead.
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
        // The deadline bounds the whole op, not each wait: an op that keeps moving in small
        // steps (a tiny chunk size) ends at it too (as `take_turn` does).
        if Instant::now() >= run.ctx.deadline {
            let e = run.timeout(blocked);
            return Err(run.fail(e));
        }
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

    /// The `Timeout` of an op that reached its deadline while still moving, step after step.
    #[cold]
    pub(super) fn overran(&self) -> CollectiveError {
        let c = &self.ctx;
        CollectiveError::new(
            crate::error::ErrorKind::Timeout,
            format!(
                "reached the op's deadline ({:?}) still moving: {} of its {} steps done, chunks of {} bytes",
                c.shared.config.timeout(),
                self.pos,
                self.plan.steps.len(),
                c.shared.config.chunk_bytes()
            ),
        )
        .with_hint(
            "a larger chunk size (CommConfig::with_chunk_bytes, RUCCL_CHUNK_BYTES) makes fewer, larger steps; or raise \
             the timeout (CommConfig::with_timeout, RUCCL_TIMEOUT) for ops this large",
        )
    }

    /// Whether stepping the op again may move it (cheap; no side effects).
    pub(crate) fn is_ready(&self, turn: &Turn) -> bool {
        turn.blocked.is_none_or(|b| self.ready(b)) || self.ctx.link().is_poisoned(self.ctx.rank)
    }

    /// Whether a thread waiting for this op must look again in slices: the op waits on its
    /// device, which rings no doorbell ([`Device::wakes`] says no). On a device that wakes,
    /// the doorbell's waker is armed on the awaited work instead ([`Device::poll_waking`]).
    pub(crate) fn needs_slices(&self, turn: &Turn) -> bool {
        turn.blocked == Some(Blocked::Device) && !self.wake_on_device()
    }

    /// Arms the doorbell's waker on the device work the op waits for; false when the device
    /// cannot wake it.
    fn wake_on_device(&self) -> bool {
        if !self.dev.wakes() {
            return false;
        }
        let first = self.staged_send.as_ref().map(|s| &s.event).or(self.inflight.first().map(|f| &f.event));
        // Done or failed already: the look that follows sees it.
        first.is_none_or(|ev| self.dev.poll_waking(ev, crate::transport::bell_waker()).is_ok())
    }

    /// Whether this send or receive has sent or opened its message: the next call on its
    /// lane may then start (its message follows this one in the peer's mailbox, or it opens
    /// the one after).
    pub(crate) fn moved_message(&self) -> bool {
        let moved = |n: &Vec<u32>, p: Rank| n.get(p).is_some_and(|&k| k > 0);
        self.ctx.fp.desc.peer.is_some_and(|p| moved(&self.sent, p) || moved(&self.received, p))
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

/// For each run of `order`, the runs it waits for before it starts: every run of its rank's
/// previous stage (to be done), and the previous run on its lane (`true`: to have sent or
/// opened its message). Linear in the runs, but for
/// stages of many runs that follow each other (then their product).
fn dependencies(order: &[Place]) -> Vec<smallvec::SmallVec<[(usize, bool); 1]>> {
    use std::collections::HashMap;
    // Per rank: its current stage, the runs of that stage and those of the stage before.
    let mut ranks: HashMap<usize, (u32, Vec<usize>, Vec<usize>)> = HashMap::new();
    let mut lanes: HashMap<(usize, (bool, Rank)), usize> = HashMap::new();
    let mut deps = Vec::with_capacity(order.len());
    for (i, p) in order.iter().enumerate() {
        let (stage, now, before) = ranks.entry(p.key).or_insert_with(|| (p.stage, Vec::new(), Vec::new()));
        if *stage != p.stage {
            *stage = p.stage;
            *before = std::mem::take(now);
        }
        now.push(i);
        let mut d: smallvec::SmallVec<[(usize, bool); 1]> = before.iter().map(|&j| (j, false)).collect();
        if let Some(lane) = p.lane
            && let Some(j) = lanes.insert((p.key, lane), i)
            && order[j].stage == p.stage
        {
            d.push((j, true));
        }
        deps.push(d);
    }
    deps
}

/// A run's place in its rank's order, for [`drive_all`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// Which rank (a communicator's address).
    pub key: usize,
    /// Its stage among the rank's runs.
    pub stage: u32,
    /// A send's or receive's lane: (whether it sends, the peer).
    pub lane: Option<(bool, Rank)>,
    /// Whether a memory clash with the sends and receives before it put it in a stage of
    /// its own (for the notes of a `Timeout`).
    pub clashed: bool,
}

/// Runs every op in `runs` to completion from this thread, polling each in turn and sleeping
/// only when none can move. Ranks of one communicator waiting on each other (a ring of sends
/// and receives) never deadlock: each poll moves whatever can move.
///
/// `order[i]` is run `i`'s [`Place`] in its rank's order. A run starts once every earlier
/// run of its rank in an earlier stage is done, so that one rank's ops run one after the other
/// (a rank completes its ops in issue order, and its messages are matched to its ops by
/// number), while the runs of one stage (a batch of sends and receives) move together —
/// except that a run on a lane (sends to one peer, receives from one peer) starts only once
/// the one before it on the lane has sent or opened its message, so that the messages keep
/// their order and a later receive never opens the message an earlier one waits for.
pub(crate) fn drive_all<D: Device>(runs: &mut [&mut OpRun<D>], order: &[Place]) -> Vec<Result<()>> {
    let mut results: Vec<Option<Result<()>>> = runs.iter().map(|_| None).collect();
    let mut turns: Vec<Turn> = runs.iter().map(|_| Turn::default()).collect();
    // What each run waits for before it starts: the runs of its rank's previous stage, and
    // the run before it on its lane (each of those waits for what came before it in turn).
    // Usually every run is in its rank's first stage, each on a lane of its own: then all
    // start at once.
    let deps = dependencies(order);
    let mut started: Vec<bool> = deps.iter().map(|d| d.is_empty()).collect();
    loop {
        let (mut blocked, mut finished, mut pending) = (false, false, false);
        // In order, so that a run whose dependencies move in this pass starts in it too (a
        // lane of many messages moves them all in one pass, not one per pass).
        for i in 0..runs.len() {
            if results[i].is_some() {
                continue;
            }
            if !started[i] {
                // A later op of a rank whose earlier op failed does not start (failures are
                // sticky): it fails as a call issued after the failure would.
                let failed = deps[i].iter().find_map(|&(j, _)| match &results[j] {
                    Some(Err(e)) => Some(e.clone()),
                    _ => None,
                });
                if let Some(first) = failed {
                    runs[i].start_at(Instant::now());
                    results[i] = Some(Err(CollectiveError::failed_earlier(&first)));
                    finished = true;
                    continue;
                }
                // A lane's earlier run need only have sent or opened its message.
                started[i] = deps[i].iter().all(|&(j, lane)| results[j].is_some() || (lane && runs[j].moved_message()));
                if !started[i] {
                    pending = true;
                    continue;
                }
            }
            match runs[i].take_turn(&mut turns[i]) {
                Advance::Done(r) => (results[i], finished) = (Some(r), true),
                Advance::Blocked => blocked = true,
            }
        }
        if !blocked && !pending {
            return results.into_iter().map(|r| r.unwrap_or(Ok(()))).collect();
        }
        // A run that finished may let a later one of its rank start: look again at once.
        if finished || !blocked {
            continue;
        }
        let blocked: Vec<(usize, Blocked)> =
            (0..runs.len()).filter(|&i| results[i].is_none()).filter_map(|i| Some((i, turns[i].blocked?))).collect();
        let now = Instant::now();
        let deadline = blocked.iter().map(|&(i, _)| runs[i].deadline()).min().unwrap_or(now);
        // Device work that rings no doorbell is looked at again in short slices.
        let slices = blocked.iter().any(|&(i, b)| b == Blocked::Device && !runs[i].wake_on_device());
        let wake = if slices { deadline.min(now + DEVICE_SLICE) } else { deadline };
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
        self.ctx.view().poisoned()
    }

    /// Whether what `b` waits for has happened (cheap; no side effects).
    fn ready(&self, b: Blocked) -> bool {
        let (link, me) = (self.ctx.link(), self.ctx.rank);
        match b {
            Blocked::Message(p) => link.has_message(me, p),
            Blocked::Release(p, t) => link.is_released(me, p, t),
            Blocked::Delivered(p, t) => link.is_delivered(me, p, t),
            Blocked::Device => self.device_event_done(),
            Blocked::Part(_) | Blocked::Reading(..) => super::exchange::slot_ready(link, self.ctx.seq, b),
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
            Blocked::Release(p, t) => (Some(p), format!("rank {p} to read message #{t} sent to it")),
            Blocked::Delivered(p, t) => (Some(p), format!("rank {p} to take message #{t} sent to it")),
            Blocked::Device => (None, format!("its device ({}) to finish queued work", self.dev.describe())),
            Blocked::Part(_) | Blocked::Reading(..) => super::exchange::describe(b),
        }
    }

    /// The checks a long wait runs each time it goes to sleep ([`View::slow`](super::View::slow)).
    fn slow(&self, b: Blocked, watch: &mut WaitWatch) -> Result<()> {
        self.ctx.view().slow(b, self.describe(b), &|| self.ready(b), watch, &self.noted_wait)
    }

    /// Clears "waiting for" in the flight recorder once the op no longer waits.
    pub(super) fn settle(&mut self) {
        self.ctx.view().settle(&self.noted_wait);
    }

    /// The `Timeout` error for a wait on `b` that reached the deadline.
    fn timeout(&self, b: Blocked) -> CollectiveError {
        self.ctx.view().timeout(self.describe(b))
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
        self.ctx.view().outcome(outcome, peer, || self.describe(b))
    }
}
