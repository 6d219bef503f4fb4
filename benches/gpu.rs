//! GPU device bandwidth on the default wgpu adapter (CubeCL device; Mesa's lavapipe on CI
//! machines, where the figures are a CPU emulation's and judge nothing absolute).
//!
//! Run: `XDG_RUNTIME_DIR=/tmp cargo bench -p ruCCL --features wgpu --bench gpu`
//! (add a filter, e.g. `-- gpu_device`). `RUCCL_GPU_BENCH_BIG=1` adds the 256 MiB all_reduce
//! (above the 128 MiB one binding holds on lavapipe: its buffers are held in parts there).
//!
//! Groups:
//! - `gpu_device/64MiB`: the reduce kernel (f32 sum, one device source) against a plain
//!   device copy of the same bytes on the same device, and host→device upload and
//!   device→host download through the `Device` contract (staged transfers).
//! - `gpu_all_reduce/{1MiB,64MiB}`: all_reduce (f32 sum) across 4 ranks sharing one device
//!   (rank threads; device payloads, no host bytes), and across 2 ranks on distinct devices
//!   opened on the one adapter (staged through host memory).
//!
//! Criterion reports `Throughput::Bytes` of the buffer (algbw); a copy or a reduce reads and
//! writes more than that (copy: 2×, reduce: 3×).

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

#[path = "common/rank_threads.rs"]
mod rank_threads;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rank_threads::RankThreads;
use ruccl::device::cubecl::WgpuCubeDevice;
use ruccl::device::{Range, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::types::Combine;
use ruccl::{Communicator, DType, Device, ReduceOp, Tensor, UniqueId};

const MIB: usize = 1 << 20;

fn device_ops(c: &mut Criterion) {
    let dev = match WgpuCubeDevice::wgpu_default() {
        Ok(d) => d,
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

/// `devs.len()` rank threads, rank `r` on `devs[r]`, repeating an f32 sum all_reduce.
fn ranks(devs: Vec<WgpuCubeDevice>, bytes: usize) -> RankThreads {
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
    let Ok(shared) = WgpuCubeDevice::wgpu_default() else { return };
    let mut sizes = vec![(MIB, "1MiB"), (64 * MIB, "64MiB")];
    if std::env::var_os("RUCCL_GPU_BENCH_BIG").is_some() {
        sizes.push((256 * MIB, "256MiB"));
    }
    let distinct = WgpuCubeDevice::wgpu_distinct(2).expect("two devices on one adapter");
    for (bytes, label) in sizes {
        let mut g = c.benchmark_group(format!("gpu_all_reduce/{label}"));
        g.throughput(Throughput::Bytes(bytes as u64))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(if bytes > MIB { 5 } else { 2 }));
        for (name, devs) in [("shared device", vec![shared.clone(); 4]), ("distinct devices", distinct.clone())] {
            let n = devs.len();
            let group = ranks(devs, bytes);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| b.iter_custom(|iters| group.run(iters)));
        }
        g.finish();
    }
}

criterion_group!(benches, device_ops, all_reduce);
criterion_main!(benches);
