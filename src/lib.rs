//! # ruCCL — portable collective communication
//!
//! ruCCL does what NCCL does — `all_reduce`, `reduce`, `broadcast`, `all_gather`,
//! `reduce_scatter`, `all_to_all`, `gather`, `scatter`, `send`/`recv`, `barrier` across
//! ranks — behind one [`Device`] contract, so the same plans run on the host today and on
//! CubeCL devices (CUDA, Vulkan, Metal, WebGPU) behind the same trait.
//!
//! **What runs today:** ranks are threads of one process, one [`Communicator`] per thread,
//! with tensors on the [`HostDevice`]; they talk through shared memory or, with
//! [`config::Transport::Tcp`], each over its own TCP endpoint on loopback (the transport
//! processes use). Ranks may also be separate processes (or hosts): a [`UniqueId`] carries
//! its root's rendezvous address, and [`Communicator::from_env`] joins the group a launcher
//! (torchrun, `mpirun`, `srun`) describes ([`launch`]); such a group chooses its transport per
//! pair of ranks ([`PeerLink`]): in place within a process, shared memory between processes
//! of one host, TCP between hosts.
//!
//! ```
//! use ruccl::{Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
//!
//! let id = UniqueId::new()?; // made once, handed to every rank
//! let ranks: Vec<_> = (0..4)
//!     .map(|rank| {
//!         let id = id.clone();
//!         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
//!             let dev = HostDevice::default();
//!             let comm = Communicator::new(dev, 4, id, rank)?;
//!             let mut grad = Tensor::from_slice(&dev, &[rank as f32, 1.0], &[2])?;
//!             comm.all_reduce(&mut grad, ReduceOp::Avg)?;
//!             grad.to_vec::<f32>()
//!         })
//!     })
//!     .collect();
//! for r in ranks {
//!     assert_eq!(r.join().unwrap()?, vec![1.5, 1.0]);
//! }
//! # Ok::<(), ruccl::CollectiveError>(())
//! ```
//!
//! ## Layers (data flows one way)
//!
//! | layer | owns | may block? |
//! |---|---|---|
//! | [`Communicator`] (`comm`) | the public calls (blocking, non-blocking → [`Work`], and [`Group`] calls); **the only place arguments are checked** (`comm/validate.rs`); sequence numbers and issue order; sticky errors; the flight recorder | blocking calls and [`Work::wait`] drive or wait for the op; with [`CommConfig::with_shared_progress`] one process-wide thread drives every rank |
//! | [`algo`] | plans: per-rank lists of send / receive / reduce / copy steps; pure, no I/O, no clock; exhaustively simulated | never |
//! | `sched` | runs a plan as a state machine (`poll` never blocks): lends ranges to peers, receives, enqueues device work and tracks its events, enforces "never write a lent range"; drivers block with the op's deadline, for one op or several ranks' ops at once | only the drivers, always with the op's deadline |
//! | `transport` | moves payloads between ranks — host bytes, or device ranges as opaque tokens (in-process mailboxes; TCP connections with a pure wire codec, credits, abort / goodbye / heartbeat frames) — and wakes waiters; never sees a device | only inside `wait`, with a deadline |
//! | [`device`] | memory and enqueued work with events ([`HostDevice`], and CubeCL devices with the `wgpu`, `vulkan`, `metal` or `cuda` features); says how it reaches other devices; never sees the transport | only in `wait`/`synchronize`, with a deadline |
//!
//! ## Guarantees
//! - Every rank gets the same bits, and the same inputs give the same bits on every run.
//! - Bad arguments fail with [`ErrorKind::InvalidArgument`] on the calling rank before
//!   anything is sent; the communicator stays usable.
//! - Ranks that call different collectives get [`ErrorKind::Mismatch`] naming both sides:
//!   from that call when something they exchanged disagreed, otherwise from a later call
//!   (which names the earlier op: a rank that only sends small ops may run up to 128 ops
//!   ahead before it learns). A rank cut short inside an earlier, matched op by others'
//!   failure gets [`ErrorKind::Aborted`] naming the op that failed and the rank that failed
//!   first; when that failure is a peer whose process is gone, every rank reports
//!   [`ErrorKind::PeerLost`] naming it. A timeout names the rank furthest behind, or the ranks waiting on each other.
//! - Memory is never raced on from safe code: an out-of-place call whose output *is* its
//!   input runs in place (as NCCL treats `sendbuff == recvbuff`), a partial overlap is
//!   `InvalidArgument`; host buffers refuse overlapping concurrent access with a `Device`
//!   error ([`mem::HostMem`]); a failed call returns only after every peer stopped reading
//!   its tensors; until a non-blocking op's [`Work`] is done, its tensors' own methods refuse
//!   to write its input or to read or write its output, and so do other communicators' calls
//!   (`InvalidArgument` naming the op).
//! - Every wait has a deadline ([`CommConfig::with_timeout`], default 10 minutes); a rank that
//!   never arrives makes the others fail with [`ErrorKind::Timeout`] naming it, with the
//!   flight recorder of every rank in [`CollectiveError::report`]. After any failure the
//!   communicator is aborted and later calls fail at once; [`Communicator::abort`] wakes every
//!   waiter; dropping never waits for an op (over sockets, only for its goodbyes to be
//!   written, so a process may exit right after).
//!
//! ## Features
//! | feature | enables |
//! |---|---|
//! | *(default)* | the communication core and the host device; no GPU crate is compiled |
//! | `tracing` (default) | a span per collective (communicator, rank, op, sequence number, bytes, algorithm), `debug!` per plan, `trace!` per step, and `warn!` naming the missing ranks when a join or a collective waits longer than [`CommConfig::with_warn_after`] (30 s by default); the library never installs a subscriber |
//! | `burn` | `ruccl::burn`: burn 0.21's backends in the peer API (through host data) and `GradientsParams` averaged through [`grad::GradientSync`]; the `collective_training` example (burn's CPU backend). With `wgpu` too: burn's wgpu backend, its tensors reduced on their own device with no copy (`ruccl::burn::BurnWgpu`), and the example on it. With `cuda` too: burn's cuda backend the same way (`ruccl::burn::BurnCuda`) |
//! | `burn-fusion` | `burn` and `wgpu`, with burn's `fusion`: burn's default wgpu backend, `Fusion<CubeBackend<WgpuRuntime>>` (`burn::backend::Wgpu` is then the fused one), its tensors resolved and reduced on their own device with no copy (`ruccl::burn::BurnFusedWgpu`) |
//! | `wgpu` | `device::CubeDevice` on wgpu (WGSL; Vulkan, Metal, DX12 or GL underneath): the GPU device, with kernels written once in CubeCL (CubeCL pinned to 0.10, see the README) |
//! | `vulkan`, `metal` | `wgpu` with wgpu's SPIR-V or MSL compiler path |
//! | `cuda` | `device::CubeDevice` on CUDA (the driver is loaded at run time; builds without one) |
//! | `test-wgpu`, `test-vulkan`, `test-metal`, `test-cuda` | stamp the core test suite out on that GPU device (one at a time) |
//! | `orchestrator` | `ruccl::orchestrator`: the rendezvous server of a multi-node peer-API job (its `global_address`), and `examples/orchestrator.rs`; pulls in no crate |
//! | `serde` | `Serialize` / `Deserialize` for [`UniqueId`] (as its text, `ruccl:<token>@ip:port`), [`DType`], [`ReduceOp`], [`Algorithm`], [`CommConfig`] and the peer API's [`PeerId`](api::PeerId), [`ReduceOperation`](api::ReduceOperation), [`Strategy`](api::Strategy), [`CollectiveConfig`](api::CollectiveConfig) |
//!
//! ## Debug builds
//! Unoptimised, ruCCL's copy and reduce loops are slow (a 4 MiB all_reduce took 150–560 ms
//! in a debug build against 3–40 ms in release). An application built in debug mode can
//! optimise ruCCL alone, in its `Cargo.toml`:
//!
//! ```toml
//! [profile.dev.package.ruCCL]
//! opt-level = 3
//! ```
//!
//! ## Environment
//! `RUCCL_TIMEOUT` (seconds; huge values mean no deadline), `RUCCL_WARN_AFTER` (seconds a
//! join or collective waits before it logs who is missing), `RUCCL_ALGO` (`auto`, `ring`,
//! `tree`, `rd`, `direct`, `kary:K`, `centralized`, `exchange`), `RUCCL_CHUNK_BYTES`,
//! `RUCCL_TRANSPORT` (`inproc`, `tcp`), `RUCCL_PEER_SILENCE` (seconds a peer's connection may
//! stay silent before it counts as lost), `RUCCL_SHARED_PROGRESS` (`1`: one process-wide
//! progress thread drives every rank) override the defaults of [`Communicator::new`] (see
//! [`CommConfig::from_env`]).
//! `RUCCL_SHM_DISABLE=1` makes processes of one host talk TCP instead of shared memory;
//! `RUCCL_SHM_CMA=0` keeps their large messages in the shared ring (no single-copy reads of
//! the peer process's memory). A communicator whose ranks are all processes of one host
//! exchanges small ops (at most 4 KiB per rank) through one shared segment of slots instead
//! of messages, as threads do, when every process shares memory with every peer and runs
//! host-memory devices ([`HostDevice`]) (agreed at setup; any no keeps every rank on
//! messages); `RUCCL_SHM_SLOTS=0` on any process turns that off.
//!
//! ## For tensor frameworks
//! [`api`] offers the peer API frameworks want instead of one communicator per rank:
//! [`api::register`] / [`api::all_reduce`] / [`api::reduce`] / [`api::broadcast`] /
//! [`api::finish_collective`] / [`api::reset_collective`] over a [`api::Backend`] contract.
//! They live in [`api`] only: the crate root holds the communicator's types.
//!
//! ## For training
//! [`grad::GradientSync`] averages a model's gradients across ranks as PyTorch DDP does: it
//! packs them into flat buckets (25 MiB by default) and all_reduces each bucket with one
//! non-blocking call as soon as its gradients are in.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod algo;
pub mod api;
#[cfg(feature = "burn")]
pub mod burn;
mod clock;
mod comm;
pub mod config;
pub(crate) mod cpu;
pub mod device;
pub mod diag;
pub mod error;
pub mod grad;
mod hash;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod kernels;
pub mod launch;
pub mod mem;
pub mod op;
#[cfg(any(test, feature = "burn", feature = "wgpu", feature = "cuda"))]
mod park;
mod pins;
// Also in the library's own test build, whatever the features: it pulls in nothing, and its
// unit tests then run with every `cargo test`.
#[cfg(any(feature = "orchestrator", test))]
pub mod orchestrator;
mod sched;
pub mod tensor;
mod trace;
pub(crate) mod transport;
pub mod types;
pub mod unique_id;

/// Checks this repository's own tests run that need the library's private parts (feature
/// `test-wgpu`; not part of the API, not covered by semver).
#[cfg(feature = "test-wgpu")]
#[doc(hidden)]
pub mod test_support {
    /// Checks the `shaders/` snapshot (`src/kernels/shaders.rs`): `Ok` says what it checked
    /// or that there is no wgpu adapter, `Err` lists the failures.
    pub fn check_shaders() -> Result<String, String> {
        crate::kernels::shaders::check()
    }
}

pub use comm::{Communicator, FLIGHT_DEPTH, FlightEntry, Group, OpState, Work};
pub use config::{Algorithm, CommConfig};
pub use device::{Device, HostDevice};
pub use error::{CollectiveError, ErrorKind, Result};
pub use tensor::Tensor;
pub use types::{DType, Element, MAX_WORLD, PeerLink, Rank, ReduceOp};
pub use unique_id::UniqueId;

/// Every Rust snippet of the README, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The peer API's free functions are in [`api`] only, so that `use ruccl::*` brings no
/// `all_reduce` that is not the communicator's:
///
/// ```compile_fail
/// use ruccl::all_reduce;
/// ```
#[cfg(doctest)]
struct PeerApiStaysInApi;
