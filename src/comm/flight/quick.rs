//! The lock-free part of a rank's flight recorder: the entries of exchanged ops that never
//! waited (most small ops), written by the thread running the rank's ops with plain stores —
//! no lock, no read-modify-write — and merged with the locked records only when someone reads
//! the history (each locked record knows how many quick entries came before it). The locked
//! entry (a lock pair, a record pushed, a clock subtraction) cost 4 ranks on one core ~13% of
//! a 16-byte rooted op (PERFORMANCE.md, session 24).
//!
//! One writer at a time: a rank's exchanged ops run one after the other, each under the rank's
//! driving lock or (the blocking lean path, `Communicator::submit`) its state lock with no other op
//! in flight; either way consecutive writers are ordered by those locks (an op in flight completes
//! under the state lock before the lean path can take it). Readers may run at any time, under the
//! status lock. The ring is a sequence lock over its entries: the writer counts an entry begun
//! before it writes the entry's words and written after; a reader copies the entries written, then
//! (after an acquire fence) reads how many were begun, and keeps only those no newer entry can have
//! started to overwrite. Every word is an atomic, so a torn entry is discarded, never undefined;
//! words that decode to no collective are skipped.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::Instant;

use super::FLIGHT_DEPTH;
use crate::op::{Fingerprint, OpDesc};
use crate::transport::slots::FP_WORDS;

/// Entries the ring holds: as many as the history keeps, so that nothing a reader could
/// still show is overwritten before it is read.
const DEPTH: usize = FLIGHT_DEPTH;

/// Words of an entry: sequence number, flags, when it ended (a raw coarse reading), the op's
/// fingerprint words.
const WORDS: usize = 3 + FP_WORDS;

const OK: u64 = 1;
const IN_PLACE: u64 = 2;

/// One entry on a cache line of its own.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Entry([AtomicU64; WORDS]);

/// An exchanged op that ended without waiting, as a reader gets it back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Quick {
    pub(super) seq: u64,
    pub(super) op: OpDesc,
    pub(super) ok: bool,
    pub(super) at: Instant,
}

/// One rank's ring of quick entries.
#[derive(Debug)]
pub(super) struct QuickRing {
    /// Entries begun (the writer's: it counts one before writing its words).
    begun: AtomicU64,
    /// Entries written.
    written: AtomicU64,
    entries: Box<[Entry]>,
}

impl Default for QuickRing {
    fn default() -> Self {
        QuickRing {
            begun: AtomicU64::new(0),
            written: AtomicU64::new(0),
            entries: (0..DEPTH).map(|_| Entry::default()).collect(),
        }
    }
}

impl QuickRing {
    /// Writes an entry: op `seq` (its fingerprint `words`, in place or not) ended `ok` at
    /// `at` (a [`coarse_raw`](crate::clock::coarse_raw) reading). Called only by the thread
    /// running the rank's ops (see the module).
    #[inline]
    pub(super) fn push(&self, seq: u64, words: &[u64; FP_WORDS], in_place: bool, ok: bool, at: u64) {
        let j = self.written.load(Ordering::Relaxed);
        self.begun.store(j + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let e = self.entry(j);
        let flags = if ok { OK } else { 0 } | if in_place { IN_PLACE } else { 0 };
        for (w, v) in e.0.iter().zip([seq, flags, at].iter().chain(words)) {
            w.store(*v, Ordering::Relaxed);
        }
        self.written.store(j + 1, Ordering::Release);
    }

    /// How many entries have been written (by this thread, when it is the writer).
    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// The entry of op `seq` among the newest, if there is one (one op's lookup: a wait's
    /// mismatch check, which must not copy the whole ring).
    pub(super) fn find(&self, seq: u64) -> Option<Quick> {
        let written = self.written.load(Ordering::Acquire);
        (written.saturating_sub(DEPTH as u64)..written).rev().find_map(|j| {
            if self.entry(j).0[0].load(Ordering::Relaxed) != seq {
                return None;
            }
            let w = self.copy(j);
            fence(Ordering::Acquire);
            self.intact(j, self.begun.load(Ordering::Relaxed)).then(|| decode(&w)).flatten()
        })
    }

    /// Where entry `j` (counted from the ring's start) lives.
    fn entry(&self, j: u64) -> &Entry {
        &self.entries[(j % DEPTH as u64) as usize]
    }

    /// Entry `j`'s words as they are now (check [`intact`](Self::intact) after an acquire
    /// fence before trusting them).
    fn copy(&self, j: u64) -> [u64; WORDS] {
        let e = self.entry(j);
        std::array::from_fn(|i| e.0[i].load(Ordering::Relaxed))
    }

    /// Whether entry `j`, copied before `begun` was read, is whole: no newer entry in its
    /// place (`j + DEPTH`) had been begun.
    fn intact(&self, j: u64, begun: u64) -> bool {
        j + DEPTH as u64 >= begun
    }

    /// The newest entries (at most [`DEPTH`]), oldest first, each with its number (entries
    /// counted from the ring's start).
    pub(super) fn recent(&self) -> Vec<(u64, Quick)> {
        let written = self.written.load(Ordering::Acquire);
        let lo = written.saturating_sub(DEPTH as u64);
        let copied: Vec<[u64; WORDS]> = (lo..written).map(|j| self.copy(j)).collect();
        fence(Ordering::Acquire);
        let begun = self.begun.load(Ordering::Relaxed);
        (lo..written)
            .zip(copied)
            .filter(|(j, _)| self.intact(*j, begun))
            .filter_map(|(j, w)| Some((j, decode(&w)?)))
            .collect()
    }
}

/// An entry's words as a [`Quick`]; `None` for words no collective produces.
fn decode(w: &[u64; WORDS]) -> Option<Quick> {
    let fp: [u64; FP_WORDS] = std::array::from_fn(|i| w[3 + i]);
    let mut op = Fingerprint::desc_of_words(&fp)?;
    op.in_place = w[1] & IN_PLACE != 0;
    Some(Quick { seq: w[0], op, ok: w[1] & OK != 0, at: crate::clock::at_raw(w[2]) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::OpKind;
    use crate::types::{DType, ReduceOp};

    fn op(count: usize) -> OpDesc {
        let mut d = OpDesc::new(OpKind::AllReduce, DType::F32, count);
        d.op = Some(ReduceOp::Sum);
        d
    }

    #[test]
    fn entries_come_back_in_order() {
        let ring = QuickRing::default();
        let words = |c| op(c).fingerprint().words();
        let (t0, t1) = (crate::clock::coarse_raw(), crate::clock::coarse_raw() + 7_000);
        ring.push(0, &words(1), false, true, t0);
        ring.push(1, &words(2), true, false, t1);
        assert_eq!(ring.written(), 2);
        let mut in_place = op(2);
        in_place.in_place = true;
        assert_eq!(
            ring.recent(),
            vec![
                (0, Quick { seq: 0, op: op(1), ok: true, at: crate::clock::at_raw(t0) }),
                (1, Quick { seq: 1, op: in_place, ok: false, at: crate::clock::at_raw(t1) }),
            ]
        );
        assert_eq!(ring.find(1).map(|q| q.op), Some(in_place));
        assert_eq!(ring.find(2), None);
    }

    #[test]
    fn a_reader_gets_the_newest_depth() {
        let ring = QuickRing::default();
        let total = DEPTH as u64 * 3 + 5;
        for s in 0..total {
            ring.push(s, &op(4).fingerprint().words(), false, true, 0);
        }
        let got = ring.recent();
        assert_eq!(ring.written(), total);
        assert_eq!(
            got.iter().map(|(_, q)| q.seq).collect::<Vec<_>>(),
            (total - DEPTH as u64..total).collect::<Vec<_>>()
        );
        assert!(got.iter().all(|(j, q)| *j == q.seq));
        assert_eq!(ring.find(total - 1).map(|q| q.seq), Some(total - 1));
        assert_eq!(ring.find(total - DEPTH as u64 - 1), None, "overwritten");
    }

    /// A reader beside a writer that laps the ring: whatever it gets decodes to what was
    /// written (no torn entry), in order.
    #[test]
    fn a_reader_beside_a_writer_gets_no_torn_entry() {
        let ring = QuickRing::default();
        let n: u64 = if cfg!(miri) { 300 } else { 200_000 };
        std::thread::scope(|s| {
            s.spawn(|| {
                for seq in 0..n {
                    // The count follows the sequence number: a torn entry would mix them.
                    ring.push(seq, &op(seq as usize).fingerprint().words(), false, true, 0);
                }
            });
            while ring.written() < n {
                let mut last = None;
                for (j, q) in ring.recent() {
                    assert_eq!((q.op.count as u64, q.seq), (j, j), "a torn entry");
                    assert!(last.is_none_or(|l| j > l), "out of order");
                    last = Some(j);
                }
                if let Some(l) = last {
                    assert!(ring.find(l).is_none_or(|q| q.op.count as u64 == l), "a torn entry found");
                }
            }
        });
    }
}
