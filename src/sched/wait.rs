//! The scheduler's waits and what they conclude: every wait has the op's deadline; a header
//! or flight-recorder entry that disagrees is a `Mismatch`; a timeout names the root cause
//! (the rank furthest behind, or the cycle of ranks waiting on each other), not merely the
//! peer this rank happened to wait on; a poisoned link is read through [`after_failure`].

use std::time::Instant;

use super::{Run, after_failure};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::{Header, WaitOutcome};
use crate::types::Rank;

impl<'r, D: Device> Run<'r, '_, D> {
    pub(super) fn check_header(&self, peer: Rank, h: &Header) -> Result<()> {
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
            let mut e = CollectiveError::new(
                ErrorKind::Mismatch,
                format!("rank {peer} called {theirs}, but rank {} called {ours}", c.rank),
            )
            .with_peer(peer);
            if !h.p2p && !c.p2p && h.seq != c.seq {
                // The ranks diverged at the earlier of the two ops: that is the op the poison
                // names, so that ranks still in it report this mismatch rather than `Aborted`.
                let first = h.seq.min(c.seq);
                if let Some(then) = c.board.collective_at(c.rank, first).filter(|_| first < c.seq) {
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

    pub(super) fn wait_released(&mut self, peer: Rank, ticket: u64) -> Result<()> {
        let (link, me) = (self.ctx.link, self.ctx.rank);
        if link.is_released(me, peer, ticket) {
            return Ok(());
        }
        let what = move || format!("rank {peer} to read message #{ticket} this rank sent it");
        self.wait_for(peer, &what, &mut || link.is_released(me, peer, ticket))
    }

    /// The error this rank reports for a poisoned link, if it is poisoned.
    pub(super) fn poisoned(&self) -> Option<CollectiveError> {
        let c = self.ctx;
        let now = if c.p2p { super::Now::P2p } else { super::Now::Collective(c.seq) };
        c.link.poisoned().map(|e| after_failure(&e, c.rank, now))
    }

    pub(super) fn wait_for(
        &mut self,
        peer: Rank,
        what: &dyn Fn() -> String,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<()> {
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
            WaitOutcome::TimedOut => {
                let seq = (!c.p2p).then_some(c.seq);
                let (culprit, why) = c.board.blame(c.rank, peer, seq);
                Err(CollectiveError::new(
                    ErrorKind::Timeout,
                    format!("gave up at the op's deadline waiting for {}: {why}", what()),
                )
                .with_peer(culprit)
                .with_report(c.board.report(c.comm_name)))
            }
            WaitOutcome::PeerGone => Err(CollectiveError::new(
                ErrorKind::PeerLost,
                format!("rank {peer} dropped its communicator while this rank waited for {}", what()),
            )
            .with_peer(peer)),
            WaitOutcome::Poisoned => Err(self
                .poisoned()
                .unwrap_or_else(|| CollectiveError::new(ErrorKind::Aborted, "the communicator was aborted"))),
        }
    }
}
