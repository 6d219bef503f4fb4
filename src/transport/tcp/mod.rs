//! TCP transport: one connection per pair of ranks, frames from [`wire`](super::wire).
//!
//! Ranks cannot read each other's memory, so what the in-process transport shares becomes
//! messages:
//! - a send queues the lent payload (the queue is unbounded: `send` never blocks) and a
//!   writer task puts it on the wire; the lend is *released once its bytes are written*;
//! - a reader task receives each message into a buffer it allocates (owned by the receiver,
//!   handed to the scheduler as host memory), after checking the frame against what it may
//!   accept — or the receiving rank does, while it waits for that peer: frames (messages,
//!   credits) are read by the thread that waits for them, with no wake-up of the task in
//!   between (one parser for both, behind a lock: `rx`; while the rank reads a socket itself
//!   the task takes it out of the runtime's poller, so those frames wake no runtime thread
//!   either); the receiver's `release` frees the buffer and returns *credits* to the sender,
//!   which keeps at most [`WINDOW`] bytes un-credited per peer (one larger message goes
//!   alone), so buffers are bounded without ever blocking a send (see the simulator's
//!   `every_plan_is_deadlock_free_under_credits`);
//! - poison is an `Abort` frame (passed on by every rank that hears it), departure a `Goodbye` frame (or the connection closing),
//!   and a peer whose connection falls silent for the communicator's `peer_silence`
//!   (heartbeats every quarter of it, at most every [`HEARTBEAT`]) is lost;
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

mod endpoint;
mod fate;
mod flight;
pub(crate) mod inbox;
mod io;
mod peer;
mod rx;
pub(crate) mod setup;
#[cfg(all(target_os = "linux", not(miri)))]
pub(crate) mod shm_io;
/// Without shared memory (other systems, Miri) no pair has a segment: a type with no values.
#[cfg(not(all(target_os = "linux", not(miri))))]
#[path = "shm_none.rs"]
pub(crate) mod shm_io;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use endpoint::Endpoint;
pub(crate) use flight::{FLIGHT_WAIT, FlightSource};
pub(crate) use peer::arm_readers;
use peer::{OutMsg, Peer};

use super::wait::WaitOutcome;
use super::wire::{self, FrameHeader, FrameKind};
use super::{Header, Opened, Payload};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::Rank;

/// Bytes a sender may have on the wire to one peer before the peer credits them back.
pub(crate) const WINDOW: u64 = 16 << 20;
/// The largest single message a receiver accepts (it goes alone, when nothing else is
/// buffered). Larger plans' messages are a protocol error.
pub(crate) const MAX_MESSAGE: u64 = 16 << 30;
/// How often an idle connection says it is alive, at most (more often when the silence
/// limit is shorter than four of these: [`Endpoint::heartbeat`]).
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(2);
/// Messages up to this many bytes may be written by the sending thread itself.
pub(crate) const DIRECT_MAX: usize = 64 << 10;
/// How long dropping a mesh waits for its writers to put the last frames (credits, the
/// goodbye) on the wire: a process that exits right after dropping its communicator must not
/// leave its peers waiting for credits that were never sent.
const LINGER: Duration = Duration::from_secs(2);
/// The most a failed op waits for a peer in another process to finish reading what it sent
/// or lent ([`Mesh::reclaim`]): a copy in progress ends well within it.
const RECLAIM_REMOTE: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The TCP endpoints of one communicator's ranks that live in this process.
#[derive(Debug)]
pub struct Mesh {
    endpoints: Vec<Option<Arc<Endpoint>>>,
    /// The exchange slots every rank maps, when all ranks are processes of one host that
    /// agreed on them at setup (`shm::slot_agree`).
    slots: Option<super::slots::Slots>,
    /// The ranks of this host's other processes that this mesh reaches through shared
    /// memory, counted as live local ranks while it lives (see `setup::endpoints`): held,
    /// never read.
    _host_ranks: Vec<super::LiveRank>,
    /// Pairs of ranks that live in this process (a group spanning processes with several
    /// ranks in this one): their messages are lent in place, as between threads of an
    /// in-process group, not copied through a socket or a ring; their connection still
    /// carries the control frames (abort, goodbye, heartbeats).
    together: Option<Together>,
}

/// The mailboxes of this process's ranks in a mesh that spans processes.
#[derive(Debug)]
pub(crate) struct Together {
    /// Each rank's index among this process's ranks, if it is one of them.
    index: Vec<Option<usize>>,
    boxes: super::inproc::Boxes,
}

impl Together {
    /// For the ranks `local` marks, when there are at least two of them.
    pub(crate) fn new(local: &[bool]) -> Option<Self> {
        let mut index = Vec::with_capacity(local.len());
        let mut n = 0;
        for &here in local {
            index.push(here.then_some(n));
            n += usize::from(here);
        }
        (n >= 2).then(|| Together { index, boxes: super::inproc::Boxes::new(n) })
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        // The last rank is gone: close every connection still open (their tasks end); each
        // departure waits for its writers to put the last frames on the wire.
        for r in 0..self.endpoints.len() {
            self.depart(r);
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

    /// The mailboxes of `a` and `b`, and their indices there, when both live in this
    /// process (and the mesh spans processes: a loopback mesh keeps every pair on sockets).
    fn together(&self, a: Rank, b: Rank) -> Option<(&super::inproc::Boxes, usize, usize)> {
        let t = self.together.as_ref()?;
        let (i, j) = (*t.index.get(a)?, *t.index.get(b)?);
        Some((&t.boxes, i?, j?)).filter(|_| a != b)
    }

    /// Whether `a` and `b` live in this process and lend each other memory in place.
    pub(super) fn same_process(&self, a: Rank, b: Rank) -> bool {
        self.together(a, b).is_some()
    }

    /// Whether `me`'s data to `peer` goes through a segment both processes map.
    pub(super) fn through_shm(&self, me: Rank, peer: Rank) -> bool {
        self.pair(me, peer).is_some_and(|(_, p)| p.shm.is_some())
    }

    /// Wakes `rank`, one of this process's.
    fn ring_rank(&self, rank: Rank) {
        if let Some(e) = self.ep(rank) {
            e.ring();
        }
    }

    pub(super) fn send(&self, from: Rank, to: Rank, header: Header, payload: Payload) -> u64 {
        if let Some((b, i, j)) = self.together(from, to) {
            let ticket = b.send(i, j, header, payload);
            self.ring_rank(to);
            return ticket;
        }
        let Some((e, p)) = self.pair(from, to) else { return 0 };
        match &p.shm {
            Some(s) => s.send(e, p, header, payload),
            None => p.send_tcp(e, header, payload),
        }
    }

    pub(super) fn has_message(&self, me: Rank, from: Rank) -> bool {
        if let Some((b, i, j)) = self.together(me, from) {
            return b.has_message(i, j);
        }
        let Some((e, p)) = self.pair(me, from) else { return false };
        if p.unopened.load(Ordering::SeqCst) > 0 {
            return true;
        }
        // A receiver that is awake takes shared-memory records, or small frames off the socket,
        // itself (no thread hop).
        match &p.shm {
            Some(s) => s.poll_inline(e, p) && p.unopened.load(Ordering::SeqCst) > 0,
            None => {
                p.poll_inline(e);
                p.unopened.load(Ordering::SeqCst) > 0
            }
        }
    }

    /// The header of the oldest unopened message from `from`, if it has arrived.
    pub(super) fn peek_header(&self, me: Rank, from: Rank) -> Option<Header> {
        if let Some((b, i, j)) = self.together(me, from) {
            return b.peek_header(i, j);
        }
        let (_, p) = self.pair(me, from)?;
        lock(&p.inbox).msgs.iter().find(|m| !m.opened).map(|m| m.header)
    }

    /// Opens the oldest unopened message; one still in the peer's process (lent, `shm_io`) is
    /// read now: into `into`'s region when its check accepts the header and length (then
    /// `true`: the payload is that region), else into a receive buffer. A failed read
    /// poisons this rank (naming the peer and the message's op) and opens nothing.
    pub(super) fn open(&self, me: Rank, from: Rank, into: Option<super::Landing<'_>>) -> Option<(Opened, bool)> {
        if let Some((b, i, j)) = self.together(me, from) {
            // Lent in place: the receiver reads the sender's memory, nothing lands.
            return b.open(i, j).map(|m| (Opened { from, ..m }, false));
        }
        let (e, p) = self.pair(me, from)?;
        let mut inbox = lock(&p.inbox);
        let m = inbox.msgs.iter_mut().find(|m| !m.opened)?;
        let mut landed = None;
        if m.remote.is_some()
            && let Some(s) = &p.shm
        {
            let dst = into.filter(|(d, accept)| d.len == m.region.len && accept(&m.header, d.len)).map(|(d, _)| d);
            match s.fetch(e, p, m, dst) {
                Ok(l) => landed = l,
                Err(err) => {
                    // The failure of the op this message belongs to (its sequence number), so
                    // this rank and the peers it tells report it as that op's error, not as
                    // one of an earlier op.
                    let err = if m.header.p2p { err } else { err.with_seq(m.header.seq) };
                    drop(inbox);
                    if matches!(err.kind(), ErrorKind::Aborted | ErrorKind::PeerLost) {
                        // The peer took the message back because its op failed, and sent
                        // why (an abort frame) before: that is the error to report (the first
                        // poison wins), once the socket brings it. Likewise when its process
                        // has ended since: it may have failed the op first and left (this
                        // process was stopped meanwhile), and its abort waits on the socket,
                        // which its end closed (a crash: the reader reads the close at once).
                        linger(Instant::now() + LINGER, || {
                            e.failed.load(Ordering::SeqCst) || p.gone.load(Ordering::SeqCst)
                        });
                    }
                    e.set_poison(err);
                    return None;
                }
            }
        }
        m.opened = true;
        p.unopened.fetch_sub(1, Ordering::SeqCst);
        let payload = Payload::Host(landed.clone().unwrap_or_else(|| m.region.clone()));
        Some((Opened { from, ticket: m.id, header: m.header, payload }, landed.is_some()))
    }

    /// `me` checked message `id` from `from` and takes it: over shared memory the sender may
    /// count it delivered now (see [`Link::accept`](crate::transport::Link::accept)).
    pub(super) fn accept(&self, me: Rank, from: Rank, id: u64) {
        if self.same_process(me, from) {
            return;
        }
        if let Some((_, p)) = self.pair(me, from)
            && let Some(s) = &p.shm
        {
            s.accept(id);
        }
    }

    /// Done with (`release`: the buffer is freed and its bytes credited back to the sender)
    /// or back in the queue unread.
    pub(super) fn finish(&self, me: Rank, from: Rank, id: u64, release: bool) {
        if let Some((b, i, j)) = self.together(me, from) {
            b.finish(i, j, id, release);
            self.ring_rank(from);
            return;
        }
        let Some((e, p)) = self.pair(me, from) else { return };
        let freed = {
            let mut inbox = lock(&p.inbox);
            let Some(i) = inbox.msgs.iter().position(|m| m.id == id && m.opened) else { return };
            if !release {
                inbox.msgs[i].opened = false;
                p.unopened.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let m = &inbox.msgs[i];
            let len = m.region.len as u64;
            // A message read in place in the shared ring has no buffer of its own to keep (the
            // common case over shared memory).
            let own = !p.shm.as_ref().is_some_and(|s| s.in_ring(&m.region.mem));
            inbox.buffered -= len.min(inbox.buffered);
            let removed = inbox.msgs.remove(i);
            if own && let Some(m) = removed {
                p.recycle(m.region.mem);
            }
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
        if let Some((b, i, j)) = self.together(me, to) {
            return b.is_released(i, j, ticket);
        }
        let Some((_, p)) = self.pair(me, to) else { return true };
        if let Some(s) = &p.shm
            && s.lent_pending(p, ticket)
        {
            return false;
        }
        if p.released.load(Ordering::SeqCst) >= ticket {
            return true;
        }
        // Issued (a staging slot being filled is marked with a ticket not issued yet), and
        // neither being written nor waiting: on the wire, or taken back.
        ticket <= p.sent.load(Ordering::SeqCst) && !Peer::is_pending(&lock(&p.out), ticket)
    }

    pub(super) fn is_delivered(&self, me: Rank, to: Rank, ticket: u64) -> bool {
        if self.same_process(me, to) {
            return self.is_released(me, to, ticket);
        }
        // Taken by the peer *and* done with here: the peer may read the last bytes (and credit
        // them) before the writer task that wrote them has let go of the sender's memory.
        // The credit that says so is read off the socket by the waiting rank itself.
        let taken = |(e, p): (&Arc<Endpoint>, &Arc<Peer>)| {
            p.taken() >= ticket || {
                p.poll_inline(e);
                p.taken() >= ticket
            }
        };
        self.pair(me, to).is_none_or(taken) && self.is_released(me, to, ticket)
    }

    /// Takes back what `me` queued for `to` and has not started writing; true while a
    /// message to it is still being written.
    fn revoke(&self, me: Rank, to: Rank) -> bool {
        if let Some((b, i, j)) = self.together(me, to) {
            return b.revoke(i, j);
        }
        let Some((_, p)) = self.pair(me, to) else { return false };
        let mut out = lock(&p.out);
        // The rest of a frame already begun on the socket stays: the peer must be able to read
        // the frames after it (the abort that says why). It counts as being written.
        out.data.retain(|m| m.done > 0);
        out.shm_data.clear();
        let writing = out.writing.is_some() || !out.data.is_empty();
        drop(out);
        p.shm.as_ref().is_some_and(|s| s.revoke_lent(p)) || writing
    }

    /// Takes back what `me` (whose op failed) queued or lent `to`, waiting until `deadline`
    /// while it is being read — but at most [`RECLAIM_REMOTE`] for a peer in another
    /// process: whatever it reads is registered (the writer's read guard, a lent message's
    /// lease), so no write of this process changes it meanwhile, and waiting longer only
    /// hands the memory back free sooner. A stopped peer (SIGSTOP, a debugger) held the
    /// failed op 10 s past its deadline (a stranger's review); the registration now outlives
    /// the call instead, and writes to that memory are refused until the peer is done or gone.
    pub(super) fn reclaim(&self, me: Rank, to: Rank, deadline: Instant) -> bool {
        let Some(e) = self.ep(me) else { return true };
        let deadline = if self.same_process(me, to) { deadline } else { deadline.min(Instant::now() + RECLAIM_REMOTE) };
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
        // This thread takes the peers' shared-memory records itself while it spins and yields
        // (`has_message`), and stays awake afterwards; before any thread of this process
        // sleeps, the peers' writes wake the reader threads again (`shm_io::before_park`).
        e.polls();
        e.event.wait(deadline, ready, &|| e.stop(Some(peer)), slow)
    }

    /// Whether both ranks live in this process and share memory (never, over TCP).
    pub(super) fn is_local(&self) -> bool {
        false
    }

    /// The host's exchange slots, when every rank agreed on them at setup.
    pub(super) fn slots(&self) -> Option<&super::slots::Slots> {
        self.slots.as_ref()
    }

    /// `me` published or finished an exchanged op: wakes every peer that sleeps (each
    /// pair's reader thread in the peer's process, which rings it; see `shm_io::poke`), and
    /// says `me` is awake (a rank that runs its ops without ever waiting, as a broadcast's
    /// root may, would be poked for every peer's op otherwise: see `Endpoint::polls`).
    pub(super) fn wake_peers(&self, me: Rank) {
        let Some(e) = self.ep(me) else {
            return;
        };
        e.polls();
        // Orders the slot's stores before the looks at whether the peers poll or sleep
        // (paired with the fence a rank takes after saying it no longer polls, `before_park`;
        // the argument is at `shm_io::ShmPeer::poke`).
        std::sync::atomic::fence(Ordering::SeqCst);
        for s in &e.shm {
            s.poke();
        }
        // This process's other ranks have no segment with `me` (they share its memory): rung
        // as an in-process group rings them, when any thread here sleeps.
        if let Some(t) = &self.together
            && t.index.get(me).is_some_and(Option::is_some)
            && super::wait::anyone_parked()
        {
            let others = t.index.iter().enumerate().filter(|(r, i)| *r != me && i.is_some());
            super::wait::ring_all(others.filter_map(|(r, _)| self.ep(r)).map(|e| &e.event));
        }
    }
}

/// Waits until `done`, at most until `until` (a [`LINGER`] from when the wait began): for the
/// last frames to reach the wire before a process may exit, or for the socket to bring a
/// peer's last word.
fn linger(until: Instant, done: impl Fn() -> bool) {
    while !done() && Instant::now() < until {
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A peer's connection ended without a goodbye, or it fell silent: `PeerLost` for waits on it.
fn lost(e: &Endpoint, p: &Peer) {
    if !p.gone.load(Ordering::SeqCst) {
        p.lost.store(true, Ordering::SeqCst);
        e.lost_any.store(true, Ordering::SeqCst);
    }
    p.gone.store(true, Ordering::SeqCst);
    e.ring();
}

fn io_error(what: &str, err: std::io::Error) -> CollectiveError {
    CollectiveError::new(ErrorKind::Io, format!("{what}: {err}")).with_source(err)
}
