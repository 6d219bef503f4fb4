//! Transports move payloads between ranks; they never see a device (a device range travels as
//! an opaque token). In-process mailboxes between threads ([`inproc`]) and TCP connections
//! ([`tcp`], frames from [`wire`]), whose data frames go through shared memory between
//! processes of one host (`shm`, Linux). The scheduler talks to a [`Link`], a closed enum, so the
//! plans run unchanged over either.
//!
//! Semantics every transport provides:
//! - `send` lends a [`Payload`] to a peer and returns a ticket; the lent memory must not be
//!   written until `is_released(ticket)` (in-process the peer reads it in place; a socket
//!   transport releases once the bytes are on the wire);
//! - messages between two ranks arrive in the order they were sent;
//! - `open` lets the receiver read the oldest unopened message in place; `release` tells the
//!   sender it is done, `close` puts the message back unread (a receiver that fails never
//!   tells a sender its data was consumed); over TCP the receiver reads a buffer the transport
//!   owns, and a device range never crosses (the scheduler stages it to host memory for a
//!   peer that [`shares_memory`](Link::shares_memory) says is not in this process);
//! - `reclaim` takes back every message a failed sender lent that was not opened yet, and
//!   waits for the ones being read, so a failed op never returns memory a peer still reads;
//! - `wait` blocks with a deadline and wakes on any message, release, abort or departure;
//!   [`wait_any`] does so for a thread that drives several ranks (of any links);
//! - failure and departure are each rank's own view (`poison(me, ..)`, `poisoned(me)`,
//!   `is_departed(me, ..)`): the link tells every peer (in-process a shared flag, over TCP an
//!   `Abort` or `Goodbye` frame), so what one rank learns from another always travels.

pub mod inproc;
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) mod shm;
pub(crate) mod slots;
pub(crate) mod tcp;
pub(crate) mod wait;
pub(crate) mod wire;

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{CollectiveError, Result};
use crate::mem::HostRegion;
use crate::op::Fingerprint;
use crate::types::Rank;

pub use wait::WaitOutcome;
pub(crate) use wait::{LiveRank, last_stall};

/// Blocks a thread that drives several ranks, of any communicators, until `ready()` holds,
/// `stop()` says why not, or the deadline passes. Wakes on anything that happens to any rank
/// of the process (every transport rings [`wait::bell`]); `slow` runs each time the wait goes
/// to sleep and may end it with an error.
pub(crate) fn wait_any(
    deadline: Instant,
    ready: &mut dyn FnMut() -> bool,
    stop: &dyn Fn() -> Option<WaitOutcome>,
    slow: &mut dyn FnMut() -> Result<()>,
) -> Result<WaitOutcome> {
    wait::bell().wait(deadline, ready, stop, slow)
}

/// Wakes whatever waits in [`wait_any`] (new work for a thread driving several ranks).
pub(crate) fn ring_any() {
    wait::bell().ring();
}

/// A waker that rings what [`wait_any`] waits on: handed to a device that wakes
/// ([`Device::wakes`](crate::Device::wakes)), so that a thread driving several ranks sleeps
/// until their device work completes, not in slices.
pub(crate) fn bell_waker() -> &'static std::task::Waker {
    struct RingAny;
    impl std::task::Wake for RingAny {
        fn wake(self: std::sync::Arc<Self>) {
            ring_any();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            ring_any();
        }
    }
    static WAKER: std::sync::OnceLock<std::task::Waker> = std::sync::OnceLock::new();
    WAKER.get_or_init(|| std::task::Waker::from(std::sync::Arc::new(RingAny)))
}

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

/// Where [`Link::open_into`] may land a message, and the check its header and length pass
/// first.
type Landing<'a> = (&'a HostRegion, &'a dyn Fn(&Header, usize) -> bool);

/// What a message carries: host bytes anyone in the process can read, or a range of device
/// memory that only a rank whose device reaches it can use.
#[derive(Clone, Debug)]
pub enum Payload {
    /// Lent host memory, read in place until released.
    Host(HostRegion),
    /// A lent range of device memory (the scheduler's `Range<D::Buffer>`, type-erased), and
    /// its length in bytes.
    Device(Arc<dyn Any + Send + Sync>, usize),
}

impl Payload {
    /// The length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Host(r) => r.len,
            Payload::Device(_, len) => *len,
        }
    }
}

/// A message opened for reading in place. The receiver ends it with [`Link::release`] (done:
/// the sender may reuse its memory) or [`Link::close`] (put back unread).
#[derive(Clone, Debug)]
pub struct Opened {
    /// The sender.
    pub from: Rank,
    /// The sender's ticket for this message.
    pub ticket: u64,
    /// The sender's header.
    pub header: Header,
    /// What it lent.
    pub payload: Payload,
}

/// The transports a scheduler can drive.
#[derive(Clone, Debug)]
pub enum Link {
    /// Ranks are threads of this process.
    InProc(Arc<inproc::Fabric>),
    /// Ranks talk over TCP connections.
    Tcp(Arc<tcp::Mesh>),
}

impl Link {
    /// Lends `payload` to `to`; returns the ticket to pass to [`is_released`](Self::is_released).
    pub fn send(&self, from: Rank, to: Rank, header: Header, payload: Payload) -> u64 {
        match self {
            Link::InProc(f) => f.send(from, to, header, payload),
            Link::Tcp(m) => m.send(from, to, header, payload),
        }
    }

    /// Whether an unopened message from `from` to `me` is waiting.
    pub fn has_message(&self, me: Rank, from: Rank) -> bool {
        match self {
            Link::InProc(f) => f.has_message(me, from),
            Link::Tcp(m) => m.has_message(me, from),
        }
    }

    /// The header of the oldest unopened message from `from` to `me`, if one has arrived,
    /// without opening it: for a waiting rank's slow-path checks, which look at what peers
    /// other than the awaited one sent.
    pub(crate) fn peek_header(&self, me: Rank, from: Rank) -> Option<Header> {
        if !self.has_message(me, from) {
            return None;
        }
        match self {
            Link::InProc(f) => f.peek_header(me, from),
            Link::Tcp(m) => m.peek_header(me, from),
        }
    }

    /// Opens the oldest unopened message from `from` to `me`, if one has arrived. It stays
    /// queued (and its sender's memory lent) until released.
    pub fn open(&self, me: Rank, from: Rank) -> Option<Opened> {
        match self {
            Link::InProc(f) => f.open(me, from),
            Link::Tcp(m) => m.open(me, from, None).map(|(m, _)| m),
        }
    }

    /// Whether [`open_into`](Self::open_into) may land a message's bytes itself (a peer in
    /// another process); in-process links never do, so receivers need not offer them a
    /// destination.
    pub fn can_land(&self) -> bool {
        matches!(self, Link::Tcp(_))
    }

    /// Opens the oldest unopened message from `from` as [`open`](Self::open) does, except that
    /// when the transport can land its bytes in `dst` with a single copy (a large message
    /// read straight out of a peer process's memory) and `accept(header, len)` holds, it
    /// does, and says so (`true`; the payload is then `dst`, and the receiver releases the
    /// message as usual). `None` as from `open`, or when reading the peer's memory failed
    /// (the link is then poisoned with an error naming the peer).
    pub fn open_into(
        &self,
        me: Rank,
        from: Rank,
        dst: &HostRegion,
        accept: &dyn Fn(&Header, usize) -> bool,
    ) -> Option<(Opened, bool)> {
        match self {
            Link::InProc(f) => f.open(me, from).map(|m| (m, false)),
            Link::Tcp(m) => m.open(me, from, Some((dst, accept))),
        }
    }

    /// Tells the sender of `msg` that `me` checked its header and size and takes it (the
    /// bytes are read later and released with [`release`](Self::release)): between processes
    /// over shared memory the sender's [`is_delivered`](Self::is_delivered) holds from now on,
    /// so its op may end while this rank still copies the bytes out of the ring. Elsewhere a
    /// message counts as taken once released, and this does nothing.
    pub fn accept(&self, me: Rank, msg: &Opened) {
        match self {
            Link::InProc(_) => {}
            Link::Tcp(m) => m.accept(me, msg.from, msg.ticket),
        }
    }

    /// Tells the sender of `msg` that `me` is done with it.
    pub fn release(&self, me: Rank, msg: &Opened) {
        match self {
            Link::InProc(f) => f.finish(me, msg.from, msg.ticket, true),
            Link::Tcp(m) => m.finish(me, msg.from, msg.ticket, true),
        }
    }

    /// Puts `msg` back unread.
    pub fn close(&self, me: Rank, msg: &Opened) {
        match self {
            Link::InProc(f) => f.finish(me, msg.from, msg.ticket, false),
            Link::Tcp(m) => m.finish(me, msg.from, msg.ticket, false),
        }
    }

    /// Whether the message with `ticket` from `me` to `to` has been released.
    pub fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        match self {
            Link::InProc(f) => f.is_released(me, to, ticket),
            Link::Tcp(m) => m.is_released(me, to, ticket),
        }
    }

    /// Whether `to` has taken the message with `ticket` from `me` (checked its header and
    /// [accepted](Self::accept) it, or released it) and this rank is done with it too.
    /// In-process the same as [`is_released`](Self::is_released); over a socket, later (a
    /// credit coming back); over shared memory, once accepted.
    pub fn is_delivered(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        match self {
            Link::InProc(f) => f.is_released(me, to, ticket),
            Link::Tcp(m) => m.is_delivered(me, to, ticket),
        }
    }

    /// Takes back every message `me` lent `to` that `to` has not opened, then waits until
    /// `to` is done with the ones it is reading (ignoring abort and departure: those readers
    /// are in the middle of a copy). False when `deadline` passed first.
    pub fn reclaim(&self, me: Rank, to: Rank, deadline: Instant) -> bool {
        match self {
            Link::InProc(f) => f.wait_quietly(me, deadline, &mut || !f.revoke(me, to)),
            Link::Tcp(m) => m.reclaim(me, to, deadline),
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
            Link::Tcp(m) => m.wait(me, peer, deadline, ready, slow),
        }
    }

    /// Whether the link failed (aborted, or an op failed on some rank). Cheap enough to ask
    /// in a spin loop.
    pub fn is_poisoned(&self, me: Rank) -> bool {
        match self {
            Link::InProc(f) => f.is_failed(),
            Link::Tcp(m) => m.is_failed(me),
        }
    }

    /// Whether `me` knows that `rank` has dropped its communicator (or, over a socket, lost
    /// its connection).
    pub fn is_departed(&self, me: Rank, rank: Rank) -> bool {
        match self {
            Link::InProc(f) => f.is_departed(rank),
            Link::Tcp(m) => m.is_departed(me, rank),
        }
    }

    /// How `me` lost `rank`, in words that follow "rank N": it dropped its communicator (a
    /// goodbye), or, over a socket, it fell silent past the limit, or its connection ended
    /// without a goodbye (the process died or was killed, the connection broke) — with what
    /// to check.
    pub fn departure(&self, me: Rank, rank: Rank) -> std::borrow::Cow<'static, str> {
        match self {
            Link::Tcp(m) if let Some(limit) = m.silent_past(me, rank) => format!(
                "is gone: nothing came on its connection for longer than the peer-silence limit, {limit:?} here \
                 (RUCCL_PEER_SILENCE, CommConfig::with_peer_silence; 60 s by default): is its process stopped \
                 (SIGSTOP, a debugger), hung outside ruCCL with its sockets open, or its host unreachable?"
            )
            .into(),
            Link::Tcp(m) if m.is_lost(me, rank) => "is gone: its connection closed without a goodbye, or broke (did \
                 its process crash or get killed? is the network between the hosts up?)"
                .into(),
            _ => "dropped its communicator".into(),
        }
    }

    /// A peer of another process that `me` lost (its connection closed without a goodbye,
    /// or fell silent), if any; never between threads of one process.
    pub fn lost_peer(&self, me: Rank) -> Option<Rank> {
        match self {
            Link::InProc(_) => None,
            Link::Tcp(m) => m.lost_peer(me),
        }
    }

    /// Marks `me` failed with `err`, tells every peer, and wakes every waiting rank.
    pub fn poison(&self, me: Rank, err: CollectiveError) {
        match self {
            Link::InProc(f) => f.poison(err),
            Link::Tcp(m) => m.poison(me, err),
        }
    }

    /// [`poison`](Self::poison) for `abort()`: returns once the news is on the wire to every
    /// peer of another process (at most 2 s), so that the process may exit right after.
    pub fn abort(&self, me: Rank, err: CollectiveError) {
        self.poison(me, err);
        if let Link::Tcp(m) = self {
            m.told_written(me);
        }
    }

    /// Whether `me` knows of no failure and lost no peer: [`poisoned`](Self::poisoned) and
    /// [`lost_peer`](Self::lost_peer) would both say `None`. One or two loads, for the check
    /// every op makes before it starts.
    #[inline]
    pub fn sound(&self, me: Rank) -> bool {
        match self {
            Link::InProc(f) => f.sound(),
            Link::Tcp(m) => m.sound(me),
        }
    }

    /// The error `me` knows the communicator failed with (its own or a peer's), if any.
    pub fn poisoned(&self, me: Rank) -> Option<CollectiveError> {
        match self {
            Link::InProc(f) => f.poisoned(),
            Link::Tcp(m) => m.poisoned(me),
        }
    }

    /// Whether `me` and `peer` are in one process and so may pass device ranges and read
    /// each other's host memory in place. When not, the scheduler sends host bytes only.
    pub fn shares_memory(&self, me: Rank, peer: Rank) -> bool {
        match self {
            Link::InProc(_) => true,
            Link::Tcp(m) => me == peer || m.is_local() || m.same_process(me, peer),
        }
    }

    /// How `me`'s data reaches `peer`.
    pub(crate) fn peer_link(&self, me: Rank, peer: Rank) -> crate::types::PeerLink {
        use crate::types::PeerLink;
        match self {
            _ if me == peer => PeerLink::Itself,
            Link::InProc(_) => PeerLink::InProcess,
            Link::Tcp(m) if m.same_process(me, peer) => PeerLink::InProcess,
            Link::Tcp(m) if m.through_shm(me, peer) => PeerLink::SharedMemory,
            Link::Tcp(_) => PeerLink::Tcp,
        }
    }

    /// Whether some peer of `me` among `world` ranks is reached over a network (a socket or
    /// a shared segment) rather than by reading its memory: plans then cut long messages
    /// (`algo::build`'s `network`), for every peer alike.
    pub(crate) fn network(&self, me: Rank, world: usize) -> bool {
        (0..world).any(|p| p != me && !self.shares_memory(me, p))
    }

    /// The exchange slots: of ranks that are threads of one process, or of processes of one
    /// host that agreed on them at setup (`None` otherwise: messages).
    pub(crate) fn slots(&self) -> Option<&slots::Slots> {
        match self {
            Link::InProc(f) => Some(f.slots()),
            Link::Tcp(m) => m.slots(),
        }
    }

    /// Whether [`slots`](Self::slots) has slots to give (without making them).
    pub(crate) fn has_slots(&self) -> bool {
        match self {
            Link::InProc(_) => true,
            Link::Tcp(m) => m.slots().is_some(),
        }
    }

    /// Wakes every rank but `me` that waits on this link (one ring of the process-wide
    /// doorbell for all of them; peers in other processes through their pair's reader).
    /// Orders the caller's stores before its looks at whether peers sleep; between threads of
    /// one process that may be only the ringer's half of an asymmetric fence
    /// ([`wait::ringer_fence`]): callers must not count on it for anything else.
    pub(crate) fn wake_peers(&self, me: Rank) {
        match self {
            Link::InProc(f) => f.wake_peers(me),
            Link::Tcp(m) => m.wake_peers(me),
        }
    }

    /// Sets what the ranks of this process answer a peer of another process that asks for
    /// their flight recorder (nothing to set in-process: the board is shared).
    pub(crate) fn set_flight(&self, source: &tcp::FlightSource) {
        if let Link::Tcp(m) = self {
            m.set_flight(source);
        }
    }

    /// The flight-recorder answers of `me`'s peers `ranks` (in other processes), asked for
    /// now and waited for up to `wait` (none in-process: the board there is shared).
    pub(crate) fn ask_flight(&self, me: Rank, ranks: &[Rank], wait: Duration) -> Vec<(Rank, Vec<u8>)> {
        match self {
            Link::InProc(_) => Vec::new(),
            Link::Tcp(m) => m.ask_flight(me, ranks, wait),
        }
    }

    /// Marks `rank` as gone (its communicator was dropped) and wakes everyone.
    pub fn depart(&self, rank: Rank) {
        match self {
            Link::InProc(f) => f.depart(rank),
            Link::Tcp(m) => m.depart(rank),
        }
    }
}
