//! TCP transport: one connection per pair of ranks, frames from [`wire`](super::wire).
//!
//! Ranks cannot read each other's memory, so what the in-process transport shares becomes
//! messages:
//! - a send queues the lent payload (the queue is unbounded: `send` never blocks) and a
//!   writer task puts it on the wire; the lend is *released once its bytes are written*;
//! - a reader task receives each message into a buffer it allocates (owned by the receiver,
//!   handed to the scheduler as host memory), after checking the frame against what it may
//!   accept; the receiver's `release` frees the buffer and returns *credits* to the sender,
//!   which keeps at most [`WINDOW`] bytes un-credited per peer (one larger message goes
//!   alone), so buffers are bounded without ever blocking a send (see the simulator's
//!   `every_plan_is_deadlock_free_under_credits`);
//! - poison is an `Abort` frame (passed on by every rank that hears it), departure a `Goodbye` frame (or the connection closing),
//!   and a peer that falls silent for [`SILENCE`] (heartbeats every [`HEARTBEAT`]) is lost;
//! - bytes that break the protocol poison the receiving rank with a `Protocol` error naming
//!   the peer;
//! - a small frame (a message of at most [`DIRECT_MAX`] bytes, a credit) is written straight
//!   from the thread that sends it when nothing is queued or being written on that
//!   connection (a non-blocking write under the outbox lock), saving the writer task's
//!   wake-up — two per small collective; whatever does not fit in the socket goes to the
//!   writer task as before.
//!
//! Between processes of one host (Linux) the data frames of a pair go through a segment both
//! processes map instead (`shm_io`, [`crate::transport::shm`]): same frames, same inbox and
//! lends, the ring's freed space as credits; the socket keeps carrying the control frames.
//!
//! A [`Mesh`] holds the endpoints of the ranks that live in this process (every rank of a
//! loopback mesh, see [`setup`]). Read and write halves of a connection are separate tasks,
//! so sending and receiving never wait for each other. The tasks run on one small tokio
//! runtime shared by the process; ranks talk to them through mutexes, atomics, `Notify` and
//! the ranks' doorbells — never across an `.await` with a lock held.

pub(crate) mod inbox;
mod io;
pub(crate) mod setup;
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) mod shm_io;
/// Without shared memory (other systems, Miri) no pair has a segment: a type with no values.
#[cfg(not(all(target_os = "linux", not(miri))))]
pub(crate) mod shm_io {
    #[derive(Debug)]
    pub(crate) enum ShmPeer {}
    impl ShmPeer {
        pub(super) fn new(p: std::convert::Infallible) -> Self {
            match p {}
        }
        pub(super) fn delivered(&self) -> u64 {
            match *self {}
        }
        pub(super) fn is_drained(&self) -> bool {
            match *self {}
        }
        pub(super) fn poll_inline(&self, _: &super::Endpoint, _: &super::Peer) -> bool {
            match *self {}
        }
        pub(super) fn release(&self, _: u64) {
            match *self {}
        }
        pub(super) fn set_polling(&self, _: bool) {
            match *self {}
        }
        pub(super) fn send(&self, _: &super::Endpoint, _: &super::Peer, _: super::Header, _: super::Payload) -> u64 {
            match *self {}
        }
    }
    pub(super) fn flush(_: &super::Peer, _: std::time::Instant) {}
}

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::wait::{Event, WaitOutcome};
use super::wire::{self, FrameHeader, FrameKind};
use super::{Header, Opened, Payload};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::mem::{HostMem, HostRegion};
use crate::types::Rank;

/// Bytes a sender may have on the wire to one peer before the peer credits them back.
pub(crate) const WINDOW: u64 = 16 << 20;
/// The largest single message a receiver accepts (it goes alone, when nothing else is
/// buffered). Larger plans' messages are a protocol error.
pub(crate) const MAX_MESSAGE: u64 = 16 << 30;
/// How often an idle connection says it is alive.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(2);
/// Messages up to this many bytes may be written by the sending thread itself.
pub(crate) const DIRECT_MAX: usize = 64 << 10;
/// How long a connection may stay silent before its peer counts as lost.
pub(crate) const SILENCE: Duration = Duration::from_secs(60);
/// How long dropping a mesh waits for its writers to put the last frames (credits, the
/// goodbye) on the wire: a process that exits right after dropping its communicator must not
/// leave its peers waiting for credits that were never sent.
const LINGER: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A received message, in a buffer the receiver owns.
#[derive(Debug)]
struct InMsg {
    id: u64,
    header: Header,
    region: HostRegion,
    opened: bool,
}

#[derive(Debug, Default)]
struct Inbox {
    msgs: VecDeque<InMsg>,
    next_id: u64,
    /// Bytes held in received, unreleased messages.
    buffered: u64,
}

/// A message waiting for the wire.
#[derive(Debug)]
struct OutMsg {
    ticket: u64,
    header: Header,
    payload: Payload,
}

#[derive(Debug, Default)]
struct Outbox {
    data: VecDeque<OutMsg>,
    /// Data for a peer reached through shared memory (its shared-memory writer's queue).
    shm_data: VecDeque<OutMsg>,
    /// Encoded control frames (header and body), sent before any further data.
    control: VecDeque<Vec<u8>>,
    /// Bytes written and not yet credited back by the peer.
    in_flight: u64,
    /// The ticket being written now.
    writing: Option<u64>,
    /// No more frames after the queued control frames (this rank departed).
    closing: bool,
    /// The writer task holds frames it took and has not finished writing.
    busy: bool,
    /// A second handle on the socket for [`Peer::direct`] writes (non-blocking); dropped
    /// when the writer task ends.
    sock: Option<std::net::TcpStream>,
}

/// One rank's side of its connection to one peer.
#[derive(Debug)]
pub(crate) struct Peer {
    rank: Rank,
    inbox: Mutex<Inbox>,
    /// Unopened messages in the inbox (the scheduler's fast check).
    unopened: AtomicUsize,
    out: Mutex<Outbox>,
    /// Tickets issued; every ticket up to `released` is on the wire or taken back.
    sent: AtomicU64,
    released: AtomicU64,
    /// Messages the peer has taken (counted by its credits).
    delivered: AtomicU64,
    /// Wakes the writer task.
    wake: Notify,
    /// Receive buffers of released messages, for the reader to fill again (a fresh
    /// allocation per message costs a page fault per 4 KiB and zeroing by the kernel: as
    /// much as the copy out of the socket). At most [`WINDOW`] bytes are kept.
    pool: Mutex<Vec<HostMem>>,
    /// The connection ended (goodbye, close, error, or silence).
    gone: AtomicBool,
    /// It ended without a goodbye (close, error, or silence).
    lost: AtomicBool,
    /// The writer task ended: everything queued before the goodbye is on the wire.
    flushed: AtomicBool,
    /// Data goes through a segment shared with the peer's process (the socket carries the
    /// rest).
    shm: Option<Arc<shm_io::ShmPeer>>,
}

impl Peer {
    fn new(rank: Rank, shm: Option<Arc<shm_io::ShmPeer>>, sock: std::net::TcpStream) -> Self {
        Peer {
            shm,
            rank,
            inbox: Mutex::new(Inbox::default()),
            unopened: AtomicUsize::new(0),
            out: Mutex::new(Outbox { sock: Some(sock), ..Outbox::default() }),
            sent: AtomicU64::new(0),
            released: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            wake: Notify::new(),
            pool: Mutex::new(Vec::new()),
            gone: AtomicBool::new(false),
            lost: AtomicBool::new(false),
            flushed: AtomicBool::new(false),
        }
    }

    /// Whether the connection ended and its writer let go of every payload (a rank whose
    /// memory the writer still reads is not told its peer is gone before that).
    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
            && lock(&self.out).writing.is_none()
            && self.shm.as_ref().is_none_or(|s| s.is_drained())
    }

    /// A received message joins the inbox; returns its id.
    #[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
    fn arrive(&self, header: Header, region: HostRegion) -> u64 {
        let id = {
            let mut inbox = lock(&self.inbox);
            let id = inbox.next_id;
            inbox.next_id += 1;
            inbox.buffered += region.len as u64;
            inbox.msgs.push_back(InMsg { id, header, region, opened: false });
            id
        };
        self.unopened.fetch_add(1, Ordering::SeqCst);
        id
    }

    /// A buffer of at least `len` bytes for a message from this peer: a pooled one nobody
    /// holds any more (the receiver's scheduler drops its handle after releasing), else a new
    /// one. Its bytes are stale until the reader overwrites the first `len`.
    fn recv_buffer(&self, len: usize) -> Result<HostMem> {
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
    fn recycle(&self, mem: HostMem) {
        if mem.is_empty() {
            return;
        }
        let mut pool = lock(&self.pool);
        pool.push(mem);
        let mut total: u64 = pool.iter().map(|m| m.len() as u64).sum();
        while total > WINDOW && !pool.is_empty() {
            total -= pool.remove(0).len() as u64;
        }
    }

    fn push_control(&self, frame: Vec<u8>) {
        let mut out = lock(&self.out);
        if Self::direct(&mut out, &frame) {
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
    fn direct(out: &mut Outbox, frame: &[u8]) -> bool {
        if out.busy || out.closing || !out.control.is_empty() {
            return false;
        }
        let Some(sock) = &mut out.sock else { return false };
        // `write` is one `send` (with MSG_NOSIGNAL) on a non-blocking socket.
        match sock.write(frame) {
            Ok(n) if n == frame.len() => true,
            Ok(n) if n > 0 => {
                out.control.push_front(frame[n..].to_vec());
                true
            }
            _ => false,
        }
    }
}

/// One rank of this process: its connections, doorbell and view of failures.
#[derive(Debug)]
pub(crate) struct Endpoint {
    rank: Rank,
    comm: [u8; 16],
    peers: Vec<Option<Arc<Peer>>>,
    event: Event,
    failed: AtomicBool,
    poison: Mutex<Option<CollectiveError>>,
    /// Whether the peers were sent this rank's poison.
    told: AtomicBool,
}

impl Endpoint {
    /// Sends this rank's poison to every peer, once. Every rank that learns of a failure
    /// passes it on before anything else it sends (a goodbye included), as the in-process
    /// transport's shared flag is seen before a departure: on every connection the news of
    /// a failure comes before the news that its rank left.
    fn tell(&self) {
        let Some(err) = lock(&self.poison).clone() else { return };
        if self.told.swap(true, Ordering::SeqCst) {
            return;
        }
        let frame = self.control(FrameKind::Abort, &wire::encode_error(&err));
        for p in self.peers.iter().flatten() {
            p.push_control(frame.clone());
        }
    }

    fn ring(&self) {
        self.event.ring();
        super::wait::bell().ring();
    }

    fn peer(&self, p: Rank) -> Option<&Arc<Peer>> {
        self.peers.get(p).and_then(Option::as_ref)
    }

    /// Records `err` as this rank's failure (the first one wins) and wakes it.
    fn set_poison(&self, err: CollectiveError) {
        {
            let mut p = lock(&self.poison);
            if p.is_none() {
                *p = Some(err);
            }
        }
        self.failed.store(true, Ordering::SeqCst);
        self.ring();
    }

    fn control(&self, kind: FrameKind, body: &[u8]) -> Vec<u8> {
        let h = FrameHeader::control(kind, self.comm, self.rank as u32, body.len() as u64);
        let mut f = wire::encode_header(&h).to_vec();
        f.extend_from_slice(body);
        f
    }

    /// A peer broke the protocol: this rank fails with a `Protocol` error naming it.
    fn protocol(&self, peer: Rank, what: impl std::fmt::Display) {
        let e = CollectiveError::protocol(format!("rank {peer} sent a bad frame: {what}"))
            .with_peer(peer)
            .with_rank(self.rank);
        self.set_poison(e);
    }

    /// Departure is read before the poison, as in-process (a failing peer poisons first).
    fn stop(&self, peer: Option<Rank>) -> Option<WaitOutcome> {
        let gone = peer.and_then(|p| self.peer(p)).is_some_and(|p| p.is_gone());
        if self.failed.load(Ordering::SeqCst) {
            Some(WaitOutcome::Poisoned)
        } else if gone {
            Some(WaitOutcome::PeerGone)
        } else {
            None
        }
    }
}

/// The TCP endpoints of one communicator's ranks that live in this process.
#[derive(Debug)]
pub struct Mesh {
    endpoints: Vec<Option<Arc<Endpoint>>>,
}

impl Drop for Mesh {
    fn drop(&mut self) {
        // The last rank is gone: close every connection still open (their tasks end).
        for r in 0..self.endpoints.len() {
            self.depart(r);
        }
        let until = Instant::now() + LINGER;
        let peers = || self.endpoints.iter().flatten().flat_map(|e| e.peers.iter().flatten());
        while Instant::now() < until && !peers().all(|p| p.flushed.load(Ordering::SeqCst)) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Mesh {
    fn ep(&self, r: Rank) -> Option<&Arc<Endpoint>> {
        self.endpoints.get(r).and_then(Option::as_ref)
    }

    fn pair(&self, me: Rank, p: Rank) -> Option<(&Arc<Endpoint>, &Arc<Peer>)> {
        let e = self.ep(me)?;
        Some((e, e.peer(p)?))
    }

    pub(super) fn send(&self, from: Rank, to: Rank, header: Header, payload: Payload) -> u64 {
        let Some((e, p)) = self.pair(from, to) else { return 0 };
        if let Some(s) = &p.shm {
            return s.send(e, p, header, payload);
        }
        let mut out = lock(&p.out);
        let ticket = p.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let m = OutMsg { ticket, header, payload };
        // Small, nothing ahead of it, and within the credit window: straight to the socket.
        let len = m.payload.len() as u64;
        if m.payload.len() <= DIRECT_MAX
            && out.data.is_empty()
            && (out.in_flight == 0 || out.in_flight + len <= WINDOW)
            && let Payload::Host(region) = &m.payload
            && let Ok(bytes) = region.read()
        {
            let mut frame = io::data_header(e, &m).to_vec();
            frame.extend_from_slice(&bytes);
            drop(bytes);
            if Peer::direct(&mut out, &frame) {
                out.in_flight += len;
                p.released.fetch_max(ticket, Ordering::SeqCst);
                let queued = !out.control.is_empty();
                drop(out);
                if queued {
                    p.wake.notify_one();
                }
                return ticket;
            }
        }
        out.data.push_back(m);
        drop(out);
        p.wake.notify_one();
        ticket
    }

    pub(super) fn has_message(&self, me: Rank, from: Rank) -> bool {
        let Some((e, p)) = self.pair(me, from) else { return false };
        if p.unopened.load(Ordering::SeqCst) > 0 {
            return true;
        }
        // A receiver that is awake takes shared-memory records itself (no thread hop).
        p.shm.as_ref().is_some_and(|s| s.poll_inline(e, p)) && p.unopened.load(Ordering::SeqCst) > 0
    }

    pub(super) fn open(&self, me: Rank, from: Rank) -> Option<Opened> {
        let (_, p) = self.pair(me, from)?;
        let mut inbox = lock(&p.inbox);
        let m = inbox.msgs.iter_mut().find(|m| !m.opened)?;
        m.opened = true;
        p.unopened.fetch_sub(1, Ordering::SeqCst);
        Some(Opened { from, ticket: m.id, header: m.header, payload: Payload::Host(m.region.clone()) })
    }

    /// Done with (`release`: the buffer is freed and its bytes credited back to the sender)
    /// or back in the queue unread.
    pub(super) fn finish(&self, me: Rank, from: Rank, id: u64, release: bool) {
        let Some((e, p)) = self.pair(me, from) else { return };
        let freed = {
            let mut inbox = lock(&p.inbox);
            let Some(i) = inbox.msgs.iter().position(|m| m.id == id && m.opened) else { return };
            if !release {
                inbox.msgs[i].opened = false;
                p.unopened.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let Some(m) = inbox.msgs.remove(i) else { return };
            let len = m.region.len as u64;
            inbox.buffered -= len.min(inbox.buffered);
            p.recycle(m.region.mem);
            len
        };
        if let Some(s) = &p.shm {
            s.release(id);
            return;
        }
        let mut h = FrameHeader::control(FrameKind::Credit, e.comm, me as u32, 0);
        (h.seq, h.index) = (freed, 1);
        p.push_control(wire::encode_header(&h).to_vec());
    }

    pub(super) fn is_released(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        let Some((_, p)) = self.pair(me, to) else { return true };
        if p.released.load(Ordering::SeqCst) >= ticket {
            return true;
        }
        let out = lock(&p.out);
        // Issued (a staging slot being filled is marked with a ticket not issued yet), and
        // neither being written nor waiting: on the wire, or taken back.
        ticket <= p.sent.load(Ordering::SeqCst)
            && out.writing != Some(ticket)
            && !out.data.iter().any(|m| m.ticket == ticket)
            && !out.shm_data.iter().any(|m| m.ticket == ticket)
    }

    pub(super) fn is_delivered(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        // Taken by the peer *and* done with here: the peer may read the last bytes (and credit
        // them) before the writer task that wrote them has let go of the sender's memory.
        self.pair(me, to).is_none_or(|(_, p)| {
            p.shm.as_ref().map_or_else(|| p.delivered.load(Ordering::SeqCst), |s| s.delivered()) >= ticket
        }) && self.is_released(me, to, ticket)
    }

    /// Takes back what `me` queued for `to` and has not started writing; true while a
    /// message to it is still being written.
    fn revoke(&self, me: Rank, to: Rank) -> bool {
        let Some((_, p)) = self.pair(me, to) else { return false };
        let mut out = lock(&p.out);
        out.data.clear();
        out.shm_data.clear();
        out.writing.is_some()
    }

    pub(super) fn reclaim(&self, me: Rank, to: Rank, deadline: Instant) -> bool {
        let Some(e) = self.ep(me) else { return true };
        let ok = e.event.wait(deadline, &mut || !self.revoke(me, to), &|| None, &mut || Ok(()));
        matches!(ok, Ok(WaitOutcome::Ready))
    }

    pub(super) fn wait(
        &self,
        me: Rank,
        peer: Rank,
        deadline: Instant,
        ready: &mut dyn FnMut() -> bool,
        slow: &mut dyn FnMut() -> Result<()>,
    ) -> Result<WaitOutcome> {
        let Some(e) = self.ep(me) else {
            return Err(CollectiveError::protocol(format!("rank {me} has no endpoint in this process")));
        };
        // This thread takes the peer's shared-memory records itself while it spins and yields
        // (`has_message`), and stays awake afterwards; before any thread of this process
        // sleeps, the peers' writes wake the reader threads again (`shm_io::before_park`).
        if let Some(s) = e.peer(peer).and_then(|p| p.shm.as_ref()) {
            s.set_polling(true);
        }
        e.event.wait(deadline, ready, &|| e.stop(Some(peer)), slow)
    }

    /// Whether `rank`'s connection to `me` ended without a goodbye.
    pub(super) fn is_lost(&self, me: Rank, rank: Rank) -> bool {
        self.pair(me, rank).is_some_and(|(_, p)| p.lost.load(Ordering::SeqCst))
    }

    pub(super) fn is_departed(&self, me: Rank, rank: Rank) -> bool {
        self.pair(me, rank).is_some_and(|(_, p)| p.is_gone())
    }

    /// `me` failed with `err`: it records it and tells every peer (an `Abort` frame).
    pub(super) fn poison(&self, me: Rank, err: CollectiveError) {
        let Some(e) = self.ep(me) else { return };
        e.set_poison(err);
        e.tell();
    }

    /// Whether `me` failed (cheap: one atomic load).
    pub(super) fn is_failed(&self, me: Rank) -> bool {
        self.ep(me).is_some_and(|e| e.failed.load(Ordering::SeqCst))
    }

    pub(super) fn poisoned(&self, me: Rank) -> Option<CollectiveError> {
        let e = self.ep(me)?;
        if !e.failed.load(Ordering::SeqCst) {
            return None;
        }
        lock(&e.poison).clone()
    }

    /// `rank` dropped its communicator: it says goodbye to every peer and closes.
    pub(super) fn depart(&self, rank: Rank) {
        let Some(e) = self.ep(rank) else { return };
        e.tell();
        let bye = e.control(FrameKind::Goodbye, &[]);
        for p in e.peers.iter().flatten() {
            // The last data goes into the shared ring before the goodbye goes on the socket.
            shm_io::flush(p, Instant::now() + LINGER);
            let mut out = lock(&p.out);
            if !out.closing {
                out.closing = true;
                out.control.push_back(bye.clone());
            }
            drop(out);
            p.wake.notify_one();
        }
    }

    /// Whether both ranks live in this process and share memory (never, over TCP).
    pub(super) fn is_local(&self) -> bool {
        false
    }
}

/// A peer's connection ended without a goodbye, or it fell silent: `PeerLost` for waits on it.
fn lost(e: &Endpoint, p: &Peer) {
    if !p.gone.load(Ordering::SeqCst) {
        p.lost.store(true, Ordering::SeqCst);
    }
    p.gone.store(true, Ordering::SeqCst);
    e.ring();
}

fn io_error(what: &str, err: std::io::Error) -> CollectiveError {
    CollectiveError::new(ErrorKind::Io, format!("{what}: {err}")).with_source(err)
}
