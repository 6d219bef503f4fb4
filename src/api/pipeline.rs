//! The multi-node all_reduce, reduce and broadcast of large tensors, pipelined by chunk. all_reduce and reduce: the node's
//! reduce to its leader, the leaders' step and the node's broadcast back run on chunks of the
//! tensor (views, no copies), each chunk's next stage issued as soon as its previous one
//! completes, so that the node's communicator and the leaders' one work at once.
//!
//! Order: a communicator runs its ops in issue order, so every rank issues the same
//! sequence. On the node's communicator: the reduces of chunks 0..n, then the broadcasts of
//! chunks 0..n (the leader issues chunk c's once the leaders' step on c has completed; the
//! other peers issue them all at once, queued behind the reduces). On the leaders' one: the
//! steps of chunks 0..n, each issued once the chunk's reduce has completed.
//!
//! Broadcast across nodes ([`chain`]) has two stages per chunk on different communicators:
//! on the sender's node, the node's broadcast and then (its leader) the leaders'; on every
//! other node, the leaders' broadcast (its leader) and then the node's. Each chunk's second
//! stage is issued once its first has completed, so the sender's node broadcasts chunk c + 1
//! while the leaders carry chunk c and the other nodes pass on chunk c - 1.
//!
//! Errors: the first failure of any chunk aborts the registration on every peer of every
//! node at once (as `call::with_peer` does for any failure), then every op this peer issued
//! is waited for — the failed communicators end them without their deadline — so that
//! nothing of the call outlives it.

use super::Backend;
use super::call::{Failure, abort, core_error};
use super::node::{Hierarchy, global_error};
use super::registry::PeerHandle;
use crate::comm::Work;
use crate::comm::tagged::Tagged;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::{Rank, ReduceOp};

/// The leaders' step on each chunk.
pub(super) enum Global<'g, D: Device> {
    /// all_reduce (`all_reduce_into`, the partial result into the output).
    AllReduce(Tagged<'g, D>, ReduceOp),
    /// reduce to the leaders' rank `root` (`reduce_into`).
    Reduce(Tagged<'g, D>, ReduceOp, Rank),
}

/// One pipelined op, as a peer runs it.
pub(super) struct Stages<'a, D: Device> {
    /// The peer API's call, for errors.
    pub call: &'static str,
    /// What this peer called it with, for a `Mismatch`.
    pub what: String,
    /// The node's communicator, tagged for the call.
    pub local: Tagged<'a, D>,
    /// The node's reduce's operator.
    pub op: ReduceOp,
    /// The leaders' step, on the leader only.
    pub global: Option<Global<'a, D>>,
    /// Whether the leader broadcasts the result in the node afterwards.
    pub broadcast: bool,
}

/// How many of its node's ops a peer keeps issued and unfinished: enough for the stages to
/// overlap, few enough that queued ops do not each take staging memory of their own.
const WINDOW: usize = 4;

/// The most chunks an op is cut into: a larger tensor gets larger chunks, so that a small
/// chunk setting costs a bounded number of ops (three per chunk).
const MAX_CHUNKS: usize = 256;

/// The chunks (first element, length) a tensor of `numel` elements of `size` bytes runs in
/// with chunks of `chunk_bytes`, when it is pipelined: at least two whole chunks.
pub(super) fn chunks(numel: usize, size: usize, chunk_bytes: usize) -> Option<Vec<(usize, usize)>> {
    let per = chunk_bytes / size.max(1);
    if chunk_bytes == 0 || per == 0 || numel / per < 2 {
        return None;
    }
    Some(crate::algo::chunks(0, numel, per.max(numel.div_ceil(MAX_CHUNKS))).collect())
}

/// Chunk `(start, len)` of `t`; an empty tensor (a peer that receives nothing) stays empty.
fn piece<D: Device>(t: &Tensor<D>, (start, len): (usize, usize)) -> Result<Tensor<D>> {
    if t.numel() == 0 { t.narrow(0, 0) } else { t.narrow(start, len) }
}

/// Runs the stages on every chunk of `ranges`: the node's reduce of `input` into `part` (the
/// leader's partial result; empty elsewhere), the leaders' step from `part` into `output`,
/// and the node's broadcast of `output`.
///
/// # Errors
/// The first chunk's failure, restated for peers; the registration is then aborted.
pub(super) fn run<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    st: &Stages<'_, B::CommDevice>,
    bufs: [&Tensor<B::CommDevice>; 3],
    ranges: &[(usize, usize)],
) -> std::result::Result<(), Failure> {
    finish(h, hier, (st.call, &st.what), 3 * ranges.len(), |issued| steps(h, hier, st, bufs, ranges, issued))
}

/// Runs `ops`, which issues the call's ops onto `issued` (with whether each runs among the
/// leaders) and waits for them; on its failure, aborts the registration with the first
/// cause and waits for every op issued, so that nothing of the call outlives it.
fn finish<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    call: (&'static str, &str),
    capacity: usize,
    ops: impl FnOnce(&mut Vec<(Work, bool)>) -> Result<()>,
) -> std::result::Result<(), Failure> {
    let mut issued = Vec::with_capacity(capacity);
    let Err(trigger) = ops(&mut issued) else { return Ok(()) };
    // What failed first may not be what this peer met first (a later op's issue refused as
    // the communicator had failed meanwhile): the peers are told the cause.
    let cause = first_cause(h, hier, call, &issued).or_else(|| poison_cause(h, hier, call)).unwrap_or(trigger);
    abort(h, call.0, &cause);
    // Every communicator this peer issued on is failed now: each op ends at once.
    issued.iter().for_each(|(w, _)| drop(w.wait()));
    Err(Failure::Abort(first_cause(h, hier, call, &issued).unwrap_or(cause)))
}

/// The error of the first finished op of `issued` that failed for a reason of its own, not
/// cut short (`Aborted`) by another's failure, restated for peers.
fn first_cause<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    (call, what): (&'static str, &str),
    issued: &[(Work, bool)],
) -> Option<CollectiveError> {
    issued.iter().filter(|(w, _)| w.is_completed()).find_map(|(w, global)| {
        let e = w.wait().err().filter(|e| e.kind() != ErrorKind::Aborted)?;
        Some(if *global { global_error(hier.node, &hier.nodes, call, e) } else { core_error(h, call, what, e) })
    })
}

/// The failure that poisoned the node's (or the leaders') communicator, restated for peers,
/// as though this peer had met it in the op that failed. Every op of a pipelined call is one
/// peer-API call: a chunk of it cut short by a peer's failure in a later chunk (the leader
/// runs ahead of its node) reports that failure's kind — a `Mismatch` — not `Aborted`.
fn poison_cause<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    (call, what): (&'static str, &str),
) -> Option<CollectiveError> {
    let global = || hier.global.as_ref()?.first_failure().map(|e| global_error(hier.node, &hier.nodes, call, e));
    h.comm.first_failure().map(|e| core_error(h, call, what, e)).or_else(global)
}

/// One stage of a [`chain`]: a broadcast from `root` on a communicator.
pub(super) struct Lane<'a, D: Device> {
    /// The node's or the leaders' communicator, tagged for the call.
    pub comm: Tagged<'a, D>,
    /// The sender, a rank of `comm`.
    pub root: Rank,
    /// Whether `comm` is the leaders'.
    pub global: bool,
}

/// Broadcasts every chunk (`ranges`) of `t` through `first` and then, once that chunk's
/// `first` broadcast has completed, through `then` (on a leader): see the module docs. A
/// peer keeps at most [`WINDOW`] of its `first` broadcasts issued and unfinished. `what`
/// describes the call for errors.
///
/// # Errors
/// As [`run`].
pub(super) fn chain<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    what: &str,
    first: &Lane<'_, B::CommDevice>,
    then: Option<&Lane<'_, B::CommDevice>>,
    t: &Tensor<B::CommDevice>,
    ranges: &[(usize, usize)],
) -> std::result::Result<(), Failure> {
    let call = "broadcast";
    let err = |global: bool, e| {
        if global { global_error(hier.node, &hier.nodes, call, e) } else { core_error(h, call, what, e) }
    };
    let issue = |lane: &Lane<'_, B::CommDevice>, c: usize, issued: &mut Vec<(Work, bool)>| -> Result<()> {
        let w = lane.comm.broadcast_async(&piece(t, ranges[c])?, lane.root).map_err(|e| err(lane.global, e))?;
        issued.push((w, lane.global));
        Ok(())
    };
    finish(h, hier, (call, what), 2 * ranges.len(), |issued| {
        let (n, window) = (ranges.len(), WINDOW.min(ranges.len()));
        // Where chunk `c`'s first broadcast is in `issued`.
        let mut firsts = Vec::with_capacity(n);
        let retire = |c: usize, issued: &mut Vec<(Work, bool)>, firsts: &[usize]| -> Result<()> {
            issued[firsts[c]].0.wait().map_err(|e| err(first.global, e))?;
            then.map_or(Ok(()), |lane| issue(lane, c, issued))
        };
        for c in 0..n {
            if c >= window {
                retire(c - window, issued, &firsts)?;
            }
            firsts.push(issued.len());
            issue(first, c, issued)?;
        }
        for c in n.saturating_sub(window)..n {
            retire(c, issued, &firsts)?;
        }
        issued.iter().try_for_each(|(w, global)| w.wait().map_err(|e| err(*global, e)))
    })
}

/// The ops of [`run`], each pushed on `issued` (with whether it runs among the leaders).
/// A peer keeps at most [`WINDOW`] of its node's ops issued and unfinished: the op `WINDOW`
/// places later is issued once one completes (on the leader, that completion of a chunk's
/// reduce is also when the chunk's global step is issued).
fn steps<B: Backend>(
    h: &PeerHandle<B>,
    hier: &Hierarchy<B::CommDevice>,
    st: &Stages<'_, B::CommDevice>,
    [input, part, output]: [&Tensor<B::CommDevice>; 3],
    ranges: &[(usize, usize)],
    issued: &mut Vec<(Work, bool)>,
) -> Result<()> {
    let local_err = |e| core_error(h, st.call, &st.what, e);
    let global_err = |e| global_error(hier.node, &hier.nodes, st.call, e);
    let n = ranges.len();
    let total = if st.broadcast { 2 * n } else { n };
    let window = WINDOW.min(n);
    // Where the node's op `k` and chunk `c`'s global step are in `issued`.
    let (mut local, mut global) = (Vec::with_capacity(total), Vec::with_capacity(n));
    // Waits for the node's op `j`; on a leader, a finished reduce starts its chunk's global step.
    let retire = |j: usize, issued: &mut Vec<(Work, bool)>, local: &[usize], global: &mut Vec<usize>| {
        issued[local[j]].0.wait().map_err(local_err)?;
        if let (Some(g), Some(&r)) = (&st.global, ranges.get(j)) {
            let (out, from) = (piece(output, r)?, piece(part, r)?);
            let w = match g {
                Global::AllReduce(t, op) => t.all_reduce_into_async(&out, &from, *op),
                Global::Reduce(t, op, root) => t.reduce_into_async(&out, &from, *op, *root),
            };
            global.push(issued.len());
            issued.push((w.map_err(global_err)?, true));
        }
        Ok::<(), CollectiveError>(())
    };
    for k in 0..total {
        if k >= window {
            retire(k - window, issued, &local, &mut global)?;
        }
        let w = match ranges.get(k) {
            Some(&r) => st.local.reduce_into_async(&piece(part, r)?, &input.narrow(r.0, r.1)?, st.op, 0),
            None => {
                let c = k - n;
                // The leader broadcasts what the leaders' step on the chunk left (issued, as
                // `window` <= n: its reduce was retired).
                if st.global.is_some() {
                    let g = global.get(c).copied().ok_or_else(|| {
                        CollectiveError::protocol(format!("chunk {c}'s global step was never issued"))
                    })?;
                    issued[g].0.wait().map_err(global_err)?;
                }
                st.local.broadcast_async(&piece(output, ranges[c])?, 0)
            }
        };
        local.push(issued.len());
        issued.push((w.map_err(local_err)?, false));
    }
    for j in total.saturating_sub(window)..total {
        retire(j, issued, &local, &mut global)?;
    }
    let err = |global: bool, e: CollectiveError| if global { global_err(e) } else { local_err(e) };
    issued.iter().try_for_each(|(w, global)| w.wait().map_err(|e| err(*global, e)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn chunks_from_two_whole_ones() {
        assert_eq!(super::chunks(7, 4, 16), None);
        assert_eq!(super::chunks(8, 4, 16), Some(vec![(0, 4), (4, 4)]));
        assert_eq!(super::chunks(11, 4, 16), Some(vec![(0, 4), (4, 4), (8, 3)]));
        assert_eq!(super::chunks(1 << 20, 4, 0), None);
        assert_eq!(super::chunks(100, 8, 4), None);
        let many = super::chunks(1 << 20, 4, 16).unwrap();
        assert_eq!((many.len(), many[0], many[255]), (256, (0, 4096), (255 * 4096, 4096)));
    }
}
