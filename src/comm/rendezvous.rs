//! In-process rendezvous: ranks that call `Communicator::new` with the same `UniqueId` meet
//! here, agree on the world size and config, and leave with one shared state.
//!
//! The registry also keeps an id from naming two groups at once:
//! - while any communicator of a group exists, its id is *live* and refused (the group's
//!   [`Instance`], owned by its `Shared`, holds the entry and removes it when dropped);
//! - a rank number that joins a pending room twice means two groups use the id at the same
//!   time: the room fails for everyone in it, and the id is refused until the latest deadline
//!   of those joiners, so the rest of both groups are refused too instead of pairing up;
//! - each group gets a random instance nonce, which split children mix into their ids;
//! - a rank of another process whose registration connection closes while it waits (its
//!   process died) leaves the room: a rank started again with its number takes its place,
//!   and if none does, the others' error at their deadline is `PeerLost` naming it.
//!
//! Members that know their key but not their rank (the peer API's peers) meet in a [`lobby`]
//! of the same registry instead.
//!
//! **Across processes.** An id carries the address of its root's [`listener`]. Ranks in
//! the root's process join its room here; a rank of another process registers at that
//! listener ([`remote`]), where a thread joins the same room on its behalf. A room whose
//! ranks are all of this process forms a group here, over the config's in-process link (as
//! before); one that spans processes ends with a table of where every rank's process
//! listens ([`proto::Table`]), sent to the other processes, and the ranks of each process
//! build one group over TCP from it ([`assemble`]). The transport is chosen per pair of
//! ranks there: ranks of one process lend each other memory in place, as in-process groups
//! do; ranks of processes of one host move their data through shared memory; the others
//! talk TCP (see [`crate::PeerLink`]). Across processes the config checks cover the chunk size, the algorithm and the
//! peer-silence limit (each process paces its heartbeats by its own).
//!
//! Every wait has the config's deadline; a rank that never comes is named in the `Timeout`
//! error, and a wait longer than the config's warning interval logs who is missing.
//!
//! One mutex guards the whole registry: joins are rare and short, and one lock makes the
//! hand-over from "pending" to "live" atomic. Rule: no `Shared` is ever dropped while the
//! lock is held (its `Instance` takes the lock in `Drop`); outcomes are only moved out.

mod absent;
mod assemble;
mod ifaddr;
mod instance;
pub(crate) mod listener;
pub(crate) mod lobby;
mod proto;
mod refuse;
mod remote;

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Shared;
use super::watch::WaitWatch;
use crate::config::{CommConfig, deadline_after};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::Rank;
use crate::unique_id::UniqueId;
use absent::{give_up, lost, warn_missing, withdraw};
pub(crate) use instance::Instance;
use instance::{Live, fresh_nonce};
use refuse::{config_mismatch, fail_room, in_use, reuse};

#[derive(Default)]
struct Registry {
    /// Rooms still waiting for ranks.
    pending: HashMap<UniqueId, Pending>,
    /// Ids whose group exists: the group's instance nonce, and how many of its communicators
    /// exist.
    live: HashMap<UniqueId, Live>,
    /// Ids whose room failed for everyone in it (two groups used the id at once, or ranks
    /// disagreed on the world size): refused with the room's error until the instant given
    /// (the latest deadline of its members), so that a rank arriving late hears the error
    /// at once instead of opening a new room and waiting out its timeout.
    refused: HashMap<UniqueId, (Instant, CollectiveError)>,
    /// The outcome of a completed or failed room, per joiner ticket, until the joiner takes it.
    outcomes: HashMap<u64, Result<Joined>>,
    /// Lobbies waiting for members, and the outcome per lobby joiner ticket.
    lobbies: HashMap<UniqueId, lobby::Lobby>,
    seated: HashMap<u64, Result<lobby::Seat>>,
    next_ticket: u64,
}

/// A joiner's ticket and config, and the device of the rank it joins for (type-erased).
pub(super) type Joiner = (u64, CommConfig, Arc<dyn Any + Send + Sync>);

/// A joiner, and where its process listens when it is not this one.
type Member = (Joiner, Option<proto::ProcAddr>);

/// What a full room gives its members.
#[derive(Clone)]
pub(crate) enum Joined {
    /// Every rank is of this process: the group.
    Group(Arc<Shared>),
    /// The ranks span processes: where each listens.
    Table(Arc<proto::Table>),
}

struct Pending {
    world: usize,
    /// Per rank: the ticket and config of the joiner waiting there, the rank's device, and
    /// its process when not this one.
    joined: Vec<Option<Member>>,
    /// Per rank, why it is not in the room when it came and left (so a later timeout blames
    /// it rightly).
    gone: Vec<Gone>,
    /// Per rank of another process in the room: whether its process is still there.
    probes: Vec<Option<Probe>>,
    /// The latest deadline of anyone who joined: how long a reuse of the id is remembered.
    latest: Instant,
    cv: Arc<Condvar>,
}

/// Why a rank that came is not in its room any more.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Gone {
    /// It is there, or never came.
    No,
    /// It left at its deadline.
    GaveUp,
    /// Its process went away (its registration connection closed) before the room was full.
    Lost,
}

/// Whether a joiner of another process is still there: its registration connection is open
/// ([`remote::serve`] makes one per registration).
pub(crate) type Probe = Arc<dyn Fn() -> bool + Send + Sync>;

/// How often a wait for a room with a joiner of another process looks whether its process
/// is still there.
const PROBE_EVERY: Duration = Duration::from_millis(100);

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn ranks_list(v: &[usize]) -> String {
    crate::types::ranks_text(v)
}

/// Joins the communicator named `id` as `rank` of `world`; returns once all have joined.
///
/// `members` are the ranks this thread joins for, with their devices (type-erased, so ranks
/// learn how their devices reach each other): one for `Communicator::new`, every rank for
/// `Communicator::init_all`. `host_memory`: every one of those devices keeps its memory on
/// the host (processes of one host may then exchange small ops through shared slots).
pub(crate) fn join(
    id: &UniqueId,
    world: usize,
    members: &[(Rank, Arc<dyn Any + Send + Sync>)],
    host_memory: bool,
    config: &CommConfig,
) -> Result<Arc<Shared>> {
    let deadline = deadline_after(config.timeout());
    config.check().map_err(|e| e.with_rank(members.first().map_or(0, |m| m.0)).with_op("Communicator::new"))?;
    if let Some(root) = id.root_address().filter(|a| !listener::serves(*a)) {
        let [(rank, device)] = members else {
            return Err(CollectiveError::invalid(format!(
                "communicator {} is rooted in another process ({root}): join it one rank per call",
                id.short()
            ))
            .with_op("Communicator::new"));
        };
        if released(id, Instant::now(), deadline, None).live.contains_key(id) {
            return Err(in_use(id).with_rank(*rank).with_op("Communicator::new"));
        }
        return remote::join(id, world, *rank, device.clone(), host_memory, config);
    }
    let here: Vec<_> = members.iter().map(|(r, d)| (*r, d.clone(), None)).collect();
    // A failed room fails the other processes' ranks too: their refusals go out before this
    // rank's error returns (and perhaps its process exits).
    let entered =
        enter(id, world, &here, None, config).inspect_err(|_| remote::answers_written(Instant::now() + ANSWER_WAIT));
    match entered? {
        Joined::Group(shared) => Ok(shared),
        Joined::Table(table) => assemble::assemble(id, world, &table, members, host_memory, config, deadline),
    }
}

/// How long a root whose join failed waits for its refusals to other processes' ranks to be
/// written ([`remote::answers_written`]).
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// How long a join waits for a group whose communicators were all dropped to let go of its
/// id (the shared progress thread may hold the group a moment longer) before calling the id
/// in use.
const RELEASE_WAIT: Duration = Duration::from_millis(250);

/// The registry, once `id` is no longer claimed by a live group, or at once when a
/// communicator of that group still exists (the id is in use: no wait makes it free), or
/// once `RELEASE_WAIT` (at most until `deadline`) has passed. A joiner of a process of that
/// group (`from`, its token) is the same job forming its group again: it waits for the old
/// group to go until `deadline`.
fn released(
    id: &UniqueId,
    started: Instant,
    deadline: Instant,
    from: Option<[u8; 16]>,
) -> MutexGuard<'static, Registry> {
    let patience = deadline.min(started + RELEASE_WAIT);
    let mut reg = registry();
    loop {
        if reg.live.get(id).is_some_and(|l| !l.holds(Instant::now())) {
            reg.live.remove(id);
        }
        let Some(l) = reg.live.get(id) else { return reg };
        let again = from.is_some_and(|t| l.procs.contains(&t));
        let wait_until = if again {
            deadline
        } else if l.held.load(Ordering::Acquire) == 0 {
            patience
        } else {
            return reg;
        };
        if Instant::now() >= wait_until {
            return reg;
        }
        drop(reg);
        std::thread::sleep(Duration::from_millis(1));
        reg = registry();
    }
}

/// A member of a room: its rank, its device, and its process when not this one.
pub(crate) type Entrant = (Rank, Arc<dyn Any + Send + Sync>, Option<proto::ProcAddr>);

/// Enters `id`'s room with `members` (ranks of this process, or one rank of another, whose
/// `probe` says whether its process is still there); returns once the room is full, failed,
/// or `config`'s deadline passed, or the probe found the process gone.
///
/// A rank whose process went away leaves the room (a later timeout names it), and a rank
/// number already in the room is taken over by a newcomer when the rank there is of a
/// process that went away (a restart), where it would otherwise mean two groups share `id`.
pub(crate) fn enter(
    id: &UniqueId,
    world: usize,
    members: &[Entrant],
    probe: Option<Probe>,
    config: &CommConfig,
) -> Result<Joined> {
    let Some(&(rank, ..)) = members.first() else {
        return Err(CollectiveError::invalid("no rank to join").with_op("Communicator::new"));
    };
    // Before anything is allocated per rank (a registration from another process included).
    crate::types::check_world(world).map_err(|e| e.with_rank(rank).with_op("Communicator::new"))?;
    let started = Instant::now();
    let deadline = deadline_after(config.timeout());
    let fail = |e: CollectiveError| e.with_rank(rank).with_op("Communicator::new");
    let from = members.iter().find_map(|(_, _, at)| at.map(|a| a.token));
    let mut reg = released(id, started, deadline, from);
    reg.refused.retain(|_, (until, _)| *until > started);
    reg.pending.retain(|_, room| room.joined.iter().any(Option::is_some) || room.latest > started);
    if let Some((_, e)) = reg.refused.get(id) {
        return Err(fail(e.clone()));
    }
    if let Some(l) = reg.live.get(id) {
        if from.is_some_and(|t| l.procs.contains(&t)) {
            return Err(fail(
                CollectiveError::new(
                    ErrorKind::Timeout,
                    format!(
                        "communicator {}'s previous group, which this rank's process was part of, still exists in the \
                     root's process (rank 0's) after {:?}: a group forms again only once every rank dropped the old \
                     one",
                        id.short(),
                        config.timeout()
                    ),
                )
                .with_hint(
                    "make rank 0 drop its communicator before it joins again (or give the new group its own id)",
                ),
            ));
        }
        return Err(fail(in_use(id)));
    }
    let ticket = reg.next_ticket;
    reg.next_ticket += 1;
    let fresh = || Pending {
        world,
        joined: vec![None; world],
        gone: vec![Gone::No; world],
        probes: vec![None; world],
        latest: deadline,
        cv: Arc::new(Condvar::new()),
    };
    let room = reg.pending.entry(id.clone()).or_insert_with(fresh);
    if room.world != world && room.joined.iter().all(Option::is_none) {
        // Only the trace of a lost rank, from a launch of another size: start over.
        *room = fresh();
    }
    if room.world != world {
        let theirs: Vec<Rank> = (0..room.world).filter(|&r| room.joined[r].is_some()).collect();
        let mine: Vec<Rank> = members.iter().map(|(r, ..)| *r).collect();
        let err = CollectiveError::invalid(format!(
            "ranks disagree on the world size of communicator {}: rank(s) {} passed world_size {}, rank(s) {} passed {world}; every rank must pass the same world_size",
            id.short(),
            ranks_list(&theirs),
            room.world,
            ranks_list(&mine)
        ))
        .with_hint(
            "give every rank the same world_size (a launch: the same WORLD_SIZE, OMPI_COMM_WORLD_SIZE or \
             SLURM_NTASKS in every process), then start every rank again",
        );
        return Err(fail(fail_room(&mut reg, id, err, deadline)));
    }
    let cv = room.cv.clone();
    room.latest = room.latest.max(deadline);
    let mut restarted = Vec::new();
    for (i, (r, ..)) in members.iter().enumerate() {
        if *r >= world {
            return Err(fail(CollectiveError::invalid(format!("rank {r} is out of range for world_size {world}"))));
        }
        let twice = members[..i].iter().any(|(q, ..)| q == r);
        if !twice && room.probes[*r].as_ref().is_some_and(|alive| !alive()) {
            // The rank's earlier process went away and this is its restart.
            if let Some(((t, ..), _)) = room.joined[*r].take() {
                restarted.push((*r, t));
            }
        }
        if room.joined[*r].is_some() || twice {
            let r = *r;
            return Err(fail(reuse(&mut reg, id, r, deadline)));
        }
    }
    for (r, dev, at) in members {
        room.joined[*r] = Some(((ticket, config.clone(), dev.clone()), *at));
        room.gone[*r] = Gone::No;
        room.probes[*r] = probe.clone();
    }
    // A rank whose process went away since its waiter last looked (every `PROBE_EVERY`)
    // must not complete the room: the others would get a table naming a dead process and
    // wait out a second timeout connecting to it.
    let mut died = Vec::new();
    for r in 0..world {
        if room.probes[r].as_ref().is_some_and(|alive| !alive()) {
            if let Some(((t, ..), _)) = room.joined[r].take() {
                died.push((r, t));
            }
            room.gone[r] = Gone::Lost;
            room.probes[r] = None;
        }
    }
    let full = room.joined.iter().all(Option::is_some);
    for (r, t) in restarted {
        reg.outcomes.insert(t, Err(lost(id, r, "a process started since as the same rank took its place")));
    }
    let first_death = died.first().map(|&(r, _)| r);
    for (r, t) in died {
        reg.outcomes.insert(t, Err(lost(id, r, "its connection closed (the process exited or was killed)")));
    }
    if let Some(r) = first_death.filter(|_| !id.restartable()) {
        absent::for_good(&mut reg, id, lost(id, r, "its connection closed (the process exited or was killed)"));
    } else if full {
        complete(&mut reg, id);
    }
    cv.notify_all();
    let mut watch = WaitWatch::new(started, config.warn_after());
    loop {
        if let Some(out) = reg.outcomes.remove(&ticket) {
            return out.map_err(fail);
        }
        let now = Instant::now();
        if probe.as_ref().is_some_and(|alive| !alive()) {
            return Err(fail(withdraw(&mut reg, id, ticket)));
        }
        if now >= deadline {
            let e = give_up(&mut reg, id, rank, ticket, config);
            if from.is_none() {
                absent::hand_over(&mut reg, id, rank, &e);
            }
            return Err(fail(e));
        }
        if watch.tick(now) {
            warn_missing(&reg, id, rank, watch.waited(now));
        }
        let mut wake = watch.next_at().map_or(deadline, |w| w.min(deadline));
        if probe.is_some() {
            wake = wake.min(now + PROBE_EVERY);
        }
        reg = cv.wait_timeout(reg, wake.saturating_duration_since(now)).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// Hands the full room's outcome to its members: a new live group, or the config error.
fn complete(reg: &mut Registry, id: &UniqueId) {
    let Some(room) = reg.pending.remove(id) else { return };
    let members: Vec<Member> = room.joined.into_iter().flatten().collect();
    let Some(first) = members.first().map(|((_, c, _), _)| c.clone()) else { return };
    // Ranks of other processes talk TCP whatever their config's transport says.
    let spans = members.iter().any(|(_, at)| at.is_some());
    let differ: Vec<usize> = members
        .iter()
        .enumerate()
        .filter(|(_, ((_, c, _), _))| {
            c.chunk_bytes() != first.chunk_bytes()
                || c.algorithm() != first.algorithm()
                || (!spans && c.transport() != first.transport())
                || (spans && proto::millis(c.peer_silence()) != proto::millis(first.peer_silence()))
        })
        .map(|(r, _)| r)
        .collect();
    let devices = members.iter().map(|((_, _, d), _)| d.clone()).collect();
    let outcome = if differ.is_empty() && spans {
        listener::mesh_address().map(|addr| {
            let here = proto::ProcAddr { token: listener::process_token(), addr };
            let procs: Vec<_> = members.iter().map(|(_, at)| at.unwrap_or(here)).collect();
            let nonce = fresh_nonce();
            let tokens = procs.iter().map(|p| p.token).collect();
            let until = room.latest + assemble::SETUP_MIN;
            reg.live.insert(id.clone(), Live::forming(nonce, tokens, until));
            Joined::Table(Arc::new(proto::Table { nonce, procs }))
        })
    } else if differ.is_empty() {
        Shared::link_for(id, room.world, &first).map(|link| {
            let instance = Instance::claim(reg, id, fresh_nonce(), Vec::new());
            Joined::Group(Arc::new(Shared::new(id.clone(), room.world, first, instance, devices, link)))
        })
    } else {
        let configs = members.iter().map(|((_, c, _), _)| c);
        Err(config_mismatch(&differ, &configs.collect::<Vec<_>>(), spans))
    };
    // Every member gets a clone; the original is dropped here, never the last reference.
    for ((ticket, ..), _) in members {
        reg.outcomes.insert(ticket, outcome.clone());
    }
    room.cv.notify_all();
}
