//! Four logical ranks on one device, all driven from this one thread: the host by default,
//! GPU 0 with `--features cuda`, the default wgpu adapter with `--features wgpu`.
//!
//! Run: `cargo run -p ruCCL --example all_reduce` (add `--features cuda` or `--features wgpu`)
//!
//! The four communicators come from [`Communicator::init_all`] (NCCL's `ncclCommInitAll`), and
//! each all_reduce is one [`Group`] holding every rank's call (NCCL's `ncclGroupStart/End`):
//! no OS thread per rank. On a GPU the four ranks share the device: they pass device ranges
//! to each other and reduce on the device, with no host round trip. Without the GPU it asks
//! for, the example says so in one line and exits non-zero.
//!
//! Each rank holds 257 f32 elements `rank + 1 + (i % 7)`. The example runs a ring
//! all_reduce (out of place) with `Sum` and with `Avg`, checks the exact result on every rank,
//! checks that every rank's input is unchanged, drops the communicators cleanly and prints
//! what it checked. It exits non-zero on any failure.

use std::process::ExitCode;

use ruccl::{Algorithm, CommConfig, Communicator, DType, Device, Group, ReduceOp, Tensor};

const RANKS: usize = 4;
const COUNT: usize = 257;

fn input(rank: usize) -> Vec<f32> {
    (0..COUNT).map(|i| (rank + 1 + i % 7) as f32).collect()
}

fn expected(op: ReduceOp) -> Vec<f32> {
    (0..COUNT)
        .map(|i| {
            let sum: f32 = (0..RANKS).map(|r| input(r)[i]).sum();
            if op == ReduceOp::Avg { sum / RANKS as f32 } else { sum }
        })
        .collect()
}

/// The device every rank uses.
#[cfg(feature = "cuda")]
fn open() -> ruccl::Result<ruccl::device::cubecl::CudaCubeDevice> {
    ruccl::device::cubecl::CudaCubeDevice::cuda(0)
}

/// The device every rank uses.
#[cfg(all(feature = "wgpu", not(feature = "cuda")))]
fn open() -> ruccl::Result<ruccl::device::cubecl::WgpuCubeDevice> {
    ruccl::device::cubecl::WgpuCubeDevice::wgpu_default()
}

/// The device every rank uses.
#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn open() -> ruccl::Result<ruccl::HostDevice> {
    Ok(ruccl::HostDevice::default())
}

fn wrong(what: String) -> ruccl::CollectiveError {
    ruccl::CollectiveError::new(ruccl::ErrorKind::Protocol, what)
}

/// Every rank's part of the example, from this one thread; the lines to print.
fn all_ranks<D: Device>(dev: &D) -> ruccl::Result<Vec<String>> {
    // Force the ring so that the example shows the bandwidth algorithm even at 257 elements.
    let config = CommConfig::from_env()?.with_algorithm(Algorithm::Ring);
    let comms = Communicator::init_all(vec![dev.clone(); RANKS], config)?;
    let xs = (0..RANKS).map(|r| Tensor::from_slice(dev, &input(r), &[COUNT])).collect::<ruccl::Result<Vec<_>>>()?;
    let mut lines = Vec::new();
    for op in [ReduceOp::Sum, ReduceOp::Avg] {
        let mut ys = (0..RANKS).map(|_| Tensor::zeros(dev, DType::F32, &[COUNT])).collect::<ruccl::Result<Vec<_>>>()?;
        let mut group = Group::new();
        for ((comm, y), x) in comms.iter().zip(ys.iter_mut()).zip(&xs) {
            group.all_reduce_into(comm, y, x, op);
        }
        group.run()?;
        let want = expected(op);
        for (rank, y) in ys.iter().enumerate() {
            let got = y.to_vec::<f32>()?;
            let bad = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            if bad > 0 {
                return Err(wrong(format!("rank {rank}: {bad} of {COUNT} elements wrong after all_reduce({op})")));
            }
            lines.push(format!(
                "rank {rank}: all_reduce({op}) of {COUNT} x f32 exact (first = {}, last = {})",
                got[0],
                got[COUNT - 1]
            ));
        }
    }
    for (rank, (x, comm)) in xs.iter().zip(&comms).enumerate() {
        if x.to_vec::<f32>()? != input(rank) {
            return Err(wrong(format!("rank {rank}: input was modified")));
        }
        let recorder = comm.flight_recorder();
        let algo = recorder.last().map(|e| e.algorithm.to_string()).unwrap_or_default();
        lines.push(format!("rank {rank}: input unchanged; algorithm {algo}, {} ops recorded", recorder.len()));
    }
    drop(comms);
    Ok(lines)
}

fn main() -> ExitCode {
    let dev = match open() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("no device to run on: {}", e.to_string().lines().next().unwrap_or_default());
            return ExitCode::FAILURE;
        }
    };
    let ok = match all_ranks(&dev) {
        Ok(lines) => {
            lines.iter().for_each(|l| println!("{l}"));
            true
        }
        Err(e) => {
            eprintln!("{e}");
            false
        }
    };
    if ok {
        println!(
            "OK: {RANKS} ranks on {}, one thread, all_reduce sum and avg of {COUNT} x f32 exact on every rank, inputs unchanged, communicators closed",
            dev.describe()
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
