//! The sync's own state across steps.

use super::*;
use crate::{DType, HostDevice, UniqueId};

/// Steps reuse the buckets allocated when the sync was built.
#[test]
fn buckets_are_allocated_once() {
    let dev = HostDevice::default();
    let comm = Communicator::new(dev, 1, UniqueId::new().unwrap(), 0).unwrap();
    let params = (0..6u64).map(|i| (i, ParamSpec::new(DType::F32, &[3])));
    let mut sync = GradientSync::with_config(&comm, params, SyncConfig::default().with_bucket_bytes(24)).unwrap();
    let ids = |s: &GradientSync<'_, HostDevice, u64>| -> Vec<usize> {
        s.buckets.iter().filter_map(|b| b.flat.as_ref()).map(|t| dev.mem_id(t.buffer())).collect()
    };
    let before = ids(&sync);
    assert_eq!(before.len(), 3);
    for step in 0..3 {
        let grads = (0..6u64).map(|i| (i, Tensor::from_slice(&dev, &[step as f32; 3], &[3]).unwrap()));
        let out = sync.all_reduce(grads).unwrap();
        assert_eq!(out[5].1.to_vec::<f32>().unwrap(), vec![step as f32; 3]);
        assert_eq!(ids(&sync), before);
    }
}

/// Gradients handed over from the last id, as backward produces them for ids that follow
/// the model forward: in id order no bucket starts before the last push; from the last
/// id (`with_reverse_order`), each bucket starts once its gradients are in.
#[test]
fn reverse_order_starts_buckets_as_backward_goes() {
    let dev = HostDevice::default();
    let comm = Communicator::new(dev, 1, UniqueId::new().unwrap(), 0).unwrap();
    for reverse in [false, true] {
        let params = (0..4u64).map(|i| (i, ParamSpec::new(DType::F32, &[2])));
        let config = SyncConfig::default().with_bucket_bytes(8).with_reverse_order(reverse);
        let mut sync = GradientSync::with_config(&comm, params, config).unwrap();
        let mut started = Vec::new();
        for i in (0..4u64).rev() {
            sync.push(&i, Tensor::from_slice(&dev, &[i as f32; 2], &[2]).unwrap()).unwrap();
            started.push(sync.next);
        }
        assert_eq!(started, if reverse { [1, 2, 3, 4] } else { [0, 0, 0, 4] }, "reverse {reverse}");
        let out = sync.wait().unwrap();
        assert_eq!(out[3].1.to_vec::<f32>().unwrap(), vec![3.0; 2]);
    }
}
