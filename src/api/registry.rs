//! The process-wide registrations: one service per [`Backend`] type, mapping each registered
//! peer to its communicator. Peers meet in the core's rendezvous — a lobby named by the
//! service and keyed by peer id, so ranks follow id order and every peer's config is compared
//! there (see `comm::rendezvous::lobby`) — and this file keeps only the map from peer id to
//! `Joining` (waiting in the lobby) or `Active` (its communicator).
//!
//! Rule: the service's lock is never held while a peer waits (in the lobby or in an
//! operation); `reset_collective` takes the map, cancels the lobby's round and aborts the
//! communicators, which wakes every such wait.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use super::node::{self, Hierarchy};
use super::{Backend, CollectiveConfig, PeerId};
use crate::comm::rendezvous::lobby::{self, Difference, Disagreement, Terms};
use crate::comm::{Aborter, Communicator};
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

/// What every member of one registration agreed on.
#[derive(Debug)]
pub(crate) struct Session {
    /// The members in rank order (sorted by id).
    pub peers: Vec<PeerId>,
    /// The config they registered with.
    pub config: CollectiveConfig,
}

/// One registered peer: its devices, its rank and its communicator.
pub(crate) struct PeerHandle<B: Backend> {
    pub peer: PeerId,
    pub rank: Rank,
    pub device: B::Device,
    pub comm_device: B::CommDevice,
    pub session: Session,
    /// The registration's one communicator: each op names its strategy in its descriptor.
    pub comm: Communicator<B::CommDevice>,
    /// With several nodes: this node's place among them (and, on its leader, the leaders'
    /// communicator).
    pub hier: Option<Hierarchy<B::CommDevice>>,
    reset: AtomicBool,
    /// Set by `finish_collective` before the registration leaves the map, so a handle a
    /// thread still remembers ([`handle`]) is never used after it.
    finished: AtomicBool,
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

    /// Whether the registration still stands (neither finished nor reset).
    fn is_current(&self) -> bool {
        !self.finished.load(Ordering::SeqCst) && !self.was_reset()
    }

    /// This peer's operations, one at a time (broadcast is two core calls); `None` while
    /// another thread's operation on this peer is in flight (see `call::with_peer`).
    pub(crate) fn try_lock_ops(&self) -> Option<MutexGuard<'_, ()>> {
        match self.op_lock.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

enum Entry<B: Backend> {
    /// Waiting in the lobby, under this ticket.
    Joining(u64),
    /// Registered and usable.
    Active(Arc<PeerHandle<B>>),
}

/// The registrations of one `Backend` type.
pub(crate) struct Service<B: Backend> {
    /// The lobby this service's peers meet in.
    lobby: UniqueId,
    peers: Mutex<HashMap<PeerId, Entry<B>>>,
    /// Registrations past the lobby that still meet other nodes (by ticket): a reset aborts
    /// their node's communicator, which wakes every wait of the meeting.
    meeting: Mutex<HashMap<u64, Aborter>>,
}

/// A registration a thread used: its backend type, its peer, its handle.
type Remembered = (TypeId, PeerId, Weak<dyn Any + Send + Sync>);

thread_local! {
    /// The registrations this thread used last: an operation finds its peer's handle without
    /// taking the process-wide locks every peer's thread contends for. Weak, so a finished
    /// peer's communicator is dropped as soon as no operation holds it.
    static RECENT: RefCell<Vec<Remembered>> = const { RefCell::new(Vec::new()) };
}

/// Most registrations one thread remembers (a thread usually drives one peer).
const RECENT_MAX: usize = 4;

/// The handle of a registered `peer` of `B`'s service, for an operation named `op`: the
/// thread's remembered handle while that registration stands, else the service's map.
pub(crate) fn handle<B: Backend>(peer: PeerId, op: &str) -> Result<Arc<PeerHandle<B>>> {
    let key = TypeId::of::<B>();
    let remembered = RECENT.with(|r| {
        let r = r.borrow();
        r.iter().find(|(t, p, _)| *t == key && *p == peer).and_then(|(_, _, w)| w.upgrade())
    });
    if let Some(h) = remembered.and_then(|a| a.downcast::<PeerHandle<B>>().ok())
        && h.is_current()
    {
        return Ok(h);
    }
    let h = service::<B>()?.handle(peer, op)?;
    let any: Arc<dyn Any + Send + Sync> = h.clone();
    RECENT.with(|r| {
        let mut r = r.borrow_mut();
        r.retain(|(t, p, w)| !(*t == key && *p == peer) && w.strong_count() > 0);
        if r.len() >= RECENT_MAX {
            r.remove(0);
        }
        r.push((key, peer, Arc::downgrade(&any)));
    });
    Ok(h)
}

/// The service of `B`, created on first use.
pub(crate) fn service<B: Backend>() -> Result<Arc<Service<B>>> {
    let mut services = lock(&SERVICES);
    let any = match services.get(&TypeId::of::<B>()) {
        Some(s) => s.clone(),
        None => {
            let s: AnyService = Arc::new(Service::<B> {
                lobby: UniqueId::new()?,
                peers: Mutex::new(HashMap::new()),
                meeting: Mutex::new(HashMap::new()),
            });
            services.insert(TypeId::of::<B>(), s.clone());
            s
        }
    };
    any.downcast::<Service<B>>().map_err(|_| CollectiveError::protocol("the peer registry holds a foreign service"))
}

/// The timeout of a registration's own communicator (its node's): the config's, and with
/// several nodes a grace more (a tenth, from 200 ms to 5 s). A node's peers wait for their
/// leader while it waits among the leaders, both from about the same moment: with one
/// deadline the peers' often came first, and they blamed their own healthy leader; a little
/// later, the leader's error (naming the node or peer it waited for) reaches them first.
fn node_timeout(config: &CollectiveConfig) -> std::time::Duration {
    let t = config.timeout();
    match config.num_nodes() {
        Some(n) if n > 1 => {
            t + (t / 10).clamp(std::time::Duration::from_millis(200), std::time::Duration::from_secs(5))
        }
        _ => t,
    }
}

fn backend<B: Backend>() -> &'static str {
    std::any::type_name::<B>()
}

impl<B: Backend> Service<B> {
    /// Registers `peer` and blocks until its registration is formed, fails or times out.
    pub(crate) fn register(&self, peer: PeerId, device: B::Device, config: &CollectiveConfig) -> Result<()> {
        let comm_device = B::comm_device(&device)?;
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        {
            let mut peers = lock(&self.peers);
            if let Some(entry) = peers.get(&peer) {
                return Err(already_registered::<B>(peer, entry));
            }
            peers.insert(peer, Entry::Joining(ticket));
        }
        let terms = Terms {
            settings: config.settings(),
            mismatch: &config_mismatch,
            timeout: &|seen| timeout(peer, seen, config),
        };
        let cfg = CommConfig::default().with_timeout(node_timeout(config));
        let n = config.num_devices();
        let joined = Communicator::join_lobby(comm_device.clone(), n, &self.lobby, peer.get(), &terms, cfg).and_then(
            |(comm, members)| {
                let members: Vec<PeerId> = members.iter().copied().map(PeerId::new).collect();
                // Several nodes: the leader meets the other nodes, and a reset meanwhile
                // aborts the node's communicator (which that meeting watches).
                let hier = match config.num_nodes() {
                    Some(n) if n > 1 => {
                        lock(&self.meeting).insert(ticket, comm.aborter());
                        if !matches!(lock(&self.peers).get(&peer), Some(Entry::Joining(t)) if *t == ticket) {
                            comm.abort();
                        }
                        let joined = node::join(&comm, &members, config);
                        lock(&self.meeting).remove(&ticket);
                        Some(joined?)
                    }
                    _ => None,
                };
                Ok((comm, members, hier))
            },
        );
        let mut peers = lock(&self.peers);
        if !matches!(peers.get(&peer), Some(Entry::Joining(t)) if *t == ticket) {
            drop(peers);
            drop(joined);
            return Err(CollectiveError::new(
                ErrorKind::Aborted,
                format!(
                    "reset_collective::<{}>() discarded the registration of peer {peer} while it waited for the other \
                     peers",
                    backend::<B>()
                ),
            ));
        }
        match joined {
            Err(e) => {
                peers.remove(&peer);
                Err(e)
            }
            Ok((comm, members, hier)) => {
                let session = Session { peers: members, config: config.clone() };
                let handle = PeerHandle {
                    peer,
                    rank: comm.rank(),
                    device,
                    comm_device,
                    session,
                    comm,
                    hier,
                    reset: AtomicBool::new(false),
                    finished: AtomicBool::new(false),
                    op_lock: Mutex::new(()),
                };
                peers.insert(peer, Entry::Active(Arc::new(handle)));
                Ok(())
            }
        }
    }

    /// The handle of a registered peer.
    pub(crate) fn handle(&self, peer: PeerId, op: &str) -> Result<Arc<PeerHandle<B>>> {
        match lock(&self.peers).get(&peer) {
            Some(Entry::Active(h)) => Ok(h.clone()),
            Some(Entry::Joining(_)) => Err(CollectiveError::invalid(format!(
                "peer {peer} has not finished registering: {op} can only be called once register::<{}>() returned",
                backend::<B>()
            ))
            .with_op(format!("{op} on peer {peer}"))),
            None => Err(not_registered::<B>(peer, op)),
        }
    }

    /// Ends a peer's registration; its communicator is dropped once no op holds it.
    pub(crate) fn finish(&self, peer: PeerId) -> Result<()> {
        let mut peers = lock(&self.peers);
        match peers.get(&peer) {
            Some(Entry::Active(h)) => {
                h.finished.store(true, Ordering::SeqCst);
                let handle = peers.remove(&peer);
                drop(peers);
                drop(handle);
                Ok(())
            }
            Some(Entry::Joining(_)) => Err(CollectiveError::invalid(format!(
                "peer {peer} is still registering: finish_collective ends a registration that register returned"
            ))
            .with_op(format!("finish_collective on peer {peer}"))),
            None => Err(not_registered::<B>(peer, "finish_collective")),
        }
    }

    /// Discards every registration and wakes everyone who waits.
    pub(crate) fn reset(&self) {
        let active: Vec<Arc<PeerHandle<B>>> = std::mem::take(&mut *lock(&self.peers))
            .into_values()
            .filter_map(|e| match e {
                Entry::Active(h) => Some(h),
                Entry::Joining(_) => None,
            })
            .collect();
        lobby::cancel(
            &self.lobby,
            CollectiveError::new(ErrorKind::Aborted, format!("reset_collective::<{}>() ran", backend::<B>())),
        );
        let why = CollectiveError::new(ErrorKind::Aborted, format!("reset_collective::<{}>() ran", backend::<B>()));
        lock(&self.meeting).values().for_each(|a| a.abort(why.clone()));
        // Mark every handle before aborting any: an abort wakes the other peers of the
        // communicator, and they must already know that a reset is why.
        active.iter().for_each(|h| h.reset.store(true, Ordering::SeqCst));
        active.iter().for_each(|h| h.comm.abort());
    }
}

/// Peers brought different configs to one round of the lobby.
fn config_mismatch(d: &Disagreement<'_>) -> CollectiveError {
    let side = |pick: fn(&Difference) -> &String| {
        d.differences.iter().map(|d| format!("{} = {}", d.name, pick(d))).collect::<Vec<_>>().join(", ")
    };
    CollectiveError::new(
        ErrorKind::Mismatch,
        format!(
            "peers registered with different CollectiveConfigs: peer(s) {} with {}, but peer {} with {}; \
             every peer must pass the same config",
            list(d.waiting.iter().copied().map(PeerId::new)),
            side(|x| &x.room),
            d.newcomer,
            side(|x| &x.newcomer),
        ),
    )
    .with_op("register")
    .with_hint(
        "build one CollectiveConfig and pass it to every peer's register (the same strategies, number of \
         devices and nodes, and addresses), then register every peer again",
    )
}

fn already_registered<B: Backend>(peer: PeerId, entry: &Entry<B>) -> CollectiveError {
    let why = match entry {
        Entry::Active(h) => format!(
            "it is in a session of {} peers ({}); call finish_collective for it before registering it again",
            h.session.peers.len(),
            list(h.session.peers.iter().copied())
        ),
        Entry::Joining(_) => "another call registered it and is waiting for the other peers".to_string(),
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

fn timeout(peer: PeerId, registered: &[u64], config: &CollectiveConfig) -> CollectiveError {
    let registered: Vec<PeerId> = registered.iter().copied().map(PeerId::new).collect();
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
    .with_hint(
        "register every peer of the session (CollectiveConfig::with_num_devices of them, each on its own thread), \
         or raise CollectiveConfig::with_timeout if some register late; nothing was created: register again",
    )
}
