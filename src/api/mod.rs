//! The tensor-framework peer API: `register` / `all_reduce` / `reduce` / `broadcast` /
//! `all_gather` / `reduce_scatter` / `barrier` / `finish_collective` / `reset_collective`,
//! generic over a [`Backend`] — what burn's `burn-collective` offered, on top of
//! [`Communicator`](crate::Communicator).
//!
//! A framework does not manage communicators: each *peer* (a device driven by one thread of
//! this process) registers with a [`PeerId`], its device and a [`CollectiveConfig`], and then
//! calls operations by id. Registration blocks until `config.num_devices()` peers have
//! registered with identical configs; ranks are the peers in id order. Peers meet in the
//! core's rendezvous (a lobby per `Backend` type, keyed by peer id), and each registration is
//! one [`Communicator`](crate::Communicator) per peer.
//!
//! The layer is small: `ops.rs` (the operations: check this peer's arguments, one tagged core
//! call), `meta.rs` (broadcast's metadata), `registry.rs` (peer id → communicator),
//! `config.rs` and `backend.rs` (what frameworks pass in).
//!
//! ```
//! use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation, Strategy};
//! use ruccl::{HostDevice, Tensor};
//!
//! let config = CollectiveConfig::default()
//!     .with_num_devices(3)
//!     .with_local_all_reduce_strategy(Strategy::Tree(2));
//! let peers: Vec<_> = (0..3u32)
//!     .map(|i| {
//!         let config = config.clone();
//!         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
//!             let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
//!             api::register::<HostBackend>(peer, dev, config)?;
//!             let grad = Tensor::from_slice(&dev, &[i as f32, 3.0], &[2])?;
//!             let grad = api::all_reduce::<HostBackend>(peer, grad, ReduceOperation::Mean)?;
//!             api::finish_collective::<HostBackend>(peer)?;
//!             grad.to_vec::<f32>()
//!         })
//!     })
//!     .collect();
//! for p in peers {
//!     assert_eq!(p.join().unwrap()?, vec![1.0, 3.0]);
//! }
//! # Ok::<(), ruccl::CollectiveError>(())
//! ```
//!
//! # The call contract
//! Every registered peer calls the same operations in the same order, with the same shapes,
//! dtypes, reduce ops and roots; exactly one peer sends each broadcast. A peer's calls come
//! from one thread at a time: a call made while another thread's call on the same peer is in
//! flight fails with `InvalidArgument` and aborts the registration (two threads' calls can be
//! ordered differently on each peer, combining the data of different calls).
//!
//! # Errors, and where they are reported
//! There is no agreement step: each operation is one call of the core on the registration's
//! communicator (broadcast adds a small all_gather first, see below), and its descriptor
//! carries what the peers must agree on — operation, dtype, element count, reduce op, root,
//! the strategy, and a digest of the tensor's shape. The core compares them in the header of
//! every message, so peers that disagree get a `Mismatch` instead of wrong data or a hang.
//!
//! **An error inside an operation aborts the registration, on every peer**, as a failed
//! collective aborts a communicator in the core: afterwards every operation fails at once,
//! until the peers call [`finish_collective`] (or [`reset_collective`]) and register again.
//! That includes one peer's bad argument: its peers cannot tell a rejected argument from a
//! slow peer, so the peer fails the registration's communicator, and every peer's wait ends
//! at once with an error naming it. (A peer still finishing the previous operation when that
//! happens sees it cut short, `Aborted`, naming the peer.)
//!
//! | situation | kind | reported on | registration |
//! |---|---|---|---|
//! | registering a peer twice | `InvalidArgument` | the second caller | the first one stands |
//! | an operation before `register` (or after `finish_collective` / a reset) | `InvalidArgument` | the caller | — |
//! | `finish_collective` on an unregistered peer | `InvalidArgument` | the caller | — |
//! | peers registering with different configs | `Mismatch`, naming the settings that differ | every peer of that round | not formed |
//! | several nodes: the orchestrator unreachable, or a node that never arrives | `Timeout` naming the nodes that arrived | every peer of the nodes that came | not formed |
//! | several nodes: configs that differ between nodes | `Mismatch` naming the settings | every peer of every node of the round, at once (which config is the right one is not known) | not formed |
//! | several nodes: a failure on the leaders' level | the leader's error | every peer of every node (relayed) | aborted |
//! | a peer that never registers | `Timeout`, naming it | every waiting peer | not formed |
//! | different operations, shapes, dtypes, reduce ops, roots or strategies | `Mismatch`, naming both sides | every peer (one whose part had completed: from its next call) | aborted |
//! | one peer's bad argument (wrong device, dtype, root, scalar) | its own error there; `InvalidArgument` naming it elsewhere | every peer, promptly | aborted |
//! | zero broadcast senders / several | `InvalidArgument` / `Mismatch` naming the senders | every peer | usable (every peer read the same metadata) |
//! | a peer that stops calling, finishes early, or a reset | `Timeout` / `PeerLost` / `Aborted` | every peer waiting on it | aborted |
//!
//! # Broadcast's metadata
//! Only broadcast's receivers pass no tensor, so only broadcast exchanges metadata: every peer
//! contributes a fixed-size record (whether it sends; the sender's dtype and shape) to one
//! small all_gather, which is also how every peer learns that zero or several peers sent.
//! Then the data moves from the sender, on the broadcast strategy.
//!
//! # Inputs another handle shares are never written
//! `all_gather` and `reduce_scatter` write their result into a newly allocated tensor.
//! `all_reduce` and `reduce` do too when another handle still shares the input's memory (a
//! clone sharing storage), which then still reads the input afterwards; when the caller handed
//! over the input's only handle ([`Device::is_exclusive`](crate::Device::is_exclusive)), they
//! write the result into that memory, so a large reduction allocates nothing.
//!
//! # Strategies
//! [`Strategy::Centralized`], [`Strategy::Tree`] and [`Strategy::Ring`] each run their own
//! plan of the core scheduler ([`Algorithm::Centralized`](crate::Algorithm::Centralized),
//! [`Algorithm::KaryTree`](crate::Algorithm::KaryTree), [`Algorithm::Ring`](crate::Algorithm::Ring));
//! [`Strategy::Auto`] (the default) lets the core choose by size. A registration holds one
//! communicator; each operation names its strategy in its descriptor
//! ([`OpDesc::algorithm`](crate::op::OpDesc::algorithm)), and the core runs that plan.
//!
//! # Several nodes
//! With [`CollectiveConfig::with_num_nodes`] > 1, each process is a *node* of `num_devices`
//! peers; peer ids are unique across nodes. `register` first forms the node (as above); then
//! the node's lowest peer, its *leader*, meets the other leaders through the orchestrator on
//! `global_address` (feature `orchestrator`: `ruccl::orchestrator::Orchestrator`,
//! `examples/orchestrator.rs`), which numbers the nodes by data address (`node_address`'s host
//! and `data_service_port`), and joins the leaders' communicator (one rank per node, over TCP
//! or shared memory). An operation is a local step, a global one among the leaders (on the
//! *global* strategy) and a local step back: all_reduce reduces to the leader, all-reduces
//! among the leaders and broadcasts back (`Mean` is the mean of the nodes' means, exact since
//! every node has the same number of peers); reduce reaches the root through its node's
//! leader; broadcast goes from the sender to its node, then from its node's leader to the
//! other leaders, then to their nodes; barrier is three barriers; all_gather gathers to each
//! leader, all-gathers among the leaders and broadcasts back; reduce_scatter reduces to each
//! leader, reduce-scatters among the leaders (each gets its node's blocks) and scatters inside
//! the node. Blocks follow peer ids across all nodes, wherever the ids live: when a node's ids
//! are not consecutive, its leader reorders the blocks (device copies) around the global step.
//! Every broadcast error across nodes (no sender, several) aborts the registration, since
//! the nodes learn it at different steps.
//!
//! # The registry, and why it is keyed by `Backend` type
//! Registrations are process-wide, as in burn: any thread can call by peer id. They are kept
//! per `Backend` **type** (one service per `TypeId`), which is what separates two frameworks
//! in one process. It is also how independent tests share one test binary without colliding:
//! each test registers through its own `Backend` type (a zero-sized wrapper around
//! [`HostBackend`]), so tests run in parallel threads with no global lock and no test can see
//! or reset another's peers. A per-call key would have put a name in every call of the API;
//! a test mutex would have serialised the tests and still shared state between them.

mod backend;
mod call;
mod config;
mod hier;
mod meta;
pub(crate) mod node;
mod ops;
mod pipeline;
mod registry;
#[cfg(test)]
mod tests;

use std::fmt;

pub use backend::{Backend, DeviceBackend, HostBackend};
pub use config::{CollectiveConfig, DEFAULT_BROADCAST_PIPELINE_CHUNK_BYTES, DEFAULT_PIPELINE_CHUNK_BYTES, Strategy};
pub use ops::{
    all_gather, all_reduce, barrier, broadcast, finish_collective, reduce, reduce_scatter, register, reset_collective,
};

use crate::types::ReduceOp;

/// A peer of this process: a device driven by one thread. Ranks are peers in id order, so
/// ids need not be contiguous.
///
/// ```
/// use ruccl::api::PeerId;
/// assert_eq!(PeerId::from(3u32), PeerId::from(3usize));
/// assert_eq!(PeerId::new(3).get(), 3);
/// assert_eq!(PeerId::new(3).to_string(), "3");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PeerId(u64);

impl PeerId {
    /// The peer with id `id`.
    pub const fn new(id: u64) -> Self {
        PeerId(id)
    }

    /// The id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl From<u32> for PeerId {
    fn from(id: u32) -> Self {
        PeerId(u64::from(id))
    }
}

impl From<u64> for PeerId {
    fn from(id: u64) -> Self {
        PeerId(id)
    }
}

impl From<usize> for PeerId {
    /// Lossless: `usize` is at most 64 bits on every target Rust supports.
    fn from(id: usize) -> Self {
        PeerId(id as u64)
    }
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// burn's name for the reductions a framework asks for. It converts into [`ReduceOp`]
/// (`Mean` is [`ReduceOp::Avg`]); every peer-API function also takes a [`ReduceOp`] directly.
///
/// ```
/// use ruccl::ReduceOp;
/// use ruccl::api::ReduceOperation;
/// assert_eq!(ReduceOp::from(ReduceOperation::Mean), ReduceOp::Avg);
/// assert_eq!(ReduceOp::from(ReduceOperation::Sum), ReduceOp::Sum);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ReduceOperation {
    /// Element-wise sum.
    Sum,
    /// Element-wise mean over the peers (sum, then divide by the number of peers).
    Mean,
}

impl From<ReduceOperation> for ReduceOp {
    fn from(op: ReduceOperation) -> Self {
        match op {
            ReduceOperation::Sum => ReduceOp::Sum,
            ReduceOperation::Mean => ReduceOp::Avg,
        }
    }
}
