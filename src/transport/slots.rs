//! Exchange slots: how ranks that are threads of one process run a small collective without
//! messages. Each rank publishes its part of the op (at most [`SLOT_BYTES`]) with the op's
//! sequence number and fingerprint in a slot of its own, then reads every peer's slot and
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
//! writer stores the part and then the sequence number (release). No `unsafe`, no lock.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::Rank;

/// The most bytes one rank publishes for one exchanged op.
pub(crate) const SLOT_BYTES: usize = 4096;

/// Slots per rank: exchanged ops of one rank cycle through them. A rank runs at most this
/// many exchanged ops ahead of its slowest peer (~4 KiB each per rank: 135 KiB per rank).
/// With more ranks than cores, a rank that runs ahead (a root of broadcast or scatter, a
/// non-root of reduce or gather) hands its core over once per `DEPTH` ops: 32 instead of 8
/// cut 4 ranks' context switches on 2 cores 4x and their 16-byte rooted ops' time by about
/// a third (PERFORMANCE.md, session 15). At most [`FLIGHT_DEPTH`](crate::FLIGHT_DEPTH): a
/// peer's flight recorder must still remember any op a waiting rank is in.
const DEPTH: usize = 32;
const _: () = assert!(DEPTH <= crate::FLIGHT_DEPTH);

/// Words of an op fingerprint (see [`Fingerprint::words`](crate::op::Fingerprint::words)).
pub(crate) const FP_WORDS: usize = 5;

/// Header words before the part: sequence number + 1 (0: never written), part length in
/// bytes, fingerprint, padding.
const HEAD: usize = 8;

/// The word of a rank's `done` line where [`Slots::busy`] remembers how far every peer has
/// finished: in the line's second half, away from word 0, which the peers read.
const CLEAR: usize = 8;

/// One cache-line pair: slots of different ranks never share a line.
#[repr(align(128))]
struct Line([AtomicU64; 16]);

impl Line {
    fn new() -> Self {
        Line(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// Lines per slot: the header and the part.
const SLOT_LINES: usize = (HEAD + SLOT_BYTES / 8).div_ceil(16);

/// The exchange slots of one communicator's ranks.
pub(crate) struct Slots {
    world: usize,
    /// `world * DEPTH` slots of `SLOT_LINES` lines.
    lines: Box<[Line]>,
    /// Per rank, word 0: the sequence number + 1 of the last exchange it finished reading;
    /// word [`CLEAR`]: what [`Slots::busy`] remembers.
    done: Box<[Line]>,
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slots({} ranks)", self.world)
    }
}

impl Slots {
    pub(crate) fn new(world: usize) -> Self {
        Slots {
            world,
            lines: (0..world * DEPTH * SLOT_LINES).map(|_| Line::new()).collect(),
            done: (0..world).map(|_| Line::new()).collect(),
        }
    }

    /// The lines of `rank`'s slot for op `seq` (found once per call, then indexed by word).
    #[inline]
    fn slot(&self, rank: Rank, seq: u64) -> &[Line] {
        let slot = rank * DEPTH + (seq % DEPTH as u64) as usize;
        &self.lines[slot * SLOT_LINES..(slot + 1) * SLOT_LINES]
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
        let held = word(self.slot(me, seq), 0).load(Ordering::Relaxed);
        let clear = self.done.get(me).map(|l| &l.0[CLEAR]);
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
        self.done.get(rank).map_or(u64::MAX, |l| l.0[0].load(Ordering::Acquire))
    }

    /// Publishes `me`'s part of op `seq`. Call only once [`busy`](Self::busy) is `None`;
    /// `part` is at most [`SLOT_BYTES`] long.
    pub(crate) fn publish(&self, me: Rank, seq: u64, fp: &[u64; FP_WORDS], part: &[u8]) {
        let slot = self.slot(me, seq);
        let part = &part[..part.len().min(SLOT_BYTES)];
        word(slot, 1).store(part.len() as u64, Ordering::Relaxed);
        for (i, w) in fp.iter().enumerate() {
            word(slot, 2 + i).store(*w, Ordering::Relaxed);
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

    /// The fingerprint `peer` published with op `seq` (once it [`arrived`](Self::arrived)).
    #[cfg(test)]
    fn fingerprint(&self, peer: Rank, seq: u64) -> [u64; FP_WORDS] {
        let slot = self.slot(peer, seq);
        std::array::from_fn(|i| word(slot, 2 + i).load(Ordering::Relaxed))
    }

    /// Whether `peer` published op `seq` with fingerprint `fp` (once it
    /// [`arrived`](Self::arrived)), compared word by word.
    #[inline]
    pub(crate) fn agrees(&self, peer: Rank, seq: u64, fp: &[u64; FP_WORDS]) -> bool {
        let slot = self.slot(peer, seq);
        fp.iter().enumerate().all(|(i, w)| word(slot, 2 + i).load(Ordering::Relaxed) == *w)
    }

    /// Whether `peer` has published op `seq` with another fingerprint than `fp`
    /// ([`arrived`](Self::arrived) and not [`agrees`](Self::agrees), in one look at the slot).
    #[inline]
    pub(crate) fn disagrees(&self, peer: Rank, seq: u64, fp: &[u64; FP_WORDS]) -> bool {
        let slot = self.slot(peer, seq);
        word(slot, 0).load(Ordering::Acquire) == seq + 1
            && fp.iter().enumerate().any(|(i, w)| word(slot, 2 + i).load(Ordering::Relaxed) != *w)
    }

    /// Copies `out.len()` bytes of `peer`'s part of op `seq` from byte `off` into `out`;
    /// false, copying nothing, when its part is shorter.
    pub(crate) fn read(&self, peer: Rank, seq: u64, off: usize, out: &mut [u8]) -> bool {
        let slot = self.slot(peer, seq);
        let len = word(slot, 1).load(Ordering::Relaxed) as usize;
        if off.checked_add(out.len()).is_none_or(|end| end > len) {
            return false;
        }
        let load = |w: usize| word(slot, w).load(Ordering::Relaxed).to_le_bytes();
        let (mut w, skip) = (HEAD + off / 8, off % 8);
        if skip == 0 && out.len().is_multiple_of(8) {
            // Whole words (the usual small part): one copy each, nothing around them.
            for (i, o) in out.chunks_exact_mut(8).enumerate() {
                o.copy_from_slice(&load(w + i));
            }
            return true;
        }
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
        true
    }

    /// Says that `me` has read every part of op `seq` it needs: its peers may reuse their
    /// slots.
    pub(crate) fn finish(&self, me: Rank, seq: u64) {
        if let Some(l) = self.done.get(me) {
            l.0[0].store(seq + 1, Ordering::Release);
        }
    }
}

/// Word `i` of a slot's lines.
#[inline]
fn word(slot: &[Line], i: usize) -> &AtomicU64 {
    &slot[i / 16].0[i % 16]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_read_and_reuse() {
        let s = Slots::new(3);
        let fp = [1, 2, 3, 4, 5];
        assert!(s.busy(0, 0).is_none());
        assert!(!s.arrived(0, 0));
        s.publish(0, 0, &fp, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert!(s.arrived(0, 0) && !s.arrived(0, 2));
        assert_eq!(s.fingerprint(0, 0), fp);
        assert!(s.agrees(0, 0, &fp) && !s.agrees(0, 0, &[1, 2, 3, 4, 6]));
        assert!(!s.disagrees(0, 0, &fp) && s.disagrees(0, 0, &[1, 2, 3, 4, 6]) && !s.disagrees(1, 0, &[0; 5]));
        let mut out = [0u8; 3];
        assert!(s.read(0, 0, 8, &mut out));
        assert_eq!(out, [9, 10, 11]);
        assert!(!s.read(0, 0, 8, &mut [0u8; 4]), "past the part");
        let mut out = [0u8; 6];
        assert!(s.read(0, 0, 3, &mut out), "unaligned");
        assert_eq!(out, [4, 5, 6, 7, 8, 9]);
        let mut out = [0u8; 7];
        assert!(s.read(0, 0, 1, &mut out), "unaligned, across a word");
        assert_eq!(out, [2, 3, 4, 5, 6, 7, 8]);
        let mut out = [0u8; 11];
        assert!(s.read(0, 0, 0, &mut out), "a whole word and a tail");
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert!(s.read(0, 0, 11, &mut []), "nothing, at the end");
        // The other slots are free; this one is held until ranks 1 and 2 finish op 0.
        let again = DEPTH as u64;
        assert!((1..again).all(|seq| s.busy(0, seq).is_none()));
        assert_eq!(s.busy(0, again), Some((1, 1)));
        s.finish(1, 0);
        assert_eq!(s.busy(0, again), Some((2, 1)));
        s.finish(2, 0);
        assert!(s.busy(0, again).is_none());
        s.publish(0, again, &fp, &[]);
        assert!(s.arrived(0, again) && !s.arrived(0, 0));
    }

    #[test]
    fn threads_see_whole_parts() {
        let s = std::sync::Arc::new(Slots::new(2));
        let fp = [0; FP_WORDS];
        let rounds = if cfg!(miri) { 20 } else { 2000 };
        let t: Vec<_> = (0..2)
            .map(|me| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for seq in 0..rounds {
                        while s.busy(me, seq).is_some() {
                            std::hint::spin_loop();
                        }
                        s.publish(me, seq, &fp, &[(seq as u8).wrapping_add(me as u8); 24]);
                        let peer = 1 - me;
                        while !s.arrived(peer, seq) {
                            std::hint::spin_loop();
                        }
                        let mut out = [0u8; 24];
                        assert!(s.read(peer, seq, 0, &mut out));
                        assert_eq!(out, [(seq as u8).wrapping_add(peer as u8); 24]);
                        s.finish(me, seq);
                    }
                })
            })
            .collect();
        for t in t {
            t.join().unwrap();
        }
    }
}
