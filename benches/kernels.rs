//! Hot paths below the collectives, for regression tracking: the host reduction kernels per
//! dtype (two sources and the fused four-source form) and plan building.
//!
//! Run: `cargo bench --bench kernels`

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ruccl::algo::build;
use ruccl::op::{OpDesc, OpKind};
use ruccl::types::Combine;
use ruccl::{Algorithm, DType, Device, HostDevice, ReduceOp};

const BYTES: usize = 1 << 20;

fn kernels(c: &mut Criterion) {
    let dev = HostDevice::default();
    let mut g = c.benchmark_group("reduce_host/1MiB");
    g.throughput(Throughput::Bytes(BYTES as u64)).sample_size(20).measurement_time(Duration::from_secs(1));
    let dst = dev.alloc(BYTES).unwrap();
    let acc = dev.alloc(BYTES).unwrap();
    let srcs: Vec<Vec<u8>> = (0..3).map(|k| vec![k as u8; BYTES]).collect();
    for dt in DType::ALL {
        g.bench_function(format!("{dt} sum"), |b| {
            b.iter(|| dev.reduce_host(&dst, 0, &acc, 0, &srcs[0], dt, Combine::Sum).unwrap())
        });
    }
    g.bench_function("f32 max", |b| {
        b.iter(|| dev.reduce_host(&dst, 0, &acc, 0, &srcs[0], DType::F32, Combine::Max).unwrap())
    });
    let views: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
    g.bench_function("f32 sum fused 4 sources", |b| {
        b.iter(|| dev.reduce_host_many(&dst, 0, &acc, 0, &views, DType::F32, Combine::Sum).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("plan");
    g.sample_size(20).measurement_time(Duration::from_secs(1));
    let mut d = OpDesc::new(OpKind::AllReduce, DType::F32, 16 << 20);
    d.op = Some(ReduceOp::Sum);
    for algo in [Algorithm::Ring, Algorithm::Direct, Algorithm::RecursiveDoubling] {
        g.bench_function(format!("all_reduce 64MiB 8 ranks {algo}"), |b| b.iter(|| build(&d, 3, 8, algo, 1 << 18)));
    }
    g.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
