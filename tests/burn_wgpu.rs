//! burn's wgpu backend through ruCCL on its own device (features `burn` and `wgpu`; on Mesa's
//! software Vulkan in CI): ranks sharing one wgpu device reduce burn tensors with the right
//! bits, move no byte through host memory, and never write memory another burn tensor still
//! shares — in the peer API (which reduces into a new output) and in gradient sync (which
//! reduces in place).
//!
//! The tests are written once and stamped for burn's plain CubeCL backend (`plain`) and, with
//! feature `burn-fusion`, for burn's default `Fusion` wrapper around it (`fused`), whose
//! inputs are first put through lazy operations so that resolving them runs queued work.
//!
//! Every test holds one lock: they share the device's host-byte counter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Barrier, Mutex, MutexGuard};

use burn::backend::wgpu::WgpuDevice;
use burn::tensor::backend::BackendTypes;
use burn::tensor::{FloatDType, Tensor, TensorData, TensorPrimitive};
use ruccl::api::{self, CollectiveConfig, PeerId, ReduceOperation};
use ruccl::burn::{Access, Burn, Handover, WgpuBackend};
use ruccl::device::cubecl::WgpuCubeDevice;
use ruccl::grad::{GradientSync, ParamSpec, SyncConfig};
use ruccl::{Communicator, DType, UniqueId};

/// A burn backend on wgpu devices that hands its tensors to ruCCL's wgpu device.
trait OnWgpu: Handover<WgpuCubeDevice, Device = WgpuDevice, FloatTensorPrimitive: Send> {}
impl<T: Handover<WgpuCubeDevice, Device = WgpuDevice, FloatTensorPrimitive: Send>> OnWgpu for T {}

macro_rules! stamp {
    ($name:ident, $backend:ty, $peers:expr) => {
        mod $name {
            use super::*;

            #[test]
            fn peer_api_all_reduce_2_peers() {
                peer_api_all_reduce::<$backend>(2, $peers);
            }

            #[test]
            fn peer_api_all_reduce_4_peers() {
                peer_api_all_reduce::<$backend>(4, $peers);
            }

            #[test]
            fn gradient_sync_in_place_writes_no_shared_memory() {
                gradient_sync_in_place::<$backend>();
            }

            #[test]
            fn a_tensor_of_another_device_is_refused() {
                another_device_refused::<$backend>();
            }
        }
    };
}

stamp!(plain, WgpuBackend, 9000);
#[cfg(feature = "burn-fusion")]
stamp!(fused, ruccl::burn::FusedWgpuBackend, 9500);

/// The collective_training example on burn's wgpu backend (`tests/collective_training.rs` runs
/// it on the CPU backend): compiled here, where the backend is instantiated already.
#[allow(dead_code)]
#[path = "../examples/collective_training.rs"]
mod example;

#[allow(dead_code)]
#[path = "collective_training/cases.rs"]
mod cases;

mod collective_training {
    use super::*;

    /// `run` then `resume` on wgpu, the gradients reduced on the device: bit for bit.
    #[test]
    fn resume_reproduces_run_bit_for_bit_on_wgpu() {
        let _serial = serial();
        if device::<WgpuBackend>().is_some() {
            cases::run_then_resume::<(WgpuBackend, WgpuCubeDevice)>("wgpu");
        }
    }

    /// The same on burn's default wgpu backend, `Fusion<CubeBackend<WgpuRuntime>>`: fused
    /// gradients resolved and reduced on the device, registered back for the optimizer.
    #[cfg(feature = "burn-fusion")]
    #[test]
    fn resume_reproduces_run_bit_for_bit_on_fused_wgpu() {
        use ruccl::burn::FusedWgpuBackend;
        let _serial = serial();
        if device::<FusedWgpuBackend>().is_some() {
            cases::run_then_resume::<(FusedWgpuBackend, WgpuCubeDevice)>("fused-wgpu");
        }
    }

    /// The example's command line (`run DIR`, `resume DIR`, as `cargo run --example` calls
    /// it), which these features point at wgpu; and its refusals.
    #[test]
    fn the_command_line_runs_then_resumes() {
        let _serial = serial();
        cases::command_line_runs_then_resumes();
    }
}

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// ruCCL's device for burn's default wgpu device, or why there is none.
fn device<B: OnWgpu>() -> Option<WgpuCubeDevice> {
    match <B as Handover<WgpuCubeDevice>>::comm_device(&WgpuDevice::DefaultDevice) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("SKIPPED: no wgpu device: {e}");
            None
        }
    }
}

fn prim<B: OnWgpu, const N: usize>(t: Tensor<B, N>) -> <B as BackendTypes>::FloatTensorPrimitive {
    t.into_primitive().tensor()
}

fn burn<B: OnWgpu, const N: usize>(p: <B as BackendTypes>::FloatTensorPrimitive) -> Tensor<B, N> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

fn f32s<B: OnWgpu, const N: usize>(t: Tensor<B, N>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Rank `i`'s input: small integers and halves, so sums and means are exact.
fn input(i: usize) -> Vec<f32> {
    let r = i as f32;
    vec![r, 3.0, -1.5 * r, 0.25, 7.0 * r, -2.0]
}

/// `data` as a tensor made by work still queued: the values, doubled, then halved (exact).
fn lazy<B: OnWgpu, const N: usize>(data: TensorData, device: &WgpuDevice) -> Tensor<B, N> {
    (Tensor::<B, N>::from_data(data, device) * 2.0) / 2.0
}

/// The peer API's all_reduce with 2 and 4 peers on one wgpu device (peer ids from `peers`).
fn peer_api_all_reduce<B: OnWgpu>(world: usize, peers: usize) {
    let _serial = serial();
    let Some(dev) = device::<B>() else { return };
    let config = CollectiveConfig::default().with_num_devices(world);
    let before = dev.host_bytes();
    std::thread::scope(|s| {
        let peers: Vec<_> = (0..world)
            .map(|i| {
                let config = config.clone();
                s.spawn(move || {
                    let device = WgpuDevice::DefaultDevice;
                    let peer = PeerId::from((peers + 10 * world + i) as u32);
                    api::register::<Burn<B, WgpuCubeDevice>>(peer, device.clone(), config).unwrap();
                    let x = lazy::<B, 2>(TensorData::new(input(i), [2, 3]), &device);
                    let kept = x.clone(); // shares x's memory
                    let sum = api::all_reduce::<Burn<B, WgpuCubeDevice>>(peer, prim(x), ReduceOperation::Sum).unwrap();
                    let mean =
                        api::all_reduce::<Burn<B, WgpuCubeDevice>>(peer, prim(kept.clone()), ReduceOperation::Mean)
                            .unwrap();
                    api::finish_collective::<Burn<B, WgpuCubeDevice>>(peer).unwrap();
                    (f32s(burn::<B, 2>(sum)), f32s(burn::<B, 2>(mean)), f32s(kept))
                })
            })
            .collect();
        let total: Vec<f32> = (0..6).map(|k| (0..world).map(|i| input(i)[k]).sum()).collect();
        let mean: Vec<f32> = total.iter().map(|t| t / world as f32).collect();
        for (i, p) in peers.into_iter().enumerate() {
            let (got_sum, got_mean, kept) = p.join().unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got_sum), bits(&total), "peer {i} of {world}: sum");
            assert_eq!(bits(&got_mean), bits(&mean), "peer {i} of {world}: mean");
            assert_eq!(kept, input(i), "peer {i} of {world}: the input's clone changed");
        }
    });
    assert_eq!(dev.host_bytes() - before, 0, "{world} peers: bytes crossed host memory");
}

/// Read access takes the tensor's own memory (a clone of it then shares its memory with
/// ruCCL's tensor); write access copies a shared tensor (the clone is then the only owner).
/// (burn's plain CubeCL backend: its tensors say whether they share memory.)
#[test]
fn read_shares_and_write_copies_a_shared_tensor() {
    type B = WgpuBackend;
    let _serial = serial();
    let Some(dev) = device::<B>() else { return };
    let device = WgpuDevice::DefaultDevice;
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0, 3.0, 4.0], &device);
    let kept = prim(x.clone());
    assert!(!kept.can_mut(), "x and its clone share memory");
    drop(x);
    let clone = kept.clone();
    let r = B::to_ruccl(clone, &dev, Access::Read).unwrap();
    assert!(
        !kept.can_mut(),
        "read access took the tensor's own memory (no copy): {:?} contiguous {}",
        kept.handle,
        kept.is_contiguous()
    );
    drop(r);
    assert!(kept.can_mut(), "ruCCL let the memory go");
    let w = B::to_ruccl(kept.clone(), &dev, Access::Write).unwrap();
    assert!(kept.can_mut(), "write access copied the shared tensor");
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
}

/// Gradient sync reduces in place: a shared gradient, a transposed (non-contiguous) one, an
/// odd number of f16s and a uniquely owned one, on 2 ranks, all reduced in place.
fn gradient_sync_in_place<B: OnWgpu>() {
    let _serial = serial();
    let Some(dev) = device::<B>() else { return };
    let world = 2;
    let id = UniqueId::new().unwrap();
    let specs = [
        ("a".to_string(), ParamSpec::new(DType::F32, &[2, 3])),
        ("b".to_string(), ParamSpec::new(DType::F32, &[3, 2])),
        ("c".to_string(), ParamSpec::new(DType::F16, &[3])),
        ("d".to_string(), ParamSpec::new(DType::F32, &[5])),
    ];
    let ready = Barrier::new(world);
    std::thread::scope(|s| {
        let ranks: Vec<_> = (0..world)
            .map(|rank| {
                let (id, dev, specs, ready) = (id.clone(), dev.clone(), specs.clone(), &ready);
                s.spawn(move || {
                    let device = WgpuDevice::DefaultDevice;
                    let comm = Communicator::new(dev.clone(), world, id, rank).unwrap();
                    // Every gradient reduced where it is (no bucket copies).
                    let config = SyncConfig::default().with_in_place_bytes(0).with_op(ruccl::ReduceOp::Sum);
                    let mut sync = GradientSync::with_config(&comm, specs, config).unwrap();
                    // Building the sync compares the ranks' parameter sets through the host;
                    // the step itself must not touch host memory.
                    ready.wait();
                    let before = dev.host_bytes();
                    ready.wait();
                    let a = lazy::<B, 2>(TensorData::new(input(rank), [2, 3]), &device);
                    let a_kept = a.clone();
                    let b = lazy::<B, 2>(TensorData::new(input(rank), [2, 3]), &device).transpose();
                    let c = lazy::<B, 1>(TensorData::from([rank as f32, 1.0, -2.0]), &device).cast(FloatDType::F16);
                    let c_kept = c.clone();
                    let d = lazy::<B, 1>(TensorData::from([rank as f32; 5]), &device);
                    let push = |sync: &mut GradientSync<'_, WgpuCubeDevice, String>, id: &str, p| {
                        let t = B::to_ruccl(p, &dev, Access::Write).unwrap();
                        sync.push(&id.to_string(), t).unwrap();
                    };
                    push(&mut sync, "a", prim(a));
                    push(&mut sync, "b", prim(b));
                    push(&mut sync, "c", prim(c));
                    push(&mut sync, "d", prim(d));
                    let out: Vec<Vec<f32>> = sync
                        .wait()
                        .unwrap()
                        .into_iter()
                        .map(|(_, t)| {
                            let shape = t.shape().to_vec();
                            let p = <B as Handover<WgpuCubeDevice>>::from_ruccl(t, &device).unwrap();
                            match shape.len() {
                                1 => f32s(burn::<B, 1>(p)),
                                _ => f32s(burn::<B, 2>(p)),
                            }
                        })
                        .collect();
                    ready.wait();
                    let moved = dev.host_bytes() - before;
                    ready.wait();
                    (out, f32s(a_kept), f32s(c_kept), moved)
                })
            })
            .collect();
        let total: Vec<f32> = (0..6).map(|k| (0..world).map(|i| input(i)[k]).sum()).collect();
        // `b` is `a` transposed: [3, 2] in row-major order.
        let total_t: Vec<f32> =
            (0..3).flat_map(|c| (0..2).map(move |r| (r, c))).map(|(r, c)| total[r * 3 + c]).collect();
        for (rank, r) in ranks.into_iter().enumerate() {
            let (out, a_kept, c_kept, moved) = r.join().unwrap();
            assert_eq!(moved, 0, "rank {rank}: bytes crossed host memory");
            assert_eq!(out[0], total, "rank {rank}: a");
            assert_eq!(out[1], total_t, "rank {rank}: b (transposed)");
            assert_eq!(out[2], vec![1.0, 2.0, -4.0], "rank {rank}: c (3 x f16)");
            assert_eq!(out[3], vec![1.0; 5], "rank {rank}: d");
            assert_eq!(a_kept, input(rank), "rank {rank}: a's clone changed");
            assert_eq!(c_kept, vec![rank as f32, 1.0, -2.0], "rank {rank}: c's clone changed");
        }
    });
}

/// A tensor of one CubeCL device handed to ruCCL's device for another is refused, naming both.
fn another_device_refused<B: OnWgpu>() {
    let _serial = serial();
    if device::<B>().is_none() {
        return;
    }
    let other = match WgpuCubeDevice::wgpu_distinct(1) {
        Ok(mut d) => d.remove(0),
        Err(e) => {
            eprintln!("SKIPPED: no second wgpu device: {e}");
            return;
        }
    };
    let x = Tensor::<B, 1>::from_floats([1.0, 2.0], &WgpuDevice::DefaultDevice);
    let err = B::to_ruccl(prim(x), &other, Access::Read).unwrap_err();
    assert_eq!(err.kind(), ruccl::ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("DefaultDevice"), "{err}");
}
