//! Lobbies: the rendezvous for members that know a stable name to meet under and their own
//! key, but not their rank — the peer API's peers, whose ranks are their ids in order, ids
//! that need not be contiguous. Members join a lobby by its id with their key and the settings
//! they must agree on; once `world` members are in, ranks are assigned in key order and the
//! members leave with a new group (a fresh id derived from the lobby's, live like any other),
//! while the lobby's id opens a new round for the next arrivals.
//!
//! A round whose members disagree (settings or world size) fails for everyone in it at once,
//! and members of that round who arrive later are told the same error (until as many members
//! as the round expected have heard it, or its latest deadline passes), so none of them opens
//! a new round alone and waits out its deadline. A round can be cancelled ([`cancel`]), which
//! wakes everyone waiting in it. The caller words the errors ([`Terms`]).

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Condvar};
use std::time::Instant;

use super::{Instance, Registry, Shared, fresh_nonce, registry};
use crate::config::{CommConfig, deadline_after};
use crate::error::{CollectiveError, Result};
use crate::types::Rank;
use crate::unique_id::UniqueId;

/// One setting that differs between the members in a round and a newcomer.
pub(crate) struct Difference {
    pub name: String,
    /// Its value among the members already in the round.
    pub room: String,
    /// The newcomer's value.
    pub newcomer: String,
}

/// A newcomer whose settings differ from those of the round it joins.
pub(crate) struct Disagreement<'a> {
    pub differences: &'a [Difference],
    /// The keys already in the round.
    pub waiting: &'a [u64],
    pub newcomer: u64,
}

/// What the members of a lobby must agree on, and how its errors are worded.
pub(crate) struct Terms<'a> {
    /// Settings every member must pass identically, as `(name, value)`.
    pub settings: Vec<(String, String)>,
    /// The error when settings differ.
    pub mismatch: &'a dyn Fn(&Disagreement<'_>) -> CollectiveError,
    /// The error for a member whose deadline passed, from the keys that came this round.
    pub timeout: &'a dyn Fn(&[u64]) -> CollectiveError,
}

/// A member's place in the group it formed.
pub(crate) struct Seat {
    pub shared: Arc<Shared>,
    pub rank: Rank,
    /// Every member's key, in rank order.
    pub members: Arc<[u64]>,
}

pub(super) struct Lobby {
    world: usize,
    settings: Vec<(String, String)>,
    /// The members waiting, by key, with their tickets, configs and devices.
    joined: BTreeMap<u64, super::Joiner>,
    /// Every key that came this round, including those that gave up (for timeouts).
    seen: BTreeSet<u64>,
    /// The latest deadline of anyone who joined this round.
    latest: Instant,
    failed: Option<Failed>,
    cv: Arc<Condvar>,
}

/// A failed round, told to its members that arrive later.
struct Failed {
    error: CollectiveError,
    expected: usize,
    told: BTreeSet<u64>,
}

/// Joins the lobby named `lobby` as `key`, one of `world` members; returns once all have
/// joined (or the round fails, is cancelled, or the config's deadline passes).
pub(crate) fn join(
    lobby: &UniqueId,
    world: usize,
    key: u64,
    device: Arc<dyn Any + Send + Sync>,
    terms: &Terms<'_>,
    config: &CommConfig,
) -> Result<Seat> {
    config.check().map_err(|e| e.with_op("Communicator::new"))?;
    crate::types::check_world(world).map_err(|e| e.with_op("Communicator::new"))?;
    let deadline = deadline_after(config.timeout());
    let mut reg = registry();
    if let Some(error) = replay(&mut reg, lobby, key) {
        return Err(error);
    }
    let ticket = reg.next_ticket;
    reg.next_ticket += 1;
    let room = reg.lobbies.entry(lobby.clone()).or_insert_with(|| Lobby {
        world,
        settings: terms.settings.clone(),
        joined: BTreeMap::new(),
        seen: BTreeSet::new(),
        latest: deadline,
        failed: None,
        cv: Arc::new(Condvar::new()),
    });
    room.latest = room.latest.max(deadline);
    let mut diff: Vec<Difference> = room
        .settings
        .iter()
        .zip(&terms.settings)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| Difference { name: a.0.clone(), room: a.1.clone(), newcomer: b.1.clone() })
        .collect();
    if diff.is_empty() && (room.world != world || room.settings.len() != terms.settings.len()) {
        diff.push(Difference { name: "world size".into(), room: room.world.to_string(), newcomer: world.to_string() });
    }
    if !diff.is_empty() {
        let waiting: Vec<u64> = room.joined.keys().copied().collect();
        let error = (terms.mismatch)(&Disagreement { differences: &diff, waiting: &waiting, newcomer: key });
        fail_round(&mut reg, lobby, key, world, error.clone());
        return Err(error);
    }
    if room.joined.contains_key(&key) {
        return Err(CollectiveError::invalid(format!("key {key} is already waiting in lobby {}", lobby.short())));
    }
    room.joined.insert(key, (ticket, config.clone(), device));
    room.seen.insert(key);
    let cv = room.cv.clone();
    if room.joined.len() >= room.world {
        complete(&mut reg, lobby);
    }
    loop {
        if let Some(out) = reg.seated.remove(&ticket) {
            return out;
        }
        let now = Instant::now();
        if now >= deadline {
            let seen = leave(&mut reg, lobby, key, ticket);
            return Err((terms.timeout)(&seen));
        }
        reg = cv.wait_timeout(reg, deadline.saturating_duration_since(now)).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// Fails the round of `lobby` with `error` for everyone waiting in it (and, through
/// [`replay`], for its later arrivals), e.g. when the caller resets.
pub(crate) fn cancel(lobby: &UniqueId, error: CollectiveError) {
    let mut reg = registry();
    if let Some(room) = reg.lobbies.remove(lobby) {
        for (ticket, ..) in room.joined.values() {
            reg.seated.insert(*ticket, Err(error.clone()));
        }
        room.cv.notify_all();
    }
}

/// Tells a member arriving after its round failed about the failure (once), or clears the
/// failed round when it is stale or the member is retrying.
fn replay(reg: &mut Registry, lobby: &UniqueId, key: u64) -> Option<CollectiveError> {
    let room = reg.lobbies.get_mut(lobby)?;
    let failed = room.failed.as_mut()?;
    if room.latest <= Instant::now() || failed.told.contains(&key) {
        reg.lobbies.remove(lobby);
        return None;
    }
    failed.told.insert(key);
    let error = failed.error.clone();
    if failed.told.len() >= failed.expected {
        reg.lobbies.remove(lobby);
    }
    Some(error)
}

/// Fails the round for everyone in it, and remembers the failure for its later arrivals.
fn fail_round(reg: &mut Registry, lobby: &UniqueId, key: u64, world: usize, error: CollectiveError) {
    let Some(room) = reg.lobbies.get_mut(lobby) else { return };
    let mut told: BTreeSet<u64> = room.joined.keys().copied().collect();
    told.insert(key);
    let expected = room.world.max(world);
    let tickets: Vec<u64> = std::mem::take(&mut room.joined).into_values().map(|(t, ..)| t).collect();
    room.cv.notify_all();
    if told.len() >= expected {
        reg.lobbies.remove(lobby);
    } else {
        room.failed = Some(Failed { error: error.clone(), expected, told });
    }
    for t in tickets {
        reg.seated.insert(t, Err(error.clone()));
    }
}

/// Seats the full round's members in key order in a new group.
fn complete(reg: &mut Registry, lobby: &UniqueId) {
    let Some(room) = reg.lobbies.remove(lobby) else { return };
    let members: Arc<[u64]> = room.joined.keys().copied().collect();
    let Some((_, config, _)) = room.joined.values().next().cloned() else { return };
    let devices = room.joined.values().map(|(.., d)| d.clone()).collect();
    let nonce = fresh_nonce();
    let id = lobby.derive(nonce, &[members.len() as u64]);
    let link = match Shared::link_for(&id, room.world, &config) {
        Ok(link) => link,
        Err(e) => {
            for (ticket, ..) in room.joined.values() {
                reg.seated.insert(*ticket, Err(e.clone()));
            }
            room.cv.notify_all();
            return;
        }
    };
    let instance = Instance::claim(reg, &id, nonce, Vec::new());
    let shared = Arc::new(Shared::new(id.clone(), room.world, config, instance, devices, link));
    for (rank, (ticket, ..)) in room.joined.values().enumerate() {
        let seat = Seat { shared: shared.clone(), rank, members: members.clone() };
        reg.seated.insert(*ticket, Ok(seat));
    }
    room.cv.notify_all();
    // `shared` is dropped here, never the last reference: every member holds a clone.
}

/// Leaves the round at the deadline; returns the keys that came this round.
fn leave(reg: &mut Registry, lobby: &UniqueId, key: u64, ticket: u64) -> Vec<u64> {
    let Some(room) = reg.lobbies.get_mut(lobby) else { return vec![key] };
    let seen = room.seen.iter().copied().collect();
    if room.joined.get(&key).is_some_and(|(t, ..)| *t == ticket) {
        room.joined.remove(&key);
    }
    if room.joined.is_empty() && room.failed.is_none() {
        reg.lobbies.remove(lobby);
    }
    seen
}
