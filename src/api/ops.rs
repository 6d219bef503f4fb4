//! The peer API's functions. Each operation looks up the calling peer's registration, checks
//! its own arguments, and makes one call on the registration's communicator whose descriptor
//! carries the operation's strategy and the tensor's shape digest, so the core's own message
//! checks catch peers that disagree (broadcast first learns the sender's tensor, see
//! [`super::meta`]). Any failure aborts the registration on every peer (see [`with_peer`]).

use super::call::{accept, core_error, peers_of, tagged, with_peer};
use super::registry::{self, PeerHandle};
use super::{Backend, CollectiveConfig, PeerId, meta};
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::tensor::Tensor;
use crate::types::ReduceOp;

/// Registers `peer` of this process with `B`'s collective service, on `device`, and blocks
/// until `config.num_devices()` peers have registered with identical configs. Call it once per
/// peer, each from its own thread. Ranks follow the order of the peer ids.
///
/// # Errors
/// - `InvalidArgument` when the config is inconsistent ([`CollectiveConfig::validate`]) or the
///   peer is already registered (waiting, or in a session it has not finished);
/// - with several nodes (see the [module docs](super#several-nodes)): `Timeout` when the
///   orchestrator or another node does not come in time, `Mismatch` when nodes' configs
///   differ, `Io` when `node_address:data_service_port` cannot be bound;
/// - `Mismatch` on every waiting peer (and on later arrivals of the same round) when peers
///   pass different configs, naming the settings that differ;
/// - `Timeout` after `config.timeout()` naming the peers that never registered;
/// - `Aborted` when [`reset_collective`] runs while it waits.
///
/// ```
/// use std::time::Duration;
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{ErrorKind, HostDevice};
/// let config = CollectiveConfig::default().with_num_devices(2).with_timeout(Duration::from_millis(50));
/// // Peer 1 never comes: peer 0 times out, and the error names peer 1.
/// let err = api::register::<HostBackend>(PeerId::new(0), HostDevice::default(), config).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Timeout);
/// assert!(err.to_string().contains("peer(s) 1 never registered"), "{err}");
/// ```
pub fn register<B: Backend>(peer: PeerId, device: B::Device, config: CollectiveConfig) -> Result<()> {
    let op = || format!("register(peer {peer})");
    config.validate().map_err(|e| e.with_op(op()))?;
    registry::service::<B>()?.register(peer, device, &config).map_err(|e| e.with_op(op()))
}

/// Ends `peer`'s session cleanly: its registration and communicators are released, and once
/// every peer of the session has finished, the same ids can register again (a finished peer
/// may register for the next session at once). Call it after the peer's last operation; a
/// peer still waiting for it in an operation fails with `PeerLost` instead of hanging.
///
/// # Errors
/// `InvalidArgument` when `peer` is not registered (never registered, already finished, or
/// discarded by [`reset_collective`]) or is still registering.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{ErrorKind, HostDevice};
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, HostDevice::default(), CollectiveConfig::default())?;
/// api::finish_collective::<HostBackend>(peer)?;
/// let again = api::finish_collective::<HostBackend>(peer).unwrap_err();
/// assert_eq!(again.kind(), ErrorKind::InvalidArgument);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn finish_collective<B: Backend>(peer: PeerId) -> Result<()> {
    registry::service::<B>()?.finish(peer)
}

/// Resets `B`'s collective service in this process: discards every registration and all
/// in-flight state, and wakes every blocked caller — a peer waiting in `register` (for the
/// other peers, or, with several nodes, for the other nodes through the orchestrator) and a
/// peer inside an operation all return `Aborted` promptly. Afterwards every peer must
/// register again. (A node's leader already joining the leaders' communicator, after the
/// orchestrator answered, finishes that join first; its own timeout bounds it.)
///
/// It does **not** complete the operations in flight, does not checkpoint or flush anything,
/// and gives no way to recover their data: tensors passed to interrupted operations are lost.
/// Use [`finish_collective`] for a normal end.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{ErrorKind, HostDevice};
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, HostDevice::default(), CollectiveConfig::default())?;
/// api::reset_collective::<HostBackend>();
/// assert_eq!(api::barrier::<HostBackend>(peer).unwrap_err().kind(), ErrorKind::InvalidArgument);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn reset_collective<B: Backend>() {
    if let Ok(service) = registry::service::<B>() {
        service.reset();
    }
}

/// Reduces `tensor` across every registered peer with `op` and returns the result to each
/// (on the peer's own device). When another handle still shares `tensor`'s memory, the result
/// is a new tensor and that memory is left as it was, so the other handle still sees the
/// input; when the caller handed over the only handle, the result is written into that memory
/// (nobody can see the input change, and nothing is allocated). Every peer must pass a tensor
/// of the same shape and dtype and the same `op`
/// ([`ReduceOperation::Mean`](super::ReduceOperation::Mean) or any [`ReduceOp`]). Runs the
/// config's local all_reduce strategy.
///
/// # Errors
/// Any error aborts the registration on every peer (see the [module docs](super#errors-and-where-they-are-reported)):
/// - `InvalidArgument` when `peer` is not registered (nothing is aborted then), or its tensor is
///   on another device than the one it registered — the other peers get `InvalidArgument`
///   naming it;
/// - `Unsupported` for a dtype outside [`Backend::FLOAT_DTYPES`] (the others: `InvalidArgument`);
/// - `Mismatch` when peers pass different shapes, dtypes or reduce ops, or call a different
///   operation;
/// - `Timeout`, `PeerLost` or `Aborted` as for any collective (a peer that never calls, one
///   that finished, a reset).
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
/// use ruccl::{HostDevice, Tensor};
/// let config = CollectiveConfig::default().with_num_devices(2);
/// let peers: Vec<_> = (0..2u32)
///     .map(|i| {
///         let config = config.clone();
///         std::thread::spawn(move || -> ruccl::Result<(Vec<f32>, Vec<f32>)> {
///             let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
///             api::register::<HostBackend>(peer, dev, config)?;
///             let t = Tensor::from_slice(&dev, &[i as f32, 4.0], &[2])?;
///             let alias = Tensor::from_buffer(&dev, t.buffer().clone(), t.dtype(), t.shape())?;
///             let mean = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Mean)?;
///             api::finish_collective::<HostBackend>(peer)?;
///             Ok((mean.to_vec::<f32>()?, alias.to_vec::<f32>()?))
///         })
///     })
///     .collect();
/// for (i, p) in peers.into_iter().enumerate() {
///     let (mean, input) = p.join().unwrap()?;
///     assert_eq!(mean, vec![0.5, 4.0]);
///     assert_eq!(input, vec![i as f32, 4.0]); // the input is untouched
/// }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn all_reduce<B: Backend>(
    peer: PeerId,
    tensor: B::FloatTensorPrimitive,
    op: impl Into<ReduceOp>,
) -> Result<B::FloatTensorPrimitive> {
    let op = op.into();
    with_peer::<B, _>(peer, "all_reduce", |h| {
        let t = accept(h, tensor, Some(op))?;
        if let Some(hier) = &h.hier {
            return Ok(B::from_ruccl(super::hier::all_reduce(h, hier, &t, op)?, &h.device)?);
        }
        let strategy = h.session.config.local_all_reduce_strategy();
        let what = |t: &Tensor<_>| format!("{op} over a {:?} {} tensor, strategy {strategy}", t.shape(), t.dtype());
        let comm = tagged(h, Some(strategy), t.shape());
        let fail = |t: &Tensor<_>, e| core_error(h, "all_reduce", &what(t), e);
        let out = if h.comm_device.is_exclusive(t.buffer()) {
            // Nothing else can see the tensor's memory: the result goes there.
            let mut t = t;
            comm.all_reduce(&mut t, op).map_err(|e| fail(&t, e))?;
            t
        } else {
            let mut out = Tensor::zeros(&h.comm_device, t.dtype(), t.shape())?;
            comm.all_reduce_into(&mut out, &t, op).map_err(|e| fail(&t, e))?;
            out
        };
        Ok(B::from_ruccl(out, &h.device)?)
    })
}

/// Reduces `tensor` across every registered peer into `root`: the root gets `Some(result)`,
/// the others `None`. As in [`all_reduce`], memory another handle still shares is never
/// written (the root's result is then a new tensor), while a tensor whose only handle was
/// handed over is reduced in its own memory. Every peer passes the same `root`, `op`, shape
/// and dtype. Runs the config's local reduce strategy.
///
/// # Errors
/// As [`all_reduce`]; also `InvalidArgument` when `root` is not a registered peer, and
/// `Mismatch` when peers name different roots.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
/// use ruccl::{HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, dev, CollectiveConfig::default())?;
/// let t = Tensor::from_slice(&dev, &[3.0f64], &[1])?;
/// let out = api::reduce::<HostBackend>(peer, t, ReduceOperation::Sum, peer)?;
/// assert_eq!(out.map(|t| t.to_vec::<f64>()).transpose()?, Some(vec![3.0]));
/// api::finish_collective::<HostBackend>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn reduce<B: Backend>(
    peer: PeerId,
    tensor: B::FloatTensorPrimitive,
    op: impl Into<ReduceOp>,
    root: PeerId,
) -> Result<Option<B::FloatTensorPrimitive>> {
    let op = op.into();
    with_peer::<B, _>(peer, "reduce", |h| {
        let t = accept(h, tensor, Some(op))?;
        if let Some(hier) = &h.hier {
            let out = super::hier::reduce(h, hier, &t, op, root)?;
            return Ok(out.map(|o| B::from_ruccl(o, &h.device)).transpose()?);
        }
        let root = h.rank_of(root).ok_or_else(|| {
            CollectiveError::invalid(format!("root peer {root} is not one of the registered peers ({})", peers_of(h)))
        })?;
        let strategy = h.session.config.local_reduce_strategy();
        let what = |t: &Tensor<_>| {
            format!(
                "{op} over a {:?} {} tensor to peer {}, strategy {strategy}",
                t.shape(),
                t.dtype(),
                h.session.peers[root]
            )
        };
        let comm = tagged(h, Some(strategy), t.shape());
        let fail = |t: &Tensor<_>, e| core_error(h, "reduce", &what(t), e);
        let out = if h.comm_device.is_exclusive(t.buffer()) {
            // Nothing else can see the tensor's memory: the result goes there (a non-root's
            // tensor is dropped).
            let mut t = t;
            comm.reduce(&mut t, op, root).map_err(|e| fail(&t, e))?;
            t
        } else {
            // Only the root's output is written; the others bind an empty one.
            let shape: &[usize] = if h.rank == root { t.shape() } else { &[0] };
            let mut out = Tensor::zeros(&h.comm_device, t.dtype(), shape)?;
            comm.reduce_into(&mut out, &t, op, root).map_err(|e| fail(&t, e))?;
            out
        };
        if h.rank == root { Ok(Some(B::from_ruccl(out, &h.device)?)) } else { Ok(None) }
    })
}

/// Sends one peer's tensor to every peer: exactly one peer passes `Some(tensor)`, the others
/// `None` and learn its dtype and shape from it; everyone returns the sender's tensor on their
/// own device (the sender gets its own back). Runs the config's local broadcast strategy,
/// after a small all_gather through which the peers find the sender.
///
/// # Errors
/// As [`all_reduce`]; also, on every peer, `InvalidArgument` when no peer sends and
/// `Mismatch` when several do (naming them) — these two leave the registration usable.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{DType, HostDevice, Tensor};
/// let config = CollectiveConfig::default().with_num_devices(2);
/// let peers: Vec<_> = (0..2u32)
///     .map(|i| {
///         let config = config.clone();
///         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
///             let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
///             api::register::<HostBackend>(peer, dev, config)?;
///             let mine = (i == 1).then(|| Tensor::from_slice(&dev, &[7.0f32, 8.0], &[1, 2])).transpose()?;
///             let t = api::broadcast::<HostBackend>(peer, mine)?;
///             assert_eq!((t.shape(), t.dtype()), (&[1, 2][..], DType::F32));
///             api::finish_collective::<HostBackend>(peer)?;
///             t.to_vec::<f32>()
///         })
///     })
///     .collect();
/// for p in peers {
///     assert_eq!(p.join().unwrap()?, vec![7.0, 8.0]);
/// }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn broadcast<B: Backend>(peer: PeerId, tensor: Option<B::FloatTensorPrimitive>) -> Result<B::FloatTensorPrimitive> {
    with_peer::<B, _>(peer, "broadcast", |h| {
        let mine = tensor.map(|t| accept(h, t, None)).transpose()?;
        if let Some(hier) = &h.hier {
            return Ok(B::from_ruccl(super::hier::broadcast(h, hier, mine)?, &h.device)?);
        }
        let sent = meta::exchange(&h.comm, &h.session.peers, mine.as_ref())
            .map_err(|f| f.map(|e| core_error(h, "broadcast", "its metadata", e)))?;
        let mut t = match mine {
            Some(t) => t,
            None => Tensor::zeros(&h.comm_device, sent.dtype, &sent.shape)?,
        };
        let strategy = h.session.config.local_broadcast_strategy();
        let what = || format!("a {:?} {} tensor from peer {}", sent.shape, sent.dtype, h.session.peers[sent.root]);
        tagged(h, Some(strategy), &sent.shape)
            .broadcast(&mut t, sent.root)
            .map_err(|e| core_error(h, "broadcast", &what(), e))?;
        Ok(B::from_ruccl(t, &h.device)?)
    })
}

/// Concatenates every peer's tensor along the first dimension, in peer-id order, and returns
/// the result to every peer: shape `[n * d0, d1, …]` from `[d0, d1, …]` (a scalar gives
/// `[n]`). Every peer passes the same shape and dtype.
///
/// # Errors
/// As [`all_reduce`] (without the reduce op).
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let peer = PeerId::new(5);
/// api::register::<HostBackend>(peer, dev, CollectiveConfig::default())?;
/// let t = api::all_gather::<HostBackend>(peer, Tensor::from_slice(&dev, &[1.0f32, 2.0], &[1, 2])?)?;
/// assert_eq!(t.shape(), &[1, 2]);
/// api::finish_collective::<HostBackend>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn all_gather<B: Backend>(peer: PeerId, tensor: B::FloatTensorPrimitive) -> Result<B::FloatTensorPrimitive> {
    with_peer::<B, _>(peer, "all_gather", |h| {
        let n = total_peers(h);
        let t = accept(h, tensor, None)?;
        let shape = match t.shape() {
            [] => Some(vec![n]),
            [d0, rest @ ..] => d0.checked_mul(n).map(|d| [&[d], rest].concat()),
        };
        let shape =
            shape.ok_or_else(|| CollectiveError::invalid(format!("{:?} x {n} peers is too large", t.shape())))?;
        if let Some(hier) = &h.hier {
            return Ok(B::from_ruccl(super::hier::all_gather(h, hier, &t, &shape)?, &h.device)?);
        }
        let mut out = Tensor::zeros(&h.comm_device, t.dtype(), &shape)?;
        let what = || format!("a {:?} {} tensor", t.shape(), t.dtype());
        tagged(h, None, t.shape())
            .all_gather_into_tensor(&mut out, &t)
            .map_err(|e| core_error(h, "all_gather", &what(), e))?;
        Ok(B::from_ruccl(out, &h.device)?)
    })
}

/// Reduces every peer's tensor with `op`, splits the result along the first dimension into as
/// many equal blocks as there are peers, and returns block `k` to the `k`-th peer in id order:
/// shape `[d0 / n, d1, …]`. `d0` must be divisible by the number of peers.
///
/// # Errors
/// As [`all_reduce`]; also `InvalidArgument` for a scalar or a first dimension not divisible
/// by the number of peers.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
/// use ruccl::{HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, dev, CollectiveConfig::default())?;
/// let t = Tensor::from_slice(&dev, &[1.0f32, 2.0], &[2])?;
/// let t = api::reduce_scatter::<HostBackend>(peer, t, ReduceOperation::Sum)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0]);
/// api::finish_collective::<HostBackend>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn reduce_scatter<B: Backend>(
    peer: PeerId,
    tensor: B::FloatTensorPrimitive,
    op: impl Into<ReduceOp>,
) -> Result<B::FloatTensorPrimitive> {
    let op = op.into();
    with_peer::<B, _>(peer, "reduce_scatter", |h| {
        let n = total_peers(h);
        let t = accept(h, tensor, Some(op))?;
        let shape = match t.shape() {
            [d0, rest @ ..] if d0 % n == 0 => [&[d0 / n], rest].concat(),
            other => {
                return Err(CollectiveError::invalid(format!(
                    "reduce_scatter splits the first dimension among {n} peers, but the tensor has shape {other:?}"
                ))
                .into());
            }
        };
        if let Some(hier) = &h.hier {
            return Ok(B::from_ruccl(super::hier::reduce_scatter(h, hier, &t, op, &shape)?, &h.device)?);
        }
        let mut out = Tensor::zeros(&h.comm_device, t.dtype(), &shape)?;
        let what = || format!("{op} over a {:?} {} tensor", t.shape(), t.dtype());
        tagged(h, None, t.shape())
            .reduce_scatter_tensor(&mut out, &t, op)
            .map_err(|e| core_error(h, "reduce_scatter", &what(), e))?;
        Ok(B::from_ruccl(out, &h.device)?)
    })
}

/// Returns once every registered peer has called `barrier`.
///
/// # Errors
/// `InvalidArgument` when `peer` is not registered; `Mismatch` on every peer when another
/// peer called a different operation; `Timeout`, `PeerLost` or `Aborted` as for any
/// collective.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::HostDevice;
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, HostDevice::default(), CollectiveConfig::default())?;
/// api::barrier::<HostBackend>(peer)?;
/// api::finish_collective::<HostBackend>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn barrier<B: Backend>(peer: PeerId) -> Result<()> {
    with_peer::<B, _>(peer, "barrier", |h| {
        if let Some(hier) = &h.hier {
            return super::hier::barrier(h, hier);
        }
        Ok(h.comm.barrier().map_err(|e| core_error(h, "barrier", "", e))?)
    })
}

/// Every registered peer, on every node.
fn total_peers<B: Backend>(h: &PeerHandle<B>) -> usize {
    match &h.hier {
        Some(hier) => hier.nodes.iter().map(Vec::len).sum(),
        None => h.session.peers.len(),
    }
}
