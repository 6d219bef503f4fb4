//! The GPU benches' body, compiled with a GPU feature (`wgpu` or `cuda`); see `benches/gpu.rs`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};

use crate::rank_threads::RankThreads;
use ruccl::device::{Range, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::types::Combine;
use ruccl::{Communicator, DType, Device, ReduceOp, Tensor, UniqueId};

const MIB: usize = 1 << 20;

/// The device the bench runs on: CUDA with `--features cuda`, else the default wgpu adapter.
#[cfg(feature = "cuda")]
type Dev = ruccl::device::cubecl::CudaCubeDevice;
/// The device the bench runs on: CUDA with `--features cuda`, else the default wgpu adapter.
#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
type Dev = ruccl::device::cubecl::WgpuCubeDevice;

/// The device every shared-device rank uses.
#[cfg(feature = "cuda")]
fn open() -> ruccl::Result<Dev> {
    Dev::cuda(0)
}

/// Two distinct devices: GPUs 0 and 1, or on a machine with one GPU, GPU 0 and a handle on
/// it that ruCCL treats as another device (staged through the host as two GPUs are).
#[cfg(feature = "cuda")]
fn distinct() -> Option<Vec<Dev>> {
    let first = Dev::cuda(0).ok()?;
    let second = Dev::cuda(1).unwrap_or_else(|_| first.as_distinct(1));
    Some(vec![first, second])
}

/// The sizes of the all_reduce group: 256 MiB always on CUDA.
#[cfg(feature = "cuda")]
fn big() -> bool {
    true
}

/// The device every shared-device rank uses.
#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
fn open() -> ruccl::Result<Dev> {
    Dev::wgpu_default()
}

/// Two devices opened on the one adapter: distinct devices to ruCCL, staged through the host.
#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
fn distinct() -> Option<Vec<Dev>> {
    Dev::wgpu_distinct(2).ok()
}

/// The sizes of the all_reduce group: 256 MiB on wgpu only when asked (lavapipe is slow).
#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
fn big() -> bool {
    std::env::var_os("RUCCL_GPU_BENCH_BIG").is_some()
}

fn device_ops(c: &mut Criterion) {
    let dev = match open() {
        Ok(d) => d,
        Err(e) if std::env::var("RUCCL_GPU_REQUIRED").is_ok_and(|v| v == "1") => {
            panic!("RUCCL_GPU_REQUIRED=1, but the GPU device is unavailable: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED the GPU benches: {e}");
            return;
        }
    };
    let bytes = 64 * MIB;
    let mut g = c.benchmark_group("gpu_device/64MiB");
    g.throughput(Throughput::Bytes(bytes as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let range = |b: &ruccl::device::CubeBuffer| Range::new(b.clone(), 0, bytes);
    let (a, b, d) = (dev.alloc(bytes).unwrap(), dev.alloc(bytes).unwrap(), dev.alloc(bytes).unwrap());
    let (a, b, d) = (range(&a), range(&b), range(&d));
    g.bench_function("copy", |bench| {
        bench.iter(|| {
            let ev = dev.copy(&a, &d).unwrap();
            dev.wait(&ev, None).unwrap();
        })
    });
    let srcs = [Source::Device(b.clone())];
    g.bench_function("reduce f32 sum", |bench| {
        bench.iter(|| {
            let ev = dev.reduce(&d, &a, &srcs, DType::F32, Combine::Sum).unwrap();
            dev.wait(&ev, None).unwrap();
        })
    });
    let host = HostMem::zeroed(bytes).unwrap();
    host.write(0, bytes).unwrap().fill(1);
    let region = HostRegion { mem: host, off: 0, len: bytes };
    g.bench_function("upload", |bench| {
        bench.iter(|| {
            let ev = dev.upload(&d, &region).unwrap();
            dev.wait(&ev, None).unwrap();
        })
    });
    g.bench_function("download", |bench| {
        bench.iter(|| {
            let ev = dev.download(&d, &region).unwrap();
            dev.wait(&ev, None).unwrap();
        })
    });
    let host_src = [Source::Host(region.clone())];
    g.bench_function("reduce f32 sum, host source", |bench| {
        bench.iter(|| {
            let ev = dev.reduce(&d, &a, &host_src, DType::F32, Combine::Sum).unwrap();
            dev.wait(&ev, None).unwrap();
        })
    });
    g.finish();
}

/// Each `Device` call at sizes from 4 KiB up, so fixed costs (launches, syncs, allocations)
/// show apart from per-byte ones: a 64 MiB upload that costs 40× a 1 MiB one is per-byte
/// (host copies, pageable transfers), one that costs about the same is a fixed cost.
fn transfers(c: &mut Criterion) {
    let Ok(dev) = open() else { return };
    for (bytes, label) in [(4 << 10, "4KiB"), (MIB, "1MiB"), (16 * MIB, "16MiB")] {
        let mut g = c.benchmark_group(format!("gpu_calls/{label}"));
        g.throughput(Throughput::Bytes(bytes as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        let range = |b: &ruccl::device::CubeBuffer| Range::new(b.clone(), 0, bytes);
        let (a, d) = (range(&dev.alloc(bytes).unwrap()), range(&dev.alloc(bytes).unwrap()));
        let host = HostMem::zeroed(bytes).unwrap();
        host.write(0, bytes).unwrap().fill(1);
        let region = HostRegion { mem: host, off: 0, len: bytes };
        let srcs = [Source::Device(a.clone())];
        let calls: [(&str, &dyn Fn() -> ruccl::Result<_>); 4] = [
            ("upload", &|| dev.upload(&d, &region)),
            ("download", &|| dev.download(&d, &region)),
            ("copy", &|| dev.copy(&a, &d)),
            ("reduce f32 sum", &|| dev.reduce(&d, &d, &srcs, DType::F32, Combine::Sum)),
        ];
        for (name, call) in calls {
            g.bench_function(name, |bench| {
                bench.iter(|| {
                    let ev = call().unwrap();
                    dev.wait(&ev, None).unwrap();
                })
            });
        }
        g.finish();
    }
}

/// CUDA only: where a 64 MiB upload's time goes (the H200 took 165 ms in `gpu_device`, where a
/// download took 8 ms). The steps of `Device::upload` alone — CubeCL's `create` of a host
/// buffer, with a sync — against a raw `cuMemcpyHtoD` into the same device memory from
/// pageable and from page-locked memory: the rate a direct path into the destination's own
/// allocation would reach. A diagnosis for a GPU session, not a path ruCCL takes.
#[cfg(feature = "cuda")]
fn cuda_upload(c: &mut Criterion) {
    use cubecl::Runtime;
    use cubecl::cuda::{CudaDevice, CudaRuntime};
    use cudarc::driver::result as cu;
    let Ok(dev) = open() else { return };
    let bytes = 64 * MIB;
    // The same CubeCL device (one server per device): its memory, and its primary context.
    let client = CudaRuntime::client(&CudaDevice { index: 0 });
    let buf = dev.alloc(bytes).unwrap();
    let ptr = client.get_resource(buf.to_handle().unwrap()).unwrap().resource().ptr;
    // SAFETY: device 0 exists (`open` succeeded); its primary context is CubeCL's.
    unsafe { cu::ctx::set_current(cu::primary_ctx::retain(cu::device::get(0).unwrap()).unwrap()).unwrap() };
    let host = vec![1u8; bytes];
    // SAFETY: a fresh page-locked allocation of `bytes`, freed below.
    let pinned_ptr = unsafe { cu::malloc_host(bytes, 0).unwrap() };
    // SAFETY: `pinned_ptr` holds `bytes` bytes, and nothing else touches them.
    let pinned = unsafe { std::slice::from_raw_parts_mut(pinned_ptr.cast::<u8>(), bytes) };
    pinned.fill(1);
    let mut g = c.benchmark_group("cuda_upload/64MiB");
    g.throughput(Throughput::Bytes(bytes as u64))
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function("host copy (Vec clone)", |b| b.iter(|| std::hint::black_box(host.clone())));
    g.bench_function("CubeCL create + sync", |b| {
        b.iter(|| {
            let h = client.create(cubecl::bytes::Bytes::from_bytes_vec(host.clone()));
            cubecl::future::block_on(client.sync()).unwrap();
            drop(h);
        })
    });
    // SAFETY (both): `ptr` is `bytes` of live device memory (`buf`), and the whole context is
    // synchronised after each copy, so no kernel overlaps it.
    g.bench_function("raw cuMemcpyHtoD, pageable", |b| {
        b.iter(|| unsafe {
            cu::memcpy_htod_sync(ptr, &host).unwrap();
            cu::ctx::synchronize().unwrap();
        })
    });
    g.bench_function("raw cuMemcpyHtoD, page-locked", |b| {
        b.iter(|| unsafe {
            cu::memcpy_htod_sync(ptr, &*pinned).unwrap();
            cu::ctx::synchronize().unwrap();
        })
    });
    g.finish();
    // SAFETY: allocated above by `malloc_host`, no longer used.
    unsafe { cu::free_host(pinned_ptr).unwrap() };
}

#[cfg(not(feature = "cuda"))]
fn cuda_upload(_: &mut Criterion) {}

/// `devs.len()` rank threads, rank `r` on `devs[r]`, repeating an f32 sum all_reduce.
fn ranks(devs: Vec<Dev>, bytes: usize) -> RankThreads {
    let id = UniqueId::new().expect("unique id");
    let n = devs.len();
    RankThreads::new(n, move |rank| {
        let dev = devs[rank].clone();
        let comm = Communicator::new(dev.clone(), n, id.clone(), rank).expect("join");
        let count = bytes / 4;
        let x = Tensor::from_slice(&dev, &vec![1.0f32; count], &[count]).expect("input");
        let mut y = Tensor::zeros(&dev, DType::F32, &[count]).expect("output");
        move || comm.all_reduce_into(&mut y, &x, ReduceOp::Sum).expect("all_reduce")
    })
}

fn all_reduce(c: &mut Criterion) {
    let Ok(shared) = open() else { return };
    let mut sizes = vec![(MIB, "1MiB"), (64 * MIB, "64MiB")];
    if big() {
        sizes.push((256 * MIB, "256MiB"));
    }
    let distinct = distinct();
    if distinct.is_none() {
        eprintln!("SKIPPED the distinct-devices all_reduce: there are not two devices");
    }
    for (bytes, label) in sizes {
        let mut g = c.benchmark_group(format!("gpu_all_reduce/{label}"));
        g.throughput(Throughput::Bytes(bytes as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(if bytes > MIB { 5 } else { 2 }));
        let pairs = [("shared device", Some(vec![shared.clone(); 4])), ("distinct devices", distinct.clone())];
        for (name, devs) in pairs.into_iter().filter_map(|(name, devs)| Some((name, devs?))) {
            let n = devs.len();
            let group = ranks(devs, bytes);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| b.iter_custom(|iters| group.run(iters)));
        }
        g.finish();
    }
}

criterion_group!(benches, device_ops, transfers, cuda_upload, all_reduce);
