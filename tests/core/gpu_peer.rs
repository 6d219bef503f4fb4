//! The peer API on the GPU device of the `test-*` feature ([`DeviceBackend`] over a CubeCL
//! device): peers registered on one device reduce device memory in place of host memory —
//! the right values, the caller's input untouched, and no byte through host memory.

use ruccl::api::{self, CollectiveConfig, DeviceBackend, PeerId, ReduceOperation};
use ruccl::{DType, Device, Tensor};

use crate::gpu::GpuDevice;
use crate::harness::TestDevice;

type B = DeviceBackend<GpuDevice>;

#[test]
fn gpu_peer_api_reduces_on_the_device() {
    if let Some(why) = GpuDevice::unavailable() {
        eprintln!("SKIPPED on {}: {why}", std::any::type_name::<GpuDevice>());
        return;
    }
    // A handle of this test's own on the suite's device: its byte count sees only this test.
    let dev = crate::gpu::own_handle();
    assert!(dev.same_device(&GpuDevice::for_rank(0)));
    let world = 3;
    let config = CollectiveConfig::default().with_num_devices(world);
    let ready = std::sync::Barrier::new(world);
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|i| {
                let (config, ready, dev) = (config.clone(), &ready, dev.clone());
                s.spawn(move || {
                    let peer = PeerId::from(i as u32 + 7000);
                    api::register::<B>(peer, dev.clone(), config).unwrap();
                    let x = Tensor::from_slice(&dev, &[i as f32, 3.0, -1.5 * i as f32], &[3]).unwrap();
                    // A second handle on the same memory (as a framework's tensor clones share storage).
                    let keep = Tensor::from_buffer(&dev, x.buffer().clone(), DType::F32, &[3]).unwrap();
                    ready.wait();
                    let before = dev.host_bytes();
                    let mean = api::all_reduce::<B>(peer, x, ReduceOperation::Mean).unwrap();
                    let shared = Tensor::from_buffer(&dev, mean.buffer().clone(), DType::F32, &[3]).unwrap();
                    let sum = api::all_reduce::<B>(peer, shared, ReduceOperation::Sum).unwrap();
                    ready.wait();
                    let moved = dev.host_bytes() - before;
                    ready.wait();
                    api::finish_collective::<B>(peer).unwrap();
                    assert_eq!(moved, 0, "peer {i}: bytes crossed host memory");
                    assert_eq!(mean.to_vec::<f32>().unwrap(), vec![1.0, 3.0, -1.5], "peer {i}: mean");
                    assert_eq!(sum.to_vec::<f32>().unwrap(), vec![3.0, 9.0, -4.5], "peer {i}: sum of the means");
                    let kept = vec![i as f32, 3.0, -1.5 * i as f32];
                    assert_eq!(keep.to_vec::<f32>().unwrap(), kept, "peer {i}: the caller's input changed");
                    assert!(mean.device().same_device(&dev));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}
