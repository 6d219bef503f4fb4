//! burn's default wgpu backend, `Fusion<CubeBackend<WgpuRuntime, ..>>` (feature
//! `burn-fusion`): [`Handover`] resolves a fused tensor to the CubeCL tensor it stands for,
//! hands that over as the plain backend does ([`cube`](super::cube)), and registers results
//! back with burn's fusion server — still no copy and no byte through host memory.
//!
//! - **Resolving.** A fusion tensor is a description of work not yet run. Resolving it
//!   (`FusionClient::resolve_tensor_float`) first runs the work queued on the tensor's fusion
//!   stream, then returns its `CubeTensor`. When no clone of the fusion tensor is alive, the
//!   fusion server gives its handle up; otherwise it keeps one, the `CubeTensor` is shared,
//!   and [`Access::Write`] copies it on the device (the plain backend's rule), so ruCCL never
//!   writes memory a clone still reads.
//! - **Registering back.** A result becomes a fusion tensor the way burn's own
//!   `float_from_data` makes one: its handle is registered with the server, and an `Init`
//!   operation that runs nothing tells the fusion stream the tensor exists.
//! - **Panics.** burn-fusion panics (on its server thread, re-raised here) when a tensor id
//!   is unknown; each call into it is contained and reported as a `Device` error.

use ::burn::backend::ir::{BackendIr, InitOperationIr, OperationIr};
use ::burn::backend::wgpu::{BoolElement, CubeBackend, FloatElement, IntElement, WgpuDevice, WgpuRuntime};
use ::burn::tensor::TensorMetadata;
use burn_fusion::stream::OperationStreams;
use burn_fusion::{Fusion, FusionTensor, NoOp, get_client};

use super::cube::contained;
use super::host::ruccl_dtype;
use super::{Access, Handover};
use crate::device::cubecl::WgpuCubeDevice;
use crate::error::{CollectiveError, Result};
use crate::tensor::Tensor;

/// burn's default wgpu backend when burn is built with `fusion` (its default): what
/// `burn::backend::Wgpu` is then, with its default element types.
pub type FusedWgpuBackend = Fusion<super::WgpuBackend>;

/// burn's default (fused) wgpu backend in the peer API, reducing on the tensors' own device:
/// `api::register::<BurnFusedWgpu>(peer, WgpuDevice::DefaultDevice, config)`.
pub type BurnFusedWgpu = super::Burn<FusedWgpuBackend, WgpuCubeDevice>;

/// The fusion runtime burn's CubeCL wgpu backend runs under.
type Runtime<F, I, BT> = <CubeBackend<WgpuRuntime, F, I, BT> as burn_fusion::FusionBackend>::FusionRuntime;

impl<F: FloatElement, I: IntElement, BT: BoolElement> Handover<WgpuCubeDevice>
    for Fusion<CubeBackend<WgpuRuntime, F, I, BT>>
{
    fn comm_device(device: &WgpuDevice) -> Result<WgpuCubeDevice> {
        <CubeBackend<WgpuRuntime, F, I, BT> as Handover<WgpuCubeDevice>>::comm_device(device)
    }

    fn to_ruccl(
        t: FusionTensor<Runtime<F, I, BT>>,
        comm: &WgpuCubeDevice,
        access: Access,
    ) -> Result<Tensor<WgpuCubeDevice>> {
        // Checked before resolving, so an unsupported tensor leaves the fusion stream alone.
        if ruccl_dtype(t.dtype()).is_none() {
            return Err(CollectiveError::unsupported(format!(
                "burn's {:?} tensors have no ruCCL float dtype",
                t.dtype()
            )));
        }
        let client = t.client.clone();
        let cube = contained("resolving a fused burn tensor", || {
            client.resolve_tensor_float::<CubeBackend<WgpuRuntime, F, I, BT>>(t)
        })?;
        <CubeBackend<WgpuRuntime, F, I, BT> as Handover<WgpuCubeDevice>>::to_ruccl(cube, comm, access)
    }

    fn from_ruccl(t: Tensor<WgpuCubeDevice>, device: &WgpuDevice) -> Result<FusionTensor<Runtime<F, I, BT>>> {
        let cube = <CubeBackend<WgpuRuntime, F, I, BT> as Handover<WgpuCubeDevice>>::from_ruccl(t, device)?;
        let (shape, dtype) = (cube.shape(), cube.dtype());
        contained("registering a tensor with burn's fusion server", || {
            let client = get_client::<CubeBackend<WgpuRuntime, F, I, BT>>(device);
            let handle = <CubeBackend<WgpuRuntime, F, I, BT> as BackendIr>::float_tensor_handle(cube);
            let init = InitOperationIr::create(shape, dtype, || client.register_tensor_handle(handle));
            client
                .register(
                    OperationStreams::default(),
                    OperationIr::Init(init),
                    NoOp::<CubeBackend<WgpuRuntime, F, I, BT>>::new(),
                )
                .into_iter()
                .next()
        })?
        .ok_or_else(|| CollectiveError::device("burn's fusion server made no tensor for a registered handle"))
    }
}
