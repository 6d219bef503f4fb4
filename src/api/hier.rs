//! The peer API's operations across several nodes ([`super::node`]): each is a local step on
//! the node's communicator, a global step among the nodes' leaders, and a local step back.
//! Blocks that follow peer ids (all_gather's output, reduce_scatter's input) are laid out
//! node by node for the leaders' step, and put back in peer-id order on the leader (device
//! copies; nothing when nodes hold consecutive ids, the usual layout).
//! A leader whose global step fails fails its node's communicator (and the leaders' one, see
//! `call::with_peer`), so every peer of every node gets the error rather than a hang.
//! With a pipelining chunk set (`CollectiveConfig::with_pipeline_chunk_bytes`: by default
//! 4 MiB for broadcast, off for all_reduce and reduce), these ops on tensors of at least two
//! chunks run their stages chunk by chunk, at once ([`pipeline`]), under the same rule.

use super::call::{Failure, core_error, tagged};
use super::meta;
use super::node::{Hierarchy, global_error};
use super::pipeline;
use super::registry::PeerHandle;
use super::{Backend, PeerId, Strategy};
use crate::comm::Communicator;
use crate::comm::tagged::Tags;
use crate::device::{Device, Range};
use crate::error::{CollectiveError, Result};
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
    g.tagged(Tags { algorithm: Some(s.algorithm()), shape: Some(shape_hash(shape)), part_of: None })
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
    let mut out = Tensor::zeros(dev, t.dtype(), shape)?;
    if let Some(ranges) = pipeline::chunks(t.numel(), t.dtype().size(), cfg.pipeline_chunk_bytes()) {
        let global = global::<B>(hier)
            .map(|g| pipeline::Global::AllReduce(gtag(g, cfg.global_all_reduce_strategy(), shape), global_op(op)));
        let st = pipeline::Stages {
            call: "all_reduce",
            what: what(),
            local: tagged(h, Some(local), shape),
            op,
            global,
            broadcast: true,
        };
        pipeline::run(h, hier, &st, [t, &part, &out], &ranges)?;
        return Ok(out);
    }
    tagged(h, Some(local), shape).reduce_into(&mut part, t, op, 0).map_err(err)?;
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
    let here = hier.node == home;
    let mut out = Tensor::zeros(dev, t.dtype(), if here { shape } else { &[0] })?;
    // The leader holds the result; the root's node passes it on (the others discard it).
    let root_rank = h.rank_of(root).unwrap_or(0);
    if let Some(ranges) = pipeline::chunks(t.numel(), t.dtype().size(), cfg.pipeline_chunk_bytes()) {
        let global = global::<B>(hier)
            .map(|g| pipeline::Global::Reduce(gtag(g, cfg.global_reduce_strategy(), shape), global_op(op), home));
        let st = pipeline::Stages {
            call: "reduce",
            what: what(),
            local: tagged(h, Some(local), shape),
            op,
            global,
            broadcast: here && root_rank != 0,
        };
        pipeline::run(h, hier, &st, [t, &part, &out], &ranges)?;
        return Ok((h.peer == root).then_some(out));
    }
    tagged(h, Some(local), shape).reduce_into(&mut part, t, op, 0).map_err(err)?;
    if let Some(g) = global::<B>(hier) {
        gtag(g, cfg.global_reduce_strategy(), shape)
            .reduce_into(&mut out, &part, global_op(op), home)
            .map_err(|e| global_error(hier.node, &hier.nodes, "reduce", e))?;
    }
    if !here {
        return Ok(None);
    }
    if root_rank != 0 {
        tagged(h, Some(local), shape).broadcast(&mut out, 0).map_err(err)?;
    }
    Ok((h.peer == root).then_some(out))
}

/// Every peer learns who sends first — its node, then (leaders) which node, then (the other
/// nodes) from its leader — and then the data moves: the sender's node learns the tensor,
/// the leaders broadcast it from the sender's node, and every other node learns it from its
/// leader; stage by stage, or chunk by chunk at once ([`pipeline::chain`]).
pub(super) fn broadcast<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    mine: Option<Tensor<B::CommDevice>>,
) -> Out<Tensor<B::CommDevice>> {
    let cfg = &h.session.config;
    let dev = &h.comm_device;
    let abort = |f: Failure| match f {
        Failure::Agreed(e) | Failure::Abort(e) => Failure::Abort(e),
    };
    let zeros = |s: &meta::Sent| Tensor::zeros(dev, s.dtype, &s.shape);
    let here = meta::exchange_any(&h.comm, &h.session.peers, mine.as_ref()).map_err(abort)?;
    let mut data = match (&here, mine) {
        (Some(_), Some(t)) => Some(t),
        (Some(s), None) => Some(zeros(s)?),
        (None, _) => None,
    };
    let among_leaders = match global::<B>(hier) {
        Some(g) => {
            let sent = meta::exchange_any(g, &hier.leaders(), data.as_ref())
                .map_err(abort)?
                .ok_or_else(|| CollectiveError::invalid("no peer of any node passed Some(tensor) to broadcast"))?;
            if data.is_none() {
                data = Some(zeros(&sent)?);
            }
            Some((g, sent))
        }
        None => None,
    };
    let sender_node = here.is_some();
    let in_node = match here {
        Some(s) => s,
        None => meta::exchange(&h.comm, &h.session.peers, data.as_ref()).map_err(abort)?,
    };
    let mut t = match data {
        Some(t) => t,
        None => zeros(&in_node)?,
    };
    let shape = t.shape().to_vec();
    let local = pipeline::Lane {
        comm: tagged(h, Some(cfg.local_broadcast_strategy()), &shape),
        root: in_node.root,
        global: false,
    };
    let leaders = among_leaders.map(|(g, sent)| pipeline::Lane {
        comm: gtag(g, cfg.global_broadcast_strategy(), &shape),
        root: sent.root,
        global: true,
    });
    // The sender's node broadcasts first; another node's leader receives first.
    let (first, then) = match (sender_node, leaders.as_ref()) {
        (false, Some(g)) => (g, Some(&local)),
        (_, g) => (&local, g),
    };
    let what = format!("a {shape:?} {} tensor across {} nodes", t.dtype(), hier.nodes.len());
    if let Some(ranges) = pipeline::chunks(t.numel(), t.dtype().size(), cfg.broadcast_pipeline_chunk_bytes()) {
        pipeline::chain(h, hier, &what, first, then, &t, &ranges)?;
        return Ok(t);
    }
    for lane in std::iter::once(first).chain(then) {
        lane.comm.broadcast(&mut t, lane.root).map_err(|e| match lane.global {
            true => global_error(hier.node, &hier.nodes, "broadcast", e),
            false => core_error(h, "broadcast", &what, e),
        })?;
    }
    Ok(t)
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

/// For each block of the node-by-node layout (node 0's peers, then node 1's, …), the block of
/// the peer-id order that holds the same peer; `None` when the two orders are the same.
fn node_major_to_id_order(hier: &Hierarchy<impl Device>) -> Option<Vec<usize>> {
    let by_node: Vec<PeerId> = hier.nodes.concat();
    let mut by_id = by_node.clone();
    by_id.sort_unstable();
    let pos: Vec<usize> = by_node.iter().map(|p| by_id.binary_search(p).unwrap_or(0)).collect();
    pos.iter().enumerate().any(|(i, &k)| i != k).then_some(pos)
}

/// Moves `src`'s blocks of `block` bytes into a new tensor of the same shape: block `i` of
/// `src` to block `to[i]` (`to` a permutation): every copy enqueued, then waited for.
fn permute_blocks<D: Device>(
    src: &Tensor<D>,
    to: &[usize],
    block: usize,
    timeout: std::time::Duration,
) -> Result<Tensor<D>> {
    let dev = src.device();
    let out = Tensor::zeros(dev, src.dtype(), src.shape())?;
    let deadline = std::time::Instant::now() + timeout;
    let mut copies = Vec::with_capacity(to.len());
    for (i, &k) in to.iter().enumerate() {
        let from = Range::new(src.buffer().clone(), i * block, block);
        let into = Range::new(out.buffer().clone(), k * block, block);
        copies.push(dev.copy(&from, &into)?);
    }
    copies.iter().try_for_each(|done| dev.wait(done, Some(deadline)))?;
    Ok(out)
}

/// The leaders' communicator for a call whose blocks have `shape`, on the core's own choice
/// of algorithm (the configuration has global strategies for all_reduce, reduce and
/// broadcast only).
fn gtag_auto<'g, D: Device>(g: &'g Communicator<D>, shape: &[usize]) -> crate::comm::tagged::Tagged<'g, D> {
    g.tagged(Tags { algorithm: None, shape: Some(shape_hash(shape)), part_of: None })
}

/// Gathers to each node's leader, all-gathers among the leaders, puts the blocks in peer-id
/// order and broadcasts the result inside each node. `shape` is the output's.
pub(super) fn all_gather<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    t: &Tensor<B::CommDevice>,
    shape: &[usize],
) -> Out<Tensor<B::CommDevice>> {
    let (dev, local) = (&h.comm_device, h.session.peers.len());
    let what = || format!("a {:?} {} tensor across {} nodes", t.shape(), t.dtype(), hier.nodes.len());
    let err = |e| core_error(h, "all_gather", &what(), e);
    let leader = h.rank == 0;
    let node_len = [if leader { local * t.numel() } else { 0 }];
    let mut node = Tensor::zeros(dev, t.dtype(), &node_len)?;
    tagged(h, None, t.shape()).gather(leader.then_some(&mut node), t, 0).map_err(err)?;
    let mut out = Tensor::zeros(dev, t.dtype(), shape)?;
    if let Some(g) = global::<B>(hier) {
        let mut by_node = Tensor::zeros(dev, t.dtype(), shape)?;
        gtag_auto(g, t.shape())
            .all_gather_into_tensor(&mut by_node, &node)
            .map_err(|e| global_error(hier.node, &hier.nodes, "all_gather", e))?;
        out = match node_major_to_id_order(hier) {
            Some(to) => permute_blocks(&by_node, &to, t.byte_len(), h.session.config.timeout())?,
            None => by_node,
        };
    }
    tagged(h, None, shape).broadcast(&mut out, 0).map_err(err)?;
    Ok(out)
}

/// Reduces to each node's leader, puts the blocks in node-by-node order there,
/// reduce-scatters among the leaders (each gets its node's blocks) and scatters inside each
/// node. `block` is the output's shape.
pub(super) fn reduce_scatter<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    t: &Tensor<B::CommDevice>,
    op: ReduceOp,
    block: &[usize],
) -> Out<Tensor<B::CommDevice>> {
    let (dev, local) = (&h.comm_device, h.session.peers.len());
    let what = || format!("{op} over a {:?} {} tensor across {} nodes", t.shape(), t.dtype(), hier.nodes.len());
    let err = |e| core_error(h, "reduce_scatter", &what(), e);
    let leader = h.rank == 0;
    let mut part = Tensor::zeros(dev, t.dtype(), if leader { t.shape() } else { &[0] })?;
    tagged(h, None, t.shape()).reduce_into(&mut part, t, op, 0).map_err(err)?;
    let blocks = (t.numel() / block.iter().product::<usize>().max(1)).max(1);
    let node_len = [if leader { local * t.numel() / blocks } else { 0 }];
    let mut node = Tensor::zeros(dev, t.dtype(), &node_len)?;
    if let Some(g) = global::<B>(hier) {
        let by_node = match node_major_to_id_order(hier) {
            Some(to) => {
                // Block `i` of the node-by-node layout is peer-id block `to[i]`: the inverse.
                let mut from = vec![0; to.len()];
                to.iter().enumerate().for_each(|(i, &k)| from[k] = i);
                permute_blocks(&part, &from, t.byte_len() / blocks, h.session.config.timeout())?
            }
            None => part,
        };
        gtag_auto(g, t.shape())
            .reduce_scatter_tensor(&mut node, &by_node, global_op(op))
            .map_err(|e| global_error(hier.node, &hier.nodes, "reduce_scatter", e))?;
    }
    let mut out = Tensor::zeros(dev, t.dtype(), block)?;
    tagged(h, None, t.shape()).scatter(&mut out, leader.then_some(&node), 0).map_err(err)?;
    Ok(out)
}
