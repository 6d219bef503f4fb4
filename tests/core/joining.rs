//! `Communicator::new`: the rendezvous fails with `Timeout` naming the ranks that never came,
//! and with `InvalidArgument` for a duplicate rank, disagreeing world sizes or configs, or a
//! rank out of range; a live or reused id is refused, and a timeout of `Duration::MAX` means
//! no deadline.

use std::time::{Duration, Instant};

use ruccl::{Algorithm, CollectiveError, CommConfig, Communicator, ErrorKind, Rank, UniqueId};

use crate::harness::{TestDevice, names_rank};

fn join<D: TestDevice>(world: usize, id: &UniqueId, rank: Rank, cfg: &CommConfig) -> ruccl::Result<Communicator<D>> {
    Communicator::with_config(D::for_rank(rank), world, id.clone(), rank, D::configure(cfg.clone()))
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
            // Nothing was made: the advice is to start the missing ranks, not to replace a
            // communicator.
            assert!(text.contains("What to do: start the rank(s) named above") && !text.contains("aborted"), "{text}");
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

/// Two threads claim rank 0: that is two groups using one id, so both are refused (the one
/// waiting in the room too, not only the second), and so is rank 1 when it comes later,
/// instead of completing the room with whichever rank 0 came first.
pub fn new_duplicate_rank<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (id, cfg) = (&id, &cfg);
                s.spawn(move || join::<D>(2, id, 0, cfg).map(|_| ()))
            })
            .collect();
        for h in hs {
            let e = expect_kind(h.join().unwrap(), ErrorKind::InvalidArgument, "a second rank 0");
            assert!(names_rank(&e.to_string(), 0) && e.message().contains("two groups"), "{e}");
            assert!(e.message().contains(&id.short()), "names the id: {e}");
        }
    });
    assert!(t0.elapsed() < Duration::from_secs(5), "refused at once, not at the deadline");
    let e = expect_kind(join::<D>(2, &id, 1, &cfg).map(|_| ()), ErrorKind::InvalidArgument, "rank 1 after a reuse");
    assert!(e.message().contains("two groups") && e.message().contains(&id.short()), "{e}");
}

/// Ranks that disagree on the world size all fail at once, each told both sizes and who
/// passed them (not left waiting out the timeout for a rank that did call); a rank of the
/// same job arriving later hears the same error at once, and a fresh id works.
pub fn new_world_mismatch<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let (id, cfg) = (&id, &cfg);
        let first = s.spawn(move || join::<D>(2, id, 0, cfg).map(|_| ()));
        // Let rank 0 open the rendezvous with world size 2 first.
        std::thread::sleep(Duration::from_millis(100));
        let second = join::<D>(3, id, 1, cfg).map(|_| ());
        for (r, rank) in [(first.join().unwrap(), 0), (second, 1)] {
            let e = expect_kind(r, ErrorKind::InvalidArgument, "world size 3 against 2");
            let m = e.message();
            assert!(names_rank(&e.to_string(), rank), "{e}");
            assert!(m.contains("rank(s) 0 passed world_size 2") && m.contains("rank(s) 1 passed 3"), "{e}");
            assert!(m.contains(&id.short()), "names the id: {e}");
        }
    });
    let late = join::<D>(3, &id, 2, &cfg).map(|_| ());
    let e = expect_kind(late, ErrorKind::InvalidArgument, "a late rank of the same job");
    assert!(names_rank(&e.to_string(), 2) && e.message().contains("disagree on the world size"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5), "refused at once, not at the deadline");
    let fresh = UniqueId::new().unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2).map(|r| s.spawn({ let (f, c) = (&fresh, &cfg); move || join::<D>(2, f, r, c)?.barrier() })).collect();
        hs.into_iter().for_each(|h| h.join().unwrap().unwrap());
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

/// Ranks must agree on the chunk size and the algorithm (plans depend on both): every rank's
/// error names the rank that differs, what it passed, and the settings to look at.
pub fn new_config_mismatch<D: TestDevice>() {
    let cases = [
        (CommConfig::default().with_chunk_bytes(4096), "rank 2: chunk 4096 bytes"),
        (CommConfig::default().with_algorithm(Algorithm::Tree), "algorithm tree"),
    ];
    for (other, theirs) in cases {
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
                assert!(e.message().contains(theirs), "says what rank 2 passed: {e}");
                assert!(e.to_string().contains("RUCCL_CHUNK_BYTES"), "names the settings: {e}");
            }
        });
    }
}

fn join_all<D: TestDevice>(world: usize, id: &UniqueId, cfg: &CommConfig) -> Vec<Communicator<D>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world).map(|rank| s.spawn(move || join::<D>(world, id, rank, cfg))).collect();
        hs.into_iter().map(|h| h.join().unwrap().unwrap_or_else(|e| panic!("join: {e}"))).collect()
    })
}

/// Runs `f` on every rank's communicator, each on its own thread.
fn on_each<D: TestDevice, R: Send>(comms: &[Communicator<D>], f: impl Fn(&Communicator<D>) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let hs: Vec<_> = comms.iter().map(|c| s.spawn(|| f(c))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// An id whose communicators still exist is refused (naming it), by any rank and world
/// size; once every communicator of that group is dropped, the id can form a new group.
pub fn new_live_id_refused<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let mut comms = join_all::<D>(2, &id, &cfg);
    let t0 = Instant::now();
    for (world, rank) in [(2, 0), (2, 1), (1, 0), (3, 2)] {
        let e = expect_kind(join::<D>(world, &id, rank, &cfg).map(|_| ()), ErrorKind::InvalidArgument, "a live id");
        assert!(e.message().contains(&id.short()) && e.message().contains("in use"), "{e}");
    }
    assert!(t0.elapsed() < Duration::from_secs(5), "refused at once");
    // One communicator of the group is enough to keep the id live.
    comms.pop();
    expect_kind(join::<D>(1, &id, 0, &cfg).map(|_| ()), ErrorKind::InvalidArgument, "a half-dropped group");
    drop(comms);
    let again = join_all::<D>(3, &id, &cfg);
    on_each(&again, |c| c.barrier().unwrap());
}

/// Two groups of threads join with the same id at the same time: never do both form a
/// communicator silently. Every attempt ends at once (no thread waits for its deadline), and
/// any communicator that did form is internally consistent: its split child has exactly the
/// same members (before, same-id parents split into each other's children).
pub fn new_same_id_concurrently<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(20));
    for trial in 0..D::rounds(40) {
        let world = 2 + trial % 3;
        let id = UniqueId::new().unwrap();
        let all_tried = std::sync::Barrier::new(2 * world);
        let t0 = Instant::now();
        let outcomes: Vec<Result<(), CollectiveError>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2 * world)
                .map(|k| {
                    let (id, cfg, all_tried) = (&id, &cfg, &all_tried);
                    s.spawn(move || {
                        let rank = k % world;
                        let joined = join::<D>(world, id, rank, cfg);
                        // Communicators are kept until every thread has tried: the groups
                        // really overlap in time.
                        all_tried.wait();
                        let c = joined?;
                        // A one-hot word per thread: the sum names the members.
                        let mask = 1u64 << k;
                        let dev = D::for_rank(rank);
                        let mut t = ruccl::Tensor::from_slice(&dev, &[mask], &[1]).unwrap();
                        c.all_reduce(&mut t, ruccl::ReduceOp::Sum).unwrap();
                        let members = t.to_vec::<u64>().unwrap()[0];
                        let child = c.split_all().unwrap();
                        let mut t = ruccl::Tensor::from_slice(&dev, &[mask], &[1]).unwrap();
                        child.all_reduce(&mut t, ruccl::ReduceOp::Sum).unwrap();
                        let child_members = t.to_vec::<u64>().unwrap()[0];
                        assert_eq!(child_members, members, "trial {trial}: a child crossed into another group");
                        assert_eq!(members.count_ones() as usize, world);
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let failed: Vec<&CollectiveError> = outcomes.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(!failed.is_empty(), "trial {trial} (world {world}): both groups formed a communicator with one id");
        for e in failed {
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "trial {trial}: {e}");
            assert!(e.message().contains(&id.short()), "names the id: {e}");
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "trial {trial} waited: {:?}", t0.elapsed());
    }
}

/// A group that reuses an id after the first group's parents are dropped, while the first
/// group's split child still lives, gets children with their own ids: the two children
/// never share an id (they used to: derived from the id, the split count and the members).
pub fn split_children_of_reused_id_differ<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::from_secs(30));
    let id = UniqueId::new().unwrap();
    let first = join_all::<D>(2, &id, &cfg);
    let first_children = on_each(&first, |c| c.split_all().unwrap());
    drop(first);
    let second = join_all::<D>(2, &id, &cfg);
    let second_children = on_each(&second, |c| c.split_all().unwrap());
    assert_ne!(first_children[0].unique_id(), second_children[0].unique_id());
    // Both children work side by side, each with its own members.
    let pairs: Vec<(&Communicator<D>, u64)> =
        first_children.iter().map(|c| (c, 1)).chain(second_children.iter().map(|c| (c, 10))).collect();
    std::thread::scope(|s| {
        for (c, v) in pairs {
            s.spawn(move || {
                let mut t = ruccl::Tensor::from_slice(c.device(), &[v], &[1]).unwrap();
                c.all_reduce(&mut t, ruccl::ReduceOp::Sum).unwrap();
                assert_eq!(t.to_vec::<u64>().unwrap(), vec![2 * v]);
            });
        }
    });
}

/// A timeout too large for the clock (`Duration::MAX`) means no deadline, not a panic.
pub fn new_timeout_max<D: TestDevice>() {
    let cfg = CommConfig::default().with_timeout(Duration::MAX).with_warn_after(Duration::MAX);
    let comms = join_all::<D>(2, &UniqueId::new().unwrap(), &cfg);
    let sums = on_each(&comms, |c| {
        let mut t = ruccl::Tensor::from_slice(c.device(), &[c.rank() as f32 + 1.0; 3], &[3]).unwrap();
        c.all_reduce(&mut t, ruccl::ReduceOp::Sum).unwrap();
        t.to_vec::<f32>().unwrap()
    });
    assert!(sums.iter().all(|s| s == &[3.0; 3]), "{sums:?}");
}
