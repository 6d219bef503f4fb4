//! Real processes on 127.0.0.1: this test binary re-runs itself as the ranks (the `child`
//! test, selected by `RUCCL_MP_ROLE`). The parent makes the `UniqueId` (so its listener is
//! the rendezvous root) or sets torchrun's variables, starts the children, and kills them
//! all if any fails or passes the deadline: no orphans, no hung run. Every child also has
//! its own hard deadline ([`CHILD_DEADLINE`]).
//!
//! Covered: every collective with f32, i64, bf16 and u8 for world sizes 2, 3 and 4 (one rank
//! per process) and 2 processes x 2 in-process ranks, then on a split of the even and of the
//! odd ranks; a peer killed mid-collective, and one stopped (`SIGSTOP`: its sockets stay
//! open, it sends nothing) past a short `RUCCL_PEER_SILENCE` (`PeerLost` naming it); a live peer that never calls the collective and a rank that
//! never comes (`Timeout` naming them); duplicate rank,
//! world and config mismatches across processes; a listener fed garbage that keeps serving;
//! `Communicator::from_env` with torchrun's variables.
//!
//! The cases that move data are stamped out per transport between processes (`shm::*`:
//! shared memory, small ops as messages too, `RUCCL_SHM_SLOTS=0`; `tcp::*`:
//! `RUCCL_SHM_DISABLE=1`; `slots::*`: shared memory and small ops exchanged through the
//! host's slots, the default on one host), and
//! each child checks that its process uses the transport asked for (a shared-memory reader
//! thread runs, or none does; the slot segment is mapped, or not). `slots_agreement::*`: one
//! process that says no to slots keeps every rank on messages.
//!
//! Layout: this file holds the entry point of every child ([`child`]), the cases that are not
//! stamped per transport, and the stamping; `multiprocess/roles*.rs` the child roles,
//! `kids.rs` the parent's handle on its children, `cases*.rs` the cases stamped per
//! transport, `hier.rs` the peer API over several nodes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use ruccl::UniqueId;
use std::time::Duration;

#[cfg(feature = "tracing")]
#[path = "core/capture.rs"]
mod capture;
#[path = "multiprocess/cases.rs"]
mod cases;
#[path = "multiprocess/cases_faults.rs"]
mod cases_faults;
#[path = "multiprocess/cases_slots.rs"]
mod cases_slots;
/// The peer API over several nodes (needs the `orchestrator` feature).
#[cfg(feature = "orchestrator")]
#[path = "multiprocess/hier.rs"]
mod hier;
#[path = "multiprocess/kids.rs"]
mod kids;
#[path = "multiprocess/off_host.rs"]
mod off_host;
#[path = "multiprocess/roles.rs"]
mod roles;
#[path = "multiprocess/roles_faults.rs"]
mod roles_faults;
#[path = "multiprocess/roles_large.rs"]
mod roles_large;

use cases::{
    a_dropped_group_leaves_at_once, a_launch_forms_its_group_again, a_split_needs_no_process_but_its_members,
    four_processes_run_every_collective, from_env_with_torchrun_variables, large_messages_cross_processes,
    sizes_around_the_single_copy_threshold, the_listener_survives_garbage_and_serves_real_peers,
    three_processes_run_every_collective, two_processes_of_two_ranks_run_every_collective,
    two_processes_run_every_collective,
};
use cases_faults::{
    a_killed_peer_is_named_in_peer_lost, a_late_rank_fails_the_op_its_peer_failed,
    a_peer_killed_mid_all_gather_is_named_in_peer_lost, a_rank_stopped_inside_an_op_hears_its_peer_failed_first,
    a_rank_stopped_past_the_silence_limit_hears_its_peer_failed_first,
    a_receiver_killed_mid_recv_is_named_in_peer_lost, a_receiver_stopped_mid_recv_times_out_on_time,
    a_sender_killed_mid_send_is_named_in_peer_lost, a_silent_peer_is_named_in_the_timeout,
    a_stopped_peer_is_named_in_peer_lost, a_stopped_peer_times_out_on_time,
    a_stopped_rank_is_named_at_the_end_of_the_chain_of_waits,
};
use cases_slots::{
    a_mismatch_across_the_slot_limit_is_named_at_once, a_mismatch_no_awaited_message_shows_is_named_at_once,
    a_peer_killed_mid_small_broadcasts_is_named_in_peer_lost, a_peer_killed_mid_small_ops_is_named_in_peer_lost,
    a_send_or_recv_against_a_small_collective_is_named_at_once, a_small_mismatch_names_both_calls,
    an_abort_and_exit_is_heard_as_the_abort,
};
use kids::{Kids, Transport, ranks_env};
use roles::{collectives_child, env_child, env_join_child, join_child, var};
use roles_faults::{odd_call_child, stopped_waiter_child, streamer_child, survivor_child, victim_child, waiter_child};
use roles_large::{large_child, threshold_child};

#[cfg(not(feature = "orchestrator"))]
#[test]
fn hierarchy_needs_the_orchestrator_feature() {
    eprintln!("skipped: the multi-node peer-API tests run with --features orchestrator");
}

/// The child's role; unset in the parent.
const ROLE: &str = "RUCCL_MP_ROLE";
/// A child exits (code 97) after this long, whatever it is doing.
const CHILD_DEADLINE: Duration = Duration::from_secs(40);
/// The parent's deadline for a group of children.
const GROUP_DEADLINE: Duration = Duration::from_secs(45);
/// Elements per rank (not a multiple of any world size tested).
const N: usize = 37;

/// The entry point of every child; does nothing in the parent.
#[test]
fn child() {
    let role = var(ROLE);
    if role.is_empty() {
        return;
    }
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_DEADLINE);
        eprintln!("child passed its deadline");
        std::process::exit(97);
    });
    let result = match role.as_str() {
        "collectives" => collectives_child(),
        "mixed_devices" => off_host::mixed_devices_child(),
        "join" => join_child(),
        "victim" => victim_child(),
        "survivor" => survivor_child(),
        "waiter" => waiter_child(),
        "stopped_waiter" => stopped_waiter_child(),
        "late" => roles_faults::late_child(),
        "env" => env_child(),
        "env_again" => roles::env_again_child(),
        "eager_exit" => roles::eager_exit_child(),
        "env_twice" => roles::env_twice_child(),
        "id_maker" => roles::id_maker_child(),
        "orphan_split" => roles::orphan_split_child(),
        "env_join" => env_join_child(),
        "large" => large_child(),
        "threshold" => threshold_child(),
        "streamer" => streamer_child(),
        "odd_call" => odd_call_child(),
        #[cfg(feature = "orchestrator")]
        "node" => hier::node_child(),
        #[cfg(feature = "orchestrator")]
        "chunks" => hier::chunks_child(),
        #[cfg(feature = "orchestrator")]
        "lonely" => hier::lonely_child(),
        #[cfg(feature = "orchestrator")]
        "mismatch" => hier::mismatch_child(),
        #[cfg(feature = "orchestrator")]
        "same_port" => hier::same_port_child(),
        #[cfg(feature = "orchestrator")]
        "config_differs" => hier::config_differs_child(),
        #[cfg(feature = "orchestrator")]
        "stall" => hier::stall_child(),
        #[cfg(feature = "orchestrator")]
        "hier_victim" => hier::hier_victim_child(),
        #[cfg(feature = "orchestrator")]
        "hier_survivor" => hier::hier_survivor_child(),
        r => Err(format!("unknown role {r}")),
    };
    match result {
        Ok(()) => println!("child ok"),
        Err(e) => {
            eprintln!("child failed: {e}");
            std::process::exit(1);
        }
    }
}

#[test]
fn a_rank_that_never_comes_is_named_in_the_timeout() {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(Transport::Shm);
    for r in 0..2 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_EXPECT", "Timeout:rank(s) 2 never called".into()),
            ("RUCCL_TIMEOUT", "2".into()),
        ]);
        kids.spawn(&format!("rank{r}"), "join", &env);
    }
    kids.wait(&[]);
}

/// A rank whose process is killed after it registered at the rendezvous and before the
/// group is complete: started again, it takes its place and the group runs; not started
/// again, the others are told at their deadline that its process went away (`PeerLost`),
/// and no table with the dead rank in it is handed out (they then waited a second timeout
/// connecting to it).
#[test]
fn a_rank_killed_in_the_rendezvous_can_be_started_again() {
    let mut kids = Kids::new(Transport::Shm);
    for restart in [true, false] {
        let id = UniqueId::new().unwrap();
        let env = |r: usize, extra: &[(&'static str, String)]| {
            let mut env = ranks_env(&id, 3, &[r]);
            env.push(("MP_RANK", r.to_string()));
            env.extend_from_slice(extra);
            env
        };
        let tag = if restart { "restart" } else { "gone" };
        kids.spawn(&format!("{tag}-dead"), "collectives", &env(1, &[]));
        // Time for it to start and register, on a loaded machine too.
        std::thread::sleep(Duration::from_millis(2500));
        kids.kill(&format!("{tag}-dead"));
        if restart {
            kids.spawn(&format!("{tag}-1"), "collectives", &env(1, &[]));
            for r in [0, 2] {
                kids.spawn(&format!("{tag}-{r}"), "collectives", &env(r, &[]));
            }
        } else {
            let expect = [
                ("MP_EXPECT", "PeerLost:rank(s) 1 joined from another process, which then went away".into()),
                ("RUCCL_TIMEOUT", "3".into()),
            ];
            for r in [0, 2] {
                kids.spawn(&format!("{tag}-{r}"), "join", &env(r, &expect));
            }
        }
    }
    kids.wait(&["restart-dead", "gone-dead"]);
}

/// Both ranks are refused at once, each told the other's world size.
const WORLD_MISMATCH: &str = "InvalidArgument:disagree on the world size";

#[test]
fn rendezvous_errors_cross_processes() {
    let mut kids = Kids::new(Transport::Shm);
    let mut pair = |name: &str, a: Vec<(&'static str, String)>, b: Vec<(&'static str, String)>| {
        let id = UniqueId::new().unwrap();
        for (i, extra) in [a, b].into_iter().enumerate() {
            let mut env = vec![("MP_ID", id.to_string()), ("RUCCL_TIMEOUT", "3".into())];
            env.extend(extra);
            kids.spawn(&format!("{name}{i}"), "join", &env);
        }
    };
    let s = |x: &str| x.to_string();
    pair(
        "duplicate",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:joined it twice"))],
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:joined it twice"))],
    );
    pair(
        "world",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s(WORLD_MISMATCH))],
        vec![("MP_WORLD", s("3")), ("MP_RANK", s("1")), ("MP_EXPECT", s(WORLD_MISMATCH))],
    );
    pair(
        "config",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:chunk"))],
        vec![
            ("MP_WORLD", s("2")),
            ("MP_RANK", s("1")),
            ("RUCCL_CHUNK_BYTES", s("8192")),
            ("MP_EXPECT", s("InvalidArgument:chunk")),
        ],
    );
    // Heartbeats are paced by each process's own silence limit: a rank with a shorter one
    // would take a healthy peer for lost, so they must agree.
    pair(
        "silence",
        vec![("MP_WORLD", s("2")), ("MP_RANK", s("0")), ("MP_EXPECT", s("InvalidArgument:peer silence 60000 ms"))],
        vec![
            ("MP_WORLD", s("2")),
            ("MP_RANK", s("1")),
            ("RUCCL_PEER_SILENCE", s("0.5")),
            ("MP_EXPECT", s("InvalidArgument:peer silence 500 ms")),
        ],
    );
    // A launch whose processes disagree on WORLD_SIZE: both told at once (one rendezvous per
    // launch address, whatever the size).
    let port = ruccl::launch::free_port().expect("a free port");
    for (r, world) in [(0, 2), (1, 3)] {
        let env = [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", world.to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
            ("MP_EXPECT", WORLD_MISMATCH.to_string()),
            ("RUCCL_TIMEOUT", "3".to_string()),
        ];
        kids.spawn(&format!("launch_world{r}"), "env_join", &env);
    }
    // Rank 0 gives up first (a shorter timeout) and its process exits at once, as a `main`
    // returning the error does: rank 1, waiting in rank 0's rendezvous, hears why at rank 0's
    // deadline, not "the rendezvous root closed the connection" (it heard only that once
    // rank 0's process was gone). The errors name the call made, `from_env`.
    let port = ruccl::launch::free_port().expect("a free port");
    for (r, timeout, expect) in [
        (0, "2", "Timeout:rank(s) 2 never called Communicator::from_env"),
        (1, "20", "Timeout:rank 0, in the process that hosts the rendezvous of communicator"),
    ] {
        let env = [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "3".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", port.to_string()),
            ("MP_EXPECT", expect.to_string()),
            ("RUCCL_TIMEOUT", timeout.to_string()),
        ];
        kids.spawn(&format!("root_gave_up{r}"), "env_join", &env);
    }
    // RANK and WORLD_SIZE left over beside mpirun's variables (no torchrun): the join that
    // fails says which were used, with or without a tracing subscriber.
    let port = ruccl::launch::free_port().expect("a free port");
    let env = [
        ("RANK", "0".to_string()),
        ("WORLD_SIZE", "2".to_string()),
        ("OMPI_COMM_WORLD_RANK", "1".to_string()),
        ("OMPI_COMM_WORLD_SIZE", "2".to_string()),
        ("MASTER_ADDR", "127.0.0.1".to_string()),
        ("MASTER_PORT", port.to_string()),
        ("MP_EXPECT", "Timeout:Note: RANK=0 and WORLD_SIZE=2 are used, and OMPI_COMM_WORLD_RANK=1".to_string()),
        ("RUCCL_TIMEOUT", "1".to_string()),
    ];
    kids.spawn("stale_rank", "env_join", &env);
    kids.wait(&[]);
}

/// The cases with large messages again with ring copies only (`RUCCL_SHM_CMA=0`), where the
/// default moves them by single copy, and a failure without lent messages.
mod shm_copy {
    #[test]
    fn large_messages_cross_processes() {
        super::large_messages_cross_processes(super::Transport::ShmCopy);
    }
    #[test]
    fn sizes_around_the_single_copy_threshold() {
        super::sizes_around_the_single_copy_threshold(super::Transport::ShmCopy);
    }
    #[test]
    fn a_killed_peer_is_named_in_peer_lost() {
        super::a_killed_peer_is_named_in_peer_lost(super::Transport::ShmCopy);
    }
    #[test]
    fn a_peer_killed_mid_all_gather_is_named_in_peer_lost() {
        super::a_peer_killed_mid_all_gather_is_named_in_peer_lost(super::Transport::ShmCopy);
    }
}

/// Stamps the cases that move data out once per transport.
macro_rules! per_transport {
    ($($case:ident),* $(,)?) => {
        mod shm {
            $(#[test]
            fn $case() {
                super::$case(super::Transport::Shm);
            })*
        }
        mod tcp {
            $(#[test]
            fn $case() {
                super::$case(super::Transport::Tcp);
            })*
        }
        /// Shared memory and the host's exchange slots (the default on one host).
        mod slots {
            $(#[test]
            fn $case() {
                super::$case(super::Transport::Slots);
            })*
        }
    };
}

/// The agreement on slots: one process that says no keeps every rank on messages.
mod slots_agreement {
    #[test]
    fn shm_disabled_on_one_process_keeps_every_rank_on_messages() {
        super::cases_slots::shm_disabled_on_one_process_keeps_every_rank_on_messages();
    }
    #[test]
    fn slots_off_on_one_process_keeps_every_rank_on_messages() {
        super::cases_slots::slots_off_on_one_process_keeps_every_rank_on_messages();
    }
    #[test]
    fn a_process_off_host_memory_keeps_every_rank_on_messages() {
        super::cases_slots::a_process_off_host_memory_keeps_every_rank_on_messages();
    }
}

per_transport!(
    large_messages_cross_processes,
    sizes_around_the_single_copy_threshold,
    two_processes_run_every_collective,
    three_processes_run_every_collective,
    four_processes_run_every_collective,
    two_processes_of_two_ranks_run_every_collective,
    a_killed_peer_is_named_in_peer_lost,
    a_peer_killed_mid_all_gather_is_named_in_peer_lost,
    a_sender_killed_mid_send_is_named_in_peer_lost,
    a_receiver_killed_mid_recv_is_named_in_peer_lost,
    a_receiver_stopped_mid_recv_times_out_on_time,
    a_stopped_peer_is_named_in_peer_lost,
    a_stopped_peer_times_out_on_time,
    a_stopped_rank_is_named_at_the_end_of_the_chain_of_waits,
    a_late_rank_fails_the_op_its_peer_failed,
    a_rank_stopped_inside_an_op_hears_its_peer_failed_first,
    a_rank_stopped_past_the_silence_limit_hears_its_peer_failed_first,
    a_silent_peer_is_named_in_the_timeout,
    the_listener_survives_garbage_and_serves_real_peers,
    from_env_with_torchrun_variables,
    a_launch_forms_its_group_again,
    a_dropped_group_leaves_at_once,
    a_split_needs_no_process_but_its_members,
    a_small_mismatch_names_both_calls,
    an_abort_and_exit_is_heard_as_the_abort,
    a_peer_killed_mid_small_broadcasts_is_named_in_peer_lost,
    a_mismatch_across_the_slot_limit_is_named_at_once,
    a_mismatch_no_awaited_message_shows_is_named_at_once,
    a_send_or_recv_against_a_small_collective_is_named_at_once,
    a_peer_killed_mid_small_ops_is_named_in_peer_lost,
);
