//! The reading side of a pair's shared segment ([`super`]): the reader thread, and the poll
//! that turns the ring's records into inbox messages (host memory in the ring; streamed
//! messages into a buffer the receiver owns; lent ones opened by single copy), each frame's
//! header checked as the socket reader checks one.

use std::sync::atomic::Ordering;

use super::{Incoming, NAP, ShmPeer, Stream};
use crate::mem::{HostMem, HostRegion};
use crate::transport::Header;
use crate::transport::shm::ring::Kind;
use crate::transport::tcp::peer::Remote;
use crate::transport::tcp::{Endpoint, MAX_MESSAGE, Peer, lock};
use crate::transport::wire::{self, FrameKind, HEADER_LEN, Limits};

/// The reader thread: hands every record the peer publishes to the inbox while its rank
/// sleeps, and rings the rank when the peer takes messages; drains the ring once more when the
/// peer is gone.
pub(super) fn reader(e: &Endpoint, p: &Peer, s: &ShmPeer) {
    // The peer's count of messages taken, as this rank last heard of it: when it moves, a
    // rank asleep in `is_delivered` is rung (the peer nudges this thread).
    let mut seen = s.progress();
    loop {
        match poll(e, p, s) {
            Ok(0) => {}
            Ok(_) => {
                e.ring();
                continue;
            }
            Err(what) => {
                e.protocol(p.rank, format!("in shared memory: {what}"));
                break;
            }
        }
        if p.gone.load(Ordering::SeqCst) || lock(&p.out).closing {
            // Everything the peer published before its goodbye is in the ring now.
            if let Err(what) = poll(e, p, s) {
                e.protocol(p.rank, format!("in shared memory: {what}"));
            }
            break;
        }
        // No spinning here: an awake receiver takes records itself (`poll_inline`), so this
        // thread matters when its rank sleeps, and spinning would take the cores the ranks need.
        let waiter = lock(&s.incoming).cons.waiter();
        waiter.wait_data(NAP, &|| s.progress() != seen);
        let now = s.progress();
        if now != seen {
            seen = now;
            e.ring();
        }
    }
    s.drained.store(true, Ordering::SeqCst);
    e.ring();
}

/// Hands every published record to the inbox; how many messages arrived.
fn poll(e: &Endpoint, p: &Peer, s: &ShmPeer) -> std::result::Result<usize, String> {
    poll_locked(e, p, s, &mut lock(&s.incoming))
}

pub(super) fn poll_locked(
    e: &Endpoint,
    p: &Peer,
    s: &ShmPeer,
    inc: &mut Incoming,
) -> std::result::Result<usize, String> {
    let mut n = 0;
    while let Some(r) = inc.cons.next()? {
        match r.kind {
            Kind::Data => {
                if inc.stream.is_some() {
                    return Err("a message inside a streamed one".into());
                }
                let header = check(e, p, &mut inc.fps, &r.frame, r.len as u64)?;
                let id = p.arrive(header, HostRegion { mem: s.ring_in.clone(), off: r.off, len: r.len });
                inc.held.push((id, r.end));
                n += 1;
            }
            Kind::Stream => {
                if inc.stream.is_some() {
                    return Err("a streamed message inside another".into());
                }
                let header = check(e, p, &mut inc.fps, &r.frame, r.extra)?;
                let mem = HostMem::zeroed(r.extra as usize).map_err(|err| err.to_string())?;
                inc.cons.free(r.end);
                inc.stream = Some(Stream { header, mem, filled: 0 });
            }
            Kind::Piece => {
                let Some(st) = inc.stream.as_mut() else { return Err("a piece outside a streamed message".into()) };
                if st.filled + r.len > st.mem.len() {
                    return Err("a streamed message longer than it said".into());
                }
                {
                    let mut g = st.mem.write(st.filled, r.len).map_err(|err| err.to_string())?;
                    inc.cons.copy(r.off, &mut g);
                }
                inc.cons.free(r.end);
                st.filled += r.len;
            }
            Kind::Lent => {
                if inc.stream.is_some() {
                    return Err("a lent message inside a streamed one".into());
                }
                if !s.pair.read_peer || r.len != 16 {
                    return Err(format!("a lent message ({} bytes of record) on a pair that cannot read it", r.len));
                }
                let header = check(e, p, &mut inc.fps, &r.frame, r.extra)?;
                let mut w = [0u8; 16];
                inc.cons.copy(r.off, &mut w);
                inc.cons.free(r.end);
                let addr = u64::from_le_bytes(w[0..8].try_into().unwrap_or_default());
                let num = u64::from_le_bytes(w[8..16].try_into().unwrap_or_default());
                if num != inc.lent_next + 1 || r.extra > MAX_MESSAGE {
                    return Err(format!("lent message number {num} of {} bytes after {}", r.extra, inc.lent_next));
                }
                inc.lent_next = num;
                // A placeholder of the message's length: `Mesh::open` reads the bytes.
                let empty = HostMem::zeroed(0).map_err(|err| err.to_string())?;
                let region = HostRegion { mem: empty, off: 0, len: r.extra as usize };
                p.arrive_from(header, region, Some(Remote { addr, n: num }));
                n += 1;
            }
            Kind::Wrap => {}
        }
        if inc.stream.as_ref().is_some_and(|st| st.filled == st.mem.len())
            && let Some(st) = inc.stream.take()
        {
            let len = st.mem.len();
            p.arrive(st.header, HostRegion { mem: st.mem, off: 0, len });
            n += 1;
        }
    }
    Ok(n)
}

/// Checks a data frame's header as the socket reader does: a data frame of `len` bytes, of
/// this communicator, from this peer.
fn check(
    e: &Endpoint,
    p: &Peer,
    fps: &mut wire::FpMemo,
    frame: &[u8; HEADER_LEN],
    len: u64,
) -> std::result::Result<Header, String> {
    let h = wire::decode_header_memo(frame, Limits { max_data: MAX_MESSAGE }, fps).map_err(|err| err.to_string())?;
    if h.kind != FrameKind::Data || h.len != len {
        return Err(format!("a {:?} frame of {} bytes in a record of {len}", h.kind, h.len));
    }
    if h.comm != e.comm || h.from as usize != p.rank {
        return Err(format!("a frame for communicator/rank {:02x?}/{}", &h.comm[..6], h.from));
    }
    let fp = h.fp.ok_or("a data frame without a fingerprint")?;
    Ok(Header { seq: h.seq, p2p: h.p2p, index: h.index, fp })
}
