//! What a rank hears when the ranks' parameter sets differ (every rank: `Mismatch`, naming the
//! first difference, promptly), when a rank rejects its own set, when a gradient is wrong,
//! and when the communicator fails mid-step.

use std::time::{Duration, Instant};

use ruccl::grad::{GradientSync, ParamSpec, SyncConfig};
use ruccl::{DType, ErrorKind, ReduceOp, Tensor};

use crate::on_ranks;

fn f32s(shape: &[usize]) -> ParamSpec {
    ParamSpec::new(DType::F32, shape)
}

/// Builds a sync on 3 ranks, rank 2 with `odd` (ids, config); every rank's error message.
fn build_with_odd_rank(odd: Vec<(&'static str, ParamSpec)>, odd_config: SyncConfig) -> Vec<(ErrorKind, String)> {
    let start = Instant::now();
    let got = on_ranks(3, |comm| {
        let (set, config) = if comm.rank() == 2 {
            (odd.clone(), odd_config)
        } else {
            (vec![("a", f32s(&[2])), ("b", f32s(&[3]))], SyncConfig::default())
        };
        let e = GradientSync::with_config(&comm, set, config).unwrap_err();
        (e.kind(), e.to_string())
    });
    assert!(start.elapsed() < Duration::from_secs(10), "the ranks waited out a deadline");
    got
}

#[test]
fn differing_parameter_sets_are_a_mismatch_naming_the_first_difference() {
    let base = SyncConfig::default();
    type Case = (Vec<(&'static str, ParamSpec)>, SyncConfig, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![("a", f32s(&[2])), ("b", f32s(&[1, 3]))],
            base,
            "parameter #1 in id order is `b` [3] f32 on rank 0 but `b` [1, 3] f32 on rank 2",
        ),
        (
            vec![("b", f32s(&[3])), ("a", ParamSpec::new(DType::F16, &[2]))],
            base,
            "is `a` [2] f32 on rank 0 but `a` [2] f16 on rank 2",
        ),
        (
            vec![("b", f32s(&[3]))],
            base,
            "rank 0 has parameter `a` [2] f32 (parameter #0 in id order), which rank 2 does not have",
        ),
        (vec![("a", f32s(&[2])), ("b", f32s(&[3])), ("c", f32s(&[1]))], base, "rank 2 has parameter `c` [1] f32"),
        (
            vec![("a", f32s(&[2])), ("b", f32s(&[3]))],
            base.with_bucket_bytes(64),
            "the bucket size is 26214400 bytes on rank 0 but 64 bytes on rank 2",
        ),
        (
            vec![("a", f32s(&[2])), ("b", f32s(&[3]))],
            base.with_op(ReduceOp::Sum),
            "the reduce op is avg on rank 0 but sum on rank 2",
        ),
    ];
    for (odd, config, want) in cases {
        for (rank, (kind, msg)) in build_with_odd_rank(odd, config).into_iter().enumerate() {
            assert_eq!(kind, ErrorKind::Mismatch, "rank {rank}: {msg}");
            assert!(msg.contains(want), "rank {rank}: {msg}\nwanted: {want}");
            assert!(msg.contains(&format!("rank {rank}: GradientSync::new")), "rank {rank}: {msg}");
            let peer = if rank == 2 { 0 } else { 2 };
            assert!(msg.contains(&format!("[peer: rank {peer}]")), "rank {rank}: {msg}");
        }
    }
}

#[test]
fn a_rank_that_rejects_its_own_set_fails_its_peers_at_once() {
    let got = build_with_odd_rank(vec![("a", f32s(&[2])), ("a", f32s(&[3]))], SyncConfig::default());
    assert_eq!(got[2].0, ErrorKind::InvalidArgument, "{}", got[2].1);
    assert!(got[2].1.contains("parameter id a appears twice"), "{}", got[2].1);
    for (kind, msg) in &got[..2] {
        assert_eq!(*kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains("rank 2 rejected its own parameter set: parameter id a appears twice"), "{msg}");
    }
}

/// A bucket's all_reduce that meets another call on a peer (here the user's own all_reduce
/// of the same size): the error names `GradientSync::wait` as the call and says which bucket.
#[test]
fn a_bucket_that_meets_another_call_is_named() {
    let got = on_ranks(2, |comm| {
        let dev = *comm.device();
        let mut sync = GradientSync::new(&comm, [("w", f32s(&[2]))]).unwrap();
        let mut t = Tensor::from_slice(&dev, &[1.0f32, 2.0], &[2]).unwrap();
        if comm.rank() == 0 { sync.all_reduce([("w", t)]).map(|_| ()) } else { comm.all_reduce(&mut t, ReduceOp::Sum) }
    });
    let e = got[0].as_ref().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Mismatch, "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with("rank 0: GradientSync::wait"), "{msg}");
    assert!(msg.contains("in all_reduce(") && msg.contains("the all_reduce of bucket 0 of 1"), "{msg}");
    assert_eq!(got[1].as_ref().unwrap_err().kind(), ErrorKind::Mismatch);
}

#[test]
fn a_bad_gradient_is_rejected_and_the_step_goes_on() {
    let got = on_ranks(2, |comm| {
        let dev = *comm.device();
        let mut sync = GradientSync::new(&comm, [("w", f32s(&[2]))]).unwrap();
        let t = |v: &[f32], shape: &[usize]| Tensor::from_slice(&dev, v, shape).unwrap();
        let mut errors = vec![
            sync.push(&"nope", t(&[1.0, 2.0], &[2])).unwrap_err(),
            sync.push(&"w", t(&[1.0, 2.0], &[1, 2])).unwrap_err(),
            sync.push(&"w", Tensor::from_slice(&dev, &[1.0f64, 2.0], &[2]).unwrap()).unwrap_err(),
        ];
        sync.push(&"w", t(&[1.0, 2.0 + comm.rank() as f32], &[2])).unwrap();
        errors.push(sync.push(&"w", t(&[1.0, 2.0], &[2])).unwrap_err());
        let out = sync.wait().unwrap();
        (errors, out[0].1.to_vec::<f32>().unwrap())
    });
    for (rank, (errors, out)) in got.into_iter().enumerate() {
        assert_eq!(out, vec![1.0, 2.5]);
        let wants = [
            "parameter nope is not one of the 1 this sync was built for",
            "the gradient of parameter w is [1, 2] f32, but the parameter set says [2] f32",
            "the gradient of parameter w is [2] f64, but the parameter set says [2] f32",
            "the gradient of parameter w was already handed over this step",
        ];
        for (k, (e, want)) in errors.iter().zip(wants).enumerate() {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains(want), "{e}");
            assert!(e.to_string().starts_with(&format!("rank {rank}: GradientSync::push(")), "{e}");
            // What the step does without it (its peers are not told): said of a refused gradient
            // of a parameter that has none yet, not of an unknown id or a second gradient.
            let zero = e.to_string().contains("it counts as a zero gradient on this rank this step");
            assert_eq!(zero, k == 1 || k == 2, "{e}");
        }
    }
}

/// Two parameters whose gradients share one buffer: the second is refused, naming the
/// first, whether the gradients are large (reduced where they lie: the buffer was summed
/// twice, 4.0 where 2.0 was due) or small (packed into a bucket).
#[test]
fn gradients_sharing_memory_are_refused() {
    for n in [4usize, 1 << 19] {
        let got = on_ranks(2, |comm| {
            let dev = *comm.device();
            let mut sync = GradientSync::new(&comm, [("a", f32s(&[n])), ("b", f32s(&[n]))]).unwrap();
            let g = Tensor::from_slice(&dev, &vec![1.0f32; n], &[n]).unwrap();
            let alias = Tensor::from_buffer(&dev, g.buffer().clone(), ruccl::DType::F32, &[n]).unwrap();
            sync.push(&"a", g).unwrap();
            let e = sync.push(&"b", alias).unwrap_err();
            let out = sync.wait().unwrap();
            (e, out[0].1.to_vec::<f32>().unwrap()[0])
        });
        for (e, a) in got {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(
                e.to_string().contains("the gradient of parameter b shares memory with the gradient of parameter a"),
                "{e}"
            );
            assert_eq!(a, 1.0, "the mean of a (n = {n})");
        }
    }
}

#[test]
fn a_failed_communicator_ends_the_step_and_every_later_one() {
    on_ranks(2, |comm| {
        let dev = *comm.device();
        let mut sync = GradientSync::new(&comm, [("a", f32s(&[1])), ("b", f32s(&[1]))]).unwrap();
        comm.abort();
        let t = || Tensor::from_slice(&dev, &[1.0f32], &[1]).unwrap();
        // Bucket "a"+"b" starts only once both are in; whichever call starts it fails.
        let first = sync.push(&"a", t()).and_then(|()| sync.push(&"b", t()));
        let e = first.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        let again = sync.all_reduce([("a", t()), ("b", t())]).unwrap_err();
        assert_eq!(again.kind(), ErrorKind::Aborted, "{again}");
    });
}

/// A gradient that a non-blocking op not yet done still writes is refused (the sync read the
/// stale input, then wrote its result over that op's at `wait`), naming the op; pushing it
/// again once the op is done works.
#[test]
fn a_gradient_a_pending_op_writes_is_refused() {
    let got = on_ranks(2, |comm| {
        let dev = *comm.device();
        let mut sync = GradientSync::new(&comm, [("w", f32s(&[4])), ("x", f32s(&[4]))]).unwrap();
        let g = Tensor::from_slice(&dev, &[1.0f32; 4], &[4]).unwrap();
        if comm.rank() == 1 {
            // Rank 0's all_reduce stays pending meanwhile.
            std::thread::sleep(Duration::from_millis(300));
        }
        let work = comm.all_reduce_async(&g, ReduceOp::Sum).unwrap();
        let refused = if comm.rank() == 0 {
            let view = Tensor::from_buffer(&dev, g.buffer().clone(), DType::F32, &[4]).unwrap();
            Some(sync.push(&"w", view).unwrap_err())
        } else {
            None
        };
        work.wait().unwrap();
        let reduced = g.to_vec::<f32>().unwrap();
        sync.push(&"w", g).unwrap();
        sync.push(&"x", Tensor::from_slice(&dev, &[3.0f32; 4], &[4]).unwrap()).unwrap();
        let out = sync.wait().unwrap();
        (refused, reduced, out[0].1.to_vec::<f32>().unwrap())
    });
    for (rank, (refused, reduced, w)) in got.into_iter().enumerate() {
        assert_eq!((reduced, w), (vec![2.0; 4], vec![2.0; 4]), "rank {rank}");
        if let Some(e) = refused {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("written by all_reduce(sum, 4 x f32)"), "{e}");
            assert!(e.to_string().starts_with("rank 0: GradientSync::push(w)"), "{e}");
        }
    }
}
