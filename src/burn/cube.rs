//! burn's CubeCL backends (features `burn` and `wgpu`, or `burn` and `cuda`): their tensors
//! already live on a CubeCL device, so [`Handover`] hands their CubeCL handles to ruCCL's
//! [`CubeDevice`] of that same device and wraps ruCCL's results as burn tensors — no copy, no
//! byte through host memory.
//!
//! - **Which backends.** On wgpu, `CubeBackend<WgpuRuntime, F, I, B>` for every element type.
//!   On CUDA, `burn::backend::Cuda` (its default element types): burn-cuda names no
//!   `CubeBackend` for ruCCL to be generic over, so the one body (`cube_handover!`) is
//!   stamped for that type alone, through its float tensor type. With `burn-fusion` burn's
//!   `Cuda` is the fused backend, which ruCCL does not hand over (only fused wgpu).
//! - **One device, one ruCCL device.** [`Handover::comm_device`] opens the `CubeDevice` on
//!   the client CubeCL keeps for burn's device (so both use the same memory), once per
//!   device: every peer and communicator on it shares that one handle.
//! - **Sharing.** A burn tensor whose memory no other tensor shares (CubeCL's `can_mut`) is
//!   taken as it is; for [`Access::Write`] a shared one is first copied on the device, so
//!   ruCCL never writes memory another tensor still reads. Non-contiguous tensors, and
//!   handles holding more than the tensor's bytes, are copied on the device into a fresh
//!   contiguous tensor first; 16-bit tensors of odd length get one zero element more, so
//!   the handle holds whole 32-bit words (ruCCL's kernels address words).
//! - **Order.** burn enqueues work on a CubeCL stream per thread, ruCCL on one stream of its
//!   own, and may put copies on the wgpu queue directly: before ruCCL reads a tensor, the
//!   stream that wrote it is flushed, so that work is on the queue first.
//! - **Fusion.** burn's default `Wgpu` backend wraps this one in `Fusion`, whose tensors are
//!   descriptions of work not yet run; ruCCL builds burn without its `fusion` feature unless
//!   its own `burn-fusion` feature is on, so `burn::backend::Wgpu` is otherwise the plain
//!   `CubeBackend`. With `burn-fusion`, `fusion.rs` resolves fused tensors to this backend's
//!   and hands them over here.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

#[cfg(feature = "wgpu")]
use ::burn::backend::wgpu::{BoolElement, CubeBackend, CubeTensor, FloatElement, IntElement, WgpuRuntime};
#[allow(unused_imports)] // Used by the impls `cube_handover` stamps.
use ::burn::tensor::ops::FloatTensorOps;
#[allow(unused_imports)] // Used by the impls `cube_handover` stamps.
use ::burn::tensor::{FloatDType, Shape, TensorMetadata};
use cubecl::Runtime;
use cubecl::client::ComputeClient;
use cubecl::stream_id::StreamId;

#[allow(unused_imports)] // Used by the impls `cube_handover` stamps.
use super::host::{burn_dtype, ruccl_dtype};
use super::{Access, Handover};
use crate::device::Device;
use crate::device::cubecl::CubeDevice;
#[cfg(feature = "wgpu")]
use crate::device::cubecl::WgpuCubeDevice;
use crate::error::{CollectiveError, Result};
use crate::tensor::Tensor;

/// burn's CubeCL backend on wgpu, as burn builds it without fusion (`burn::backend::Wgpu`
/// then; its default element types).
#[cfg(feature = "wgpu")]
pub type WgpuBackend = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// burn's wgpu backend in the peer API, reducing on the tensors' own device:
/// `api::register::<BurnWgpu>(peer, WgpuDevice::DefaultDevice, config)`.
#[cfg(feature = "wgpu")]
pub type BurnWgpu = super::Burn<WgpuBackend, WgpuCubeDevice>;

/// burn's CUDA backend in the peer API, reducing on the tensors' own device:
/// `api::register::<BurnCuda>(peer, CudaDevice::default(), config)`.
#[cfg(all(feature = "cuda", not(feature = "burn-fusion")))]
pub type BurnCuda = super::Burn<::burn::backend::Cuda, crate::device::cubecl::CudaCubeDevice>;

/// The ruCCL device of CubeCL device `device`: opened once, then shared.
fn shared<R: Runtime>(device: &R::Device) -> Result<CubeDevice<R>> {
    static OPEN: Mutex<Vec<Box<dyn Any + Send + Sync>>> = Mutex::new(Vec::new());
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let known = open.iter().filter_map(|d| d.downcast_ref::<CubeDevice<R>>()).find(|d| d.is_device(device));
    if let Some(d) = known {
        return Ok(d.clone());
    }
    let d = CubeDevice::<R>::from_cubecl(device)?;
    open.push(Box::new(d.clone()));
    Ok(d)
}

/// Runs a call into burn or CubeCL, turning a panic into a `Device` error naming `what`.
pub(super) fn contained<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let why = crate::device::cubecl::panic_message(&*p);
        CollectiveError::device(format!("{what} failed inside burn or CubeCL: {why}"))
    })
}

/// Submits the work enqueued on `stream`, the stream that wrote a tensor's memory, through
/// `client`, the tensor's (see the module docs).
fn flush<R: Runtime>(client: &ComputeClient<R>, stream: StreamId) -> Result<()> {
    let mut client = client.clone();
    // SAFETY: the stream id only selects which of CubeCL's streams this client submits; the
    // client is a clone used for this flush alone, and nothing is created on it.
    unsafe { client.set_stream(stream) };
    contained("flushing a burn tensor's stream", || client.flush())?
        .map_err(|e| CollectiveError::device(format!("burn's work on a tensor failed: {e}")))
}

/// The [`Handover`] of burn CubeCL backend `$backend` (with generics `[$g]`), whose float
/// tensors are `$tensor`, on CubeCL runtime `$runtime`: one body for every runtime.
///
/// A tensor's handle is used as it is when it is contiguous, exactly the tensor's bytes (burn
/// cuts its allocations' padding off with an end offset; a slice's handle starts at an offset
/// CubeCL can bind), a whole number of 32-bit words, and for `Access::Write` shared with no
/// other tensor; otherwise a copy made on the device is.
macro_rules! cube_handover {
    ([$($g:tt)*] $backend:ty, $tensor:ty, $runtime:ty) => {
        impl<$($g)*> Handover<CubeDevice<$runtime>> for $backend {
            fn comm_device(device: &<$runtime as Runtime>::Device) -> Result<CubeDevice<$runtime>> {
                shared::<$runtime>(device)
            }

            fn to_ruccl(t: $tensor, comm: &CubeDevice<$runtime>, access: Access) -> Result<Tensor<CubeDevice<$runtime>>> {
                let dtype = ruccl_dtype(t.dtype).ok_or_else(|| {
                    CollectiveError::unsupported(format!("burn's {:?} tensors have no ruCCL float dtype", t.dtype))
                })?;
                if !comm.is_device(&t.device) {
                    return Err(CollectiveError::invalid(format!(
                        "a burn tensor on {:?} was handed to ruCCL's {}",
                        t.device,
                        comm.describe()
                    )));
                }
                let shape = t.shape().to_vec();
                let n = t.shape().num_elements();
                let len = n * dtype.size();
                if len == 0 {
                    return Tensor::zeros(comm, dtype, &shape);
                }
                flush(&t.client, t.handle.stream)?;
                let as_is = t.is_contiguous()
                    && t.handle.size_in_used() as usize == len
                    && len.is_multiple_of(4)
                    && (access == Access::Read || t.can_mut());
                let t = if as_is {
                    t
                } else {
                    let fresh = if len.is_multiple_of(4) {
                        // A new contiguous tensor of exactly the elements (`copy` writes a new
                        // one while `t` is alive).
                        contained("copying a burn tensor on its device", || t.copy())?
                    } else {
                        // An odd number of 16-bit elements: one zero after them makes whole
                        // words.
                        let device = t.device.clone();
                        let dt = FloatDType::from(t.dtype);
                        contained("padding a burn tensor on its device", || {
                            let flat = Self::float_reshape(t, Shape::new([n]));
                            Self::float_cat(vec![flat, Self::float_zeros(Shape::new([1]), &device, dt)], 0)
                        })?
                    };
                    flush(&fresh.client, fresh.handle.stream)?;
                    fresh
                };
                let buf = comm.import(&t.device, t.handle, len)?;
                Tensor::from_buffer(comm, buf, dtype, &shape)
            }

            fn from_ruccl(t: Tensor<CubeDevice<$runtime>>, device: &<$runtime as Runtime>::Device) -> Result<$tensor> {
                let dtype = burn_dtype(t.dtype()).ok_or_else(|| {
                    CollectiveError::unsupported(format!("burn float tensors cannot hold {}", t.dtype()))
                })?;
                if !t.device().is_device(device) {
                    return Err(CollectiveError::invalid(format!(
                        "a ruCCL tensor on {} was handed back for burn's {device:?}",
                        t.device().describe()
                    )));
                }
                let shape = Shape::from(t.shape().to_vec());
                // Dropping ruCCL's buffer leaves burn's tensor the memory's only owner.
                let handle = t.into_buffer().to_handle()?;
                let client = contained("opening burn's device", || <$runtime as Runtime>::client(device))?;
                Ok(<$tensor>::new_contiguous(client, device.clone(), shape, handle, dtype))
            }
        }
    };
}

#[cfg(feature = "wgpu")]
cube_handover!([F: FloatElement, I: IntElement, BT: BoolElement] CubeBackend<WgpuRuntime, F, I, BT>, CubeTensor<WgpuRuntime>, WgpuRuntime);

/// burn-cuda's float tensor (a `CubeTensor<CudaRuntime>`, which burn-cuda does not name).
#[cfg(all(feature = "cuda", not(feature = "burn-fusion")))]
type CudaTensor = <::burn::backend::Cuda as ::burn::tensor::backend::BackendTypes>::FloatTensorPrimitive;

#[cfg(all(feature = "cuda", not(feature = "burn-fusion")))]
cube_handover!([] ::burn::backend::Cuda, CudaTensor, cubecl::cuda::CudaRuntime);
