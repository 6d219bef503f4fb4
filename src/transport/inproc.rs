//! In-process transport: one mailbox per ordered pair of ranks. A send puts a lent region in
//! the mailbox; the receiver reads the sender's memory in place and releases it. No bytes are
//! copied by the transport, and the mailboxes reuse their queues, so nothing is allocated per
//! message once a communicator is warm.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use super::wait::{Event, WaitOutcome};
use super::{Header, Message};
use crate::error::{CollectiveError, Result};
use crate::mem::HostRegion;
use crate::types::Rank;

/// A message in a mailbox. `opened` while the receiver reads it in place.
#[derive(Debug)]
struct Entry {
    header: Header,
    region: HostRegion,
    opened: bool,
}

#[derive(Debug, Default)]
struct Mailbox {
    queue: Mutex<VecDeque<Entry>>,
    sent: AtomicU64,
    released: AtomicU64,
}

impl Mailbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The shared state of one communicator's in-process transport.
#[derive(Debug)]
pub struct Fabric {
    world: usize,
    boxes: Vec<Mailbox>,
    events: Vec<Event>,
    departed: Vec<AtomicBool>,
    failed: AtomicBool,
    poison: Mutex<Option<CollectiveError>>,
}

impl Fabric {
    /// A fabric for `world` ranks.
    pub fn new(world: usize) -> Self {
        Fabric {
            world,
            boxes: (0..world * world).map(|_| Mailbox::default()).collect(),
            events: (0..world).map(|_| Event::default()).collect(),
            departed: (0..world).map(|_| AtomicBool::new(false)).collect(),
            failed: AtomicBool::new(false),
            poison: Mutex::new(None),
        }
    }

    fn mailbox(&self, from: Rank, to: Rank) -> &Mailbox {
        &self.boxes[from * self.world + to]
    }

    pub(super) fn send(&self, from: Rank, to: Rank, header: Header, region: HostRegion) -> u64 {
        let b = self.mailbox(from, to);
        let ticket = {
            let mut q = b.queue();
            q.push_back(Entry { header, region, opened: false });
            b.sent.fetch_add(1, Ordering::SeqCst) + 1
        };
        self.events[to].ring();
        ticket
    }

    pub(super) fn has_message(&self, me: Rank, from: Rank) -> bool {
        let b = self.mailbox(from, me);
        b.sent.load(Ordering::SeqCst) > b.released.load(Ordering::SeqCst)
    }

    pub(super) fn open(&self, me: Rank, from: Rank) -> Option<Message> {
        if !self.has_message(me, from) {
            return None;
        }
        let mut q = self.mailbox(from, me).queue();
        let e = q.iter_mut().find(|e| !e.opened)?;
        e.opened = true;
        Some(Message { header: e.header, region: e.region.clone() })
    }

    pub(super) fn release(&self, me: Rank, from: Rank) {
        let b = self.mailbox(from, me);
        {
            let mut q = b.queue();
            q.pop_front();
            b.released.fetch_add(1, Ordering::SeqCst);
        }
        self.events[from].ring();
    }

    pub(super) fn close(&self, me: Rank, from: Rank) {
        if let Some(e) = self.mailbox(from, me).queue().iter_mut().find(|e| e.opened) {
            e.opened = false;
        }
        self.events[from].ring();
    }

    /// Takes back every message `me` sent `to` that `to` has not opened; true while `to`
    /// still reads one in place.
    pub(super) fn revoke(&self, me: Rank, to: Rank) -> bool {
        let b = self.mailbox(me, to);
        let mut q = b.queue();
        let before = q.len();
        q.retain(|e| e.opened);
        let taken = (before - q.len()) as u64;
        if taken > 0 {
            b.sent.fetch_sub(taken, Ordering::SeqCst);
        }
        !q.is_empty()
    }

    pub(super) fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        self.mailbox(me, to).released.load(Ordering::SeqCst) >= ticket
    }

    pub(super) fn wait(
        &self,
        me: Rank,
        peer: Rank,
        deadline: Instant,
        ready: &mut dyn FnMut() -> bool,
        slow: &mut dyn FnMut() -> Result<()>,
    ) -> Result<WaitOutcome> {
        self.events[me].wait(deadline, ready, &|| self.stop(peer), slow)
    }

    /// Waits, ignoring abort and departure, until `ready()` or the deadline.
    pub(super) fn wait_quietly(&self, me: Rank, deadline: Instant, ready: &mut dyn FnMut() -> bool) -> bool {
        matches!(self.events[me].wait(deadline, ready, &|| None, &mut || Ok(())), Ok(WaitOutcome::Ready))
    }

    fn stop(&self, peer: Rank) -> Option<WaitOutcome> {
        if self.failed.load(Ordering::SeqCst) {
            Some(WaitOutcome::Poisoned)
        } else if self.departed.get(peer).is_some_and(|d| d.load(Ordering::SeqCst)) {
            Some(WaitOutcome::PeerGone)
        } else {
            None
        }
    }

    pub(super) fn poison(&self, err: CollectiveError) {
        {
            let mut p = self.poison.lock().unwrap_or_else(|e| e.into_inner());
            if p.is_none() {
                *p = Some(err);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.events.iter().for_each(Event::ring);
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
        self.events.iter().for_each(Event::ring);
    }
}
