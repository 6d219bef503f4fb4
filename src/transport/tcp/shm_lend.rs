//! Large messages by single copy ([`crate::transport::shm::cma`]): the sender lends its
//! memory by address through a `Lent` record instead of copying the bytes into the ring, and
//! the receiver copies them out of the sender's process when it opens the message — straight
//! into the destination when the step is a plain copy.
//!
//! A lent message is released (the sender may write its memory again) only once the receiver
//! says it is done reading (`lent_done`, in order: messages are opened oldest first), or its
//! process is gone. A sender whose op fails takes its lent messages back without waiting for
//! a receiver that may never open them: it publishes `lent_revoked`, then looks at
//! `lent_reading`; the receiver publishes `lent_reading` before it looks at `lent_revoked`.
//! Both are sequentially consistent, so either the receiver sees the revocation and does not
//! read, or the sender sees the read and waits for its end (Dekker's protocol).

use std::collections::VecDeque;
use std::sync::atomic::{Ordering, fence};

use super::{Endpoint, Peer, ShmPeer, lock};
use crate::error::{CollectiveError, ErrorKind};
use crate::mem::{HostRegion, Lease};
use crate::op::OpKind;
use crate::transport::Header;
use crate::transport::shm::cma;
use crate::transport::shm::ring::{self, Kind, Producer};
use crate::transport::shm::segment::Ctrl;
use crate::transport::tcp::peer::{InMsg, Remote};
use crate::transport::wire::HEADER_LEN;

/// The sending side: the lent messages the peer may still read.
#[derive(Debug, Default)]
pub(super) struct Lending {
    /// Lent messages pushed so far (the last one's number).
    pushed: u64,
    /// (ticket, number, the read registration that keeps its bytes unwritten), oldest first.
    out: VecDeque<(u64, u64, Lease)>,
}

impl ShmPeer {
    /// A read registration of `r` if it goes by single copy: the peer can read this process,
    /// `r` is large (`cma_min`; `copy_min` for all_gather, all_to_all, gather and scatter, and
    /// at least [`cma::CMA_MIN`] for an in-place all_reduce, below) and memory of this process,
    /// and the op is not a rooted reduce (`header`).
    ///
    /// A lent message moves the copy from the sender (into the ring) to the receiver (out of
    /// this process). A copy step lands the bytes straight in its destination: half the
    /// copies. A reducing step reads them into a buffer of its own first — one copy, as
    /// through the ring, but the receiver's. That pays wherever every rank receives about as
    /// much as it sends (all_reduce, reduce_scatter): measured (PERFORMANCE.md, session 34,
    /// lending and not alternated) 2 processes' all_reduce at 256 MiB 82.6-83.0 -> 66.0-66.9
    /// ms, 4 processes' 268-271 -> 208-215 ms and at 4 MiB 3.8-4.1 -> 2.0 ms, reduce_scatter
    /// faster at every size. It costs where one rank receives from every other: the root of
    /// reduce then makes every copy besides every reduction (2 processes, 16 MiB: 2.0 -> 3.2
    /// ms), so reduce keeps the ring. (Session 10 measured all_reduce 1.3-1.5x slower lent;
    /// the ring has changed since.)
    ///
    /// An in-place all_reduce lends its small messages no earlier than with 3 peers, even to
    /// its one peer: each range the peer reads there is one this rank reduces or receives into
    /// next, and after another core has read a cache line, changing it costs a second transfer
    /// of the line (a 32 KiB in-place sum over lines a peer had just read took 8-16 us
    /// against 2.3: `benches/study/in_place_after_peer_read.c`), where ring copies leave the
    /// lines with this rank. Measured (PERFORMANCE.md, session 35; 2 processes, in-place
    /// all_reduce, old and new builds alternated, 3 rounds): 32 KiB 12.8-13.9 -> 5.5-5.8 us,
    /// 64 KiB 23-29 -> 8.9-13.0, 128 KiB 27-31 -> 17-20; out of place unchanged. Larger
    /// messages are lent as before: the ring's copies of them were slower still (256 KiB in
    /// place 46 -> 49-77 us with no lending below 1 MiB).
    pub(super) fn lendable(&self, header: &Header, r: &HostRegion) -> Option<Lease> {
        let desc = &header.fp.desc;
        let min = match desc.kind {
            OpKind::AllReduce if desc.in_place => self.cma_min.max(cma::CMA_MIN),
            OpKind::AllGather | OpKind::AllToAll | OpKind::AllToAllV | OpKind::Gather | OpKind::Scatter => {
                self.copy_min
            }
            _ => self.cma_min,
        };
        let lend = self.pair.lend && r.len >= min && desc.kind != OpKind::Reduce;
        if lend { Lease::new(r) } else { None }
    }

    /// Publishes a `Lent` record for message `ticket` of `len` bytes; gives `lease` back when
    /// the ring has no room now.
    pub(super) fn push_lent(
        &self,
        pr: &mut Producer,
        frame: &[u8; HEADER_LEN],
        len: usize,
        ticket: u64,
        lease: Lease,
    ) -> Option<Lease> {
        let mut l = lock(&self.lending);
        let n = l.pushed + 1;
        let mut payload = [0u8; 16];
        payload[0..8].copy_from_slice(&lease.addr().to_le_bytes());
        payload[8..16].copy_from_slice(&n.to_le_bytes());
        if !pr.push(Kind::Lent, frame, len as u64, &payload) {
            return Some(lease);
        }
        l.pushed = n;
        l.out.push_back((ticket, n, lease));
        self.lent_out.store(l.out.len(), Ordering::SeqCst);
        None
    }

    /// Lent messages the peer is done with (its count).
    pub(super) fn lent_done(&self) -> u64 {
        self.pair.map.u64_at(Ctrl::of(self.pair.out_dir).lent_done).load(Ordering::SeqCst)
    }

    /// Drops the registrations of what the peer has read (all of them when it is `gone`).
    fn settle(&self, l: &mut Lending, gone: bool) {
        if gone {
            l.out.clear();
        }
        let done = self.lent_done();
        while l.out.front().is_some_and(|o| o.1 <= done) {
            l.out.pop_front();
        }
        self.lent_out.store(l.out.len(), Ordering::SeqCst);
    }

    /// Whether message `ticket` is lent and the peer may still read it.
    pub(in crate::transport::tcp) fn lent_pending(&self, p: &Peer, ticket: u64) -> bool {
        // Nothing lent (every small message): no lock. `push_lent` counts a lent message
        // before its sender counts it released, so a ticket that is released and lent is seen.
        if self.lent_out.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let mut l = lock(&self.lending);
        if l.out.is_empty() {
            return false;
        }
        self.settle(&mut l, p.gone.load(Ordering::SeqCst));
        l.out.iter().any(|o| o.0 == ticket)
    }

    /// Takes back every lent message the peer has not started reading; true while it reads
    /// one (see the module docs).
    pub(in crate::transport::tcp) fn revoke_lent(&self, p: &Peer) -> bool {
        let mut l = lock(&self.lending);
        self.settle(&mut l, p.gone.load(Ordering::SeqCst));
        if l.out.is_empty() {
            return false;
        }
        let ctrl = Ctrl::of(self.pair.out_dir);
        self.pair.map.u64_at(ctrl.lent_revoked).store(l.pushed, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let reading = self.pair.map.u64_at(ctrl.lent_reading).load(Ordering::SeqCst);
        self.settle(&mut l, false);
        if l.out.front().is_some_and(|o| o.1 <= reading) {
            return true;
        }
        l.out.clear();
        self.lent_out.store(0, Ordering::SeqCst);
        false
    }

    /// Reads the bytes of `m` if they are still in the peer's process: into `dst` (returned)
    /// when given and writable, else into a receive buffer that becomes `m`'s region.
    ///
    /// # Errors
    /// As [`read_lent`](Self::read_lent), or `Device` when no receive buffer can be had.
    pub(in crate::transport::tcp) fn fetch(
        &self,
        e: &Endpoint,
        p: &Peer,
        m: &mut InMsg,
        dst: Option<&HostRegion>,
    ) -> crate::Result<Option<HostRegion>> {
        let Some(remote) = m.remote.take() else { return Ok(None) };
        if let Some(d) = dst
            && let Ok(mut g) = d.mem.write(d.off, d.len)
        {
            self.read_lent(e, p, remote, &mut g)?;
            return Ok(Some(d.clone()));
        }
        let len = m.region.len;
        let mem = match p.recv_buffer(len) {
            Ok(mem) => mem,
            Err(err) => {
                self.done_with(remote.n);
                return Err(err.with_rank(e.rank).with_peer(p.rank));
            }
        };
        self.read_lent(e, p, remote, &mut mem.write(0, len)?)?;
        m.region = HostRegion { mem, off: 0, len };
        Ok(None)
    }

    /// Tells the peer this rank is done with its lent message `n` (read or not).
    fn done_with(&self, n: u64) {
        let map = &self.pair.map;
        map.u64_at(Ctrl::of(1 - self.pair.out_dir).lent_done).fetch_max(n, Ordering::SeqCst);
        // A sender that sleeps waiting for this (`is_released`) is woken by its reader thread.
        ring::nudge(map, Ctrl::of(self.pair.out_dir));
    }

    /// Copies lent message `remote` out of the peer's process into `dst` and tells the peer
    /// it is done with it (whether the copy worked or not: it is never read again).
    ///
    /// # Errors
    /// `PeerLost` when the peer's process is gone, `Aborted` when the peer took the message
    /// back (its op failed), `Io` for any other failed read; each names this rank and the peer.
    pub(super) fn read_lent(&self, e: &Endpoint, p: &Peer, remote: Remote, dst: &mut [u8]) -> crate::Result<()> {
        let map = &self.pair.map;
        let ctrl = Ctrl::of(1 - self.pair.out_dir);
        map.u64_at(ctrl.lent_reading).store(remote.n, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let r = if map.u64_at(ctrl.lent_revoked).load(Ordering::SeqCst) >= remote.n {
            Err(CollectiveError::new(ErrorKind::Aborted, "the peer took back a message it lent (its op failed)"))
        } else {
            cma::read(self.pair.peer_pid, remote.addr, dst).map_err(|err| {
                let (peer, len) = (p.rank, dst.len());
                // ESRCH: no such process, or one that has exited (a zombie has no memory).
                let (kind, what) = if err.raw_os_error() == Some(libc::ESRCH) {
                    let what = format!(
                        "rank {peer} is gone: its process ended (did it crash or get killed?) while this rank \
                         read {len} bytes it had lent: {err}"
                    );
                    (ErrorKind::PeerLost, what)
                } else {
                    (ErrorKind::Io, format!("reading {len} bytes out of rank {peer}'s process: {err}"))
                };
                CollectiveError::new(kind, what).with_source(err)
            })
        };
        self.done_with(remote.n);
        r.map_err(|err| err.with_rank(e.rank).with_peer(p.rank))
    }
}
