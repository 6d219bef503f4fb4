//! The cases of small ops between processes that the host's exchange slots change (stamped
//! per transport, where they hold on messages too): a mismatch named on both sides, a peer
//! killed mid small op; and, with slots asked for, the agreement that every rank says yes
//! (one process that says no keeps every rank on messages, with the right results).

use ruccl::UniqueId;

use super::GROUP_DEADLINE;
use super::kids::{Kids, Mark, Transport, ranks_env};

/// `world` processes in the `odd_call` role (`MP_ODD`: which mismatch; none: the default),
/// each of which checks the error it gets.
fn odd_calls(t: Transport, world: usize, odd: Option<&str>, extra: &[(&'static str, &str)]) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for r in 0..world {
        let mut env = ranks_env(&id, world, &[r]);
        env.push(("MP_RANK", r.to_string()));
        env.extend(odd.map(|o| ("MP_ODD", o.to_string())));
        env.extend(extra.iter().map(|&(k, v)| (k, v.to_string())));
        kids.spawn(&format!("rank{r}"), "odd_call", &env);
    }
    kids.wait(&[]);
}

/// Rank 1 aborts and its process exits at once, while rank 0 waits in a recv from it: rank
/// 0's error is rank 1's abort.
pub(super) fn an_abort_and_exit_is_heard_as_the_abort(t: Transport) {
    odd_calls(t, 2, Some("abort"), &[]);
    odd_calls(t, 2, Some("abort"), &[("MP_SENDING", "1")]);
}

/// Rank 0 calls all_reduce where rank 1 calls all_gather (small ops): both fail with a
/// `Mismatch` that names both calls.
pub(super) fn a_small_mismatch_names_both_calls(t: Transport) {
    odd_calls(t, 2, None, &[]);
}

/// Rank 0's all_reduce fits an exchange slot, rank 1's (2000 elements) does not: both fail
/// with a `Mismatch` at once, not at the timeout.
pub(super) fn a_mismatch_across_the_slot_limit_is_named_at_once(t: Transport) {
    odd_calls(t, 2, Some("size"), &[]);
}

/// Ranks 0 and 1 all_reduce where rank 2 broadcasts (3 processes): every rank gets a
/// `Mismatch` at once, though no rank's first awaited message need be a mismatched one.
pub(super) fn a_mismatch_no_awaited_message_shows_is_named_at_once(t: Transport) {
    odd_calls(t, 3, Some("bcast"), &[]);
}

/// Rank 0 sends to rank 1 (then receives from it) where rank 1 calls a small all_reduce
/// (then a barrier): each pair waits for the other, and both get a `Mismatch` at once, on
/// every transport (with slots, neither reads the other's messages: the exchange sees the
/// send's message, the receive sees the barrier's part).
pub(super) fn a_send_or_recv_against_a_small_collective_is_named_at_once(t: Transport) {
    odd_calls(t, 2, Some("send"), &[]);
    odd_calls(t, 2, Some("recv"), &[]);
}

/// A peer killed while the survivors run small all_reduces and all_gathers with it (3
/// processes): `PeerLost` naming it, well before the timeout.
pub(super) fn a_peer_killed_mid_small_ops_is_named_in_peer_lost(t: Transport) {
    killed_mid_small_ops(t, "1");
}

/// A peer killed while the survivors run 100 small broadcasts from rank 0, one every 20 ms
/// (3 processes): `PeerLost` naming it. No survivor ever waits for the victim (the root runs
/// ahead, the other reads the root alone), and 100 ops stay within the slots' depth: the loss
/// of its connection must fail their next op.
pub(super) fn a_peer_killed_mid_small_broadcasts_is_named_in_peer_lost(t: Transport) {
    killed_mid_small_ops(t, "bcast");
}

/// Rank 1 killed 200 ms after its barrier while ranks 0 and 2 run small ops (`MP_SMALL`).
fn killed_mid_small_ops(t: Transport, small: &str) {
    let id = UniqueId::new().unwrap();
    let mark = Mark::new("mark");
    let mut kids = Kids::new(t);
    let env = |r: usize| {
        let mut v = ranks_env(&id, 3, &[r]);
        v.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), ("MP_SMALL", small.into()), mark.env()]);
        v
    };
    kids.spawn("rank0", "survivor", &env(0));
    kids.spawn("rank1", "victim", &env(1));
    kids.spawn("rank2", "survivor", &env(2));
    mark.wait(GROUP_DEADLINE, "the victim never passed its barrier");
    std::thread::sleep(std::time::Duration::from_millis(200));
    kids.kill("rank1");
    kids.wait(&["rank1"]);
}

/// Slots asked for by every process but one, which says no (`extra`, set on rank 1 of 3):
/// every rank keeps messages (`MP_SLOTS=0`), and every collective's results are right.
/// `shm_on_1`: whether rank 1 still shares memory with its peers.
fn one_process_says_no(extra: (&'static str, &'static str), shm_on_1: bool) {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(Transport::Slots);
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.push(("MP_SLOTS", "0".into()));
        if !shm_on_1 {
            env.push(("MP_NO_SHM", "1".into()));
        }
        if r == 1 {
            env.extend([(extra.0, extra.1.to_string()), ("MP_SHM", u8::from(shm_on_1).to_string())]);
        }
        kids.spawn(&format!("rank{r}"), "collectives", &env);
    }
    kids.wait(&[]);
}

/// `RUCCL_SHM_DISABLE=1` on one process: its pairs are on TCP, so no rank uses slots.
pub(super) fn shm_disabled_on_one_process_keeps_every_rank_on_messages() {
    one_process_says_no(("RUCCL_SHM_DISABLE", "1"), false);
}

/// `RUCCL_SHM_SLOTS=0` on one process: it does not want slots, so no rank uses them.
pub(super) fn slots_off_on_one_process_keeps_every_rank_on_messages() {
    one_process_says_no(("RUCCL_SHM_SLOTS", "0"), true);
}

/// One process of three on a device that does not keep its memory on the host (as a GPU
/// device): it says no to slots, so every rank keeps messages (before the agreement heard
/// the devices, the others exchanged while it sent messages: both sides timed out).
pub(super) fn a_process_off_host_memory_keeps_every_rank_on_messages() {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(Transport::Slots);
    for r in 0..3 {
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([("MP_RANK", r.to_string()), ("MP_SLOTS", "0".into())]);
        if r == 1 {
            env.push(("MP_OFF_HOST", "1".into()));
        }
        kids.spawn(&format!("rank{r}"), "mixed_devices", &env);
    }
    kids.wait(&[]);
}
