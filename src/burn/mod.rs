//! burn integration (the `burn` feature): burn's backends take part in the peer API
//! ([`Burn`]), and a burn model's gradients are averaged across ranks with a
//! [`GradientSync`](crate::grad::GradientSync) ([`AllReduceWith`]).
//!
//! Both move tensors through one conversion, [`Handover`]:
//! - **every burn backend through host memory** (ndarray, ...): each tensor is read into a
//!   fresh ruCCL host tensor, reduced there, and handed back to burn as a new tensor;
//! - **burn's CubeCL backends on their own device** — wgpu (features `burn` and `wgpu`;
//!   `BurnWgpu` in the peer API), its default fused form (feature `burn-fusion`;
//!   `BurnFusedWgpu`) and CUDA (features `burn` and `cuda`; `BurnCuda`), with a communicator
//!   on [`Handover::comm_device`] for gradients: ruCCL uses the tensors' CubeCL memory
//!   directly and hands results back the same way — no copy, no byte through host memory.
//!
//! Either way nothing burn still holds (a clone of a tensor shares its storage) is ever
//! written: a tensor ruCCL writes into is one no other tensor shares, or a copy.
//! Autodiff callers pass the autodiff backend and its module; the gradients come back on the
//! inner backend, as `GradientsParams` holds them.
//!
//! Ranks that are threads of one process must each [`fork`](::burn::module::Module::fork) the
//! module they were handed: clones share their parameters' autodiff nodes, and two threads
//! backpropagating through shared nodes can deadlock inside burn-autodiff 0.21 (a lock-order
//! inversion between its global graph locator and a graph's own lock).
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::module::Module;
//! use burn::nn::{Linear, LinearConfig};
//! use burn::optim::{GradientsParams, Optimizer, SgdConfig};
//! use burn::tensor::Tensor;
//! use ruccl::burn::{AllReduceWith, param_specs};
//! use ruccl::grad::GradientSync;
//! use ruccl::{Communicator, HostDevice, UniqueId};
//!
//! type B = Autodiff<NdArray>;
//! let device = Default::default();
//! let model: Linear<B> = LinearConfig::new(3, 1).init(&device);
//! let specs = param_specs(&model); // also initialises the lazy parameters, before cloning
//! let id = UniqueId::new()?;
//! let ranks: Vec<_> = (0..2)
//!     .map(|rank| {
//!         let (id, model, specs) = (id.clone(), model.clone(), specs.clone());
//!         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
//!             let device = Default::default();
//!             let model = model.fork(&device); // this rank's own autodiff graph
//!             let comm = Communicator::new(HostDevice::default(), 2, id, rank)?;
//!             let mut sync = GradientSync::new(&comm, specs)?;
//!             let mut optim = SgdConfig::new().init::<B, Linear<B>>();
//!             let x = Tensor::<B, 2>::ones([2, 3], &device) * (rank as f32 + 1.0);
//!             let grads = GradientsParams::from_grads(model.forward(x).sum().backward(), &model);
//!             let grads = grads.all_reduce_with(&mut sync, &model)?; // the mean over the ranks
//!             let model = optim.step(0.1, model, grads);
//!             Ok(model.weight.val().into_data().to_vec::<f32>().unwrap_or_default())
//!         })
//!     })
//!     .collect();
//! let weights: Vec<_> = ranks.into_iter().map(|r| r.join().unwrap()).collect::<Result<_, _>>()?;
//! assert_eq!(weights[0], weights[1]); // every rank took the same step
//! # Ok::<(), ruccl::CollectiveError>(())
//! ```

mod backend;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod cube;
#[cfg(feature = "burn-fusion")]
mod fusion;
mod grads;
mod handover;
mod host;

pub use backend::Burn;
#[cfg(all(feature = "cuda", not(feature = "burn-fusion")))]
pub use cube::BurnCuda;
#[cfg(feature = "wgpu")]
pub use cube::{BurnWgpu, WgpuBackend};
#[cfg(feature = "burn-fusion")]
pub use fusion::{BurnFusedWgpu, FusedWgpuBackend};
pub use grads::{AllReduceWith, param_specs};
pub use handover::{Access, Handover};
