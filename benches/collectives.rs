//! Collective bandwidth on the host device, ranks as threads of this process.
//!
//! Run: `cargo bench --bench collectives` (add a filter, e.g. `-- all_reduce/4`).
//!
//! Measures all_reduce, all_gather, reduce_scatter, broadcast and all_to_all with 2 and 4
//! in-process ranks at 8 B, 4 KiB, 1 MiB, 64 MiB and 256 MiB of f32 (the size is the
//! per-rank buffer as nccl-tests counts it), and in the same run a single-thread `memcpy` of
//! each size as the machine's reference. Criterion reports `Throughput::Bytes` of that size,
//! i.e. algbw; busbw = algbw × 2(n-1)/n for all_reduce, × (n-1)/n for all_gather,
//! reduce_scatter and all_to_all, × 1 for broadcast.

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

#[path = "common/rank_threads.rs"]
mod rank_threads;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rank_threads::RankThreads;
use ruccl::{CommConfig, Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};

#[derive(Clone, Copy, Debug)]
enum Op {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    AllToAll,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
            Op::ReduceScatter => "reduce_scatter",
            Op::Broadcast => "broadcast",
            Op::AllToAll => "all_to_all",
        }
    }
}

/// `n` rank threads, each repeating `op` on `bytes` (the larger per-rank buffer, as
/// nccl-tests sizes all_gather and reduce_scatter).
fn ranks(n: usize, op: Op, bytes: usize) -> RankThreads {
    let id = UniqueId::new().expect("unique id");
    RankThreads::new(n, move |rank| {
        let dev = HostDevice::default();
        let comm = Communicator::with_config(dev, n, id.clone(), rank, CommConfig::default()).expect("join");
        let count = match op {
            Op::AllReduce | Op::Broadcast => (bytes / 4).max(1),
            _ => (bytes / 4).max(n).next_multiple_of(n),
        };
        let (ins, outs) = match op {
            Op::AllReduce | Op::Broadcast | Op::AllToAll => (count, count),
            Op::AllGather => (count / n, count),
            Op::ReduceScatter => (count, count / n),
        };
        let x = Tensor::from_slice(&dev, &vec![1.0f32; ins], &[ins]).expect("input");
        let mut y = Tensor::zeros(&dev, DType::F32, &[outs]).expect("output");
        move || {
            let r = match op {
                Op::AllReduce => comm.all_reduce_into(&mut y, &x, ReduceOp::Sum),
                Op::AllGather => comm.all_gather_into_tensor(&mut y, &x),
                Op::ReduceScatter => comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum),
                Op::Broadcast => comm.broadcast_into(&mut y, Some(&x), 0),
                Op::AllToAll => comm.all_to_all_single(&mut y, &x),
            };
            r.expect("collective");
        }
    })
}

const SIZES: [(usize, &str); 5] =
    [(8, "8B"), (4 << 10, "4KiB"), (1 << 20, "1MiB"), (64 << 20, "64MiB"), (256 << 20, "256MiB")];

fn collectives(c: &mut Criterion) {
    for (bytes, label) in SIZES {
        let mut g = c.benchmark_group(format!("memcpy/{label}"));
        tune(&mut g, bytes);
        g.throughput(Throughput::Bytes(bytes as u64));
        let src = vec![1u8; bytes];
        let mut dst = vec![0u8; bytes];
        g.bench_function("1 thread", |b| {
            b.iter(|| {
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
            })
        });
        g.finish();
        for op in [Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::Broadcast, Op::AllToAll] {
            let mut g = c.benchmark_group(format!("{}/{label}", op.name()));
            tune(&mut g, bytes);
            g.throughput(Throughput::Bytes(bytes as u64));
            for n in [2usize, 4] {
                let group = ranks(n, op, bytes);
                g.bench_with_input(BenchmarkId::new("ranks", n), &n, |b, _| b.iter_custom(|iters| group.run(iters)));
            }
            g.finish();
        }
    }
}

fn tune(g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>, bytes: usize) {
    if bytes >= 64 << 20 {
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    } else {
        g.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    }
}

criterion_group!(benches, collectives);
criterion_main!(benches);
