//! The errors that refuse a join: a config that differs from rank 0's, an id in use by a
//! group that exists, and two groups using one id at once (which fails their room).

use std::time::Instant;

use super::{Registry, proto, ranks_list};
use crate::config::CommConfig;
use crate::error::CollectiveError;
use crate::types::Rank;
use crate::unique_id::UniqueId;

/// The refusal of a group whose ranks `differ` pass a config other than rank 0's (`configs`,
/// by rank): what each of them passed against rank 0's, and where such settings come from.
/// `spans`: the group spans processes (the transport setting does not count then).
pub(super) fn config_mismatch(differ: &[usize], configs: &[&CommConfig], spans: bool) -> CollectiveError {
    let show = |c: &CommConfig| {
        let transport = if spans {
            format!(", peer silence {} ms", proto::millis(c.peer_silence()))
        } else {
            format!(", transport {:?}", c.transport())
        };
        format!("chunk {} bytes, algorithm {}{transport}", c.chunk_bytes(), c.algorithm())
    };
    let first = configs.first().map_or_else(String::new, |c| show(c));
    let theirs: Vec<String> =
        differ.iter().filter_map(|&r| configs.get(r).map(|c| format!("rank {r}: {}", show(c)))).collect();
    CollectiveError::invalid(format!(
        "rank{} {} pass{} a CommConfig that differs from rank 0's ({first}): {}; all ranks must agree",
        if differ.len() == 1 { "" } else { "s" },
        ranks_list(differ),
        if differ.len() == 1 { "es" } else { "" },
        theirs.join("; ")
    ))
    .with_hint(if spans {
        "give every rank the same CommConfig; set RUCCL_CHUNK_BYTES, RUCCL_ALGO and RUCCL_PEER_SILENCE alike in \
         every process (or in none), then start every rank again"
    } else {
        "give every rank the same CommConfig (chunk bytes, algorithm, transport; RUCCL_CHUNK_BYTES, RUCCL_ALGO and \
         RUCCL_TRANSPORT set them from the environment), then create the communicators again"
    })
}

/// A join of `id` while a communicator made with it still exists (in this process, or in the
/// root's, whose answer a joiner of another process relays).
pub(super) fn in_use(id: &UniqueId) -> CollectiveError {
    let at = id.root_address().map_or_else(String::new, |a| format!(", whose rendezvous is at {a},"));
    CollectiveError::invalid(format!(
        "communicator id {}{at} is in use by a communicator that still exists in that process: its group formed \
         (it may have failed since, but it has not been dropped there). Either this rank was started again after \
         its group formed (a formed group takes no new rank: when one of its processes dies the others fail with \
         PeerLost, and every process of the job must be started again, with rank 0's too), or another launch \
         uses the same rendezvous address (two launches on one host need two MASTER_PORTs: a second job started \
         with the first one's MASTER_ADDR:MASTER_PORT reaches the first job's rank 0), or this process joins one \
         id twice: give each group its own UniqueId (an id can be reused once every communicator made with it is \
         dropped)",
        id.short()
    ))
    .with_hint(
        "restart the whole job when one of its ranks died (every rank, rank 0 included); else give this group its own \
         rendezvous (a launch: its own MASTER_PORT; else a fresh UniqueId), then start its ranks again",
    )
}

/// A second joiner for a rank number already in the room: two groups are using `id`. Fails
/// the room for everyone in it and refuses the id until their latest deadline.
pub(super) fn reuse(reg: &mut Registry, id: &UniqueId, rank: Rank, deadline: Instant) -> CollectiveError {
    let err = CollectiveError::invalid(format!(
        "communicator id {} looks used by two groups of ranks at once: rank {rank} joined it twice. Either two \
         processes of one launch claim rank {rank} (check the launcher's RANK, OMPI_COMM_WORLD_RANK or \
         SLURM_PROCID), or two groups share one id: give each group its own UniqueId (two launches on one host \
         need two MASTER_PORTs)",
        id.short()
    ))
    .with_hint(
        "give every process of a launch its own rank (check the launcher's variables), and each group its own \
         UniqueId or MASTER_PORT, then start every rank again",
    );
    fail_room(reg, id, err, deadline)
}

/// Fails `id`'s room with `err` for everyone in it, and refuses the id with the same error
/// until the latest deadline of its members and of the newcomer (`deadline`) who found the
/// fault, so that ranks of the same job arriving later fail at once too.
pub(super) fn fail_room(reg: &mut Registry, id: &UniqueId, err: CollectiveError, deadline: Instant) -> CollectiveError {
    let mut until = deadline;
    if let Some(room) = reg.pending.remove(id) {
        for ((ticket, ..), _) in room.joined.iter().flatten() {
            reg.outcomes.insert(*ticket, Err(err.clone()));
        }
        until = until.max(room.latest);
        room.cv.notify_all();
    }
    reg.refused.insert(id.clone(), (until, err.clone()));
    err
}
