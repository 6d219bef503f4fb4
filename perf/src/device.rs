//! The devices ranks run on (`--device`, `--distinct`): which ruCCL device type each name
//! stands for, opening every rank's device before the run, and the name the header prints.
//!
//! The run is generic over the device and monomorphised per device type, so the host path
//! is the same code it was before GPU devices existed: no dynamic dispatch, no extra copy.

use ruccl::api::{Backend, HostBackend};
use ruccl::{Device, HostDevice, Tensor};

/// What `--device` names. Parsing only lets through the devices compiled into this build
/// ([`DEVICES`](crate::args::DEVICES)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// Host memory and the CPU (the default).
    Host,
    /// The CubeCL device on wgpu (feature `wgpu`).
    Wgpu,
    /// The CubeCL device on CUDA (feature `cuda`).
    Cuda,
}

impl DeviceKind {
    /// The `--device` name.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Host => "host",
            DeviceKind::Wgpu => "wgpu",
            DeviceKind::Cuda => "cuda",
        }
    }
}

/// A ruCCL device ranks can run on, with the peer-API backend for its tensors (`--api peer`).
pub trait PerfDevice: Device {
    /// The peer API's backend whose tensors are this device's ruCCL tensors.
    type Peer: Backend<Device = Self, FloatTensorPrimitive = Tensor<Self>, CommDevice = Self>;
}

impl PerfDevice for HostDevice {
    type Peer = HostBackend;
}

#[cfg(feature = "wgpu")]
impl PerfDevice for ruccl::device::cubecl::WgpuCubeDevice {
    type Peer = ruccl::api::DeviceBackend<Self>;
}

#[cfg(feature = "cuda")]
impl PerfDevice for ruccl::device::cubecl::CudaCubeDevice {
    type Peer = ruccl::api::DeviceBackend<Self>;
}

/// One logical host device per rank (all the same memory).
pub fn host(ranks: usize) -> Vec<HostDevice> {
    (0..ranks).map(|r| HostDevice::new(r as u32)).collect()
}

/// Every rank's device on wgpu: the default adapter's device shared by all ranks, or with
/// `distinct` one device per rank opened on that adapter (they stage through host memory).
///
/// # Errors
/// `Device` when no adapter or device can be opened.
#[cfg(feature = "wgpu")]
pub fn wgpu(ranks: usize, distinct: bool) -> ruccl::Result<Vec<ruccl::device::cubecl::WgpuCubeDevice>> {
    use ruccl::device::cubecl::WgpuCubeDevice;
    if distinct { WgpuCubeDevice::wgpu_distinct(ranks) } else { Ok(vec![WgpuCubeDevice::wgpu_default()?; ranks]) }
}

/// Every rank's device on CUDA: GPU 0 shared by all ranks, or with `distinct` GPU `rank`
/// for rank `rank`.
///
/// # Errors
/// `Device` when the driver is missing or a GPU cannot be opened.
#[cfg(feature = "cuda")]
pub fn cuda(ranks: usize, distinct: bool) -> ruccl::Result<Vec<ruccl::device::cubecl::CudaCubeDevice>> {
    use ruccl::device::cubecl::CudaCubeDevice;
    if distinct { (0..ranks).map(CudaCubeDevice::cuda).collect() } else { Ok(vec![CudaCubeDevice::cuda(0)?; ranks]) }
}

/// The header's name for the ranks' devices: `host`, one device shared by every rank, or
/// the distinct devices in rank order.
pub fn describe<D: Device>(devices: &[D]) -> String {
    let Some(first) = devices.first() else { return "none".into() };
    let name = first.describe();
    if name.starts_with("host") {
        // Logical host devices are one memory.
        "host".into()
    } else if devices.iter().all(|d| d.same_device(first)) {
        format!("{name} shared by {} rank(s)", devices.len())
    } else {
        let names: Vec<String> = devices.iter().map(Device::describe).collect();
        format!("one per rank: {}", names.join(", "))
    }
}
