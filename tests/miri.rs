//! The Miri subset: small counts, worlds 2–4, every algorithm, every device path (lent host
//! memory, host staging, device ranges between ranks sharing a device, and work that completes
//! later on another thread, every rank driven by the shared progress thread), the error paths that must reclaim every lend, and the aliasing
//! cases — the places where the scheduler and the host device's guarded memory could race.
//!
//! `.ci/run` runs it as `cargo +nightly miri test --test miri` (plus the library's unit
//! tests). A plain `cargo test` leaves it out (`test = false`: the core suite runs its bodies
//! natively on every device); `cargo test --test miri` runs it natively.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

// Shared with the core suite, which uses more of them.
#[allow(dead_code)]
#[path = "core/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "core/reference.rs"]
mod reference;
#[allow(dead_code)]
#[path = "core/staged_device.rs"]
mod staged_device;
#[allow(dead_code)]
#[path = "core/vals.rs"]
mod vals;
// The test devices' own tests (the staging path's under Miri too).
#[path = "core/staged_device_tests.rs"]
mod staged_device_tests;

use ruccl::{Algorithm, CommConfig, DType, ErrorKind, ReduceOp, Tensor};

use harness::{Opts, TestDevice, run};
use reference::{data, reduce_input, reduced};

/// Small chunks, so that pipelined plans really pipeline (several messages per peer).
fn opts(algorithm: Algorithm) -> Opts {
    Opts::with_config(
        CommConfig::default().with_timeout(harness::TEST_TIMEOUT).with_algorithm(algorithm).with_chunk_bytes(8),
    )
}

const ALGORITHMS: [Algorithm; 6] = [
    Algorithm::RecursiveDoubling,
    Algorithm::Ring,
    Algorithm::Direct,
    Algorithm::Tree,
    Algorithm::KaryTree(2),
    Algorithm::Centralized,
];

fn all_reduce_every_algorithm<D: TestDevice>() {
    for world in 2..=4 {
        for algorithm in ALGORITHMS {
            run::<D, _>(world, &opts(algorithm), |ctx| {
                let op = ReduceOp::Sum;
                let mut t = ctx.tensor(&reduce_input::<f32>(op, ctx.rank, 7, world));
                ctx.ok(ctx.comm.all_reduce(&mut t, op), format!("all_reduce {algorithm}"));
                ctx.check(&t, &reduced::<f32>(op, ctx.world, 7, world), format!("all_reduce {algorithm}"));
            });
        }
    }
}

fn every_collective<D: TestDevice>() {
    // Exchange: on host memory, the small ops run through shared slots (where the device
    // keeps its memory elsewhere, the same as `Auto`).
    for algorithm in [Algorithm::Ring, Algorithm::Tree, Algorithm::Direct, Algorithm::Exchange] {
        run::<D, _>(3, &opts(algorithm), |ctx| {
            let (r, w, n) = (ctx.rank, ctx.world, 4);
            let mut t = ctx.tensor(&data::<i32>(r, n, 1));
            ctx.ok(ctx.comm.broadcast(&mut t, 1), "broadcast");
            ctx.check(&t, &data::<i32>(1, n, 1), "broadcast");
            let mut t = ctx.tensor(&reduce_input::<i64>(ReduceOp::Max, r, n, 2));
            ctx.ok(ctx.comm.reduce(&mut t, ReduceOp::Max, 2), "reduce");
            if r == 2 {
                ctx.check(&t, &reduced::<i64>(ReduceOp::Max, w, n, 2), "reduce");
            }
            let x = ctx.tensor(&data::<i32>(r, n, 3));
            let mut y = Tensor::zeros(&ctx.dev, DType::I32, &[n * w]).unwrap();
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), "all_gather");
            let want: Vec<i32> = (0..w).flat_map(|k| data::<i32>(k, n, 3)).collect();
            ctx.check(&y, &want, "all_gather");
            let x = ctx.tensor(&reduce_input::<f64>(ReduceOp::Sum, r, n * w, 4));
            let mut y = Tensor::zeros(&ctx.dev, DType::F64, &[n]).unwrap();
            ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum), "reduce_scatter");
            ctx.check(&y, &reduced::<f64>(ReduceOp::Sum, w, n * w, 4)[r * n..(r + 1) * n], "reduce_scatter");
            let x = ctx.tensor(&data::<u8>(r, n * w, 5));
            let mut y = Tensor::zeros(&ctx.dev, DType::U8, &[n * w]).unwrap();
            ctx.ok(ctx.comm.all_to_all_single(&mut y, &x), "all_to_all");
            let want: Vec<u8> = (0..w).flat_map(|k| data::<u8>(k, n * w, 5)[r * n..(r + 1) * n].to_vec()).collect();
            ctx.check(&y, &want, "all_to_all");
            let mut t = ctx.tensor(&data::<u32>(r, n, 6));
            if r == 0 {
                ctx.ok(ctx.comm.send(&t, 1), "send");
            } else if r == 1 {
                ctx.ok(ctx.comm.recv(&mut t, 0), "recv");
                ctx.check(&t, &data::<u32>(0, n, 6), "recv");
            }
            ctx.ok(ctx.comm.barrier(), "barrier");
        });
    }
}

/// The reported race: an output on the input's memory, recursive doubling, 4 ranks.
fn aliased_output<D: TestDevice>() {
    run::<D, _>(4, &opts(Algorithm::RecursiveDoubling), |ctx| {
        let x = ctx.tensor(&reduce_input::<i32>(ReduceOp::Sum, ctx.rank, 5, 7));
        let mut y = Tensor::from_buffer(&ctx.dev, x.buffer().clone(), DType::I32, &[5]).unwrap();
        ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, ReduceOp::Sum), "aliased all_reduce_into");
        ctx.check(&y, &reduced::<i32>(ReduceOp::Sum, 4, 5, 7), "aliased all_reduce_into");
    });
}

/// The reported race: ranks disagree (max vs sum), then every rank rewrites its input at
/// once. The failed op must have reclaimed every lend first.
fn reuse_after_failure<D: TestDevice>() {
    for algorithm in [Algorithm::RecursiveDoubling, Algorithm::Direct] {
        run::<D, _>(3, &opts(algorithm), |ctx| {
            let mut t = ctx.tensor(&[ctx.rank as f32; 6]);
            let op = if ctx.rank == 0 { ReduceOp::Max } else { ReduceOp::Sum };
            let e = ctx.comm.all_reduce(&mut t, op).unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Mismatch | ErrorKind::Aborted), "{e}");
            t.copy_from_slice(&[9.0f32; 6]).unwrap();
        });
    }
}

macro_rules! miri_suite {
    ($suite:ident, $dev:ty) => {
        mod $suite {
            #[test]
            fn all_reduce_every_algorithm() {
                super::all_reduce_every_algorithm::<$dev>();
            }
            #[test]
            fn every_collective() {
                super::every_collective::<$dev>();
            }
            #[test]
            fn aliased_output() {
                super::aliased_output::<$dev>();
            }
            #[test]
            fn reuse_after_failure() {
                super::reuse_after_failure::<$dev>();
            }
        }
    };
}

miri_suite!(host, ruccl::HostDevice);
miri_suite!(staged, crate::staged_device::StagedDevice);
miri_suite!(shared, crate::staged_device::SharedDevice);
miri_suite!(asynchronous, crate::staged_device::AsyncDevice);

/// Every rank driven by the process-wide progress thread: ops handed between threads, and
/// the failure path run from the driver.
mod one_thread {
    type D = crate::staged_device::OneThreadDevice;
    #[test]
    fn every_collective() {
        super::every_collective::<D>();
    }
    #[test]
    fn reuse_after_failure() {
        super::reuse_after_failure::<D>();
    }
}

/// Group calls on the host device run as one direct op (no messages): one thread holds every
/// rank's buffers, each behind its guards. Out of place, in place, and a group whose calls
/// disagree (the general path then reports the mismatch).
#[test]
fn group_direct_op() {
    use ruccl::{Communicator, Group, HostDevice};
    let dev = HostDevice::default();
    let world = 4;
    let comms =
        Communicator::init_all(vec![dev; world], CommConfig::default().with_timeout(harness::TEST_TIMEOUT)).unwrap();
    let inputs: Vec<Tensor<HostDevice>> =
        (0..world).map(|r| Tensor::from_slice(&dev, &[r as f32, 1.0], &[2]).unwrap()).collect();
    let mut outputs: Vec<Tensor<HostDevice>> =
        (0..world).map(|_| Tensor::zeros(&dev, DType::F32, &[2]).unwrap()).collect();
    let mut group = Group::new();
    for (r, (o, i)) in outputs.iter_mut().zip(&inputs).enumerate() {
        group.all_reduce_into(&comms[r], o, i, ReduceOp::Sum);
    }
    group.run().unwrap();
    for o in &outputs {
        assert_eq!(o.to_vec::<f32>().unwrap(), vec![6.0, 4.0]);
    }
    let mut group = Group::new();
    for (r, o) in outputs.iter_mut().enumerate() {
        group.all_reduce(&comms[r], o, ReduceOp::Max);
    }
    group.run().unwrap();
    assert_eq!(outputs[3].to_vec::<f32>().unwrap(), vec![6.0, 4.0]);
    // gather to rank 1 and scatter from it: one rank's buffer written (read) block by block.
    let mut gathered = Tensor::zeros(&dev, DType::F32, &[2 * world]).unwrap();
    let mut group = Group::new();
    let mut slot = Some(&mut gathered);
    for (r, i) in inputs.iter().enumerate() {
        group.gather(&comms[r], if r == 1 { slot.take() } else { None }, i, 1);
    }
    group.run().unwrap();
    assert_eq!(gathered.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0]);
    let mut group = Group::new();
    for (r, o) in outputs.iter_mut().enumerate() {
        group.scatter(&comms[r], o, (r == 1).then_some(&gathered), 1);
    }
    group.run().unwrap();
    assert_eq!(outputs[2].to_vec::<f32>().unwrap(), vec![2.0, 1.0]);
    let mut group = Group::new();
    for (r, o) in outputs.iter_mut().enumerate() {
        group.all_reduce(&comms[r], o, if r == 0 { ReduceOp::Max } else { ReduceOp::Sum });
    }
    let e = group.run().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Mismatch | ErrorKind::Aborted), "{e}");
}

/// A group with several calls per communicator on the general path (a planned ring): each
/// rank's ops run one after the other, its sends and receives together (and its send to
/// itself with its receive from itself, a copy).
#[test]
fn group_calls_in_order() {
    use ruccl::{Communicator, Group, HostDevice};
    let dev = HostDevice::default();
    let world = 2;
    let config = CommConfig::default().with_timeout(harness::TEST_TIMEOUT).with_algorithm(Algorithm::Ring);
    let comms = Communicator::init_all(vec![dev; world], config).unwrap();
    let sends: Vec<Tensor<HostDevice>> =
        (0..world).map(|r| Tensor::from_slice(&dev, &[r as f32], &[1]).unwrap()).collect();
    let mut recvs: Vec<Tensor<HostDevice>> =
        (0..world).map(|_| Tensor::zeros(&dev, DType::F32, &[1]).unwrap()).collect();
    let mut sums: Vec<Tensor<HostDevice>> =
        (0..world).map(|r| Tensor::from_slice(&dev, &[r as f32, 1.0, 2.0], &[3]).unwrap()).collect();
    let mut maxes: Vec<Tensor<HostDevice>> =
        (0..world).map(|r| Tensor::from_slice(&dev, &[r as f32, 5.0], &[2]).unwrap()).collect();
    let mut mine: Vec<Tensor<HostDevice>> =
        (0..world).map(|_| Tensor::zeros(&dev, DType::F32, &[1]).unwrap()).collect();
    let mut group = Group::new();
    let each = sends.iter().zip(recvs.iter_mut().zip(mine.iter_mut())).zip(sums.iter_mut().zip(maxes.iter_mut()));
    for (r, ((x, (y, z)), (s, m))) in each.enumerate() {
        let c = &comms[r];
        group.send(c, x, 1 - r).send(c, x, r).recv(c, y, 1 - r).recv(c, z, r);
        group.all_reduce(c, s, ReduceOp::Sum).all_reduce(c, m, ReduceOp::Max);
    }
    group.run().unwrap();
    for r in 0..world {
        assert_eq!(recvs[r].to_vec::<f32>().unwrap(), vec![(1 - r) as f32]);
        assert_eq!(mine[r].to_vec::<f32>().unwrap(), vec![r as f32]);
        assert_eq!(sums[r].to_vec::<f32>().unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(maxes[r].to_vec::<f32>().unwrap(), vec![1.0, 5.0]);
    }
}
