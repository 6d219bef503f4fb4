//! Every error of the peer API, reported on every peer and never a hang. After an error of
//! the agreement step, the same registration goes on working.

use std::time::{Duration, Instant};

use ruccl::api::{
    CollectiveConfig, ReduceOperation, Strategy, all_gather, all_reduce, barrier, broadcast, finish_collective, reduce,
    reduce_scatter, register,
};
use ruccl::{ErrorKind, HostDevice, ReduceOp, Tensor};

use crate::{HostLike, Peer, Tb, config, ids_for, on_threads, reduced, session, tensor, values};

/// The registration still works: one all_reduce gives the exact sum.
fn still_usable<B: HostLike>(p: &Peer) {
    let t = all_reduce::<B>(p.id, tensor(&p.dev, &[p.rank as f32, 1.0], &[2]), ReduceOp::Sum).unwrap();
    assert_eq!(values(&t), vec![(p.n * (p.n - 1) / 2) as f32, p.n as f32]);
}

fn kind_and_message<T>(r: ruccl::Result<T>) -> (ErrorKind, String) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => (e.kind(), e.to_string()),
    }
}

#[test]
fn shapes_with_the_same_element_count_are_a_mismatch_on_every_peer() {
    for n in 2..=6 {
        session::<Tb<20>, _>(&ids_for(n, 20), &config(n), 20, |p| {
            let shape = if p.rank == n - 1 { [3, 2] } else { [2, 3] };
            let (kind, msg) =
                kind_and_message(all_reduce::<Tb<20>>(p.id, tensor(&p.dev, &[1.0; 6], &shape), ReduceOp::Sum));
            assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
            assert!(msg.contains("different shapes") && msg.contains("[3, 2] on peer"), "{msg}");
            still_usable::<Tb<20>>(p);
        });
    }
}

#[test]
fn dtypes_reduce_ops_roots_and_operations_must_agree() {
    let n = 4;
    session::<Tb<21>, _>(&ids_for(n, 21), &config(n), 21, |p| {
        let odd = p.rank == 2;
        // dtype
        let t =
            if odd { Tensor::from_slice(&p.dev, &[1.0f64; 3], &[3]).unwrap() } else { tensor(&p.dev, &[1.0; 3], &[3]) };
        let (kind, msg) = kind_and_message(all_reduce::<Tb<21>>(p.id, t, ReduceOp::Sum));
        assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains("different dtypes"), "{msg}");
        // reduce op
        let op = if odd { ReduceOperation::Mean } else { ReduceOperation::Sum };
        let (kind, msg) = kind_and_message(all_reduce::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1]), op));
        assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains("different reduce ops") && msg.contains("avg on peer"), "{msg}");
        // root
        let root = if odd { p.ids[1] } else { p.ids[0] };
        let (kind, msg) = kind_and_message(reduce::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum, root));
        assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains("different roots"), "{msg}");
        // operation
        let r = if odd {
            reduce_scatter::<Tb<21>>(p.id, tensor(&p.dev, &[1.0; 4], &[4]), ReduceOp::Sum).map(|_| ())
        } else {
            all_gather::<Tb<21>>(p.id, tensor(&p.dev, &[1.0], &[1])).map(|_| ())
        };
        let (kind, msg) = kind_and_message(r);
        assert_eq!(kind, ErrorKind::Mismatch, "{msg}");
        assert!(msg.contains("different operations") && msg.contains("reduce_scatter on peer"), "{msg}");
        let r = if odd { barrier::<Tb<21>>(p.id) } else { broadcast::<Tb<21>>(p.id, None).map(|_| ()) };
        assert_eq!(kind_and_message(r).0, ErrorKind::Mismatch);
        still_usable::<Tb<21>>(p);
    });
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
            let mine = (p.rank == n - 1).then(|| tensor(&p.dev, &[5.0, 6.0], &[2]));
            assert_eq!(values(&broadcast::<Tb<22>>(p.id, mine).unwrap()), vec![5.0, 6.0]);
            still_usable::<Tb<22>>(p);
        });
    }
}

#[test]
fn one_peers_bad_argument_fails_the_op_on_every_peer() {
    let n = 3;
    session::<Tb<23>, _>(&ids_for(n, 23), &config(n), 23, |p| {
        let bad = p.rank == 1;
        // A tensor on another device.
        let dev = if bad { HostDevice::new(999) } else { p.dev };
        let (kind, msg) = kind_and_message(all_reduce::<Tb<23>>(p.id, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        if bad {
            assert!(msg.contains("ordinal: 999") && msg.contains("registered"), "{msg}");
        } else {
            assert!(msg.contains(&format!("the arguments of peer {} were rejected", p.ids[1])), "{msg}");
        }
        // An element type the backend does not take.
        let t = if bad { Tensor::from_slice(&p.dev, &[1i32], &[1]).unwrap() } else { tensor(&p.dev, &[1.0], &[1]) };
        let (kind, msg) = kind_and_message(all_reduce::<Tb<23>>(p.id, t, ReduceOp::Sum));
        assert_eq!(kind, if bad { ErrorKind::Unsupported } else { ErrorKind::InvalidArgument }, "{msg}");
        // A root that is not registered (on every peer).
        let (kind, msg) =
            kind_and_message(reduce::<Tb<23>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum, 12345u32.into()));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        assert!(msg.contains("root peer 12345 is not one of the registered peers"), "{msg}");
        // A first dimension reduce_scatter cannot split.
        let (kind, msg) =
            kind_and_message(reduce_scatter::<Tb<23>>(p.id, tensor(&p.dev, &[1.0; 4], &[4]), ReduceOp::Sum));
        assert_eq!(kind, ErrorKind::InvalidArgument, "{msg}");
        // A non-finite PreMulSum scalar on one peer.
        let op = if bad { ReduceOp::PreMulSum(f64::NAN) } else { ReduceOp::PreMulSum(1.0) };
        assert_eq!(
            kind_and_message(all_reduce::<Tb<23>>(p.id, tensor(&p.dev, &[1.0], &[1]), op)).0,
            ErrorKind::InvalidArgument
        );
        still_usable::<Tb<23>>(p);
    });
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
fn configs_are_validated_and_multi_node_is_unsupported() {
    let dev = HostDevice::default();
    let peer = 0u32.into();
    let multi = CollectiveConfig::default()
        .with_num_nodes(2)
        .with_global_address("10.0.0.1:3000")
        .with_node_address("10.0.0.2:3001")
        .with_data_service_port(3002);
    let (kind, msg) = kind_and_message(register::<Tb<28>>(peer, dev, multi.clone()));
    assert_eq!(kind, ErrorKind::Unsupported, "{msg}");
    assert!(msg.contains("2 nodes"), "{msg}");
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
