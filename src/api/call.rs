//! How every operation of the peer API runs: the calling peer's registration and its op
//! lock, the checks of its tensor, the communicator call tagged with the op's strategy and
//! shape, and what a failure does — errors restated for peers, and the registration aborted
//! on every peer (see [`with_peer`]).

use super::registry::{self, PeerHandle};
use super::{Backend, PeerId, Strategy};
use crate::comm::tagged::{Tagged, Tags};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::shape_hash;
use crate::tensor::Tensor;
use crate::types::ReduceOp;

/// Why an operation failed, which decides what happens to the registration.
pub(crate) enum Failure {
    /// This peer's arguments were rejected, or the operation failed: the registration is
    /// aborted on every peer.
    Abort(CollectiveError),
    /// Every peer found the same problem in what they all exchanged (broadcast's sender
    /// count): each reports it, and nothing needs aborting.
    Agreed(CollectiveError),
}

impl Failure {
    pub(crate) fn map(self, f: impl FnOnce(CollectiveError) -> CollectiveError) -> Failure {
        match self {
            Failure::Abort(e) => Failure::Abort(f(e)),
            Failure::Agreed(e) => Failure::Agreed(f(e)),
        }
    }
}

impl From<CollectiveError> for Failure {
    fn from(e: CollectiveError) -> Self {
        Failure::Abort(e)
    }
}

/// Runs `body` for a registered peer, its operations serialised, with errors labelled. A
/// failure aborts the registration: when the core has not already failed the communicator
/// (this peer's own arguments were rejected), this peer fails it, so that every peer's wait
/// ends at once with an error naming this one — as a mismatch aborts a communicator in the
/// core. Peers cannot tell a rejected argument from a peer that is merely slow, so this is the
/// only way none of them hangs.
pub(super) fn with_peer<B: Backend, R>(
    peer: PeerId,
    call: &'static str,
    body: impl FnOnce(&PeerHandle<B>) -> std::result::Result<R, Failure>,
) -> Result<R> {
    let label = || format!("{call} on peer {peer}");
    let h = registry::handle::<B>(peer, call)?;
    // Two threads' calls on one peer are ordered differently on each peer, pairing the data
    // of different calls (found returning `Ok` with wrong sums): refused, and the
    // registration aborted, as the core does for a communicator.
    let Some(_serial) = h.try_lock_ops() else {
        let e = CollectiveError::invalid(format!(
            "{call} was called on peer {peer} while another thread's operation on it was in flight: a peer's \
             operations come from one thread at a time, in the same order on every peer (two threads' calls can be \
             ordered differently on each peer, combining the data of different calls)"
        ))
        .with_rank(h.rank);
        // At once: the operation in flight holds the communicator while it waits.
        h.comm.poison_now(e.clone().with_op(label()));
        fail_global(&h, call, &e);
        return Err(e.with_op(label()).with_hint(
            "make every operation of a peer from one thread (or hand it between threads one call at a time), then \
             register again",
        ));
    };
    match body(&h) {
        Ok(r) => Ok(r),
        Err(Failure::Agreed(e)) => Err(e.with_op(label())),
        Err(Failure::Abort(e)) => {
            abort(&h, call, &e);
            Err(e.with_op(label()))
        }
    }
}

/// Aborts the registration after `e` ended `call` on this peer: fails the node's
/// communicator (and, on a leader, the leaders' one) unless the core already has, so that
/// every peer of every node stops waiting at once with an error naming this one. Called again,
/// it does nothing.
pub(super) fn abort<B: Backend>(h: &PeerHandle<B>, call: &str, e: &CollectiveError) {
    let (peer, label) = (h.peer, || format!("{call} on peer {}", h.peer));
    if h.comm.is_usable() {
        let kind = match e.kind() {
            ErrorKind::Unsupported => ErrorKind::InvalidArgument,
            k => k,
        };
        let why = format!(
            "peer {peer} (rank {}) could not take part in {call}: {}; the registration is aborted",
            h.rank,
            e.message()
        );
        let mut failure = CollectiveError::new(kind, why).with_op(label());
        if kind == ErrorKind::InvalidArgument {
            // What the other peers read: the fix is on this peer, not theirs.
            failure = failure.with_hint(crate::error::ANOTHER_PEERS_ARGUMENT);
        }
        h.comm.fail(failure);
    }
    fail_global(h, call, e);
}

/// A node leader's failure, on its global communicator: it ends the other nodes' waits too.
fn fail_global<B: Backend>(h: &PeerHandle<B>, call: &str, e: &CollectiveError) {
    let (peer, label) = (h.peer, || format!("{call} on peer {}", h.peer));
    if let Some(g) = h.hier.as_ref().and_then(|x| x.global.as_ref())
        && g.is_usable()
    {
        g.fail(
            CollectiveError::new(e.kind(), format!("peer {peer}, a node's leader: {}", e.message())).with_op(label()),
        );
    }
}

/// The registration's communicator, for a call that carries its strategy and shape.
pub(super) fn tagged<'h, B: Backend>(
    h: &'h PeerHandle<B>,
    strategy: Option<Strategy>,
    shape: &[usize],
) -> Tagged<'h, B::CommDevice> {
    h.comm.tagged(Tags { algorithm: strategy.map(Strategy::algorithm), shape: Some(shape_hash(shape)), part_of: None })
}

pub(super) fn peers_of<B: Backend>(h: &PeerHandle<B>) -> String {
    h.session.peers.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

/// A core error, restated for peers: ranks are positions among the registered peers, a
/// mismatch says what this peer called (the core only carries a digest of the shape), and a
/// reset is named as the cause of an abort.
pub(super) fn core_error<B: Backend>(h: &PeerHandle<B>, call: &str, what: &str, e: CollectiveError) -> CollectiveError {
    let label = format!("{call} on peer {}", h.peer);
    if h.was_reset() && e.kind() == ErrorKind::Aborted {
        return CollectiveError::new(
            ErrorKind::Aborted,
            format!(
                "reset_collective discarded peer {}'s registration while its {call} was in flight; the operation did \
                 not complete",
                h.peer
            ),
        )
        .with_op(label);
    }
    let ranks: Vec<String> = h.session.peers.iter().enumerate().map(|(r, p)| format!("rank {r} = peer {p}")).collect();
    let mine = match e.kind() {
        ErrorKind::Mismatch if !what.is_empty() => format!("; peer {} called {call} with {what}", h.peer),
        _ => String::new(),
    };
    let mut out = CollectiveError::new(
        e.kind(),
        format!(
            "{}{mine} (in the core's {}; {})",
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
    // Another peer's refused call: nothing to fix here (else its kind's "fix the arguments").
    let theirs = [crate::error::ANOTHER_PEERS_ARGUMENT, crate::error::ANOTHER_RANKS_ARGUMENT];
    if e.set_hint().is_some_and(|h| theirs.contains(&h)) {
        out = out.with_hint(crate::error::ANOTHER_PEERS_ARGUMENT);
    }
    with_peer_hint(out).with_source(e)
}

/// `e` with the peer API's advice where the core's names its communicator and `CommConfig`
/// (`Timeout`, `PeerLost`, `Aborted`): a peer raises `CollectiveConfig::with_timeout` and
/// registers again.
pub(crate) fn with_peer_hint(e: CollectiveError) -> CollectiveError {
    match e.kind() {
        ErrorKind::Timeout => e.with_hint(crate::error::PEER_TIMEOUT),
        ErrorKind::PeerLost => e.with_hint(crate::error::PEER_LOST),
        ErrorKind::Aborted => e.with_hint(crate::error::PEER_ABORTED),
        _ => e,
    }
}

/// Checks a peer's tensor and hands it to ruCCL.
pub(super) fn accept<B: Backend>(
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
    if !B::FLOAT_DTYPES.contains(&dtype) || (op.is_some() && !h.comm_device.supports(dtype)) {
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
