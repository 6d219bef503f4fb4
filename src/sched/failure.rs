//! What a rank reports when another rank failed first. The poison a failed rank leaves on the
//! link carries the sequence number of the collective that failed; comparing it with where
//! this rank stands tells the three cases apart:
//!
//! | this rank is... | it reports |
//! |---|---|
//! | in that same op (or arrives at it late), or the rank the first one named as its peer | the original error (`Mismatch` naming both sides, `Timeout` naming the rank that never came) |
//! | past it: the op returned `Ok` here because nothing this rank exchanged disagreed | the original error's kind on its next call, naming the earlier op |
//! | behind it, or in a point-to-point op | `Aborted`, naming the op that failed and the rank that failed first |
//!
//! Except for `PeerLost`: a process that is gone is gone for every op, so a rank past or
//! behind the op reports `PeerLost` too, naming the lost rank (and, in words, the rank that
//! saw it first).

use crate::error::{CollectiveError, ErrorKind};
use crate::types::Rank;

/// Where a rank stands when it finds the link poisoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Now {
    /// In (or entering) collective op number `seq`.
    Collective(u64),
    /// Running a point-to-point op that may be the one that failed.
    P2p,
    /// About to start a new point-to-point op.
    NewP2p,
}

/// How `rank`, standing at `now`, reports `first`, the error the link was poisoned with.
pub(crate) fn after_failure(first: &CollectiveError, rank: Rank, now: Now) -> CollectiveError {
    let ctx = first.context();
    let origin = ctx.rank.filter(|&r| r != rank);
    if first.kind() == ErrorKind::Aborted && ctx.seq.is_none() {
        // `abort()`: its message already says who called it.
        let e = CollectiveError::new(ErrorKind::Aborted, first.message())
            .with_rank(rank)
            .with_hint("create a new communicator (this one was aborted by abort() on the rank named above)");
        return match origin {
            Some(o) => e.with_peer(o),
            None => e,
        };
    }
    let what = match (ctx.op.as_deref(), ctx.seq) {
        (Some(op), Some(s)) => format!("op #{s} {op}"),
        (Some(op), None) => op.to_string(),
        (None, Some(s)) => format!("op #{s}"),
        (None, None) => "an earlier op".to_string(),
    };
    let who = origin.map_or_else(|| "this rank".to_string(), |o| format!("rank {o}"));
    // "This rank" in the first rank's message is that rank, not this one.
    let quoted = match origin {
        Some(o) => first.message().replace("this rank", &format!("rank {o}")),
        None => first.message().to_string(),
    };
    if ctx.peer == Some(rank) && now != Now::NewP2p {
        // The rank that failed first named this one: it is involved whatever op it is in.
        return first.relayed(rank);
    }
    let out = match (ctx.seq, now) {
        (Some(s), Now::Collective(c)) if s == c => return first.relayed(rank),
        (None, Now::P2p) => return first.relayed(rank),
        // A process that is gone is gone for every op: a rank past or behind the one that
        // failed names it too, as `PeerLost` (the communicator cannot go on without it).
        _ if first.kind() == ErrorKind::PeerLost
            && let Some(lost) = ctx.peer.filter(|&p| p != rank) =>
        {
            let out = CollectiveError::new(ErrorKind::PeerLost, format!("{who} saw it first, in {what}: {quoted}"));
            return out.with_rank(rank).with_peer(lost);
        }
        (Some(s), Now::Collective(c)) if s < c => CollectiveError::new(
            first.kind(),
            format!(
                "{what} failed on {who} after it had finished on this rank (nothing this rank exchanged in it \
                 disagreed): {quoted}"
            ),
        ),
        _ => CollectiveError::new(
            ErrorKind::Aborted,
            format!("cut short: {who} failed first, in {what}: {}: {quoted}", first.kind()),
        ),
    };
    let out = out.with_rank(rank);
    match origin {
        Some(o) => out.with_peer(o),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mismatch_at(seq: u64) -> CollectiveError {
        CollectiveError::new(ErrorKind::Mismatch, "rank 1 called broadcast(root 1)")
            .with_rank(0)
            .with_peer(1)
            .with_op("broadcast(4 x f32, root 0)")
            .with_seq(seq)
    }

    #[test]
    fn same_op_relays_past_op_keeps_kind_earlier_op_is_aborted() {
        let e = mismatch_at(5);
        assert_eq!(after_failure(&e, 2, Now::Collective(5)).kind(), ErrorKind::Mismatch);
        let past = after_failure(&e, 2, Now::Collective(6));
        assert_eq!(past.kind(), ErrorKind::Mismatch);
        assert!(past.message().contains("op #5 broadcast"), "{past}");
        let behind = after_failure(&e, 2, Now::Collective(4));
        assert_eq!(behind.kind(), ErrorKind::Aborted);
        assert!(behind.message().contains("rank 0 failed first, in op #5"), "{behind}");
        assert_eq!(behind.context().peer, Some(0));
        assert_eq!(after_failure(&e, 2, Now::P2p).kind(), ErrorKind::Aborted);
    }

    /// "This rank" in the message of the rank that failed first is that rank: quoted by a
    /// rank past or behind the op, it read as the quoting rank ("failed on rank 0 after it
    /// had finished on this rank: ... but this rank expects 8 x f32", this rank being rank 0).
    #[test]
    fn a_quoted_message_names_the_rank_that_failed_first() {
        let e = CollectiveError::new(ErrorKind::Mismatch, "rank 1 sends this rank 0 x f32, but this rank expects 8")
            .with_rank(0)
            .with_peer(1)
            .with_op("all_to_all(24 x f32)")
            .with_seq(0);
        for now in [Now::Collective(1), Now::P2p] {
            let got = after_failure(&e, 2, now);
            assert!(got.message().contains("rank 1 sends rank 0 0 x f32, but rank 0 expects 8"), "{got}");
        }
        let got = after_failure(&e, 2, Now::Collective(1));
        assert!(got.message().contains("after it had finished on this rank"), "{got}");
        // The rank's own failure keeps its own words.
        let own = CollectiveError::new(ErrorKind::Mismatch, "but this rank expects 8").with_rank(2).with_seq(0);
        let own = after_failure(&own, 2, Now::Collective(1));
        assert!(own.message().contains("but this rank expects 8"), "{own}");
    }

    #[test]
    fn abort_and_p2p_failures() {
        let a = CollectiveError::new(ErrorKind::Aborted, "rank 3 called abort()").with_rank(3);
        let got = after_failure(&a, 1, Now::Collective(0));
        assert_eq!(got.kind(), ErrorKind::Aborted);
        assert_eq!(got.message(), "rank 3 called abort()");
        let p = CollectiveError::new(ErrorKind::Mismatch, "count differs").with_rank(0).with_peer(1);
        assert_eq!(after_failure(&p, 1, Now::P2p).kind(), ErrorKind::Mismatch);
        assert_eq!(after_failure(&p, 1, Now::NewP2p).kind(), ErrorKind::Aborted);
        // The rank the failure names is involved, whatever it runs now; others are not.
        assert_eq!(after_failure(&p, 1, Now::Collective(3)).kind(), ErrorKind::Mismatch);
        assert_eq!(after_failure(&p, 2, Now::Collective(3)).kind(), ErrorKind::Aborted);
        // A relayed error never names the reporting rank as its own peer.
        assert_eq!(after_failure(&p, 1, Now::P2p).context().peer, Some(0));
    }

    #[test]
    fn a_lost_peer_is_named_by_every_rank_whatever_op_it_stands_in() {
        let lost = CollectiveError::new(ErrorKind::PeerLost, "rank 1 is gone").with_rank(2).with_peer(1).with_seq(7);
        for now in [Now::Collective(6), Now::Collective(7), Now::Collective(8), Now::P2p, Now::NewP2p] {
            let got = after_failure(&lost, 0, now);
            assert_eq!((got.kind(), got.context().peer), (ErrorKind::PeerLost, Some(1)), "{now:?}: {got}");
            assert!(got.message().contains("rank 1 is gone"), "{got}");
        }
        assert!(after_failure(&lost, 0, Now::Collective(6)).message().contains("rank 2 saw it first, in op #7"));
        // Without a lost rank to name, a rank behind is cut short as for any other failure.
        let anon = CollectiveError::new(ErrorKind::PeerLost, "a peer is gone").with_rank(2).with_seq(7);
        assert_eq!(after_failure(&anon, 0, Now::Collective(6)).kind(), ErrorKind::Aborted);
    }
}
