//! Ranks that leave a room before it is full: at their deadline ([`give_up`]), or because
//! their process went away ([`withdraw`]), and the errors that name who never came, who gave
//! up and whose process is gone.

use std::time::Duration;

use super::{Gone, Registry, ranks_list};
use crate::config::CommConfig;
use crate::error::{CollectiveError, ErrorKind};
use crate::types::Rank;
use crate::unique_id::UniqueId;

/// Takes the ranks of `ticket` out of `id`'s room, marked `why`; drops the room once nobody
/// is left in it.
fn leave(reg: &mut Registry, id: &UniqueId, ticket: u64, why: Gone) {
    let Some(room) = reg.pending.get_mut(id) else { return };
    for r in 0..room.world {
        if room.joined[r].as_ref().is_some_and(|((t, ..), _)| *t == ticket) {
            room.joined[r] = None;
            room.gone[r] = why;
            room.probes[r] = None;
        }
    }
    // A room whose only trace is a rank whose process went away is kept, so the ranks still
    // to come hear of it.
    if room.joined.iter().all(Option::is_none) && !room.gone.contains(&Gone::Lost) {
        reg.pending.remove(id);
    }
}

/// A rank of another process whose process went away while it waited in `id`'s room.
pub(super) fn lost(id: &UniqueId, rank: Rank, why: &str) -> CollectiveError {
    CollectiveError::new(
        ErrorKind::PeerLost,
        format!(
            "rank {rank} of another process left the rendezvous of communicator {} before it was complete: {why}",
            id.short()
        ),
    )
    .with_peer(rank)
}

/// Leaves the room for a joiner whose process went away (its probe found the connection
/// closed); the others stay, and their timeout names it (the room is kept for those still to
/// come until its latest deadline) — unless no rank of the id can be started again
/// ([`UniqueId::restartable`]): then the room fails for every rank at once ([`for_good`]).
pub(super) fn withdraw(reg: &mut Registry, id: &UniqueId, ticket: u64) -> CollectiveError {
    let rank = reg
        .pending
        .get(id)
        .and_then(|room| room.joined.iter().position(|m| m.as_ref().is_some_and(|((t, ..), _)| *t == ticket)));
    leave(reg, id, ticket, Gone::Lost);
    let e = lost(id, rank.unwrap_or_default(), "its connection closed (the process exited or was killed)");
    if id.restartable() {
        return e;
    }
    for_good(reg, id, e)
}

/// Fails `id`'s room for every rank, now, with `e` (a rank's process went away): for an id
/// no rank of which can be started again, whose other ranks waited out their whole timeout
/// for it (a split's member that died while the child formed).
pub(super) fn for_good(reg: &mut Registry, id: &UniqueId, e: CollectiveError) -> CollectiveError {
    let e = e.appended(
        "no rank of this communicator can be started again (it is a split's new communicator, or the peer API's \
         leaders'), so it failed for every rank",
    );
    super::refuse::fail_room(reg, id, e, std::time::Instant::now())
}

/// Leaves the room at the deadline; the error names who never came, who gave up, and whose
/// process went away (then the error is `PeerLost`).
pub(super) fn give_up(
    reg: &mut Registry,
    id: &UniqueId,
    rank: Rank,
    ticket: u64,
    config: &CommConfig,
) -> CollectiveError {
    let Some(room) = reg.pending.get(id) else {
        return CollectiveError::protocol(format!("the rendezvous of communicator {} vanished", id.short()));
    };
    let world = room.world;
    let absent =
        |why: Gone| -> Vec<usize> { (0..world).filter(|&r| room.joined[r].is_none() && room.gone[r] == why).collect() };
    let (missing, left, died) = (absent(Gone::No), absent(Gone::GaveUp), absent(Gone::Lost));
    let only_here = room.joined.iter().flatten().all(|(_, at)| at.is_none());
    leave(reg, id, ticket, Gone::GaveUp);
    let _ = rank;
    let mut why = Vec::new();
    if !missing.is_empty() {
        why.push(format!("rank(s) {} never called Communicator::new", ranks_list(&missing)));
        // Ranks of another job that reached this launch's rendezvous, and were refused: the
        // missing ranks may be theirs, started on the same port (this launch's own ranks may
        // have been refused by the other job's rank 0 in turn).
        // Those refused while this rank waited, or a minute before it came.
        let since = std::time::Instant::now().checked_sub(config.timeout().saturating_add(Duration::from_secs(60)));
        let strangers = id.root_address().map(|a| super::listener::strangers_since(a, since)).unwrap_or_default();
        if !strangers.is_empty() {
            why.push(format!(
                "rank(s) {} of another launch (its launcher's job id differs) came to this rendezvous and were \
                 refused: two jobs use one MASTER_ADDR:MASTER_PORT",
                ranks_list(&strangers)
            ));
        }
        // Every process that made its own id (`UniqueId::new` in each) waits alone in a room
        // of its own, each blaming the others.
        if id.is_made_by_new() && only_here {
            why.push(format!(
                "no rank of another process joined this id, {id}: ranks in other processes must join with this very \
                 UniqueId, handed to them (its text or bytes), not one they made themselves with UniqueId::new, \
                 which roots a separate group"
            ));
        }
    }
    if !left.is_empty() {
        // Its deadline came first (it may have started a moment earlier with the same timeout):
        // it waited as long as it was told to, which is no fault of its own.
        why.push(format!(
            "rank(s) {} called Communicator::new and waited until their own deadline, which came before this one's",
            ranks_list(&left)
        ));
    }
    if !died.is_empty() {
        why.push(format!(
            "rank(s) {} joined from another process, which then went away (its connection closed: the process \
             exited or was killed) and was not started again",
            ranks_list(&died)
        ));
    }
    let kind = if died.is_empty() { ErrorKind::Timeout } else { ErrorKind::PeerLost };
    CollectiveError::new(
        kind,
        format!(
            "communicator {} ({world} ranks) was not complete after {:?}: {}. Communicator::new returns only once every rank has joined: call it once per rank (a thread per rank in one process, or a process per rank), with ranks numbered 0 to {}",
            id.short(),
            config.timeout(),
            why.join("; "),
            world - 1
        ),
    )
    .with_hint(INCOMPLETE)
}

/// Rank `rank`, of this process (the one that hosts `id`'s rendezvous), gave up with `why`:
/// the ranks of other processes still waiting in the room are told now, with the reason.
/// Their waits would end only at their own deadlines, and this process may exit before
/// then (a `main` that returns the error): they read that as the rendezvous root's
/// connection closing, without the reason (a stranger's review, 2 runs in 2).
pub(super) fn hand_over(reg: &mut Registry, id: &UniqueId, rank: Rank, why: &CollectiveError) {
    let Some(room) = reg.pending.get(id) else { return };
    let cv = room.cv.clone();
    let remote: Vec<u64> = room.joined.iter().flatten().filter(|(_, at)| at.is_some()).map(|((t, ..), _)| *t).collect();
    if remote.is_empty() {
        return;
    }
    let err = CollectiveError::new(
        why.kind(),
        format!(
            "rank {rank}, in the process that hosts the rendezvous of communicator {}, gave up at its own deadline, \
             and the group cannot form without it: {}",
            id.short(),
            why.message()
        ),
    );
    for t in remote {
        leave(reg, id, t, Gone::GaveUp);
        reg.outcomes.insert(t, Err(err.clone()));
    }
    cv.notify_all();
}

/// The advice when a room was not complete at the deadline (a rank of another process hears
/// the root's error without it: hints stay in their process).
pub(super) const INCOMPLETE: &str = "start the rank(s) named above (a rank whose process went away: look at its own \
     output for why, then start it again as the same rank), with the same UniqueId (or MASTER_ADDR and MASTER_PORT) \
     and world_size, or raise CommConfig::timeout (RUCCL_TIMEOUT) if they start late; nothing was created, so call \
     Communicator::new (or from_env) again";

/// Logs which ranks have not joined `id`'s room yet.
pub(super) fn warn_missing(reg: &Registry, id: &UniqueId, rank: Rank, waited: Duration) {
    #[cfg(feature = "tracing")]
    if let Some(room) = reg.pending.get(id) {
        let world = room.world;
        let missing: Vec<usize> = (0..world).filter(|&r| room.joined[r].is_none()).collect();
        let (list, secs, comm) = (ranks_list(&missing), waited.as_secs_f64(), id.short());
        tracing::warn!(
            comm = %comm, rank, missing = %list, waited_s = secs,
            "rank {rank} has waited {secs:.1}s in Communicator::new for communicator {comm} ({world} ranks); rank(s) {list} have not joined yet. Every rank must call Communicator::new on its own thread (one thread per rank), with ranks numbered 0 to {}",
            world - 1
        );
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (reg, id, rank, waited);
}
