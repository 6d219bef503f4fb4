//! Unit tests of [`CollectiveError`](super::CollectiveError): its display and context.

use super::*;

#[test]
fn display_names_rank_op_peer_and_hint() {
    let e = CollectiveError::new(ErrorKind::Timeout, "waited 1s for data")
        .with_rank(2)
        .with_op("all_reduce(sum, 4 x f32)")
        .with_seq(7)
        .with_peer(3)
        .with_report("rank 3: idle");
    let s = e.to_string();
    assert!(s.starts_with("rank 2: all_reduce(sum, 4 x f32) (op #7): timeout: waited 1s"), "{s}");
    assert!(s.contains("[peer: rank 3]"), "{s}");
    assert!(s.contains("What to do"), "{s}");
    assert!(s.ends_with("rank 3: idle"), "{s}");
}

#[test]
fn an_error_is_reported_as_the_call_the_user_made() {
    let e = CollectiveError::new(ErrorKind::Timeout, "rank(s) 2 never called Communicator::new")
        .with_op("Communicator::new")
        .called_as("Communicator::new", "Communicator::from_env");
    assert_eq!(e.context().op.as_deref(), Some("Communicator::from_env"));
    assert_eq!(e.message(), "rank(s) 2 never called Communicator::from_env");
    // Another call's label stays.
    let e = CollectiveError::invalid("bad").with_op("barrier").called_as("Communicator::new", "x");
    assert_eq!(e.context().op.as_deref(), Some("barrier"));
}

#[test]
fn debug_is_readable_like_anyhow() {
    let e = CollectiveError::new(ErrorKind::Timeout, "waited 1s for data")
        .with_rank(2)
        .with_op("all_reduce(sum, 4 x f32)")
        .with_seq(7)
        .with_peer(3)
        .with_report("rank 0: done\nrank 3: idle")
        .with_source(std::io::Error::other("socket closed"));
    let d = format!("{e:?}");
    let want = "timeout: waited 1s for data\n\n\
        Context:\n    rank  2\n    op    all_reduce(sum, 4 x f32)\n    \
        seq   7 (the op's number on this communicator)\n    peer  rank 3\n\n\
        What to do: the rank(s) named above held this op up";
    assert!(d.starts_with(want), "{d}");
    assert!(d.contains("\n\nReport:\n    rank 0: done\n    rank 3: idle\n\nCaused by:\n    socket closed"), "{d}");
    assert!(!d.contains("inner"), "no struct dump: {d}");
    // No context, no Context section; the raw dump stays available.
    let bare = format!("{:?}", CollectiveError::invalid("bad shape"));
    assert_eq!(bare, "invalid argument: bad shape\n\nWhat to do: fix the arguments.");
    assert!(format!("{:#?}", CollectiveError::invalid("x")).contains("kind: InvalidArgument"));
}

#[test]
fn usable_communicator_only_where_there_is_one() {
    let plain = CollectiveError::invalid("bad shape").to_string();
    assert!(!plain.contains("communicator"), "{plain}");
    let on_comm = CollectiveError::invalid("root 9").on_usable_communicator().to_string();
    assert!(on_comm.contains("the communicator is still usable"), "{on_comm}");
}

#[test]
fn quoted_has_no_rank_or_hint() {
    let e = CollectiveError::new(ErrorKind::Aborted, "x").with_rank(1).with_op("barrier").with_peer(0);
    assert_eq!(e.quoted(), "barrier: aborted: x [peer: rank 0]");
    assert!(e.to_string().starts_with(&format!("rank 1: {}. What to do", e.quoted())));
}

#[test]
fn context_is_set_once() {
    let e = CollectiveError::invalid("x").with_rank(1).with_rank(2);
    assert_eq!(e.context().rank, Some(1));
    assert_eq!(e.relayed(5).context().rank, Some(5));
}

/// "This rank" in a relayed message is the rank that failed first.
#[test]
fn relayed_messages_name_the_first_rank() {
    let e = CollectiveError::new(ErrorKind::PeerLost, "rank 1 is gone while this rank waited for rank 1")
        .with_rank(0)
        .with_op("barrier")
        .with_peer(1);
    let r = e.relayed(2);
    assert_eq!(r.message(), "rank 0 failed first: in barrier: rank 1 is gone while rank 0 waited for rank 1", "{r}");
    assert_eq!((r.context().rank, r.context().peer), (Some(2), Some(1)));
    assert_eq!(e.relayed(0).message(), "in barrier: rank 1 is gone while this rank waited for rank 1");
    // The first rank's flight recorder is its view ("another process": another than its).
    let t =
        CollectiveError::new(ErrorKind::Timeout, "gave up").with_rank(2).with_report("rank 0: (another process) idle");
    let report = t.relayed(0).report().map(str::to_string).unwrap_or_default();
    assert!(report.starts_with("as rank 2 saw it (\"another process\": another than rank 2's):\nrank 0:"), "{report}");
    assert_eq!(t.relayed(2).report(), Some("rank 0: (another process) idle"));
    // Another rank's bad argument: this rank has nothing to fix.
    let bad = CollectiveError::invalid("root 7 of 2").with_rank(1);
    assert!(
        bad.relayed(0).to_string().ends_with(&format!("What to do: {ANOTHER_RANKS_ARGUMENT}.")),
        "{}",
        bad.relayed(0)
    );
    assert!(bad.relayed(1).to_string().ends_with("What to do: fix the arguments."), "{}", bad.relayed(1));
}
