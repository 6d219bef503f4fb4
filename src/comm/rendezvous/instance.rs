//! A formed group's hold on its id ([`Instance`]): the registry entry that refuses the id
//! while the group exists, and the nonce that tells the group from any other that used it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use super::{Registry, registry};
use crate::unique_id::UniqueId;

/// A live group's registry entry.
pub(super) struct Live {
    pub(super) nonce: u128,
    /// The group's communicators that exist (this process's ranks). While any does, a join
    /// with the id is refused at once; once none does, a join waits up to `RELEASE_WAIT` for
    /// the group itself to go.
    pub(super) held: Arc<AtomicUsize>,
    /// The processes of a group that spans processes (their tokens): a rank of one of them
    /// joining again is the same job forming its group anew, and waits (up to its deadline)
    /// for this process to drop the old one, rather than being refused as another job.
    pub(super) procs: Vec<[u8; 16]>,
    /// `Some(until)`: the group met (its table went out) and its processes are still
    /// connecting, so no communicator exists yet. A join of the id is refused as during the
    /// group's life (a duplicate rank, a second job on the port, arriving just after the room
    /// filled, would otherwise open a new room and wait out its timeout). The marker is
    /// replaced by this process's [`Instance::claim`], removed by a failed build
    /// ([`Instance::unmark`]), and lapses at `until` (no rank of the group is of this process).
    pub(super) forming: Option<Instant>,
}

impl Live {
    /// The marker of a group that met at this process's rendezvous and is connecting, until
    /// `until` at the latest.
    pub(super) fn forming(nonce: u128, procs: Vec<[u8; 16]>, until: Instant) -> Self {
        Live { nonce, held: Arc::new(AtomicUsize::new(0)), procs, forming: Some(until) }
    }

    /// Whether the entry still holds the id at `now` (a forming marker lapses).
    pub(super) fn holds(&self, now: Instant) -> bool {
        self.forming.is_none_or(|until| now < until)
    }
}

/// One group's claim on its id: the nonce that tells this group from any other that used
/// the same id, and the registry entry that refuses the id while the group exists.
#[derive(Debug)]
pub(crate) struct Instance {
    id: UniqueId,
    nonce: u128,
    held: Arc<AtomicUsize>,
}

impl Instance {
    /// Claims `id` for a new group: its registry entry, until the `Instance` is dropped.
    pub(super) fn claim(reg: &mut Registry, id: &UniqueId, nonce: u128, procs: Vec<[u8; 16]>) -> Self {
        let held = Arc::new(AtomicUsize::new(0));
        reg.live.insert(id.clone(), Live { nonce, held: held.clone(), procs, forming: None });
        Instance { id: id.clone(), nonce, held }
    }

    /// Removes the forming marker of the group `nonce` (its build failed here: the id is free).
    pub(super) fn unmark(reg: &mut Registry, id: &UniqueId, nonce: u128) {
        if reg.live.get(id).is_some_and(|l| l.nonce == nonce && l.forming.is_some()) {
            reg.live.remove(id);
        }
    }

    /// This group's nonce (random, the same on every rank of the group).
    pub(crate) fn nonce(&self) -> u128 {
        self.nonce
    }

    /// A communicator of the group now exists (its handle, until [`Instance::let_go`]).
    pub(crate) fn hold(&self) {
        self.held.fetch_add(1, Ordering::AcqRel);
    }

    /// A communicator of the group was dropped.
    pub(crate) fn let_go(&self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let mut reg = registry();
        if reg.live.get(&self.id).is_some_and(|l| l.nonce == self.nonce) {
            reg.live.remove(&self.id);
        }
    }
}

/// A random nonce; if the OS has no randomness, a process-wide counter and the clock, which
/// still tell apart every group of this process.
pub(super) fn fresh_nonce() -> u128 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b[..8].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        b[8..].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
    }
    u128::from_le_bytes(b)
}
