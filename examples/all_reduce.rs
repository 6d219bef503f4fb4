//! Four logical ranks, one thread each, on one device: the host by default, GPU 0 with
//! `--features cuda`, the default wgpu adapter with `--features wgpu`.
//!
//! Run: `cargo run -p ruCCL --example all_reduce` (add `--features cuda` or `--features wgpu`)
//!
//! On a GPU the four ranks share the device: they pass device ranges to each other and
//! reduce on the device, with no host round trip. Without the GPU it asks for, the example
//! says so in one line and exits non-zero.
//!
//! Each rank holds 257 f32 elements `rank + 1 + (i % 7)`. The example runs a ring
//! all_reduce (out of place) with `Sum` and with `Avg`, checks the exact result on every rank,
//! checks that every rank's input is unchanged, drops the communicators cleanly and prints
//! what it checked. It exits non-zero on any failure.

use std::process::ExitCode;
use std::thread;

use ruccl::{Algorithm, CommConfig, Communicator, DType, Device, ReduceOp, Tensor, UniqueId};

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

fn rank_main<D: Device>(dev: D, rank: usize, id: UniqueId) -> ruccl::Result<Vec<String>> {
    // Force the ring so that the example shows the bandwidth algorithm even at 257 elements.
    let config = CommConfig::from_env()?.with_algorithm(Algorithm::Ring);
    let comm = Communicator::with_config(dev.clone(), RANKS, id, rank, config)?;
    let x = Tensor::from_slice(&dev, &input(rank), &[COUNT])?;
    let mut lines = Vec::new();
    for op in [ReduceOp::Sum, ReduceOp::Avg] {
        let mut y = Tensor::zeros(&dev, DType::F32, &[COUNT])?;
        comm.all_reduce_into(&mut y, &x, op)?;
        let got = y.to_vec::<f32>()?;
        let want = expected(op);
        let wrong = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        if wrong > 0 {
            return Err(ruccl::CollectiveError::new(
                ruccl::ErrorKind::Protocol,
                format!("rank {rank}: {wrong} of {COUNT} elements wrong after all_reduce({op})"),
            ));
        }
        lines.push(format!(
            "rank {rank}: all_reduce({op}) of {COUNT} x f32 exact (first = {}, last = {})",
            got[0],
            got[COUNT - 1]
        ));
    }
    if x.to_vec::<f32>()? != input(rank) {
        return Err(ruccl::CollectiveError::new(
            ruccl::ErrorKind::Protocol,
            format!("rank {rank}: input was modified"),
        ));
    }
    lines.push(format!("rank {rank}: input unchanged"));
    let algo = comm.flight_recorder().last().map(|e| e.algorithm.to_string()).unwrap_or_default();
    lines.push(format!("rank {rank}: algorithm {algo}, {} ops recorded", comm.flight_recorder().len()));
    drop(comm);
    Ok(lines)
}

#[allow(clippy::clone_on_copy, reason = "the host device is Copy, the GPU devices are not")]
fn main() -> ExitCode {
    let dev = match open() {
        Ok(dev) => dev,
        Err(e) => {
            eprintln!("no device to run on: {}", e.to_string().lines().next().unwrap_or_default());
            return ExitCode::FAILURE;
        }
    };
    let id = match UniqueId::new() {
        Ok(id) => id,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let handles: Vec<_> = (0..RANKS)
        .map(|rank| {
            let (id, dev) = (id.clone(), dev.clone());
            thread::spawn(move || rank_main(dev, rank, id))
        })
        .collect();
    let mut ok = true;
    for (rank, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(lines)) => lines.iter().for_each(|l| println!("{l}")),
            Ok(Err(e)) => {
                eprintln!("{e}");
                ok = false;
            }
            Err(_) => {
                eprintln!("rank {rank} panicked");
                ok = false;
            }
        }
    }
    if ok {
        println!(
            "OK: {RANKS} ranks on {}, all_reduce sum and avg of {COUNT} x f32 exact on every rank, inputs unchanged, communicators closed",
            dev.describe()
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
