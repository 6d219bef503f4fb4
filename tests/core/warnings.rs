//! Slow waits are logged: a join or a collective that has waited longer than the config's
//! warning interval names, in a `tracing` warning, the ranks it is still waiting for, and
//! warns again at growing intervals. Each rank's thread installs a capturing subscriber for
//! itself (the library never installs one). Without the `tracing` feature there is nothing
//! to capture and the tests say so.

use crate::harness::TestDevice;

/// World 3, rank 2 never comes: ranks 0 and 1 warn, naming rank 2 (and not themselves), a few
/// times before their deadline, at growing intervals.
pub fn join_warns_missing_rank<D: TestDevice>() {
    #[cfg(not(feature = "tracing"))]
    eprintln!("SKIPPED: the warnings need the `tracing` feature");
    #[cfg(feature = "tracing")]
    {
        use std::time::Duration;

        use ruccl::{CommConfig, Communicator, ErrorKind, UniqueId};

        use crate::harness::names_rank;

        let cfg =
            CommConfig::default().with_timeout(Duration::from_millis(700)).with_warn_after(Duration::from_millis(40));
        let id = UniqueId::new().unwrap();
        std::thread::scope(|s| {
            for rank in 0..2 {
                let (id, cfg) = (&id, &cfg);
                s.spawn(move || {
                    let log = crate::capture::Capture::default();
                    let r = log.during(|| {
                        Communicator::with_config(D::for_rank(rank), 3, id.clone(), rank, D::configure(cfg.clone()))
                    });
                    assert_eq!(r.map(|_| ()).unwrap_err().kind(), ErrorKind::Timeout);
                    let warnings = log.messages();
                    // At 40, 80, 160, 320, 640 ms: a few, not one per wake-up (on a heavily
                    // loaded machine, where a rank thread may not run for a few hundred ms,
                    // only one of them may fire before the deadline).
                    assert!((1..=8).contains(&warnings.len()), "rank {rank}: {warnings:#?}");
                    let missing =
                        |w: &str| w.split("have not joined").next().unwrap().rsplit(';').next().unwrap().to_string();
                    for w in &warnings {
                        assert!(names_rank(&missing(w), 2), "rank {rank}: {w}");
                        assert!(w.contains(&id.short()) && w.contains("one thread per rank"), "{w}");
                    }
                    // The other rank came at once (on a loaded machine, maybe only after the
                    // first warning).
                    let last = warnings.last().unwrap();
                    assert!(!names_rank(&missing(last), 1 - rank), "rank {rank}: {last}");
                });
            }
        });
    }
}

/// World 3, rank 2 calls its all_reduce late: ranks 0 and 1 warn that rank 2 has not reached
/// op #1 yet; the collective then completes normally.
pub fn collective_warns_missing_rank<D: TestDevice>() {
    #[cfg(not(feature = "tracing"))]
    eprintln!("SKIPPED: the warnings need the `tracing` feature");
    #[cfg(feature = "tracing")]
    {
        use std::time::Duration;

        use ruccl::{CommConfig, Communicator, ReduceOp, Tensor, UniqueId};

        use crate::harness::names_rank;

        let cfg =
            CommConfig::default().with_timeout(Duration::from_secs(30)).with_warn_after(Duration::from_millis(40));
        let id = UniqueId::new().unwrap();
        std::thread::scope(|s| {
            for rank in 0..3 {
                let (id, cfg) = (&id, &cfg);
                s.spawn(move || {
                    let dev = D::for_rank(rank);
                    let comm =
                        Communicator::with_config(dev.clone(), 3, id.clone(), rank, D::configure(cfg.clone())).unwrap();
                    comm.barrier().unwrap();
                    if rank == 2 {
                        std::thread::sleep(Duration::from_millis(400));
                    }
                    let log = crate::capture::Capture::default();
                    let mut t = Tensor::from_slice(&dev, &[rank as u32 + 1; 5], &[5]).unwrap();
                    log.during(|| comm.all_reduce(&mut t, ReduceOp::Sum)).unwrap();
                    assert_eq!(t.to_vec::<u32>().unwrap(), vec![6; 5]);
                    // Once rank 2 has come, a slow machine may still make a rank wait long
                    // enough to warn; such a warning names no missing rank.
                    let (missing, other): (Vec<String>, Vec<String>) =
                        log.messages().into_iter().partition(|w| w.contains("have not reached"));
                    assert!(other.iter().all(|w| w.contains("every rank has reached")), "{other:#?}");
                    if rank == 2 {
                        assert!(missing.is_empty(), "rank 2 came last: {missing:#?}");
                        return;
                    }
                    assert!((1..=8).contains(&missing.len()), "rank {rank}: {missing:#?}");
                    for w in &missing {
                        let list = w.split("have not reached").next().unwrap().rsplit(':').next().unwrap();
                        assert!(names_rank(list, 2) && !names_rank(list, 1 - rank), "rank {rank}: {w}");
                        assert!(w.contains("op #1") && w.contains(&id.short()), "{w}");
                    }
                });
            }
        });
    }
}
