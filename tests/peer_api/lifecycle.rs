//! Sessions end and begin again: `finish_collective` ends a peer's session cleanly, the same
//! ids register again, and `reset_collective` wakes every blocked caller with an error.

use std::time::{Duration, Instant};

use ruccl::api::{ReduceOperation, Strategy, all_reduce, barrier, finish_collective, register, reset_collective};
use ruccl::{ErrorKind, ReduceOp};

use crate::{Tb, config, ids_for, on_threads, reduced, session, tensor, values};

#[test]
fn the_same_ids_register_again_after_every_peer_finished() {
    let n = 4;
    let ids = ids_for(n, 40);
    let strategies = [Strategy::Ring, Strategy::Tree(2), Strategy::Centralized, Strategy::Auto];
    for (round, s) in strategies.into_iter().enumerate() {
        let cfg = config(n).with_local_all_reduce_strategy(s);
        let got = session::<Tb<40>, _>(&ids, &cfg, round as u64, |p| {
            let salt = round as u64;
            let t =
                all_reduce::<Tb<40>>(p.id, tensor(&p.dev, &crate::input(p.rank, 7, salt), &[7]), ReduceOperation::Mean);
            values(&t.unwrap())
        });
        assert_eq!(got, vec![reduced(n, 7, round as u64, true); n], "round {round} ({s})");
    }
}

#[test]
fn operations_after_finish_are_rejected() {
    let n = 2;
    let ids = ids_for(n, 41);
    let ids_now: Vec<_> = session::<Tb<41>, _>(&ids, &config(n), 41, |p| p.id);
    for id in ids_now {
        let err = barrier::<Tb<41>>(id).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(finish_collective::<Tb<41>>(id).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
}

/// A thread remembers the registration it used last, so its operations skip the registry's
/// locks; a finished registration must still be refused on that same thread, and a new
/// registration of the same id used instead of the old one.
#[test]
fn the_thread_that_finished_a_peer_cannot_use_it_and_registers_it_again() {
    let ids = ids_for(2, 47);
    let outcomes = on_threads(&ids, 47, |p| {
        for round in 0..3 {
            register::<Tb<47>>(p.id, p.dev, config(2)).unwrap();
            let t = all_reduce::<Tb<47>>(p.id, tensor(&p.dev, &[round as f32 + p.rank as f32], &[1]), ReduceOp::Sum);
            assert_eq!(values(&t.unwrap()), vec![2.0 * round as f32 + 1.0], "round {round}");
            finish_collective::<Tb<47>>(p.id).unwrap();
            let err = barrier::<Tb<47>>(p.id).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(err.to_string().contains("not registered"), "{err}");
        }
    });
    assert_eq!(outcomes.len(), 2);
}

/// The same, while another thread's operation on the finished peer still holds its
/// registration: the remembered handle is still alive, but finished, so it is not used.
#[test]
fn a_finished_peer_stays_finished_while_another_thread_uses_it() {
    let ids = ids_for(2, 48);
    let cfg = config(2).with_timeout(Duration::from_secs(5));
    let (go, gone) = std::sync::mpsc::channel::<()>();
    let gone = std::sync::Mutex::new(gone);
    let outcomes = on_threads(&ids, 48, |p| {
        register::<Tb<48>>(p.id, p.dev, cfg.clone()).unwrap();
        barrier::<Tb<48>>(p.id).unwrap();
        if p.rank == 1 {
            // Never waits past the timeout: a failure on peer 0 drops `go`.
            let _ = gone.lock().unwrap().recv_timeout(Duration::from_secs(5));
            let t = all_reduce::<Tb<48>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum);
            finish_collective::<Tb<48>>(p.id).unwrap();
            return values(&t.unwrap());
        }
        let (id, dev) = (p.id, p.dev);
        std::thread::scope(|s| {
            // This op waits for peer 1, which joins only after the checks below.
            let other = s.spawn(move || all_reduce::<Tb<48>>(id, tensor(&dev, &[1.0], &[1]), ReduceOp::Sum));
            std::thread::sleep(Duration::from_millis(100));
            finish_collective::<Tb<48>>(id).unwrap();
            let t0 = Instant::now();
            let r = barrier::<Tb<48>>(id);
            let took = t0.elapsed();
            go.send(()).unwrap();
            let err = r.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
            assert!(took < Duration::from_secs(2), "{took:?}");
            values(&other.join().unwrap().unwrap())
        })
    });
    assert!(outcomes.iter().all(|(_, v)| v == &vec![2.0]), "{outcomes:?}");
}

#[test]
fn a_peer_that_finished_early_makes_the_others_fail_not_hang() {
    let n = 3;
    let cfg = config(n).with_timeout(Duration::from_secs(20));
    let start = Instant::now();
    let outcomes = on_threads(&ids_for(n, 42), 42, |p| {
        register::<Tb<42>>(p.id, p.dev, cfg.clone()).unwrap();
        barrier::<Tb<42>>(p.id).unwrap();
        if p.rank == 0 {
            finish_collective::<Tb<42>>(p.id).unwrap();
            return None;
        }
        let r = all_reduce::<Tb<42>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum);
        finish_collective::<Tb<42>>(p.id).unwrap();
        Some(r.map(|_| ()).unwrap_err())
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for e in outcomes.into_iter().filter_map(|(_, e)| e) {
        assert!(matches!(e.kind(), ErrorKind::PeerLost | ErrorKind::Aborted), "{e}");
        let msg = e.to_string();
        assert!(msg.contains("register again") && !msg.contains("new communicator"), "{msg}");
    }
}

#[test]
fn a_finished_peer_may_register_for_the_next_session_at_once() {
    let n = 3;
    let cfg = config(n);
    let ids = ids_for(n, 43);
    on_threads(&ids, 43, |p| {
        for round in 0..5 {
            register::<Tb<43>>(p.id, p.dev, cfg.clone()).unwrap();
            let t = all_reduce::<Tb<43>>(p.id, tensor(&p.dev, &[round as f32], &[1]), ReduceOp::Sum).unwrap();
            assert_eq!(values(&t), vec![(3 * round) as f32]);
            finish_collective::<Tb<43>>(p.id).unwrap();
            p.rng.pause();
        }
    });
}

#[test]
fn reset_wakes_peers_waiting_to_register() {
    let cfg = config(3);
    let start = Instant::now();
    let errs = std::thread::scope(|s| {
        let waiting: Vec<_> = [0u32, 1]
            .into_iter()
            .map(|i| {
                let cfg = cfg.clone();
                s.spawn(move || register::<Tb<44>>(i.into(), ruccl::HostDevice::new(i), cfg))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        reset_collective::<Tb<44>>();
        waiting.into_iter().map(|h| h.join().unwrap().unwrap_err()).collect::<Vec<_>>()
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for e in errs {
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        assert!(e.to_string().contains("reset_collective"), "{e}");
    }
    session::<Tb<44>, _>(&[0, 1, 2], &cfg, 44, |p| barrier::<Tb<44>>(p.id).unwrap());
}

#[test]
fn reset_wakes_peers_blocked_in_an_operation() {
    let n = 4;
    let ids = ids_for(n, 45);
    let cfg = config(n); // 30 s: only the reset can end the wait in time
    let start = Instant::now();
    let outcomes = std::thread::scope(|s| {
        let peers: Vec<_> = ids
            .iter()
            .map(|&id| {
                let (cfg, ids) = (cfg.clone(), &ids);
                s.spawn(move || {
                    let p = crate::peer_of(id, ids, 45);
                    register::<Tb<45>>(p.id, p.dev, cfg).unwrap();
                    barrier::<Tb<45>>(p.id).unwrap();
                    if p.rank == 0 {
                        return None; // never calls the all_reduce
                    }
                    Some(all_reduce::<Tb<45>>(p.id, tensor(&p.dev, &[1.0], &[1]), ReduceOp::Sum).map(|_| ()))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        reset_collective::<Tb<45>>();
        peers.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for r in outcomes.into_iter().flatten() {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        assert!(e.to_string().contains("reset_collective"), "{e}");
    }
    // Everything was discarded: the peers are unknown now, and register afresh.
    for &id in &ids {
        assert_eq!(barrier::<Tb<45>>(id.into()).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    let sums = session::<Tb<45>, _>(&ids, &cfg, 45, |p| {
        values(&all_reduce::<Tb<45>>(p.id, tensor(&p.dev, &[2.0], &[1]), ReduceOp::Sum).unwrap())
    });
    assert_eq!(sums, vec![vec![8.0]; n]);
}

/// A node of two peers waits for a second node that never comes (its orchestrator takes the
/// connection and never answers): a reset wakes both peers — the leader waiting on the
/// orchestrator and the other peer waiting for its leader — long before the 30 s timeout.
#[test]
fn reset_wakes_a_node_waiting_for_the_other_nodes() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = ruccl::launch::free_port().expect("a free port");
    let cfg = config(2)
        .with_num_nodes(2)
        .with_global_address(silent.local_addr().unwrap().to_string())
        .with_node_address("127.0.0.1")
        .with_data_service_port(free);
    let start = Instant::now();
    let errs = std::thread::scope(|s| {
        let held = s.spawn(|| silent.accept().map(|(c, _)| c));
        let waiting: Vec<_> = [0u32, 1]
            .into_iter()
            .map(|i| {
                let cfg = cfg.clone();
                s.spawn(move || register::<Tb<49>>(i.into(), ruccl::HostDevice::new(i), cfg))
            })
            .collect();
        let _conn = held.join().unwrap().unwrap(); // the leader is waiting for its answer
        std::thread::sleep(Duration::from_millis(100));
        reset_collective::<Tb<49>>();
        waiting.into_iter().map(|h| h.join().unwrap().unwrap_err()).collect::<Vec<_>>()
    });
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    for e in errs {
        assert_eq!(e.kind(), ErrorKind::Aborted, "{e}");
        assert!(e.to_string().contains("reset_collective"), "{e}");
    }
}

/// A node of two peers whose global_address is `orchestrator` (a stand-in the caller serves
/// with `serve`, on a thread of its own meanwhile), registering at once with `timeout`: how
/// long the registration took, and each peer's error, by peer.
fn node_of_two_against<const K: usize>(
    orchestrator: &std::net::TcpListener,
    timeout: Duration,
    serve: impl FnOnce(&std::net::TcpListener) + Send,
) -> (Duration, Vec<ruccl::CollectiveError>) {
    let cfg = config(2)
        .with_num_nodes(2)
        .with_global_address(orchestrator.local_addr().unwrap().to_string())
        .with_node_address("127.0.0.1")
        .with_data_service_port(ruccl::launch::free_port().expect("a free port"))
        .with_timeout(timeout);
    let start = Instant::now();
    let errs = std::thread::scope(|s| {
        let served = s.spawn(|| serve(orchestrator));
        let waiting: Vec<_> = [0u32, 1]
            .into_iter()
            .map(|i| {
                let cfg = cfg.clone();
                s.spawn(move || register::<Tb<K>>(i.into(), ruccl::HostDevice::new(i), cfg))
            })
            .collect();
        let errs = waiting.into_iter().map(|h| h.join().unwrap().unwrap_err()).collect::<Vec<_>>();
        served.join().unwrap();
        errs
    });
    (start.elapsed(), errs)
}

/// An orchestrator that closes the connection without answering (it stopped, or
/// global_address names something else): both peers of the node say so, with what to do
/// (they read "failed to fill whole buffer", and the non-leader "report this as a bug").
#[test]
fn an_orchestrator_that_hangs_up_is_named_on_every_peer() {
    let rude = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (took, errs) = node_of_two_against::<50>(&rude, Duration::from_secs(10), |l| {
        // Reads the hello, then hangs up.
        let (mut c, _) = l.accept().unwrap();
        let _ = std::io::Read::read(&mut c, &mut [0u8; 256]);
    });
    assert!(took < Duration::from_secs(5), "{took:?}");
    for e in errs {
        let msg = e.to_string();
        assert!(msg.contains("closed the connection without answering"), "{msg}");
        assert!(msg.contains("start the orchestrator") && !msg.contains("report this message as a bug"), "{msg}");
    }
}

/// An orchestrator that takes the connection and never answers: the leader's wait and its
/// peer's wait for the leader end at the same deadline; whichever looks first, the leader
/// reports the orchestrator's silence as a `Timeout` (it read "its registration was
/// cancelled", which nobody did).
#[test]
fn a_silent_orchestrator_is_a_timeout_not_a_cancellation() {
    for round in 0..3 {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (took, errs) = node_of_two_against::<51>(&silent, Duration::from_millis(500), |l| {
            // Holds the connection, silent, until the peers gave up.
            let (c, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(1500));
            drop(c);
        });
        assert!(took < Duration::from_secs(5), "{took:?}");
        let leader = &errs[0];
        assert_eq!(leader.kind(), ErrorKind::Timeout, "round {round}: {leader}");
        assert!(!leader.to_string().contains("cancelled"), "round {round}: {leader}");
        assert!(leader.to_string().contains("orchestrator"), "round {round}: {leader}");
        // The other peer hears the leader's reason (its own wait for the leader ends a
        // grace later): the orchestrator, not the core's "rank 0 never reached op #0" with
        // advice to raise CommConfig::timeout (a stranger's review).
        let other = errs[1].to_string();
        assert!(other.contains("orchestrator") && !other.contains("CommConfig"), "round {round}: {other}");
    }
}
