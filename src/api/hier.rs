//! The peer API's operations across several nodes ([`super::node`]): each is a local step on
//! the node's communicator, a global step among the nodes' leaders, and a local step back.
//! A leader whose global step fails fails its node's communicator (and the leaders' one, see
//! `ops::with_peer`), so every peer of every node gets the error rather than a hang.

use super::meta;
use super::node::{Hierarchy, global_error};
use super::ops::{Failure, core_error, tagged};
use super::registry::PeerHandle;
use super::{Backend, PeerId, Strategy};
use crate::comm::Communicator;
use crate::comm::tagged::Tags;
use crate::error::CollectiveError;
use crate::op::shape_hash;
use crate::tensor::Tensor;
use crate::types::ReduceOp;

type Out<T> = std::result::Result<T, Failure>;

/// The leaders' communicator, on a leader.
fn global<B: Backend>(hier: &Hierarchy<B::CommDevice>) -> Option<&Communicator<B::CommDevice>> {
    hier.global.as_ref()
}

/// The operator the leaders combine the nodes' partial results with.
fn global_op(op: ReduceOp) -> ReduceOp {
    match op {
        // The scalar was applied inside each node.
        ReduceOp::PreMulSum(_) => ReduceOp::Sum,
        // The mean of the nodes' means: every node has the same number of peers.
        o => o,
    }
}

fn gtag<'g, D: crate::device::Device>(
    g: &'g Communicator<D>,
    s: Strategy,
    shape: &[usize],
) -> crate::comm::tagged::Tagged<'g, D> {
    g.tagged(Tags { algorithm: Some(s.algorithm()), shape: Some(shape_hash(shape)) })
}

/// Local reduce to the leader, all_reduce among the leaders, local broadcast.
pub(super) fn all_reduce<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    t: &Tensor<B::CommDevice>,
    op: ReduceOp,
) -> Out<Tensor<B::CommDevice>> {
    let cfg = &h.session.config;
    let (local, shape, dev) = (cfg.local_all_reduce_strategy(), t.shape(), &h.comm_device);
    let what = || format!("{op} over a {shape:?} {} tensor across {} nodes", t.dtype(), hier.nodes.len());
    let err = |e| core_error(h, "all_reduce", &what(), e);
    let mut part = Tensor::zeros(dev, t.dtype(), if h.rank == 0 { shape } else { &[0] })?;
    tagged(h, Some(local), shape).reduce_into(&mut part, t, op, 0).map_err(err)?;
    let mut out = Tensor::zeros(dev, t.dtype(), shape)?;
    if let Some(g) = global::<B>(hier) {
        gtag(g, cfg.global_all_reduce_strategy(), shape)
            .all_reduce_into(&mut out, &part, global_op(op))
            .map_err(|e| global_error(hier.node, &hier.nodes, "all_reduce", e))?;
    }
    tagged(h, Some(local), shape).broadcast(&mut out, 0).map_err(err)?;
    Ok(out)
}

/// Local reduce to each leader, reduce among the leaders to the root's node, and there from
/// its leader to the root.
pub(super) fn reduce<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    t: &Tensor<B::CommDevice>,
    op: ReduceOp,
    root: PeerId,
) -> Out<Option<Tensor<B::CommDevice>>> {
    let home = hier.node_of(root).ok_or_else(|| {
        CollectiveError::invalid(format!("root peer {root} is on none of the nodes ({})", hier.describe()))
    })?;
    let cfg = &h.session.config;
    let (local, shape, dev) = (cfg.local_reduce_strategy(), t.shape(), &h.comm_device);
    let what = || format!("{op} over a {shape:?} {} tensor to peer {root} (node {home})", t.dtype());
    let err = |e| core_error(h, "reduce", &what(), e);
    let leader = h.rank == 0;
    let mut part = Tensor::zeros(dev, t.dtype(), if leader { shape } else { &[0] })?;
    tagged(h, Some(local), shape).reduce_into(&mut part, t, op, 0).map_err(err)?;
    let here = hier.node == home;
    let mut out = Tensor::zeros(dev, t.dtype(), if here { shape } else { &[0] })?;
    if let Some(g) = global::<B>(hier) {
        gtag(g, cfg.global_reduce_strategy(), shape)
            .reduce_into(&mut out, &part, global_op(op), home)
            .map_err(|e| global_error(hier.node, &hier.nodes, "reduce", e))?;
    }
    if !here {
        return Ok(None);
    }
    let root_rank = h.rank_of(root).unwrap_or(0);
    if root_rank != 0 {
        // The leader holds the result; the root's node passes it on (the others discard it).
        tagged(h, Some(local), shape).broadcast(&mut out, 0).map_err(err)?;
    }
    Ok((h.peer == root).then_some(out))
}

/// The sender's node learns the tensor; the leaders agree on the sending node and broadcast
/// it; every other node learns it from its leader.
pub(super) fn broadcast<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    mine: Option<Tensor<B::CommDevice>>,
) -> Out<Tensor<B::CommDevice>> {
    let cfg = &h.session.config;
    let (local, dev) = (cfg.local_broadcast_strategy(), &h.comm_device);
    let abort = |f: Failure| match f {
        Failure::Agreed(e) | Failure::Abort(e) => Failure::Abort(e),
    };
    let err = |e| core_error(h, "broadcast", "", e);
    let here = meta::exchange_any(&h.comm, &h.session.peers, mine.as_ref()).map_err(abort)?;
    let mut data = match (&here, mine) {
        (Some(_), Some(t)) => Some(t),
        (Some(s), None) => Some(Tensor::zeros(dev, s.dtype, &s.shape)?),
        (None, _) => None,
    };
    if let (Some(s), Some(t)) = (&here, data.as_mut()) {
        tagged(h, Some(local), &s.shape).broadcast(t, s.root).map_err(err)?;
    }
    if let Some(g) = global::<B>(hier) {
        let sent = meta::exchange_any(g, &hier.leaders(), data.as_ref())
            .map_err(abort)?
            .ok_or_else(|| CollectiveError::invalid("no peer of any node passed Some(tensor) to broadcast"))?;
        let mut t = match data.take() {
            Some(t) => t,
            None => Tensor::zeros(dev, sent.dtype, &sent.shape)?,
        };
        gtag(g, cfg.global_broadcast_strategy(), &sent.shape)
            .broadcast(&mut t, sent.root)
            .map_err(|e| global_error(hier.node, &hier.nodes, "broadcast", e))?;
        data = Some(t);
    }
    if here.is_none() {
        let sent = meta::exchange(&h.comm, &h.session.peers, data.as_ref()).map_err(abort)?;
        let mut t = match data.take() {
            Some(t) => t,
            None => Tensor::zeros(dev, sent.dtype, &sent.shape)?,
        };
        tagged(h, Some(local), &sent.shape).broadcast(&mut t, sent.root).map_err(err)?;
        data = Some(t);
    }
    data.ok_or_else(|| Failure::Abort(CollectiveError::protocol("broadcast ended without the tensor")))
}

/// Local barrier, barrier among the leaders, local barrier.
pub(super) fn barrier<B: Backend>(h: &PeerHandle<B>, hier: &Hierarchy<B::CommDevice>) -> Out<()> {
    let err = |e| core_error(h, "barrier", "", e);
    h.comm.barrier().map_err(err)?;
    if let Some(g) = global::<B>(hier) {
        g.barrier().map_err(|e| global_error(hier.node, &hier.nodes, "barrier", e))?;
    }
    h.comm.barrier().map_err(err)?;
    Ok(())
}
