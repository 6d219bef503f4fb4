//! The cases that move data between processes, each a function of the transport (stamped out
//! per transport by the root's `per_transport!`).

use ruccl::UniqueId;

use std::time::Duration;

use super::kids::{Kids, Mark, Transport, ranks_env};

pub(super) fn one_rank_per_process(t: Transport, world: usize) {
    let id = UniqueId::new().unwrap();
    assert!(id.root_address().is_some(), "no rendezvous listener on this machine");
    let mut kids = Kids::new(t);
    for r in 0..world {
        kids.spawn(&format!("rank{r}"), "collectives", &ranks_env(&id, world, &[r]));
    }
    kids.wait(&[]);
}

pub(super) fn two_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 2);
}

pub(super) fn three_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 3);
}

pub(super) fn four_processes_run_every_collective(t: Transport) {
    one_rank_per_process(t, 4);
}

pub(super) fn large_messages_cross_processes(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        // Messages of up to 6 MiB: larger than a shared-memory record.
        env.extend([("MP_RANK", r.to_string()), ("RUCCL_CHUNK_BYTES", (6 << 20).to_string())]);
        kids.spawn(&format!("rank{r}"), "large", &env);
    }
    kids.wait(&[]);
}

pub(super) fn sizes_around_the_single_copy_threshold(t: Transport) {
    // 3 processes (every rank has 2 peers on the host: single copy from 128 KiB, and from 64
    // KiB for all_gather), then 2 (one peer: from 32 KiB, and from 128 KiB for an in-place
    // all_reduce).
    for world in [3, 2] {
        let id = UniqueId::new().unwrap();
        let mut kids = Kids::new(t);
        for r in 0..world {
            let mut env = ranks_env(&id, world, &[r]);
            env.extend([("MP_RANK", r.to_string()), ("RUCCL_CHUNK_BYTES", "300004".to_string())]);
            kids.spawn(&format!("rank{r}of{world}"), "threshold", &env);
        }
        kids.wait(&[]);
    }
}

pub(super) fn two_processes_of_two_ranks_run_every_collective(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    kids.spawn("ranks0,1", "collectives", &ranks_env(&id, 4, &[0, 1]));
    kids.spawn("ranks2,3", "collectives", &ranks_env(&id, 4, &[2, 3]));
    kids.wait(&[]);
}

pub(super) fn the_listener_survives_garbage_and_serves_real_peers(t: Transport) {
    use std::io::Write;
    let id = UniqueId::new().unwrap();
    let root = id.root_address().unwrap();
    let mut silent = std::net::TcpStream::connect(root).unwrap();
    for bytes in [b"GET / HTTP/1.1\r\n\r\n".repeat(8), {
        let mut h = b"RCCL".to_vec();
        h.extend_from_slice(&[9, 0]);
        h.resize(96, 0);
        h
    }] {
        let mut s = std::net::TcpStream::connect(root).unwrap();
        s.write_all(&bytes).unwrap();
    }
    silent.write_all(b"RC").unwrap();
    let mut kids = Kids::new(t);
    for r in 0..2 {
        kids.spawn(&format!("rank{r}"), "collectives", &ranks_env(&id, 2, &[r]));
    }
    kids.wait(&[]);
}

/// A launch drops its group and forms it again from the same variables, rank 0 (whose
/// process holds the rendezvous) a second after the others: they wait for it rather than
/// being refused at once as another job on the port.
pub(super) fn a_launch_forms_its_group_again(t: Transport) {
    torchrun_launch(t, "env_again", &[]);
}

/// A broadcast's root that returns and exits at once leaves its data to the others, and a
/// launch forms its group three times in a row at once: with and without shared progress.
pub(super) fn a_dropped_group_leaves_at_once(t: Transport) {
    for shared in ["0", "1"] {
        let extra: &[PerRankVar] = if shared == "1" {
            &[("RUCCL_SHARED_PROGRESS", |_| "1".to_string())]
        } else {
            &[("RUCCL_SHARED_PROGRESS", |_| "0".to_string())]
        };
        torchrun_launch(t, "eager_exit", extra);
        torchrun_launch(t, "env_twice", extra);
    }
}

/// A split across processes forms with its members alone: the process that made the
/// parent's id has exited (and its listener with it) before any rank splits, and rank 0,
/// left out of the second split, exits at once. Children used to meet at the parent id's
/// maker, so every member failed there (the docs said to keep that process running).
pub(super) fn a_split_needs_no_process_but_its_members(t: Transport) {
    let (id_file, formed) = (Mark::new("split-id"), Mark::new("split-formed"));
    let mut kids = Kids::new(t);
    let id_path = id_file.env().1;
    kids.spawn("maker", "id_maker", &[("MP_ID_FILE", id_path.clone()), formed.env()]);
    id_file.wait(Duration::from_secs(20), "the id maker never wrote its id");
    let id: UniqueId = std::fs::read_to_string(&id_path).unwrap().trim().parse().unwrap();
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([("MP_RANK", r.to_string()), formed.env()]);
        kids.spawn(&format!("rank{r}"), "orphan_split", &env);
    }
    kids.wait(&[]);
}

/// A variable and its value for a rank.
type PerRankVar = (&'static str, fn(usize) -> String);

/// Starts 3 processes as `role` with torchrun's variables (and `extra` per rank), on a free
/// port, and checks them all.
fn torchrun_launch(t: Transport, role: &str, extra: &[PerRankVar]) {
    let port = ruccl::launch::free_port().expect("a free port");
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let mut env = vec![
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "3".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
        ];
        env.extend(extra.iter().map(|(k, v)| (*k, v(r))));
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    kids.wait(&[]);
}

pub(super) fn from_env_with_torchrun_variables(t: Transport) {
    torchrun_launch(t, "env", &[("LOCAL_RANK", |r| r.to_string())]);
}
