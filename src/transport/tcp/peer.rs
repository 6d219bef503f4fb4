//! One rank's side of its connection to one peer: the inbox of received messages, the
//! outbox of messages and control frames waiting for the wire, the credits, and the pool of
//! receive buffers. Where the pair shares a segment (`shm_io`) data goes through it instead,
//! and the methods here that answer for either ([`Peer::taken`], [`Peer::is_pending`]) say so.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;

use super::rx::{Pumped, Rx};
use super::{DIRECT_MAX, Endpoint, WINDOW, io, lock, shm_io};
use crate::error::Result;
use crate::mem::{HostMem, HostRegion};
use crate::transport::{Header, Payload};
use crate::types::Rank;

/// The most receive buffers a peer keeps for reuse.
const POOL_BUFFERS: usize = 256;

/// The peers whose socket a rank took over (`Peer::inline`) since the last [`arm_readers`].
static INLINE: Mutex<Vec<Weak<Peer>>> = Mutex::new(Vec::new());
/// Whether `INLINE` may hold any (a park with none costs one load).
static INLINE_SET: AtomicBool = AtomicBool::new(false);

/// A thread of this process is about to sleep: every socket a rank took over goes back to its
/// reader task, so that what arrives on it wakes someone (the task reads at once what is
/// already there).
pub(crate) fn arm_readers() {
    if !INLINE_SET.swap(false, Ordering::SeqCst) {
        return;
    }
    let peers = std::mem::take(&mut *lock(&INLINE));
    for p in peers.iter().filter_map(Weak::upgrade) {
        p.arm();
    }
}

/// A received message, in a buffer the receiver owns — or, until it is opened, still in the
/// sender's process (`remote`; `region` is then an empty placeholder of the message's length).
#[derive(Debug)]
pub(super) struct InMsg {
    pub(super) id: u64,
    pub(super) header: Header,
    pub(super) region: HostRegion,
    pub(super) opened: bool,
    pub(super) remote: Option<Remote>,
}

/// Where a message lent by a peer process lies, until the receiver reads it (`shm_io`; never
/// made where there is no shared memory).
#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
#[derive(Clone, Copy, Debug)]
pub(super) struct Remote {
    /// Its address in the sender's process.
    pub(super) addr: u64,
    /// Its number among the messages this sender lent (from 1).
    pub(super) n: u64,
}

#[derive(Debug, Default)]
pub(super) struct Inbox {
    pub(super) msgs: VecDeque<InMsg>,
    pub(super) next_id: u64,
    /// Bytes held in received, unreleased messages.
    pub(super) buffered: u64,
}

/// A message waiting for the wire.
#[derive(Debug)]
pub(super) struct OutMsg {
    pub(super) ticket: u64,
    pub(super) header: Header,
    pub(super) payload: Payload,
    /// Bytes of its frame (header, then payload) the sending thread wrote itself
    /// ([`Peer::direct_large`]): the socket is mid-frame, so the rest goes next, before
    /// anything else, and its credits are counted already.
    pub(super) done: usize,
}

#[derive(Debug, Default)]
pub(super) struct Outbox {
    pub(super) data: VecDeque<OutMsg>,
    /// Data for a peer reached through shared memory (its shared-memory writer's queue).
    pub(super) shm_data: VecDeque<OutMsg>,
    /// Encoded control frames (header and body), sent before any further data.
    pub(super) control: VecDeque<Vec<u8>>,
    /// Bytes written and not yet credited back by the peer.
    pub(super) in_flight: u64,
    /// The ticket being written now.
    pub(super) writing: Option<u64>,
    /// No more frames after the queued control frames (this rank departed).
    pub(super) closing: bool,
    /// The writer task holds frames it took and has not finished writing (or the sending
    /// rank left it the rest of one, `OutMsg::done`).
    pub(super) busy: bool,
    /// The sending rank is writing a frame from its own thread outside this lock
    /// ([`Peer::direct_large`]): nothing else goes on the socket until it is done.
    pub(super) rank_writing: bool,
    /// The rank may write on the socket itself ([`Peer::wsock`]): false once the writer task
    /// has ended.
    pub(super) open: bool,
}

impl Outbox {
    /// Whether the rank may write on the socket itself now: nobody is writing, nothing must
    /// follow what was written (closing), and the writer task still runs. (Queued frames go
    /// first too: the callers check the queues their frame must come after.)
    fn idle(&self) -> bool {
        !self.busy && !self.rank_writing && !self.closing && self.open
    }
}

/// One rank's side of its connection to one peer.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(super) rank: Rank,
    pub(super) inbox: Mutex<Inbox>,
    /// What arrives on the socket, read by the reader task or by the waiting rank.
    pub(super) rx: Mutex<Rx>,
    /// The rank reads this socket itself (it found it empty while it waited): the reader task
    /// stands down and takes the socket out of the runtime's poller, so arriving frames wake no
    /// runtime thread. Cleared ([`arm`](Self::arm)) before any thread of the process sleeps
    /// ([`arm_readers`]), when the writer waits for credits, and at the silence limit.
    pub(super) inline: AtomicBool,
    /// Wakes the reader task when `inline` is cleared.
    pub(super) armed: Notify,
    /// Unopened messages in the inbox (the scheduler's fast check).
    pub(super) unopened: AtomicUsize,
    pub(super) out: Mutex<Outbox>,
    /// A handle on the socket (non-blocking) for the rank's own writes ([`direct`](Self::direct),
    /// [`direct_large`](Self::direct_large)), made while `Outbox::open` says so.
    wsock: std::net::TcpStream,
    /// Tickets issued; every ticket up to `released` is on the wire or taken back.
    pub(super) sent: AtomicU64,
    pub(super) released: AtomicU64,
    /// Messages the peer has taken (counted by its credits).
    pub(super) delivered: AtomicU64,
    /// Wakes the writer task.
    pub(super) wake: Notify,
    /// Receive buffers of released messages, for the reader to fill again (a fresh
    /// allocation per message costs a page fault per 4 KiB and zeroing by the kernel: as
    /// much as the copy out of the socket). At most [`WINDOW`] bytes are kept.
    pub(super) pool: Mutex<Vec<HostMem>>,
    /// The connection ended (goodbye, close, error, or silence).
    pub(super) gone: AtomicBool,
    /// It ended without a goodbye (close, error, or silence).
    pub(super) lost: AtomicBool,
    /// It was lost to silence: nothing came for the peer-silence limit.
    pub(super) silent: AtomicBool,
    /// The writer task ended: everything queued before the goodbye is on the wire.
    pub(super) flushed: AtomicBool,
    /// Data goes through a segment shared with the peer's process (the socket carries the
    /// rest).
    pub(super) shm: Option<Arc<shm_io::ShmPeer>>,
    /// The peer's latest flight-recorder answer (`FlightAnswer`) and the number of the query
    /// it answers ([`Mesh::ask_flight`](super::Mesh::ask_flight) takes only its own).
    pub(super) answer: Mutex<Option<(u64, Vec<u8>)>>,
}

impl Peer {
    /// `write` and `read` are handles on the connection's socket (non-blocking) for the rank's
    /// own writes ([`direct`](Self::direct)) and reads ([`poll_inline`](Self::poll_inline)).
    pub(super) fn new(
        rank: Rank,
        shm: Option<Arc<shm_io::ShmPeer>>,
        write: std::net::TcpStream,
        read: std::net::TcpStream,
    ) -> Self {
        Peer {
            shm,
            rank,
            inbox: Mutex::new(Inbox::default()),
            rx: Mutex::new(Rx::new(read)),
            inline: AtomicBool::new(false),
            armed: Notify::new(),
            unopened: AtomicUsize::new(0),
            out: Mutex::new(Outbox { open: true, ..Outbox::default() }),
            wsock: write,
            sent: AtomicU64::new(0),
            released: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            wake: Notify::new(),
            pool: Mutex::new(Vec::new()),
            gone: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            silent: AtomicBool::new(false),
            flushed: AtomicBool::new(false),
            answer: Mutex::new(None),
        }
    }

    /// Whether the connection ended and its writer let go of every payload (a rank whose
    /// memory the writer still reads is not told its peer is gone before that).
    pub(super) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
            && lock(&self.out).writing.is_none()
            && self.shm.as_ref().is_none_or(|s| s.is_drained())
    }

    /// The waiting rank reads what the peer sent from this thread, unless another thread is at
    /// it (see [`rx`](super::rx)). Only over the socket: data through shared memory has
    /// `ShmPeer::poll_inline`. A rank that empties the socket takes it over from the reader
    /// task (`inline`).
    pub(super) fn poll_inline(self: &Arc<Self>, e: &Endpoint) {
        if self.shm.is_some() {
            return;
        }
        if self.pump_unless_read(e) == Some(Pumped::Drained) && !self.inline.load(Ordering::Relaxed) {
            self.inline.store(true, Ordering::SeqCst);
            lock(&INLINE).push(Arc::downgrade(self));
            INLINE_SET.store(true, Ordering::SeqCst);
        }
    }

    /// Reads the socket as [`Rx::pump`] does, unless another thread holds the parser (`None`):
    /// the waiting rank reads until the socket is empty, possibly a whole window of large
    /// payloads, and a reader task blocking on the lock instead would hold a runtime thread,
    /// and the writer tasks queued behind it, that long; a rank would wait on a task that
    /// reads for it anyway.
    pub(super) fn pump_unless_read(&self, e: &Endpoint) -> Option<Pumped> {
        let mut rx = match self.rx.try_lock() {
            Ok(rx) => rx,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        Some(rx.pump(e, self))
    }

    /// The reader task reads this socket again (the rank stops reading it itself).
    pub(super) fn arm(&self) {
        if self.inline.swap(false, Ordering::SeqCst) {
            self.armed.notify_one();
        }
    }

    /// A received message joins the inbox; returns its id.
    pub(super) fn arrive(&self, header: Header, region: HostRegion) -> u64 {
        self.arrive_from(header, region, None)
    }

    /// A message joins the inbox, possibly still in the sender's memory (`remote`).
    pub(super) fn arrive_from(&self, header: Header, region: HostRegion, remote: Option<Remote>) -> u64 {
        let id = {
            let mut inbox = lock(&self.inbox);
            let id = inbox.next_id;
            inbox.next_id += 1;
            inbox.buffered += region.len as u64;
            inbox.msgs.push_back(InMsg { id, header, region, opened: false, remote });
            id
        };
        self.unopened.fetch_add(1, Ordering::SeqCst);
        id
    }

    /// A buffer of at least `len` bytes for a message from this peer: a pooled one nobody
    /// holds any more (the receiver's scheduler drops its handle after releasing), else a new
    /// one. Its bytes are stale until the reader overwrites the first `len`.
    pub(super) fn recv_buffer(&self, len: usize) -> Result<HostMem> {
        {
            let mut pool = lock(&self.pool);
            // Not much larger than needed: a big buffer is kept for big messages.
            let fits = |m: &HostMem| m.len() >= len && m.len() <= len.max(64 << 10).saturating_mul(4) && m.is_unique();
            if let Some(i) = pool.iter().position(fits) {
                return Ok(pool.swap_remove(i));
            }
        }
        HostMem::zeroed(len)
    }

    /// Keeps the buffer of a released message for [`recv_buffer`](Self::recv_buffer).
    pub(super) fn recycle(&self, mem: HostMem) {
        if mem.is_empty() {
            return;
        }
        let mut pool = lock(&self.pool);
        pool.push(mem);
        // At most `POOL_BUFFERS` buffers (tiny chunks made hundreds of thousands of them, and
        // every message scanned them all) holding at most `WINDOW` bytes; the oldest go first.
        let excess = pool.len().saturating_sub(POOL_BUFFERS);
        pool.drain(..excess);
        let mut total: u64 = pool.iter().map(|m| m.len() as u64).sum();
        while total > WINDOW && !pool.is_empty() {
            total -= pool.remove(0).len() as u64;
        }
    }

    pub(super) fn push_control(&self, frame: Vec<u8>) {
        let mut out = lock(&self.out);
        if self.direct(&mut out, &frame) {
            // Part of it may wait for the writer task.
            let queued = !out.control.is_empty();
            drop(out);
            if queued {
                self.wake.notify_one();
            }
            return;
        }
        out.control.push_back(frame);
        drop(out);
        self.wake.notify_one();
    }

    /// Writes `frame` on the socket from this thread if the connection is idle: no frame
    /// queued ahead of it (the caller checks the queues it must come after) and none being
    /// written by the writer task. Whatever the socket does not take at once is queued first
    /// in line for the writer task (and the writer woken). False (nothing written) when the
    /// connection is busy, closing or full.
    pub(super) fn direct(&self, out: &mut Outbox, frame: &[u8]) -> bool {
        if !out.idle() || !out.control.is_empty() {
            return false;
        }
        // `write` is one `send` (with MSG_NOSIGNAL) on a non-blocking socket.
        match (&self.wsock).write(frame) {
            Ok(n) if n == frame.len() => true,
            Ok(n) if n > 0 => {
                out.control.push_front(frame[n..].to_vec());
                true
            }
            _ => false,
        }
    }

    /// Messages the peer has taken (counted by its credits, or in the shared segment).
    pub(super) fn taken(&self) -> u64 {
        self.shm.as_ref().map_or_else(|| self.delivered.load(Ordering::SeqCst), |s| s.delivered())
    }

    /// Whether message `ticket` is being written or waits to be (on the socket or into the
    /// shared segment).
    pub(super) fn is_pending(out: &Outbox, ticket: u64) -> bool {
        out.writing == Some(ticket)
            || out.data.iter().any(|m| m.ticket == ticket)
            || out.shm_data.iter().any(|m| m.ticket == ticket)
    }

    /// Writes a large message from the sending thread as far as the socket takes it now, if
    /// the connection is idle (nothing queued, nothing being written; the caller checked the
    /// credit window). The write runs outside the outbox's lock, with `rank_writing` set so
    /// that nothing else goes on the socket meanwhile: a socket buffer's worth (MiBs) takes
    /// hundreds of µs, and the reader task must still take the peer's credits (they need the
    /// lock) and read on. Returns the lock again, and `m` when it is still the caller's to
    /// queue (nothing was tried). Else `m` went: whole (released), or in part and the rest is
    /// queued first in line with `done` set, its credits counted, and the connection marked
    /// busy, so that nothing else (a credit, a small message written directly) goes on the
    /// socket before its rest; or not at all, queued first in line (ahead of anything queued
    /// while the lock was free).
    fn direct_large<'a>(
        &'a self,
        e: &Endpoint,
        mut out: MutexGuard<'a, Outbox>,
        mut m: OutMsg,
    ) -> (MutexGuard<'a, Outbox>, Option<OutMsg>) {
        let Payload::Host(region) = &m.payload else { return (out, Some(m)) };
        if !out.idle() || !out.control.is_empty() || !out.data.is_empty() {
            return (out, Some(m));
        }
        let len = m.payload.len();
        out.rank_writing = true;
        out.writing = Some(m.ticket);
        out.in_flight += len as u64;
        drop(out);
        let header = io::data_header(e, &m);
        // One `writev` on a non-blocking socket; an error is the writer task's to meet.
        let n = region.read().map_or(0, |bytes| {
            let parts = [std::io::IoSlice::new(&header), std::io::IoSlice::new(&bytes)];
            (&self.wsock).write_vectored(&parts).unwrap_or(0)
        });
        let mut out = lock(&self.out);
        out.rank_writing = false;
        out.writing = None;
        if n == header.len() + len || !out.open {
            // All of it went; or the writer task ended meanwhile (the connection is lost), and
            // nothing queued will be written any more (see `io::writer`).
            self.released.fetch_max(m.ticket, Ordering::SeqCst);
            return (out, None);
        }
        if n == 0 {
            out.in_flight -= len as u64;
        } else {
            m.done = n;
            out.busy = true;
        }
        out.data.push_front(m);
        (out, None)
    }

    /// Sends over the socket: a message with nothing ahead of it and within the credit window
    /// goes to the socket from this thread ([`write_now`](Self::write_now)); whatever is left
    /// is queued for the writer task. Returns its ticket.
    pub(super) fn send_tcp(&self, e: &Endpoint, header: Header, payload: Payload) -> u64 {
        let mut out = lock(&self.out);
        let ticket = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let m = OutMsg { ticket, header, payload, done: 0 };
        let len = m.payload.len() as u64;
        let fits = out.in_flight == 0 || out.in_flight + len <= WINDOW;
        let left = match fits {
            false => Some(m),
            true if m.payload.len() > DIRECT_MAX => {
                let (o, left) = self.direct_large(e, out, m);
                out = o;
                left
            }
            true => self.write_small(e, &mut out, m),
        };
        if let Some(m) = left {
            out.data.push_back(m);
        }
        // The writer task: for what is left, or for control frames queued meanwhile.
        let wake = !out.data.is_empty() || !out.control.is_empty();
        drop(out);
        if wake {
            self.wake.notify_one();
        }
        ticket
    }

    /// Writes small message `m` whole from this thread if the connection is idle
    /// ([`direct`](Self::direct)); as [`direct_large`](Self::direct_large) does for a large
    /// one, it saves the writer task's wake-up (2 processes, 256 KiB all_reduce 203-295 ->
    /// 119-128 us). `None`: it went (released); else what the writer task must send.
    fn write_small(&self, e: &Endpoint, out: &mut Outbox, m: OutMsg) -> Option<OutMsg> {
        if !out.data.is_empty() {
            return Some(m);
        }
        let frame = {
            let Payload::Host(region) = &m.payload else { return Some(m) };
            let Ok(bytes) = region.read() else { return Some(m) };
            let mut frame = io::data_header(e, &m).to_vec();
            frame.extend_from_slice(&bytes);
            frame
        };
        if !self.direct(out, &frame) {
            return Some(m);
        }
        out.in_flight += m.payload.len() as u64;
        self.released.fetch_max(m.ticket, Ordering::SeqCst);
        None
    }
}
