//! One rank per process, joined over TCP, started by a launcher: `mpirun`, torchrun-style variables
//! or `srun` (see the README, "Several processes"). Processes of one host move their data
//! through shared memory (`RUCCL_SHM_DISABLE=1`: through their sockets).
//!
//! Run (4 processes on this host):
//! ```text
//! cargo build --example tcp_all_reduce
//! mpirun -np 4 --oversubscribe --allow-run-as-root \
//!     -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 target/debug/examples/tcp_all_reduce
//! ```
//! or, by hand, one shell per rank: `RANK=r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1
//! MASTER_PORT=29500 target/debug/examples/tcp_all_reduce`.
//!
//! Each rank joins with [`Communicator::from_env`], holds 1000 f32 elements
//! `rank + 1 + (i % 7)` and a 1 MiB tensor of its rank, all_reduces both (`Sum`), checks every
//! element against the exact sum, then broadcasts rank 0's first tensor and checks it. Rank 0
//! prints one line; any rank exits non-zero on an error or a wrong value.

use std::process::ExitCode;

use ruccl::{Communicator, HostDevice, ReduceOp, Tensor};

const COUNT: usize = 1000;
const BIG: usize = 1 << 18;

fn input(rank: usize) -> Vec<f32> {
    (0..COUNT).map(|i| (rank + 1 + i % 7) as f32).collect()
}

/// This rank's number and the line rank 0 prints.
fn run() -> Result<(usize, String), String> {
    let dev = HostDevice::default();
    let comm = Communicator::from_env(dev).map_err(|e| e.to_string())?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let err = |e: ruccl::CollectiveError| e.to_string();

    let mut x = Tensor::from_slice(&dev, &input(rank), &[COUNT]).map_err(err)?;
    comm.all_reduce(&mut x, ReduceOp::Sum).map_err(err)?;
    let want: Vec<f32> = (0..COUNT).map(|i| (0..world).map(|r| input(r)[i]).sum()).collect();
    let got = x.to_vec::<f32>().map_err(err)?;
    if got != want {
        let bad = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!("rank {rank}: all_reduce element {bad} is {}, want {}", got[bad], want[bad]));
    }

    let mut big = Tensor::from_slice(&dev, &vec![rank as f32; BIG], &[BIG]).map_err(err)?;
    comm.all_reduce(&mut big, ReduceOp::Sum).map_err(err)?;
    let sum = (world * (world - 1) / 2) as f32;
    if big.to_vec::<f32>().map_err(err)?.iter().any(|&v| v != sum) {
        return Err(format!("rank {rank}: the 1 MiB all_reduce is not {sum} everywhere"));
    }

    let mut b = Tensor::from_slice(&dev, &input(rank), &[COUNT]).map_err(err)?;
    comm.broadcast(&mut b, 0).map_err(err)?;
    if b.to_vec::<f32>().map_err(err)? != input(0) {
        return Err(format!("rank {rank}: broadcast from rank 0 differs"));
    }
    comm.barrier().map_err(err)?;
    // How this rank's data moved to each peer (chosen per pair when the group formed).
    let mut links: Vec<String> = Vec::new();
    for peer in (0..world).filter(|&p| p != rank) {
        let link = comm.peer_link(peer).map_err(err)?.to_string();
        if !links.contains(&link) {
            links.push(link);
        }
    }
    let line = format!(
        "OK: {world} processes, rank {rank}'s data to its peers by {}: all_reduce of {COUNT} and {BIG} x f32 and \
         broadcast exact on every rank",
        links.join(" and ")
    );
    Ok((rank, line))
}

fn main() -> ExitCode {
    match run() {
        Ok((rank, line)) => {
            if rank == 0 {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
