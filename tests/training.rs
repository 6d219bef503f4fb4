//! Integration tests of data-parallel training (`ruccl::grad`): gradient buckets across 1–5
//! ranks (every dtype, empty and oversized gradients, gradients handed over in a different
//! order on every rank, many steps on one sync), the errors a rank gets when the ranks'
//! parameter sets differ or a gradient is wrong, and the proof that averaged-gradient training
//! on shards matches training on the full batch.
//!
//! Run with `cargo test --test training`. Ranks are threads of this process on the host
//! device. Gradients of the bucket tests are small integers, so every sum is exact and
//! results are compared bit for bit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod training {
    pub mod buckets;
    pub mod errors;
    pub mod mlp;
}

use std::time::Duration;

use ruccl::{CommConfig, Communicator, HostDevice, UniqueId};

/// Runs `f` on `n` ranks, each a thread with its own communicator (a 30 s deadline, which only
/// a broken test reaches), and returns their results in rank order.
pub fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> T + Sync) -> Vec<T> {
    let (id, f) = (UniqueId::new().unwrap(), &f);
    let config = CommConfig::default().with_timeout(Duration::from_secs(30));
    std::thread::scope(|s| {
        let ranks: Vec<_> = (0..n)
            .map(|r| {
                let (id, config) = (id.clone(), config.clone());
                s.spawn(move || f(Communicator::with_config(HostDevice::default(), n, id, r, config).unwrap()))
            })
            .collect();
        ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    })
}

/// xorshift: deterministic, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}
