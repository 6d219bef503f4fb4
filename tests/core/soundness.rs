//! Misuse that used to reach undefined behaviour or wrong data from safe code: an output that
//! shares memory with its input, reusing a tensor right after a failed op while peers might
//! still read it, clones of one buffer on two threads. Each must run in place, fail with a
//! typed error, or be refused — never race, never return wrong bits.

use std::time::Duration;

use ruccl::{Algorithm, CommConfig, DType, ErrorKind, Group, ReduceOp, Tensor, UniqueId};

use crate::harness::{Opts, TestDevice, run};
use crate::reference::{data, reduce_input, reduced};

/// A second tensor on the very same memory as `t` (what a framework adapter can build).
fn alias<D: TestDevice>(t: &Tensor<D>, shape: &[usize]) -> Tensor<D> {
    Tensor::from_buffer(t.device(), t.buffer().clone(), t.dtype(), shape).unwrap()
}

fn opts(algorithm: Algorithm) -> Opts {
    Opts::with_config(CommConfig::default().with_timeout(crate::harness::TEST_TIMEOUT).with_algorithm(algorithm))
}

/// `all_reduce_into` whose output is the input's memory runs in place and gives the right
/// sum under every all_reduce algorithm (recursive doubling used to give 17 where 10 was
/// right on ranks 1 and 3 of 4).
pub fn aliased_all_reduce_runs_in_place<D: TestDevice>(world: usize) {
    for algorithm in [Algorithm::RecursiveDoubling, Algorithm::Ring, Algorithm::Direct, Algorithm::Tree] {
        run::<D, _>(world, &opts(algorithm), |ctx| {
            for (round, n) in [1usize, 7, 64, 1000].into_iter().enumerate() {
                let x = ctx.tensor(&reduce_input::<i32>(ReduceOp::Sum, ctx.rank, n, round));
                let mut y = alias(&x, &[n]);
                ctx.arrive();
                ctx.ok(ctx.comm.all_reduce_into(&mut y, &x, ReduceOp::Sum), "aliased all_reduce_into");
                ctx.check(&y, &reduced::<i32>(ReduceOp::Sum, ctx.world, n, round), format!("{algorithm} n={n}"));
            }
        });
    }
}

/// Every other collective with an output: an output that is exactly where the in-place form
/// keeps its data runs in place; any other overlap is `InvalidArgument` on that rank only,
/// which then retries correctly.
pub fn aliased_outputs_of_every_collective<D: TestDevice>(world: usize) {
    run::<D, _>(world, &Opts::default(), |ctx| {
        let (r, w, n) = (ctx.rank, ctx.world, 5);
        // broadcast_into / reduce_into: output is the input.
        let x = ctx.tensor(&data::<f32>(r, n, 1));
        let mut y = alias(&x, &[n]);
        ctx.ok(ctx.comm.broadcast_into(&mut y, Some(&x), w - 1), "aliased broadcast_into");
        ctx.check(&y, &data::<f32>(w - 1, n, 1), "aliased broadcast_into");
        let x = ctx.tensor(&reduce_input::<i64>(ReduceOp::Sum, r, n, 2));
        let mut y = alias(&x, &[n]);
        ctx.ok(ctx.comm.reduce_into(&mut y, &x, ReduceOp::Sum, 0), "aliased reduce_into");
        if r == 0 {
            ctx.check(&y, &reduced::<i64>(ReduceOp::Sum, w, n, 2), "aliased reduce_into");
        }
        // all_to_all_single: output is the input.
        let x = ctx.tensor(&data::<u32>(r, n * w, 3));
        let mut y = alias(&x, &[n * w]);
        ctx.ok(ctx.comm.all_to_all_single(&mut y, &x), "aliased all_to_all_single");
        let want: Vec<u32> = (0..w).flat_map(|k| data::<u32>(k, n * w, 3)[r * n..(r + 1) * n].to_vec()).collect();
        ctx.check(&y, &want, "aliased all_to_all_single");
        // all_gather_into_tensor: the input is block 0 of the output — in place on rank 0,
        // a partial overlap elsewhere.
        let mut y = Tensor::zeros(&ctx.dev, DType::I32, &[n * w]).unwrap();
        let mut x = alias(&y, &[n]);
        let mine = data::<i32>(r, n, 4);
        x.copy_from_slice(&mine).unwrap();
        if r != 0 {
            ctx.expect_err(
                ctx.comm.all_gather_into_tensor(&mut y, &x),
                ErrorKind::InvalidArgument,
                &["overlaps the input"],
                "all_gather_into_tensor with its input inside another rank's block",
            );
            y = Tensor::zeros(&ctx.dev, DType::I32, &[n * w]).unwrap();
            let x = ctx.tensor(&mine);
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), "all_gather_into_tensor retried");
        } else {
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut y, &x), "aliased all_gather_into_tensor");
        }
        let want: Vec<i32> = (0..w).flat_map(|k| data::<i32>(k, n, 4)).collect();
        ctx.check(&y, &want, "aliased all_gather_into_tensor");
        // reduce_scatter_tensor: the output is block 0 of the input.
        let x = ctx.tensor(&reduce_input::<f64>(ReduceOp::Sum, r, n * w, 5));
        let mut y = alias(&x, &[n]);
        if r != 0 {
            ctx.expect_err(
                ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum),
                ErrorKind::InvalidArgument,
                &["overlaps the input"],
                "reduce_scatter_tensor with its output inside another rank's block",
            );
            y = Tensor::zeros(&ctx.dev, DType::F64, &[n]).unwrap();
        }
        ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum), "reduce_scatter_tensor");
        let all = reduced::<f64>(ReduceOp::Sum, w, n * w, 5);
        ctx.check(&y, &all[r * n..(r + 1) * n], "aliased reduce_scatter_tensor");
        // all_gather into a list: two outputs on one memory are refused on every rank.
        if w > 1 {
            let x = ctx.tensor(&data::<u8>(r, n, 6));
            let first = Tensor::zeros(&ctx.dev, DType::U8, &[n]).unwrap();
            let mut outs = vec![alias(&first, &[n]), first];
            outs.extend((2..w).map(|_| Tensor::zeros(&ctx.dev, DType::U8, &[n]).unwrap()));
            ctx.expect_err(
                ctx.comm.all_gather(&mut outs, &x),
                ErrorKind::InvalidArgument,
                &["same memory"],
                "all_gather into a list with a repeated output",
            );
        }
        assert!(ctx.comm.is_usable());
        ctx.ok(ctx.comm.barrier(), "barrier after the refused calls");
    });
}

/// A failed op (ranks disagree on the reduce op) returns only once no peer reads this rank's
/// memory any more: writing the input right after the error always succeeds. Before, the
/// error path skipped reclaiming lends, and a peer could still be reading (a data race).
pub fn tensor_is_free_after_a_failed_op<D: TestDevice>() {
    for trial in 0..D::rounds(10) {
        run::<D, _>(3, &Opts::timed(Duration::from_secs(10)), |ctx| {
            let n = 4096 + trial;
            let mut t = ctx.tensor(&reduce_input::<f32>(ReduceOp::Sum, ctx.rank, n, trial));
            let op = if ctx.rank == 0 { ReduceOp::Max } else { ReduceOp::Sum };
            ctx.arrive();
            let e = ctx.comm.all_reduce(&mut t, op).expect_err("mismatched reduce ops");
            assert!(matches!(e.kind(), ErrorKind::Mismatch | ErrorKind::Aborted), "{e}");
            // The memory is ours again: an overlapping write is not refused.
            t.copy_from_slice(&vec![7.0f32; n]).unwrap_or_else(|e| panic!("rank {}: {e}", ctx.rank));
        });
    }
}

/// Tensors on clones of one buffer, written and read from two threads: every access either
/// runs alone on its bytes or is refused with a `Device` error — a read never sees half of
/// one write and half of another.
pub fn buffer_clones_on_two_threads<D: TestDevice>() {
    let dev = D::for_rank(0);
    let a = Tensor::from_slice(&dev, &vec![0u32; 1 << 16], &[1 << 16]).unwrap();
    let b = alias(&a, &[1 << 16]);
    std::thread::scope(|s| {
        for (t, v) in [(a, 1u32), (b, 2u32)] {
            s.spawn(move || {
                let mut t = t;
                for _ in 0..D::rounds(200) {
                    match t.copy_from_slice(&vec![v; 1 << 16]) {
                        Ok(()) => {}
                        Err(e) => assert_eq!(e.kind(), ErrorKind::Device, "{e}"),
                    }
                    if let Ok(got) = t.to_vec::<u32>() {
                        assert!(got.iter().all(|&x| x == got[0]), "a torn read: {} then {:?}", got[0], got.last());
                    }
                }
            });
        }
    });
}

/// Allocation sizes a caller controls never abort the process.
pub fn impossible_allocations_are_errors<D: TestDevice>() {
    let dev = D::for_rank(0);
    let e = Tensor::zeros(&dev, DType::F32, &[1 << 40]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Device, "{e}");
    let e = Tensor::zeros(&dev, DType::F64, &[usize::MAX / 4]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Device | ErrorKind::InvalidArgument), "{e}");
    // And the communicator still joins and runs afterwards.
    let comm = ruccl::Communicator::new(dev.clone(), 1, UniqueId::new().unwrap(), 0).unwrap();
    comm.barrier().unwrap();
}

/// Two ranks on one GPU given one buffer (`Tensor::from_buffer` of a clone on each): their
/// all_reduces returned `Ok` with sums that differed between runs and ranks (a stranger's
/// review, lavapipe). Now each rank's op holds its memory while it runs, and the later of the
/// two finds the other's: both fail at once (the communicator aborted), never `Ok`. Devices
/// with memory guards of their own (the host device) are left to those.
pub fn two_ranks_given_one_buffer_fail<D: TestDevice>() {
    let (d0, d1) = (D::for_rank(0), D::for_rank(1));
    if d0.host_memory() || !d0.same_device(&d1) {
        return;
    }
    let n = 1 << 10;
    let shared = Tensor::from_slice(&d0, &vec![1.0f32; n], &[n]).unwrap();
    let buf = shared.buffer().clone();
    // A blocking call, and the same call in a group of its own (a group's ops held nothing
    // while they ran, and returned `Ok` with racing sums).
    for grouped in [false, true] {
        let said = std::sync::Mutex::new(Vec::new());
        run::<D, _>(2, &Opts::timed(Duration::from_secs(20)), |ctx| {
            let mut t = Tensor::from_buffer(&ctx.dev, buf.clone(), DType::F32, &[n]).unwrap();
            let t0 = std::time::Instant::now();
            let r = if grouped {
                let mut g = Group::new();
                g.all_reduce(&ctx.comm, &mut t, ReduceOp::Sum);
                g.run()
            } else {
                ctx.comm.all_reduce(&mut t, ReduceOp::Sum)
            };
            let e = r.expect_err("two ranks raced on one buffer");
            // The other rank hears of it as the poison, or (when the failed rank has dropped
            // its communicator already) as that rank's departure.
            let kinds = [ErrorKind::InvalidArgument, ErrorKind::Aborted, ErrorKind::PeerLost];
            assert!(kinds.contains(&e.kind()), "grouped {grouped}: {e}");
            assert!(t0.elapsed() < Duration::from_secs(10), "grouped {grouped}, {:?}: {e}", t0.elapsed());
            said.lock().unwrap().push(e.to_string());
        });
        let said = said.into_inner().unwrap();
        assert!(said.iter().any(|e| e.contains("were given one tensor's memory")), "grouped {grouped}: {said:#?}");
    }
}
