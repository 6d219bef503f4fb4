//! Gradient buckets give every rank the exact reduction of every gradient: all dtypes, empty
//! gradients, gradients larger than a bucket, buckets of one element, gradients packed or
//! reduced in place, gradients handed over in a different order on every rank, several steps
//! on one sync, parameters missing on a rank.

use half::{bf16, f16};
use ruccl::grad::{DEFAULT_BUCKET_BYTES, DEFAULT_IN_PLACE_BYTES, GradientSync, ParamSpec, SyncConfig};
use ruccl::{DType, HostDevice, ReduceOp, Tensor};

use crate::{Rng, on_ranks};

fn tensor(dev: &HostDevice, dtype: DType, shape: &[usize], v: &[f64]) -> Tensor<HostDevice> {
    fn make<T: ruccl::Element>(dev: &HostDevice, shape: &[usize], v: &[f64]) -> Tensor<HostDevice> {
        Tensor::from_slice(dev, &v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>(), shape).unwrap()
    }
    match dtype {
        DType::F32 => make::<f32>(dev, shape, v),
        DType::F64 => make::<f64>(dev, shape, v),
        DType::F16 => make::<f16>(dev, shape, v),
        DType::BF16 => make::<bf16>(dev, shape, v),
        DType::I32 => make::<i32>(dev, shape, v),
        DType::U8 => make::<u8>(dev, shape, v),
        DType::I64 => make::<i64>(dev, shape, v),
        other => panic!("no test data for {other}"),
    }
}

fn values(t: &Tensor<HostDevice>) -> Vec<f64> {
    fn read<T: ruccl::Element>(t: &Tensor<HostDevice>) -> Vec<f64> {
        t.to_vec::<T>().unwrap().into_iter().map(T::to_f64).collect()
    }
    match t.dtype() {
        DType::F32 => read::<f32>(t),
        DType::F64 => read::<f64>(t),
        DType::F16 => read::<f16>(t),
        DType::BF16 => read::<bf16>(t),
        DType::I32 => read::<i32>(t),
        DType::U8 => read::<u8>(t),
        DType::I64 => read::<i64>(t),
        other => panic!("no test data for {other}"),
    }
}

/// A parameter set of every size class — empty, one element, odd sizes, larger than small
/// buckets — over several dtypes, listed out of id order.
fn params() -> Vec<(String, ParamSpec)> {
    let dtypes = [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::U8, DType::I64];
    let shapes: [&[usize]; 7] = [&[0], &[1], &[3], &[17], &[10, 10], &[], &[2, 0, 3]];
    let mut out: Vec<_> = (0..21)
        .map(|k| (format!("layer{:02}.{}", (k * 8) % 21, k % 3), ParamSpec::new(dtypes[k % 7], shapes[(k / 3) % 7])))
        .collect();
    out.push(("big".to_string(), ParamSpec::new(DType::F32, &[3000])));
    out
}

/// Rank `r`'s gradient of parameter `k` at `step`: small integers, so sums are exact in every
/// dtype (the largest sum, 5 ranks x 6, fits a u8 and is exact in bf16).
fn grad(r: usize, step: usize, k: usize, len: usize) -> Vec<f64> {
    (0..len).map(|i| ((r + 2 * step + 3 * k + i) % 7) as f64).collect()
}

fn numel(spec: &ParamSpec) -> usize {
    spec.shape().iter().product()
}

#[test]
fn buckets_reduce_exactly_on_every_world_size_bucket_size_and_order() {
    let mut set = params();
    set.sort_by(|a, b| a.0.cmp(&b.0));
    for world in 1..=5 {
        // (bucket size, in-place size): everything packed, some or all gradients in place.
        let configs = [(1, usize::MAX), (64, usize::MAX), (4096, usize::MAX), (DEFAULT_BUCKET_BYTES, usize::MAX)]
            .into_iter()
            .chain([(DEFAULT_BUCKET_BYTES, DEFAULT_IN_PLACE_BYTES), (4096, 64), (64, 1)]);
        for (bucket_bytes, in_place) in configs {
            on_ranks(world, |comm| {
                let dev = *comm.device();
                let r = comm.rank();
                let config = SyncConfig::default()
                    .with_bucket_bytes(bucket_bytes)
                    .with_in_place_bytes(in_place)
                    .with_op(ReduceOp::Sum);
                let mut listed = params();
                Rng(r as u64 + 1).shuffle(&mut listed);
                let mut sync = GradientSync::with_config(&comm, listed, config).unwrap();
                let mut rng = Rng((world * 100 + r) as u64 + 7);
                for step in 0..3 {
                    let mut order: Vec<usize> = (0..set.len()).collect();
                    rng.shuffle(&mut order);
                    let mut bufs = vec![None; set.len()];
                    for k in order {
                        let (id, spec) = &set[k];
                        let t = tensor(&dev, spec.dtype(), spec.shape(), &grad(r, step, k, numel(spec)));
                        bufs[k] = Some(t.buffer().clone());
                        sync.push(id, t).unwrap();
                    }
                    let got = sync.wait().unwrap();
                    assert_eq!(got.len(), set.len());
                    for (k, ((id, t), (want_id, spec))) in got.iter().zip(&set).enumerate() {
                        assert_eq!(id, want_id);
                        assert_eq!((t.dtype(), t.shape()), (spec.dtype(), spec.shape()));
                        assert!(t.buffer().same(bufs[k].as_ref().unwrap()), "{id}: not written in place");
                        let each: Vec<Vec<f64>> = (0..world).map(|q| grad(q, step, k, numel(spec))).collect();
                        let want: Vec<f64> = (0..numel(spec)).map(|i| each.iter().map(|g| g[i]).sum()).collect();
                        assert_eq!(values(t), want, "{world} ranks, {config:?}, step {step}, {id}");
                    }
                }
            });
        }
    }
}

/// The mean of f16 gradients (and any `PreMulSum`) scales each bucket's input first, and the
/// buckets' ops are in flight together: they shared the rank's one scaled-input buffer, and
/// every bucket but the last returned the last one's mean, with `Ok` (a stranger's review).
#[test]
fn pre_multiplied_buckets_keep_their_own_inputs() {
    for (dtype, op, scale) in [(DType::F16, ReduceOp::Avg, 0.5), (DType::F32, ReduceOp::PreMulSum(0.25), 0.25)] {
        let got = on_ranks(2, |comm| {
            let dev = *comm.device();
            let r = comm.rank();
            let params: Vec<(u64, ParamSpec)> = (0..4u64).map(|i| (i, ParamSpec::new(dtype, &[256]))).collect();
            let config = SyncConfig::default().with_bucket_bytes(1024).with_op(op);
            let mut sync = GradientSync::with_config(&comm, params, config).unwrap();
            assert!(sync.bucket_count() >= 2, "{dtype}: {} buckets", sync.bucket_count());
            let mut steps = Vec::new();
            for step in 0..3u64 {
                for i in 0..4u64 {
                    let v = (i * 10 + step + r as u64 * 2) as f64;
                    sync.push(&i, tensor(&dev, dtype, &[256], &vec![v; 256])).unwrap();
                }
                let got = sync.wait().unwrap();
                steps.push(got.iter().map(|(_, t)| values(t)).collect::<Vec<_>>());
            }
            steps
        });
        for (r, steps) in got.iter().enumerate() {
            for (step, params) in steps.iter().enumerate() {
                for (i, v) in params.iter().enumerate() {
                    // The two ranks' values: i * 10 + step and i * 10 + step + 2.
                    let want = scale * (2.0 * (i * 10 + step) as f64 + 2.0);
                    assert_eq!(v, &vec![want; 256], "{dtype}, {op:?}: rank {r}, step {step}, parameter {i}");
                }
            }
        }
    }
}

#[test]
fn bucket_count_follows_the_bucket_size() {
    let counts = on_ranks(2, |comm| {
        [1, 64, 4096, DEFAULT_BUCKET_BYTES]
            .map(|b| GradientSync::with_config(&comm, params(), SyncConfig::default().with_bucket_bytes(b)).unwrap())
            .map(|s| s.bucket_count())
    });
    // Every non-empty gradient alone; then fewer and fewer; one bucket per dtype in the end.
    let non_empty = params().iter().filter(|(_, s)| numel(s) > 0).count();
    assert_eq!(counts[0][0], non_empty);
    assert!(counts[0][1] < counts[0][0] && counts[0][2] < counts[0][1], "{counts:?}");
    assert_eq!(counts[0][3], 7);
    assert_eq!(counts[0], counts[1]);
}

#[test]
fn the_mean_is_the_default() {
    let got = on_ranks(4, |comm| {
        let dev = *comm.device();
        let r = comm.rank() as f32;
        let mut sync = GradientSync::new(&comm, [(7u64, ParamSpec::new(DType::F32, &[2]))]).unwrap();
        let out = sync.all_reduce([(7u64, Tensor::from_slice(&dev, &[r, 2.0 * r], &[2]).unwrap())]).unwrap();
        out[0].1.to_vec::<f32>().unwrap()
    });
    assert_eq!(got, vec![vec![1.5, 3.0]; 4]);
}

/// A parameter that got no gradient on a rank (unused in its forward pass) counts as zero
/// there: its peers are not kept waiting, and every rank gets the reduced gradient back.
#[test]
fn a_missing_gradient_counts_as_zero_and_comes_back_reduced() {
    let got = on_ranks(3, |comm| {
        let dev = *comm.device();
        let r = comm.rank();
        let spec = ParamSpec::new(DType::F64, &[2]);
        let set = [("a", spec.clone()), ("b", spec.clone()), ("c", spec)];
        let mut sync = GradientSync::with_config(&comm, set, SyncConfig::default().with_op(ReduceOp::Sum)).unwrap();
        let mut steps = Vec::new();
        for step in 0..2 {
            for id in ["a", "b", "c"] {
                if step == 0 && r == 1 && id == "b" {
                    continue;
                }
                sync.push(&id, Tensor::from_slice(&dev, &[1.0f64, r as f64], &[2]).unwrap()).unwrap();
            }
            let out = sync.wait().unwrap();
            steps.push(out.iter().map(|(id, t)| (*id, t.to_vec::<f64>().unwrap())).collect::<Vec<_>>());
        }
        steps
    });
    for steps in &got {
        assert_eq!(steps[0], vec![("a", vec![3.0, 3.0]), ("b", vec![2.0, 2.0]), ("c", vec![3.0, 3.0])]);
        // The next step starts empty again: everyone hands everything over.
        assert_eq!(steps[1], vec![("a", vec![3.0, 3.0]), ("b", vec![3.0, 3.0]), ("c", vec![3.0, 3.0])]);
    }
}
