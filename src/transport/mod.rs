//! Transports move host bytes between ranks; they never see a device. Today: in-process
//! mailboxes between threads ([`inproc`]). The scheduler talks to a [`Link`], a closed enum
//! so that a TCP transport can join it per peer pair without touching the plans.
//!
//! Semantics every transport provides:
//! - `send` hands a [`HostRegion`] to a peer and returns a ticket; the region must not be
//!   written until `is_released(ticket)` (in-process the peer reads it in place; a socket
//!   transport releases once the bytes are on the wire).
//! - messages between two ranks arrive in the order they were sent;
//! - `open` lets the receiver read the oldest message in place; [`Opened::release`] tells the
//!   sender it is done, and dropping an [`Opened`] without releasing puts the message back
//!   (a receiver that fails never tells a sender its data was consumed);
//! - `reclaim` takes back every message a failed sender lent that was not opened yet, and
//!   waits for the ones being read, so a failed op never returns memory a peer still reads;
//! - `wait` blocks with a deadline and wakes on any message, release, abort or departure.

pub mod inproc;
mod wait;

use std::time::Instant;

use crate::error::Result;
use crate::mem::HostRegion;
use crate::op::Fingerprint;
use crate::types::Rank;

pub use wait::WaitOutcome;

/// Travels with every message so that the receiver can tell whether the sender is running the
/// same op (and so catch mismatched collectives instead of reading the wrong bytes).
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// Collective sequence number, or the per-pair point-to-point sequence number.
    pub seq: u64,
    /// Whether `seq` is a point-to-point sequence number.
    pub p2p: bool,
    /// Index of this message among those the op sends to this peer.
    pub index: u32,
    /// What the sender is running.
    pub fp: Fingerprint,
}

/// A received message: the header and the lent bytes.
#[derive(Debug)]
pub struct Message {
    /// The sender's header.
    pub header: Header,
    /// The bytes; readable until the message is released.
    pub region: HostRegion,
}

/// A message opened for reading in place. [`release`](Self::release) hands it back to the
/// sender as consumed; dropping it unreleased puts it back unread.
#[derive(Debug)]
pub struct Opened<'l> {
    link: &'l Link,
    me: Rank,
    from: Rank,
    msg: Message,
    done: bool,
}

impl Opened<'_> {
    /// The sender's header.
    pub fn header(&self) -> &Header {
        &self.msg.header
    }

    /// The lent bytes.
    pub fn region(&self) -> &HostRegion {
        &self.msg.region
    }

    /// Tells the sender this rank is done with the message.
    pub fn release(mut self) {
        self.done = true;
        match self.link {
            Link::InProc(f) => f.release(self.me, self.from),
        }
    }
}

impl Drop for Opened<'_> {
    fn drop(&mut self) {
        if !self.done {
            match self.link {
                Link::InProc(f) => f.close(self.me, self.from),
            }
        }
    }
}

/// The transports a scheduler can drive.
#[derive(Clone, Debug)]
pub enum Link {
    /// Ranks are threads of this process.
    InProc(std::sync::Arc<inproc::Fabric>),
}

impl Link {
    /// Lends `region` to `to`; returns the ticket to pass to [`is_released`](Self::is_released).
    pub fn send(&self, from: Rank, to: Rank, header: Header, region: HostRegion) -> u64 {
        match self {
            Link::InProc(f) => f.send(from, to, header, region),
        }
    }

    /// Opens the oldest unopened message from `from` to `me`, if one has arrived. It stays
    /// queued (and its sender's memory lent) until the returned handle is released.
    pub fn open(&self, me: Rank, from: Rank) -> Option<Opened<'_>> {
        let msg = match self {
            Link::InProc(f) => f.open(me, from)?,
        };
        Some(Opened { link: self, me, from, msg, done: false })
    }

    /// Takes back every message `me` lent `to` that `to` has not opened, then waits until
    /// `to` is done with the ones it is reading (ignoring abort and departure: those readers
    /// are in the middle of a copy). False when `deadline` passed first.
    pub fn reclaim(&self, me: Rank, to: Rank, deadline: Instant) -> bool {
        match self {
            Link::InProc(f) => f.wait_quietly(me, deadline, &mut || !f.revoke(me, to)),
        }
    }

    /// Whether the message with `ticket` from `me` to `to` has been released.
    pub fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        match self {
            Link::InProc(f) => f.is_released(me, to, ticket),
        }
    }

    /// Whether a message from `from` to `me` is waiting.
    pub fn has_message(&self, me: Rank, from: Rank) -> bool {
        match self {
            Link::InProc(f) => f.has_message(me, from),
        }
    }

    /// Blocks `me` until `ready()` holds, the deadline passes, the link is aborted or `peer`
    /// departs. `slow` runs each time the wait goes to sleep (mismatch checks, flight
    /// recorder updates) and may end the wait with an error.
    pub fn wait(
        &self,
        me: Rank,
        peer: Rank,
        deadline: Instant,
        ready: &mut dyn FnMut() -> bool,
        slow: &mut dyn FnMut() -> Result<()>,
    ) -> Result<WaitOutcome> {
        match self {
            Link::InProc(f) => f.wait(me, peer, deadline, ready, slow),
        }
    }

    /// Marks the link failed with `err` and wakes every waiting rank.
    pub fn poison(&self, err: crate::error::CollectiveError) {
        match self {
            Link::InProc(f) => f.poison(err),
        }
    }

    /// The error the link failed with, if any.
    pub fn poisoned(&self) -> Option<crate::error::CollectiveError> {
        match self {
            Link::InProc(f) => f.poisoned(),
        }
    }

    /// Marks `rank` as gone (its communicator was dropped) and wakes everyone.
    pub fn depart(&self, rank: Rank) {
        match self {
            Link::InProc(f) => f.depart(rank),
        }
    }
}
