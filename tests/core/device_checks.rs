//! Checks of the test devices themselves (`core.rs` only): the staged device really stages
//! through the host, and ranks sharing a device never do.

use ruccl::{DType, ReduceOp};

use crate::harness::{Opts, run};
use crate::staged_device::{SharedDevice, StagedDevice};

/// Sends from a `StagedDevice` are downloaded into host staging, so the suite stamped out
/// for it really runs the staging path.
#[test]
fn staged_device_takes_the_staging_path() {
    run::<StagedDevice, _>(3, &Opts::default(), |ctx| {
        let mut t = ctx.tensor(&[1.0f32, 2.0, 3.0]);
        let before = ctx.dev.host_bytes();
        ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Sum), "all_reduce");
        assert!(ctx.dev.host_bytes() > before, "rank {}: nothing was staged through the host", ctx.rank);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![3.0, 6.0, 9.0]);
    });
}

/// Ranks that share one device exchange device ranges and reduce on the device: not one
/// byte crosses host memory, for any collective, algorithm or point-to-point op.
#[test]
#[cfg_attr(miri, ignore = "every collective x 5 algorithms is minutes under Miri; runs in `cargo test`")]
fn shared_device_never_crosses_the_host() {
    use ruccl::{Algorithm, CommConfig, Tensor};
    for algorithm in
        [Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling, Algorithm::Direct]
    {
        let config = CommConfig::default().with_timeout(crate::harness::TEST_TIMEOUT).with_algorithm(algorithm);
        run::<SharedDevice, _>(4, &Opts::with_config(config), |ctx| {
            let (r, w, n) = (ctx.rank, ctx.world, 6);
            let dev = &ctx.dev;
            let z = |len: usize| Tensor::zeros(dev, DType::F32, &[len]).unwrap();
            let mut t = ctx.tensor(&[r as f32; 6]);
            let x = ctx.tensor(&vec![r as f32; n * w]);
            let (mut y, mut yw) = (z(n), z(n * w));
            let before = ctx.dev.host_bytes();
            ctx.ok(ctx.comm.all_reduce(&mut t, ReduceOp::Avg), "all_reduce");
            ctx.ok(ctx.comm.all_reduce_into(&mut y, &t, ReduceOp::Sum), "all_reduce_into");
            ctx.ok(ctx.comm.broadcast(&mut t, 1), "broadcast");
            ctx.ok(ctx.comm.reduce(&mut t, ReduceOp::Max, 2), "reduce");
            ctx.ok(ctx.comm.all_gather_into_tensor(&mut yw, &t), "all_gather");
            ctx.ok(ctx.comm.reduce_scatter_tensor(&mut y, &x, ReduceOp::Sum), "reduce_scatter");
            ctx.ok(ctx.comm.all_to_all_single(&mut yw, &x), "all_to_all");
            ctx.ok(ctx.comm.gather((r == 0).then_some(&mut yw), &t, 0), "gather");
            ctx.ok(ctx.comm.scatter(&mut y, (r == 3).then_some(&x), 3), "scatter");
            if r % 2 == 0 {
                ctx.ok(ctx.comm.send(&t, r + 1), "send");
            } else {
                ctx.ok(ctx.comm.recv(&mut t, r - 1), "recv");
            }
            ctx.ok(ctx.comm.barrier(), "barrier");
            assert_eq!(ctx.dev.host_bytes() - before, 0, "rank {r}: bytes crossed host memory ({algorithm})");
            ctx.check(&y, &[3.0f32; 6], "scatter from rank 3 (its input holds 3s)");
        });
    }
}
