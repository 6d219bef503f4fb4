//! The tensor-framework contract: how a framework hands its tensors to ruCCL and takes them
//! back ([`Backend`]), and its implementation for ruCCL's own host tensors ([`HostBackend`]).

use std::fmt;

use crate::device::{Device, HostDevice};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::DType;

/// What a tensor framework implements so that its tensors can take part in the peer API.
///
/// A framework implements it for a marker type of its own (for burn, a `Burn<B>` wrapper over
/// burn's backend; for CubeCL, one per runtime), which also keeps the registrations of
/// different frameworks apart: the registry is keyed by the `Backend` type.
///
/// The conversions are where copies happen or are avoided: when the framework's memory is
/// already something a ruCCL [`Device`] can use (host memory, or a CubeCL buffer handle),
/// [`to_ruccl`](Self::to_ruccl) and [`from_ruccl`](Self::from_ruccl) only re-wrap it;
/// otherwise they round-trip through host memory (read the tensor's data, then
/// [`Tensor::from_slice`]; [`Tensor::to_vec`] on the way back).
///
/// ```
/// use ruccl::api::{Backend, HostBackend};
/// use ruccl::{DType, HostDevice, Tensor};
/// let dev = HostDevice::new(0);
/// let t = Tensor::from_slice(&dev, &[1.0f32, 2.0], &[2])?;
/// let comm_dev = HostBackend::comm_device(&dev)?;
/// let r = HostBackend::to_ruccl(t, &comm_dev)?; // zero-copy: the same memory
/// assert_eq!(r.to_vec::<f32>()?, vec![1.0, 2.0]);
/// assert!(HostBackend::FLOAT_DTYPES.contains(&DType::BF16));
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub trait Backend: Sized + Send + Sync + 'static {
    /// The framework's device handle (burn: `B::Device`). Peers compare a tensor's device with
    /// the one they registered, so it must compare by identity.
    type Device: Clone + PartialEq + fmt::Debug + Send + Sync + 'static;

    /// The framework's float tensor (burn: `B::FloatTensorPrimitive`).
    type FloatTensorPrimitive: Send + 'static;

    /// The ruCCL device collectives run on for this framework.
    type CommDevice: Device;

    /// The element types [`Self::FloatTensorPrimitive`] can hold; others are rejected with
    /// [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) before anything is sent.
    const FLOAT_DTYPES: &'static [DType];

    /// The ruCCL device that stands for a framework device.
    ///
    /// # Errors
    /// `Unsupported` when the framework device has no ruCCL counterpart in this build;
    /// `Device` when it cannot be opened.
    fn comm_device(device: &Self::Device) -> Result<Self::CommDevice>;

    /// The framework device a tensor lives on.
    fn float_device(tensor: &Self::FloatTensorPrimitive) -> Self::Device;

    /// Hands a tensor to ruCCL: zero-copy where the memory is already usable by `device`, a
    /// host round-trip otherwise.
    ///
    /// # Errors
    /// `Unsupported` for an element type ruCCL has no [`DType`] for; `Device` when reading the
    /// tensor fails.
    fn to_ruccl(tensor: Self::FloatTensorPrimitive, device: &Self::CommDevice) -> Result<Tensor<Self::CommDevice>>;

    /// Takes a ruCCL tensor back as a framework tensor on `device`: zero-copy where possible,
    /// a host round-trip otherwise.
    ///
    /// # Errors
    /// `Unsupported` when the framework cannot hold the tensor's dtype; `Device` when the copy
    /// fails.
    fn from_ruccl(tensor: Tensor<Self::CommDevice>, device: &Self::Device) -> Result<Self::FloatTensorPrimitive>;
}

/// ruCCL's own host tensors as a [`Backend`]: the primitive *is* a [`Tensor<HostDevice>`], so
/// both conversions are moves (no copy), and a framework without a device of its own can use
/// the peer API directly.
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
/// use ruccl::{HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let peer = PeerId::new(0);
/// api::register::<HostBackend>(peer, dev, CollectiveConfig::default())?;
/// let t = Tensor::from_slice(&dev, &[2.0f32, 4.0], &[2])?;
/// let t = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Mean)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![2.0, 4.0]);
/// api::finish_collective::<HostBackend>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HostBackend;

impl Backend for HostBackend {
    type Device = HostDevice;
    type FloatTensorPrimitive = Tensor<HostDevice>;
    type CommDevice = HostDevice;

    const FLOAT_DTYPES: &'static [DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

    fn comm_device(device: &HostDevice) -> Result<HostDevice> {
        Ok(*device)
    }

    fn float_device(tensor: &Tensor<HostDevice>) -> HostDevice {
        *tensor.device()
    }

    fn to_ruccl(tensor: Tensor<HostDevice>, device: &HostDevice) -> Result<Tensor<HostDevice>> {
        rewrap(tensor, device)
    }

    fn from_ruccl(tensor: Tensor<HostDevice>, device: &HostDevice) -> Result<Tensor<HostDevice>> {
        rewrap(tensor, device)
    }
}

/// ruCCL's own tensors on any [`Device`] as a [`Backend`] — for CubeCL devices
/// (`DeviceBackend<CubeDevice<R>>`, features `wgpu` or `cuda`) the peer API's GPU backend:
/// the primitive *is* a [`Tensor<D>`], so both conversions are moves, and peers registered
/// on one device exchange device memory and reduce on the device with no host round trip
/// (peers on different devices stage through host memory, like any communicator's ranks).
///
/// ```
/// use ruccl::api::{self, CollectiveConfig, DeviceBackend, PeerId, ReduceOperation};
/// use ruccl::{HostDevice, Tensor};
/// type B = DeviceBackend<HostDevice>; // with `--features wgpu`: DeviceBackend<WgpuCubeDevice>
/// let dev = HostDevice::default();
/// let peer = PeerId::new(0);
/// api::register::<B>(peer, dev, CollectiveConfig::default())?;
/// let t = api::all_reduce::<B>(peer, Tensor::from_slice(&dev, &[1.0f32, 3.0], &[2])?, ReduceOperation::Sum)?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 3.0]);
/// api::finish_collective::<B>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct DeviceBackend<D>(std::marker::PhantomData<fn() -> D>);

impl<D> fmt::Debug for DeviceBackend<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceBackend<{}>", std::any::type_name::<D>())
    }
}

impl<D: Device + PartialEq> Backend for DeviceBackend<D> {
    type Device = D;
    type FloatTensorPrimitive = Tensor<D>;
    type CommDevice = D;

    const FLOAT_DTYPES: &'static [DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

    fn comm_device(device: &D) -> Result<D> {
        Ok(device.clone())
    }

    fn float_device(tensor: &Tensor<D>) -> D {
        tensor.device().clone()
    }

    fn to_ruccl(tensor: Tensor<D>, device: &D) -> Result<Tensor<D>> {
        relabel(tensor, device)
    }

    fn from_ruccl(tensor: Tensor<D>, device: &D) -> Result<Tensor<D>> {
        relabel(tensor, device)
    }
}

/// A tensor of one device handed over for another: a move when it is the same device; a
/// `Device` error otherwise (the peer API checks a tensor's device against its registration
/// before it converts, so this is a broken invariant, not a user error).
fn relabel<D: Device>(tensor: Tensor<D>, device: &D) -> Result<Tensor<D>> {
    if tensor.device().same_device(device) {
        return Ok(tensor);
    }
    Err(crate::error::CollectiveError::device(format!(
        "a tensor on {} was handed over for {}",
        tensor.device().describe(),
        device.describe()
    )))
}

/// Every host device is the same memory, so moving a tensor between logical host devices only
/// changes its label.
fn rewrap(tensor: Tensor<HostDevice>, device: &HostDevice) -> Result<Tensor<HostDevice>> {
    if tensor.device().same_device(device) {
        return Ok(tensor);
    }
    let (dtype, shape) = (tensor.dtype(), tensor.shape().to_vec());
    Tensor::from_buffer(device, tensor.into_buffer(), dtype, &shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_conversions_do_not_copy() -> Result<()> {
        let a = HostDevice::new(0);
        let b = HostDevice::new(1);
        let t = Tensor::from_slice(&a, &[1.0f64, 2.0, 3.0], &[3, 1])?;
        let before = t.buffer().clone();
        let r = HostBackend::to_ruccl(t, &b)?;
        assert!(r.buffer().same(&before));
        assert_eq!(r.device(), &b);
        assert_eq!(r.shape(), &[3, 1]);
        let back = HostBackend::from_ruccl(r, &a)?;
        assert!(back.buffer().same(&before));
        assert_eq!(HostBackend::float_device(&back), a);
        Ok(())
    }
}
