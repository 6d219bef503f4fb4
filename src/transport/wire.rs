//! The wire codec every socket transport shares: a fixed 96-byte frame header and the bodies
//! of control frames. Pure — no I/O, no clock — so every byte pattern is testable.
//!
//! Layout (little-endian), version [`VERSION`]:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `RCCL` |
//! | 4..6 | protocol version |
//! | 6 | frame kind ([`FrameKind`] code) |
//! | 7 | flags: bit 0 = point-to-point sequence number; other bits zero |
//! | 8..24 | communicator id (the `UniqueId`'s random bytes) |
//! | 24..28 | source rank |
//! | 28..32 | message index (data); world size (hello, register, table); messages taken (credit) |
//! | 32..40 | sequence number (data); bytes granted (credit); the rank called (hello); the query's number (flight-recorder query and its answer) |
//! | 40..48 | body length in bytes |
//! | 48..96 | op fingerprint (data frames; zero otherwise), see [`put_fingerprint`] |
//!
//! Every enum travels as an explicit code from a table in this file (never `as u8` of a Rust
//! enum), so adding a variant never moves an existing code. A body length is checked against
//! what the receiver allows ([`Limits`]) before anything is allocated for it.

use crate::config::Algorithm;
use crate::error::{CollectiveError, ErrorKind};
use crate::op::{Fingerprint, OpDesc, OpKind};
use crate::types::{DType, ReduceOp};

/// The first four bytes of every frame.
pub(crate) const MAGIC: [u8; 4] = *b"RCCL";
/// The protocol version this build speaks (and the only one it accepts). It covers what
/// processes of one host share besides frames: the exchange slots' layout
/// (`transport::slots`; 3: their header lost its length word; 4: fingerprints carry the
/// composite call an op is a step of; 5: the peer API's broadcast is one).
pub(crate) const VERSION: u16 = 5;
/// The length of a frame header.
pub(crate) const HEADER_LEN: usize = 96;
/// The longest body of a control frame (an abort's message, a flight recorder's answer).
pub(crate) const MAX_CONTROL: u64 = 64 * 1024;
/// The longest rendezvous table (every rank's process and address).
pub(crate) const MAX_TABLE: u64 = 16 << 20;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// A message of an op: header fields plus `len` payload bytes.
    Data,
    /// The sender's communicator failed; the body is the error ([`encode_error`]).
    Abort,
    /// The sender dropped its communicator; nothing follows.
    Goodbye,
    /// The first frame on a connection: who is calling, for which communicator.
    Hello,
    /// Nothing to say, but alive.
    Heartbeat,
    /// Asks for the receiver's flight recorder.
    FlightQuery,
    /// A flight recorder, as text.
    FlightAnswer,
    /// The receiver took `index` messages and freed `seq` bytes of receive buffers: the
    /// sender may send that much more.
    Credit,
    /// A rank of another process joins a communicator at its root's rendezvous listener
    /// (`index`: the world size; body: see `comm::rendezvous::proto`).
    Register,
    /// The root's answer once every rank registered: where each rank listens.
    Table,
}

/// The kind codes. Never renumber; append.
const KINDS: [(FrameKind, u8); 10] = [
    (FrameKind::Data, 1),
    (FrameKind::Abort, 2),
    (FrameKind::Goodbye, 3),
    (FrameKind::Hello, 4),
    (FrameKind::Heartbeat, 5),
    (FrameKind::FlightQuery, 6),
    (FrameKind::FlightAnswer, 7),
    (FrameKind::Credit, 8),
    (FrameKind::Register, 9),
    (FrameKind::Table, 10),
];

fn code_of<T: PartialEq + Copy>(table: &[(T, u8)], v: T) -> u8 {
    table.iter().find(|(t, _)| *t == v).map_or(0, |(_, c)| *c)
}

fn from_code<T: Copy>(table: &[(T, u8)], c: u8) -> Option<T> {
    table.iter().find(|(_, k)| *k == c).map(|(t, _)| *t)
}

/// Op kind codes. Never renumber; append.
const OP_KINDS: [(OpKind, u8); 13] = [
    (OpKind::AllReduce, 1),
    (OpKind::Broadcast, 2),
    (OpKind::Reduce, 3),
    (OpKind::AllGather, 4),
    (OpKind::ReduceScatter, 5),
    (OpKind::AllToAll, 6),
    (OpKind::Gather, 7),
    (OpKind::Scatter, 8),
    (OpKind::Send, 9),
    (OpKind::Recv, 10),
    (OpKind::Barrier, 11),
    (OpKind::Split, 12),
    (OpKind::AllToAllV, 13),
];

/// Element type codes. Never renumber; append.
const DTYPES: [(DType, u8); 10] = [
    (DType::F32, 1),
    (DType::F64, 2),
    (DType::F16, 3),
    (DType::BF16, 4),
    (DType::I8, 5),
    (DType::U8, 6),
    (DType::I32, 7),
    (DType::U32, 8),
    (DType::I64, 9),
    (DType::U64, 10),
];

/// Error kind codes (abort frames). Never renumber; append.
const ERROR_KINDS: [(ErrorKind, u8); 9] = [
    (ErrorKind::InvalidArgument, 1),
    (ErrorKind::Mismatch, 2),
    (ErrorKind::Timeout, 3),
    (ErrorKind::PeerLost, 4),
    (ErrorKind::Aborted, 5),
    (ErrorKind::Unsupported, 6),
    (ErrorKind::Device, 7),
    (ErrorKind::Io, 8),
    (ErrorKind::Protocol, 9),
];

/// Reduce op codes (0: none); `PreMulSum`'s scalar travels beside it.
fn reduce_code(op: Option<ReduceOp>) -> (u8, u64) {
    match op {
        None => (0, 0),
        Some(ReduceOp::Sum) => (1, 0),
        Some(ReduceOp::Prod) => (2, 0),
        Some(ReduceOp::Min) => (3, 0),
        Some(ReduceOp::Max) => (4, 0),
        Some(ReduceOp::Avg) => (5, 0),
        Some(ReduceOp::PreMulSum(s)) => (6, s.to_bits()),
    }
}

fn reduce_from(code: u8, scalar: u64) -> Option<Option<ReduceOp>> {
    Some(match code {
        0 => None,
        1 => Some(ReduceOp::Sum),
        2 => Some(ReduceOp::Prod),
        3 => Some(ReduceOp::Min),
        4 => Some(ReduceOp::Max),
        5 => Some(ReduceOp::Avg),
        6 => Some(ReduceOp::PreMulSum(f64::from_bits(scalar))),
        _ => return None,
    })
}

/// Algorithm codes (0: none chosen per op); `KaryTree`'s arity travels beside it. Codes stay
/// below 16: a fingerprint's words hold them in 4 bits (`Fingerprint::words`).
pub(crate) fn algorithm_code(a: Option<Algorithm>) -> (u8, u32) {
    match a {
        None => (0, 0),
        Some(Algorithm::Auto) => (1, 0),
        Some(Algorithm::Ring) => (2, 0),
        Some(Algorithm::Tree) => (3, 0),
        Some(Algorithm::RecursiveDoubling) => (4, 0),
        Some(Algorithm::Direct) => (5, 0),
        Some(Algorithm::KaryTree(k)) => (6, k),
        Some(Algorithm::Centralized) => (7, 0),
        Some(Algorithm::Exchange) => (8, 0),
    }
}

pub(crate) fn algorithm_from(code: u8, arity: u32) -> Option<Option<Algorithm>> {
    Some(match code {
        0 => None,
        1 => Some(Algorithm::Auto),
        2 => Some(Algorithm::Ring),
        3 => Some(Algorithm::Tree),
        4 => Some(Algorithm::RecursiveDoubling),
        5 => Some(Algorithm::Direct),
        6 => Some(Algorithm::KaryTree(arity)),
        7 => Some(Algorithm::Centralized),
        8 => Some(Algorithm::Exchange),
        _ => return None,
    })
}

/// Bytes a peer sent, as text when they are printable ASCII (`"HTTP"`: another protocol
/// answered), else as hex.
struct Shown<'a>(&'a [u8]);

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            write!(f, "{:?} (text)", String::from_utf8_lossy(self.0))
        } else {
            f.write_str("0x")?;
            self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
        }
    }
}

/// What is wrong with bytes a peer sent. Becomes a `Protocol` error ([`From`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    #[error("bad magic {}: the peer is not a ruCCL rank", Shown(.0))]
    Magic([u8; 4]),
    #[error("the peer speaks ruCCL protocol version {got}, this build speaks version {VERSION}")]
    Version { got: u16 },
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("unknown {field} code {code}")]
    Code { field: &'static str, code: u8 },
    #[error("reserved {what} is {value:#x}, must be zero")]
    Reserved { what: &'static str, value: u64 },
    #[error("a {kind:?} frame announces {len} bytes, more than the {max} this receiver allows")]
    TooLong { kind: FrameKind, len: u64, max: u64 },
    #[error("truncated {what}: {got} bytes, {want} needed")]
    Truncated { what: &'static str, got: usize, want: usize },
    #[error("{0} is not UTF-8")]
    Utf8(&'static str),
    #[error("malformed {0}")]
    Malformed(&'static str),
}

impl From<WireError> for CollectiveError {
    fn from(e: WireError) -> Self {
        CollectiveError::protocol(e.to_string())
    }
}

/// One decoded frame header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameHeader {
    pub kind: FrameKind,
    pub comm: [u8; 16],
    pub from: u32,
    /// Data: the op's sequence number; credit: the bytes granted; hello: the rank called;
    /// flight-recorder query and answer: the query's number; otherwise 0.
    pub seq: u64,
    pub p2p: bool,
    /// Data: the message index; hello: the world size; credit: messages taken; otherwise 0.
    pub index: u32,
    /// Data frames only.
    pub fp: Option<Fingerprint>,
    pub len: u64,
}

impl FrameHeader {
    /// A control frame (no fingerprint) of `kind`.
    pub(crate) fn control(kind: FrameKind, comm: [u8; 16], from: u32, len: u64) -> Self {
        FrameHeader { kind, comm, from, seq: 0, p2p: false, index: 0, fp: None, len }
    }
}

/// How long a body the receiver accepts, per frame, decided before it allocates.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Data frames: what the receiver's credits (or its largest message) allow now.
    pub max_data: u64,
}

/// Encodes `h` into a header.
pub(crate) fn encode_header(h: &FrameHeader) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..4].copy_from_slice(&MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6] = code_of(&KINDS, h.kind);
    b[7] = u8::from(h.p2p);
    b[8..24].copy_from_slice(&h.comm);
    b[24..28].copy_from_slice(&h.from.to_le_bytes());
    b[28..32].copy_from_slice(&h.index.to_le_bytes());
    b[32..40].copy_from_slice(&h.seq.to_le_bytes());
    b[40..48].copy_from_slice(&h.len.to_le_bytes());
    if let Some(fp) = &h.fp {
        put_fingerprint(&mut b[48..96], fp);
    }
    b
}

/// The fingerprint's 48 bytes: 0 op kind, 1 dtype, 2 reduce op, 3 algorithm, 4 flags (bit 0
/// in place, 1 root, 2 peer, 3 shape), 5 the composite call it is a step of (0: none),
/// 6..8 zero, 8..12 arity, 12..16 root, 16..20 peer,
/// 20..24 zero, 24..32 scalar (f64 bits), 32..40 count, 40..48 shape digest.
fn put_fingerprint(b: &mut [u8], fp: &Fingerprint) {
    let d = &fp.desc;
    let (op, scalar) = reduce_code(d.op);
    let (algo, arity) = algorithm_code(d.algorithm);
    b[0] = code_of(&OP_KINDS, d.kind);
    b[1] = code_of(&DTYPES, d.dtype);
    b[2] = op;
    b[3] = algo;
    b[4] = u8::from(d.in_place)
        | u8::from(d.root.is_some()) << 1
        | u8::from(d.peer.is_some()) << 2
        | u8::from(d.shape.is_some()) << 3;
    b[5] = crate::op::Composite::code(d.part_of);
    b[8..12].copy_from_slice(&arity.to_le_bytes());
    b[12..16].copy_from_slice(&(d.root.unwrap_or(0) as u32).to_le_bytes());
    b[16..20].copy_from_slice(&(d.peer.unwrap_or(0) as u32).to_le_bytes());
    b[24..32].copy_from_slice(&scalar.to_le_bytes());
    b[32..40].copy_from_slice(&(d.count as u64).to_le_bytes());
    b[40..48].copy_from_slice(&d.shape.unwrap_or(0).to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn zero(b: &[u8], what: &'static str) -> Result<(), WireError> {
    match b.iter().position(|&x| x != 0) {
        None => Ok(()),
        Some(_) => Err(WireError::Reserved { what, value: b.iter().rev().fold(0u64, |v, &x| v << 8 | u64::from(x)) }),
    }
}

fn get_fingerprint(b: &[u8]) -> Result<Fingerprint, WireError> {
    let kind = from_code(&OP_KINDS, b[0]).ok_or(WireError::Code { field: "op kind", code: b[0] })?;
    let dtype = from_code(&DTYPES, b[1]).ok_or(WireError::Code { field: "dtype", code: b[1] })?;
    let scalar = u64_at(b, 24);
    let op = reduce_from(b[2], scalar).ok_or(WireError::Code { field: "reduce op", code: b[2] })?;
    if !matches!(op, Some(ReduceOp::PreMulSum(_))) {
        zero(&b[24..32], "scalar")?;
    }
    let arity = u32_at(b, 8);
    let algorithm = algorithm_from(b[3], arity).ok_or(WireError::Code { field: "algorithm", code: b[3] })?;
    if !matches!(algorithm, Some(Algorithm::KaryTree(_))) {
        zero(&b[8..12], "arity")?;
    }
    let flags = b[4];
    if flags & !0x0f != 0 {
        return Err(WireError::Reserved { what: "fingerprint flags", value: u64::from(flags & !0x0f) });
    }
    let part_of =
        crate::op::Composite::from_code(b[5]).ok_or(WireError::Code { field: "composite call", code: b[5] })?;
    zero(&b[6..8], "fingerprint padding")?;
    zero(&b[20..24], "fingerprint padding")?;
    let opt = |bit: u8, at: usize| -> Result<Option<u32>, WireError> {
        if flags & bit != 0 {
            Ok(Some(u32_at(b, at)))
        } else {
            zero(&b[at..at + 4], "absent root or peer").map(|()| None)
        }
    };
    let (root, peer) = (opt(2, 12)?, opt(4, 16)?);
    let shape = if flags & 8 != 0 { Some(u64_at(b, 40)) } else { zero(&b[40..48], "absent shape").map(|()| None)? };
    let count = usize::try_from(u64_at(b, 32)).map_err(|_| WireError::Code { field: "count (too large)", code: 0 })?;
    let mut d = OpDesc::new(kind, dtype, count);
    d.op = op;
    d.root = root.map(|r| r as usize);
    d.peer = peer.map(|p| p as usize);
    d.in_place = flags & 1 != 0;
    d.algorithm = algorithm;
    d.shape = shape;
    d.part_of = part_of;
    Ok(d.fingerprint())
}

/// The last data frame's fingerprint a receiver decoded, with its 48 bytes. Consecutive data
/// frames from one peer carry the same op's fingerprint, and decoding it (codes, reserved
/// fields, the descriptor) is most of a header's cost: [`decode_header_memo`] decodes a
/// fingerprint only when its bytes differ from the last one's. A pure memo: what it returns
/// for some bytes is what decoding them returns (only fingerprints that decoded are kept).
#[derive(Debug, Default)]
pub(crate) struct FpMemo(Option<([u64; 6], Fingerprint)>);

impl FpMemo {
    /// The fingerprint in `b` (a header's 48 bytes of it), decoded only when they are not the
    /// last ones.
    fn get(&mut self, b: &[u8]) -> Result<Fingerprint, WireError> {
        let key: [u64; 6] = std::array::from_fn(|i| u64_at(b, 8 * i));
        if let Some((k, fp)) = &self.0
            && *k == key
        {
            return Ok(*fp);
        }
        let fp = get_fingerprint(b)?;
        self.0 = Some((key, fp));
        Ok(fp)
    }
}

/// Decodes a header, checking everything that can be checked without the body, and the
/// body's length against `limits` (data) or [`MAX_CONTROL`] (abort, flight answer); frames
/// that have no body must announce none.
pub(crate) fn decode_header(b: &[u8; HEADER_LEN], limits: Limits) -> Result<FrameHeader, WireError> {
    decode(b, limits, None)
}

/// [`decode_header`] for a receiver that keeps the last fingerprint it decoded ([`FpMemo`]):
/// the same result, bit for bit, and the same errors.
pub(crate) fn decode_header_memo(
    b: &[u8; HEADER_LEN],
    limits: Limits,
    memo: &mut FpMemo,
) -> Result<FrameHeader, WireError> {
    decode(b, limits, Some(memo))
}

#[inline]
fn decode(b: &[u8; HEADER_LEN], limits: Limits, memo: Option<&mut FpMemo>) -> Result<FrameHeader, WireError> {
    let magic = [b[0], b[1], b[2], b[3]];
    if magic != MAGIC {
        return Err(WireError::Magic(magic));
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(WireError::Version { got: version });
    }
    let kind = from_code(&KINDS, b[6]).ok_or(WireError::Kind(b[6]))?;
    if b[7] & !1 != 0 {
        return Err(WireError::Reserved { what: "frame flags", value: u64::from(b[7] & !1) });
    }
    let mut comm = [0u8; 16];
    comm.copy_from_slice(&b[8..24]);
    let (from, index, seq, len) = (u32_at(b, 24), u32_at(b, 28), u64_at(b, 32), u64_at(b, 40));
    let fp = match kind {
        FrameKind::Data => Some(match memo {
            Some(m) => m.get(&b[48..96])?,
            None => get_fingerprint(&b[48..96])?,
        }),
        _ => {
            zero(&b[48..96], "fingerprint of a control frame")?;
            None
        }
    };
    let max = match kind {
        FrameKind::Data => limits.max_data,
        FrameKind::Abort | FrameKind::FlightAnswer | FrameKind::Register => MAX_CONTROL,
        FrameKind::Table => MAX_TABLE,
        _ => 0,
    };
    if len > max {
        return Err(WireError::TooLong { kind, len, max });
    }
    let p2p = b[7] & 1 != 0;
    // Which of sequence number, index and the p2p flag a control frame may use.
    let (seq_ok, index_ok) = match kind {
        FrameKind::Data => (true, true),
        // A hello's sequence number is the rank it calls (meshes of several processes).
        FrameKind::Hello => (true, true),
        FrameKind::Register | FrameKind::Table => (false, true),
        FrameKind::Credit => (true, true),
        // A flight-recorder query's number, which its answer repeats.
        FrameKind::FlightQuery | FrameKind::FlightAnswer => (true, false),
        _ => (false, false),
    };
    if kind != FrameKind::Data && p2p {
        return Err(WireError::Reserved { what: "p2p flag of a control frame", value: 1 });
    }
    if !seq_ok && seq != 0 {
        return Err(WireError::Reserved { what: "sequence number of a control frame", value: seq });
    }
    if !index_ok && index != 0 {
        return Err(WireError::Reserved { what: "index of a control frame", value: u64::from(index) });
    }
    Ok(FrameHeader { kind, comm, from, seq, p2p, index, fp, len })
}

/// The body of an abort frame: the error's kind, context, report and message.
///
/// Layout: kind code, flags (bit 0 rank, 1 peer, 2 seq, 3 op, 4 report), 2 zero bytes, rank
/// u32, peer u32, seq u64, op length u32, report length u32, op (UTF-8), report (UTF-8),
/// message (UTF-8, the rest). Long texts are cut to fit [`MAX_CONTROL`].
pub(crate) fn encode_error(e: &CollectiveError) -> Vec<u8> {
    let c = e.context();
    let cap = |s: &str, max: usize| -> usize {
        // The longest prefix that fits and ends on a character boundary.
        (0..=s.len().min(max)).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
    };
    let op = c.op.as_deref().unwrap_or("");
    let op = &op[..cap(op, 1024)];
    let report = e.report().unwrap_or("");
    let report = &report[..cap(report, 32 * 1024)];
    let budget = MAX_CONTROL as usize - 28 - op.len() - report.len();
    let msg = &e.message()[..cap(e.message(), budget)];
    let mut b = Vec::with_capacity(28 + op.len() + report.len() + msg.len());
    b.push(code_of(&ERROR_KINDS, e.kind()));
    b.push(
        u8::from(c.rank.is_some())
            | u8::from(c.peer.is_some()) << 1
            | u8::from(c.seq.is_some()) << 2
            | u8::from(c.op.is_some()) << 3
            | u8::from(e.report().is_some()) << 4,
    );
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(c.rank.unwrap_or(0) as u32).to_le_bytes());
    b.extend_from_slice(&(c.peer.unwrap_or(0) as u32).to_le_bytes());
    b.extend_from_slice(&c.seq.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&(op.len() as u32).to_le_bytes());
    b.extend_from_slice(&(report.len() as u32).to_le_bytes());
    b.extend_from_slice(op.as_bytes());
    b.extend_from_slice(report.as_bytes());
    b.extend_from_slice(msg.as_bytes());
    b
}

/// Decodes an abort frame's body.
pub(crate) fn decode_error(b: &[u8]) -> Result<CollectiveError, WireError> {
    if b.len() < 28 {
        return Err(WireError::Truncated { what: "abort body", got: b.len(), want: 28 });
    }
    let kind = from_code(&ERROR_KINDS, b[0]).ok_or(WireError::Code { field: "error kind", code: b[0] })?;
    let flags = b[1];
    if flags & !0x1f != 0 {
        return Err(WireError::Reserved { what: "error flags", value: u64::from(flags & !0x1f) });
    }
    zero(&b[2..4], "error padding")?;
    let (op_len, report_len) = (u32_at(b, 20) as usize, u32_at(b, 24) as usize);
    let rest = &b[28..];
    if op_len.saturating_add(report_len) > rest.len() {
        return Err(WireError::Truncated { what: "abort op and report", got: rest.len(), want: op_len + report_len });
    }
    let op = std::str::from_utf8(&rest[..op_len]).map_err(|_| WireError::Utf8("abort op"))?;
    let report =
        std::str::from_utf8(&rest[op_len..op_len + report_len]).map_err(|_| WireError::Utf8("abort report"))?;
    let msg = std::str::from_utf8(&rest[op_len + report_len..]).map_err(|_| WireError::Utf8("abort message"))?;
    let mut e = CollectiveError::new(kind, msg);
    if flags & 16 != 0 {
        e = e.with_report(report);
    }
    if flags & 1 != 0 {
        e = e.with_rank(u32_at(b, 4) as usize);
    }
    if flags & 2 != 0 {
        e = e.with_peer(u32_at(b, 8) as usize);
    }
    if flags & 4 != 0 {
        e = e.with_seq(u64_at(b, 12));
    }
    if flags & 8 != 0 {
        e = e.with_op(op);
    }
    Ok(e)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
