//! Exchange slots: how ranks that are threads of one process, or processes of one host that
//! agreed on them at setup (`shm::slot_agree`), run a small collective without messages.
//! Each rank publishes its part of the op (at most [`SLOT_BYTES`]) with the op's sequence
//! number and fingerprint in a slot of its own, then reads every peer's slot and
//! computes its result locally: one write and `n - 1` reads of a cache line or a few per
//! rank, instead of a message, a wake-up and a release per step of a plan.
//!
//! Each rank has [`DEPTH`] slots, used in turn by its exchanged ops. A slot is written again
//! only once every peer has finished reading what it held (each rank publishes the last
//! exchange it finished, [`Slots::finish`]). A rank that waits for no peer's part (a root of
//! broadcast) can so run up to `DEPTH` ops ahead of its slowest peer, as an eager root does;
//! its part stays in its slot until every peer has finished that op.
//!
//! The words are atomics: a reader loads the sequence number (acquire) and then the part; the
//! writer stores the part and then the sequence number (release). No lock, and no `unsafe`
//! but the lines' store ([`Lines`]).
//!
//! The layout holds no pointers, only words indexed by rank and sequence number, so it can
//! live in memory other processes map ([`Slots::over`] any store of [`Line`]s, e.g. a shared
//! segment): then the words a peer wrote are not trusted. No word a peer wrote indexes
//! anything (garbage never panics, and no read leaves the slot), and since the sequence word
//! is stored last, a slot a peer left half-written (it crashed mid-publish) never reads as
//! arrived.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::Rank;

/// The most bytes one rank publishes for one exchanged op.
pub(crate) const SLOT_BYTES: usize = 4096;

/// Slots per rank: exchanged ops of one rank cycle through them. A rank runs at most this
/// many exchanged ops ahead of its slowest peer (~4 KiB each per rank: 540 KiB per rank, of
/// which a small op touches a line or two per slot). With more ranks than cores, a rank that
/// runs ahead (a root of broadcast or scatter, a non-root of reduce or gather) hands its core
/// over once per `DEPTH` ops: 32 instead of 8 cut 4 ranks' context switches on 2 cores 4x
/// and their 16-byte rooted ops' time by about a third (PERFORMANCE.md, session 15); 128
/// instead of 32 cut them 4x again (session 18). At most
/// [`FLIGHT_DEPTH`](crate::FLIGHT_DEPTH): a peer's flight recorder must still remember any
/// op a waiting rank is in. Under Miri, 8 (its tests allocate slots many times over).
const DEPTH: usize = if cfg!(miri) { 8 } else { 128 };
const _: () = assert!(DEPTH <= crate::FLIGHT_DEPTH);

/// Words of an op fingerprint (see [`Fingerprint::words`](crate::op::Fingerprint::words)).
pub(crate) const FP_WORDS: usize = 5;

/// Where a slot's fingerprint starts: after the sequence number + 1 (word 0; 0: never written).
const FP_AT: usize = 1;

/// Header words before the part: the sequence number and the fingerprint, nothing else, so
/// that a part of up to 16 bytes (every 16-byte rooted op's) shares the header's 64-byte line
/// and a reader loads one line a peer wrote, not two. No length word: the fingerprint, which
/// a reader checks before it reads a part, fixes every part's length. Cut from 8 words (with a
/// length and padding), 16-byte broadcast and scatter with 4 ranks on 2 cores took 20% less
/// time (PERFORMANCE.md, session 25). Changing it changes what processes of one host share:
/// [`wire::VERSION`](super::wire::VERSION).
const HEAD: usize = FP_AT + FP_WORDS;
const _: () = assert!(HEAD + 2 <= 8, "a 16-byte part shares the header's line");

/// The word of a rank's `done` line where [`Slots::busy`] remembers how far every peer has
/// finished: in the line's second half, away from word 0, which the peers read.
const CLEAR: usize = 8;

/// One cache-line pair of words: slots of different ranks never share a line. 128 bytes,
/// 128-aligned, all zero when fresh (a new mapping of zeroed memory is a valid `[Line]`).
#[repr(C, align(128))]
pub(crate) struct Line([AtomicU64; 16]);

impl Line {
    fn new() -> Self {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

const _: () = assert!(std::mem::size_of::<Line>() == 128 && std::mem::align_of::<Line>() == 128);

/// Lines per slot: the header and the part.
const SLOT_LINES: usize = (HEAD + SLOT_BYTES / 8).div_ceil(16);

/// The exchange slots of one communicator's ranks, in a store of lines: the process's own
/// memory (the default), or a mapping that other processes share ([`Slots::over`]).
///
/// Layout (in lines): `world * DEPTH` slots of `SLOT_LINES` lines (rank-major), then one
/// `done` line per rank — word 0: the sequence number + 1 of the last exchange it finished
/// reading; word [`CLEAR`]: what [`Slots::busy`] remembers.
pub(crate) struct Slots<S = Lines> {
    world: usize,
    /// Where the `done` lines start.
    base: usize,
    lines: S,
}

impl<S> std::fmt::Debug for Slots<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slots({} ranks)", self.world)
    }
}

impl Slots {
    /// The slots of `world` threads of this process, on the heap.
    pub(crate) fn new(world: usize) -> Self {
        Slots { world, base: world * DEPTH * SLOT_LINES, lines: Lines::heap(lines_for(world)) }
    }
}

/// The one store the communicator's slots live in, whoever shares them: lines on this
/// process's heap (ranks that are threads) or in a mapping other processes share
/// (`shm::slot_segment`). One type for both, so the exchange is compiled once and pays no
/// branch per access: the lines are a slice found once, and what keeps them alive is held
/// beside it, never looked at.
pub(crate) struct Lines {
    /// Valid while `_keep` lives (see [`Lines::heap`] and [`Lines::mapped`]); never handed
    /// out for longer than a borrow of `self`.
    lines: &'static [Line],
    _keep: Keep,
}

/// What keeps a [`Lines`]' memory alive: held for its `Drop`, never read.
#[allow(dead_code)] // held, not read (and `Mapped` is not built where processes share no memory)
enum Keep {
    Heap(Arc<[Line]>),
    Mapped(Arc<dyn Send + Sync>),
}

impl Lines {
    /// `n` fresh lines on the heap.
    pub(crate) fn heap(n: usize) -> Self {
        let keep: Arc<[Line]> = (0..n).map(|_| Line::new()).collect();
        // SAFETY: the slice is the `Arc`'s allocation, which `_keep` holds for as long as
        // `self` lives and which is never mutated but through its atomics (shared
        // references); `lines` is only lent out for borrows of `self` (`Deref`).
        let lines: &'static [Line] = unsafe { &*Arc::as_ptr(&keep) };
        Lines { lines, _keep: Keep::Heap(keep) }
    }

    /// `n` lines from `at`, in memory `keep` keeps mapped.
    ///
    /// # Safety
    /// `at` is 128-aligned and the `n` lines from it lie in memory that stays mapped,
    /// readable and writable while `keep` lives, and that every process accesses only
    /// atomically (any bits are a valid `Line`).
    #[cfg_attr(any(miri, not(target_os = "linux")), allow(dead_code))]
    pub(crate) unsafe fn mapped(at: *const Line, n: usize, keep: Arc<dyn Send + Sync>) -> Self {
        // SAFETY: the caller's contract; the slice is only lent out for borrows of `self`,
        // which holds `keep`.
        let lines: &'static [Line] = unsafe { std::slice::from_raw_parts(at, n) };
        Lines { lines, _keep: Keep::Mapped(keep) }
    }
}

impl Deref for Lines {
    type Target = [Line];

    #[inline]
    fn deref(&self) -> &[Line] {
        self.lines
    }
}

/// The lines each rank's slots and `done` line take (see [`Slots`]'s layout).
pub(crate) const LINES_PER_RANK: usize = DEPTH * SLOT_LINES + 1;

/// The lines the slots of `world` ranks take (see [`Slots`]'s layout).
pub(crate) const fn lines_for(world: usize) -> usize {
    world * LINES_PER_RANK
}

impl<S: Deref<Target = [Line]>> Slots<S> {
    /// The slots of `world` ranks in `lines` (fresh: all zero), at least
    /// [`lines_for`]`(world)` of them; `None` when fewer. Every view of one store (each
    /// process's mapping of one segment) sees the same slots. Only the shared-memory
    /// transport maps such a store (Linux, not Miri).
    #[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
    pub(crate) fn over(world: usize, lines: S) -> Option<Self> {
        (lines.len() >= lines_for(world)).then_some(Slots { world, base: world * DEPTH * SLOT_LINES, lines })
    }

    /// The lines of `rank`'s slot for op `seq` (found once per call, then indexed by word).
    #[inline]
    fn slot(&self, rank: Rank, seq: u64) -> &[Line] {
        let slot = rank * DEPTH + (seq % DEPTH as u64) as usize;
        &self.lines[slot * SLOT_LINES..(slot + 1) * SLOT_LINES]
    }

    /// `rank`'s `done` line (`None` past the world).
    #[inline]
    fn done(&self, rank: Rank) -> Option<&Line> {
        if rank < self.world { self.lines.get(self.base + rank) } else { None }
    }

    /// A peer still reading what `me`'s slot for op `seq` holds, and the value of its
    /// [`finished`](Self::finished) that frees the slot; `None` when `me` may write it.
    ///
    /// Every peer's [`finished`](Self::finished) only grows, so a scan that finds them all
    /// past some value remembers the least of them ([`CLEAR`], in `me`'s own line, written
    /// by `me` alone): a slot whose last op is below it is free without another look at the
    /// peers' lines (with ranks in step, most calls). The acquire loads of that scan order
    /// the peers' reads before this rank's next writes, as a fresh scan's would.
    pub(crate) fn busy(&self, me: Rank, seq: u64) -> Option<(Rank, u64)> {
        let clear = self.done(me).map(|l| &l.0[CLEAR]);
        // What the slot holds is an op at least `DEPTH` before `seq` (the slot's previous
        // user), so this bound alone frees it when the peers are known past it: the slot's
        // own line, which a peer waiting for this op polls, is not loaded before it is
        // written (a load there waits for the line, a store need not).
        let bound = (seq + 1).saturating_sub(DEPTH as u64);
        if bound == 0 || clear.is_some_and(|c| bound <= c.load(Ordering::Relaxed)) {
            return None;
        }
        let held = word(self.slot(me, seq), 0).load(Ordering::Relaxed);
        if held == 0 || clear.is_some_and(|c| held <= c.load(Ordering::Relaxed)) {
            return None;
        }
        let mut least = u64::MAX;
        for p in 0..self.world {
            if p != me {
                let f = self.finished(p);
                if f < held {
                    return Some((p, held));
                }
                least = least.min(f);
            }
        }
        if let Some(c) = clear {
            c.store(least, Ordering::Relaxed);
        }
        None
    }

    /// The sequence number + 1 of the last exchange `rank` finished reading (0: none).
    #[inline]
    pub(crate) fn finished(&self, rank: Rank) -> u64 {
        self.done(rank).map_or(u64::MAX, |l| l.0[0].load(Ordering::Acquire))
    }

    /// Publishes `me`'s part of op `seq`. Call only once [`busy`](Self::busy) is `None`;
    /// `part` is at most [`SLOT_BYTES`] long.
    pub(crate) fn publish(&self, me: Rank, seq: u64, fp: &[u64; FP_WORDS], part: &[u8]) {
        let slot = self.slot(me, seq);
        let part = &part[..part.len().min(SLOT_BYTES)];
        for (i, w) in fp.iter().enumerate() {
            word(slot, FP_AT + i).store(*w, Ordering::Relaxed);
        }
        // Whole words first (fixed-size copies, no `memcpy` call), then the tail.
        let words = part.chunks_exact(8);
        let tail = words.remainder();
        let full = part.len() / 8;
        for (i, chunk) in words.enumerate() {
            let w: [u8; 8] = std::array::from_fn(|k| chunk[k]);
            word(slot, HEAD + i).store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
        if !tail.is_empty() {
            let w: [u8; 8] = std::array::from_fn(|k| tail.get(k).copied().unwrap_or(0));
            word(slot, HEAD + full).store(u64::from_le_bytes(w), Ordering::Relaxed);
        }
        word(slot, 0).store(seq + 1, Ordering::Release);
    }

    /// Whether `peer` has published its part of op `seq`.
    #[inline]
    pub(crate) fn arrived(&self, peer: Rank, seq: u64) -> bool {
        word(self.slot(peer, seq), 0).load(Ordering::Acquire) == seq + 1
    }

    /// The fingerprint `peer` published with op `seq` (once it [`arrived`](Self::arrived)):
    /// what a mismatch names when the peer's call is not in this process's flight recorder.
    pub(crate) fn fingerprint(&self, peer: Rank, seq: u64) -> [u64; FP_WORDS] {
        let slot = self.slot(peer, seq);
        std::array::from_fn(|i| word(slot, FP_AT + i).load(Ordering::Relaxed))
    }

    /// Whether `peer` published op `seq` with fingerprint `fp` (once it
    /// [`arrived`](Self::arrived)), compared word by word.
    #[inline]
    pub(crate) fn agrees(&self, peer: Rank, seq: u64, fp: &[u64; FP_WORDS]) -> bool {
        let slot = self.slot(peer, seq);
        fp.iter().enumerate().all(|(i, w)| word(slot, FP_AT + i).load(Ordering::Relaxed) == *w)
    }

    /// Whether `peer` has published op `seq` with another fingerprint than `fp`
    /// ([`arrived`](Self::arrived) and not [`agrees`](Self::agrees), in one look at the slot).
    #[inline]
    pub(crate) fn disagrees(&self, peer: Rank, seq: u64, fp: &[u64; FP_WORDS]) -> bool {
        let slot = self.slot(peer, seq);
        word(slot, 0).load(Ordering::Acquire) == seq + 1
            && fp.iter().enumerate().any(|(i, w)| word(slot, FP_AT + i).load(Ordering::Relaxed) != *w)
    }

    /// Copies `out.len()` bytes of `peer`'s part of op `seq` from byte `off` into `out`;
    /// false, copying nothing, when they would reach past [`SLOT_BYTES`]. What lies within
    /// the part is for the caller to know: the fingerprint it agreed on fixes the part's
    /// length.
    #[inline]
    pub(crate) fn read(&self, peer: Rank, seq: u64, off: usize, out: &mut [u8]) -> bool {
        if off.checked_add(out.len()).is_none_or(|end| end > SLOT_BYTES) {
            return false;
        }
        let slot = self.slot(peer, seq);
        if off.is_multiple_of(8) && out.len().is_multiple_of(8) {
            // Whole words (the usual small part): one copy each, nothing around them, inline
            // (a call cost an 8-byte part ~65 instructions).
            for (i, o) in out.chunks_exact_mut(8).enumerate() {
                o.copy_from_slice(&word(slot, HEAD + off / 8 + i).load(Ordering::Relaxed).to_le_bytes());
            }
            return true;
        }
        Self::read_bytes(slot, off, out);
        true
    }

    /// [`read`](Self::read) of a part that starts or ends within a word.
    #[inline(never)]
    fn read_bytes(slot: &[Line], off: usize, out: &mut [u8]) {
        let load = |w: usize| word(slot, w).load(Ordering::Relaxed).to_le_bytes();
        let (mut w, skip) = (HEAD + off / 8, off % 8);
        let mut out = out;
        if skip != 0 {
            let bytes = load(w);
            let take = (8 - skip).min(out.len());
            let (head, rest) = out.split_at_mut(take);
            head.iter_mut().zip(&bytes[skip..]).for_each(|(o, b)| *o = *b);
            (w, out) = (w + 1, rest);
        }
        // Whole words (fixed-size copies, no `memcpy` call), then the tail.
        let mut words = out.chunks_exact_mut(8);
        for o in &mut words {
            o.copy_from_slice(&load(w));
            w += 1;
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            tail.iter_mut().zip(load(w)).for_each(|(o, b)| *o = b);
        }
    }

    /// [`read`](Self::read) of whole words: `out.len()` words of `peer`'s part of op `seq`
    /// from its word `from`, each holding the part's bytes in memory order; false, copying
    /// nothing, past [`SLOT_BYTES`]. The usual small part (a 16-byte reduction's): two loads,
    /// no byte juggling.
    #[inline]
    pub(crate) fn read_words(&self, peer: Rank, seq: u64, from: usize, out: &mut [u64]) -> bool {
        if from.checked_add(out.len()).is_none_or(|end| end > SLOT_BYTES / 8) {
            return false;
        }
        let slot = self.slot(peer, seq);
        for (i, o) in out.iter_mut().enumerate() {
            *o = u64::from_ne_bytes(word(slot, HEAD + from + i).load(Ordering::Relaxed).to_le_bytes());
        }
        true
    }

    /// Asks the CPU for the line of `peer`'s slot for op `seq` that holds its header (and a
    /// part of up to 16 bytes), without waiting for it: a hint, for a rank whose peers run
    /// ahead of it, so that the lines their next parts sit in travel while it finishes this
    /// op.
    #[inline]
    pub(crate) fn prefetch(&self, peer: Rank, seq: u64) {
        if peer < self.world {
            crate::cpu::prefetch_read(word(self.slot(peer, seq), 0));
        }
    }

    /// Asks the CPU for the header line of `me`'s own slot for op `seq`, owned, when every
    /// peer is known to have finished reading what that slot holds (what [`busy`](Self::busy)
    /// last found): a hint, for a rank that runs ahead of its peers, so that its publish of
    /// that op finds the line its own and the first locked instruction after the slot's
    /// stores does not wait for a peer's core to give it up. A slot a peer may still read is
    /// left alone: taking its line would only make that read fetch it back.
    #[inline]
    pub(crate) fn claim(&self, me: Rank, seq: u64) {
        let Some(clear) = self.done(me).map(|l| &l.0[CLEAR]) else {
            return;
        };
        let bound = seq.saturating_add(1).saturating_sub(DEPTH as u64);
        if bound <= clear.load(Ordering::Relaxed) {
            crate::cpu::prefetch_write(word(self.slot(me, seq), 0));
        }
    }

    /// Takes back `me`'s part of op `seq`, if its slot still holds it: `me` failed the op,
    /// and a peer that has not read the part yet must not finish the op with it (a rank
    /// stopped while the others timed out waiting for it returned `Ok` for an op they had
    /// failed). Such a peer finds the part missing and waits, until the failure that comes
    /// with it (poison, or the `Abort` frame over the connection) ends its wait. The slot is
    /// never written again: the failed rank's communicator is done.
    pub(crate) fn withdraw(&self, me: Rank, seq: u64) {
        let _ = word(self.slot(me, seq), 0).compare_exchange(seq + 1, WITHDRAWN, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// Says that `me` has read every part of op `seq` it needs: its peers may reuse their
    /// slots.
    pub(crate) fn finish(&self, me: Rank, seq: u64) {
        if let Some(l) = self.done(me) {
            l.0[0].store(seq + 1, Ordering::Release);
        }
    }
}

/// What a slot's sequence word holds once its part was [withdrawn](Slots::withdraw): no
/// op's number + 1.
const WITHDRAWN: u64 = u64::MAX;

/// Word `i` of a slot's lines.
#[inline]
fn word(slot: &[Line], i: usize) -> &AtomicU64 {
    &slot[i / 16].0[i % 16]
}

#[cfg(test)]
#[path = "slots_tests.rs"]
mod tests;
