//! In-process transport: one mailbox per ordered pair of ranks. A send puts a lent payload in
//! the mailbox; the receiver reads the sender's memory in place (or, for a device payload,
//! has its device read it) and releases it. No bytes are copied by the transport, and the
//! mailboxes reuse their queues, so nothing is allocated per message once a communicator is
//! warm.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::slots::Slots;
use super::wait::{Event, WaitOutcome};
use super::{Header, Opened, Payload};
use crate::error::{CollectiveError, Result};
use crate::types::Rank;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the receiver.
    Queued,
    /// The receiver is reading it.
    Opened,
    /// Done with (released by the receiver, or revoked by a failed sender).
    Gone,
}

#[derive(Debug)]
struct Entry {
    ticket: u64,
    header: Header,
    payload: Payload,
    state: State,
}

/// Aligned to two cache lines (what adjacent-line prefetchers pull in together), so that the
/// mailboxes of different pairs — written by different threads at once, for example both
/// directions of one pair — never share a line.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Mailbox {
    queue: Mutex<VecDeque<Entry>>,
    /// Messages ever sent; the latest one's ticket.
    sent: AtomicU64,
    /// Messages opened or revoked: `sent > taken` means one is waiting.
    taken: AtomicU64,
    /// Every ticket up to this one is done with.
    released: AtomicU64,
}

impl Mailbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops finished entries from the front and publishes the released prefix.
    fn trim(&self, q: &mut VecDeque<Entry>) {
        while let Some(e) = q.front() {
            if e.state != State::Gone {
                break;
            }
            self.released.store(e.ticket, Ordering::SeqCst);
            q.pop_front();
        }
    }
}

/// The mailboxes of `n` ranks of one process, one per ordered pair: what a message lent in
/// place needs, with no waking (the owner rings the ranks concerned). The in-process
/// transport's [`Fabric`], and a TCP mesh for its pairs of ranks that share a process,
/// are built on it. Ranks are indices `0..n`.
#[derive(Debug)]
pub(crate) struct Boxes {
    n: usize,
    boxes: Vec<Mailbox>,
}

impl Boxes {
    /// Mailboxes for `n` ranks.
    pub(crate) fn new(n: usize) -> Self {
        Boxes { n, boxes: (0..n * n).map(|_| Mailbox::default()).collect() }
    }

    fn mailbox(&self, from: Rank, to: Rank) -> &Mailbox {
        &self.boxes[from * self.n + to]
    }

    /// Queues `payload` for `to`, lent until released; its ticket.
    pub(crate) fn send(&self, from: Rank, to: Rank, header: Header, payload: Payload) -> u64 {
        let b = self.mailbox(from, to);
        let mut q = b.queue();
        let ticket = b.sent.load(Ordering::SeqCst) + 1;
        q.push_back(Entry { ticket, header, payload, state: State::Queued });
        b.sent.store(ticket, Ordering::SeqCst);
        ticket
    }

    pub(crate) fn has_message(&self, me: Rank, from: Rank) -> bool {
        let b = self.mailbox(from, me);
        b.sent.load(Ordering::SeqCst) > b.taken.load(Ordering::SeqCst)
    }

    pub(crate) fn peek_header(&self, me: Rank, from: Rank) -> Option<Header> {
        let b = self.mailbox(from, me);
        let q = b.queue();
        q.iter().find(|e| e.state == State::Queued).map(|e| e.header)
    }

    pub(crate) fn open(&self, me: Rank, from: Rank) -> Option<Opened> {
        if !self.has_message(me, from) {
            return None;
        }
        let b = self.mailbox(from, me);
        let mut q = b.queue();
        let e = q.iter_mut().find(|e| e.state == State::Queued)?;
        e.state = State::Opened;
        b.taken.fetch_add(1, Ordering::SeqCst);
        Some(Opened { from, ticket: e.ticket, header: e.header, payload: e.payload.clone() })
    }

    /// Marks the message `ticket` from `from` done with (`release`) or back in the queue
    /// unread (`!release`); the caller wakes its sender.
    pub(crate) fn finish(&self, me: Rank, from: Rank, ticket: u64, release: bool) {
        let b = self.mailbox(from, me);
        let mut q = b.queue();
        if let Some(e) = q.iter_mut().find(|e| e.ticket == ticket && e.state == State::Opened) {
            if release {
                e.state = State::Gone;
            } else {
                e.state = State::Queued;
                b.taken.fetch_sub(1, Ordering::SeqCst);
            }
        }
        b.trim(&mut q);
    }

    /// Takes back every message `me` sent `to` that `to` has not opened; true while `to`
    /// still reads one in place.
    pub(crate) fn revoke(&self, me: Rank, to: Rank) -> bool {
        let b = self.mailbox(me, to);
        let mut q = b.queue();
        let mut taken = 0;
        for e in q.iter_mut().filter(|e| e.state == State::Queued) {
            e.state = State::Gone;
            taken += 1;
        }
        if taken > 0 {
            b.taken.fetch_add(taken, Ordering::SeqCst);
        }
        b.trim(&mut q);
        q.iter().any(|e| e.state == State::Opened)
    }

    pub(crate) fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        self.mailbox(me, to).released.load(Ordering::SeqCst) >= ticket
    }
}

/// The shared state of one communicator's in-process transport.
#[derive(Debug)]
pub struct Fabric {
    world: usize,
    boxes: Boxes,
    events: Vec<Event>,
    departed: Vec<AtomicBool>,
    failed: AtomicBool,
    poison: Mutex<Option<CollectiveError>>,
    /// Small ops exchanged without messages (made on first use).
    slots: OnceLock<Slots>,
}

impl Fabric {
    /// A fabric for `world` ranks.
    pub fn new(world: usize) -> Self {
        Fabric {
            world,
            boxes: Boxes::new(world),
            events: (0..world).map(|_| Event::default()).collect(),
            departed: (0..world).map(|_| AtomicBool::new(false)).collect(),
            failed: AtomicBool::new(false),
            poison: Mutex::new(None),
            slots: OnceLock::new(),
        }
    }

    fn ring(&self, rank: Rank) {
        if let Some(e) = self.events.get(rank) {
            e.ring();
        }
        super::wait::bell().ring();
    }

    /// The ranks' exchange slots.
    pub(super) fn slots(&self) -> &Slots {
        self.slots.get_or_init(|| Slots::new(self.world))
    }

    /// Wakes every rank but `me` that waits, ringing the process-wide doorbell once.
    pub(super) fn wake_peers(&self, me: Rank) {
        // One fence for every doorbell (see `Event::ring_fenced`), and one look while nobody
        // in this process sleeps (see `anyone_parked`).
        super::wait::ringer_fence();
        if !super::wait::anyone_parked() {
            return;
        }
        let others = self.events.iter().enumerate().filter(|&(rank, _)| rank != me);
        super::wait::ring_all(others.map(|(_, e)| e));
    }

    pub(super) fn send(&self, from: Rank, to: Rank, header: Header, payload: Payload) -> u64 {
        let ticket = self.boxes.send(from, to, header, payload);
        self.ring(to);
        ticket
    }

    pub(super) fn has_message(&self, me: Rank, from: Rank) -> bool {
        self.boxes.has_message(me, from)
    }

    pub(super) fn peek_header(&self, me: Rank, from: Rank) -> Option<Header> {
        self.boxes.peek_header(me, from)
    }

    pub(super) fn open(&self, me: Rank, from: Rank) -> Option<Opened> {
        self.boxes.open(me, from)
    }

    /// Marks the message `ticket` from `from` done with (`release`) or back in the queue
    /// unread (`!release`), and wakes its sender.
    pub(super) fn finish(&self, me: Rank, from: Rank, ticket: u64, release: bool) {
        self.boxes.finish(me, from, ticket, release);
        self.ring(from);
    }

    /// Takes back every message `me` sent `to` that `to` has not opened; true while `to`
    /// still reads one in place.
    pub(super) fn revoke(&self, me: Rank, to: Rank) -> bool {
        self.boxes.revoke(me, to)
    }

    pub(super) fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        self.boxes.is_released(me, to, ticket)
    }

    pub(super) fn wait(
        &self,
        me: Rank,
        peer: Rank,
        deadline: Instant,
        ready: &mut dyn FnMut() -> bool,
        slow: &mut dyn FnMut() -> Result<()>,
    ) -> Result<WaitOutcome> {
        self.events[me].wait(deadline, ready, &|| self.stop(Some(peer)), slow)
    }

    /// Waits, ignoring abort and departure, until `ready()` or the deadline.
    pub(super) fn wait_quietly(&self, me: Rank, deadline: Instant, ready: &mut dyn FnMut() -> bool) -> bool {
        matches!(self.events[me].wait(deadline, ready, &|| None, &mut || Ok(())), Ok(WaitOutcome::Ready))
    }

    /// Whether the fabric failed (cheap: one atomic load).
    pub(super) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Departure is read before the poison: a rank that fails poisons the link before it
    /// leaves, so once its departure shows, so does its poison (reading them the other way
    /// round, the peer could fail and leave between the two loads and look merely gone).
    fn stop(&self, peer: Option<Rank>) -> Option<WaitOutcome> {
        let gone = peer.is_some_and(|p| self.departed.get(p).is_some_and(|d| d.load(Ordering::SeqCst)));
        crate::transport::wait::stopped(self.failed.load(Ordering::SeqCst), gone)
    }

    pub(super) fn is_departed(&self, rank: Rank) -> bool {
        self.departed.get(rank).is_some_and(|d| d.load(Ordering::SeqCst))
    }

    pub(super) fn poison(&self, err: CollectiveError) {
        {
            let mut p = self.poison.lock().unwrap_or_else(|e| e.into_inner());
            if p.is_none() {
                *p = Some(err);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.ring_all();
    }

    /// Not [`poisoned`](Self::poisoned) (its first load).
    #[inline]
    pub(super) fn sound(&self) -> bool {
        !self.failed.load(Ordering::SeqCst)
    }

    pub(super) fn poisoned(&self) -> Option<CollectiveError> {
        if !self.failed.load(Ordering::SeqCst) {
            return None;
        }
        self.poison.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(super) fn depart(&self, rank: Rank) {
        if let Some(d) = self.departed.get(rank) {
            d.store(true, Ordering::SeqCst);
        }
        self.ring_all();
    }

    fn ring_all(&self) {
        self.events.iter().for_each(Event::ring);
        super::wait::bell().ring();
    }
}
