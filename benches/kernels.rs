//! Hot paths below the collectives, for regression tracking: the host reduction kernels per
//! dtype (two sources and the fused four-source form) and plan building.
//!
//! Run: `cargo bench --bench kernels`

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ruccl::algo::build;
use ruccl::device::{Range, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::op::{OpDesc, OpKind};
use ruccl::types::Combine;
use ruccl::{Algorithm, DType, Device, HostDevice, ReduceOp};

const BYTES: usize = 1 << 20;

fn kernels(c: &mut Criterion) {
    let dev = HostDevice::default();
    let mut g = c.benchmark_group("reduce_host/1MiB");
    g.throughput(Throughput::Bytes(BYTES as u64)).sample_size(20).measurement_time(Duration::from_secs(1));
    let range = |b: &HostMem| Range::new(b.clone(), 0, BYTES);
    let (dst, acc) = (range(&dev.alloc(BYTES).unwrap()), range(&dev.alloc(BYTES).unwrap()));
    // Received bytes: host regions, as a peer's messages are.
    let srcs: Vec<Source<HostMem>> = (0..3)
        .map(|k| {
            let m = HostMem::zeroed(BYTES).unwrap();
            m.write(0, BYTES).unwrap().fill(k as u8);
            Source::Host(HostRegion { mem: m, off: 0, len: BYTES })
        })
        .collect();
    for dt in DType::ALL {
        g.bench_function(format!("{dt} sum"), |b| {
            b.iter(|| dev.reduce(&dst, &acc, &srcs[..1], dt, Combine::Sum).unwrap())
        });
    }
    g.bench_function("f32 max", |b| b.iter(|| dev.reduce(&dst, &acc, &srcs[..1], DType::F32, Combine::Max).unwrap()));
    g.bench_function("f32 sum fused 4 sources", |b| {
        b.iter(|| dev.reduce(&dst, &acc, &srcs, DType::F32, Combine::Sum).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("plan");
    g.sample_size(20).measurement_time(Duration::from_secs(1));
    let mut d = OpDesc::new(OpKind::AllReduce, DType::F32, 16 << 20);
    d.op = Some(ReduceOp::Sum);
    for algo in [Algorithm::Ring, Algorithm::Direct, Algorithm::RecursiveDoubling] {
        g.bench_function(format!("all_reduce 64MiB 8 ranks {algo}"), |b| {
            b.iter(|| build(&d, 3, 8, algo, 1 << 18, false))
        });
    }
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
