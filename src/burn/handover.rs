//! [`Handover`]: how a burn backend's float tensors reach a ruCCL device and come back — the
//! one conversion both the peer API ([`Burn`](super::Burn)) and gradient sync
//! ([`AllReduceWith`](super::AllReduceWith)) go through.

use ::burn::tensor::backend::Backend as BurnBackend;

use crate::device::Device;
use crate::error::Result;
use crate::tensor::Tensor;

/// What ruCCL will do with a tensor handed to it, which decides whether it may share memory
/// with tensors burn still holds (burn tensor clones share storage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// ruCCL only reads it (the peer API reduces into a new output): memory may be shared.
    Read,
    /// ruCCL writes the result into it (gradient sync reduces gradients in place): it must
    /// share memory with no tensor burn still holds, so a shared tensor is copied first.
    Write,
}

/// How burn backend `Self`'s float tensors become ruCCL tensors on device `D` and come back.
///
/// - Every burn backend, through host data, on [`HostDevice`](crate::HostDevice): each
///   conversion is a copy, so nothing burn holds is ever written.
/// - burn's CubeCL backends, on the [`CubeDevice`](crate::device::CubeDevice) of the
///   tensor's own CubeCL device: no copy and no byte through host memory. A tensor is taken
///   as it is when it is contiguous and, for [`Access::Write`], shares its memory with no
///   other tensor; otherwise it is first copied on the device. They are
///   `CubeBackend<WgpuRuntime, ..>` (features `burn` and `wgpu`), burn's default wgpu backend
///   `Fusion<CubeBackend<WgpuRuntime, ..>>` (feature `burn-fusion`; a fused tensor is first
///   resolved, which runs the work queued for it, and results are registered back with
///   burn's fusion server) and `burn::backend::Cuda` (features `burn` and `cuda`, without
///   `burn-fusion`).
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use ruccl::HostDevice;
/// use ruccl::burn::{Access, Handover};
///
/// let device = Default::default();
/// let t = Tensor::<NdArray, 1>::from_floats([1.0, 2.0], &device);
/// let comm = <NdArray as Handover<HostDevice>>::comm_device(&device)?;
/// let r = <NdArray as Handover<HostDevice>>::to_ruccl(t.clone().into_primitive().tensor(), &comm, Access::Write)?;
/// assert_eq!(r.to_vec::<f32>()?, vec![1.0, 2.0]); // a copy: writing it leaves `t` alone
/// let back = <NdArray as Handover<HostDevice>>::from_ruccl(r, &device)?;
/// let back = Tensor::<NdArray, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(back));
/// assert_eq!(back.into_data(), t.into_data());
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub trait Handover<D: Device>: BurnBackend {
    /// The ruCCL device that collectives on `device`'s tensors run on.
    ///
    /// # Errors
    /// `Device` when it cannot be opened.
    fn comm_device(device: &Self::Device) -> Result<D>;

    /// Hands `tensor` to ruCCL on `comm`, for `access`.
    ///
    /// # Errors
    /// `Unsupported` for a dtype ruCCL has no float type for (or a quantized tensor);
    /// `InvalidArgument` when the tensor is on a device `comm` cannot use; `Device` when
    /// reading or copying it fails.
    fn to_ruccl(tensor: Self::FloatTensorPrimitive, comm: &D, access: Access) -> Result<Tensor<D>>;

    /// Takes a ruCCL tensor back as a burn tensor on `device`.
    ///
    /// # Errors
    /// `Unsupported` when burn cannot hold the tensor's dtype; `InvalidArgument` when the
    /// tensor is not on `device`; `Device` when the copy fails.
    fn from_ruccl(tensor: Tensor<D>, device: &Self::Device) -> Result<Self::FloatTensorPrimitive>;
}
