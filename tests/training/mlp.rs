//! The defining property of data-parallel training: a small MLP trained with SGD and momentum
//! on a synthetic regression task reaches the same parameters whether one rank takes the full
//! batch or 2 or 4 ranks take a shard each and average their gradients with `GradientSync` —
//! to float tolerance after every step — and every rank holds identical parameters.

use ruccl::grad::{GradientSync, ParamSpec, SyncConfig};
use ruccl::{DType, HostDevice, Tensor};

use crate::{Rng, on_ranks};

const IN: usize = 4;
const HIDDEN: usize = 8;
const BATCH: usize = 32;
const STEPS: usize = 12;
const LR: f32 = 0.05;
const MOMENTUM: f32 = 0.9;

/// The parameters, in id order: (id, shape).
const PARAMS: [(&str, &[usize]); 4] =
    [("l1.bias", &[HIDDEN]), ("l1.weight", &[HIDDEN, IN]), ("l2.bias", &[1]), ("l2.weight", &[1, HIDDEN])];

struct Mlp {
    /// By parameter, in id order.
    params: Vec<Vec<f32>>,
    velocity: Vec<Vec<f32>>,
}

impl Mlp {
    fn new() -> Mlp {
        let mut rng = Rng(0x5eed);
        let params: Vec<Vec<f32>> =
            PARAMS.iter().map(|(_, shape)| (0..shape.iter().product()).map(|_| 0.5 * rng.unit()).collect()).collect();
        let velocity = params.iter().map(|p| vec![0.0; p.len()]).collect();
        Mlp { params, velocity }
    }

    /// Mean squared error over `xs`/`ys` and its gradient with respect to every parameter.
    fn loss_and_grads(&self, xs: &[[f32; IN]], ys: &[f32]) -> (f32, Vec<Vec<f32>>) {
        let [b1, w1, b2, w2] = [&self.params[0], &self.params[1], &self.params[2], &self.params[3]];
        let mut g: Vec<Vec<f32>> = self.params.iter().map(|p| vec![0.0; p.len()]).collect();
        let n = xs.len() as f32;
        let mut loss = 0.0;
        for (x, &y) in xs.iter().zip(ys) {
            let h: Vec<f32> =
                (0..HIDDEN).map(|j| (b1[j] + (0..IN).map(|k| w1[j * IN + k] * x[k]).sum::<f32>()).tanh()).collect();
            let p = b2[0] + (0..HIDDEN).map(|j| w2[j] * h[j]).sum::<f32>();
            loss += (p - y) * (p - y) / n;
            let dp = 2.0 * (p - y) / n;
            g[2][0] += dp;
            for j in 0..HIDDEN {
                g[3][j] += dp * h[j];
                let dz = dp * w2[j] * (1.0 - h[j] * h[j]);
                g[0][j] += dz;
                for k in 0..IN {
                    g[1][j * IN + k] += dz * x[k];
                }
            }
        }
        (loss, g)
    }

    fn step(&mut self, grads: &[Vec<f32>]) {
        for ((p, v), g) in self.params.iter_mut().zip(&mut self.velocity).zip(grads) {
            for ((p, v), g) in p.iter_mut().zip(v.iter_mut()).zip(g) {
                *v = MOMENTUM * *v + g;
                *p -= LR * *v;
            }
        }
    }

    fn flat(&self) -> Vec<f32> {
        self.params.concat()
    }
}

fn data() -> (Vec<[f32; IN]>, Vec<f32>) {
    let mut rng = Rng(42);
    let xs: Vec<[f32; IN]> = (0..BATCH).map(|_| [rng.unit(), rng.unit(), rng.unit(), rng.unit()]).collect();
    let ys = xs.iter().map(|x| x[0].sin() + 0.5 * x[1] * x[2] - x[3]).collect();
    (xs, ys)
}

/// Trains on `world` ranks, each on its shard; per rank, the parameters after every step and
/// the full-batch loss before the first and after the last.
fn train(world: usize, bucket_bytes: usize) -> Vec<(Vec<Vec<f32>>, f32, f32)> {
    on_ranks(world, |comm| {
        let dev = *comm.device();
        let rank = comm.rank();
        let (xs, ys) = data();
        let shard = BATCH / world;
        let (my_x, my_y) = (&xs[rank * shard..(rank + 1) * shard], &ys[rank * shard..(rank + 1) * shard]);
        let spec = PARAMS.iter().map(|&(id, shape)| (id, ParamSpec::new(DType::F32, shape)));
        let config = SyncConfig::default().with_bucket_bytes(bucket_bytes);
        let mut sync = GradientSync::with_config(&comm, spec, config).unwrap();
        let mut model = Mlp::new();
        let first = model.loss_and_grads(&xs, &ys).0;
        let mut snapshots = Vec::new();
        for _ in 0..STEPS {
            let (_, grads) = model.loss_and_grads(my_x, my_y);
            // Backward produces the last layer's gradients first.
            for k in (0..PARAMS.len()).rev() {
                let (id, shape) = PARAMS[k];
                sync.push(&id, Tensor::<HostDevice>::from_slice(&dev, &grads[k], shape).unwrap()).unwrap();
            }
            let reduced = sync.wait().unwrap();
            let ids: Vec<&str> = reduced.iter().map(|(id, _)| *id).collect();
            assert_eq!(ids, PARAMS.map(|(id, _)| id));
            let reduced: Vec<Vec<f32>> = reduced.iter().map(|(_, t)| t.to_vec::<f32>().unwrap()).collect();
            model.step(&reduced);
            snapshots.push(model.flat());
        }
        let last = model.loss_and_grads(&xs, &ys).0;
        (snapshots, first, last)
    })
}

#[test]
fn data_parallel_training_matches_one_rank_on_the_full_batch() {
    let single = train(1, 1 << 20);
    let (reference, first, last) = &single[0];
    assert!(*last < 0.5 * first, "the single-rank run does not train: loss {first} -> {last}");
    // Small buckets too, so several all_reduce calls are in flight per step.
    for (world, bucket_bytes) in [(2, 1 << 20), (4, 1 << 20), (2, 40), (4, 16)] {
        let ranks = train(world, bucket_bytes);
        for (rank, (snapshots, _, _)) in ranks.iter().enumerate() {
            // Every rank holds the same bits as rank 0 after every step.
            assert_eq!(snapshots, &ranks[0].0, "rank {rank} of {world} diverged from rank 0");
        }
        for (step, (got, want)) in ranks[0].0.iter().zip(reference).enumerate() {
            let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 1e-5, "{world} ranks, {bucket_bytes}-byte buckets, step {step}: off by {worst}");
        }
        println!("{world} ranks ({bucket_bytes}-byte buckets) match 1 rank over {STEPS} steps; loss {first} -> {last}");
    }
}
