//! Data frames of a pair of ranks in two processes of one host, through the pair's shared
//! segment ([`crate::transport::shm`]) instead of the socket (which still carries hello,
//! abort, goodbye and heartbeats, and whose closing says the peer process is gone).
//!
//! - `send` copies a message into the ring at once when nothing is queued before it and it
//!   fits (the common case: no thread hop); otherwise a writer thread copies it when space
//!   frees, streaming messages larger than [`INLINE_MAX`] in pieces. The lend is released
//!   once the bytes are in the ring.
//! - A reader thread hands each record to the inbox as host memory *in the ring*: the
//!   scheduler reduces or copies straight out of it. Accepting the message (its header
//!   checked) counts it delivered, so the sender's op may end while the receiver still copies
//!   the bytes out; releasing it frees the record (the credit). Streamed messages land in a
//!   buffer the receiver owns.
//! - Both threads sleep on futex words in the segment with short timeouts, so they notice a
//!   peer that is gone (its socket closed) or this rank leaving. The writer is `shm_write.rs`,
//!   the reader and the poll that checks and hands over records `shm_read.rs`; this file
//!   holds the pair's state, the inline paths and the wake-ups.
//!
//! - Messages of at least [`CMA_MIN`](crate::transport::shm::cma::CMA_MIN) bytes
//!   ([`CMA_MIN_COPY`](crate::transport::shm::cma::CMA_MIN_COPY) for the gathering and
//!   scattering ops; [`CMA_MIN_ONE_PEER`](crate::transport::shm::cma::CMA_MIN_ONE_PEER) for
//!   a rank whose only peer on the host is this one) of every op but a rooted reduce, where the pair can
//!   read each other's memory, are lent instead of copied ([`lend`]; `RUCCL_SHM_CMA=0`
//!   turns it off).
//!
//! Ordering with the socket: a departing rank puts its last data in the ring before its
//! goodbye goes on the socket, and the receiving reader drains the ring once more after the
//! socket says the peer is gone before the rank may see it as departed
//! ([`ShmPeer::is_drained`]), so a peer's last message is never overtaken by its departure.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::{Endpoint, OutMsg, Peer, lock};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::mem::HostMem;
use crate::transport::shm::cma;
use crate::transport::shm::ring::{self, Consumer, Kind, Producer};
use crate::transport::shm::segment::Ctrl;
use crate::transport::shm::{INLINE_MAX, Pair};
use crate::transport::wire;
use crate::transport::{Header, Payload};

/// Longest single sleep of the threads (they check for departure at least this often).
const NAP: Duration = Duration::from_millis(10);

/// A message being streamed in: its header, buffer, and bytes received so far.
#[derive(Debug)]
struct Stream {
    header: Header,
    mem: HostMem,
    filled: usize,
}

#[path = "shm_lend.rs"]
mod lend;
#[path = "shm_read.rs"]
mod read;
#[path = "shm_write.rs"]
mod write;

#[derive(Debug)]
struct Incoming {
    cons: Consumer,
    /// The number of the last lent message that arrived.
    lent_next: u64,
    /// Inbox messages read in place: (inbox id, record end).
    held: Vec<(u64, u64)>,
    /// Inbox messages accepted (counted delivered) and not released yet.
    accepted: Vec<u64>,
    stream: Option<Stream>,
    /// The last fingerprint decoded from this peer's frames (most frames repeat it).
    fps: wire::FpMemo,
}

/// One rank's shared-memory side of its link to a peer in another process.
#[derive(Debug)]
pub(crate) struct ShmPeer {
    prod: Mutex<Producer>,
    incoming: Mutex<Incoming>,
    /// The incoming ring, as host memory for in-place messages.
    ring_in: HostMem,
    pair: Pair,
    writer: OnceLock<Thread>,
    /// The reader stopped and read everything the peer published.
    drained: AtomicBool,
    lending: Mutex<lend::Lending>,
    /// How many lent messages `lending` holds (its `out`), stored under its lock: the common
    /// "nothing lent" answer without taking it.
    lent_out: AtomicUsize,
    /// Messages at least this large go by single copy where the pair can ([`cma::CMA_MIN`],
    /// or [`cma::CMA_MIN_ONE_PEER`] when this is the rank's only peer on the host).
    cma_min: usize,
    /// The same for the gathering and scattering ops ([`cma::CMA_MIN_COPY`], or
    /// [`cma::CMA_MIN_ONE_PEER`] for the only peer).
    copy_min: usize,
}

impl ShmPeer {
    /// The rank's side of `pair`; `local_peers`: how many peers it has on this host.
    pub(super) fn new(pair: Pair, local_peers: usize) -> Self {
        let in_dir = 1 - pair.out_dir;
        ShmPeer {
            prod: Mutex::new(Producer::new(pair.map.clone(), pair.out_dir)),
            incoming: Mutex::new(Incoming {
                cons: Consumer::new(pair.map.clone(), in_dir),
                lent_next: 0,
                held: Vec::new(),
                accepted: Vec::new(),
                stream: None,
                fps: wire::FpMemo::default(),
            }),
            ring_in: pair.map.ring_mem(in_dir),
            pair,
            writer: OnceLock::new(),
            drained: AtomicBool::new(false),
            lending: Mutex::new(lend::Lending::default()),
            lent_out: AtomicUsize::new(0),
            cma_min: if local_peers <= 1 { cma::CMA_MIN_ONE_PEER } else { cma::CMA_MIN },
            copy_min: if local_peers <= 1 { cma::CMA_MIN_ONE_PEER } else { cma::CMA_MIN_COPY },
        }
    }

    /// What the peer has done that a rank of this process may wait for: messages taken and
    /// lent messages read.
    fn progress(&self) -> u64 {
        let pokes = self.pair.map.u64_at(Ctrl::of(1 - self.pair.out_dir).slot_pokes).load(Ordering::SeqCst);
        self.delivered().wrapping_add(self.lent_done()).wrapping_add(pokes)
    }

    /// This rank published or finished an exchanged op (`Mesh::wake_peers`, which took a
    /// `SeqCst` fence after the slot's stores): the peer's reader thread, when it sleeps and
    /// its rank does not poll, wakes and rings the rank (its `progress` moved).
    ///
    /// Nothing at all — not even the count, a locked write on a line the peer's reader reads —
    /// while the peer's rank polls (`consumer_polls`, [`set_polling`](Self::set_polling)): a
    /// Dekker pair with [`before_park`]. This side: the slot's stores, the fence, the load of
    /// the flag. A sleeper: the flag cleared, a fence, then one more look at what it waits for
    /// before it sleeps. The two fences are ordered one way or the other: if the sleeper's
    /// comes first, the load here sees the flag cleared (or a later store of it: the sleeper
    /// is awake again, and that wait looks before it sleeps too) and this side pokes; if this
    /// side's comes first, the sleeper's last look sees the slot. A flag seen set was stored
    /// before the clear that precedes the sleeper's next fence, so that fence comes after
    /// this side's (C++ `[atomics.fences]`), and the sleeper's look sees the slot.
    ///
    /// The count is stored before the look at whether the reader sleeps, which counts itself
    /// asleep before it looks at the count: one of the two sees the other.
    #[inline]
    pub(super) fn poke(&self) {
        if self.pair.map.u32_at(Ctrl::of(self.pair.out_dir).consumer_polls).load(Ordering::SeqCst) == 0 {
            self.poke_reader();
        }
    }

    /// [`poke`](Self::poke) for a peer whose rank does not poll: counted, and its reader
    /// thread woken if it sleeps.
    #[inline(never)]
    fn poke_reader(&self) {
        let ctrl = Ctrl::of(self.pair.out_dir);
        self.pair.map.u64_at(ctrl.slot_pokes).fetch_add(1, Ordering::SeqCst);
        ring::nudge(&self.pair.map, ctrl);
    }

    /// Messages the peer has taken.
    pub(super) fn delivered(&self) -> u64 {
        self.pair.map.u64_at(Ctrl::of(self.pair.out_dir).delivered).load(Ordering::SeqCst)
    }

    /// Whether the reader has stopped after reading everything (see the module docs).
    pub(super) fn is_drained(&self) -> bool {
        self.drained.load(Ordering::SeqCst)
    }

    /// Says whether this rank polls the incoming ring and the peer's slot itself (awake in a
    /// wait: the producer then wakes no reader thread for a whole message, nor for an
    /// exchanged op: [`poke`](Self::poke)) or not (about to sleep). After clearing it the
    /// caller looks at what it waits for once more before sleeping: a record or a part
    /// published just before woke nobody.
    ///
    /// Only the clear needs a fence after it (it orders the store before that last look; the
    /// producer stores `head` or the slot, then reads this flag: one of the two sees the
    /// other). Setting it needs none, and the common call — already set, this rank waited
    /// before and has not slept since — writes nothing and costs one load: a rank that polls
    /// looks again anyway, and every sleep clears the flag first (see `poke`).
    pub(super) fn set_polling(&self, on: bool) {
        let w = self.pair.map.u32_at(Ctrl::of(1 - self.pair.out_dir).consumer_polls);
        if (w.load(Ordering::Relaxed) != 0) == on {
            return;
        }
        w.store(u32::from(on), Ordering::SeqCst);
        if on {
            POLLING.fetch_add(1, Ordering::SeqCst);
        } else {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// Whether `mem` is the incoming ring (a message read in place), not a buffer of its own.
    pub(super) fn in_ring(&self, mem: &HostMem) -> bool {
        self.ring_in.same(mem)
    }

    /// The receiver checked inbox message `id` and takes it: counts it delivered now, before
    /// its bytes are read, so that the sender's op may end while this rank copies them out
    /// (the sender's next message goes into the ring meanwhile). Its record stays held until
    /// [`release`](Self::release). Once per message: a message put back unread after this
    /// (the op failed) stays counted.
    pub(super) fn accept(&self, id: u64) {
        let mut inc = lock(&self.incoming);
        if inc.accepted.contains(&id) {
            return;
        }
        inc.accepted.push(id);
        inc.cons.deliver();
        drop(inc);
        // A sender that sleeps waiting for this (`is_delivered`) is woken by its reader thread.
        ring::nudge(&self.pair.map, Ctrl::of(self.pair.out_dir));
    }

    /// The receiver is done with inbox message `id`: frees its record, if it is in the ring,
    /// and counts it delivered unless [accepted](Self::accept) already.
    pub(super) fn release(&self, id: u64) {
        let mut inc = lock(&self.incoming);
        if let Some(i) = inc.held.iter().position(|h| h.0 == id) {
            let (_, end) = inc.held.swap_remove(i);
            inc.cons.free(end);
        }
        if let Some(i) = inc.accepted.iter().position(|&a| a == id) {
            inc.accepted.swap_remove(i);
            return;
        }
        inc.cons.deliver();
        drop(inc);
        // A sender that sleeps waiting for this (`is_delivered`) is woken by its reader thread.
        ring::nudge(&self.pair.map, Ctrl::of(self.pair.out_dir));
    }

    /// Hands what the peer published to the inbox from the receiving rank's own thread (when
    /// the reader thread is not at it already); whether anything arrived.
    pub(super) fn poll_inline(&self, e: &Endpoint, p: &Peer) -> bool {
        let Ok(mut inc) = self.incoming.try_lock() else { return false };
        if !inc.cons.ready() {
            return false;
        }
        match read::poll_locked(e, p, self, &mut inc) {
            Ok(n) => n > 0,
            Err(what) => {
                e.protocol(p.rank, format!("in shared memory: {what}"));
                false
            }
        }
    }

    fn kick(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }

    /// Queues (or, when nothing waits before it and it fits, writes at once) a message.
    pub(super) fn send(&self, e: &Endpoint, p: &Peer, header: Header, payload: Payload) -> u64 {
        let mut out = lock(&p.out);
        let ticket = p.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let idle = out.shm_data.is_empty() && out.writing.is_none() && !out.closing;
        if idle
            && let Payload::Host(r) = &payload
            && let Some(lease) = self.lendable(&header, r)
            && self
                .push_lent(&mut lock(&self.prod), &write::data_frame(e, &header, r.len), r.len, ticket, lease)
                .is_none()
        {
            // Released when the peer has read it (`lent_pending`).
            return ticket;
        }
        if idle
            && let Payload::Host(r) = &payload
            && r.len <= INLINE_MAX
            && let Ok(bytes) = r.read()
            && lock(&self.prod).push(Kind::Data, &write::data_frame(e, &header, r.len), 0, &bytes)
        {
            p.released.fetch_max(ticket, Ordering::SeqCst);
            return ticket;
        }
        out.shm_data.push_back(OutMsg { ticket, header, payload, done: 0 });
        drop(out);
        self.kick();
        ticket
    }
}

/// Every shared-memory link of this process (for [`before_park`]).
static LINKS: Mutex<Vec<std::sync::Weak<ShmPeer>>> = Mutex::new(Vec::new());
/// Whether `LINKS` ever held a link (so that a park in a process without one costs one load).
static ANY_LINKS: AtomicBool = AtomicBool::new(false);
/// Polling flags set since the last [`before_park`] (taken under `LINKS`' lock).
static POLLING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Passes of [`before_park`] that cleared flags, each counted after its clears.
static PARKS: AtomicU64 = AtomicU64::new(0);

/// How many times a thread of this process cleared the polling flags before it slept
/// (`Endpoint::polls` sets its flags again only when this moved).
pub(super) fn parks() -> u64 {
    // Acquire: a count read here comes after the clears it counts (they were stored before
    // its release), so flags set after this read are not undone by them.
    PARKS.load(Ordering::Acquire)
}

/// A thread of this process is about to sleep: every peer's next message wakes a reader
/// thread again (which rings the sleeper). Flags stay set while ranks are awake, whether they
/// wait or run, so a message that arrives between two waits costs no wake-up; only a thread
/// that sleeps needs one, and the caller looks at what it waits for once more after this
/// (after a `SeqCst` fence of its own).
///
/// The count is taken and the flags cleared under one lock: a thread that finds the count
/// taken by another thread's call returns only once that call has cleared every flag (its
/// own included) and fenced, so its last look comes after that fence. Without the lock it
/// could sleep with its flag still set — woken by nobody for a whole park slice.
pub(crate) fn before_park() {
    if !ANY_LINKS.load(Ordering::SeqCst) {
        return;
    }
    let mut links = lock(&LINKS);
    if POLLING.swap(0, Ordering::SeqCst) == 0 {
        return;
    }
    links.retain(|l| match l.upgrade() {
        Some(s) => {
            s.set_polling(false);
            true
        }
        None => false,
    });
    PARKS.fetch_add(1, Ordering::Release);
}

/// Starts `me`'s writer and reader threads for peer `p` (whose `shm` is set).
///
/// # Errors
/// `Io` when a thread cannot be started.
pub(super) fn spawn(e: &Arc<Endpoint>, p: &Arc<Peer>) -> Result<()> {
    let Some(s) = p.shm.clone() else { return Ok(()) };
    lock(&LINKS).push(Arc::downgrade(&s));
    ANY_LINKS.store(true, Ordering::SeqCst);
    let err = |x: std::io::Error| CollectiveError::new(ErrorKind::Io, format!("starting a shared-memory thread: {x}"));
    let (e2, p2, s2) = (e.clone(), p.clone(), s.clone());
    let w = std::thread::Builder::new()
        .name("ruccl-shm-w".into())
        .spawn(move || write::writer(&e2, &p2, &s2))
        .map_err(err)?;
    let _ = s.writer.set(w.thread().clone());
    s.kick();
    let (e2, p2) = (e.clone(), p.clone());
    std::thread::Builder::new().name("ruccl-shm-r".into()).spawn(move || read::reader(&e2, &p2, &s)).map_err(err)?;
    Ok(())
}

/// Waits until the writer has put everything queued for `p` into the ring (a departing rank
/// sends its goodbye after its last data), the peer is gone, or `deadline` passes.
pub(super) fn flush(p: &Peer, deadline: Instant) {
    if p.shm.is_none() {
        return;
    }
    while Instant::now() < deadline && !p.gone.load(Ordering::SeqCst) {
        let out = lock(&p.out);
        if out.shm_data.is_empty() && out.writing.is_none() {
            return;
        }
        drop(out);
        std::thread::sleep(Duration::from_micros(100));
    }
}
