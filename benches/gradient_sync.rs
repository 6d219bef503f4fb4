//! Gradient synchronisation on the host, 4 in-process ranks.
//!
//! Run: `cargo bench --bench gradient_sync`.
//!
//! The parameter set looks like a real model's: 50 layers of a weight (4 Ki to 4 Mi elements),
//! a bias (1–4 Ki) and a norm's weight and bias (1 Ki each) — 200 f32 tensors, about 100 MB.
//! Four ways to average them across the ranks, each one "step":
//! - `bucketed`: `GradientSync` with its defaults — gradients under 1 MiB packed into 25 MiB
//!   buckets, larger ones reduced in place — handed over one at a time, one non-blocking
//!   all_reduce per bucket;
//! - `bucketed_packed`: every gradient copied into 25 MiB buckets and back, as PyTorch DDP
//!   does (`SyncConfig::with_in_place_bytes(usize::MAX)`): what the copies cost on the host;
//! - `per_tensor`: one blocking all_reduce per tensor (what burn did);
//! - `single`: one all_reduce of a single tensor of the same total bytes (the floor).
//!
//! Criterion reports `Throughput::Bytes` of the whole set (algbw). The targets: bucketed at
//! least 5x faster than per_tensor, and within 1.5x of single.
//!
//! A second set, `small`, is where bucketing is for: 1000 gradients of 256 to 4 Ki elements
//! (about 6 MB), the norms, biases and embeddings of a small model, where one collective per
//! tensor pays its fixed cost 1000 times.

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

#[path = "common/rank_threads.rs"]
mod rank_threads;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rank_threads::RankThreads;
use ruccl::grad::{GradientSync, ParamSpec, SyncConfig};
use ruccl::{CommConfig, Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};

const RANKS: usize = 4;

/// A parameter set: (id, element count) of every gradient.
type Set = fn() -> Vec<(String, usize)>;

/// The model-shaped parameter set: (id, element count), 200 tensors.
fn model() -> Vec<(String, usize)> {
    let cycle = [4 << 20, 1 << 20, 512 << 10, 256 << 10, 128 << 10, 64 << 10, 32 << 10, 16 << 10, 8 << 10, 4 << 10];
    let mut out = Vec::new();
    for l in 0..50 {
        // Two of the five 4 Mi weights are 1 Mi, for about 100 MB in all.
        let weight = if l == 30 || l == 40 { 1 << 20 } else { cycle[l % 10] };
        out.push((format!("layer{l:02}.weight"), weight));
        out.push((format!("layer{l:02}.bias"), 1024 * (1 + l % 4)));
        out.push((format!("layer{l:02}.norm.weight"), 1024));
        out.push((format!("layer{l:02}.norm.bias"), 1024));
    }
    out
}

/// Many small gradients: 1000 tensors of 256 to 4 Ki elements.
fn small() -> Vec<(String, usize)> {
    (0..1000).map(|i| (format!("p{i:04}"), 256 << (i % 5))).collect()
}

#[derive(Clone, Copy, Debug)]
enum Way {
    Bucketed(SyncConfig),
    PerTensor,
    Single,
}

fn ranks(set: Set, way: Way) -> RankThreads {
    let id = UniqueId::new().expect("unique id");
    RankThreads::new(RANKS, move |rank| -> Box<dyn FnMut()> {
        let dev = HostDevice::default();
        let comm = Communicator::with_config(dev, RANKS, id.clone(), rank, CommConfig::default()).expect("join");
        let grads: Vec<(String, Tensor<HostDevice>)> = set()
            .into_iter()
            .map(|(name, n)| (name, Tensor::from_slice(&dev, &vec![1.0f32; n], &[n]).expect("gradient")))
            .collect();
        match way {
            Way::Bucketed(config) => {
                // The sync borrows its communicator for the whole run; the bench never ends it.
                let comm: &'static Communicator<HostDevice> = Box::leak(Box::new(comm));
                let specs = grads.iter().map(|(name, t)| (name.clone(), ParamSpec::of(t)));
                let mut sync = GradientSync::with_config(comm, specs, config).expect("sync");
                let mut grads = grads;
                Box::new(move || {
                    // Backward hands the last layer's gradients over first.
                    for (name, t) in std::mem::take(&mut grads).into_iter().rev() {
                        sync.push(&name, t).expect("push");
                    }
                    grads = sync.wait().expect("wait");
                })
            }
            Way::PerTensor => {
                let mut grads = grads;
                Box::new(move || {
                    for (_, t) in grads.iter_mut().rev() {
                        comm.all_reduce(t, ReduceOp::Avg).expect("all_reduce");
                    }
                })
            }
            Way::Single => {
                let total: usize = grads.iter().map(|(_, t)| t.numel()).sum();
                let mut flat = Tensor::zeros(&dev, DType::F32, &[total]).expect("flat");
                Box::new(move || comm.all_reduce(&mut flat, ReduceOp::Avg).expect("all_reduce"))
            }
        }
    })
}

fn gradient_sync(c: &mut Criterion) {
    let sets: [(&str, Set); 2] = [("model", model), ("small", small)];
    for (label, set) in sets {
        let bytes: usize = set().iter().map(|(_, n)| n * 4).sum();
        let tensors = set().len();
        let mut g = c.benchmark_group(format!("gradient_sync/{label}/{tensors}_tensors/{}MB", bytes / 1_000_000));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));
        g.throughput(Throughput::Bytes(bytes as u64));
        group(&mut g, set);
        g.finish();
    }
}

fn group(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, set: Set) {
    let ways = [
        ("bucketed", Way::Bucketed(SyncConfig::default())),
        ("bucketed_packed", Way::Bucketed(SyncConfig::default().with_in_place_bytes(usize::MAX))),
        ("per_tensor", Way::PerTensor),
        ("single", Way::Single),
    ];
    for (name, way) in ways {
        let group = ranks(set, way);
        g.bench_function(name, |b| b.iter_custom(|iters| group.run(iters)));
    }
}

criterion_group!(benches, gradient_sync);
criterion_main!(benches);
