//! The orchestrator's framing: what a node's leader says when it arrives ([`Hello`]) and what
//! the orchestrator answers ([`Welcome`] or [`Refused`]). `encode` and `decode` are pure (no
//! I/O, no clock); [`read_msg`] and [`write_msg`] are the thin socket shell both sides share.
//!
//! A frame is `rcor` (4 bytes), the protocol version (u16), the kind (u8), the body's length
//! (u32, at most [`MAX_BODY`], checked before anything is allocated), then the body. Integers
//! are little-endian; a string is a u16 length and UTF-8 bytes; a list is a u32 count.

use std::io::{Read, Write};

use crate::error::{CollectiveError, ErrorKind, Result};

/// The frame tag.
pub(crate) const MAGIC: [u8; 4] = *b"rcor";
/// The protocol version; a peer speaking another is refused.
pub(crate) const VERSION: u16 = 1;
/// Bytes before the body.
pub(crate) const HEADER: usize = 11;
/// The largest body either side accepts.
pub(crate) const MAX_BODY: usize = 1 << 20;
/// The most peers one node announces (and nodes one job has).
const MAX_ITEMS: usize = 1 << 16;

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const REFUSED: u8 = 3;

/// A node's leader arrives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hello {
    /// How many nodes the node's config asks for.
    pub num_nodes: u32,
    /// Where the node takes data connections (`ip:port`).
    pub data_addr: String,
    /// The node's peers (ids), sorted.
    pub peers: Vec<u64>,
    /// The config's settings that every node must share (see `CollectiveConfig::settings`).
    pub settings: String,
    /// The config's timeout, in milliseconds: the orchestrator gives up on a round after it.
    pub timeout_ms: u64,
}

/// The orchestrator's answer once every node arrived.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Welcome {
    /// This node's id (nodes sorted by data address).
    pub node: u32,
    /// The `UniqueId` (text form) of the leaders' communicator, rooted at node 0.
    pub id: String,
    /// Every node's peers, in node order.
    pub nodes: Vec<Vec<u64>>,
}

/// The orchestrator refuses a node (or gives up on a round).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Refused {
    /// Who is at fault.
    pub kind: ErrorKind,
    /// Why.
    pub message: String,
}

/// One frame's content.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Msg {
    Hello(Hello),
    Welcome(Welcome),
    Refused(Refused),
}

const KINDS: [ErrorKind; 5] =
    [ErrorKind::Timeout, ErrorKind::Mismatch, ErrorKind::InvalidArgument, ErrorKind::Protocol, ErrorKind::Io];

fn kind_code(k: ErrorKind) -> u8 {
    KINDS.iter().position(|&x| x == k).map_or(0, |i| i as u8 + 1)
}

/// The frame of `msg`.
pub(crate) fn encode(msg: &Msg) -> Vec<u8> {
    let mut b = Vec::new();
    let kind = match msg {
        Msg::Hello(h) => {
            b.extend_from_slice(&h.num_nodes.to_le_bytes());
            put_str(&mut b, &h.data_addr);
            put_list(&mut b, &h.peers);
            put_str(&mut b, &h.settings);
            b.extend_from_slice(&h.timeout_ms.to_le_bytes());
            HELLO
        }
        Msg::Welcome(w) => {
            b.extend_from_slice(&w.node.to_le_bytes());
            put_str(&mut b, &w.id);
            b.extend_from_slice(&(w.nodes.len() as u32).to_le_bytes());
            w.nodes.iter().for_each(|n| put_list(&mut b, n));
            WELCOME
        }
        Msg::Refused(r) => {
            b.push(kind_code(r.kind));
            put_str(&mut b, &r.message);
            REFUSED
        }
    };
    let mut out = Vec::with_capacity(HEADER + b.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(&b);
    out
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    // Longer strings are cut at a character boundary (messages only; addresses are short).
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    b.extend_from_slice(&(end as u16).to_le_bytes());
    b.extend_from_slice(&s.as_bytes()[..end]);
}

fn put_list(b: &mut Vec<u8>, l: &[u64]) {
    b.extend_from_slice(&(l.len() as u32).to_le_bytes());
    l.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
}

/// The kind and body length of a frame header.
///
/// # Errors
/// `Protocol` for a wrong tag, another version, an unknown kind or a body over [`MAX_BODY`].
pub(crate) fn decode_header(h: &[u8; HEADER]) -> Result<(u8, usize)> {
    if h[..4] != MAGIC {
        return Err(CollectiveError::protocol(format!("not an orchestrator frame (tag {:02x?})", &h[..4])));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(CollectiveError::protocol(format!(
            "orchestrator protocol version {version}, but this build speaks version {VERSION}"
        )));
    }
    if !(HELLO..=REFUSED).contains(&h[6]) {
        return Err(CollectiveError::protocol(format!("unknown orchestrator frame kind {}", h[6])));
    }
    let len = u32::from_le_bytes([h[7], h[8], h[9], h[10]]) as usize;
    if len > MAX_BODY {
        return Err(CollectiveError::protocol(format!("an orchestrator frame of {len} bytes (at most {MAX_BODY})")));
    }
    Ok((h[6], len))
}

/// The message of a frame's body.
///
/// # Errors
/// `Protocol` for a truncated or malformed body, or bytes left over.
pub(crate) fn decode_body(kind: u8, body: &[u8]) -> Result<Msg> {
    let mut c = Cursor { b: body };
    let msg = match kind {
        HELLO => Msg::Hello(Hello {
            num_nodes: c.u32()?,
            data_addr: c.str()?,
            peers: c.list()?,
            settings: c.str()?,
            timeout_ms: c.u64()?,
        }),
        WELCOME => {
            let node = c.u32()?;
            let id = c.str()?;
            let n = c.count()?;
            let nodes = (0..n).map(|_| c.list()).collect::<Result<_>>()?;
            Msg::Welcome(Welcome { node, id, nodes })
        }
        REFUSED => {
            let code = c.take(1)?[0];
            let kind = KINDS.get(usize::from(code).wrapping_sub(1)).copied().unwrap_or(ErrorKind::Protocol);
            Msg::Refused(Refused { kind, message: c.str()? })
        }
        k => return Err(CollectiveError::protocol(format!("unknown orchestrator frame kind {k}"))),
    };
    if !c.b.is_empty() {
        return Err(CollectiveError::protocol(format!("{} stray bytes after an orchestrator message", c.b.len())));
    }
    Ok(msg)
}

/// Reads one frame.
///
/// # Errors
/// `Protocol` as [`decode_header`] / [`decode_body`]; `Io` (or `Timeout` when the stream's
/// read timeout passes) when the stream fails.
pub(crate) fn read_msg(r: &mut impl Read) -> Result<Msg> {
    let mut h = [0u8; HEADER];
    r.read_exact(&mut h).map_err(io("reading an orchestrator frame"))?;
    let (kind, len) = decode_header(&h)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(io("reading an orchestrator frame's body"))?;
    decode_body(kind, &body)
}

/// Writes one frame.
///
/// # Errors
/// `Io` when the stream fails.
pub(crate) fn write_msg(w: &mut impl Write, msg: &Msg) -> Result<()> {
    w.write_all(&encode(msg)).and_then(|()| w.flush()).map_err(io("writing an orchestrator frame"))
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> CollectiveError {
    move |e| {
        let kind = match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
            std::io::ErrorKind::UnexpectedEof => ErrorKind::Protocol,
            _ => ErrorKind::Io,
        };
        CollectiveError::new(kind, format!("{what}: {e}")).with_source(e)
    }
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(CollectiveError::protocol("a truncated orchestrator message"));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn count(&mut self) -> Result<usize> {
        let n = self.u32()? as usize;
        if n > MAX_ITEMS {
            return Err(CollectiveError::protocol(format!("a list of {n} items in an orchestrator message")));
        }
        Ok(n)
    }

    fn list(&mut self) -> Result<Vec<u64>> {
        let n = self.count()?;
        if self.b.len() / 8 < n {
            return Err(CollectiveError::protocol("a truncated orchestrator message"));
        }
        (0..n).map(|_| self.u64()).collect()
    }

    fn str(&mut self) -> Result<String> {
        let b = self.take(2)?;
        let n = usize::from(u16::from_le_bytes([b[0], b[1]]));
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| CollectiveError::protocol("a string that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn samples() -> Vec<Msg> {
        vec![
            Msg::Hello(Hello {
                num_nodes: 2,
                data_addr: "127.0.0.1:4000".into(),
                peers: vec![0, 1],
                settings: "num_devices=2".into(),
                timeout_ms: 5000,
            }),
            Msg::Welcome(Welcome { node: 1, id: "ruccl:00@1.2.3.4:5".into(), nodes: vec![vec![0, 1], vec![2, 3]] }),
            Msg::Refused(Refused { kind: ErrorKind::Mismatch, message: "é".repeat(3) }),
        ]
    }

    fn decode(f: &[u8]) -> Result<Msg> {
        let h: [u8; HEADER] =
            f.get(..HEADER).and_then(|h| h.try_into().ok()).ok_or_else(|| CollectiveError::protocol("short"))?;
        let (kind, len) = decode_header(&h)?;
        let body = f.get(HEADER..).filter(|b| b.len() == len).ok_or_else(|| CollectiveError::protocol("len"))?;
        decode_body(kind, body)
    }

    #[test]
    fn round_trip() {
        for m in samples() {
            assert_eq!(decode(&encode(&m)).unwrap(), m);
            let mut r = &encode(&m)[..];
            assert_eq!(read_msg(&mut r).unwrap(), m);
        }
    }

    #[test]
    fn bad_headers_are_protocol_errors() {
        let f = encode(&samples()[0]);
        let mut bad = f.clone();
        bad[0] = b'x';
        assert_eq!(decode(&bad).unwrap_err().kind(), ErrorKind::Protocol);
        let mut v2 = f.clone();
        v2[4] = 2;
        assert!(decode(&v2).unwrap_err().to_string().contains("version 2"));
        let mut big = f.clone();
        big[7..11].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&big).unwrap_err().to_string().contains("at most"));
        let mut kind = f;
        kind[6] = 9;
        assert_eq!(decode(&kind).unwrap_err().kind(), ErrorKind::Protocol);
    }

    #[test]
    fn truncated_and_mutated_frames_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for m in samples() {
            let f = encode(&m);
            for cut in 0..f.len() {
                assert!(decode(&f[..cut]).is_err());
                assert!(read_msg(&mut &f[..cut]).is_err());
            }
            for _ in 0..20_000 {
                let mut g = f.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % g.len();
                    g[i] = next() as u8;
                }
                let _ = decode(&g);
            }
        }
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let g: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let _ = decode(&g);
            let _ = read_msg(&mut &g[..]);
        }
    }
}
