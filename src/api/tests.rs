//! Checks that need the API's internals: each strategy reaches the core as its own plan, on
//! the registration's one communicator.

use super::registry::service;
use super::*;
use crate::config::Algorithm;
use crate::device::HostDevice;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::types::{DType, ReduceOp};

/// A backend per test, so that each test's registrations are its alone.
struct Private<const K: usize>;

impl<const K: usize> Backend for Private<K> {
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

#[test]
fn each_strategy_runs_its_own_core_plan() -> Result<()> {
    let n = 5u32;
    let cases = [
        (Strategy::Centralized, Algorithm::Centralized),
        (Strategy::Tree(2), Algorithm::KaryTree(2)),
        (Strategy::Tree(3), Algorithm::KaryTree(3)),
        (Strategy::Ring, Algorithm::Ring),
    ];
    for (strategy, algorithm) in cases {
        let config = CollectiveConfig::default()
            .with_num_devices(n as usize)
            .with_local_all_reduce_strategy(strategy)
            .with_local_reduce_strategy(strategy)
            .with_local_broadcast_strategy(strategy);
        let seen: Vec<Result<Vec<Algorithm>>> = std::thread::scope(|s| {
            let peers: Vec<_> = (0..n)
                .map(|i| {
                    let config = config.clone();
                    s.spawn(move || -> Result<Vec<Algorithm>> {
                        let (peer, dev) = (PeerId::from(i), HostDevice::new(i));
                        register::<Private<0>>(peer, dev, config)?;
                        let h = service::<Private<0>>()?.handle(peer, "test")?;
                        let last = || h.comm.flight_recorder().last().map(|e| e.algorithm);
                        let mut seen = Vec::new();
                        let t = Tensor::from_slice(&dev, &[1.0f32; 7], &[7])?;
                        let t = all_reduce::<Private<0>>(peer, t, ReduceOp::Sum)?;
                        seen.extend(last());
                        let t = reduce::<Private<0>>(peer, t, ReduceOp::Sum, PeerId::new(2))?;
                        seen.extend(last());
                        broadcast::<Private<0>>(peer, t)?;
                        seen.extend(last());
                        finish_collective::<Private<0>>(peer)?;
                        Ok(seen)
                    })
                })
                .collect();
            peers.into_iter().map(|p| p.join().unwrap_or_else(|_| Ok(Vec::new()))).collect()
        });
        for s in seen {
            assert_eq!(s?, vec![algorithm; 3], "{strategy}");
        }
    }
    Ok(())
}

/// Peers whose operations name different strategies (as peers of different configs would,
/// were registration not to compare them first) get `Mismatch` on every peer from the core's
/// own fingerprint check — no agreement step runs.
#[test]
fn different_strategies_are_a_mismatch_on_every_peer() -> Result<()> {
    use crate::comm::tagged::Tags;
    use crate::error::ErrorKind;
    let n = 4u32;
    let config = CollectiveConfig::default().with_num_devices(n as usize);
    let kinds: Vec<Result<ErrorKind>> = std::thread::scope(|s| {
        let peers: Vec<_> = (0..n)
            .map(|i| {
                let config = config.clone();
                s.spawn(move || -> Result<ErrorKind> {
                    let (peer, dev) = (PeerId::from(100 + i), HostDevice::new(i));
                    register::<Private<1>>(peer, dev, config)?;
                    let h = service::<Private<1>>()?.handle(peer, "test")?;
                    let strategy = if i == 2 { Strategy::Tree(2) } else { Strategy::Ring };
                    let tags = Tags { algorithm: Some(strategy.algorithm()), shape: None, part_of: None };
                    let x = Tensor::from_slice(&dev, &[1.0f32; 8], &[8])?;
                    let mut y = Tensor::zeros(&dev, DType::F32, &[8])?;
                    let r = h.comm.tagged(tags).all_reduce_into(&mut y, &x, ReduceOp::Sum);
                    // A peer whose part completed first learns it from its next call.
                    let kind = match r {
                        Err(e) => e.kind(),
                        Ok(()) => h.comm.barrier().err().map_or(ErrorKind::Protocol, |e| e.kind()),
                    };
                    finish_collective::<Private<1>>(peer)?;
                    Ok(kind)
                })
            })
            .collect();
        peers.into_iter().map(|p| p.join().unwrap_or(Ok(ErrorKind::Protocol))).collect()
    });
    for k in kinds {
        assert_eq!(k?, ErrorKind::Mismatch);
    }
    Ok(())
}
