//! `Communicator`: one per rank. Each public method describes its call, has it checked in
//! [`validate`], and hands it to [`Communicator::submit`], the single path to the scheduler.
//! The rules callers follow are on the [`Communicator`] type's docs (this module is private).

mod blocks;
mod caller;
mod calls;
mod collectives;
mod exchanged;
pub(crate) mod flight;
mod group;
mod holds;
mod launch;
mod lists;
mod local;
mod memo;
mod nonblocking;
mod objects;
mod p2p;
mod prepare;
mod progress;
pub(crate) mod rendezvous;
mod split;
pub(crate) mod tagged;
mod validate;
pub(crate) mod watch;
mod work;

use std::any::Any;
use std::sync::{Arc, Mutex};

pub use flight::{FLIGHT_DEPTH, FlightEntry, OpState};
pub use group::Group;
pub(crate) use prepare::{Prepared, complete};
use prepare::{exchange_plan, next_seq};
use work::Engine;
pub use work::Work;

use crate::algo;
use crate::config::{CommConfig, Transport};
use crate::device::Device;
use crate::device::Reach;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpDesc;
use crate::sched::Staging;
use crate::transport::{Link, inproc::Fabric};
use crate::types::Rank;
use crate::unique_id::UniqueId;
use flight::Board;

/// State every rank of one communicator shares.
#[derive(Debug)]
pub(crate) struct Shared {
    id: UniqueId,
    pub(crate) name: String,
    pub(crate) world: usize,
    pub(crate) link: Link,
    pub(crate) board: Board,
    pub(crate) config: CommConfig,
    /// Every rank's device, type-erased: how a rank learns what its peers' devices reach.
    devices: Vec<Arc<dyn Any + Send + Sync>>,
    /// This group's claim on `id` (see [`rendezvous`]); dropped with the last rank.
    instance: rendezvous::Instance,
}

impl Shared {
    /// The link the ranks of a new group of `world` named `id` talk over, as `config` asks.
    /// (Built before the group's `Instance`, which must never be dropped under the
    /// registry's lock.)
    ///
    /// # Errors
    /// As [`tcp::setup::loopback`](crate::transport::tcp::setup::loopback).
    pub(crate) fn link_for(id: &UniqueId, world: usize, config: &CommConfig) -> Result<Link> {
        match config.transport() {
            Transport::InProc => Ok(Link::InProc(Arc::new(Fabric::new(world)))),
            Transport::Tcp => {
                let deadline = crate::config::deadline_after(config.timeout());
                let mesh =
                    crate::transport::tcp::setup::loopback(id.comm_bytes(), world, config.peer_silence(), deadline)?;
                Ok(Link::Tcp(Arc::new(mesh)))
            }
        }
    }

    pub(crate) fn new(
        id: UniqueId,
        world: usize,
        config: CommConfig,
        instance: rendezvous::Instance,
        devices: Vec<Arc<dyn Any + Send + Sync>>,
        link: Link,
    ) -> Self {
        Shared {
            devices,
            name: id.short(),
            id,
            world,
            link,
            board: Board::new(world, config.warn_after()),
            config,
            instance,
        }
    }
}

/// One rank's own handle on the shared state. Ops clone it (a counter only this rank
/// writes) rather than the `Arc<Shared>` every rank holds, whose counter would bounce between
/// cores on every op.
#[derive(Debug)]
pub(crate) struct RankShared(pub(crate) Arc<Shared>);

impl std::ops::Deref for RankShared {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// Per-rank state: locked while an op is numbered and prepared, when it completes, and for
/// the whole of a blocking exchanged op that [`submit`](Communicator::submit) runs on its
/// lean path (which takes no other lock).
pub(crate) struct Local<D: Device> {
    seq: u64,
    /// This rank's ops that have a number and have not completed: queued or running
    /// non-blocking ops, a blocking op being driven (outside this lock), a group's ops. Counted
    /// up when an op is prepared, down when it completes, both under this lock; while it is 0
    /// and the lock is held, no op of this rank runs anywhere and none can be numbered.
    in_flight: usize,
    p2p_sent: Vec<u64>,
    p2p_received: Vec<u64>,
    splits: u64,
    failed: Option<CollectiveError>,
    scratch: Option<D::Buffer>,
    premul: Option<D::Buffer>,
    /// The rank's staging memory between ops (`None` until an op sent a message).
    staging: Option<Box<Staging<D::Buffer, D::Event>>>,
    /// The last op's plan: a loop that repeats one call (a training step) builds it once.
    last_plan: Option<(OpDesc, crate::config::Algorithm, usize, Arc<algo::Plan>)>,
    /// The last calls this rank validated (`memo`): a repeat is matched, not checked again.
    memo: memo::Memos,
}

/// One rank's handle on a group of ranks that run collectives together.
///
/// Make one [`UniqueId`], hand it to one thread per rank (a clone) or to other processes (its
/// text or bytes), and build each rank's communicator on its own thread (below); or let a
/// launcher's variables describe the group ([`from_env`](Self::from_env)).
/// `Communicator` is `Send + Sync`: it may be moved to another thread, or handed between
/// threads one call at a time; but a call made while another thread's call on the same
/// communicator is in flight fails with `InvalidArgument` and aborts the communicator (two
/// threads' calls can be ordered differently on each rank, pairing one call's data with
/// another's). Ops that must run at once from several threads need a communicator each
/// ([`split_all`](Self::split_all)). Calls of two threads that do not overlap in time (a
/// non-blocking call is in flight only while it is issued) are not detected: keeping their
/// order the same on every rank is the caller's part.
///
/// # The ordering rule
/// Every rank of a communicator must issue the same collectives, with matching counts,
/// dtypes, reduce ops and roots, in the same order (as with NCCL and torch.distributed).
/// Point-to-point `send`/`recv` pairs must be issued in the same order relative to each
/// other on the two ranks involved. Breaking the rule is reported as a `Mismatch` error on
/// the ranks involved — never a hang or wrong data.
///
/// # Arguments
/// Every method takes its output first and its input second (`all_reduce_into(&mut y, &x,
/// op)`), as NCCL and torch.distributed do; in-place forms take one tensor. Buffers only one
/// rank needs are `Option`s that other ranks may leave `None`: the root's input of
/// [`broadcast_into`](Self::broadcast_into) and [`scatter`](Self::scatter), the root's
/// output of [`gather`](Self::gather).
///
/// # Examples
/// Three ranks, each on its own thread, sum a tensor. The examples of the methods run
/// their ranks the same way through a hidden helper, `on_ranks(world, |comm| ...)`, which
/// returns each rank's result in rank order.
///
/// ```
/// use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
/// let id = UniqueId::new()?;
/// let handles: Vec<_> = (0..3)
///     .map(|rank| {
///         let id = id.clone();
///         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
///             let dev = HostDevice::default();
///             let comm = Communicator::new(dev, 3, id, rank)?;
///             let mut t = Tensor::from_slice(&dev, &[rank as f32; 4], &[4])?;
///             comm.all_reduce(&mut t, ReduceOp::Sum)?;
///             t.to_vec::<f32>()
///         })
///     })
///     .collect();
/// for h in handles {
///     assert_eq!(h.join().unwrap()?, vec![3.0; 4]);
/// }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct Communicator<D: Device> {
    device: D,
    rank: Rank,
    /// How this rank's device reaches each rank's (itself included).
    reach: Arc<[Reach]>,
    shared: Arc<Shared>,
    /// This rank's own handle on `shared`, cloned into every op (see `OpCtx::shared`).
    rank_shared: Arc<RankShared>,
    /// The plan small ops run when every rank is a thread of this process on a host-memory
    /// device (see [`exchange_plan`]); `None` otherwise. The same on every rank. This rank's
    /// own `Arc`, so that cloning it per op touches no counter another rank writes.
    exchange: Option<Arc<algo::Plan>>,
    /// Every rank is a thread of this process on one GPU (one device, not host memory): ops
    /// run unchunked, since pipelining overlaps transfers and there are none (device ranges
    /// are passed between the ranks), while every chunk costs kernel launches and waits. The
    /// same on every rank.
    unchunked: bool,
    /// Counts this rank as live for the waiters' spin policy.
    _live: crate::transport::LiveRank,
    local: Arc<Mutex<Local<D>>>,
    engine: Arc<Engine<D>>,
    /// The thread inside a call of this communicator, if any: a second thread's call is
    /// refused ([`caller`]).
    caller: caller::CallerSlot,
}

impl<D: Device> std::fmt::Debug for Communicator<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator({} rank {}/{} on {})",
            self.shared.name,
            self.rank,
            self.shared.world,
            self.device.describe()
        )
    }
}

impl<D: Device> Communicator<D> {
    /// Joins the communicator named `unique_id` as `rank` of `world_size`, with the default
    /// config and `RUCCL_*` environment overrides ([`CommConfig::from_env`]). Call it once per
    /// rank, each from its own thread; it returns when all ranks have joined.
    ///
    /// # Errors
    /// `InvalidArgument` for a rank out of range, disagreeing world sizes, an id still in use
    /// by a communicator that exists, or an id that two groups join at once (a rank number
    /// joining twice fails everyone waiting in that rendezvous); `Timeout` naming the ranks
    /// that never came. A join that waits longer than [`CommConfig::with_warn_after`] logs
    /// the missing ranks (with the `tracing` feature). For an id made by another process:
    /// `Timeout` naming its root's address when that cannot be reached in time, `Protocol`
    /// when something else answers there, `Io`/`Timeout` when the mesh of TCP connections
    /// cannot be built.
    pub fn new(device: D, world_size: usize, unique_id: UniqueId, rank: Rank) -> Result<Self> {
        let config = CommConfig::from_env().map_err(|e| e.with_rank(rank).with_op("Communicator::new"))?;
        Self::with_config(device, world_size, unique_id, rank, config)
    }

    /// Like [`new`](Self::new) with an explicit config (no environment overrides).
    ///
    /// # Errors
    /// As [`new`](Self::new); also `InvalidArgument` when ranks disagree on the chunk size or
    /// algorithm.
    pub fn with_config(
        device: D,
        world_size: usize,
        unique_id: UniqueId,
        rank: Rank,
        config: CommConfig,
    ) -> Result<Self> {
        crate::types::check_world(world_size).map_err(|e| e.with_rank(rank).with_op("Communicator::new"))?;
        if rank >= world_size {
            return Err(CollectiveError::invalid(format!("rank {rank} is out of range for world_size {world_size}"))
                .with_op("Communicator::new"));
        }
        let shared = rendezvous::join(
            &unique_id,
            world_size,
            &[(rank, Arc::new(device.clone()))],
            device.host_memory(),
            &config,
        )?;
        Ok(Self::from_shared(device, rank, shared, config.shared_progress()))
    }

    /// Joins the lobby named `lobby` as `key`, one of `world_size` members agreeing on
    /// `terms`; ranks follow the keys' order (see [`rendezvous::lobby`]). Returns this
    /// member's communicator and every member's key in rank order.
    pub(crate) fn join_lobby(
        device: D,
        world_size: usize,
        lobby: &UniqueId,
        key: u64,
        terms: &rendezvous::lobby::Terms<'_>,
        config: CommConfig,
    ) -> Result<(Self, std::sync::Arc<[u64]>)> {
        let seat = rendezvous::lobby::join(lobby, world_size, key, Arc::new(device.clone()), terms, &config)?;
        Ok((Self::from_shared(device, seat.rank, seat.shared, config.shared_progress()), seat.members))
    }

    /// Creates the communicators of every rank at once, rank `i` on `devices[i]`, from this
    /// thread (NCCL's `ncclCommInitAll`): no thread per rank is needed to join, and the
    /// returned communicators can be driven together by one thread with a [`Group`].
    ///
    /// `config` is used as given, like [`with_config`](Self::with_config)'s: the `RUCCL_*`
    /// variables (`RUCCL_TIMEOUT`, ...) apply only through [`CommConfig::from_env`], so pass
    /// that (or a config built on it) to honour them.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty list.
    ///
    /// ```
    /// use ruccl::{CommConfig, Communicator, Group, HostDevice, ReduceOp, Tensor};
    /// let comms = Communicator::init_all(vec![HostDevice::default(); 4], CommConfig::default())?;
    /// let mut ts: Vec<_> = (0..4).map(|r| Tensor::from_slice(&HostDevice::default(), &[r as f32], &[1])).collect::<Result<_, _>>()?;
    /// let mut group = Group::new();
    /// for (comm, t) in comms.iter().zip(ts.iter_mut()) {
    ///     group.all_reduce(comm, t, ReduceOp::Sum);
    /// }
    /// group.run()?; // one thread drives all four ranks
    /// for t in &ts {
    ///     assert_eq!(t.to_vec::<f32>()?, vec![6.0]);
    /// }
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn init_all(devices: Vec<D>, config: CommConfig) -> Result<Vec<Self>> {
        let world = devices.len();
        if world == 0 {
            return Err(
                CollectiveError::invalid("init_all needs at least one device").with_op("Communicator::init_all")
            );
        }
        let id = UniqueId::new()?;
        let members: Vec<(Rank, Arc<dyn Any + Send + Sync>)> =
            devices.iter().enumerate().map(|(r, d)| (r, Arc::new(d.clone()) as Arc<dyn Any + Send + Sync>)).collect();
        let shared = rendezvous::join(&id, world, &members, devices.iter().all(D::host_memory), &config)?;
        let progress = config.shared_progress();
        Ok(devices
            .into_iter()
            .enumerate()
            .map(|(rank, d)| Self::from_shared(d, rank, shared.clone(), progress))
            .collect())
    }

    /// This rank's handle on a joined group: how its device reaches each peer's, and who
    /// drives its ops.
    fn from_shared(device: D, rank: Rank, shared: Arc<Shared>, shared_progress: bool) -> Self {
        let world = shared.world;
        let reach: Arc<[Reach]> = shared
            .devices
            .iter()
            .enumerate()
            .map(|(p, other)| match other.downcast_ref::<D>() {
                // A peer across a socket gets host bytes, whatever its device is.
                Some(o) if shared.link.shares_memory(rank, p) => device.reach(o),
                _ => Reach::Host,
            })
            .collect();
        // Threads: every rank's device is here to ask. Processes of one host that agreed on
        // slots at setup: this process's devices (the others' are not here; every process
        // that asks for slots must run host-memory devices, see `shm::slot_agree`).
        let host = |d: &Arc<dyn Any + Send + Sync>| d.downcast_ref::<D>().is_some_and(D::host_memory);
        let exchange = (world > 1
            && match &shared.link {
                Link::InProc(_) => shared.devices.iter().all(host),
                Link::Tcp(_) => {
                    shared.link.has_slots()
                        && device.host_memory()
                        && shared.devices.iter().all(|d| d.downcast_ref::<D>().is_none_or(D::host_memory))
                }
            })
        .then(exchange_plan);
        let first = shared.devices.first().and_then(|d| d.downcast_ref::<D>());
        let unchunked = matches!(shared.link, Link::InProc(_))
            && world > 1
            && first.is_some_and(|f| {
                !f.host_memory()
                    && shared.devices.iter().all(|d| d.downcast_ref::<D>().is_some_and(|o| o.reach(f) == Reach::Same))
            });
        let local = Arc::new(Mutex::new(Local {
            seq: 0,
            in_flight: 0,
            p2p_sent: vec![0; world],
            p2p_received: vec![0; world],
            splits: 0,
            failed: None,
            scratch: None,
            premul: None,
            staging: None,
            last_plan: None,
            memo: memo::Memos::default(),
        }));
        shared.instance.hold();
        // The thread that made it (init_all: one thread for every rank) is its user until a
        // call says otherwise.
        shared.board.note_thread(rank, caller::token());
        Communicator {
            device,
            rank,
            reach,
            local: local.clone(),
            engine: Arc::new(Engine::new(shared.clone(), rank, local, shared_progress)),
            rank_shared: Arc::new(RankShared(shared.clone())),
            exchange,
            unchunked,
            _live: crate::transport::LiveRank::enter(),
            caller: caller::CallerSlot::default(),
            shared,
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.shared.world
    }

    /// The device this rank's tensors live on.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The id the ranks joined with.
    pub fn unique_id(&self) -> &UniqueId {
        &self.shared.id
    }

    /// The config in force (rank 0's chunking and algorithm, this rank's timeout).
    pub fn config(&self) -> &CommConfig {
        &self.shared.config
    }

    /// How this rank's data reaches `peer`: in place in this process, through shared memory
    /// to another process of this host, or over TCP — chosen per pair when the group
    /// formed, as NCCL chooses its transport per peer.
    ///
    /// ```
    /// use ruccl::{CommConfig, Communicator, HostDevice, PeerLink, config::Transport};
    /// let comms = Communicator::init_all(vec![HostDevice::default(); 2], CommConfig::default())?;
    /// assert_eq!(comms[0].peer_link(1)?, PeerLink::InProcess);
    /// assert!(comms[0].peer_link(2).is_err()); // no rank 2
    /// // Each rank its own loopback endpoint, as if every rank were a process of its own:
    /// let tcp = CommConfig::default().with_transport(Transport::Tcp);
    /// let comms = Communicator::init_all(vec![HostDevice::default(); 2], tcp)?;
    /// assert_eq!(comms[1].peer_link(0)?, PeerLink::Tcp);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` for a peer outside `0..world_size`.
    pub fn peer_link(&self, peer: Rank) -> Result<crate::types::PeerLink> {
        if peer >= self.shared.world {
            return Err(CollectiveError::invalid(format!(
                "peer_link({peer}): no such rank (the world has {} ranks: 0..{})",
                self.shared.world, self.shared.world
            ))
            .with_rank(self.rank)
            .with_peer(peer));
        }
        Ok(self.shared.link.peer_link(self.rank, peer))
    }

    /// This rank's recent operations, oldest first (at most
    /// [`FLIGHT_DEPTH`](crate::FLIGHT_DEPTH)).
    pub fn flight_recorder(&self) -> Vec<FlightEntry> {
        self.shared.board.history(self.rank)
    }

    /// Aborts the communicator on every rank: any waiting or later call, on any rank, fails
    /// with `Aborted` promptly. Safe to call from another thread while a collective runs.
    /// The calls of this process fail at once; over sockets `abort` itself returns once the
    /// news is written to every peer (at most 2 s, for a peer that does not read), so that
    /// the process may exit right after and the peers still read why.
    ///
    /// ```
    /// use ruccl::{Communicator, ErrorKind, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// comm.abort();
    /// assert_eq!(comm.barrier().unwrap_err().kind(), ErrorKind::Aborted);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn abort(&self) {
        self.shared.link.abort(
            self.rank,
            CollectiveError::new(ErrorKind::Aborted, format!("rank {} called abort()", self.rank))
                .with_rank(self.rank)
                .with_hint("create a new communicator (this one was aborted by abort() on the rank named above)"),
        );
    }

    /// A handle that aborts this communicator as [`abort`](Self::abort) does, held apart from
    /// it (by a registry that must wake a registration still forming).
    pub(crate) fn aborter(&self) -> Aborter {
        Aborter { shared: self.shared.clone(), rank: self.rank }
    }

    /// The failure that aborted this communicator, if one did (another rank's, relayed, or
    /// this rank's own once a peer heard of it).
    pub(crate) fn poison(&self) -> Option<CollectiveError> {
        self.shared.link.poisoned(self.rank)
    }

    /// Whether this communicator can still run operations. Never waits for an op another
    /// thread is running on it (that op's own failure, if any, shows once it is over).
    pub fn is_usable(&self) -> bool {
        if self.shared.link.poisoned(self.rank).is_some() {
            return false;
        }
        match self.local.try_lock() {
            Ok(local) => local.failed.is_none(),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner().failed.is_none(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }

    /// Enters a call (`what`: the op, for the error) from this thread: see [`caller`]. A
    /// second thread's call is refused and aborts the communicator.
    #[inline]
    pub(crate) fn enter(&self, what: impl FnOnce() -> String) -> Result<caller::Entered<'_>> {
        let entered = self.caller.enter().map_err(|()| self.entered_twice(what()))?;
        if let Some(t) = entered.thread() {
            self.shared.board.note_thread(self.rank, t);
        }
        Ok(entered)
    }

    #[cold]
    fn entered_twice(&self, what: String) -> CollectiveError {
        let e = CollectiveError::invalid(format!(
            "{what} was called on rank {}'s communicator while another thread's call on it was in flight: calls on \
             one communicator come from one thread at a time, in the same order on every rank (two threads' calls \
             can be ordered differently on each rank, combining the data of different calls); the communicator is \
             aborted, and its peers' ops fail too",
            self.rank
        ))
        .with_rank(self.rank)
        .with_op(what)
        .with_hint(caller::ONE_THREAD_HINT);
        self.poison_now(e.clone());
        e
    }

    /// Fails this communicator with `e` at once, without the rank's lock (an op of another
    /// thread may hold it while it waits: the poison wakes it, and its peers).
    pub(crate) fn poison_now(&self, e: CollectiveError) {
        self.shared.link.poison(self.rank, e.with_rank(self.rank));
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Local<D>> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Aborts one rank's communicator from elsewhere ([`Communicator::aborter`]).
pub(crate) struct Aborter {
    shared: Arc<Shared>,
    rank: Rank,
}

impl Aborter {
    /// Aborts the communicator with `err` (every waiting or later call fails with it).
    pub(crate) fn abort(&self, err: CollectiveError) {
        self.shared.link.poison(self.rank, err.with_rank(self.rank));
    }
}

/// Dropping never waits for an op: over sockets it waits only until its goodbyes are written
/// (at most 2 s, for a peer that does not read), so that a process may exit right after. Non-blocking ops issued before the drop still run to their end (or
/// fail at their own deadline) and complete their [`Work`](crate::Work); the peers see this
/// rank leave once they are done, as `ncclCommDestroy` flushes what was issued.
impl<D: Device> Drop for Communicator<D> {
    fn drop(&mut self) {
        self.engine.leave();
    }
}
