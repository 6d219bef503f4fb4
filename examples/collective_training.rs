//! Data-parallel training with burn and ruCCL, and resuming it bit for bit.
//!
//! Run:
//! ```text
//! cargo run --example collective_training --features burn -- run DIR
//! cargo run --example collective_training --features burn -- resume DIR
//! ```
//! With `--features burn,wgpu` the same on burn's wgpu backend (the default adapter, e.g.
//! Mesa's software Vulkan), the gradients reduced on the GPU where they are; with
//! `--features burn,burn-fusion` on burn's default wgpu backend, the fused one.
//!
//! Two logical ranks (threads of this process) train a small MLP on a synthetic regression
//! task with SGD and momentum, each on its own half of the batch; the gradients are averaged
//! with ruCCL ([`ruccl::grad::GradientSync`] through [`ruccl::burn::AllReduceWith`]) — through
//! host memory on burn's CPU backend (ndarray), on the device on burn's wgpu backend, whose
//! two ranks share one device. After every update the ranks compare their parameters'
//! checksums (an all_gather) and say whether they are identical.
//!
//! - `run DIR`: DIR must not exist yet. After the first update each rank saves its model and
//!   optimizer state into DIR; then it performs the second update and prints the parameters'
//!   checksum (also written to `DIR/checksum`).
//! - `resume DIR`: restores both ranks from DIR and performs the second update; the parameters
//!   must be exactly — bit for bit — those of `run`, and it says whether they are.
//!
//! `tests/collective_training.rs` runs `run` then `resume` and compares, on every backend
//! the build has.

use std::error::Error;
use std::path::{Path, PathBuf};

use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::record::{BinFileRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use ruccl::burn::{AllReduceWith, Handover, param_specs};
use ruccl::grad::GradientSync;
use ruccl::{Communicator, Device, Tensor as RucclTensor, UniqueId};

/// The backend the feature selects: burn's default (fused) wgpu backend, its gradients
/// resolved and reduced on the device.
#[cfg(feature = "burn-fusion")]
pub type Selected = (ruccl::burn::FusedWgpuBackend, ruccl::device::cubecl::WgpuCubeDevice);
/// The backend the feature selects: burn's wgpu backend, its gradients reduced on the device.
#[cfg(all(feature = "wgpu", not(feature = "burn-fusion")))]
pub type Selected = (ruccl::burn::WgpuBackend, ruccl::device::cubecl::WgpuCubeDevice);
/// The backend the feature selects: burn's CPU backend, its gradients reduced in host memory.
#[cfg(not(feature = "wgpu"))]
pub type Selected = (burn::backend::NdArray, ruccl::HostDevice);

/// A burn backend `I` (the inner backend of the training's `Autodiff<I>`) and the ruCCL
/// device `D` its gradients are reduced on.
pub trait Choice: Send + 'static {
    /// The inner burn backend.
    type I: Backend + Handover<Self::D>;
    /// The ruCCL device its gradients are reduced on.
    type D: Device;
}

impl<I: Backend + Handover<D>, D: Device> Choice for (I, D) {
    type I = I;
    type D = D;
}

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const RANKS: usize = 2;
const BATCH: usize = 64;
const LR: f64 = 0.05;

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    l1: Linear<B>,
    l2: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Mlp { l1: LinearConfig::new(4, 16).init(device), l2: LinearConfig::new(16, 1).init(device) }
    }

    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.l2.forward(self.l1.forward(x).tanh())
    }
}

/// Rank `rank`'s half of the batch of update `step`: inputs in [-1, 1), targets a smooth
/// function of them.
fn shard(rank: usize, step: usize) -> (TensorData, TensorData) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (step as u64 + 1);
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let xs: Vec<f32> = (0..BATCH * 4).map(|_| next()).collect();
    let ys: Vec<f32> = xs.chunks(4).map(|x| x[0].sin() + 0.5 * x[1] * x[2] - x[3]).collect();
    let half = BATCH / RANKS;
    let x = xs[rank * half * 4..(rank + 1) * half * 4].to_vec();
    let y = ys[rank * half..(rank + 1) * half].to_vec();
    (TensorData::new(x, [half, 4]), TensorData::new(y, [half, 1]))
}

/// FNV-1a over the bits of every parameter, in the module's order.
fn checksum<B: Backend, M: Module<B>>(model: &M) -> u64 {
    struct Bits(u64);
    impl<B: Backend> ModuleVisitor<B> for Bits {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            for b in param.val().into_data().as_bytes() {
                self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    let mut bits = Bits(0xcbf2_9ce4_8422_2325);
    model.visit(&mut bits);
    bits.0
}

/// Checks, through the communicator, that every rank holds the same parameters.
fn same_on_every_rank<D: Device>(comm: &Communicator<D>, sum: u64, step: usize) -> Res<()> {
    let dev = comm.device().clone();
    let mut all = RucclTensor::zeros(&dev, ruccl::DType::U64, &[comm.world_size()])?;
    comm.all_gather_into_tensor(&mut all, &RucclTensor::from_slice(&dev, &[sum], &[1])?)?;
    let all = all.to_vec::<u64>()?;
    if all.iter().any(|&s| s != sum) {
        return Err(format!("after update {step} the ranks' parameters differ: checksums {all:x?}").into());
    }
    if comm.rank() == 0 {
        println!("update {step}: both ranks hold identical parameters (checksum {sum:016x})");
    }
    Ok(())
}

fn files(dir: &Path, rank: usize) -> (PathBuf, PathBuf) {
    (dir.join(format!("rank{rank}-model")), dir.join(format!("rank{rank}-optimizer")))
}

/// What a rank does: from update `first` through update 2, saving after update 1 when `save`
/// is set, loading the state saved after update 1 when `first` is 2. Returns the checksum.
fn rank_main<C: Choice>(rank: usize, id: UniqueId, model: Mlp<Autodiff<C::I>>, dir: PathBuf, first: usize) -> Res<u64> {
    type B<C> = Autodiff<<C as Choice>::I>;
    let device = Default::default();
    let recorder = BinFileRecorder::<FullPrecisionSettings>::new();
    // The ruCCL device for burn's: the host for the CPU backend, the very same GPU for wgpu.
    let comm = Communicator::new(<C::I as Handover<C::D>>::comm_device(&device)?, RANKS, id, rank)?;
    let (model_file, optim_file) = files(&dir, rank);
    let mut optim =
        SgdConfig::new().with_momentum(Some(MomentumConfig::new().with_momentum(0.9))).init::<B<C>, Mlp<B<C>>>();
    // A clone shares its parameters' autodiff nodes with the original: `fork` gives this rank
    // its own graph (two threads backpropagating through shared nodes deadlock inside
    // burn-autodiff 0.21).
    let mut model = model.fork(&device);
    if first == 2 {
        model = model.load_file(model_file.clone(), &recorder, &device)?;
        optim = optim.load_record(recorder.load(optim_file.clone(), &device)?);
    }
    let mut sync = GradientSync::new(&comm, param_specs(&model))?;
    for step in first..=2 {
        let (x, y) = shard(rank, step);
        let (x, y) = (Tensor::<B<C>, 2>::from_data(x, &device), Tensor::<B<C>, 2>::from_data(y, &device));
        let loss = (model.forward(x) - y).powf_scalar(2.0).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let grads = grads.all_reduce_with(&mut sync, &model)?;
        model = optim.step(LR, model, grads);
        same_on_every_rank(&comm, checksum(&model), step)?;
        if step == 1 {
            model.clone().save_file(model_file.clone(), &recorder)?;
            recorder.record(optim.to_record(), optim_file.clone())?;
        }
    }
    Ok(checksum(&model))
}

/// Runs both ranks from update `first`; the checksum they agree on.
fn train<C: Choice>(dir: &Path, first: usize) -> Res<u64> {
    let device = Default::default();
    let model = Mlp::<Autodiff<C::I>>::new(&device);
    // Burn initialises parameters lazily, separately in each clone: initialise them first,
    // so both ranks start from the same values (and the same parameter ids).
    param_specs(&model);
    let id = UniqueId::new()?;
    let ranks: Vec<_> = (0..RANKS)
        .map(|rank| {
            let (id, model, dir) = (id.clone(), model.clone(), dir.to_path_buf());
            std::thread::spawn(move || rank_main::<C>(rank, id, model, dir, first))
        })
        .collect();
    let sums = ranks.into_iter().map(|r| r.join().map_err(|_| "a rank panicked")?).collect::<Res<Vec<u64>>>()?;
    Ok(sums[0])
}

/// `run DIR` on the backend the features select.
pub fn run(dir: &Path) -> Res<u64> {
    run_on::<Selected>(dir)
}

/// `resume DIR` on the backend the features select.
pub fn resume(dir: &Path) -> Res<u64> {
    resume_on::<Selected>(dir)
}

/// `run DIR`: two updates, the state saved after the first; the final checksum.
pub fn run_on<C: Choice>(dir: &Path) -> Res<u64> {
    if dir.exists() {
        return Err(format!("{} exists already; run needs a new directory", dir.display()).into());
    }
    std::fs::create_dir_all(dir)?;
    let sum = train::<C>(dir, 1)?;
    std::fs::write(dir.join("checksum"), format!("{sum:016x}\n"))?;
    println!("run: parameters after update 2 have checksum {sum:016x}");
    Ok(sum)
}

/// `resume DIR`: the second update from the saved state; the checksum, which must be `run`'s.
pub fn resume_on<C: Choice>(dir: &Path) -> Res<u64> {
    let want = std::fs::read_to_string(dir.join("checksum"))
        .map_err(|e| format!("{} holds no run to resume ({e})", dir.display()))?;
    let sum = train::<C>(dir, 2)?;
    if want.trim() != format!("{sum:016x}") {
        return Err(format!("resume gave checksum {sum:016x}, but run gave {}", want.trim()).into());
    }
    println!("resume: parameters after update 2 have checksum {sum:016x}: identical to run, bit for bit");
    Ok(sum)
}

/// The command line without the program name: `run DIR` or `resume DIR`.
pub fn cli(args: &[String]) -> Res<()> {
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["run", dir] => run(Path::new(dir)).map(|_| ()),
        ["resume", dir] => resume(Path::new(dir)).map(|_| ()),
        _ => Err("usage: collective_training run DIR | collective_training resume DIR".into()),
    }
}

fn main() -> Res<()> {
    cli(&std::env::args().skip(1).collect::<Vec<_>>())
}
