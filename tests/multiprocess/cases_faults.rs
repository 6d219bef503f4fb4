//! The fault cases stamped out per transport: a peer killed (between ops or mid-stream),
//! stopped, or silent, named by the survivors.

use std::time::Duration;

use ruccl::UniqueId;

use super::GROUP_DEADLINE;
use super::kids::{Kids, Mark, Transport, ranks_env};

pub(super) fn a_killed_peer_is_named_in_peer_lost(t: Transport) {
    let id = UniqueId::new().unwrap();
    let mark = Mark::new("mark");
    let mut kids = Kids::new(t);
    let env = |r: usize| {
        let mut v = ranks_env(&id, 3, &[r]);
        v.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), mark.env()]);
        v
    };
    kids.spawn("rank0", "survivor", &env(0));
    kids.spawn("rank1", "victim", &env(1));
    kids.spawn("rank2", "survivor", &env(2));
    mark.wait(GROUP_DEADLINE, "the victim never passed its barrier");
    std::thread::sleep(Duration::from_millis(200));
    kids.kill("rank1");
    kids.wait(&["rank1"]);
}

/// Starts `world` ranks that stream large messages (`op`, see `streamer_child`; `from` sends
/// in `p2p`), waits until `victim` has done a few rounds, kills it at a varying moment of the
/// next ones, and checks the survivors.
pub(super) fn kill_mid_stream(t: Transport, world: usize, op: &str, from: usize, victim: usize) {
    let mut kids = streaming(t, world, op, from, victim, &[]);
    kids.kill(&format!("rank{victim}"));
    kids.wait(&[&format!("rank{victim}")]);
}

/// A receiver stopped (`SIGSTOP`) while it reads what its sender lent or queued: the
/// sender's `Timeout` names it and comes on time. It came 10 s late over shared memory: the
/// failed op waited that long for the stopped reader to finish (a stranger's review).
pub(super) fn a_receiver_stopped_mid_recv_times_out_on_time(t: Transport) {
    let extra = [("RUCCL_TIMEOUT", "2"), ("RUCCL_PEER_SILENCE", "60"), ("MP_STOPPED", "1")];
    let mut kids = streaming(t, 2, "p2p", 0, 1, &extra);
    kids.stop("rank1");
    kids.wait_for(&["rank0"]);
}

/// Starts `world` ranks that stream large messages (`op`, see `streamer_child`; `from` sends
/// in `p2p`; `extra` set for every rank), and returns once `victim` has done a few rounds,
/// at a varying moment of the next ones.
fn streaming(t: Transport, world: usize, op: &str, from: usize, victim: usize, extra: &[(&str, &str)]) -> Kids {
    let id = UniqueId::new().unwrap();
    let mark = Mark::new("mark");
    let mut kids = Kids::new(t);
    for r in 0..world {
        let mut env = ranks_env(&id, world, &[r]);
        env.extend([
            ("MP_RANK", r.to_string()),
            ("MP_OP", op.to_string()),
            ("MP_FROM", from.to_string()),
            ("MP_VICTIM", victim.to_string()),
            mark.env(),
            ("RUCCL_CHUNK_BYTES", (4 << 20).to_string()),
        ]);
        env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        kids.spawn(&format!("rank{r}"), "streamer", &env);
    }
    mark.wait(GROUP_DEADLINE, "the victim never did its first rounds");
    // A rank spends most of a round in reads of 4 MiB: a kill at any moment likely lands in one.
    let jitter = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_micros() % 20_000;
    std::thread::sleep(Duration::from_micros(u64::from(jitter)));
    kids
}

/// A peer killed while all_gathers and broadcasts of 8 MiB per rank cross the 3 processes:
/// the survivors were reading its lent memory, and it theirs.
pub(super) fn a_peer_killed_mid_all_gather_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 3, "all_gather", 0, 1);
}

/// A sender killed while the receiver reads what it lent.
pub(super) fn a_sender_killed_mid_send_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 2, "p2p", 1, 1);
}

/// A receiver killed while it reads the sender's lent memory: the sender's buffer is free again.
pub(super) fn a_receiver_killed_mid_recv_is_named_in_peer_lost(t: Transport) {
    kill_mid_stream(t, 2, "p2p", 0, 1);
}

/// A peer process that stops answering without closing its connections (stopped with
/// `SIGSTOP`, as a hung host would): no heartbeat comes for `RUCCL_PEER_SILENCE` (1 s here),
/// and the survivor fails with `PeerLost` naming it, long before the op's timeout (20 s).
pub(super) fn a_stopped_peer_is_named_in_peer_lost(t: Transport) {
    let mark = Mark::new("mark");
    let mut kids = against_a_victim(t, "survivor", &mark, &[("RUCCL_PEER_SILENCE", "1"), ("MP_SILENT", "1")]);
    mark.wait(GROUP_DEADLINE, "the victim never passed its barrier");
    kids.stop("rank1");
    kids.wait_for(&["rank0"]);
}

/// A peer stopped (`SIGSTOP`) while its silence limit is far off: the survivor's `Timeout`
/// names it and comes on time, rather than after a wait for the flight recorder the stopped
/// process cannot send (it came a second late).
pub(super) fn a_stopped_peer_times_out_on_time(t: Transport) {
    let mark = Mark::new("mark");
    let extra = [("RUCCL_TIMEOUT", "2"), ("RUCCL_PEER_SILENCE", "60")];
    let mut kids = against_a_victim(t, "stopped_waiter", &mark, &extra);
    mark.wait(GROUP_DEADLINE, "the victim never passed its barrier");
    kids.stop("rank1");
    kids.wait_for(&["rank0"]);
}

/// Three ranks, the middle one stopped (`SIGSTOP`) inside a large all_gather: both others
/// name it in their `Timeout`, the one whose ring neighbour waits for it too (it named that
/// neighbour, which was there and waiting, as the rank that "never reached this point").
pub(super) fn a_stopped_rank_is_named_at_the_end_of_the_chain_of_waits(t: Transport) {
    let mark = Mark::new("mark");
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for r in 0..3 {
        let role = if r == 1 { "victim" } else { "stopped_waiter" };
        let mut env = ranks_env(&id, 3, &[r]);
        env.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), ("MP_BIG", "1".into()), mark.env()]);
        env.extend([("RUCCL_TIMEOUT", "2".to_string()), ("RUCCL_PEER_SILENCE", "60".to_string())]);
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    mark.wait(GROUP_DEADLINE, "the victim never passed its barrier");
    kids.stop("rank1");
    kids.wait_for(&["rank0", "rank2"]);
}

/// A rank stopped (`SIGSTOP`: it stops itself) before it called a small op, which its peer
/// then failed at its deadline, and continued after: its op fails too. It returned `Ok`,
/// finishing from the part its peer had published in the exchange slots, and heard of the
/// failure only at its next op. (Whether it did so without the fix is a race between its
/// thread and its reader thread, which hears of the failure: seen in a 3-process run stopped
/// from outside, rarely here.)
pub(super) fn a_late_rank_fails_the_op_its_peer_failed(t: Transport) {
    late_rank(t, &[]);
}

/// A rank stopped while it waits inside an op, past its deadline, and continued once its
/// peer failed the op (naming it) and left: it reports that failure, not a `Timeout` that
/// blames the peer it waited for (the peer's abort was on its connection, unread, when its
/// wait woke past the deadline).
pub(super) fn a_rank_stopped_inside_an_op_hears_its_peer_failed_first(t: Transport) {
    late_rank(t, &[("MP_INSIDE", "1"), ("MP_DELAY_MS", "1000"), ("MP_BCAST", "1")]);
}

/// As [`a_rank_stopped_inside_an_op_hears_its_peer_failed_first`], with rank 0 failing the op
/// at the peer-silence limit (1 s, before its 2 s deadline): rank 1, continued, finds its own
/// limit on rank 0's connection passed too, with rank 0's heartbeats and abort unread. It
/// reports rank 0's failure, not rank 0 gone silent (a stranger's review: 3 runs in 4).
pub(super) fn a_rank_stopped_past_the_silence_limit_hears_its_peer_failed_first(t: Transport) {
    late_rank(
        t,
        &[
            ("MP_INSIDE", "1"),
            ("MP_DELAY_MS", "1000"),
            ("MP_BCAST", "1"),
            ("MP_SILENCE_FAILS", "1"),
            ("RUCCL_PEER_SILENCE", "1"),
        ],
    );
}

/// Rank 0 (`stopped_waiter`) fails its op at its deadline, waiting for rank 1 (`late`), which
/// stops itself; rank 1 is continued once rank 0 is done. `extra` set for both.
fn late_rank(t: Transport, extra: &[(&'static str, &str)]) {
    let mark = Mark::new("mark");
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for (r, role) in [(0, "stopped_waiter"), (1, "late")] {
        let mut env = ranks_env(&id, 2, &[r]);
        env.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), mark.env()]);
        env.extend([("RUCCL_TIMEOUT", "2".to_string()), ("RUCCL_PEER_SILENCE", "60".to_string())]);
        env.extend(extra.iter().map(|&(k, v)| (k, v.to_string())));
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    mark.wait(GROUP_DEADLINE, "the late rank never passed its barrier");
    kids.wait_for(&["rank0"]);
    kids.cont("rank1");
    kids.wait_for(&["rank1"]);
}

/// A peer process that is alive but never calls the collective: named in the warnings of the
/// slow wait and in the `Timeout`, from what its process answers when asked.
pub(super) fn a_silent_peer_is_named_in_the_timeout(t: Transport) {
    let mark = Mark::new("mark");
    // A timeout of 4 s: the report waits a twentieth of it (200 ms) for the victim's answer,
    // which a loaded machine took more than 100 ms to send.
    let mut kids = against_a_victim(t, "waiter", &mark, &[("RUCCL_TIMEOUT", "4"), ("RUCCL_WARN_AFTER", "0.5")]);
    kids.wait_for(&["rank0"]);
}

/// Starts rank 0 as `role` and rank 1 as a `victim` (2 ranks), with `extra` set for both.
fn against_a_victim(t: Transport, role: &str, mark: &Mark, extra: &[(&'static str, &str)]) -> Kids {
    let id = UniqueId::new().unwrap();
    let mut kids = Kids::new(t);
    for (r, role) in [(0, role), (1, "victim")] {
        let mut env = ranks_env(&id, 2, &[r]);
        env.extend([("MP_RANK", r.to_string()), ("MP_VICTIM", "1".into()), mark.env()]);
        env.extend(extra.iter().map(|&(k, v)| (k, v.to_string())));
        kids.spawn(&format!("rank{r}"), role, &env);
    }
    kids
}
