//! The writing side of a pair's shared segment ([`super`]): the writer thread, which copies
//! the messages `send` could not put in the ring at once (a full ring, a message queued
//! before it), oldest first, waiting for space; large messages stream in pieces, and those a
//! peer may read in place are lent instead ([`super::lend`]).

use std::sync::atomic::Ordering;

use super::{NAP, ShmPeer};
use crate::error::CollectiveError;
use crate::transport::shm::ring::Kind;
use crate::transport::shm::{INLINE_MAX, PIECE};
use crate::transport::tcp::{Endpoint, OutMsg, Peer, lock};
use crate::transport::wire::{self, FrameHeader, FrameKind, HEADER_LEN};
use crate::transport::{Header, Payload};

/// The data frame header of message `m`, `len` bytes.
pub(super) fn data_frame(e: &Endpoint, m: &Header, len: usize) -> [u8; HEADER_LEN] {
    let mut h = FrameHeader::control(FrameKind::Data, e.comm, e.rank as u32, len as u64);
    (h.seq, h.p2p, h.index, h.fp) = (m.seq, m.p2p, m.index, Some(m.fp));
    wire::encode_header(&h)
}

/// The writer thread: copies the messages queued for `p` into the ring, oldest first, until
/// the pair closes or the peer is gone.
pub(super) fn writer(e: &Endpoint, p: &Peer, s: &ShmPeer) {
    loop {
        let next = {
            let mut out = lock(&p.out);
            match out.shm_data.pop_front() {
                Some(m) => {
                    out.writing = Some(m.ticket);
                    Ok(m)
                }
                None => Err(out.closing),
            }
        };
        match next {
            Ok(m) => {
                let ticket = m.ticket;
                let r = write(e, p, s, m);
                lock(&p.out).writing = None;
                if r.is_ok() {
                    p.released.fetch_max(ticket, Ordering::SeqCst);
                } else {
                    // Nothing more will be written: whatever is queued counts as released.
                    lock(&p.out).shm_data.clear();
                }
                e.ring();
                if r.is_err() {
                    return;
                }
            }
            Err(true) => return,
            Err(false) if p.gone.load(Ordering::SeqCst) => {
                lock(&p.out).shm_data.clear();
                e.ring();
                return;
            }
            Err(false) => std::thread::park_timeout(NAP),
        }
    }
}

/// Copies one message into the ring (in pieces when large), waiting for space.
fn write(e: &Endpoint, p: &Peer, s: &ShmPeer, m: OutMsg) -> std::result::Result<(), ()> {
    let region = match m.payload {
        Payload::Host(r) => r,
        Payload::Device(..) => {
            e.set_poison(CollectiveError::unsupported("a device range cannot cross processes").with_rank(e.rank));
            return Err(());
        }
    };
    let frame = data_frame(e, &m.header, region.len);
    if let Some(mut lease) = s.lendable(&m.header, &region) {
        loop {
            let mut pr = lock(&s.prod);
            match s.push_lent(&mut pr, &frame, region.len, m.ticket, lease) {
                None => return Ok(()),
                Some(back) => lease = back,
            }
            if p.gone.load(Ordering::SeqCst) {
                return Err(());
            }
            pr.wait_space(16, NAP);
        }
    }
    let bytes = match region.read() {
        Ok(b) => b,
        Err(err) => {
            e.set_poison(err.with_rank(e.rank));
            return Err(());
        }
    };
    let push = |kind: Kind, extra: u64, payload: &[u8]| -> std::result::Result<(), ()> {
        loop {
            let mut pr = lock(&s.prod);
            if pr.push(kind, &frame, extra, payload) {
                return Ok(());
            }
            if p.gone.load(Ordering::SeqCst) {
                return Err(());
            }
            // Holding the producer is fine: `send` only takes it when nothing is being written.
            pr.wait_space(payload.len(), NAP);
        }
    };
    if region.len <= INLINE_MAX {
        return push(Kind::Data, 0, &bytes);
    }
    push(Kind::Stream, region.len as u64, &[])?;
    bytes.chunks(PIECE).try_for_each(|piece| push(Kind::Piece, 0, piece))
}
