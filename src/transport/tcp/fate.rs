//! What a rank of a [`Mesh`] knows of failures and departures: peers lost (a connection closed
//! without a goodbye, or silent past the limit) or gone, its own failure (`poison`, told to
//! every peer as an `Abort` frame) and its departure (`Goodbye` frames), with the bounded
//! waits that get those frames onto the wire before a process may exit.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::wire::FrameKind;
use super::{LINGER, Mesh, Peer, linger, lock, shm_io};
use crate::error::CollectiveError;
use crate::types::Rank;

impl Mesh {
    /// Whether `rank`'s connection to `me` ended without a goodbye.
    pub(in crate::transport) fn is_lost(&self, me: Rank, rank: Rank) -> bool {
        self.pair(me, rank).is_some_and(|(_, p)| p.lost.load(Ordering::SeqCst))
    }

    /// A peer `me` lost (its connection closed without a goodbye, or fell silent), if any:
    /// a new op of `me` cannot finish without it. One load while none was lost.
    pub(in crate::transport) fn lost_peer(&self, me: Rank) -> Option<Rank> {
        let e = self.ep(me)?;
        if !e.lost_any.load(Ordering::Relaxed) {
            return None;
        }
        e.peers.iter().flatten().find(|p| p.lost.load(Ordering::SeqCst)).map(|p| p.rank)
    }

    /// Whether `me` lost `rank` to silence (nothing came for the peer-silence limit).
    /// The silence limit `me` held `rank`'s connection to, when `rank` was lost to it.
    pub(in crate::transport) fn silent_past(&self, me: Rank, rank: Rank) -> Option<std::time::Duration> {
        self.pair(me, rank).filter(|(_, p)| p.silent.load(Ordering::SeqCst)).map(|(e, _)| e.silence)
    }

    pub(in crate::transport) fn is_departed(&self, me: Rank, rank: Rank) -> bool {
        self.pair(me, rank).is_some_and(|(_, p)| p.is_gone())
    }

    /// `me` failed with `err`: it records it and tells every peer (an `Abort` frame).
    pub(in crate::transport) fn poison(&self, me: Rank, err: CollectiveError) {
        let Some(e) = self.ep(me) else { return };
        e.set_poison(err);
        e.tell();
    }

    /// Waits (at most [`LINGER`]) until `me`'s news of its failure ([`poison`](Self::poison))
    /// is on the wire to every peer whose connection is open: a process may exit right after
    /// `abort()`, and an abort frame still queued then reached the peers as a connection
    /// closed without a goodbye (`PeerLost`; send/recv over TCP, 1 run in 5).
    pub(in crate::transport) fn told_written(&self, me: Rank) {
        let Some(e) = self.ep(me) else { return };
        let written = |p: &Peer| {
            let out = lock(&p.out);
            !out.open || (out.control.is_empty() && !out.busy)
        };
        linger(Instant::now() + LINGER, || e.peers.iter().flatten().all(|p| written(p)));
    }

    /// Whether `me` failed (cheap: one atomic load).
    pub(in crate::transport) fn is_failed(&self, me: Rank) -> bool {
        self.ep(me).is_some_and(|e| e.failed.load(Ordering::SeqCst))
    }

    /// Neither [`poisoned`](Self::poisoned) nor a [`lost_peer`](Self::lost_peer) (the loads
    /// those make first).
    #[inline]
    pub(in crate::transport) fn sound(&self, me: Rank) -> bool {
        self.ep(me).is_none_or(|e| !e.failed.load(Ordering::SeqCst) && !e.lost_any.load(Ordering::Relaxed))
    }

    pub(in crate::transport) fn poisoned(&self, me: Rank) -> Option<CollectiveError> {
        let e = self.ep(me)?;
        if !e.failed.load(Ordering::SeqCst) {
            return None;
        }
        lock(&e.poison).clone()
    }

    /// `rank` dropped its communicator: it says goodbye to every peer and closes, and waits
    /// (at most [`LINGER`]) until the goodbyes are on the wire. A process may exit as soon as
    /// its communicator is dropped, and the mesh itself may outlive the drop (the shared
    /// progress thread holds it until it next looks): without the wait, the writers were
    /// often not scheduled before the exit on a busy host, and the peers failed with
    /// `PeerLost` "without a goodbye" (a broadcast's root that returned and exited at once).
    pub(in crate::transport) fn depart(&self, rank: Rank) {
        let Some(e) = self.ep(rank) else { return };
        e.tell();
        let bye = e.control(FrameKind::Goodbye, &[]);
        let until = Instant::now() + LINGER;
        for p in e.peers.iter().flatten() {
            // The last data goes into the shared ring before the goodbye goes on the socket.
            shm_io::flush(p, until);
            let mut out = lock(&p.out);
            if !out.closing {
                out.closing = true;
                out.control.push_back(bye.clone());
            }
            drop(out);
            p.wake.notify_one();
        }
        linger(until, || e.peers.iter().flatten().all(|p| p.flushed.load(Ordering::SeqCst)));
    }
}
