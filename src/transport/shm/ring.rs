//! A single-producer, single-consumer ring of records in one direction of a [`Mapping`].
//!
//! Positions (`head`, `tail`, the consumer's cursor) count bytes since the start and never
//! wrap; a record lies at `pos % cap` and never straddles the ring's end (the producer pads
//! with a `Wrap` record instead, and also to go back to the start early: see [`WARM`]). Records start 64-byte aligned: `[total: u64][kind: u32]
//! [pad][len: u64][extra: u64]`, then from byte 32 the wire frame header, then from byte
//! [`REC`] the payload. The producer publishes a record by moving `head`; the consumer frees
//! records — possibly out of order, its scheduler releases them so — by moving `tail` past
//! the oldest run of freed ones. Everything read from a peer is checked before use: a bad
//! record is an `Err` naming what is wrong, never an access outside the ring.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::segment::{Ctrl, Mapping, futex_wait, futex_wake};
use crate::transport::wire::HEADER_LEN;

/// Bytes of a record's header (the payload starts here).
pub(crate) const REC: usize = 128;
const FRAME_AT: usize = 32;
const ALIGN: u64 = 64;

/// What a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A whole message: frame header and payload, read in place.
    Data = 1,
    /// Padding to the ring's end.
    Wrap = 2,
    /// The frame header of a message too large to hold in the ring; `extra` is its length,
    /// and `Piece` records carry its bytes.
    Stream = 3,
    /// The next bytes of the streamed message.
    Piece = 4,
    /// A message the receiver copies out of the sender's memory ([`super::cma`]): the
    /// payload is its address and number among lent messages (two `u64`), `extra` its length.
    Lent = 5,
}

impl Kind {
    fn of(k: u32) -> Option<Kind> {
        Some(match k {
            1 => Kind::Data,
            2 => Kind::Wrap,
            3 => Kind::Stream,
            4 => Kind::Piece,
            5 => Kind::Lent,
            _ => return None,
        })
    }
}

/// How much of the ring a producer keeps to while its consumer keeps up. A small record (at
/// most an eighth of it) that would end past it goes back to the ring's start (after a `Wrap`
/// record) when the consumer has freed that much there already, so the same lines carry
/// message after message and stay in the caches of the two cores; a consumer that lags lets
/// the producer run on into the rest of the ring as before. Without it every message wrote
/// lines last touched a whole ring (24 MiB) earlier: measured (PERFORMANCE.md, session 14) a
/// 64 KiB broadcast of 2 processes took 12-14 us out of place against 10-11 us with it. Large
/// records (the 1 MiB chunks of a large reduction) are left as they were: no measurement
/// here could tell whether it helps them.
const WARM: u64 = 1 << 20;

fn round(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// The writing end of one direction.
#[derive(Debug)]
pub(crate) struct Producer {
    map: Arc<Mapping>,
    dir: usize,
    ctrl: Ctrl,
    head: u64,
    /// See [`WARM`].
    warm: u64,
}

impl Producer {
    pub(crate) fn new(map: Arc<Mapping>, dir: usize) -> Self {
        let ctrl = Ctrl::of(dir);
        let head = map.u64_at(ctrl.head).load(Ordering::SeqCst);
        Producer { map, dir, ctrl, head, warm: WARM }
    }

    /// The same with `warm` bytes instead of [`WARM`] (tests use small rings).
    #[cfg(test)]
    pub(crate) fn with_warm(mut self, warm: u64) -> Self {
        self.warm = warm;
        self
    }

    /// The largest payload one record can carry.
    pub(crate) fn max_payload(&self) -> usize {
        self.map.cap - REC
    }

    /// Bytes the padding and a record of `len` payload bytes take at the head now: padding to
    /// the ring's end when the record does not fit before it, or when it would end past
    /// [`WARM`] and fits at the start now.
    fn need(&self, len: usize) -> (u64, u64) {
        let cap = self.map.cap as u64;
        let rec = round((REC + len) as u64);
        let at = self.head % cap;
        let to_end = cap - at;
        if rec > to_end {
            return (to_end, rec);
        }
        if rec <= self.warm / 8 && at + rec > self.warm {
            let tail = self.map.u64_at(self.ctrl.tail).load(Ordering::Acquire);
            if self.head + to_end + rec <= tail + cap {
                return (to_end, rec);
            }
        }
        (0, rec)
    }

    /// Whether a record of `len` payload bytes fits now.
    pub(crate) fn fits(&self, len: usize) -> bool {
        let (skip, rec) = self.need(len);
        let tail = self.map.u64_at(self.ctrl.tail).load(Ordering::Acquire);
        self.head + skip + rec <= tail + self.map.cap as u64
    }

    /// Writes and publishes one record; false (nothing written) when it does not fit yet.
    pub(crate) fn push(&mut self, kind: Kind, frame: &[u8; HEADER_LEN], extra: u64, payload: &[u8]) -> bool {
        debug_assert!(payload.len() <= self.max_payload());
        if payload.len() > self.max_payload() {
            return false;
        }
        // As `fits`, with the room it works out kept for the write.
        let (skip, rec) = self.need(payload.len());
        let tail = self.map.u64_at(self.ctrl.tail).load(Ordering::Acquire);
        if self.head + skip + rec > tail + self.map.cap as u64 {
            return false;
        }
        let base = self.map.ring_at(self.dir);
        let cap = self.map.cap as u64;
        if skip > 0 {
            let mut h = [0u8; 16];
            h[0..8].copy_from_slice(&skip.to_le_bytes());
            h[8..12].copy_from_slice(&(Kind::Wrap as u32).to_le_bytes());
            self.map.copy_in(base + (self.head % cap) as usize, &h);
            self.head += skip;
        }
        let at = base + (self.head % cap) as usize;
        let mut h = [0u8; REC];
        h[0..8].copy_from_slice(&rec.to_le_bytes());
        h[8..12].copy_from_slice(&(kind as u32).to_le_bytes());
        h[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        h[24..32].copy_from_slice(&extra.to_le_bytes());
        h[FRAME_AT..FRAME_AT + HEADER_LEN].copy_from_slice(frame);
        self.map.copy_in(at, &h);
        self.map.copy_in(at + REC, payload);
        self.head += rec;
        self.map.u64_at(self.ctrl.head).store(self.head, Ordering::SeqCst);
        // A whole message for a rank that polls the ring itself needs no reader thread (its
        // wake-up — a futex call here, a thread scheduled there, and that thread then
        // contending with the rank for the ring and the cores — is most of a small message's
        // time, and it slowed large ones too: until session 34 messages over 64 KiB always
        // woke it, and dropping that limit cut 2 processes' all_reduce at 256 KiB from 64-101
        // to 31-35 us, at 1 MiB from 294-330 to 199-216 us, at 16 MiB from 3.8-4.3 to
        // 3.0-3.1 ms, with gathers and broadcasts unchanged; PERFORMANCE.md). The records of a
        // streamed message always wake it: the rank may be waiting for another peer while this
        // producer waits for space.
        let polled = matches!(kind, Kind::Data | Kind::Lent)
            && self.map.u32_at(self.ctrl.consumer_polls).load(Ordering::SeqCst) != 0;
        if !polled && self.map.u32_at(self.ctrl.consumer_sleeps).load(Ordering::SeqCst) != 0 {
            self.map.u32_at(self.ctrl.data_bell).fetch_add(1, Ordering::SeqCst);
            futex_wake(self.map.u32_at(self.ctrl.data_bell));
        }
        true
    }

    /// Sleeps until the consumer frees space for `len` bytes, or for at most `t`.
    pub(crate) fn wait_space(&self, len: usize, t: Duration) {
        let sleeps = self.map.u32_at(self.ctrl.producer_sleeps);
        let bell = self.map.u32_at(self.ctrl.space_bell);
        sleeps.store(1, Ordering::SeqCst);
        let v = bell.load(Ordering::SeqCst);
        if !self.fits(len) {
            futex_wait(bell, v, t);
        }
        sleeps.store(0, Ordering::SeqCst);
    }
}

/// A record read from the ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub kind: Kind,
    /// Its end position: what [`Consumer::free`] takes.
    pub end: u64,
    pub frame: [u8; HEADER_LEN],
    pub extra: u64,
    /// Where its payload starts in the ring.
    pub off: usize,
    pub len: usize,
}

/// The reading end of one direction.
#[derive(Debug)]
pub(crate) struct Consumer {
    map: Arc<Mapping>,
    dir: usize,
    ctrl: Ctrl,
    cursor: u64,
    /// Records read and not freed yet (end, freed), oldest first.
    held: VecDeque<(u64, bool)>,
}

impl Consumer {
    pub(crate) fn new(map: Arc<Mapping>, dir: usize) -> Self {
        let ctrl = Ctrl::of(dir);
        let cursor = map.u64_at(ctrl.tail).load(Ordering::SeqCst);
        Consumer { map, dir, ctrl, cursor, held: VecDeque::new() }
    }

    /// Whether the producer published a record not read yet.
    pub(crate) fn ready(&self) -> bool {
        // SeqCst: read after the consumer's `consumer_polls` store (see `Producer::push`).
        self.map.u64_at(self.ctrl.head).load(Ordering::SeqCst) != self.cursor
    }

    /// The next published record (`Wrap` padding is skipped and freed), if any.
    ///
    /// # Errors
    /// What is wrong with a record that breaks the layout.
    pub(crate) fn next(&mut self) -> Result<Option<Record>, String> {
        loop {
            let head = self.map.u64_at(self.ctrl.head).load(Ordering::Acquire);
            let cap = self.map.cap as u64;
            if head == self.cursor {
                return Ok(None);
            }
            if head < self.cursor || head - self.cursor > cap {
                return Err(format!("the ring's head moved from {} to {head}", self.cursor));
            }
            let off = (self.cursor % cap) as usize;
            let base = self.map.ring_at(self.dir);
            let mut w = [0u8; 16];
            self.map.copy_out(base + off, &mut w);
            let total = u64::from_le_bytes(w[0..8].try_into().unwrap_or_default());
            let kind = u32::from_le_bytes(w[8..12].try_into().unwrap_or_default());
            let kind = Kind::of(kind).ok_or_else(|| format!("a record of unknown kind {kind}"))?;
            if total == 0 || total % ALIGN != 0 || off as u64 + total > cap || total > head - self.cursor {
                return Err(format!("a {kind:?} record of {total} bytes at ring offset {off}"));
            }
            self.cursor += total;
            self.held.push_back((self.cursor, false));
            if kind == Kind::Wrap {
                self.free(self.cursor);
                continue;
            }
            if total < REC as u64 {
                return Err(format!("a {kind:?} record of {total} bytes"));
            }
            let mut h = [0u8; REC];
            self.map.copy_out(base + off, &mut h);
            let len = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
            let extra = u64::from_le_bytes(h[24..32].try_into().unwrap_or_default());
            if len > total - REC as u64 {
                return Err(format!("a {kind:?} record of {total} bytes says it holds {len}"));
            }
            let mut frame = [0u8; HEADER_LEN];
            frame.copy_from_slice(&h[FRAME_AT..FRAME_AT + HEADER_LEN]);
            return Ok(Some(Record { kind, end: self.cursor, frame, extra, off: off + REC, len: len as usize }));
        }
    }

    /// Copies `dst.len()` payload bytes of a record from ring offset `off` (in the record).
    pub(crate) fn copy(&self, off: usize, dst: &mut [u8]) {
        self.map.copy_out(self.map.ring_at(self.dir) + off, dst);
    }

    /// Frees the record ending at `end` (its bytes are not read any more); the producer may
    /// reuse it once every older record is freed too.
    pub(crate) fn free(&mut self, end: u64) {
        if let Some(r) = self.held.iter_mut().find(|r| r.0 == end) {
            r.1 = true;
        }
        let mut tail = None;
        while let Some(&(e, true)) = self.held.front() {
            tail = Some(e);
            self.held.pop_front();
        }
        let Some(tail) = tail else { return };
        self.map.u64_at(self.ctrl.tail).store(tail, Ordering::SeqCst);
        if self.map.u32_at(self.ctrl.producer_sleeps).load(Ordering::SeqCst) != 0 {
            self.map.u32_at(self.ctrl.space_bell).fetch_add(1, Ordering::SeqCst);
            futex_wake(self.map.u32_at(self.ctrl.space_bell));
        }
    }

    /// Counts one message as taken (the producer's `is_delivered`).
    pub(crate) fn deliver(&self) {
        self.map.u64_at(self.ctrl.delivered).fetch_add(1, Ordering::SeqCst);
    }

    /// What [`Waiter::wait_data`] needs, so that the consumer is not held while asleep.
    pub(crate) fn waiter(&self) -> Waiter {
        Waiter { map: self.map.clone(), ctrl: self.ctrl, cursor: self.cursor }
    }
}

/// Wakes the reader thread of direction `ctrl`'s consumer, if it sleeps and its rank does not
/// poll, for something other than data that its rank may wait for (the consumer of the other
/// direction took a message: `delivered` moved). The caller changed that before calling.
pub(crate) fn nudge(map: &Mapping, ctrl: Ctrl) {
    if map.u32_at(ctrl.consumer_polls).load(Ordering::SeqCst) == 0
        && map.u32_at(ctrl.consumer_sleeps).load(Ordering::SeqCst) != 0
    {
        map.u32_at(ctrl.data_bell).fetch_add(1, Ordering::SeqCst);
        futex_wake(map.u32_at(ctrl.data_bell));
    }
}

/// Sleeps on a consumer's ring without holding the consumer.
#[derive(Debug)]
pub(crate) struct Waiter {
    map: Arc<Mapping>,
    ctrl: Ctrl,
    cursor: u64,
}

impl Waiter {
    /// Sleeps until the producer publishes past the cursor or rings the bell for another
    /// reason ([`nudge`]: `other` then holds), or for at most `t`.
    pub(crate) fn wait_data(&self, t: Duration, other: &dyn Fn() -> bool) {
        let sleeps = self.map.u32_at(self.ctrl.consumer_sleeps);
        let bell = self.map.u32_at(self.ctrl.data_bell);
        sleeps.store(1, Ordering::SeqCst);
        let v = bell.load(Ordering::SeqCst);
        if self.map.u64_at(self.ctrl.head).load(Ordering::SeqCst) == self.cursor && !other() {
            futex_wait(bell, v, t);
        }
        sleeps.store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
