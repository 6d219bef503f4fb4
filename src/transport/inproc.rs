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

#[derive(Debug, Default)]
struct Mailbox {
    queue: Mutex<VecDeque<(Header, HostRegion)>>,
    sent: AtomicU64,
    released: AtomicU64,
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
        b.queue.lock().unwrap_or_else(|e| e.into_inner()).push_back((header, region));
        let ticket = b.sent.fetch_add(1, Ordering::SeqCst) + 1;
        self.events[to].ring();
        ticket
    }

    pub(super) fn has_message(&self, me: Rank, from: Rank) -> bool {
        let b = self.mailbox(from, me);
        b.sent.load(Ordering::SeqCst) > b.released.load(Ordering::SeqCst)
    }

    pub(super) fn peek(&self, me: Rank, from: Rank) -> Option<Message> {
        if !self.has_message(me, from) {
            return None;
        }
        let q = self.mailbox(from, me).queue.lock().unwrap_or_else(|e| e.into_inner());
        q.front().map(|(h, r)| Message { header: *h, region: r.clone() })
    }

    pub(super) fn release(&self, me: Rank, from: Rank) {
        let b = self.mailbox(from, me);
        b.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        b.released.fetch_add(1, Ordering::SeqCst);
        self.events[from].ring();
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
        let stop = || {
            if self.failed.load(Ordering::SeqCst) {
                Some(WaitOutcome::Poisoned)
            } else if self.departed.get(peer).is_some_and(|d| d.load(Ordering::SeqCst)) {
                Some(WaitOutcome::PeerGone)
            } else {
                None
            }
        };
        self.events[me].wait(deadline, ready, &stop, slow)
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
