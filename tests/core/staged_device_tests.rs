//! The test devices' own tests (`staged_device.rs`): that each really takes the path it
//! stands for. Their own module, so that only `tests/core.rs` and `tests/miri.rs` run them,
//! not every binary that stamps the suite (`core_tcp`, `gpu_core`).

use std::time::Duration;

use ruccl::{CollectiveError, DType, ErrorKind, HostDevice, ReduceOp};

use crate::harness::{Opts, run};
use crate::staged_device::*;

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

/// Threads that drive several ranks — a group call, the process-wide progress thread — sleep
/// while device work runs and are woken by the device ([`Device::wakes`]); every job of this
/// device outlasts the waiters' spinning, so every device wait sleeps. Results are exact
/// either way; the wake is what makes them prompt (a lost one costs the bell's 20 ms park
/// slice, which `ruccl-perf --group` on a GPU device shows, not this test).
#[test]
#[cfg_attr(miri, ignore = "millisecond device jobs: slow under Miri, and no unsafe code of its own")]
fn threads_driving_ranks_sleep_until_the_device_wakes_them() {
    use ruccl::{CommConfig, Communicator, Group, Tensor};
    type Slow = TestDev<DelayedAsync<1>>;
    let world = 3;
    for shared_progress in [false, true] {
        let devices: Vec<Slow> = (0..world).map(|_| Slow::new(HostDevice::default())).collect();
        let config =
            CommConfig::default().with_timeout(crate::harness::TEST_TIMEOUT).with_shared_progress(shared_progress);
        let comms = Communicator::init_all(devices, config).unwrap();
        let mut ts: Vec<_> = comms
            .iter()
            .map(|c| Tensor::from_slice(c.device(), &[c.rank() as f32 + 1.0; 64], &[64]).unwrap())
            .collect();
        let mut g = Group::new();
        for (c, t) in comms.iter().zip(ts.iter_mut()) {
            g.all_reduce(c, t, ReduceOp::Sum);
        }
        g.run().unwrap();
        let check = |ts: &[Tensor<Slow>], what: &str| {
            for t in ts {
                assert_eq!(t.to_vec::<f32>().unwrap(), vec![6.0; 64], "{what} (shared progress: {shared_progress})");
            }
        };
        check(&ts, "group all_reduce");
        // Non-blocking calls, driven by each rank's progress thread or the shared one.
        let works: Vec<_> = comms.iter().zip(&ts).map(|(c, t)| c.all_reduce_async(t, ReduceOp::Max).unwrap()).collect();
        for w in works {
            w.wait().unwrap();
        }
        check(&ts, "all_reduce_async");
    }
}

/// A rank whose own device is still busy at the op's deadline, while another rank never
/// called the collective: the timeout names that rank (the op could not have finished
/// without it, however fast the device), and says what this rank waited for.
#[test]
#[cfg_attr(miri, ignore = "700 ms device jobs: slow under Miri, and no unsafe code of its own")]
fn a_timeout_on_the_device_names_the_rank_that_never_came() {
    use ruccl::{Algorithm, CommConfig, Communicator, Tensor};
    type Glacial = TestDev<DelayedAsync<700>>;
    let world = 3;
    let devices: Vec<Glacial> = (0..world).map(|_| Glacial::new(HostDevice::default())).collect();
    let config = CommConfig::default().with_timeout(Duration::from_millis(300)).with_algorithm(Algorithm::Ring);
    let comms = Communicator::init_all(devices, config.clone()).unwrap();
    let errors: Vec<CollectiveError> = std::thread::scope(|s| {
        // Rank 2 never calls.
        let hs: Vec<_> = comms[..2]
            .iter()
            .map(|c| {
                s.spawn(move || {
                    let mut t = Tensor::from_slice(c.device(), &[1.0f32; 6], &[6]).unwrap();
                    c.all_reduce(&mut t, ReduceOp::Sum).expect_err("rank 2 never calls")
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (rank, e) in errors.iter().enumerate() {
        assert_eq!(e.kind(), ErrorKind::Timeout, "rank {rank}: {e}");
        assert_eq!(e.context().peer, Some(2), "rank {rank} blames the wrong rank: {e}");
        assert!(e.message().contains("never reached op #0"), "rank {rank}: {e}");
    }
    assert!(
        errors.iter().any(|e| e.message().contains("its device")),
        "no rank timed out on its device, so this test tests nothing: {errors:?}"
    );
    // Every rank there: a rank that gives up on its own device says so, and blames no rank.
    let devices: Vec<Glacial> = (0..world).map(|_| Glacial::new(HostDevice::default())).collect();
    let comms = Communicator::init_all(devices, config).unwrap();
    let errors: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .iter()
            .map(|c| {
                s.spawn(move || {
                    let mut t = Tensor::from_slice(c.device(), &[1.0f32; 6], &[6]).unwrap();
                    c.all_reduce(&mut t, ReduceOp::Sum).expect_err("the device outlasts the deadline").to_string()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let on_device = errors.iter().find(|e| e.contains("waiting for its device")).expect("no rank waited on its device");
    assert!(on_device.contains("What to do: this rank's device did not finish"), "{on_device}");
    assert!(!on_device.contains("never reached"), "{on_device}");
}
