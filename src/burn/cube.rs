//! burn's CubeCL backend on wgpu (features `burn` and `wgpu`): its tensors already live on a
//! CubeCL device, so [`Handover`] hands their CubeCL handles to ruCCL's
//! [`CubeDevice`](crate::device::CubeDevice) of that same device and wraps ruCCL's results
//! as burn tensors — no copy, no byte through host memory.
//!
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
//!   descriptions of work not yet run; ruCCL builds burn without its `fusion` feature, so
//!   `burn::backend::Wgpu` is the plain `CubeBackend`. A fusion tensor would first have to be
//!   resolved to its `CubeTensor` (burn-fusion's `FusionClient::resolve_tensor_float`) and the
//!   result registered back (`FusionClient::register_tensor`); that is not done.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use ::burn::backend::wgpu::{BoolElement, CubeBackend, CubeTensor, FloatElement, IntElement, WgpuDevice, WgpuRuntime};
use ::burn::tensor::ops::FloatTensorOps;
use ::burn::tensor::{FloatDType, Shape, TensorMetadata};
use cubecl::Runtime;

use super::host::{burn_dtype, ruccl_dtype};
use super::{Access, Handover};
use crate::device::Device;
use crate::device::cubecl::{CubeDevice, WgpuCubeDevice};
use crate::error::{CollectiveError, Result};
use crate::tensor::Tensor;

/// burn's CubeCL backend on wgpu, as burn builds it without fusion (`burn::backend::Wgpu`
/// then; its default element types).
pub type WgpuBackend = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// burn's wgpu backend in the peer API, reducing on the tensors' own device:
/// `api::register::<BurnWgpu>(peer, WgpuDevice::DefaultDevice, config)`.
pub type BurnWgpu = super::Burn<WgpuBackend, WgpuCubeDevice>;

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
fn contained<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let why = crate::device::cubecl::panic_message(&*p);
        CollectiveError::device(format!("{what} failed inside burn or CubeCL: {why}"))
    })
}

/// Submits the work enqueued on the stream that wrote `t`'s memory (see the module docs).
fn flush(t: &CubeTensor<WgpuRuntime>) -> Result<()> {
    let mut client = t.client.clone();
    // SAFETY: the stream id only selects which of CubeCL's streams this client submits; the
    // client is a clone used for this flush alone, and nothing is created on it.
    unsafe { client.set_stream(t.handle.stream) };
    contained("flushing a burn tensor's stream", || client.flush())?
        .map_err(|e| CollectiveError::device(format!("burn's work on a tensor failed: {e}")))
}

/// Whether ruCCL can use `t`'s handle as it is: contiguous, exactly the tensor's bytes (burn
/// cuts its allocations' padding off with an end offset; a slice's handle starts at an offset
/// CubeCL can bind), a whole number of 32-bit words, and for `Access::Write` shared with no
/// other tensor.
fn usable_as_is(t: &CubeTensor<WgpuRuntime>, len: usize, access: Access) -> bool {
    t.is_contiguous()
        && t.handle.size_in_used() as usize == len
        && len.is_multiple_of(4)
        && (access == Access::Read || t.can_mut())
}

impl<F: FloatElement, I: IntElement, BT: BoolElement> Handover<WgpuCubeDevice> for CubeBackend<WgpuRuntime, F, I, BT> {
    fn comm_device(device: &WgpuDevice) -> Result<WgpuCubeDevice> {
        shared::<WgpuRuntime>(device)
    }

    fn to_ruccl(t: CubeTensor<WgpuRuntime>, comm: &WgpuCubeDevice, access: Access) -> Result<Tensor<WgpuCubeDevice>> {
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
        flush(&t)?;
        let t = if usable_as_is(&t, len, access) {
            t
        } else {
            let fresh = if len.is_multiple_of(4) {
                // A new contiguous tensor of exactly the elements (`copy` writes a new one
                // while `t` is alive).
                contained("copying a burn tensor on its device", || t.copy())?
            } else {
                // An odd number of 16-bit elements: one zero after them makes whole words.
                let device = t.device.clone();
                let dt = FloatDType::from(t.dtype);
                contained("padding a burn tensor on its device", || {
                    let flat = Self::float_reshape(t, Shape::new([n]));
                    Self::float_cat(vec![flat, Self::float_zeros(Shape::new([1]), &device, dt)], 0)
                })?
            };
            flush(&fresh)?;
            fresh
        };
        let CubeTensor { handle, device, .. } = t;
        let buf = comm.import(&device, handle, len)?;
        Tensor::from_buffer(comm, buf, dtype, &shape)
    }

    fn from_ruccl(t: Tensor<WgpuCubeDevice>, device: &WgpuDevice) -> Result<CubeTensor<WgpuRuntime>> {
        let dtype = burn_dtype(t.dtype())
            .ok_or_else(|| CollectiveError::unsupported(format!("burn float tensors cannot hold {}", t.dtype())))?;
        if !t.device().is_device(device) {
            return Err(CollectiveError::invalid(format!(
                "a ruCCL tensor on {} was handed back for burn's {device:?}",
                t.device().describe()
            )));
        }
        let shape = Shape::from(t.shape().to_vec());
        // Dropping ruCCL's buffer leaves burn's tensor the memory's only owner.
        let handle = t.into_buffer().to_handle()?;
        let client = contained("opening burn's device", || WgpuRuntime::client(device))?;
        Ok(CubeTensor::new_contiguous(client, device.clone(), shape, handle, dtype))
    }
}
