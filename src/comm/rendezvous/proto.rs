//! The rendezvous messages between processes, as frames of the [`wire`] codec. Pure: no
//! I/O, no clock.
//! - `Register` (a rank of another process to the root): header `from` = rank, `index` =
//!   world size; body = the id (128 bytes), the process token (16), the address its process
//!   listens on (19, see [`put_addr`]), its timeout in ms (u64), chunk bytes (u64), algorithm
//!   code (u8) and arity (u32), its peer-silence limit in ms (u64), little-endian;
//! - `Table` (the root's answer once all ranks came): `index` = world size; body = the group's
//!   nonce (16 bytes), then per rank its process token (16) and address (19);
//! - `Abort` (the root's answer when the join fails): the error ([`wire::encode_error`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::config::Algorithm;
use crate::transport::wire::{self, FrameHeader, FrameKind, WireError};
use crate::types::Rank;
use crate::unique_id::{UNIQUE_ID_BYTES, UniqueId};

/// Where a rank's process listens, and which process it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcAddr {
    /// A random token naming the process.
    pub token: [u8; 16],
    pub addr: SocketAddr,
}

/// A rank of another process joining.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Registration {
    pub id: UniqueId,
    pub rank: Rank,
    pub world: usize,
    pub at: ProcAddr,
    pub timeout: Duration,
    pub chunk_bytes: u64,
    pub algorithm: Algorithm,
    /// Its `CommConfig::peer_silence`: every process paces its heartbeats by its own, so all
    /// must agree.
    pub peer_silence: Duration,
}

/// A complete group: its nonce, and every rank's process.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub nonce: u128,
    pub procs: Vec<ProcAddr>,
}

const ADDR_LEN: usize = 19;
const REGISTER_LEN: usize = UNIQUE_ID_BYTES + 16 + ADDR_LEN + 8 + 8 + 5 + 8;
const ENTRY_LEN: usize = 16 + ADDR_LEN;

/// An address as family (4 or 6), port (big-endian) and 16 bytes of IP.
fn put_addr(b: &mut Vec<u8>, a: SocketAddr) {
    let mut ip = [0u8; 16];
    let family = match a.ip() {
        IpAddr::V4(v4) => {
            ip[..4].copy_from_slice(&v4.octets());
            4
        }
        IpAddr::V6(v6) => {
            ip = v6.octets();
            6
        }
    };
    b.push(family);
    b.extend_from_slice(&a.port().to_be_bytes());
    b.extend_from_slice(&ip);
}

fn get_addr(b: &[u8]) -> Result<SocketAddr, WireError> {
    let port = u16::from_be_bytes([b[1], b[2]]);
    let ip: IpAddr = match b[0] {
        4 => Ipv4Addr::new(b[3], b[4], b[5], b[6]).into(),
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[3..19]);
            Ipv6Addr::from(o).into()
        }
        c => return Err(WireError::Code { field: "address family", code: c }),
    };
    Ok(SocketAddr::new(ip, port))
}

fn token_at(b: &[u8]) -> [u8; 16] {
    let mut t = [0u8; 16];
    t.copy_from_slice(&b[..16]);
    t
}

fn frame(kind: FrameKind, comm: [u8; 16], index: u32, body: Vec<u8>) -> Vec<u8> {
    let mut h = FrameHeader::control(kind, comm, 0, body.len() as u64);
    h.index = index;
    let mut f = wire::encode_header(&h).to_vec();
    f.extend_from_slice(&body);
    f
}

/// A `Register` frame (header and body).
pub(crate) fn encode_register(r: &Registration) -> Vec<u8> {
    let mut b = Vec::with_capacity(REGISTER_LEN);
    b.extend_from_slice(&r.id.to_bytes());
    b.extend_from_slice(&r.at.token);
    put_addr(&mut b, r.at.addr);
    b.extend_from_slice(&millis(r.timeout).to_le_bytes());
    b.extend_from_slice(&r.chunk_bytes.to_le_bytes());
    let (code, arity) = wire::algorithm_code(Some(r.algorithm));
    b.push(code);
    b.extend_from_slice(&arity.to_le_bytes());
    b.extend_from_slice(&millis(r.peer_silence).to_le_bytes());
    let mut f = frame(FrameKind::Register, r.id.comm_bytes(), r.world as u32, b);
    f[24..28].copy_from_slice(&(r.rank as u32).to_le_bytes());
    f
}

/// Decodes a `Register` frame's body, given its decoded header.
pub(crate) fn decode_register(h: &FrameHeader, b: &[u8]) -> Result<Registration, WireError> {
    if b.len() != REGISTER_LEN {
        return Err(WireError::Truncated { what: "registration", got: b.len(), want: REGISTER_LEN });
    }
    let id =
        UniqueId::from_bytes(&b[..UNIQUE_ID_BYTES]).map_err(|_| WireError::Malformed("UniqueId in a registration"))?;
    let mut o = UNIQUE_ID_BYTES;
    let token = token_at(&b[o..]);
    o += 16;
    let addr = get_addr(&b[o..o + ADDR_LEN])?;
    o += ADDR_LEN;
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let (timeout, chunk_bytes) = (u64_at(o), u64_at(o + 8));
    o += 16;
    let arity = u32::from_le_bytes(b[o + 1..o + 5].try_into().unwrap_or([0; 4]));
    let algorithm = match wire::algorithm_from(b[o], arity) {
        Some(Some(a)) => a,
        _ => return Err(WireError::Code { field: "algorithm", code: b[o] }),
    };
    let peer_silence = Duration::from_millis(u64_at(o + 5));
    Ok(Registration {
        id,
        rank: h.from as Rank,
        world: h.index as usize,
        at: ProcAddr { token, addr },
        timeout: Duration::from_millis(timeout),
        chunk_bytes,
        algorithm,
        peer_silence,
    })
}

/// A duration in whole milliseconds, as registrations carry it (saturating).
pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// A `Table` frame for communicator `comm`.
pub(crate) fn encode_table(comm: [u8; 16], t: &Table) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + t.procs.len() * ENTRY_LEN);
    b.extend_from_slice(&t.nonce.to_le_bytes());
    for p in &t.procs {
        b.extend_from_slice(&p.token);
        put_addr(&mut b, p.addr);
    }
    frame(FrameKind::Table, comm, t.procs.len() as u32, b)
}

/// Decodes a `Table` frame's body, given its decoded header.
pub(crate) fn decode_table(h: &FrameHeader, b: &[u8]) -> Result<Table, WireError> {
    let world = h.index as usize;
    let want = world.saturating_mul(ENTRY_LEN).saturating_add(16);
    if b.len() != want {
        return Err(WireError::Truncated { what: "rendezvous table", got: b.len(), want });
    }
    let nonce = u128::from_le_bytes(token_at(b));
    let procs = b[16..]
        .chunks_exact(ENTRY_LEN)
        .map(|e| Ok(ProcAddr { token: token_at(e), addr: get_addr(&e[16..])? }))
        .collect::<Result<_, WireError>>()?;
    Ok(Table { nonce, procs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::wire::{HEADER_LEN, Limits, decode_header};

    fn split(f: &[u8]) -> (FrameHeader, &[u8]) {
        let h: [u8; HEADER_LEN] = f[..HEADER_LEN].try_into().unwrap();
        (decode_header(&h, Limits { max_data: 0 }).unwrap(), &f[HEADER_LEN..])
    }

    #[test]
    fn messages_round_trip_and_refuse_garbage() {
        let id = UniqueId::from_parts([3; 16], Some("127.0.0.1:4000".parse().unwrap()));
        let at = ProcAddr { token: [5; 16], addr: "[::1]:9".parse().unwrap() };
        let r = Registration {
            id,
            rank: 2,
            world: 3,
            at,
            timeout: Duration::from_millis(1500),
            chunk_bytes: 1 << 20,
            algorithm: Algorithm::KaryTree(4),
            peer_silence: Duration::from_millis(2500),
        };
        let f = encode_register(&r);
        let (h, b) = split(&f);
        assert_eq!(decode_register(&h, b).unwrap(), r);
        assert!(decode_register(&h, &b[1..]).is_err());
        let mut bad = b.to_vec();
        bad[UNIQUE_ID_BYTES + 16] = 5; // address family
        assert!(decode_register(&h, &bad).is_err());
        let t = Table { nonce: 77, procs: vec![at; 3] };
        let f = encode_table([3; 16], &t);
        let (h, b) = split(&f);
        assert_eq!(decode_table(&h, b).unwrap(), t);
        assert!(decode_table(&h, &b[..b.len() - 1]).is_err());
    }
}
