//! The flight recorder: every rank's recent operations and what it is waiting for, kept where
//! every rank of the communicator can read it, so that a hang is reported as "rank 3 never
//! reached op #17" instead of silence.

mod blame;
pub(crate) use blame::DEADLOCK;
pub(crate) mod heard;
mod quick;
mod ring;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::Algorithm;
use crate::op::{Fingerprint, OpDesc, OpKind};
use crate::transport::slots::FP_WORDS;
use crate::types::Rank;
use heard::Heard;
use quick::QuickRing;

/// How many operations each rank remembers (at least as many as a rank may run ahead of
/// its peers through exchange slots).
pub const FLIGHT_DEPTH: usize = 128;

/// The most lines a timeout's report shows (after merging ranks that say the same).
const REPORT_LINES: usize = 64;

/// The state of a recorded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpState {
    /// Issued and not finished.
    Running,
    /// Finished successfully.
    Done,
    /// Finished with an error.
    Failed,
}

/// One recorded operation.
///
/// ```
/// use ruccl::{Communicator, HostDevice, UniqueId};
/// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
/// comm.barrier()?;
/// let rec = comm.flight_recorder();
/// assert_eq!(rec.last().unwrap().op.kind.name(), "barrier");
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Debug)]
pub struct FlightEntry {
    /// Sequence number (collective counter, or per-pair counter for send/recv).
    pub seq: u64,
    /// What was called.
    pub op: OpDesc,
    /// The algorithm that ran.
    pub algorithm: Algorithm,
    /// Where it stands.
    pub state: OpState,
    /// When it was issued. A small op exchanged through shared slots that never waited is
    /// entered once it is over (one clock read instead of two on a sub-microsecond path):
    /// its `started` is when it ended and its `duration` zero.
    pub started: Instant,
    /// How long it took, once finished.
    pub duration: Option<Duration>,
}

/// A recorded op as the board keeps it: the entry, and when it ended. Its `duration` is
/// worked out when the history is read, which keeps a clock subtraction off every op's path.
#[derive(Clone, Debug)]
struct Rec {
    e: FlightEntry,
    ended: Option<Instant>,
    /// How many quick entries of the rank came before it (where they go when read).
    quick_before: u64,
}

impl std::ops::Deref for Rec {
    type Target = FlightEntry;
    fn deref(&self) -> &FlightEntry {
        &self.e
    }
}

impl Rec {
    /// A quick entry as a record: an exchanged op that ended without waiting.
    fn quick(q: &quick::Quick) -> Self {
        let state = if q.ok { OpState::Done } else { OpState::Failed };
        Rec {
            e: FlightEntry {
                seq: q.seq,
                op: q.op,
                algorithm: Algorithm::Exchange,
                state,
                started: q.at,
                duration: None,
            },
            ended: Some(q.at),
            quick_before: 0,
        }
    }

    /// The entry as callers see it.
    fn entry(&self) -> FlightEntry {
        let mut e = self.e.clone();
        if let Some(t) = self.ended {
            e.duration = Some(t.saturating_duration_since(e.started));
        }
        e
    }
}

#[derive(Debug, Default)]
struct RankStatus {
    history: ring::Ring<Rec>,
    /// The sequence number of the latest collective issued through the lock, and how many
    /// quick entries came before it (kept apart from `history`, which point-to-point ops may
    /// have filled).
    last_collective: Option<(u64, u64)>,
    waiting: Option<String>,
    departed: bool,
}

/// What a reader sees of one rank: its history with the quick entries in their places, and
/// its status (see [`Board::seen`]).
struct Seen<'a> {
    /// Oldest first, at most [`FLIGHT_DEPTH`].
    history: Vec<Rec>,
    last_collective: Option<u64>,
    waiting: &'a Option<String>,
    departed: bool,
}

impl Seen<'_> {
    /// The entry of the op the rank stands in: its newest, or, when that one is over while
    /// the rank still waits, the newest entry still running before it. Sends and receives
    /// end in any order: a receive issued after a send may finish while the send still waits
    /// for its receiver, and the rank is then in that send, not idle (a peer blaming it must
    /// follow its wait to the rank it waits for).
    fn current(&self) -> Option<&Rec> {
        let last = self.history.last()?;
        if last.state != OpState::Running && self.waiting.is_some() {
            return self.history.iter().rev().find(|r| r.state == OpState::Running).or(Some(last));
        }
        Some(last)
    }
}

impl RankStatus {
    /// The history as a reader sees it: the locked records and `quick`'s entries, merged in
    /// the order they were made (each locked record knows how many quick entries came before
    /// it), the newest [`FLIGHT_DEPTH`] of them.
    fn seen(&self, quick: &QuickRing) -> Seen<'_> {
        let recent = quick.recent();
        let mut history = Vec::with_capacity(self.history.len() + recent.len());
        let mut q = recent.iter().peekable();
        for r in self.history.iter() {
            while let Some((_, e)) = q.next_if(|(j, _)| *j < r.quick_before) {
                history.push(Rec::quick(e));
            }
            history.push(r.clone());
        }
        history.extend(q.map(|(_, e)| Rec::quick(e)));
        let drop = history.len().saturating_sub(FLIGHT_DEPTH);
        history.drain(..drop);
        // The newest collective: a quick entry (every one is a collective) made after the
        // newest locked one, or that one.
        let last_collective = match (recent.last(), self.last_collective) {
            (Some((j, e)), Some((_, before))) if *j >= before => Some(e.seq),
            (Some((_, e)), None) => Some(e.seq),
            (_, locked) => locked.map(|(seq, _)| seq),
        };
        Seen { history, last_collective, waiting: &self.waiting, departed: self.departed }
    }
}

/// Every rank's status, shared by the ranks of one communicator.
/// One rank's status, on cache lines of its own: every rank writes its own at every op, and
/// neighbours sharing a line would make each op wait for the other thread's core.
/// Beside the locked status, the rank's quick entries: written without the lock, merged
/// with the locked records when read.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    status: Mutex<RankStatus>,
    quick: QuickRing,
    /// The thread that last entered a call of the rank, or made its communicator
    /// (`caller::token`; 0: none yet): a timeout blaming the rank says when that is the
    /// thread that made the waiting rank's call ([`Board::same_thread`]).
    thread: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Board {
    /// Per rank; `None` for a rank of another process (its state is not known here).
    /// Shared with the views that answer other processes ([`view`](Self::view)).
    ranks: Arc<[Option<Slot>]>,
    /// How long a wait lasts before it logs which ranks are behind (see `comm::watch`).
    warn_after: Duration,
}

impl Board {
    pub(crate) fn new(world: usize, warn_after: Duration) -> Self {
        Board { ranks: (0..world).map(|_| Some(Slot::default())).collect(), warn_after }
    }

    /// A board for a group spanning processes: `local[r]` whether rank `r` is of this one.
    /// What the others did is known only from what they answer when a timeout asks them
    /// ([`Heard`], passed to [`blame`](Self::blame), [`report`](Self::report) and
    /// [`not_reached`](Self::not_reached)).
    pub(crate) fn with_local(local: &[bool], warn_after: Duration) -> Self {
        let ranks = local.iter().map(|&l| l.then(Slot::default)).collect();
        Board { ranks, warn_after }
    }

    /// Another handle on the same ranks' records (what a peer process's question is answered
    /// from, on the transport's reader threads).
    pub(crate) fn view(&self) -> Board {
        Board { ranks: self.ranks.clone(), warn_after: self.warn_after }
    }

    /// The ranks of other processes (whose state is known only from what they answer).
    pub(crate) fn remote_ranks(&self) -> Vec<Rank> {
        (0..self.ranks.len()).filter(|&r| self.ranks[r].is_none()).collect()
    }

    /// How long a wait lasts before it logs which ranks are behind.
    pub(crate) fn warn_after(&self) -> Duration {
        self.warn_after
    }

    /// Notes that thread `t` ([`caller::token`](super::caller::token)) made `rank`'s
    /// communicator or entered one of its calls (a load, and a store when the thread
    /// changed).
    #[inline]
    pub(crate) fn note_thread(&self, rank: Rank, t: u64) {
        if let Some(slot) = self.slot(rank)
            && slot.thread.load(std::sync::atomic::Ordering::Relaxed) != t
        {
            slot.thread.store(t, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether `rank` (of this process) was last used, or made, on the thread that made
    /// `me`'s latest call (the thread waiting for `me`'s op, whichever thread drives it).
    pub(crate) fn same_thread(&self, me: Rank, rank: Rank) -> bool {
        let thread = |r: Rank| self.slot(r).map(|s| s.thread.load(std::sync::atomic::Ordering::Relaxed));
        thread(me).is_some_and(|t| t != 0 && thread(rank) == Some(t))
    }

    /// `rank`'s slot (`None` for a rank of another process, or past the world).
    fn slot(&self, rank: Rank) -> Option<&Slot> {
        self.ranks.get(rank).and_then(Option::as_ref)
    }

    /// `f` on `rank`'s locked status, and how many quick entries it has made so far (what a
    /// record pushed now comes after).
    fn with<R>(&self, rank: Rank, f: impl FnOnce(&mut RankStatus, u64) -> R) -> Option<R> {
        let slot = self.slot(rank)?;
        let mut s = slot.status.lock().unwrap_or_else(|e| e.into_inner());
        Some(f(&mut s, slot.quick.written()))
    }

    /// `f` on what a reader sees of `rank` ([`Seen`]: the quick entries merged in).
    fn seen<R>(&self, rank: Rank, f: impl FnOnce(&Seen<'_>) -> R) -> Option<R> {
        let slot = self.slot(rank)?;
        let s = slot.status.lock().unwrap_or_else(|e| e.into_inner());
        Some(f(&s.seen(&slot.quick)))
    }

    /// Starts `rank`'s entry for op `seq` at `now`, a time the caller read (one clock read
    /// for a whole group, or for an op's deadline and its entry).
    pub(crate) fn start_at(&self, rank: Rank, seq: u64, op: OpDesc, algorithm: Algorithm, now: Instant) {
        self.with(rank, |s, quick_before| {
            if op.kind.is_collective() {
                s.last_collective = Some((seq, quick_before));
            }
            s.history.push(Rec {
                e: FlightEntry { seq, op, algorithm, state: OpState::Running, started: now, duration: None },
                ended: None,
                quick_before,
            });
        });
    }

    /// Records `rank`'s exchanged op `seq` (its fingerprint `words`) at once as over (`ok` or
    /// failed), at `now` (a [`coarse_raw`](crate::clock::coarse_raw) reading): the one entry
    /// of an exchanged op that never waited (such an op ends within a microsecond or so of its
    /// start), written without a lock ([`QuickRing`]) and merged with the locked records when
    /// read. Only the thread running `rank`'s ops calls it.
    #[inline]
    pub(crate) fn record(&self, rank: Rank, seq: u64, words: &[u64; FP_WORDS], in_place: bool, ok: bool, now: u64) {
        if let Some(slot) = self.slot(rank) {
            slot.quick.push(seq, words, in_place, ok, now);
        }
    }

    pub(crate) fn finish(&self, rank: Rank, ok: bool) {
        self.finish_at(rank, ok, Instant::now());
    }

    /// [`finish`](Self::finish) of `rank`'s op `seq` (`op`), which need not be its newest
    /// entry: sends and receives that move together end in any order.
    pub(crate) fn finish_op(&self, rank: Rank, seq: u64, op: &OpDesc, ok: bool) {
        let now = Instant::now();
        self.with(rank, |s, _| {
            let same = |r: &Rec| r.e.seq == seq && r.e.op.kind == op.kind && r.e.op.peer == op.peer;
            // Usually the newest entry; a few back at most (a stage of sends and receives).
            if let Some(r) = s.history.newest_where(64, |r| r.e.state == OpState::Running && same(r)) {
                r.e.state = if ok { OpState::Done } else { OpState::Failed };
                r.ended = Some(now);
            }
            s.waiting = None;
        });
    }

    /// [`finish`](Self::finish) at a time the caller read.
    pub(crate) fn finish_at(&self, rank: Rank, ok: bool, now: Instant) {
        self.finish_with(rank, ok, |r| r.ended = Some(now));
    }

    /// [`finish`](Self::finish) of an entry that started when the caller read it and has
    /// taken `took` since (a group's ranks all start at one time: one duration for all).
    pub(crate) fn finish_after(&self, rank: Rank, ok: bool, took: Duration) {
        self.finish_with(rank, ok, |r| r.e.duration = Some(took));
    }

    fn finish_with(&self, rank: Rank, ok: bool, took: impl FnOnce(&mut Rec)) {
        self.with(rank, |s, _| {
            s.waiting = None;
            if let Some(r) = s.history.back_mut() {
                r.e.state = if ok { OpState::Done } else { OpState::Failed };
                took(r);
            }
        });
    }

    pub(crate) fn set_waiting(&self, rank: Rank, what: Option<String>) {
        self.with(rank, |s, _| s.waiting = what);
    }

    pub(crate) fn depart(&self, rank: Rank) {
        self.with(rank, |s, _| s.departed = true);
    }

    pub(crate) fn history(&self, rank: Rank) -> Vec<FlightEntry> {
        self.seen(rank, |s| s.history.iter().map(Rec::entry).collect()).unwrap_or_default()
    }

    /// What `peer` called as collective op `seq`, if it got that far and still remembers.
    pub(crate) fn collective_at(&self, peer: Rank, seq: u64) -> Option<Fingerprint> {
        let slot = self.slot(peer)?;
        let s = slot.status.lock().unwrap_or_else(|e| e.into_inner());
        let locked = s.history.iter().rev().find(|e| e.seq == seq && e.op.kind.is_collective());
        locked.map(|e| e.op).or_else(|| slot.quick.find(seq).map(|q| q.op)).map(|d| d.fingerprint())
    }

    /// The point-to-point op with `me` that `rank` is running now and that `me` has not
    /// issued its side of, if any: a send or receive `me` cannot be taking part in while it runs
    /// a collective. A send `me` already received (or a receive `me` already sent to) is being
    /// finished by `rank`, not mismatched. When `me`'s recorded history is full and holds no
    /// side of it, nothing can be told (`None`): the op's timeout still names `rank`.
    pub(crate) fn p2p_unmatched_with(&self, rank: Rank, me: Rank) -> Option<OpDesc> {
        // Looked up in the locked records alone (a wait's check, run often: no merge): a
        // send or receive is never a quick entry, and one with quick entries after it is not
        // the rank's newest op.
        let (seq, theirs) = self
            .with(rank, |s, quick| {
                s.history
                    .iter()
                    .next_back()
                    .filter(|e| e.quick_before == quick)
                    .filter(|e| e.state == OpState::Running && !e.op.kind.is_collective() && e.op.peer == Some(me))
                    .map(|e| (e.seq, e.op))
            })
            .flatten()?;
        let mirror = match theirs.kind {
            OpKind::Send => OpKind::Recv,
            OpKind::Recv => OpKind::Send,
            _ => return None,
        };
        (self.issued_p2p(me, mirror, rank, seq) == Some(false)).then_some(theirs)
    }

    /// Whether `me` issued its `kind` (a send or receive) numbered `seq` with `peer`; `None`
    /// when nothing can be told (an unknown rank, or a full recorded history that holds no
    /// such op: older records are gone).
    pub(crate) fn issued_p2p(&self, me: Rank, kind: OpKind, peer: Rank, seq: u64) -> Option<bool> {
        self.with(me, |s, quick| {
            let found = s.history.iter().any(|e| e.op.kind == kind && e.op.peer == Some(peer) && e.seq == seq);
            (found || (s.history.len() as u64 + quick) < FLIGHT_DEPTH as u64).then_some(found)
        })?
    }

    /// The number of the next collective `rank` issues (none issued yet: 0); `None` for a
    /// rank of another process.
    pub(crate) fn next_collective(&self, rank: Rank) -> Option<u64> {
        self.seen(rank, |s| s.last_collective.map_or(0, |l| l + 1))
    }

    /// Whether `rank` lives in another process (its calls are not on this board).
    pub(crate) fn is_remote(&self, rank: Rank) -> bool {
        self.ranks.get(rank).is_some_and(Option::is_none)
    }

    /// The ranks that have not issued collective op `seq` yet (in rank order): the ones a
    /// rank waiting in that op is waiting for.
    /// Ranks of other processes are among them when they answered so (`heard`).
    pub(crate) fn not_reached(&self, seq: u64, heard: &[Heard]) -> Vec<Rank> {
        (0..self.ranks.len())
            .filter(|&r| self.last_collective(r, heard).is_some_and(|l| l.is_none_or(|l| l < seq)))
            .collect()
    }

    /// The number of `rank`'s last collective (`Some(None)`: none yet), from its slot or
    /// what it answered; `None` when not known.
    fn last_collective(&self, rank: Rank, heard: &[Heard]) -> Option<Option<u64>> {
        self.seen(rank, |s| s.last_collective).or_else(|| Heard::of(heard, rank).map(|h| h.last_collective))
    }

    /// What `rank` answers a peer of another process that asks (a [`Heard`], encoded);
    /// `None` for a rank this board does not know.
    pub(crate) fn answer(&self, rank: Rank) -> Option<Vec<u8>> {
        let last = self.seen(rank, |s| s.last_collective)?;
        Some(heard::encode(last, &self.line(rank, Instant::now())?))
    }

    /// A per-rank summary for hang reports; ranks of other processes as they answered
    /// (`heard`).
    pub(crate) fn report(&self, comm: &str, heard: &[Heard]) -> String {
        let now = Instant::now();
        let n = self.ranks.len();
        let mut out = format!("flight recorder of communicator {comm} ({n} ranks):");
        // Consecutive ranks that say the same are one line ("ranks 3-2999: ..."): a large
        // world's report stays readable. Past `REPORT_LINES` lines, the rest are counted.
        let line_of = |r: Rank| {
            self.line(r, now).unwrap_or_else(|| match Heard::of(heard, r) {
                Some(h) => format!("(another process) {}", h.line),
                None => "in another process (no answer)".to_string(),
            })
        };
        let mut lines = 0;
        let mut r = 0;
        // The line of the rank that ended the last run of identical lines: the next run's.
        let mut next = None;
        while r < n {
            let line = next.take().unwrap_or_else(|| line_of(r));
            let mut end = r + 1;
            while end < n {
                let other = line_of(end);
                if other != line {
                    next = Some(other);
                    break;
                }
                end += 1;
            }
            if lines == REPORT_LINES {
                let _ = write!(out, "\n  ... and ranks {r}-{} (not shown)", n - 1);
                break;
            }
            let _ = match end - r {
                1 => write!(out, "\n  rank {r}: {line}"),
                _ => write!(out, "\n  ranks {r}-{}: {line}", end - 1),
            };
            lines += 1;
            r = end;
        }
        out
    }

    /// `rank`'s line of the report, at `now`; `None` for a rank of another process.
    fn line(&self, rank: Rank, now: Instant) -> Option<String> {
        self.seen(rank, |s| {
            let mut l = String::new();
            match s.current() {
                None => l.push_str("has not issued any operation"),
                Some(e) => {
                    let ago = now.saturating_duration_since(e.started).as_secs_f64();
                    let _ = match e.state {
                        OpState::Running => write!(l, "in op #{} {} for {ago:.1}s", e.seq, e.op),
                        OpState::Done => {
                            write!(l, "idle; last finished op #{} {} (issued {ago:.1}s ago)", e.seq, e.op)
                        }
                        OpState::Failed => {
                            // When it failed, not when it was issued (a failure at its deadline
                            // read "10.0s ago" a moment after it).
                            let failed = e.ended.map_or(ago, |t| now.saturating_duration_since(t).as_secs_f64());
                            write!(l, "failed op #{} {} {failed:.1}s ago (issued {ago:.1}s ago)", e.seq, e.op)
                        }
                    };
                }
            }
            if let Some(w) = s.waiting {
                let _ = write!(l, ", waiting for {w}");
            }
            if s.departed {
                l.push_str(", communicator dropped");
            }
            l
        })
    }
}

fn state_word(s: OpState) -> &'static str {
    match s {
        OpState::Running => "still running",
        OpState::Done => "finished",
        OpState::Failed => "failed",
    }
}

#[cfg(test)]
#[path = "flight/tests.rs"]
mod tests;
