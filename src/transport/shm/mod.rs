//! Shared memory between processes on one host (Linux): a segment per pair of ranks
//! ([`segment`]), a ring of records per direction ([`ring`]), and the handshake that sets
//! them up over the pair's TCP connection ([`negotiate`]).
//!
//! The pair keeps its TCP connection for what is not data: hello, abort, goodbye and
//! heartbeats travel there as before (a peer process that dies closes it: `PeerLost`), while
//! data frames go through the ring — the sender copies its payload in once and the receiver
//! reads it in place, and freeing a record is the credit. The connection driving code is in
//! the TCP transport's `shm_io`; `RUCCL_SHM_DISABLE=1` keeps every pair on TCP. Large
//! messages (of every op but a rooted reduce) skip the ring where the pair can read each
//! other's memory ([`cma`]; tested at the handshake, `RUCCL_SHM_CMA=0` turns it off).

pub(crate) mod cma;
pub(crate) mod ring;
pub(crate) mod segment;
pub(crate) mod slot_agree;
pub(crate) mod slot_segment;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use segment::Mapping;

use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::Rank;

/// Messages up to this size are one record, read in place; larger ones are streamed through
/// the ring in pieces into a buffer the receiver owns.
pub(crate) const INLINE_MAX: usize = 4 << 20;
/// Bytes of each direction's ring: what the socket's credits let a sender have in flight
/// ([`WINDOW`](crate::transport::tcp::WINDOW) bytes, or one larger message alone), plus room
/// for the padding at the ring's end and the records' headers. One difference with credits
/// remains: space is freed oldest record first, so a message released before an older one
/// frees its space only with it. Receivers open each peer's messages oldest first; a plan
/// that held an old message while it needed more than a ring of newer ones from the same
/// peer would stall here where credits would not (the simulator does not model that yet).
pub(crate) const RING_BYTES: usize = crate::transport::tcp::WINDOW as usize + 2 * INLINE_MAX;
/// The size of a streamed message's pieces.
pub(crate) const PIECE: usize = 1 << 20;

/// Whether `RUCCL_SHM_DISABLE` asks for TCP between every pair of processes.
pub(crate) fn disabled() -> bool {
    crate::config::env_flag("RUCCL_SHM_DISABLE") == Some(true)
}

/// What must match for two processes to share memory: the host (its name and boot id) and
/// the pid namespace (the peer opens `/proc/<pid>/fd/<fd>`).
fn host_key() -> String {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
    let link = |p: &str| std::fs::read_link(p).map(|s| s.display().to_string()).unwrap_or_default();
    format!(
        "{}|{}|{}",
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/random/boot_id"),
        link("/proc/self/ns/pid")
    )
}

/// The handshake's version: 3 since the identity offers single-copy reads ([`cma`]), 4 since
/// the slot agreement ([`slot_agree`]) follows it.
const MAGIC: &[u8; 8] = b"RUCCLSH4";
const IDENT: usize = 256;
/// Where the identity holds the address of the process's [`cma::PROBE`] (0: no single copy).
const PROBE_AT: usize = IDENT - 8;
/// The longest host key an identity carries.
const KEY_MAX: usize = PROBE_AT - 18;

/// What one process says about itself at the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ident {
    /// Wants shared memory.
    want: bool,
    pid: u32,
    /// Host key (see `host_key`), cut to [`KEY_MAX`] bytes.
    key: Vec<u8>,
    /// Where the peer may test-read this process's [`cma::PROBE`]; 0 when it may not read.
    probe: u64,
}

/// `[magic][want][pad][pid: u32][key len: u16][key][pad][probe address: u64]`.
fn encode_ident(id: &Ident) -> [u8; IDENT] {
    let mut b = [0u8; IDENT];
    b[0..8].copy_from_slice(MAGIC);
    b[8] = u8::from(id.want);
    b[12..16].copy_from_slice(&id.pid.to_le_bytes());
    let k = &id.key[..id.key.len().min(KEY_MAX)];
    b[16..18].copy_from_slice(&(k.len() as u16).to_le_bytes());
    b[18..18 + k.len()].copy_from_slice(k);
    b[PROBE_AT..].copy_from_slice(&id.probe.to_le_bytes());
    b
}

/// The identity in `b`, or `None` for bytes that are not one.
fn decode_ident(b: &[u8; IDENT]) -> Option<Ident> {
    if &b[0..8] != MAGIC {
        return None;
    }
    let pid = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
    let n = usize::from(u16::from_le_bytes([b[16], b[17]]));
    if n > KEY_MAX {
        return None;
    }
    let key = b.get(18..18 + n)?.to_vec();
    let probe = u64::from_le_bytes(b[PROBE_AT..].try_into().ok()?);
    Some(Ident { want: b[8] == 1, pid, key, probe })
}

/// A pair's segment, seen from one of its ranks.
#[derive(Debug)]
pub(crate) struct Pair {
    pub map: Arc<Mapping>,
    /// The direction this rank writes.
    pub out_dir: usize,
    /// The peer's process.
    pub peer_pid: u32,
    /// This rank may read the peer's memory (its large messages arrive by single copy).
    pub read_peer: bool,
    /// The peer may read this rank's memory (large messages are lent, not copied).
    pub lend: bool,
}

type Rows = [Option<Vec<Option<TcpStream>>>];

/// A failed step of the handshake with `peer`. A connection that closed means the peer's
/// process failed (or gave up) while the group was set up — usually because of a third rank,
/// which its own error names — and one that stayed silent, that it is stopped, hung or still
/// waiting for such a rank: said so (`PeerLost`, `Timeout`), not as a network fault.
fn io_err(me: Rank, peer: Rank, what: &str, e: std::io::Error) -> CollectiveError {
    use std::io::ErrorKind as K;
    let (kind, why, hint) = match e.kind() {
        K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => (
            ErrorKind::PeerLost,
            format!("rank {peer}'s process closed its connection while the group was being set up"),
            SETUP_PEER_FAILED,
        ),
        K::WouldBlock | K::TimedOut => (
            ErrorKind::Timeout,
            format!("rank {peer} did not answer in time while the group was being set up"),
            SETUP_PEER_SILENT,
        ),
        _ => (ErrorKind::Io, String::new(), ""),
    };
    let e2 = match kind {
        ErrorKind::Io => CollectiveError::new(kind, format!("shared-memory handshake ({what}): {e}")),
        _ => CollectiveError::new(kind, format!("{why} (shared-memory handshake, {what}: {e})")).with_hint(hint),
    };
    e2.with_rank(me).with_peer(peer).with_source(e)
}

/// The advice when a peer's process went away during the handshake.
const SETUP_PEER_FAILED: &str = "look at that rank's own error first: most often it gave up waiting for another \
     rank that never connected (its error names it), or it crashed; then start every rank again";

/// The advice when a peer stayed silent during the handshake.
const SETUP_PEER_SILENT: &str = "look at that rank: its process may be stopped or hung, or still waiting for \
     another rank (its own error names it); then start every rank again, or raise CommConfig::timeout \
     (RUCCL_TIMEOUT) if ranks start far apart";

/// Over every connection of `rows` (`rows[me][peer]`, fresh: nothing else sent yet), agrees
/// with the peer whether they share memory and, when they do, sets up the pair's segment
/// (the lower rank creates it, the higher one maps it through `/proc`). Pairs of two ranks
/// of this process get none: they lend each other memory in place. Every step writes to
/// all connections before reading any, so processes never wait for each other in a cycle.
///
/// # Errors
/// `PeerLost` when a peer's connection closes, `Timeout` when it stays silent past `deadline`,
/// `Io` for other socket faults; `Protocol` when a peer
/// answers with something that is not this handshake.
pub(crate) fn negotiate(rows: &mut Rows, deadline: Instant) -> Result<Vec<Vec<Option<Pair>>>> {
    let want = !disabled();
    let cma_ok = cma::allowed();
    let mine = Ident {
        want,
        pid: std::process::id(),
        key: host_key().into_bytes(),
        probe: if cma_ok { cma::probe_addr() } else { 0 },
    };
    let key_sent = &mine.key[..mine.key.len().min(KEY_MAX)];
    // Ranks of this process reach each other in place (`tcp::Together`): no segment (nor its
    // reader and writer threads) for their pairs. Both sides of such a pair are here and
    // skip it alike; the handshake's bytes still pass, so every connection stays in step.
    let here: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let mut out: Vec<Vec<Option<Pair>>> =
        rows.iter().map(|r| r.as_ref().map_or_else(Vec::new, |r| r.iter().map(|_| None).collect())).collect();
    let mut conns: Vec<(Rank, Rank, &mut TcpStream)> = Vec::new();
    for (me, row) in rows.iter_mut().enumerate() {
        let Some(row) = row else { continue };
        for (peer, s) in row.iter_mut().enumerate() {
            if let Some(s) = s {
                conns.push((me, peer, s));
            }
        }
    }
    let left = || deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    for (me, peer, s) in conns.iter_mut() {
        s.set_read_timeout(Some(left())).map_err(|e| io_err(*me, *peer, "configuring", e))?;
        s.write_all(&encode_ident(&mine)).map_err(|e| io_err(*me, *peer, "identity", e))?;
    }
    let mut pids = vec![None; conns.len()];
    let mut reads = vec![false; conns.len()];
    for (i, (me, peer, s)) in conns.iter_mut().enumerate() {
        let mut b = [0u8; IDENT];
        s.set_read_timeout(Some(left())).map_err(|e| io_err(*me, *peer, "configuring", e))?;
        s.read_exact(&mut b).map_err(|e| io_err(*me, *peer, "reading the peer's identity", e))?;
        let them = decode_ident(&b).ok_or_else(|| {
            CollectiveError::protocol(format!("rank {peer} did not answer the shared-memory handshake"))
                .with_rank(*me)
                .with_peer(*peer)
        })?;
        if want && them.want && them.key == key_sent && !here.get(*peer).copied().unwrap_or(false) {
            pids[i] = Some(them.pid);
            reads[i] = cma::can_read(cma_ok, them.probe != 0, them.pid, them.probe);
        }
    }
    // The lower rank of each pair offers a segment (fd -1: it could not make one).
    let mut made: Vec<Option<(Arc<Mapping>, OwnedFd)>> = (0..conns.len()).map(|_| None).collect();
    for (i, (me, peer, s)) in conns.iter_mut().enumerate() {
        if pids[i].is_none() || me > peer {
            continue;
        }
        let m = Mapping::create(RING_BYTES).ok();
        let fd = m.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd());
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&fd.to_le_bytes());
        b[4] = u8::from(reads[i]);
        b[8..16].copy_from_slice(&(RING_BYTES as u64).to_le_bytes());
        s.write_all(&b).map_err(|e| io_err(*me, *peer, "offer", e))?;
        made[i] = m;
    }
    // The higher rank maps it and says whether it could.
    for (i, (me, peer, s)) in conns.iter_mut().enumerate() {
        let Some(pid) = pids[i] else { continue };
        if me < peer {
            continue;
        }
        let mut b = [0u8; 16];
        s.set_read_timeout(Some(left())).map_err(|e| io_err(*me, *peer, "configuring", e))?;
        s.read_exact(&mut b).map_err(|e| io_err(*me, *peer, "reading the offer", e))?;
        let fd = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let m = if fd >= 0 { Mapping::open(pid, fd).ok() } else { None };
        let mut a = [0u8; 8];
        (a[0], a[1]) = (u8::from(m.is_some()), u8::from(reads[i]));
        s.write_all(&a).map_err(|e| io_err(*me, *peer, "answer", e))?;
        if let Some(map) = m {
            out[*me][*peer] = Some(Pair { map, out_dir: 1, peer_pid: pid, read_peer: reads[i], lend: b[4] == 1 });
        }
    }
    for (i, (me, peer, s)) in conns.iter_mut().enumerate() {
        let Some((map, _fd)) = made[i].take() else { continue };
        let mut b = [0u8; 8];
        s.set_read_timeout(Some(left())).map_err(|e| io_err(*me, *peer, "configuring", e))?;
        s.read_exact(&mut b).map_err(|e| io_err(*me, *peer, "reading the answer", e))?;
        if b[0] == 1 {
            let pid = pids[i].unwrap_or_default();
            out[*me][*peer] = Some(Pair { map, out_dir: 0, peer_pid: pid, read_peer: reads[i], lend: b[1] == 1 });
        }
        // `_fd` closes here: from now on only the two mappings keep the segment.
    }
    for (me, peer, s) in conns.iter_mut() {
        s.set_read_timeout(None).map_err(|e| io_err(*me, *peer, "configuring", e))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn identity_round_trips_and_rejects_strangers() {
        let id = Ident { want: true, pid: 42, key: b"host|boot|pid:[1]".to_vec(), probe: 0x1234 };
        let b = encode_ident(&id);
        assert_eq!(decode_ident(&b), Some(id));
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(decode_ident(&bad), None);
        let mut long = b;
        long[16..18].copy_from_slice(&1000u16.to_le_bytes());
        assert_eq!(decode_ident(&long), None);
        assert!(host_key().contains('|'));
    }

    /// A peer whose process went away during the handshake is `PeerLost` naming it, and one
    /// that stays silent a `Timeout` naming it (they were `Io`, blaming the network: the peer
    /// had given up because of a third rank).
    #[test]
    fn a_peer_gone_or_silent_in_the_handshake_is_named_as_such() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        for gone in [true, false] {
            let mine = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (theirs, _) = l.accept().unwrap();
            // Silent: held open, saying nothing, until the end of the case.
            let _held = (!gone).then_some(theirs);
            let mut rows = vec![Some(vec![None, Some(mine)]), None];
            let e = negotiate(&mut rows, Instant::now() + Duration::from_millis(200)).unwrap_err();
            let want = if gone { ErrorKind::PeerLost } else { ErrorKind::Timeout };
            assert_eq!(e.kind(), want, "{e}");
            assert_eq!((e.context().rank, e.context().peer), (Some(0), Some(1)), "{e}");
            assert!(e.to_string().contains("rank 1"), "{e}");
        }
    }
}
