//! Every error of the peer API, reported on every peer and never a hang. An error inside an
//! operation aborts the registration (as a failed collective aborts a communicator in the
//! core): later operations fail at once until the peers finish and register again. Only
//! broadcast's sender count is found by every peer alike and leaves the registration usable.

use std::time::{Duration, Instant};

use ruccl::api::{
    CollectiveConfig, PeerId, ReduceOperation, Strategy, all_gather, all_reduce, barrier, broadcast, finish_collective,
    reduce, reduce_scatter, register,
};
use ruccl::{ErrorKind, HostDevice, ReduceOp, Tensor};

use crate::{HostLike, Peer, Tb, config, ids_for, on_threads, reduced, session, tensor, values};

/// The registration still works: one all_reduce gives the exact sum.
fn still_usable<B: HostLike>(p: &Peer) {
    let t = all_reduce::<B>(p.id, tensor(&p.dev, &[p.rank as f32, 1.0], &[2]), ReduceOp::Sum).unwrap();
    assert_eq!(values(&t), vec![(p.n * (p.n - 1) / 2) as f32, p.n as f32]);
}

/// The registration was aborted: the next operation fails at once.
fn aborted<B: HostLike>(p: &Peer) {
    let start = Instant::now();
    let (kind, msg) = kind_and_message(barrier::<B>(p.id));
    assert!(matches!(kind, ErrorKind::Aborted | ErrorKind::Mismatch | ErrorKind::InvalidArgument), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

fn kind_and_message<T>(r: ruccl::Result<T>) -> (ErrorKind, String) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => (e.kind(), e.to_string()),
    }
}

/// Runs one disagreeing call per peer (in a fresh session of `n` peers) and returns what each
/// peer reported, in rank order. A peer whose own part of the operation completed before a
/// peer found the disagreement reports it from its next call, as in the core.
fn disagree<B: HostLike>(
    n: usize,
    seed: u64,
    call: impl Fn(&Peer) -> ruccl::Result<()> + Sync,
) -> Vec<(ErrorKind, String)> {
    let start = Instant::now();
    let out = session::<B, _>(&ids_for(n, seed), &config(n), seed, |p| match call(p) {
        Err(e) => (e.kind(), e.to_string()),
        Ok(()) => kind_and_message(barrier::<B>(p.id)),
    });
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    out
}

fn all_mismatch(got: &[(ErrorKind, String)], needle: &str) {
    for (kind, msg) in got {
        assert_eq!(*kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
}

#[test]
fn shapes_with_the_same_element_count_are_a_mismatch_on_every_peer() {
    for n in 2..=6 {
        let got = disagree::<Tb<20>>(n, 20 + n as u64, |p| {
            let shape = if p.rank == n - 1 { [3, 2] } else { [2, 3] };
            all_reduce::<Tb<20>>(p.id, tensor(&p.dev, &[1.0; 6], &shape), ReduceOp::Sum).map(|_| ())
        });
        // Both sides' shapes, not digests.
        all_mismatch(&got, "shape [3, 2]");
        all_mismatch(&got, "shape [2, 3]");
        // Each peer that reported it from the call says what it passed itself.
        assert!(got.iter().any(|(_, m)| m.contains("[3, 2] f32 tensor")), "{got:?}");
    }
}

#[test]
fn strategies_are_part_of_what_peers_agree_on() {
    // A registration whose peers pass different strategies is a `Mismatch` on every peer at
    // registration (the config names them); the core's fingerprint, which carries each op's
    // strategy, is checked in `api::tests`.
    let n = 4;
    let ids = ids_for(n, 32);
    let errs = on_threads(&ids, 32, |p| {
        let s = if p.rank == 1 { Strategy::Tree(2) } else { Strategy::Ring };
        kind_and_message(register::<Tb<32>>(p.id, p.dev, config(n).with_local_reduce_strategy(s)))
    });
    for (peer, (kind, msg)) in errs {
        assert_eq!(kind, ErrorKind::Mismatch, "peer {peer}: {msg}");
        assert!(msg.contains("local reduce strategy"), "{msg}");
    }
}

#[test]
fn dtypes_reduce_ops_roots_and_operations_must_agree() {
    let n = 4;
    let odd = |p: &Peer| p.rank == 2;
    let got = disagree::<Tb<21>>(n, 21, |p| {
        let t = if odd(p) {
            Tensor::from_slice(&p.dev, &[1.0f64; 3], &[3]).unwrap()
        } else {
            tensor(&p.dev, &[1.0; 3], &[3])
        };
        all_reduce::<Tb<21>>(p.id, t, ReduceOp::Sum).map(|_| ())
    });
    all_mismatch(&got, "x f64");
    let got = disagree::<Tb<21>>(n, 21, |p| {
        let op = if odd(p) { ReduceOperation::Mean } else { ReduceOperation::Sum };
        all_reduce::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1]), op).map(|_| ())
    });
    all_mismatch(&got, "all_reduce(avg");
    let got = disagree::<Tb<21>>(n, 21, |p| {
        let root = if odd(p) { p.ids[1] } else { p.ids[0] };
        reduce::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum, root).map(|_| ())
    });
    all_mismatch(&got, "root 1");
    let got = disagree::<Tb<21>>(n, 21, |p| {
        if odd(p) {
            reduce_scatter::<Tb<21>>(p.id, tensor(&p.dev, &[1.0; 4], &[4]), ReduceOp::Sum).map(|_| ())
        } else {
            all_gather::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1])).map(|_| ())
        }
    });
    all_mismatch(&got, "reduce_scatter(sum");
    // Broadcast starts with an all_gather of its metadata: a barrier meets that.
    let got = disagree::<Tb<21>>(n, 21, |p| {
        if odd(p) { barrier::<Tb<21>>(p.id) } else { broadcast::<Tb<21>>(p.id, None).map(|_| ()) }
    });
    all_mismatch(&got, "barrier");
    // Nor does an all_reduce: its peers read the broadcast's step as the broadcast's, not as
    // an all_gather no peer called.
    let got = disagree::<Tb<21>>(n, 21, |p| {
        if odd(p) {
            broadcast::<Tb<21>>(p.id, None).map(|_| ())
        } else {
            all_reduce::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum).map(|_| ())
        }
    });
    all_mismatch(&got, "in the peer API's broadcast");
}

#[test]
fn broadcast_needs_exactly_one_sender() {
    for n in 1..=5 {
        session::<Tb<22>, _>(&ids_for(n, 22), &config(n), 22, |p| {
            let (kind, msg) = kind_and_message(broadcast::<Tb<22>>(p.id, None));
            assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
            assert!(msg.contains("no peer passed Some(tensor)"), "{msg}");
            if n > 1 {
                let mine = (p.rank != 1 || n == 2).then(|| tensor(&p.dev, &[1.0], &[1]));
                let (kind, msg) = kind_and_message(broadcast::<Tb<22>>(p.id, mine));
                assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
                assert!(msg.contains("each passed Some(tensor)"), "{msg}");
            }
            // Every peer saw the same records, so nothing was aborted.
            let mine = (p.rank == n - 1).then(|| tensor(&p.dev, &[5.0, 6.0], &[2]));
            assert_eq!(values(&broadcast::<Tb<22>>(p.id, mine).unwrap()), vec![5.0, 6.0]);
            still_usable::<Tb<22>>(p);
        });
    }
}

/// Peer rank 1 makes a call its own checks reject; the others make a good one. Every peer
/// reports promptly: the bad one its own error, the others `InvalidArgument` naming it. The
/// registration is aborted afterwards.
fn one_bad_peer<B: HostLike>(seed: u64, own: ErrorKind, call: impl Fn(&Peer, bool) -> ruccl::Result<()> + Sync) {
    let n = 3;
    let start = Instant::now();
    session::<B, _>(&ids_for(n, seed), &config(n), seed, |p| {
        let bad = p.rank == 1;
        let (kind, msg) = kind_and_message(call(p, bad));
        if bad {
            assert_eq!(kind, own, "{msg}");
        } else {
            assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
            assert!(msg.contains(&format!("peer {} (rank 1) could not take part", p.ids[1])), "{msg}");
            // The fix is on the bad peer: this one is not told to fix its arguments.
            assert!(msg.contains("nothing is wrong with this peer's call"), "{msg}");
            assert!(!msg.contains("What to do: fix the arguments"), "{msg}");
        }
        aborted::<B>(p);
    });
    // The deadline is 30 s: nobody waited for it.
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
}

#[test]
fn one_peers_bad_argument_fails_every_peer_promptly_and_aborts_the_registration() {
    // A tensor on another device.
    one_bad_peer::<Tb<23>>(23, ErrorKind::InvalidArgument, |p, bad| {
        let dev = if bad { HostDevice::new(999) } else { p.dev };
        all_reduce::<Tb<23>>(p.id, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum).map(|_| ())
    });
    // An element type the backend does not take.
    one_bad_peer::<Tb<23>>(24, ErrorKind::Unsupported, |p, bad| {
        let t = if bad { Tensor::from_slice(&p.dev, &[1i32], &[1]).unwrap() } else { tensor(&p.dev, &[1.0], &[1]) };
        all_reduce::<Tb<23>>(p.id, t, ReduceOp::Sum).map(|_| ())
    });
    // A non-finite PreMulSum scalar.
    one_bad_peer::<Tb<23>>(25, ErrorKind::InvalidArgument, |p, bad| {
        let op = if bad { ReduceOp::PreMulSum(f64::NAN) } else { ReduceOp::PreMulSum(1.0) };
        all_reduce::<Tb<23>>(p.id, tensor(&p.dev, &[1.0], &[1]), op).map(|_| ())
    });
    // A root that is not registered, on one peer (the others name a good one).
    one_bad_peer::<Tb<23>>(26, ErrorKind::InvalidArgument, |p, bad| {
        let root = if bad { PeerId::new(12345) } else { p.ids[0] };
        reduce::<Tb<23>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum, root).map(|_| ())
    });
    // A broadcast sender whose tensor is on another device, while the others receive.
    one_bad_peer::<Tb<23>>(27, ErrorKind::InvalidArgument, |p, bad| {
        let mine = bad.then(|| tensor(&HostDevice::new(999), &[1.0], &[1]));
        broadcast::<Tb<23>>(p.id, mine).map(|_| ())
    });
}

#[test]
fn a_bad_argument_on_every_peer_is_each_ones_own_error() {
    let n = 3;
    for (seed, what) in
        [(1u64, "root peer 12345 is not one of the registered peers"), (2, "splits the first dimension")]
    {
        session::<Tb<33>, _>(&ids_for(n, seed), &config(n), seed, |p| {
            let r = if seed == 1 {
                reduce::<Tb<33>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum, 12345u32.into()).map(|_| ())
            } else {
                reduce_scatter::<Tb<33>>(p.id, tensor(&p.dev, &[1.0; 4], &[4]), ReduceOp::Sum).map(|_| ())
            };
            let (kind, msg) = kind_and_message(r);
            assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
            // Its own message, or (if another peer failed first) that peer's, relayed.
            assert!(msg.contains(what), "{msg}");
            aborted::<Tb<33>>(p);
        });
    }
}

#[test]
fn operations_and_finish_before_register_fail_at_once() {
    let peer = 7u32.into();
    let dev = HostDevice::default();
    let start = Instant::now();
    let errs = [
        kind_and_message(all_reduce::<Tb<24>>(peer, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum)),
        kind_and_message(reduce::<Tb<24>>(peer, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum, peer)),
        kind_and_message(broadcast::<Tb<24>>(peer, None)),
        kind_and_message(all_gather::<Tb<24>>(peer, tensor(&dev, &[1.0], &[1]))),
        kind_and_message(reduce_scatter::<Tb<24>>(peer, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum)),
        kind_and_message(barrier::<Tb<24>>(peer)),
        kind_and_message(finish_collective::<Tb<24>>(peer)),
    ];
    for (kind, msg) in errs {
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains("peer 7 is not registered"), "{msg}");
    }
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[test]
fn registering_twice_is_rejected_and_the_first_registration_stands() {
    let n = 3;
    let cfg = config(n);
    let ids = ids_for(n, 25);
    on_threads(&ids, 25, |p| {
        let r = register::<Tb<25>>(p.id, p.dev, cfg.clone());
        if p.rank == 0 {
            // While the others may still be arriving, and again once the session is formed.
            let (kind, msg) = kind_and_message(register::<Tb<25>>(p.id, p.dev, cfg.clone()));
            assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
            assert!(msg.contains("already registered"), "{msg}");
        }
        r.unwrap();
        let (kind, msg) = kind_and_message(register::<Tb<25>>(p.id, p.dev, cfg.clone()));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains("call finish_collective"), "{msg}");
        still_usable::<Tb<25>>(p);
        finish_collective::<Tb<25>>(p.id).unwrap();
    });
}

#[test]
fn a_peer_registering_while_another_thread_waits_for_it_is_rejected() {
    let cfg = config(2);
    let dev = HostDevice::default();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| register::<Tb<26>>(0u32.into(), dev, cfg.clone()));
        std::thread::sleep(Duration::from_millis(50));
        let (kind, msg) = kind_and_message(register::<Tb<26>>(0u32.into(), dev, cfg.clone()));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains("waiting for the other peers"), "{msg}");
        register::<Tb<26>>(1u32.into(), dev, cfg.clone()).unwrap();
        waiting.join().unwrap().unwrap();
    });
    finish_collective::<Tb<26>>(0u32.into()).unwrap();
    finish_collective::<Tb<26>>(1u32.into()).unwrap();
}

#[test]
fn different_configs_fail_every_peer_of_the_round() {
    for (n, odd) in [(2, 0), (3, 2), (5, 1), (4, 3)] {
        let base = config(n).with_local_all_reduce_strategy(Strategy::Ring);
        let ids = ids_for(n, 27 + n as u64);
        let errs = on_threads(&ids, n as u64, |p| {
            let cfg = match p.rank == odd {
                true if n % 2 == 0 => base.clone().with_local_all_reduce_strategy(Strategy::Tree(2)),
                true => base.clone().with_num_devices(n + 1),
                false => base.clone(),
            };
            kind_and_message(register::<Tb<27>>(p.id, p.dev, cfg))
        });
        for (peer, (kind, msg)) in errs {
            assert_eq!(kind, ErrorKind::Mismatch, "peer {peer}: {msg}");
            assert!(msg.contains("different CollectiveConfigs"), "{msg}");
            assert!(msg.contains(if n % 2 == 0 { "local all_reduce strategy" } else { "num_devices" }), "{msg}");
        }
        // Every peer heard about the failure, so the next round starts afresh.
        let sums = session::<Tb<27>, _>(&ids, &base, 27, |p| {
            values(&all_reduce::<Tb<27>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum).unwrap())
        });
        assert_eq!(sums, vec![vec![n as f32]; n]);
    }
}

#[test]
fn configs_are_validated_and_a_missing_orchestrator_is_a_timeout() {
    let dev = HostDevice::default();
    let peer = 0u32.into();
    // Nothing listens there once the listener is dropped.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let multi = CollectiveConfig::default()
        .with_num_nodes(2)
        .with_global_address(nobody.to_string())
        .with_node_address("127.0.0.1")
        .with_data_service_port(ruccl::launch::free_port().expect("a free port"))
        .with_timeout(Duration::from_millis(300));
    let start = Instant::now();
    let (kind, msg) = kind_and_message(register::<Tb<28>>(peer, dev, multi.clone()));
    assert_eq!(kind, ErrorKind::Timeout, "{msg}");
    assert!(msg.contains(&format!("no orchestrator answered at global_address {nobody}")), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    // A global_address that is not a host:port says which part is wrong, and how to fix it.
    for (global, says) in [("127.0.0.1", "has no port"), ("nosuchhost.invalid:1", "does not resolve")] {
        let (kind, msg) = kind_and_message(register::<Tb<28>>(peer, dev, multi.clone().with_global_address(global)));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains(says) && msg.contains("the orchestrator's host:port"), "{msg}");
        assert!(!msg.contains("same CollectiveConfig"), "{msg}");
    }
    let partial = CollectiveConfig::default().with_num_nodes(2);
    let (kind, msg) = kind_and_message(register::<Tb<28>>(peer, dev, partial));
    assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains("num_nodes is set and global_address, node_address, data_service_port are not"), "{msg}");
    let (kind, msg) = kind_and_message(register::<Tb<28>>(peer, dev, CollectiveConfig::default().with_num_devices(0)));
    assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
    let tree1 = CollectiveConfig::default().with_local_broadcast_strategy(Strategy::Tree(1));
    assert!(kind_and_message(register::<Tb<28>>(peer, dev, tree1)).1.contains("arity 1"));
    // One node with every multi-node setting is fine: this process is the whole job.
    register::<Tb<28>>(peer, dev, multi.with_num_nodes(1)).unwrap();
    finish_collective::<Tb<28>>(peer).unwrap();
}

#[test]
fn a_peer_that_never_registers_is_named_in_a_timeout() {
    let cfg = config(3).with_timeout(Duration::from_millis(300));
    let start = Instant::now();
    let errs = on_threads(&[0, 2], 29, |p| kind_and_message(register::<Tb<29>>(p.id, p.dev, cfg.clone())));
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    for (_, (kind, msg)) in errs {
        assert_eq!(kind, ErrorKind::Timeout, "{msg}");
        assert!(msg.contains("peer(s) 1 never registered"), "{msg}");
    }
    // The room is empty again: a full set registers.
    session::<Tb<29>, _>(&[0, 1, 2], &config(3), 29, |p| still_usable::<Tb<29>>(p));
}

#[test]
fn a_peer_that_never_calls_makes_the_others_time_out() {
    let n = 3;
    let cfg = config(n).with_timeout(Duration::from_millis(400));
    let start = Instant::now();
    let errs = session::<Tb<30>, _>(&ids_for(n, 30), &cfg, 30, |p| {
        still_usable::<Tb<30>>(p);
        if p.rank == 0 {
            // Registered, but never calls: the others must give up at their deadline.
            std::thread::sleep(Duration::from_millis(1200));
            return None;
        }
        Some(kind_and_message(all_reduce::<Tb<30>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum)))
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for (kind, msg) in errs.into_iter().flatten() {
        // The peer that gave up first aborts the communicator, so the other may see that.
        assert!(matches!(kind, ErrorKind::Timeout | ErrorKind::Aborted), "{msg}");
        assert!(msg.contains("timeout"), "{msg}");
        // The advice is the peer API's (register again), not the core's (a new communicator).
        assert!(msg.contains("register again") && !msg.contains("CommConfig"), "{msg}");
        assert!(kind != ErrorKind::Timeout || msg.contains("CollectiveConfig::with_timeout"), "{msg}");
    }
}

#[test]
fn mean_of_integers_valued_floats_is_exact() {
    let n = 4;
    session::<Tb<31>, _>(&ids_for(n, 31), &config(n), 31, |p| {
        let got = all_reduce::<Tb<31>>(p.id, tensor(&p.dev, &crate::input(p.rank, 8, 2), &[8]), ReduceOperation::Mean);
        assert_eq!(values(&got.unwrap()), reduced(n, 8, 2, true));
    });
}

/// An operation made while another thread's operation on the same peer is in flight is
/// refused with `InvalidArgument`, and aborts the registration on every peer: the two
/// threads' calls were serialised in a different order on each peer, pairing the data of
/// different calls (wrong sums, every call `Ok`).
#[test]
fn a_second_thread_on_one_peer_is_refused_and_aborts() {
    let ids = ids_for(2, 77);
    let got = session::<Tb<77>, _>(&ids, &config(2), 77, |p| {
        let p = &*p;
        let one = || all_reduce::<Tb<77>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum).map(|_| ());
        if p.rank == 0 {
            std::thread::scope(|s| {
                let first = s.spawn(one);
                // The all_reduce waits for the other peer, which comes only later.
                std::thread::sleep(Duration::from_millis(100));
                let second = kind_and_message(barrier::<Tb<77>>(p.id));
                assert_eq!(second.0, ErrorKind::InvalidArgument, "{}", second.1);
                assert!(second.1.contains("while another thread's operation on it was in flight"), "{}", second.1);
                first.join().unwrap()
            })
        } else {
            std::thread::sleep(Duration::from_millis(300));
            one()
        }
    });
    for (rank, r) in got.iter().enumerate() {
        assert!(r.is_err(), "peer of rank {rank}: the registration must be aborted: {r:?}");
    }
}
