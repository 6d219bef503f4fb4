//! One rank of this process in a [`Mesh`](super::Mesh): its connections, doorbell and view
//! of failures, and how it tells its peers that it failed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::peer::Peer;
use super::{FlightSource, HEARTBEAT, lock, shm_io};
use crate::error::CollectiveError;
use crate::transport::wait::{Event, WaitOutcome};
use crate::transport::wire::{self, FrameHeader, FrameKind};
use crate::types::Rank;

/// One rank of this process: its connections, doorbell and view of failures.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(super) rank: Rank,
    pub(super) comm: [u8; 16],
    pub(super) peers: Vec<Option<Arc<Peer>>>,
    pub(super) event: Event,
    pub(super) failed: AtomicBool,
    pub(super) poison: Mutex<Option<CollectiveError>>,
    /// Whether the peers were sent this rank's poison; held while it is being sent, so that
    /// a rank that departs meanwhile (its own `tell` finds it told) queues its goodbyes only
    /// after every peer's `Abort`.
    pub(super) told: Mutex<bool>,
    /// How long a connection may stay silent before its peer counts as lost.
    pub(super) silence: Duration,
    /// The shared-memory sides of `peers` (those in this host's other processes), for the
    /// loops every exchanged op runs.
    pub(super) shm: Vec<Arc<shm_io::ShmPeer>>,
    /// [`shm_io::parks`] when [`polls`](Self::polls) last set every flag of this rank.
    pub(super) polls_at: AtomicU64,
    /// Whether some peer was lost (its connection closed without a goodbye, or fell silent):
    /// one load for the check every new op makes ([`Mesh::lost_peer`](super::Mesh::lost_peer)).
    pub(super) lost_any: AtomicBool,
    /// What this rank answers a peer that asks for its flight recorder (set by the
    /// communicator once its board exists; unanswered until then).
    pub(super) flight: std::sync::OnceLock<FlightSource>,
}

impl Endpoint {
    /// How often an idle connection sends a heartbeat: four within the silence limit.
    pub(super) fn heartbeat(&self) -> Duration {
        (self.silence / 4).clamp(Duration::from_millis(1), HEARTBEAT)
    }

    /// Sends this rank's poison to every peer, once. Every rank that learns of a failure
    /// passes it on before anything else it sends (a goodbye included), as the in-process
    /// transport's shared flag is seen before a departure: on every connection the news of
    /// a failure comes before the news that its rank left.
    ///
    /// Two threads may tell at once (a reader thread that heard a peer's `Abort`, the rank's
    /// own thread failing or departing): the second waits until the first has queued the
    /// frame for every peer. Returning as soon as it saw "told", a departing rank could queue
    /// its goodbye to a peer the first teller had not reached yet, and that peer would see the
    /// rank leave without a word of the failure (`PeerLost` instead of the failure: found as a
    /// ~3% flake of `tcp::root_mismatch_reaches_every_rank`).
    pub(super) fn tell(&self) {
        let Some(err) = lock(&self.poison).clone() else { return };
        let mut told = lock(&self.told);
        if *told {
            return;
        }
        let frame = self.control(FrameKind::Abort, &wire::encode_error(&err));
        for p in self.peers.iter().flatten() {
            p.push_control(frame.clone());
        }
        *told = true;
    }

    /// This rank is awake (it waits, or runs an exchanged op): it takes what its
    /// shared-memory peers publish itself, so their small messages and exchanged ops wake no
    /// reader thread of this process until some thread of it sleeps
    /// ([`shm_io::before_park`], which clears every flag). Every pair, not only the awaited
    /// peer's: a rank that waits for one peer (a reduce's non-root for its root) is rung by
    /// nobody else before it sleeps, and a reader thread woken for another peer's op — a
    /// futex call there, a thread scheduled here, on cores the ranks need — was measured as
    /// most of a small op's time with 4 processes on 2 cores (PERFORMANCE.md, session 18).
    ///
    /// Two loads when nothing slept since the last call, the common case: the count of
    /// clearing passes is bumped after each pass's clears, so one read that equals the count
    /// stored here comes after every clear that could have undone this rank's sets.
    pub(super) fn polls(&self) {
        let now = shm_io::parks();
        if self.polls_at.load(Ordering::Relaxed) == now {
            return;
        }
        for s in &self.shm {
            s.set_polling(true);
        }
        self.polls_at.store(now, Ordering::Relaxed);
    }

    pub(super) fn ring(&self) {
        self.event.ring();
        crate::transport::wait::bell().ring();
    }

    pub(super) fn peer(&self, p: Rank) -> Option<&Arc<Peer>> {
        self.peers.get(p).and_then(Option::as_ref)
    }

    /// Records `err` as this rank's failure (the first one wins) and wakes it.
    pub(super) fn set_poison(&self, err: CollectiveError) {
        {
            let mut p = lock(&self.poison);
            if p.is_none() {
                *p = Some(err);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.ring();
    }

    pub(super) fn control(&self, kind: FrameKind, body: &[u8]) -> Vec<u8> {
        self.control_numbered(kind, 0, body)
    }

    /// A control frame whose sequence field carries `seq` (a flight-recorder query's number,
    /// which its answer repeats).
    pub(super) fn control_numbered(&self, kind: FrameKind, seq: u64, body: &[u8]) -> Vec<u8> {
        let h = FrameHeader { seq, ..FrameHeader::control(kind, self.comm, self.rank as u32, body.len() as u64) };
        let mut f = wire::encode_header(&h).to_vec();
        f.extend_from_slice(body);
        f
    }

    /// A peer broke the protocol: this rank fails with a `Protocol` error naming it.
    pub(super) fn protocol(&self, peer: Rank, what: impl std::fmt::Display) {
        let e = CollectiveError::protocol(format!("rank {peer} sent a bad frame: {what}"))
            .with_peer(peer)
            .with_rank(self.rank);
        self.set_poison(e);
    }

    /// Departure is read before the poison, as in-process (a failing peer poisons first).
    pub(super) fn stop(&self, peer: Option<Rank>) -> Option<WaitOutcome> {
        let gone = peer.and_then(|p| self.peer(p)).is_some_and(|p| p.is_gone());
        crate::transport::wait::stopped(self.failed.load(Ordering::SeqCst), gone)
    }
}
