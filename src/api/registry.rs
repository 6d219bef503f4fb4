//! The process-wide registration state: one service per [`Backend`] type, holding the room
//! where peers wait for each other and every registered peer's communicators.
//!
//! A registration goes `Waiting` (in the room) → `Delivered` (the last peer to arrive built
//! every member's communicators) → `Active` (the peer picked them up). Only the last peer
//! blocks in the core's rendezvous, and only on threads it spawns for the members, so a peer
//! thread never waits anywhere but on this service's condition variable — which
//! `reset_collective` wakes.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Instant;

use super::{Backend, CollectiveConfig, PeerId};
use crate::comm::Communicator;
use crate::config::CommConfig;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::Rank;
use crate::unique_id::UniqueId;

type AnyService = Arc<dyn Any + Send + Sync>;

/// One service per `Backend` type (the key that keeps frameworks, and tests, apart).
static SERVICES: LazyLock<Mutex<HashMap<TypeId, AnyService>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Tickets tell a registration apart from a later one of the same peer id.
static TICKETS: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn list(peers: impl IntoIterator<Item = PeerId>) -> String {
    peers.into_iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// What every member of one registration shares.
#[derive(Debug)]
pub(crate) struct Session {
    /// The members in rank order (sorted by id).
    pub peers: Vec<PeerId>,
    /// The config they registered with.
    pub config: CollectiveConfig,
}

/// One registered peer: its devices, its rank and its communicators.
pub(crate) struct PeerHandle<B: Backend> {
    pub peer: PeerId,
    pub rank: Rank,
    pub device: B::Device,
    pub comm_device: B::CommDevice,
    pub session: Arc<Session>,
    /// The registration's one communicator: each op names its strategy in its descriptor.
    pub comm: Communicator<B::CommDevice>,
    reset: AtomicBool,
    op_lock: Mutex<()>,
}

impl<B: Backend> PeerHandle<B> {
    /// The rank of a member, if `peer` is one.
    pub(crate) fn rank_of(&self, peer: PeerId) -> Option<Rank> {
        self.session.peers.binary_search(&peer).ok()
    }

    /// Whether `reset_collective` discarded this registration.
    pub(crate) fn was_reset(&self) -> bool {
        self.reset.load(Ordering::SeqCst)
    }

    /// Serialises this peer's operations (each is an agreement step plus the op itself).
    pub(crate) fn lock_ops(&self) -> MutexGuard<'_, ()> {
        lock(&self.op_lock)
    }

    fn abort(&self) {
        self.comm.abort();
    }
}

enum Entry<B: Backend> {
    /// In the room (or being formed), under this ticket.
    Waiting(u64),
    /// Formed; waiting for the peer's thread to pick it up.
    Delivered(u64, Result<Arc<PeerHandle<B>>>),
    /// Registered and usable.
    Active(Arc<PeerHandle<B>>),
}

struct Member<B: Backend> {
    ticket: u64,
    device: B::Device,
    comm_device: B::CommDevice,
}

/// A round of registration that failed because configs differed: the peers that have not
/// heard about it yet get the same error when they arrive.
struct Failed {
    error: CollectiveError,
    expected: usize,
    told: BTreeSet<PeerId>,
    until: Instant,
}

struct Room<B: Backend> {
    config: CollectiveConfig,
    members: BTreeMap<PeerId, Member<B>>,
    /// Every peer that joined this round, including those that gave up (for timeouts).
    seen: BTreeSet<PeerId>,
    failed: Option<Failed>,
}

struct State<B: Backend> {
    /// Bumped by every reset: a formation that started before one is discarded.
    epoch: u64,
    room: Option<Room<B>>,
    peers: HashMap<PeerId, Entry<B>>,
}

/// The registration state of one `Backend` type.
pub(crate) struct Service<B: Backend> {
    state: Mutex<State<B>>,
    cv: Condvar,
}

/// The service of `B`, created on first use.
pub(crate) fn service<B: Backend>() -> Result<Arc<Service<B>>> {
    let any = lock(&SERVICES)
        .entry(TypeId::of::<B>())
        .or_insert_with(|| {
            Arc::new(Service::<B> {
                state: Mutex::new(State { epoch: 0, room: None, peers: HashMap::new() }),
                cv: Condvar::new(),
            }) as AnyService
        })
        .clone();
    any.downcast::<Service<B>>().map_err(|_| CollectiveError::protocol("the peer registry holds a foreign service"))
}

fn backend<B: Backend>() -> &'static str {
    std::any::type_name::<B>()
}

impl<B: Backend> Service<B> {
    /// Registers `peer` and blocks until its registration is formed, fails or times out.
    pub(crate) fn register(&self, peer: PeerId, device: B::Device, config: &CollectiveConfig) -> Result<()> {
        let comm_device = B::comm_device(&device)?;
        let deadline = crate::config::deadline_after(config.timeout());
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        let mut st = lock(&self.state);
        if let Some(entry) = st.peers.get(&peer) {
            return Err(already_registered::<B>(peer, entry));
        }
        if let Some(error) = self.replay_failure(&mut st, peer) {
            return Err(error);
        }
        let room = st.room.get_or_insert_with(|| Room {
            config: config.clone(),
            members: BTreeMap::new(),
            seen: BTreeSet::new(),
            failed: None,
        });
        if room.config != *config {
            return Err(self.fail_round(&mut st, peer, config));
        }
        room.members.insert(peer, Member { ticket, device, comm_device });
        room.seen.insert(peer);
        st.peers.insert(peer, Entry::Waiting(ticket));
        // The last peer to arrive forms the session, with the state unlocked (forming joins
        // the core's rendezvous).
        if st.room.as_ref().is_some_and(|r| r.members.len() >= config.num_devices())
            && let Some(room) = st.room.take()
        {
            let epoch = st.epoch;
            drop(st);
            let formed = form::<B>(room.members, config);
            st = lock(&self.state);
            self.deliver(&mut st, formed, epoch);
        }
        self.wait(st, peer, ticket, deadline, config)
    }

    /// Tells a peer arriving after a failed round about the failure (once), or clears the
    /// round when it is stale or the peer is retrying.
    fn replay_failure(&self, st: &mut State<B>, peer: PeerId) -> Option<CollectiveError> {
        let failed = st.room.as_mut()?.failed.as_mut()?;
        if failed.until <= Instant::now() || failed.told.contains(&peer) {
            st.room = None;
            return None;
        }
        failed.told.insert(peer);
        let error = failed.error.clone();
        if failed.told.len() >= failed.expected {
            st.room = None;
        }
        Some(error)
    }

    /// Fails the round: `peer` brought a config that differs from the room's.
    fn fail_round(&self, st: &mut State<B>, peer: PeerId, config: &CollectiveConfig) -> CollectiveError {
        let Some(room) = st.room.as_mut() else {
            return CollectiveError::protocol("registration room vanished");
        };
        let waiting: Vec<PeerId> = room.members.keys().copied().collect();
        let diff = room.config.differences(config);
        let side = |pick: fn(&(String, String, String)) -> &String| {
            diff.iter().map(|d| format!("{} = {}", d.0, pick(d))).collect::<Vec<_>>().join(", ")
        };
        let error = CollectiveError::new(
            ErrorKind::Mismatch,
            format!(
                "peers registered with different CollectiveConfigs: peer(s) {} with {}, but peer {peer} with {}; \
                 every peer must pass the same config",
                list(waiting.iter().copied()),
                side(|d| &d.1),
                side(|d| &d.2),
            ),
        )
        .with_op("register");
        let mut told: BTreeSet<PeerId> = waiting.iter().copied().collect();
        told.insert(peer);
        let expected = room.config.num_devices().max(config.num_devices());
        for (p, m) in std::mem::take(&mut room.members) {
            st.peers.insert(p, Entry::Delivered(m.ticket, Err(error.clone())));
        }
        let until = crate::config::deadline_after(room.config.timeout().max(config.timeout()));
        if told.len() >= expected {
            st.room = None;
        } else if let Some(room) = st.room.as_mut() {
            room.failed = Some(Failed { error: error.clone(), expected, told, until });
        }
        self.cv.notify_all();
        error
    }

    /// Hands the formed handles (or the error) to the members still waiting for them.
    fn deliver(&self, st: &mut State<B>, formed: Formed<B>, epoch: u64) {
        if st.epoch != epoch {
            return; // reset meanwhile: the members were told, and the handles drop here
        }
        match formed {
            Ok(handles) => {
                for (ticket, h) in handles {
                    let peer = h.peer;
                    if matches!(st.peers.get(&peer), Some(Entry::Waiting(t)) if *t == ticket) {
                        st.peers.insert(peer, Entry::Delivered(ticket, Ok(Arc::new(h))));
                    }
                }
            }
            Err((members, error)) => {
                for (peer, ticket) in members {
                    if matches!(st.peers.get(&peer), Some(Entry::Waiting(t)) if *t == ticket) {
                        st.peers.insert(peer, Entry::Delivered(ticket, Err(error.clone())));
                    }
                }
            }
        }
        self.cv.notify_all();
    }

    /// Waits for this registration's outcome.
    fn wait(
        &self,
        mut st: MutexGuard<'_, State<B>>,
        peer: PeerId,
        ticket: u64,
        deadline: Instant,
        config: &CollectiveConfig,
    ) -> Result<()> {
        loop {
            match st.peers.get(&peer) {
                Some(Entry::Delivered(t, _)) if *t == ticket => {
                    let Some(Entry::Delivered(_, outcome)) = st.peers.remove(&peer) else { continue };
                    let handle = outcome?;
                    st.peers.insert(peer, Entry::Active(handle));
                    return Ok(());
                }
                Some(Entry::Waiting(t)) if *t == ticket => {}
                _ => {
                    return Err(CollectiveError::new(
                        ErrorKind::Aborted,
                        format!(
                            "reset_collective::<{}>() discarded the registration of peer {peer} while it waited for \
                             the other peers",
                            backend::<B>()
                        ),
                    )
                    .with_op("register"));
                }
            }
            let now = Instant::now();
            let in_room = st.room.as_ref().is_some_and(|r| r.members.get(&peer).is_some_and(|m| m.ticket == ticket));
            if now >= deadline && in_room {
                let registered: Vec<PeerId> =
                    st.room.as_ref().map(|r| r.seen.iter().copied().collect()).unwrap_or_default();
                if let Some(room) = st.room.as_mut() {
                    room.members.remove(&peer);
                    if room.members.is_empty() {
                        st.room = None;
                    }
                }
                st.peers.remove(&peer);
                return Err(timeout(peer, &registered, config));
            }
            // A formation in progress always delivers (its joins have deadlines), so a peer
            // that is no longer in the room keeps waiting for it, in bounded slices.
            let slice = deadline.saturating_duration_since(now).max(std::time::Duration::from_millis(10));
            st = self.cv.wait_timeout(st, slice).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// The handle of a registered peer.
    pub(crate) fn handle(&self, peer: PeerId, op: &str) -> Result<Arc<PeerHandle<B>>> {
        match lock(&self.state).peers.get(&peer) {
            Some(Entry::Active(h)) => Ok(h.clone()),
            Some(_) => Err(CollectiveError::invalid(format!(
                "peer {peer} has not finished registering: {op} can only be called once register::<{}>() returned",
                backend::<B>()
            ))
            .with_op(format!("{op} on peer {peer}"))),
            None => Err(not_registered::<B>(peer, op)),
        }
    }

    /// Ends a peer's registration; its communicators are dropped once no op holds them.
    pub(crate) fn finish(&self, peer: PeerId) -> Result<()> {
        let mut st = lock(&self.state);
        match st.peers.get(&peer) {
            Some(Entry::Active(_)) => {
                let handle = st.peers.remove(&peer);
                drop(st);
                drop(handle);
                Ok(())
            }
            Some(_) => Err(CollectiveError::invalid(format!(
                "peer {peer} is still registering: finish_collective ends a registration that register returned"
            ))
            .with_op(format!("finish_collective on peer {peer}"))),
            None => Err(not_registered::<B>(peer, "finish_collective")),
        }
    }

    /// Discards every registration and wakes everyone who waits.
    pub(crate) fn reset(&self) {
        let active: Vec<Arc<PeerHandle<B>>> = {
            let mut st = lock(&self.state);
            st.epoch += 1;
            st.room = None;
            let peers = std::mem::take(&mut st.peers);
            self.cv.notify_all();
            peers
                .into_values()
                .filter_map(|e| match e {
                    Entry::Active(h) => Some(h),
                    _ => None,
                })
                .collect()
        };
        // Mark every handle before aborting any: an abort wakes the other peers of the
        // communicator, and they must already know that a reset is why.
        active.iter().for_each(|h| h.reset.store(true, Ordering::SeqCst));
        active.iter().for_each(|h| h.abort());
    }
}

/// Every member's handle with its ticket, or every member's ticket with the error.
type Formed<B> = std::result::Result<Vec<(u64, PeerHandle<B>)>, (Vec<(PeerId, u64)>, CollectiveError)>;

/// Builds every member's communicators: one thread per member joins them in the same order
/// (the core's rendezvous returns once all ranks have joined, with the config's deadline).
fn form<B: Backend>(members: BTreeMap<PeerId, Member<B>>, config: &CollectiveConfig) -> Formed<B> {
    let tickets: Vec<(PeerId, u64)> = members.iter().map(|(p, m)| (*p, m.ticket)).collect();
    let id = match UniqueId::new() {
        Ok(id) => id,
        Err(e) => return Err((tickets, e.with_op("register"))),
    };
    let session = Arc::new(Session { peers: members.keys().copied().collect(), config: config.clone() });
    let n = members.len();
    let results: Vec<Result<(u64, PeerHandle<B>)>> = std::thread::scope(|s| {
        let spawned: Vec<_> = members
            .into_iter()
            .enumerate()
            .map(|(rank, (peer, m))| {
                let (id, session) = (&id, session.clone());
                std::thread::Builder::new()
                    .name(format!("ruccl-register-{peer}"))
                    .spawn_scoped(s, move || join::<B>(peer, rank, n, m, id, session))
            })
            .collect();
        spawned
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(CollectiveError::protocol("a thread joining the communicators panicked"))),
                Err(e) => Err(CollectiveError::from(e)),
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<_>>>().map_err(|e| (tickets, e.with_op("register")))
}

fn join<B: Backend>(
    peer: PeerId,
    rank: Rank,
    n: usize,
    m: Member<B>,
    id: &UniqueId,
    session: Arc<Session>,
) -> Result<(u64, PeerHandle<B>)> {
    let cfg = CommConfig::default().with_timeout(session.config.timeout());
    let comm = Communicator::with_config(m.comm_device.clone(), n, id.clone(), rank, cfg)?;
    Ok((
        m.ticket,
        PeerHandle {
            peer,
            rank,
            device: m.device,
            comm_device: m.comm_device,
            session,
            comm,
            reset: AtomicBool::new(false),
            op_lock: Mutex::new(()),
        },
    ))
}

fn already_registered<B: Backend>(peer: PeerId, entry: &Entry<B>) -> CollectiveError {
    let why = match entry {
        Entry::Active(h) => format!(
            "it is in a session of {} peers ({}); call finish_collective for it before registering it again",
            h.session.peers.len(),
            list(h.session.peers.iter().copied())
        ),
        _ => "another call registered it and is waiting for the other peers".to_string(),
    };
    CollectiveError::invalid(format!("peer {peer} is already registered with the {} service: {why}", backend::<B>()))
        .with_op(format!("register(peer {peer})"))
}

fn not_registered<B: Backend>(peer: PeerId, op: &str) -> CollectiveError {
    CollectiveError::invalid(format!(
        "peer {peer} is not registered with the {} service (never registered, finished, or discarded by \
         reset_collective): call register::<{0}>() first",
        backend::<B>()
    ))
    .with_op(format!("{op} on peer {peer}"))
}

fn timeout(peer: PeerId, registered: &[PeerId], config: &CollectiveConfig) -> CollectiveError {
    let n = config.num_devices();
    let missing = n.saturating_sub(registered.len());
    let guess = if registered.iter().all(|p| p.get() < n as u64) {
        let known: Vec<PeerId> = (0..n as u64).map(PeerId::new).filter(|p| !registered.contains(p)).collect();
        format!("peer(s) {} never registered", list(known))
    } else {
        format!("{missing} more peer(s) never registered")
    };
    CollectiveError::new(
        ErrorKind::Timeout,
        format!(
            "peer {peer} waited {:?} for {n} peers to register, but only {} did (peers {}): {guess}",
            config.timeout(),
            registered.len(),
            list(registered.iter().copied()),
        ),
    )
    .with_op(format!("register(peer {peer})"))
}
