//! In-process rendezvous: ranks that call `Communicator::new` with the same `UniqueId` meet
//! here, agree on the world size and config, and leave with one shared state. Every wait has
//! the config's deadline; a rank that never comes is named in the `Timeout` error.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::Instant;

use super::Shared;
use crate::config::CommConfig;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::Rank;
use crate::unique_id::UniqueId;

struct Pending {
    world: usize,
    joined: Vec<Option<CommConfig>>,
    result: Option<Result<Arc<Shared>>>,
    /// Ranks that came but left at their deadline (so a later timeout does not blame them).
    gave_up: Vec<bool>,
    /// Set when the room left the registry; a late joiner must find or make a new one.
    closed: bool,
}

struct Room {
    state: Mutex<Pending>,
    cv: Condvar,
}

static ROOMS: LazyLock<Mutex<HashMap<UniqueId, Arc<Room>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn ranks_list(v: &[usize]) -> String {
    v.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
}

/// Joins the communicator named `id` as `rank` of `world`; returns once all have joined.
pub(crate) fn join(id: &UniqueId, world: usize, rank: Rank, config: &CommConfig) -> Result<Arc<Shared>> {
    let deadline = Instant::now() + config.timeout();
    loop {
        if let Some(res) = try_join(id, world, rank, config, deadline) {
            return res;
        }
    }
}

fn try_join(
    id: &UniqueId,
    world: usize,
    rank: Rank,
    config: &CommConfig,
    deadline: Instant,
) -> Option<Result<Arc<Shared>>> {
    let room = {
        let mut rooms = ROOMS.lock().unwrap_or_else(|e| e.into_inner());
        rooms
            .entry(id.clone())
            .or_insert_with(|| {
                Arc::new(Room {
                    state: Mutex::new(Pending {
                        world,
                        joined: vec![None; world],
                        result: None,
                        gave_up: vec![false; world],
                        closed: false,
                    }),
                    cv: Condvar::new(),
                })
            })
            .clone()
    };
    let mut st = room.state.lock().unwrap_or_else(|e| e.into_inner());
    if st.closed {
        return None;
    }
    if st.world != world {
        return Some(Err(CollectiveError::invalid(format!(
            "world_size {world} differs from the {} that other ranks of communicator {} use",
            st.world,
            id.short()
        ))
        .with_rank(rank)));
    }
    if st.joined[rank].is_some() {
        return Some(Err(CollectiveError::invalid(format!(
            "rank {rank} of communicator {} has already joined",
            id.short()
        ))
        .with_rank(rank)));
    }
    st.joined[rank] = Some(config.clone());
    st.gave_up[rank] = false;
    if st.joined.iter().all(Option::is_some) {
        let first = st.joined.iter().flatten().next().cloned().unwrap_or_default();
        let differ: Vec<usize> = st
            .joined
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.as_ref().is_some_and(|c| c.chunk_bytes() != first.chunk_bytes() || c.algorithm() != first.algorithm())
            })
            .map(|(r, _)| r)
            .collect();
        st.result = Some(if differ.is_empty() {
            Ok(Arc::new(Shared::new(id.clone(), world, first)))
        } else {
            Err(CollectiveError::invalid(format!(
                "ranks {} use a CommConfig whose chunk size or algorithm differs from rank 0's (chunk {} bytes, algorithm {}); all ranks must agree",
                ranks_list(&differ),
                first.chunk_bytes(),
                first.algorithm()
            )))
        });
        st.closed = true;
        ROOMS.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        room.cv.notify_all();
    }
    loop {
        if let Some(res) = &st.result {
            return Some(res.clone().map_err(|e| e.with_rank(rank)));
        }
        let now = Instant::now();
        if now >= deadline {
            let absent = |gave_up: bool| -> Vec<usize> {
                (0..world).filter(|&r| st.joined[r].is_none() && st.gave_up[r] == gave_up).collect()
            };
            let (missing, left) = (absent(false), absent(true));
            st.joined[rank] = None;
            st.gave_up[rank] = true;
            if st.joined.iter().all(Option::is_none) {
                st.closed = true;
                ROOMS.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
            }
            return Some(Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!(
                    "communicator {} ({world} ranks) was not complete after {:?}: {}",
                    id.short(),
                    config.timeout(),
                    match (missing.is_empty(), left.is_empty()) {
                        (false, true) => format!("rank(s) {} never called Communicator::new", ranks_list(&missing)),
                        (true, _) =>
                            format!("rank(s) {} called Communicator::new but gave up first", ranks_list(&left)),
                        (false, false) => format!(
                            "rank(s) {} never called Communicator::new; rank(s) {} called it but gave up first",
                            ranks_list(&missing),
                            ranks_list(&left)
                        ),
                    }
                ),
            )
            .with_rank(rank)
            .with_op("Communicator::new")));
        }
        st = room.cv.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}
