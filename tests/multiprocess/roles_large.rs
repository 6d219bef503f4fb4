//! The child roles that move large messages: larger than a shared-memory record, and around
//! the size that shared memory moves by single copy.

use ruccl::{HostDevice, ReduceOp, Tensor};

use super::roles::{check, check_transport, join, num};

/// Messages larger than a shared-memory record (streamed in pieces), many laps of the rings,
/// and a send and receive of 6 MiB each way between the first two ranks.
pub(super) fn large_child() -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let comm = join(num("MP_RANK")).map_err(e)?;
    check_transport()?;
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let n = 4 << 20;
    let v = |r: usize, i: usize| ((r + i) % 7) as f32;
    for round in 0..3 {
        let mine: Vec<f32> = (0..n).map(|i| v(rank + round, i)).collect();
        let mut t = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.all_reduce(&mut t, ReduceOp::Sum).map_err(e)?;
        let got = t.to_vec::<f32>().map_err(e)?;
        if let Some(i) = (0..n).find(|&i| got[i] != (0..world).map(|r| v(r + round, i)).sum::<f32>()) {
            return Err(format!("all_reduce round {round}: element {i} is {}", got[i]));
        }
    }
    let m = 3 << 19;
    let msg: Vec<f32> = (0..m).map(|i| (i % 1000) as f32).collect();
    let mut got = Tensor::zeros(&dev, ruccl::DType::F32, &[m]).map_err(e)?;
    match rank {
        0 => {
            comm.send(&Tensor::from_slice(&dev, &msg, &[m]).map_err(e)?, 1).map_err(e)?;
            comm.recv(&mut got, 1).map_err(e)?;
        }
        1 => {
            comm.recv(&mut got, 0).map_err(e)?;
            comm.send(&got, 0).map_err(e)?;
        }
        _ => {}
    }
    if rank < 2 {
        check("6 MiB send/recv", rank, got.to_vec::<f32>().map_err(e)?, msg)?;
    }
    comm.barrier().map_err(e)
}

/// Messages just under and over the sizes that shared memory moves by single copy (128 KiB
/// with several peers on the host, 64 KiB for all_gather; 32 KiB for a rank whose only peer
/// on the host is the other process, but 128 KiB for an in-place all_reduce's), in chunks
/// that are not a multiple of them: all_gather, broadcast and all_reduce (in place), every
/// value checked, several ops on one communicator.
pub(super) fn threshold_child() -> Result<(), String> {
    let e = |e: ruccl::CollectiveError| e.to_string();
    let comm = join(num("MP_RANK")).map_err(e)?;
    check_transport()?;
    let (rank, world, dev) = (comm.rank(), comm.world_size(), HostDevice::default());
    let v = |r: usize, i: usize| ((r * 7 + i) % 13) as f32;
    let sizes = [(8 << 10) - 3, (8 << 10) + 5, (16 << 10) - 3, (16 << 10) + 5, (32 << 10) - 3, (32 << 10) + 5];
    for n in sizes.into_iter().chain([(64 << 10) - 3, (64 << 10) + 5, 200_001]) {
        let mine: Vec<f32> = (0..n).map(|i| v(rank, i)).collect();
        let input = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        let mut out = Tensor::zeros(&dev, ruccl::DType::F32, &[n * world]).map_err(e)?;
        comm.all_gather_into_tensor(&mut out, &input).map_err(e)?;
        let want: Vec<f32> = (0..world).flat_map(|r| (0..n).map(move |i| v(r, i))).collect();
        check(&format!("all_gather of {n}"), rank, out.to_vec::<f32>().map_err(e)?, want)?;
        let root = world - 1;
        let mut b = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.broadcast(&mut b, root).map_err(e)?;
        check(&format!("broadcast of {n}"), rank, b.to_vec::<f32>().map_err(e)?, (0..n).map(|i| v(root, i)).collect())?;
        let mut a = Tensor::from_slice(&dev, &mine, &[n]).map_err(e)?;
        comm.all_reduce(&mut a, ReduceOp::Sum).map_err(e)?;
        let want: Vec<f32> = (0..n).map(|i| (0..world).map(|r| v(r, i)).sum()).collect();
        check(&format!("all_reduce of {n}"), rank, a.to_vec::<f32>().map_err(e)?, want)?;
    }
    comm.barrier().map_err(e)
}
