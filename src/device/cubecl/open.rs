//! Opening CubeCL devices: the default wgpu adapter, several distinct devices on one adapter,
//! and CUDA GPUs. A device that cannot be opened (no adapter, no driver) is a `Device` error,
//! never a panic: CubeCL panics in these cases, so the driver is looked for first where that
//! is possible and every panic is contained.

#[cfg(any(feature = "wgpu", feature = "cuda"))]
use super::{CubeDevice, contained, io::Io, runtime_name};
#[cfg(any(feature = "wgpu", feature = "cuda"))]
use crate::error::{CollectiveError, Result};

/// A CubeCL device on wgpu (WebGPU: Vulkan, Metal, DX12 or GL underneath).
#[cfg(feature = "wgpu")]
pub type WgpuCubeDevice = CubeDevice<cubecl::wgpu::WgpuRuntime>;

/// A CubeCL device on CUDA.
#[cfg(feature = "cuda")]
pub type CudaCubeDevice = CubeDevice<cubecl::cuda::CudaRuntime>;

impl<R: cubecl::Runtime> CubeDevice<R> {
    /// CubeCL's device `device` of runtime `R`, through the client CubeCL keeps for it: the
    /// device a framework built on CubeCL (burn) already uses, whose tensors' handles this
    /// device can then use without a copy ([`CubeDevice::import`]). Every call names the same
    /// device. On CUDA, host bytes are written straight into device memory, as on a GPU
    /// ruCCL opens; on wgpu they reach it through CubeCL handles (ruCCL did not open it, so it
    /// has no queue of its own for queued writes).
    ///
    /// # Errors
    /// `Device` when CubeCL cannot open the device (no adapter, no driver).
    pub fn from_cubecl(device: &R::Device) -> Result<Self> {
        let name = format!("{device:?}");
        let client = contained(&name, "opening the device", || R::client(device))?;
        let label = format!("{name} ({})", runtime_name(&client));
        Ok(Self::from_client(client, device, label, Io::handles_only(), host_memory()).with_direct_writes(device))
    }
}

#[cfg(feature = "wgpu")]
impl CubeDevice<cubecl::wgpu::WgpuRuntime> {
    /// The default wgpu adapter (CubeCL's `WgpuDevice::DefaultDevice`); every call names the
    /// same device, so ranks that each call it share it.
    ///
    /// # Errors
    /// `Device` when no adapter can be opened (no GPU, no driver).
    pub fn wgpu_default() -> Result<Self> {
        use cubecl::Runtime;
        let device = cubecl::wgpu::WgpuDevice::DefaultDevice;
        let name = "wgpu:default".to_string();
        // Opening the default device ourselves, as CubeCL would, keeps its queue for queued
        // writes (see `io`). If CubeCL already opened it (someone asked it for the default
        // device first), this fails inside CubeCL and uploads go through handles.
        static QUEUE: std::sync::OnceLock<std::result::Result<(wgpu::Device, wgpu::Queue), String>> =
            std::sync::OnceLock::new();
        let setup = QUEUE.get_or_init(|| {
            let setup = || {
                cubecl::wgpu::init_setup::<cubecl::wgpu::AutoGraphicsApi>(
                    &device,
                    cubecl::wgpu::RuntimeOptions::default(),
                )
            };
            contained(&name, "opening the default adapter", setup)
                .map(|s| (s.device, s.queue))
                .map_err(|e| e.to_string())
        });
        // CubeCL's own open of a device it could not set up fails with its device thread's
        // bare `RecvError`; the setup's failure says what is missing.
        let client = contained(&name, "opening the default adapter", || cubecl::wgpu::WgpuRuntime::client(&device))
            .map_err(|e| match setup {
                Err(why) => no_adapter(&name, why),
                Ok(_) => e,
            })?;
        let queue = setup.as_ref().ok().cloned();
        let label = format!("{name} ({})", runtime_name(&client));
        Ok(Self::from_client(client, &device, label, Io::wgpu(queue), host_memory()))
    }

    /// `n` distinct devices opened on the default adapter: each its own wgpu device, queue
    /// and CubeCL device thread. They reach each other through host memory, as distinct GPUs
    /// do — the way to test that path on a machine with one adapter.
    ///
    /// Open them once per process and clone them: CubeCL keeps every device it opened (its
    /// thread, its client and their memory) until the process ends, so each call adds `n`
    /// more for good (about 8 threads and 7 MB each on lavapipe).
    ///
    /// # Errors
    /// `Device` when no adapter or device can be had.
    pub fn wgpu_distinct(n: usize) -> Result<Vec<Self>> {
        use cubecl::Runtime;
        let name = "wgpu".to_string();
        // The backend CubeCL opens its default device on (Vulkan on Linux), so both paths
        // find the same adapters.
        let backend = <cubecl::wgpu::AutoGraphicsApi as cubecl::wgpu::GraphicsApi>::backend();
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: backend.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = cubecl::future::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
        }))
        .map_err(|e| no_adapter(&name, &e.to_string()))?;
        (0..n)
            .map(|_| {
                let (device, queue) = cubecl::future::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("ruccl"),
                    // Not the experimental ones (NVIDIA's Vulkan driver offers mesh shaders and
                    // cooperative matrices): asking for them fails unless experimental features
                    // are enabled, and no kernel here needs them.
                    required_features:
                        adapter.features().difference(
                            wgpu::Features::MAPPABLE_PRIMARY_BUFFERS | wgpu::Features::all_experimental_mask(),
                        ),
                    required_limits: adapter.limits(),
                    memory_hints: wgpu::MemoryHints::MemoryUsage,
                    trace: wgpu::Trace::Off,
                    experimental_features: wgpu::ExperimentalFeatures::disabled(),
                }))
                .map_err(|e| CollectiveError::device(format!("wgpu: cannot open a device: {e}")))?;
                let io = Io::wgpu(Some((device.clone(), queue.clone())));
                let setup = cubecl::wgpu::WgpuSetup {
                    instance: instance.clone(),
                    adapter: adapter.clone(),
                    device,
                    queue,
                    backend: adapter.get_info().backend,
                };
                let id = contained(&name, "opening a device", || {
                    cubecl::wgpu::init_device(setup, cubecl::wgpu::RuntimeOptions::default())
                })?;
                let client = contained(&name, "opening a device", || cubecl::wgpu::WgpuRuntime::client(&id))?;
                let label = format!("wgpu:{id:?} ({})", runtime_name(&client));
                Ok(Self::from_client(client, &id, label, io, host_memory()))
            })
            .collect()
    }
}

/// The error for a wgpu device that cannot be opened: which runtime, that no adapter or
/// driver was found, and what to do about it.
#[cfg(feature = "wgpu")]
fn no_adapter(name: &str, why: &str) -> CollectiveError {
    CollectiveError::device(format!(
        "{name}: no wgpu adapter was found (no GPU, or no Vulkan, Metal, DX12 or GL driver for one). \
         Install the GPU's driver, or Mesa's software Vulkan driver (`apt-get install \
         mesa-vulkan-drivers libvulkan1`), or pick another adapter with CUBECL_WGPU_DEFAULT_DEVICE \
         (e.g. `Cpu`). Cause: {why}"
    ))
}

#[cfg(feature = "cuda")]
impl CubeDevice<cubecl::cuda::CudaRuntime> {
    /// CUDA GPU `index`.
    ///
    /// # Errors
    /// `Device` when the CUDA driver library is missing or the GPU cannot be opened.
    pub fn cuda(index: usize) -> Result<Self> {
        use cubecl::Runtime;
        let name = format!("cuda:{index}");
        // SAFETY: only tries to load the driver library by name; nothing of it is called.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(CollectiveError::device(format!("{name}: no CUDA driver library (libcuda) on this machine")));
        }
        // SAFETY: as above, for the runtime compiler CubeCL compiles kernels with.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(CollectiveError::device(format!("{name}: no NVRTC library (libnvrtc) on this machine")));
        }
        // Asked first: CubeCL panics on its device thread for an index past the last GPU.
        match cuda_count() {
            Ok(n) if index < n => {}
            Ok(n) => {
                return Err(CollectiveError::device(format!(
                    "{name}: this machine has {n} CUDA GPU(s), numbered from 0 (CUDA_VISIBLE_DEVICES narrows them)"
                )));
            }
            Err(e) => return Err(CollectiveError::device(format!("{name}: the CUDA driver failed to start: {e}"))),
        }
        let device = cubecl::cuda::CudaDevice { index };
        let client = contained(&name, "opening the GPU", || cubecl::cuda::CudaRuntime::client(&device))?;
        let label = format!("{name} ({})", runtime_name(&client));
        let memory =
            contained(&name, "asking the GPU's memory size", || cuda_memory(index))?.unwrap_or_else(host_memory);
        Ok(Self::from_client(client, &device, label, Io::handles_only(), memory).with_direct_writes(&device))
    }
}

impl<R: cubecl::Runtime> CubeDevice<R> {
    /// This device, writing host bytes straight into device memory (`direct`) where it is a
    /// CUDA GPU (`device` is CubeCL's device under it); unchanged elsewhere, and where the
    /// GPU's context cannot be had (uploads then go through CubeCL handles).
    fn with_direct_writes(self, device: &R::Device) -> Self {
        #[cfg(feature = "cuda")]
        {
            use std::any::Any;
            let mut this = self;
            let client: &'static dyn Any = this.inner.client;
            if let (Some(cuda), Some(client), Some(inner)) = (
                (device as &dyn Any).downcast_ref::<cubecl::cuda::CudaDevice>(),
                client.downcast_ref::<cubecl::client::ComputeClient<cubecl::cuda::CudaRuntime>>(),
                std::sync::Arc::get_mut(&mut this.inner),
            ) && let Ok(direct) = super::direct::Direct::new(client, cuda.index)
            {
                inner.io = Io::cuda(direct);
            }
            this
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = device;
            self
        }
    }
}

/// How many CUDA GPUs the driver sees.
#[cfg(feature = "cuda")]
fn cuda_count() -> std::result::Result<usize, cudarc::driver::DriverError> {
    use cudarc::driver::result;
    result::init()?;
    Ok(usize::try_from(result::device::get_count()?).unwrap_or(0))
}

/// CUDA GPU `index`'s memory in bytes, if the driver says.
#[cfg(feature = "cuda")]
fn cuda_memory(index: usize) -> Option<usize> {
    use cudarc::driver::result;
    result::init().ok()?;
    let dev = result::device::get(i32::try_from(index).ok()?).ok()?;
    // SAFETY: `dev` is a device handle the initialised driver just returned.
    unsafe { result::device::total_mem(dev) }.ok()
}

/// The host's physical memory in bytes: the memory of a CPU adapter (Mesa's lavapipe), and
/// the bound used where the runtime does not say how much memory its device has (wgpu has no
/// such query).
#[cfg(all(unix, any(feature = "wgpu", feature = "cuda")))]
fn host_memory() -> usize {
    // SAFETY: `sysconf` only reads system configuration values.
    let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    match (usize::try_from(pages), usize::try_from(page)) {
        (Ok(pages), Ok(page)) if pages > 0 && page > 0 => pages.saturating_mul(page),
        _ => usize::MAX,
    }
}

/// Elsewhere the host's memory is not asked: no bound beyond the runtime's own.
#[cfg(all(not(unix), any(feature = "wgpu", feature = "cuda")))]
fn host_memory() -> usize {
    usize::MAX
}

#[cfg(all(test, feature = "cuda"))]
mod tests {
    /// Without a CUDA driver, opening a GPU is a `Device` error, not a panic.
    #[test]
    fn a_missing_cuda_driver_is_a_device_error() {
        match super::CudaCubeDevice::cuda(0) {
            Err(e) => assert_eq!(e.kind(), crate::ErrorKind::Device, "{e}"),
            Ok(d) => eprintln!("SKIPPED: a CUDA GPU is present here ({d:?})"),
        }
    }
}
