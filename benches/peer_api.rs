//! The peer API's overhead over the core: a 4-peer, 8-element f32 all_reduce through
//! `ruccl::api` against the same op on four `Communicator`s, peers and ranks as threads of
//! this process.
//!
//! Run: `cargo bench --bench peer_api`. The target is peer API ≤ 1.2 × communicator;
//! on a loaded or 2-core machine, run it a few times and compare medians. Throughput is the
//! 32 bytes each rank contributes.

#![allow(missing_docs, clippy::expect_used, clippy::unwrap_used)] // a benchmark harness: failing loudly is right

#[path = "common/rank_threads.rs"]
mod rank_threads;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rank_threads::RankThreads;
use ruccl::api::{self, CollectiveConfig, HostBackend, PeerId, ReduceOperation};
use ruccl::{CommConfig, Communicator, DType, HostDevice, ReduceOp, Tensor, UniqueId};

const PEERS: usize = 4;
const ELEMS: usize = 8;

/// The same op on `Communicator`s: out of place into a preallocated output.
fn communicators() -> RankThreads {
    let id = UniqueId::new().expect("unique id");
    RankThreads::new(PEERS, move |rank| {
        let dev = HostDevice::new(rank as u32);
        let comm = Communicator::with_config(dev, PEERS, id.clone(), rank, CommConfig::default()).expect("join");
        let x = Tensor::from_slice(&dev, &[1.0f32; ELEMS], &[ELEMS]).expect("input");
        let mut y = Tensor::zeros(&dev, DType::F32, &[ELEMS]).expect("output");
        move || comm.all_reduce_into(&mut y, &x, ReduceOp::Sum).expect("all_reduce")
    })
}

/// Through the peer API, as a framework calls it: the tensor is handed over (here a second
/// handle on the same input memory, as a framework's clone is) and a new tensor comes back.
struct Peers(Option<RankThreads>);

impl Peers {
    fn new() -> Peers {
        let config = CollectiveConfig::default().with_num_devices(PEERS);
        Peers(Some(RankThreads::new(PEERS, move |rank| {
            let (peer, dev) = (PeerId::from(rank), HostDevice::new(rank as u32));
            api::register::<HostBackend>(peer, dev, config.clone()).expect("register");
            let x = Tensor::from_slice(&dev, &[1.0f32; ELEMS], &[ELEMS]).expect("input");
            move || {
                let t = Tensor::from_buffer(&dev, x.buffer().clone(), DType::F32, &[ELEMS]).expect("handle");
                let y = api::all_reduce::<HostBackend>(peer, t, ReduceOperation::Sum).expect("all_reduce");
                std::hint::black_box(y);
            }
        })))
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        drop(self.0.take());
        (0..PEERS).for_each(|p| api::finish_collective::<HostBackend>(PeerId::from(p)).expect("finish"));
    }
}

fn peer_api(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("all_reduce/{}B/{PEERS} ranks", ELEMS * 4));
    g.sample_size(30).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Bytes((ELEMS * 4) as u64));
    {
        let group = communicators();
        g.bench_function("communicator", |b| b.iter_custom(|iters| group.run(iters)));
    }
    {
        let peers = Peers::new();
        let group = peers.0.as_ref().expect("group");
        g.bench_function("peer api", |b| b.iter_custom(|iters| group.run(iters)));
    }
    g.finish();
}

criterion_group!(benches, peer_api);
criterion_main!(benches);
