//! `Communicator`: one per rank. Each public method describes its call, has it checked in
//! [`validate`], and hands it to [`Communicator::submit`], the single path to the scheduler.
//! The rules callers follow are on the [`Communicator`] type's docs (this module is private).

mod blocks;
mod collectives;
pub(crate) mod flight;
mod p2p;
pub(crate) mod rendezvous;
mod split;
pub(crate) mod tagged;
mod validate;
pub(crate) mod watch;

use std::sync::{Arc, Mutex};

pub use flight::{FLIGHT_DEPTH, FlightEntry, OpState};

use crate::algo;
use crate::config::CommConfig;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpDesc;
use crate::sched::{self, Binding, Bindings, Now, OpCtx, Staging};
use crate::transport::{Link, inproc::Fabric};
use crate::types::{Rank, ReduceOp, Scale};
use crate::unique_id::UniqueId;
use flight::Board;
use validate::{Call, Io};

/// State every rank of one communicator shares.
#[derive(Debug)]
pub(crate) struct Shared {
    id: UniqueId,
    name: String,
    world: usize,
    link: Link,
    board: Board,
    config: CommConfig,
    /// This group's claim on `id` (see [`rendezvous`]); dropped with the last rank.
    instance: rendezvous::Instance,
}

impl Shared {
    pub(crate) fn new(id: UniqueId, world: usize, config: CommConfig, instance: rendezvous::Instance) -> Self {
        Shared {
            name: id.short(),
            id,
            world,
            link: Link::InProc(Arc::new(Fabric::new(world))),
            board: Board::new(world, config.warn_after()),
            config,
            instance,
        }
    }
}

/// Per-rank state, locked for the duration of one op.
struct Local<D: Device> {
    seq: u64,
    p2p_sent: Vec<u64>,
    p2p_received: Vec<u64>,
    splits: u64,
    failed: Option<CollectiveError>,
    scratch: Option<D::Buffer>,
    premul: Option<D::Buffer>,
    staging: Staging,
}

/// One rank's handle on a group of ranks that run collectives together.
///
/// Today every rank is a thread of one process: make one [`UniqueId`], hand a clone to one
/// thread per rank, and build each rank's communicator on its own thread (below).
/// `Communicator` is `Send + Sync`; calls on one communicator are serialised.
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
    shared: Arc<Shared>,
    local: Mutex<Local<D>>,
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
    /// the missing ranks (with the `tracing` feature).
    pub fn new(device: D, world_size: usize, unique_id: UniqueId, rank: Rank) -> Result<Self> {
        Self::with_config(device, world_size, unique_id, rank, CommConfig::from_env()?)
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
        if world_size == 0 {
            return Err(CollectiveError::invalid("world_size must be at least 1").with_op("Communicator::new"));
        }
        if rank >= world_size {
            return Err(CollectiveError::invalid(format!("rank {rank} is out of range for world_size {world_size}"))
                .with_op("Communicator::new"));
        }
        let shared = rendezvous::join(&unique_id, world_size, rank, &config)?;
        Ok(Self::from_shared(device, shared, rank))
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
        let seat = rendezvous::lobby::join(lobby, world_size, key, terms, &config)?;
        Ok((Self::from_shared(device, seat.shared, seat.rank), seat.members))
    }

    fn from_shared(device: D, shared: Arc<Shared>, rank: Rank) -> Self {
        let world_size = shared.world;
        Communicator {
            device,
            rank,
            local: Mutex::new(Local {
                seq: 0,
                p2p_sent: vec![0; world_size],
                p2p_received: vec![0; world_size],
                splits: 0,
                failed: None,
                scratch: None,
                premul: None,
                staging: Staging::default(),
            }),
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

    /// This rank's recent operations, oldest first (at most
    /// [`FLIGHT_DEPTH`](crate::FLIGHT_DEPTH)).
    pub fn flight_recorder(&self) -> Vec<FlightEntry> {
        self.shared.board.history(self.rank)
    }

    /// Aborts the communicator on every rank: any waiting or later call, on any rank, fails
    /// with `Aborted` promptly. Safe to call from another thread while a collective runs.
    ///
    /// ```
    /// use ruccl::{Communicator, ErrorKind, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// comm.abort();
    /// assert_eq!(comm.barrier().unwrap_err().kind(), ErrorKind::Aborted);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn abort(&self) {
        self.shared.link.poison(
            CollectiveError::new(ErrorKind::Aborted, format!("rank {} called abort()", self.rank)).with_rank(self.rank),
        );
    }

    /// Whether this communicator can still run operations.
    pub fn is_usable(&self) -> bool {
        self.shared.link.poisoned().is_none() && self.lock().failed.is_none()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Local<D>> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The single path from a public method to the scheduler.
    fn submit(&self, call: Call<'_, D>) -> Result<()> {
        let world = self.shared.world;
        let (desc, io) = validate::validate(&call, self.rank, world, &self.device)
            .map_err(CollectiveError::on_usable_communicator)?;
        let mut local = self.lock();
        if let Some(e) = &local.failed {
            return Err(CollectiveError::new(
                ErrorKind::Aborted,
                format!("this communicator failed earlier: {}", e.quoted()),
            )
            .with_rank(self.rank)
            .with_op(desc.to_string()));
        }
        if let Some(e) = self.shared.link.poisoned() {
            // Where this call stands relative to the op that failed decides what it reports:
            // the original error if it is that op (arriving late) or past it, `Aborted` if not.
            let now = if desc.kind.is_collective() { Now::Collective(local.seq) } else { Now::NewP2p };
            let err = sched::after_failure(&e, self.rank, now).with_op(desc.to_string());
            local.failed = Some(err.clone());
            return Err(err);
        }
        if !self.device.supports(desc.dtype) {
            return Err(CollectiveError::unsupported(format!(
                "{} cannot run kernels on {}",
                self.device.describe(),
                desc.dtype
            ))
            .with_rank(self.rank)
            .with_op(desc.to_string()));
        }
        let seq = next_seq(&mut local, &desc);
        let result = self.run(&mut local, &desc, io, seq);
        if let Err(e) = &result {
            local.failed = Some(e.clone());
        }
        result
    }

    fn run(&self, local: &mut Local<D>, desc: &OpDesc, io: Io<'_, D::Buffer>, seq: u64) -> Result<()> {
        let world = self.shared.world;
        let cfg = &self.shared.config;
        let size = desc.dtype.size();
        let chunk = (cfg.chunk_bytes() / size).max(1);
        let plan = algo::build(desc, self.rank, world, cfg.algorithm(), chunk);
        let ctx_err = |e: CollectiveError| e.with_rank(self.rank).with_op(desc.to_string()).with_seq(seq);
        self.shared.board.start(self.rank, seq, *desc, plan.algorithm);
        #[cfg(feature = "tracing")]
        let _span = tracing::debug_span!("collective", comm = %self.shared.name, rank = self.rank, op = %desc, seq, bytes = desc.bytes(), algorithm = %plan.algorithm).entered();
        let ctx = OpCtx {
            rank: self.rank,
            world,
            seq,
            p2p: !desc.kind.is_collective(),
            fp: desc.fingerprint(),
            deadline: crate::config::deadline_after(cfg.timeout()),
            dtype: desc.dtype,
            combine: desc.op.map_or(crate::types::Combine::Sum, ReduceOp::combine),
            link: &self.shared.link,
            board: &self.shared.board,
            comm_name: &self.shared.name,
        };
        let dev = &self.device;
        let out = (|| {
            let scratch_bytes = plan.scratch_elems * size;
            ensure(dev, &mut local.scratch, scratch_bytes)?;
            let mut io = io;
            if let Some(ReduceOp::PreMulSum(s)) = desc.op {
                let bytes = io.input_elems * size;
                ensure(dev, &mut local.premul, bytes)?;
                if let (Binding::Contig { buf, base, .. }, Some(pre)) = (&io.input, &local.premul) {
                    dev.scale(buf, *base, pre, 0, io.input_elems, desc.dtype, Scale::MulBy(s))?;
                    io.input = Binding::Contig { buf: pre, base: 0, id: dev.mem_id(pre) };
                }
            }
            let bindings = Bindings {
                input: io.input,
                output: io.output,
                scratch: match &local.scratch {
                    Some(b) => Binding::Contig { buf: b, base: 0, id: dev.mem_id(b) },
                    None => Binding::Unbound,
                },
            };
            sched::execute(dev, &plan, &bindings, &ctx, &mut local.staging)?;
            dev.synchronize(Some(ctx.deadline))
        })()
        .map_err(ctx_err);
        if let Err(e) = &out {
            // A failure before or after the plan ran (scratch allocation, a device error)
            // must stop the peers at once too, not leave them waiting out the timeout.
            sched::fail(&ctx, e);
        }
        self.shared.board.finish(self.rank, out.is_ok());
        out
    }
}

fn next_seq<D: Device>(local: &mut Local<D>, desc: &OpDesc) -> u64 {
    let counter = match (desc.kind, desc.peer) {
        (crate::op::OpKind::Send, Some(p)) => &mut local.p2p_sent[p],
        (crate::op::OpKind::Recv, Some(p)) => &mut local.p2p_received[p],
        _ => &mut local.seq,
    };
    let s = *counter;
    *counter += 1;
    s
}

/// Makes `slot` hold a buffer of at least `bytes` (reused across ops, grown when needed).
/// Even for 0 bytes: plans of empty ops still name zero-length scratch spans, which must
/// resolve to a bound buffer.
fn ensure<D: Device>(dev: &D, slot: &mut Option<D::Buffer>, bytes: usize) -> Result<()> {
    if slot.as_ref().is_some_and(|b| dev.len(b) >= bytes) {
        return Ok(());
    }
    *slot = Some(dev.alloc(bytes)?);
    Ok(())
}

impl<D: Device> Drop for Communicator<D> {
    fn drop(&mut self) {
        self.shared.board.depart(self.rank);
        self.shared.link.depart(self.rank);
    }
}
