//! Who a timed-out rank blames: the rank furthest behind when some never reached the
//! collective; otherwise the end of the chain of waits that starts at the peer it waited for
//! (rank 0 waits for rank 2, which waits for rank 1, which is stopped: rank 1).

use std::fmt::Write as _;

use super::{Board, Heard, OpState, state_word};
use crate::op::OpKind;
use crate::types::Rank;

/// How a wait that another rank closes into a cycle is called in a `Timeout`'s message: a
/// rank relaying such an error keeps the hint of the rank that gave up (what to do about the
/// cycle) rather than being told it held the others up.
pub(crate) const DEADLOCK: &str = "a deadlock";

impl Board {
    /// The rank furthest behind among those that never reached collective op `seq` (`me`
    /// aside), and a sentence saying so; `None` when every rank got there. Ranks of other
    /// processes count as what they answered (`heard`), if they did.
    pub(crate) fn behind(&self, me: Rank, seq: u64, heard: &[Heard]) -> Option<(Rank, String)> {
        let behind: Vec<Rank> = self.not_reached(seq, heard).into_iter().filter(|&r| r != me).collect();
        // The furthest behind: the lowest last collective (none at all is lowest).
        let culprit = behind.iter().copied().min_by_key(|&r| self.last_collective(r, heard).flatten())?;
        let list = crate::types::ranks_text(&behind);
        let remote = Heard::of(heard, culprit).map(|h| format!("in another process, it reports: {}", h.line));
        let detail = remote.unwrap_or_else(|| {
            self.seen(culprit, |s| {
                let last = s
                    .last_collective
                    .and_then(|l| s.history.iter().rev().find(|e| e.seq == l && e.op.kind.is_collective()));
                let mut d = match (s.last_collective, last) {
                    (None, _) => "it has not issued any collective".to_string(),
                    (Some(_), Some(e)) => {
                        format!("its last collective is op #{} {}, {}", e.seq, e.op, state_word(e.state))
                    }
                    (Some(l), None) => format!("its last collective is op #{l}"),
                };
                if s.departed {
                    d.push_str(", and it dropped its communicator");
                }
                d.push_str(self.same_thread_note(me, culprit));
                d
            })
            .unwrap_or_default()
        });
        let plural = if behind.len() > 1 { "s" } else { "" };
        Some((
            culprit,
            format!("rank{plural} {list} never reached op #{seq}; rank {culprit} is furthest behind ({detail})"),
        ))
    }

    /// Who to blame when `me`, waiting on `peer` in collective op `seq` (or in a
    /// point-to-point op, `None`), times out: the root cause, not the nearest peer. Returns the
    /// rank and a sentence for the error's headline.
    ///
    /// In a collective, that is the rank furthest behind among those that never reached op
    /// `seq`. When every rank got there (or in a point-to-point op), it is `peer`, described by
    /// what it is doing — including when it is itself waiting for `me` (a deadlock) — or, when
    /// `peer` waits for a third rank, the rank at the end of that chain of waits, each rank on
    /// the way described. Ranks of other processes count as what they answered (`heard`), if
    /// they did.
    pub(crate) fn blame(&self, me: Rank, peer: Rank, seq: Option<u64>, heard: &[Heard]) -> (Rank, String) {
        if let Some(found) = seq.and_then(|seq| self.behind(me, seq, heard)) {
            return found;
        }
        let mut why = self.doing(me, peer, seq, heard, true);
        let mut chain = vec![me, peer];
        while let Some(next) = chain.last().and_then(|&r| self.awaits(r, heard)).filter(|n| !chain.contains(n)) {
            why.push_str("; ");
            why.push_str(&self.doing(me, next, seq, heard, false));
            chain.push(next);
        }
        let culprit = chain.last().copied().unwrap_or(peer);
        if culprit != peer {
            let path = chain.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" -> ");
            // The last rank may wait for one already in the chain: then no rank is at the end.
            match self.awaits(culprit, heard).filter(|n| chain.contains(n)) {
                Some(back) => {
                    let _ = write!(why, ". The waits run {path} -> {back}: a cycle ({DEADLOCK})");
                }
                None => {
                    let _ = write!(why, ". The waits run {path}: rank {culprit}, at their end, holds the op up");
                }
            }
        }
        (culprit, why)
    }

    /// What a blame of `me` adds about `rank` when the thread that made `me`'s call is the
    /// one that made `rank`'s communicator or last called it: one thread making a blocking
    /// call for each of several ranks in turn (`init_all`'s communicators called one after
    /// the other) waits for calls that only it could make. A note, not a verdict: the
    /// communicator may have been handed to a thread that has not called yet.
    fn same_thread_note(&self, me: Rank, rank: Rank) -> &'static str {
        if self.same_thread(me, rank) {
            ", and its communicator was made or last called on this very thread, which is blocked in this call: one \
             thread cannot make a blocking call for each of several ranks in turn (each waits for the others' \
             calls); drive them together with a Group (or the *_async calls), or give each rank a thread of its own"
        } else {
            ""
        }
    }

    /// What `rank` is doing, for the blame of `me` (a sentence naming it). `first`: `rank` is
    /// the peer `me` waited for itself (a wait on `me` is then between the two of them).
    fn doing(&self, me: Rank, rank: Rank, seq: Option<u64>, heard: &[Heard], first: bool) -> String {
        // Read before `rank`'s slot is locked: one slot's lock is never held while another's
        // is taken (two ranks blame each other at once).
        let i_receive = first && self.receiving_from(me, rank);
        let between =
            if first { "the two ranks wait for each other" } else { "the ranks wait for each other in a cycle" };
        self.seen(rank, |s| match (s.current(), s.waiting) {
            (None, _) => format!("rank {rank} has not issued any operation{}", self.same_thread_note(me, rank)),
            (Some(e), Some(w)) if e.state == OpState::Running => {
                // Waits are described as "rank N to ...", N being the awaited rank.
                if w.starts_with(&format!("rank {me} ")) {
                    format!(
                        "rank {rank} is itself waiting, in op #{} {}, for {w}: {between} ({DEADLOCK}: check the \
                         order of sends, receives and collectives on each)",
                        e.seq, e.op
                    )
                } else {
                    format!("rank {rank} is stuck in op #{} {}, waiting for {w}", e.seq, e.op)
                }
            }
            (Some(e), None) if e.state == OpState::Running => {
                format!("rank {rank} is in op #{} {} and not waiting on anyone (busy, or not scheduled)", e.seq, e.op)
            }
            // Its last op waited for this rank and gave up first (a point-to-point wait of
            // both sides on each other, seen by the side whose deadline came second).
            (Some(e), _)
                if seq.is_none()
                    && e.state == OpState::Failed
                    && e.op.kind == OpKind::Recv
                    && e.op.peer == Some(me)
                    && i_receive =>
            {
                format!(
                    "rank {rank} was itself waiting, in op #{} {}, for rank {me} to send, and gave up first{}: the \
                     two ranks waited for each other ({DEADLOCK}: check the order of sends, receives and \
                     collectives on both)",
                    e.seq,
                    e.op,
                    if s.departed { " (it has dropped its communicator since)" } else { "" }
                )
            }
            (Some(e), _) => format!(
                "rank {rank} never got there: its last op is #{} {}, {}{}",
                e.seq,
                e.op,
                state_word(e.state),
                if s.departed { ", and it dropped its communicator" } else { "" }
            ),
        })
        .unwrap_or_else(|| match Heard::of(heard, rank) {
            Some(h) => format!("rank {rank} (in another process) reports: {}", h.line),
            None => format!(
                "rank {rank} (in another process) never answered (its process is stopped, hung or overloaded, or \
                 its host unreachable)"
            ),
        })
    }

    /// The rank `rank` waits for in the op it is running, if it says (its own record, or what
    /// its process answered: "in op #N ..., waiting for rank M to ...").
    fn awaits(&self, rank: Rank, heard: &[Heard]) -> Option<Rank> {
        let parse = |w: &str| w.strip_prefix("rank ").and_then(|w| w.split(' ').next()).and_then(|n| n.parse().ok());
        match self.seen(rank, |s| {
            let running = s.current().is_some_and(|e| e.state == OpState::Running);
            s.waiting.as_deref().filter(|_| running).and_then(parse)
        }) {
            Some(found) => found,
            None => {
                let line = &Heard::of(heard, rank)?.line;
                let w = line.strip_prefix("in op #")?.split_once(", waiting for ")?.1;
                parse(w)
            }
        }
    }

    /// Whether `rank`'s running op is a receive from `peer`.
    fn receiving_from(&self, rank: Rank, peer: Rank) -> bool {
        self.seen(rank, |s| {
            s.current()
                .is_some_and(|e| e.state == OpState::Running && e.op.kind == OpKind::Recv && e.op.peer == Some(peer))
        }) == Some(true)
    }
}
