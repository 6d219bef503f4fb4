//! `Communicator::new`: the rendezvous fails with `Timeout` naming the ranks that never came,
//! and with `InvalidArgument` for a duplicate rank, disagreeing world sizes or configs, or a
//! rank out of range.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ruccl::{Algorithm, CollectiveError, CommConfig, Communicator, ErrorKind, Rank, UniqueId};

use crate::harness::{TestDevice, names_rank};

fn join<D: TestDevice>(world: usize, id: &UniqueId, rank: Rank, cfg: &CommConfig) -> ruccl::Result<Communicator<D>> {
    Communicator::with_config(D::for_rank(rank), world, id.clone(), rank, cfg.clone())
}

fn expect_kind(r: ruccl::Result<()>, kind: ErrorKind, what: &str) -> CollectiveError {
    match r {
        Ok(()) => panic!("{what}: succeeded, expected {kind:?}"),
        Err(e) => {
            assert_eq!(e.kind(), kind, "{what}: {e}");
            e
        }
    }
}

pub fn new_missing_rank_times_out<D: TestDevice>() {
    let timeout = Duration::from_millis(300);
    let cfg = CommConfig::default().with_timeout(timeout);
    // World 4, only ranks 0 and 2 come.
    let id = UniqueId::new().unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = [0, 2]
            .into_iter()
            .map(|rank| {
                let (id, cfg) = (&id, &cfg);
                s.spawn(move || {
                    let t0 = Instant::now();
                    let r = join::<D>(4, id, rank, cfg).map(|_| ());
                    (rank, t0.elapsed(), r)
                })
            })
            .collect();
        for h in hs {
            let (rank, took, r) = h.join().unwrap();
            let e = expect_kind(r, ErrorKind::Timeout, "Communicator::new without ranks 1 and 3");
            let text = e.to_string();
            assert!(text.contains("Communicator::new"), "{text}");
            assert!(names_rank(&text, rank), "names the reporting rank: {text}");
            // Rank 0 may have given up before rank 2 (a little later) did: it may be named as
            // such, but never as a rank that did not come.
            let never = e.message().split("never called").next().unwrap_or_default();
            assert!(names_rank(never, 1) && names_rank(never, 3), "names both missing ranks: {e}");
            assert!(!names_rank(never, 0) && !names_rank(never, 2), "ranks 0 and 2 came: {e}");
            assert!(took >= timeout.saturating_sub(Duration::from_millis(20)), "gave up early: {took:?}");
            assert!(took < timeout + Duration::from_secs(2), "gave up late: {took:?}");
        }
    });
    // The id is not poisoned: all ranks can still form the communicator.
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    std::thread::scope(|s| {
        for rank in 0..4 {
            let (id, cfg) = (&id, &cfg);
            s.spawn(move || {
                let c = join::<D>(4, id, rank, cfg).unwrap_or_else(|e| panic!("rejoin: {e}"));
                c.barrier().unwrap();
            });
        }
    });
}

/// Two threads claim rank 0: exactly one is refused at once; the other forms the
/// communicator with rank 1.
pub fn new_duplicate_rank<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (id, cfg, tx) = (&id, &cfg, tx.clone());
            s.spawn(move || {
                let r = join::<D>(2, id, 0, cfg);
                let failed = r.as_ref().err().cloned();
                tx.send(failed).unwrap();
                if let Ok(c) = r {
                    c.barrier().unwrap();
                }
            });
        }
        let first = rx.recv().unwrap();
        let e = expect_kind(first.map_or(Ok(()), Err), ErrorKind::InvalidArgument, "a second rank 0");
        assert!(names_rank(&e.to_string(), 0) && e.message().contains("already"), "{e}");
        let (id, cfg) = (&id, &cfg);
        s.spawn(move || {
            let c = join::<D>(2, id, 1, cfg).unwrap_or_else(|e| panic!("rank 1: {e}"));
            c.barrier().unwrap();
        });
        assert!(rx.recv().unwrap().is_none(), "the first rank 0 joins");
    });
}

/// A rank that disagrees on the world size is refused; the right rank still completes it.
pub fn new_world_mismatch<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    std::thread::scope(|s| {
        let (id, cfg) = (&id, &cfg);
        let first = s.spawn(move || join::<D>(2, id, 0, cfg).map(|c| c.barrier()));
        // Let rank 0 open the rendezvous with world size 2 first.
        std::thread::sleep(Duration::from_millis(100));
        let r = join::<D>(3, id, 1, cfg).map(|_| ());
        let e = expect_kind(r, ErrorKind::InvalidArgument, "world size 3 against 2");
        assert!(e.message().contains("world_size") && e.message().contains('3') && e.message().contains('2'), "{e}");
        let c = join::<D>(2, id, 1, cfg).unwrap_or_else(|e| panic!("rank 1 with the right world: {e}"));
        c.barrier().unwrap();
        first.join().unwrap().unwrap().unwrap();
    });
}

pub fn new_rank_out_of_range<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let t0 = Instant::now();
    let e = expect_kind(join::<D>(2, &id, 2, &cfg).map(|_| ()), ErrorKind::InvalidArgument, "rank 2 of 2");
    assert!(names_rank(e.message(), 2) && e.message().contains("out of range"), "{e}");
    let e = expect_kind(join::<D>(0, &id, 0, &cfg).map(|_| ()), ErrorKind::InvalidArgument, "world 0");
    assert!(e.message().contains("world_size"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(1), "refused at once");
}

/// Ranks must agree on the chunk size and the algorithm (plans depend on both).
pub fn new_config_mismatch<D: TestDevice>() {
    for other in [CommConfig::default().with_chunk_bytes(4096), CommConfig::default().with_algorithm(Algorithm::Tree)] {
        let id = UniqueId::new().unwrap();
        let base = CommConfig::default().with_timeout(Duration::from_secs(30));
        let other = other.with_timeout(Duration::from_secs(30));
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|rank| {
                    let cfg = if rank == 2 { other.clone() } else { base.clone() };
                    let id = &id;
                    s.spawn(move || join::<D>(3, id, rank, &cfg).map(|_| ()))
                })
                .collect();
            for (rank, h) in hs.into_iter().enumerate() {
                let e = expect_kind(h.join().unwrap(), ErrorKind::InvalidArgument, "disagreeing configs");
                assert!(names_rank(&e.to_string(), rank), "names the reporting rank: {e}");
                assert!(names_rank(e.message(), 2), "names the rank that differs: {e}");
            }
        });
    }
}
