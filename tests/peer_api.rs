//! Integration tests of the peer API (`ruccl::api`): every function and every error, with 1–8
//! peers arriving in random order and many consecutive operations per registration, plus the
//! exhaustive strategy sweep (every size below 64, every peer count up to 8, for
//! `Centralized`, `Tree(2)`, `Tree(3)` and `Ring`).
//!
//! The registry is process-wide and keyed by `Backend` type, so every test registers through
//! its own `Tb<K>` (a zero-sized wrapper around `HostBackend`): the tests run in parallel
//! threads of this binary and never see — or reset — each other's peers.
//!
//! Inputs are small integers, so every sum is exact and results are compared bit for bit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod peer_api {
    pub mod errors;
    pub mod lifecycle;
    pub mod ops;
    pub mod strategies;
}

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use ruccl::api::{Backend, CollectiveConfig, HostBackend, PeerId, register};
use ruccl::{DType, HostDevice, Result, Tensor};

/// A `Backend` of its own for each test.
pub struct Tb<const K: usize>;

impl<const K: usize> Backend for Tb<K> {
    type Device = HostDevice;
    type FloatTensorPrimitive = Tensor<HostDevice>;
    type CommDevice = HostDevice;
    const FLOAT_DTYPES: &'static [DType] = HostBackend::FLOAT_DTYPES;

    fn comm_device(device: &HostDevice) -> Result<HostDevice> {
        HostBackend::comm_device(device)
    }
    fn float_device(tensor: &Tensor<HostDevice>) -> HostDevice {
        HostBackend::float_device(tensor)
    }
    fn to_ruccl(tensor: Tensor<HostDevice>, device: &HostDevice) -> Result<Tensor<HostDevice>> {
        HostBackend::to_ruccl(tensor, device)
    }
    fn from_ruccl(tensor: Tensor<HostDevice>, device: &HostDevice) -> Result<Tensor<HostDevice>> {
        HostBackend::from_ruccl(tensor, device)
    }
}

/// The backends these tests use: host tensors all the way.
pub trait HostLike:
    Backend<Device = HostDevice, FloatTensorPrimitive = Tensor<HostDevice>, CommDevice = HostDevice>
{
}
impl<B: Backend<Device = HostDevice, FloatTensorPrimitive = Tensor<HostDevice>, CommDevice = HostDevice>> HostLike
    for B
{
}

/// xorshift: deterministic, seedable, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// Sometimes sleeps up to 300 µs, so that peers arrive in a shuffled order.
    pub fn pause(&mut self) {
        if self.below(3) == 0 {
            std::thread::sleep(Duration::from_micros(self.below(300) as u64));
        }
    }
}

/// One peer of a test session.
pub struct Peer {
    pub id: PeerId,
    pub rank: usize,
    pub n: usize,
    pub dev: HostDevice,
    /// Every peer's id, in rank order.
    pub ids: Vec<PeerId>,
    pub rng: Rng,
}

/// `n` distinct, non-contiguous ids in a shuffled order.
pub fn ids_for(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    let mut ids: Vec<u64> = (0..n as u64).map(|i| i * 7 + 3 + (i % 3)).collect();
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.below(i + 1));
    }
    ids
}

/// `n` peers, a deadline that only a broken test reaches.
pub fn config(n: usize) -> CollectiveConfig {
    CollectiveConfig::default().with_num_devices(n).with_timeout(Duration::from_secs(30))
}

pub fn peer_of(id: u64, ids: &[u64], seed: u64) -> Peer {
    let mut sorted: Vec<PeerId> = ids.iter().copied().map(PeerId::new).collect();
    sorted.sort();
    let pid = PeerId::new(id);
    Peer {
        id: pid,
        rank: sorted.binary_search(&pid).unwrap(),
        n: ids.len(),
        dev: HostDevice::new(id as u32),
        ids: sorted,
        rng: Rng::new(seed ^ id.wrapping_mul(0x2545_f491_4f6c_dd1d)),
    }
}

/// Registers every peer of `ids` (each from its own thread, in a shuffled order), runs `body`
/// on each, finishes them, and returns the results in rank order. If a peer panics, the
/// service is reset so that the others fail at once instead of waiting for their deadline.
pub fn session<B: HostLike, R: Send>(
    ids: &[u64],
    config: &CollectiveConfig,
    seed: u64,
    body: impl Fn(&mut Peer) -> R + Sync,
) -> Vec<R> {
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|&id| {
                let (config, body) = (config.clone(), &body);
                s.spawn(move || {
                    let mut p = peer_of(id, ids, seed);
                    p.rng.pause();
                    let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        register::<B>(p.id, p.dev, config).unwrap_or_else(|e| panic!("register peer {id}: {e}"));
                        let r = body(&mut p);
                        ruccl::api::finish_collective::<B>(p.id).unwrap_or_else(|e| panic!("finish peer {id}: {e}"));
                        r
                    }));
                    match run {
                        Ok(r) => (p.rank, r),
                        Err(panic) => {
                            ruccl::api::reset_collective::<B>();
                            std::panic::resume_unwind(panic)
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    out.sort_by_key(|(rank, _)| *rank);
    out.into_iter().map(|(_, r)| r).collect()
}

/// Runs `body` on one thread per id without registering (for tests of registration itself).
pub fn on_threads<R: Send>(ids: &[u64], seed: u64, body: impl Fn(&mut Peer) -> R + Sync) -> Vec<(PeerId, R)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|&id| {
                let body = &body;
                s.spawn(move || {
                    let mut p = peer_of(id, ids, seed);
                    p.rng.pause();
                    (p.id, body(&mut p))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

pub fn tensor(dev: &HostDevice, data: &[f32], shape: &[usize]) -> Tensor<HostDevice> {
    Tensor::from_slice(dev, data, shape).unwrap()
}

pub fn values(t: &Tensor<HostDevice>) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// Element `i` of rank `rank`'s input: a small integer in -8..=8.
pub fn elem(rank: usize, i: usize, salt: u64) -> f32 {
    ((rank * 5 + i * 3 + salt as usize) % 17) as f32 - 8.0
}

/// Rank `rank`'s input of `len` elements.
pub fn input(rank: usize, len: usize, salt: u64) -> Vec<f32> {
    (0..len).map(|i| elem(rank, i, salt)).collect()
}

/// The element-wise sum of every rank's input (exact: small integers), or its mean.
pub fn reduced(n: usize, len: usize, salt: u64, mean: bool) -> Vec<f32> {
    (0..len)
        .map(|i| {
            let s: f32 = (0..n).map(|r| elem(r, i, salt)).sum();
            if mean { s / n as f32 } else { s }
        })
        .collect()
}
