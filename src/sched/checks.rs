//! The checks a waiting op runs, over its borrowed [`View`]: the poisoned link read through
//! [`after_failure`], the slow-path checks each time a wait goes to sleep (the flight
//! recorder's "waiting for", a warning once the wait lasts, a departed peer, a peer whose
//! flight recorder shows another call), the `Timeout` that names the root cause, and what a
//! wait's outcome means. An [`OpRun`](super::OpRun) and an exchanged op driven without one
//! (`exchange::run`) share them.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::{Blocked, Now, View, after_failure};
use crate::comm::flight::heard::Heard;
use crate::comm::watch::{WaitWatch, warn_op};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpKind;
use crate::transport::WaitOutcome;
use crate::transport::tcp::FLIGHT_WAIT;
use crate::types::Rank;

/// When an op's waits give up: a time already worked out, or a timeout counted from the op's
/// first wait (most exchanged ops never wait, and so read no clock for it).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Deadline {
    /// At this time.
    At(Instant),
    /// This long after the op first waits: an exchange run at once reads no clock unless it
    /// waits ([`exchange::run`](super::exchange::run) asks once, when it first does).
    OnWait(Duration),
}

/// What to do when an op timed out waiting on its own device, every rank having reached it.
const DEVICE_SLOW: &str = "this rank's device did not finish the op's work in time: look for a hung or overloaded \
     GPU (other processes on it, a driver error in the system log), or raise CommConfig::timeout (a kernel's first \
     launch compiles it); this communicator is now aborted, create a new one";

/// What to do when a point-to-point call timed out waiting for its peer.
const P2P_SLOW: &str = "the rank named above did not match this call in time: look for a crash, a hang, or a \
     missing or different matching call there. Calls that wait for each other in a cycle never finish: blocking \
     sends issued before their receives on every rank (make the sends non-blocking with send_async, torch's isend; \
     put the calls in one Group, batch_isend_irecv; or let one side receive first), or a receive held back in its \
     rank's queue (the message says so, if this rank's is); or raise CommConfig::timeout. This communicator is now \
     aborted, create a new one";

/// How long a wait lasts before a crossing with a peer of another process is judged
/// ([`View::crossed_with_remote`]): a group may post a send and then run a collective, so a
/// message or a part can show a moment before the rest of the peer's group does.
const CROSSED_AFTER: Duration = Duration::from_millis(100);

/// What to do when a point-to-point call and a collective of two ranks wait for each other.
const CROSSED: &str = "every rank must issue its collectives and its matching sends and receives in the same \
     order: move the send or receive before or after the collective on both ranks (a collective and a point-to-point \
     call of one rank do not overlap, even issued asynchronously); this communicator is now aborted, create a new one";

impl Deadline {
    /// The time, an [`OnWait`](Deadline::OnWait) counted from `now` (a time the caller read:
    /// one clock read for the deadline and the flight recorder).
    pub(crate) fn at_from(self, now: Instant) -> Instant {
        match self {
            Deadline::At(t) => t,
            Deadline::OnWait(timeout) => crate::config::deadline_from(now, timeout),
        }
    }
}

impl View<'_> {
    /// The error this rank reports for a poisoned link, if it is poisoned.
    pub(crate) fn poisoned(&self) -> Option<CollectiveError> {
        let now = if self.p2p { Now::P2p } else { Now::Collective(self.seq) };
        let e = after_failure(&self.link().poisoned(self.rank)?, self.rank, now);
        // A send or receive cut short (by an `abort()` here, say) still names its peer.
        Some(match self.fp.desc.peer {
            Some(p) if self.p2p && e.context().peer.is_none() => e.with_peer(p),
            _ => e,
        })
    }

    /// The checks a long wait on `b` (for `peer`, described as `what`) runs each time it goes
    /// to sleep: the flight recorder says what this rank waits for (`noted` remembers that it
    /// does), a warning names who is missing once the wait lasts, and a peer that is in this
    /// op with a different call is a `Mismatch` now rather than at the deadline. `ready` says
    /// whether what `b` waits for has happened.
    pub(crate) fn slow(
        &self,
        b: Blocked,
        (peer, what): (Option<Rank>, String),
        ready: &dyn Fn() -> bool,
        watch: &mut WaitWatch,
        noted: &Cell<bool>,
    ) -> Result<()> {
        let c = self;
        let now = Instant::now();
        if let Some(peer) = peer
            && watch.tick(now)
        {
            warn_op(*c, peer, &what, watch.waited(now));
        }
        // A failure elsewhere outranks a departure: the failed rank poisons the link before
        // it leaves, and its error is the one to report.
        // Departure is read first: once it shows, a poison set before it shows too.
        let gone = peer.filter(|&p| c.link().is_departed(c.rank, p));
        if let Some(e) = self.poisoned() {
            return Err(e);
        }
        if let Some(peer) = peer
            && !c.p2p
            && let Some(theirs) = c.shared.board.collective_at(peer, c.seq)
            && !theirs.compatible(c.fp)
        {
            return Err(self.called_other(peer, &theirs.desc));
        }
        // After the look at what the peers called: a peer that ran another call (a broadcast
        // from another root, which needs nothing from this rank), returned `Ok` and left is
        // the mismatch, not a lost peer — nor is one that left after a third rank's other
        // call cut the plan short.
        if let Some(p) = gone
            && !ready()
        {
            if let Some(e) = self.mismatch_on_board() {
                return Err(e);
            }
            return Err(CollectiveError::new(
                ErrorKind::PeerLost,
                format!("rank {p} {} while this rank waited for {what}", c.link().departure(c.rank, p)),
            )
            .with_peer(p));
        }
        c.shared.board.set_waiting(c.rank, Some(what));
        noted.set(true);
        // Ranks of other processes, whose calls the flight recorder does not show:
        // - one that runs this op as an exchange where this rank runs another call with
        //   messages (one rank's part fits a slot, the other's does not) shows in its slot: a
        //   part under this op's number with another call's fingerprint;
        // - one that sent this rank a message of another call under this op's number, though
        //   it is not the peer this rank waits for: the plans of two different calls need not
        //   make the first message any rank waits for be a mismatched one (3 ranks: two in a
        //   ring all_reduce, one in a broadcast, each waiting for a peer that sends it
        //   nothing). Only this op's number: a peer may be past this op.
        // (Between threads the board above shows both, and looking at the slots would make an
        // in-process link's slots, which a communicator without exchanged ops never needs.)
        if !c.p2p {
            let (link, words) = (c.link(), c.fp.words());
            for q in c.shared.board.remote_ranks() {
                let in_slot = link.slots().filter(|s| s.disagrees(q, c.seq, &words)).map(|s| {
                    crate::op::Fingerprint::desc_of_words(&s.fingerprint(q, c.seq))
                        .map_or_else(|| "another op".to_string(), |d| d.to_string())
                });
                let in_inbox = || {
                    link.peek_header(c.rank, q)
                        .filter(|h| !h.p2p && h.seq == c.seq && !h.fp.compatible(c.fp))
                        .map(|h| h.fp.desc.to_string())
                };
                if let Some(theirs) = in_slot.or_else(in_inbox) {
                    return Err(self.called_other(q, &theirs));
                }
            }
        }
        // An exchange reads no messages, so a peer that sends to or receives from this rank
        // instead of taking part shows only in its flight recorder (a send this rank already
        // received, which the peer is still finishing, is no mismatch). Nor is a peer that
        // published its part, finished this op and went on to a send or receive since this
        // rank last looked: its part is read after its flight record, so it shows here.
        if let Blocked::Part(p) = b
            && let Some(theirs) = c.shared.board.p2p_unmatched_with(p, c.rank)
            && !ready()
        {
            return Err(CollectiveError::new(
                ErrorKind::Mismatch,
                format!("rank {p} called {theirs}, but rank {} called {} as op #{}", c.rank, c.fp.desc, c.seq),
            )
            .with_peer(p));
        }
        if let Some(p) = peer.filter(|&p| c.shared.board.is_remote(p))
            && watch.waited(now) >= CROSSED_AFTER
            && let Some(e) = self.crossed_with_remote(b, p)
            && !ready()
        {
            return Err(e);
        }
        Ok(())
    }

    /// A peer of another process and this rank in a point-to-point call and an exchanged
    /// collective with each other, which neither can finish (the flight recorder shows such
    /// a crossing between threads; across processes, the messages and slots do):
    /// - this rank waits for `p`'s part of an exchange, and `p` sent it a message this rank has
    ///   not issued the receive of (the send waits for it to be taken);
    /// - this rank waits for `p` in a send or receive, and `p` is inside this rank's next
    ///   collective (published, not finished) waiting for this rank's part.
    fn crossed_with_remote(&self, b: Blocked, p: Rank) -> Option<CollectiveError> {
        let c = self;
        let board = &c.shared.board;
        let (theirs, ours) = if let Blocked::Part(_) = b {
            let h = c.link().peek_header(c.rank, p).filter(|h| h.p2p && h.fp.desc.kind == OpKind::Send)?;
            (board.issued_p2p(c.rank, OpKind::Recv, p, h.seq) == Some(false)).then(|| {
                (
                    super::called(&h.fp.desc.to_string(), true, h.seq),
                    super::called(&c.fp.desc.to_string(), false, c.seq),
                )
            })?
        } else if c.p2p {
            let slots = c.link().slots()?;
            let n = board.next_collective(c.rank)?;
            if !slots.arrived(p, n) || slots.finished(p) > n {
                return None;
            }
            let desc = crate::op::Fingerprint::desc_of_words(&slots.fingerprint(p, n))?;
            let waits_for_me = match super::rule::Reads::of(&desc, p) {
                super::rule::Reads::Every => true,
                super::rule::Reads::Root(r) => r == c.rank,
                super::rule::Reads::Own => false,
            };
            waits_for_me.then(|| {
                (super::called(&desc.to_string(), false, n), super::called(&c.fp.desc.to_string(), true, c.seq))
            })?
        } else {
            return None;
        };
        Some(
            CollectiveError::new(
                ErrorKind::Mismatch,
                format!("rank {p} called {theirs}, but rank {} called {ours}: each waits for the other", c.rank),
            )
            .with_peer(p)
            .with_hint(CROSSED),
        )
    }

    /// What the ranks of other processes answer when asked for their flight recorders now
    /// (waiting up to `wait`; nothing to ask when every rank is of this process).
    pub(crate) fn hear_remote(&self, wait: Duration) -> Vec<Heard> {
        let remote = self.shared.board.remote_ranks();
        if remote.is_empty() {
            return Vec::new();
        }
        let answers = self.link().ask_flight(self.rank, &remote, wait);
        answers.into_iter().map(|(r, bytes)| Heard::parse(r, &bytes)).collect()
    }

    /// The `Timeout` error for a wait on `peer` (described as `what`; `None`: on this rank's
    /// device) that reached the deadline.
    ///
    /// Peers in other processes are asked for their flight recorders first (over their
    /// connections, for at most [`FLIGHT_WAIT`]), before this rank's failure reaches them:
    /// the report shows what each was doing when this rank gave up.
    pub(crate) fn timeout(&self, (peer, what): (Option<Rank>, String)) -> CollectiveError {
        let c = self;
        let heard = c.hear_remote(FLIGHT_WAIT.min(c.shared.config.timeout() / 20));
        let e = match peer {
            Some(peer) => {
                let seq = (!c.p2p).then_some(c.seq);
                let (culprit, why) = c.shared.board.blame(c.rank, peer, seq, &heard);
                let e = CollectiveError::new(
                    ErrorKind::Timeout,
                    format!("gave up at the op's deadline waiting for {what}: {why}"),
                )
                .with_peer(culprit);
                if c.p2p { e.with_hint(P2P_SLOW) } else { e }
            }
            // A wait on this rank's own device. If some rank never reached the collective,
            // the op could not have finished anyway: that rank is named (the device may only
            // be slow, as a first kernel compiling is).
            None => match (!c.p2p).then(|| c.shared.board.behind(c.rank, c.seq, &heard)).flatten() {
                Some((culprit, why)) => CollectiveError::new(
                    ErrorKind::Timeout,
                    format!("gave up at the op's deadline waiting for {what}, and {why}"),
                )
                .with_peer(culprit),
                None => {
                    CollectiveError::new(ErrorKind::Timeout, format!("gave up at the op's deadline waiting for {what}"))
                        .with_hint(DEVICE_SLOW)
                }
            },
        };
        e.with_report(c.shared.board.report(&c.shared.name, &heard))
    }

    /// What the outcome of a wait on `peer` means: `Ok` when what it waited for may have
    /// happened; otherwise the error, `describe` saying what it waited for.
    pub(crate) fn outcome(
        &self,
        outcome: WaitOutcome,
        peer: Rank,
        describe: impl Fn() -> (Option<Rank>, String),
    ) -> Result<()> {
        // A wait that did not run for a while (this process stopped or starved) may end in a
        // peer that gave up on this rank first: said, so the peer is not the only suspect.
        let stalled = |e: CollectiveError| match crate::transport::last_stall() {
            Some(d) => e.appended(&format!(
                "This process did not run for {:.1} s during the wait (stopped, e.g. SIGSTOP or a debugger, or \
                 starved of CPU): rank {peer} may have given up on this rank first; see its own error",
                d.as_secs_f64()
            )),
            None => e,
        };
        match outcome {
            WaitOutcome::Ready => Ok(()),
            WaitOutcome::TimedOut => Err(stalled(self.timeout(describe()))),
            WaitOutcome::PeerGone if self.poisoned().is_none() => {
                Err(stalled(self.mismatch_on_board().unwrap_or_else(|| {
                    CollectiveError::new(
                        ErrorKind::PeerLost,
                        format!(
                            "rank {peer} {} while this rank waited for {}",
                            self.link().departure(self.rank, peer),
                            describe().1
                        ),
                    )
                    .with_peer(peer)
                })))
            }
            WaitOutcome::PeerGone | WaitOutcome::Poisoned => Err(self
                .poisoned()
                .unwrap_or_else(|| CollectiveError::new(ErrorKind::Aborted, "the communicator was aborted"))),
        }
    }

    /// A rank of this process that called another collective under this op's number, as the
    /// `Mismatch` to report. For a wait that ends in a departed peer: the peer may have run
    /// another call (a broadcast from another root, which needed nothing from this rank),
    /// returned `Ok` and left, or left after a third rank's other call cut the plan short;
    /// either way the mismatch is the cause, not a lost peer.
    fn mismatch_on_board(&self) -> Option<CollectiveError> {
        let c = self;
        if c.p2p {
            return None;
        }
        let (q, theirs) = (0..c.shared.world)
            .filter(|&q| q != c.rank)
            .find_map(|q| c.shared.board.collective_at(q, c.seq).filter(|t| !t.compatible(c.fp)).map(|t| (q, t)))?;
        Some(self.called_other(q, &theirs.desc))
    }

    /// The `Mismatch` for rank `q`, which called `theirs` under this op's number.
    fn called_other(&self, q: Rank, theirs: &dyn std::fmt::Display) -> CollectiveError {
        let c = self;
        CollectiveError::new(
            ErrorKind::Mismatch,
            format!("rank {q} called {theirs} as op #{}, but rank {} called {}", c.seq, c.rank, c.fp.desc),
        )
        .with_peer(q)
    }

    /// Clears "waiting for" in the flight recorder once the op no longer waits, if a slow
    /// check set it (`noted`).
    pub(crate) fn settle(&self, noted: &Cell<bool>) {
        if noted.take() {
            self.shared.board.set_waiting(self.rank, None);
        }
    }
}
