//! [`Burn`]: the peer API's [`Backend`](crate::api::Backend) contract for burn backends, on
//! whichever ruCCL device their [`Handover`] reaches.

use std::marker::PhantomData;

use super::{Access, Handover};
use crate::device::{Device, HostDevice};
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::DType;

/// A burn backend `B` as a peer-API [`Backend`](crate::api::Backend), collectives running on
/// ruCCL device `D`. Autodiff callers pass the inner backend.
///
/// - `Burn<B>` (`D` = [`HostDevice`]), for every burn backend: float tensors are read into
///   host memory, reduced there, and come back as new burn tensors on the peer's device.
/// - `Burn<CubeBackend<WgpuRuntime, ..>, WgpuCubeDevice>` (features `burn` and `wgpu`; see
///   [`BurnWgpu`](super::BurnWgpu)): burn's wgpu tensors are reduced on their own device, in
///   place of host memory, and the results come back as burn tensors on that device — no copy
///   and no byte through host memory.
///
/// Either way the input's memory is only read: a clone of the input still holds the input
/// afterwards.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::tensor::Tensor;
/// use ruccl::api::{self, CollectiveConfig, PeerId, ReduceOperation};
/// use ruccl::burn::Burn;
///
/// let device = Default::default();
/// let peer = PeerId::new(0);
/// api::register::<Burn<NdArray>>(peer, device, CollectiveConfig::default())?;
/// let t = Tensor::<NdArray, 1>::from_floats([1.0, 2.0], &device);
/// let kept = t.clone(); // shares t's storage
/// let mean = api::all_reduce::<Burn<NdArray>>(peer, t.into_primitive().tensor(), ReduceOperation::Mean)?;
/// let mean = Tensor::<NdArray, 1>::from_primitive(burn::tensor::TensorPrimitive::Float(mean));
/// assert_eq!(mean.into_data().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
/// assert_eq!(kept.into_data().to_vec::<f32>().unwrap(), vec![1.0, 2.0]); // the input is untouched
/// api::finish_collective::<Burn<NdArray>>(peer)?;
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct Burn<B, D = HostDevice>(PhantomData<fn() -> (B, D)>);

impl<B: Handover<D>, D: Device> crate::api::Backend for Burn<B, D>
where
    B::FloatTensorPrimitive: Send,
{
    type Device = B::Device;
    type FloatTensorPrimitive = B::FloatTensorPrimitive;
    type CommDevice = D;
    const FLOAT_DTYPES: &'static [DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

    fn comm_device(device: &B::Device) -> Result<D> {
        B::comm_device(device)
    }

    fn float_device(tensor: &B::FloatTensorPrimitive) -> B::Device {
        B::float_device(tensor)
    }

    /// The peer API reduces into a new output, so the input is only read.
    fn to_ruccl(tensor: B::FloatTensorPrimitive, device: &D) -> Result<Tensor<D>> {
        B::to_ruccl(tensor, device, Access::Read)
    }

    fn from_ruccl(tensor: Tensor<D>, device: &B::Device) -> Result<B::FloatTensorPrimitive> {
        B::from_ruccl(tensor, device)
    }
}
