//! Slow waits: deciding when a wait has lasted long enough to say who it is waiting for, and
//! saying it. [`WaitWatch`] reads no clock (callers pass `now`), so its schedule is tested
//! with made-up instants; the warnings go to `tracing::warn!` (with the `tracing` feature).
//!
//! A forgotten rank, a duplicate or 1-based rank number, or every communicator created on one
//! thread all look the same from the ranks that did come: a wait that only ends at the
//! timeout (10 minutes by default). The warning turns that silence into a name early on.

use std::time::{Duration, Instant};

use crate::sched::View;
use crate::types::Rank;

/// The shortest interval between warnings, whatever the config says (a zero interval would
/// warn on every wake-up).
const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// When a wait that started at `start` should warn: after `first`, then each time the total
/// wait has doubled (`first`, `2 first`, `4 first`, ...).
#[derive(Clone, Debug)]
pub(crate) struct WaitWatch {
    start: Instant,
    /// The next warning's time; `None` once it would not fit in an `Instant` (never).
    next: Option<Instant>,
}

impl WaitWatch {
    pub(crate) fn new(start: Instant, first: Duration) -> Self {
        WaitWatch { start, next: start.checked_add(first.max(MIN_INTERVAL)) }
    }

    /// Whether a warning is due at `now`; if so, schedules the next one at twice the wait so
    /// far (so a wait warns once however late its first check comes).
    pub(crate) fn tick(&mut self, now: Instant) -> bool {
        match self.next {
            Some(next) if now >= next => {
                let waited = now.saturating_duration_since(self.start).max(MIN_INTERVAL);
                self.next = waited.checked_mul(2).and_then(|d| self.start.checked_add(d));
                true
            }
            _ => false,
        }
    }

    /// When the next warning is due, for waits that sleep until an instant.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.next
    }

    /// How long the wait has lasted at `now`.
    pub(crate) fn waited(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.start)
    }
}

/// How long a warning waits for the ranks of other processes to say how far they are.
#[cfg(feature = "tracing")]
const ASK_WAIT: Duration = Duration::from_millis(250);

/// Logs that the op `ctx` views has waited `waited` for `what` from `peer`: for a collective, the
/// ranks whose flight recorder has not reached it yet; for send/recv, the peer.
pub(crate) fn warn_op(ctx: View<'_>, peer: Rank, what: &str, waited: Duration) {
    #[cfg(feature = "tracing")]
    {
        let c = ctx;
        let (secs, op) = (waited.as_secs_f64(), &c.fp.desc);
        if c.p2p {
            tracing::warn!(
                comm = %c.shared.name,
                rank = c.rank,
                peer,
                waited_s = secs,
                "rank {} of communicator {} has waited {secs:.1}s in {op} (point-to-point #{} with rank {peer}) for {what}; is rank {peer} running the matching call?",
                c.rank,
                c.shared.name,
                c.seq
            );
            return;
        }
        // Ranks of other processes are asked (briefly: the op goes on waiting meanwhile).
        let heard = c.hear_remote(ASK_WAIT);
        // (This rank is never one of them: its own record is on the board.)
        let silent: Vec<String> = (c.shared.board.remote_ranks().into_iter())
            .filter(|&r| !heard.iter().any(|h| h.rank == r))
            .map(|r| r.to_string())
            .collect();
        let behind = c.shared.board.not_reached(c.seq, &heard);
        let list = behind.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
        if !silent.is_empty() && behind.is_empty() {
            let silent = silent.join(", ");
            tracing::warn!(
                comm = %c.shared.name, rank = c.rank, seq = c.seq, peer, waited_s = secs,
                "rank {} of communicator {} has waited {secs:.1}s in op #{} {op} for {what}; rank(s) {silent} (other processes) did not say how far they are",
                c.rank, c.shared.name, c.seq
            );
        } else if behind.is_empty() {
            tracing::warn!(
                comm = %c.shared.name,
                rank = c.rank,
                seq = c.seq,
                peer,
                waited_s = secs,
                "rank {} of communicator {} has waited {secs:.1}s in op #{} {op} for {what}; every rank has reached this op",
                c.rank,
                c.shared.name,
                c.seq
            );
        } else {
            tracing::warn!(
                comm = %c.shared.name, rank = c.rank, seq = c.seq, missing = %list, waited_s = secs,
                "rank {} of communicator {} has waited {secs:.1}s in op #{} {op}: rank(s) {list} have not reached op #{} yet (waiting for {what})",
                c.rank, c.shared.name, c.seq, c.seq
            );
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (ctx, peer, what, waited);
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn warns_after_the_interval_then_at_doublings() {
        let t0 = Instant::now();
        let mut w = WaitWatch::new(t0, 30 * S);
        assert!(!w.tick(t0));
        assert!(!w.tick(t0 + 29 * S));
        assert_eq!(w.next_at(), Some(t0 + 30 * S));
        assert!(w.tick(t0 + 30 * S));
        assert!(!w.tick(t0 + 30 * S), "once per interval");
        assert!(!w.tick(t0 + 59 * S));
        assert!(w.tick(t0 + 60 * S));
        assert!(!w.tick(t0 + 119 * S));
        assert!(w.tick(t0 + 120 * S));
        assert_eq!(w.next_at(), Some(t0 + 240 * S));
        assert_eq!(w.waited(t0 + 125 * S), 125 * S);
    }

    #[test]
    fn a_late_check_warns_once() {
        let t0 = Instant::now();
        let mut w = WaitWatch::new(t0, S);
        assert!(w.tick(t0 + 10 * S));
        assert!(!w.tick(t0 + 19 * S));
        assert!(w.tick(t0 + 20 * S));
    }

    #[test]
    fn huge_or_zero_intervals() {
        let t0 = Instant::now();
        let mut never = WaitWatch::new(t0, Duration::MAX);
        assert_eq!(never.next_at(), None);
        assert!(!never.tick(t0 + 1000 * S));
        let mut zero = WaitWatch::new(t0, Duration::ZERO);
        assert!(!zero.tick(t0));
        assert!(zero.tick(t0 + MIN_INTERVAL));
        assert!(!zero.tick(t0 + MIN_INTERVAL), "a zero interval does not warn on every check");
        assert!(zero.tick(t0 + 2 * MIN_INTERVAL));
    }
}
