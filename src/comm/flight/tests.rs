//! The board: what readers see of ranks' records.

use super::*;
use crate::op::OpKind;
use crate::types::DType;

/// Entries recorded without the lock (exchanged ops that never waited) read back in the
/// order the ops ran, between locked ones; the newest collective, a lookup by number and
/// the report line see them; a history past its depth keeps the newest.
#[test]
fn quick_entries_read_back_in_order_among_locked_ones() {
    let b = Board::new(2, Duration::from_secs(1));
    let coll = |count| {
        let mut d = OpDesc::new(OpKind::AllReduce, DType::F32, count);
        d.op = Some(crate::types::ReduceOp::Sum);
        d
    };
    let mut send = OpDesc::new(OpKind::Send, DType::U8, 1);
    send.peer = Some(1);
    let quick =
        |seq: u64, count| b.record(0, seq, &coll(count).fingerprint().words(), false, true, crate::clock::coarse_raw());
    quick(0, 1);
    quick(1, 2);
    b.start_at(0, 2, coll(3), Algorithm::Ring, Instant::now());
    b.finish(0, true);
    quick(3, 4);
    b.start_at(0, 0, send, Algorithm::Auto, Instant::now());
    let h = b.history(0);
    let got: Vec<(u64, OpKind, usize, OpState)> = h.iter().map(|e| (e.seq, e.op.kind, e.op.count, e.state)).collect();
    assert_eq!(
        got,
        vec![
            (0, OpKind::AllReduce, 1, OpState::Done),
            (1, OpKind::AllReduce, 2, OpState::Done),
            (2, OpKind::AllReduce, 3, OpState::Done),
            (3, OpKind::AllReduce, 4, OpState::Done),
            (0, OpKind::Send, 1, OpState::Running),
        ]
    );
    assert!(h.iter().take(2).all(|e| e.algorithm == Algorithm::Exchange && e.duration == Some(Duration::ZERO)));
    // The newest collective is the quick #3 (after the locked #2), a send is no collective.
    assert_eq!(b.not_reached(4, &[]), vec![0, 1]);
    assert_eq!(b.not_reached(3, &[]), vec![1]);
    assert_eq!(b.collective_at(0, 1).map(|f| f.desc.count), Some(2));
    assert_eq!(b.collective_at(0, 2).map(|f| f.desc.count), Some(3));
    assert!(b.collective_at(0, 4).is_none());
    assert!(b.report("c", &[]).contains("rank 0: in op #0 send"), "{}", b.report("c", &[]));
    b.finish(0, true);
    quick(4, 5);
    assert!(b.report("c", &[]).contains("last finished op #4 all_reduce(sum, 5 x f32)"), "{}", b.report("c", &[]));
    // Past the depth: the newest FLIGHT_DEPTH of both kinds, in order.
    for seq in 5..5 + FLIGHT_DEPTH as u64 {
        quick(seq, 1);
    }
    let h = b.history(0);
    assert_eq!(h.len(), FLIGHT_DEPTH);
    assert!(h.windows(2).all(|w| w[0].seq < w[1].seq), "in order");
    assert_eq!(h.last().map(|e| e.seq), Some(4 + FLIGHT_DEPTH as u64));
}

#[test]
fn not_reached_counts_collectives_only() {
    let b = Board::new(3, Duration::from_secs(1));
    let (coll, p2p) = (OpDesc::new(OpKind::Barrier, DType::U8, 0), OpDesc::new(OpKind::Send, DType::U8, 1));
    assert_eq!(b.not_reached(0, &[]), vec![0, 1, 2]);
    b.start_at(0, 0, coll, Algorithm::Auto, Instant::now());
    b.finish(0, true);
    b.start_at(0, 1, coll, Algorithm::Auto, Instant::now());
    b.start_at(1, 0, coll, Algorithm::Auto, Instant::now());
    // Rank 2's send #5 is not collective op #5.
    b.start_at(2, 5, p2p, Algorithm::Auto, Instant::now());
    assert_eq!(b.not_reached(0, &[]), vec![2]);
    assert_eq!(b.not_reached(1, &[]), vec![1, 2]);
    assert_eq!(b.warn_after(), Duration::from_secs(1));
}

/// A rank that timed out waiting for a peer that itself waits for a third rank blames the
/// end of that chain (rank 0 waits for 2, which waits for 1), whether the ranks are of this
/// process or answered from others; a rank that never answered ends the chain.
#[test]
fn blame_follows_the_chain_of_waits() {
    let ag = OpDesc::new(OpKind::AllGather, DType::F32, 4);
    let b = Board::new(3, Duration::from_secs(1));
    for r in 0..3 {
        b.start_at(r, 7, ag, Algorithm::Ring, Instant::now());
    }
    b.set_waiting(0, Some("rank 2 to send message 4 of this op".into()));
    b.set_waiting(2, Some("rank 1 to send message 0 of this op".into()));
    let (culprit, why) = b.blame(0, 2, Some(7), &[]);
    assert_eq!(culprit, 1, "{why}");
    assert!(why.contains("rank 2 is stuck in op #7") && why.contains("rank 1 is in op #7"), "{why}");
    assert!(why.ends_with("The waits run 0 -> 2 -> 1: rank 1, at their end, holds the op up"), "{why}");
    // A cycle through this rank stops there, and says so.
    b.set_waiting(1, Some("rank 0 to send message 1 of this op".into()));
    let (culprit, why) = b.blame(0, 2, Some(7), &[]);
    assert_eq!(culprit, 1, "{why}");
    assert!(why.contains("the ranks wait for each other in a cycle"), "{why}");
    assert!(why.ends_with("The waits run 0 -> 2 -> 1 -> 0: a cycle (a deadlock)"), "{why}");

    // Ranks 1 and 2 in other processes: 2 answered, 1 did not.
    let b = Board::with_local(&[true, false, false], Duration::from_secs(1));
    b.start_at(0, 7, ag, Algorithm::Ring, Instant::now());
    let line = "in op #7 all_gather(4 x f32) for 4.0s, waiting for rank 1 to send message 0 of this op";
    let heard = [Heard::parse(2, &heard::encode(Some(7), line))];
    let (culprit, why) = b.blame(0, 2, Some(7), &heard);
    assert_eq!(culprit, 1, "{why}");
    assert!(why.contains("rank 1 (in another process) never answered"), "{why}");
    // Nobody further: the peer itself.
    let heard = [Heard::parse(2, &heard::encode(Some(7), "in op #7 all_gather(4 x f32) for 4.0s"))];
    assert_eq!(b.blame(0, 2, Some(7), &heard).0, 2);
}

/// Consecutive ranks that say the same share one line of the report, and a large world's
/// report stops after a bounded number of lines.
#[test]
fn report_merges_ranks_that_say_the_same() {
    let b = Board::new(5, Duration::from_secs(1));
    let report = b.report("c", &[]);
    assert!(report.ends_with("\n  ranks 0-4: has not issued any operation"), "{report}");
    b.start_at(2, 0, OpDesc::new(OpKind::Barrier, DType::U8, 0), Algorithm::Auto, Instant::now());
    let report = b.report("c", &[]);
    assert!(report.contains("\n  ranks 0-1: has not") && report.contains("\n  rank 2: in op #0 barrier"), "{report}");
    assert!(report.ends_with("\n  ranks 3-4: has not issued any operation"), "{report}");
    // 200 ranks (Miri runs this), every other one in an op: 200 different lines.
    let big = Board::new(200, Duration::from_secs(1));
    for r in (0..200).step_by(2) {
        big.start_at(r, 0, OpDesc::new(OpKind::Barrier, DType::U8, 0), Algorithm::Auto, Instant::now());
    }
    let report = big.report("c", &[]);
    assert_eq!(report.lines().count(), 1 + REPORT_LINES + 1, "{report}");
    assert!(report.ends_with(&format!("... and ranks {REPORT_LINES}-199 (not shown)")), "{report}");
}

/// A failed op's line says how long ago it failed, and when it was issued: an op that failed
/// at its deadline (10 s after it started) read "10.0s ago" just after.
#[test]
fn a_failed_op_reads_when_it_failed() {
    let b = Board::new(1, Duration::from_secs(1));
    let Some(issued) = Instant::now().checked_sub(Duration::from_secs(10)) else { return };
    b.start_at(0, 0, OpDesc::new(OpKind::Barrier, DType::U8, 0), Algorithm::Auto, issued);
    b.finish(0, false);
    let report = b.report("c", &[]);
    assert!(report.contains("rank 0: failed op #0 barrier 0.0s ago (issued 10.0s ago)"), "{report}");
}

/// A rank whose receive finished while the send issued before it still waits for its
/// receiver (sends and receives end in any order) is in that send, not idle: its answer says
/// so, and a peer's blame that reaches it follows its wait. (A ring of three processes, rank 1
/// stopped: rank 2's send to rank 0 timed out and blamed rank 0, which answered "idle; last
/// finished op #25 recv(...), waiting for rank 1 to take message #104 sent to it".)
#[test]
fn a_send_still_waiting_after_a_later_receive_finished_is_followed() {
    let (mut send, mut recv) = (OpDesc::new(OpKind::Send, DType::F32, 4), OpDesc::new(OpKind::Recv, DType::F32, 4));
    (send.peer, recv.peer) = (Some(1), Some(2));
    let b0 = Board::with_local(&[true, false, false], Duration::from_secs(1));
    b0.start_at(0, 25, send, Algorithm::Auto, Instant::now());
    b0.start_at(0, 25, recv, Algorithm::Auto, Instant::now());
    b0.finish_op(0, 25, &recv, true);
    b0.set_waiting(0, Some("rank 1 to take message #104 sent to it".into()));
    let heard = [Heard::parse(0, &b0.answer(0).unwrap())];
    assert!(heard[0].line.starts_with("in op #25 send(4 x f32"), "{}", heard[0].line);
    // Not waiting: the newest entry, as before.
    b0.set_waiting(0, None);
    assert!(Heard::parse(0, &b0.answer(0).unwrap()).line.starts_with("idle; last finished op #25 recv"));

    let b2 = Board::with_local(&[false, false, true], Duration::from_secs(1));
    send.peer = Some(0);
    b2.start_at(2, 26, send, Algorithm::Auto, Instant::now());
    let (culprit, why) = b2.blame(2, 0, None, &heard);
    assert_eq!(culprit, 1, "{why}");
    assert!(why.contains("The waits run 2 -> 0 -> 1"), "{why}");
}
