//! The peer API's functions. Each operation looks up the calling peer's registration, checks
//! its own arguments, runs the agreement step (see [`super::agree`]), and only then moves
//! tensor data, on the communicator of the operation's strategy.

use super::agree::{self, Agreement, Call, Record, Shape, WORDS};
use super::registry::{self, PeerHandle};
use super::{Backend, CollectiveConfig, PeerId};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::{DType, Rank, ReduceOp};

/// Registers `peer` of this process with `B`'s collective service, on `device`, and blocks
/// until `config.num_devices()` peers have registered with identical configs. Call it once per
/// peer, each from its own thread. Ranks follow the order of the peer ids.
///
/// # Errors
/// - `InvalidArgument` when the config is inconsistent ([`CollectiveConfig::validate`]) or the
///   peer is already registered (waiting, or in a session it has not finished);
/// - `Unsupported` when the config asks for more than one node;
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
    config.check_supported().map_err(|e| e.with_op(op()))?;
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
/// in-flight state, and wakes every blocked caller — a peer waiting in `register` and a peer
/// inside an operation both return `Aborted` promptly. Afterwards every peer must register
/// again.
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
/// (on the peer's own device). Every peer must pass a tensor of the same shape and dtype and
/// the same `op` ([`ReduceOperation::Mean`](super::ReduceOperation::Mean) or any
/// [`ReduceOp`]). Runs the config's local all_reduce strategy.
///
/// # Errors
/// - `InvalidArgument` when `peer` is not registered, or its tensor is on another device than
///   the one it registered (the other peers get `InvalidArgument` naming it);
/// - `Unsupported` for a dtype outside [`Backend::FLOAT_DTYPES`];
/// - `Mismatch` on every peer when peers pass different shapes, dtypes or reduce ops, or call
///   a different operation;
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
///         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
///             let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
///             api::register::<HostBackend>(peer, dev, config)?;
///             let t = Tensor::from_slice(&dev, &[i as f32, 4.0], &[2])?;
///             let t = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Mean)?;
///             api::finish_collective::<HostBackend>(peer)?;
///             t.to_vec::<f32>()
///         })
///     })
///     .collect();
/// for p in peers {
///     assert_eq!(p.join().unwrap()?, vec![0.5, 4.0]);
/// }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub fn all_reduce<B: Backend>(
    peer: PeerId,
    tensor: B::FloatTensorPrimitive,
    op: impl Into<ReduceOp>,
) -> Result<B::FloatTensorPrimitive> {
    let op = op.into();
    with_peer::<B, _>(peer, Call::AllReduce, |h| {
        let t = accept(h, tensor, Some(op));
        let rec = Record { op: Some(op), ..describe(Call::AllReduce, t.as_ref().ok()) };
        agreement(h, rec, t.as_ref().err())?;
        let mut t = t?;
        let comm = h.comm(h.session.config.local_all_reduce_strategy());
        comm.all_reduce(&mut t, op).map_err(|e| core_error(h, Call::AllReduce, e))?;
        B::from_ruccl(t, &h.device)
    })
}

/// Reduces `tensor` across every registered peer into `root`: the root gets `Some(result)`,
/// the others `None`. Every peer passes the same `root`, `op`, shape and dtype. Runs the
/// config's local reduce strategy.
///
/// # Errors
/// As [`all_reduce`]; also `InvalidArgument` when `root` is not a registered peer, and
/// `Mismatch` on every peer when peers name different roots.
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
    with_peer::<B, _>(peer, Call::Reduce, |h| {
        let root_rank = h.rank_of(root);
        let t = accept(h, tensor, Some(op)).and_then(|t| match root_rank {
            Some(r) => Ok((t, r)),
            None => Err(CollectiveError::invalid(format!(
                "root peer {root} is not one of the registered peers ({})",
                peers_of(h)
            ))),
        });
        let rec = Record { op: Some(op), root: root_rank, ..describe(Call::Reduce, t.as_ref().ok().map(|x| &x.0)) };
        agreement(h, rec, t.as_ref().err())?;
        let (mut t, root) = t?;
        let comm = h.comm(h.session.config.local_reduce_strategy());
        comm.reduce(&mut t, op, root).map_err(|e| core_error(h, Call::Reduce, e))?;
        if h.rank == root { B::from_ruccl(t, &h.device).map(Some) } else { Ok(None) }
    })
}

/// Sends one peer's tensor to every peer: exactly one peer passes `Some(tensor)`, the others
/// `None`; everyone returns the sender's tensor on their own device (the sender gets its own
/// back). Runs the config's local broadcast strategy.
///
/// # Errors
/// As [`all_reduce`]; also, on every peer, `InvalidArgument` when no peer sends and
/// `Mismatch` when several do (naming them).
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId};
/// use ruccl::{HostDevice, Tensor};
/// let config = CollectiveConfig::default().with_num_devices(2);
/// let peers: Vec<_> = (0..2u32)
///     .map(|i| {
///         let config = config.clone();
///         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
///             let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
///             api::register::<HostBackend>(peer, dev, config)?;
///             let mine = (i == 1).then(|| Tensor::from_slice(&dev, &[7.0f32, 8.0], &[1, 2])).transpose()?;
///             let t = api::broadcast::<HostBackend>(peer, mine)?;
///             assert_eq!(t.shape(), &[1, 2]);
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
    with_peer::<B, _>(peer, Call::Broadcast, |h| {
        let sender = tensor.is_some();
        let t = tensor.map(|t| accept(h, t, None)).transpose();
        let rec = Record { sender, ..describe(Call::Broadcast, t.as_ref().ok().and_then(Option::as_ref)) };
        let agreed = agreement(h, rec, t.as_ref().err())?;
        let root = agreed.root.ok_or_else(|| CollectiveError::protocol("broadcast agreed on no sender"))?;
        let dims = full_shape(h, &agreed, root, t.as_ref().ok().and_then(Option::as_ref))?;
        let mut t = match t? {
            Some(t) => t,
            None => {
                let dtype = agreed.dtype.ok_or_else(|| CollectiveError::protocol("the sender sent no dtype"))?;
                Tensor::zeros(&h.comm_device, dtype, &dims)?
            }
        };
        let comm = h.comm(h.session.config.local_broadcast_strategy());
        comm.broadcast(&mut t, root).map_err(|e| core_error(h, Call::Broadcast, e))?;
        B::from_ruccl(t, &h.device)
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
    with_peer::<B, _>(peer, Call::AllGather, |h| {
        let n = h.session.peers.len();
        let t = accept(h, tensor, None).and_then(|t| {
            let shape = match t.shape() {
                [] => Some(vec![n]),
                [d0, rest @ ..] => d0.checked_mul(n).map(|d| [&[d], rest].concat()),
            };
            let shape =
                shape.ok_or_else(|| CollectiveError::invalid(format!("{:?} x {n} peers is too large", t.shape())))?;
            let out = Tensor::zeros(&h.comm_device, t.dtype(), &shape)?;
            Ok((t, out))
        });
        agreement(h, describe(Call::AllGather, t.as_ref().ok().map(|x| &x.0)), t.as_ref().err())?;
        let (t, mut out) = t?;
        h.control().all_gather_into_tensor(&mut out, &t).map_err(|e| core_error(h, Call::AllGather, e))?;
        B::from_ruccl(out, &h.device)
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
    with_peer::<B, _>(peer, Call::ReduceScatter, |h| {
        let n = h.session.peers.len();
        let t = accept(h, tensor, Some(op)).and_then(|t| {
            let shape = match t.shape() {
                [d0, rest @ ..] if d0 % n == 0 => [&[d0 / n], rest].concat(),
                other => {
                    return Err(CollectiveError::invalid(format!(
                        "reduce_scatter splits the first dimension among {n} peers, but the tensor has shape {other:?}"
                    )));
                }
            };
            let out = Tensor::zeros(&h.comm_device, t.dtype(), &shape)?;
            Ok((t, out))
        });
        let rec = Record { op: Some(op), ..describe(Call::ReduceScatter, t.as_ref().ok().map(|x| &x.0)) };
        agreement(h, rec, t.as_ref().err())?;
        let (t, mut out) = t?;
        h.control().reduce_scatter_tensor(&mut out, &t, op).map_err(|e| core_error(h, Call::ReduceScatter, e))?;
        B::from_ruccl(out, &h.device)
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
    with_peer::<B, _>(peer, Call::Barrier, |h| agreement(h, Record::new(Call::Barrier), None).map(|_| ()))
}

/// Runs `body` for a registered peer, its operations serialised, with errors labelled.
fn with_peer<B: Backend, R>(peer: PeerId, call: Call, body: impl FnOnce(&PeerHandle<B>) -> Result<R>) -> Result<R> {
    let label = || format!("{} on peer {peer}", call.name());
    let h = registry::service::<B>()?.handle(peer, call.name())?;
    let _serial = h.lock_ops();
    body(&h).map_err(|e| e.with_op(label()))
}

fn peers_of<B: Backend>(h: &PeerHandle<B>) -> String {
    h.session.peers.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// A core error, restated for peers: ranks are positions among the registered peers, and a
/// reset is named as the cause of an abort.
fn core_error<B: Backend>(h: &PeerHandle<B>, call: Call, e: CollectiveError) -> CollectiveError {
    core_error_in(h, call, "moving the data", e)
}

fn core_error_in<B: Backend>(h: &PeerHandle<B>, call: Call, phase: &str, e: CollectiveError) -> CollectiveError {
    let label = format!("{} on peer {}", call.name(), h.peer);
    if h.was_reset() && e.kind() == ErrorKind::Aborted {
        return CollectiveError::new(
            ErrorKind::Aborted,
            format!(
                "reset_collective discarded peer {}'s registration while its {} was in flight; the operation did not \
                 complete",
                h.peer,
                call.name()
            ),
        )
        .with_op(label);
    }
    let ranks: Vec<String> = h.session.peers.iter().enumerate().map(|(r, p)| format!("rank {r} = peer {p}")).collect();
    let mut out = CollectiveError::new(
        e.kind(),
        format!(
            "{} (while {phase}, in the core's {}; {})",
            e.message(),
            e.context().op.as_deref().unwrap_or("op"),
            ranks.join(", ")
        ),
    )
    .with_op(label);
    if let Some(p) = e.context().peer {
        out = out.with_peer(p);
    }
    if let Some(s) = e.context().seq {
        out = out.with_seq(s);
    }
    if let Some(r) = e.report() {
        out = out.with_report(r.to_string());
    }
    out.with_source(e)
}

/// Checks a peer's tensor and hands it to ruCCL.
fn accept<B: Backend>(
    h: &PeerHandle<B>,
    tensor: B::FloatTensorPrimitive,
    op: Option<ReduceOp>,
) -> Result<Tensor<B::CommDevice>> {
    let device = B::float_device(&tensor);
    if device != h.device {
        return Err(CollectiveError::invalid(format!(
            "the tensor is on {device:?}, but peer {} registered {:?}",
            h.peer, h.device
        )));
    }
    let t = B::to_ruccl(tensor, &h.comm_device)?;
    let dtype = t.dtype();
    if !B::FLOAT_DTYPES.contains(&dtype) || !h.comm_device.supports(dtype) {
        let names: Vec<&str> = B::FLOAT_DTYPES.iter().map(|d| d.name()).collect();
        return Err(CollectiveError::new(
            ErrorKind::Unsupported,
            format!(
                "the tensor holds {dtype}, but {} float tensors on {} hold only {}",
                std::any::type_name::<B>(),
                h.comm_device.describe(),
                names.join(", ")
            ),
        ));
    }
    if let Some(ReduceOp::PreMulSum(s)) = op
        && !s.is_finite()
    {
        return Err(CollectiveError::invalid(format!("PreMulSum scalar {s} is not finite")));
    }
    Ok(t)
}

fn describe<D: Device>(call: Call, t: Option<&Tensor<D>>) -> Record {
    Record { dtype: t.map(Tensor::dtype), shape: t.map(|t| Shape::of(t.shape())), ..Record::new(call) }
}

/// The agreement step: every peer's record, all-gathered; the same verdict on every peer.
/// A peer whose own arguments failed returns its own error once the others know.
fn agreement<B: Backend>(h: &PeerHandle<B>, mut rec: Record, local: Option<&CollectiveError>) -> Result<Agreement> {
    let call = rec.call;
    rec.failed = local.is_some();
    let n = h.session.peers.len();
    let mine = Tensor::from_slice(&h.comm_device, &rec.encode(), &[WORDS])?;
    let mut all = Tensor::zeros(&h.comm_device, DType::U32, &[WORDS * n])?;
    h.control()
        .all_gather_into_tensor(&mut all, &mine)
        .map_err(|e| core_error_in(h, call, "running the agreement step", e))?;
    let words = all.to_vec::<u32>()?;
    let records = words.chunks(WORDS).map(Record::decode).collect::<Result<Vec<_>>>()?;
    let verdict = agree::agree(&records, &h.session.peers);
    match local {
        Some(e) => Err(e.clone()),
        None => verdict,
    }
}

/// More dimensions than any real tensor has: a record claiming more is corrupt.
const MAX_NDIM: usize = 1 << 16;

/// The sender's full shape: from the record when it holds every dimension, else broadcast by
/// the sender in a second step (every peer knows the rank of the shape from the record).
fn full_shape<B: Backend>(
    h: &PeerHandle<B>,
    agreed: &Agreement,
    root: Rank,
    mine: Option<&Tensor<B::CommDevice>>,
) -> Result<Vec<usize>> {
    let shape = agreed.shape.as_ref().ok_or_else(|| CollectiveError::protocol("the sender sent no shape"))?;
    if let Some(dims) = shape.dims() {
        return Ok(dims);
    }
    let ndim = usize::try_from(shape.ndim)
        .ok()
        .filter(|&d| d <= MAX_NDIM)
        .ok_or_else(|| CollectiveError::protocol(format!("the sender's tensor has {} dimensions", shape.ndim)))?;
    let words: Vec<u32> = match mine {
        Some(t) => t.shape().iter().flat_map(|&d| [d as u32, (d as u64 >> 32) as u32]).collect(),
        None => vec![0; 2 * ndim],
    };
    let mut t = Tensor::from_slice(&h.comm_device, &words, &[2 * ndim])?;
    h.control().broadcast(&mut t, root).map_err(|e| core_error(h, Call::Broadcast, e))?;
    let words = t.to_vec::<u32>()?;
    let dims: Vec<usize> = words.chunks(2).map(|w| (u64::from(w[0]) | u64::from(w[1]) << 32) as usize).collect();
    if Shape::of(&dims) != *shape {
        return Err(CollectiveError::protocol("the sender's full shape does not match its record"));
    }
    Ok(dims)
}
