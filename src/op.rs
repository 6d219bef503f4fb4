//! Op descriptors: what one rank asked for, in the form every layer below `comm` reads, and
//! the fingerprint ranks compare to catch mismatched calls.

use std::fmt;

use crate::config::Algorithm;
use crate::types::{DType, Rank, ReduceOp};

/// The kind of a collective or point-to-point operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// `all_reduce`
    AllReduce,
    /// `broadcast`
    Broadcast,
    /// `reduce`
    Reduce,
    /// `all_gather` / `all_gather_into_tensor`
    AllGather,
    /// `reduce_scatter_tensor`
    ReduceScatter,
    /// `all_to_all_single`
    AllToAll,
    /// `gather`
    Gather,
    /// `scatter`
    Scatter,
    /// `send`
    Send,
    /// `recv`
    Recv,
    /// `barrier`
    Barrier,
    /// `split_all` / `split_from` agreement
    Split,
    /// `all_to_all_single_with_splits`: blocks of different lengths per peer
    AllToAllV,
}

impl OpKind {
    /// The field's name for it.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::AllReduce => "all_reduce",
            OpKind::Broadcast => "broadcast",
            OpKind::Reduce => "reduce",
            OpKind::AllGather => "all_gather",
            OpKind::ReduceScatter => "reduce_scatter",
            OpKind::AllToAll => "all_to_all",
            OpKind::Gather => "gather",
            OpKind::Scatter => "scatter",
            OpKind::Send => "send",
            OpKind::Recv => "recv",
            OpKind::Barrier => "barrier",
            OpKind::Split => "split",
            OpKind::AllToAllV => "all_to_all_single_with_splits",
        }
    }

    /// Whether every rank of the communicator takes part.
    pub fn is_collective(self) -> bool {
        !matches!(self, OpKind::Send | OpKind::Recv)
    }

    fn code(self) -> u8 {
        self as u8
    }

    /// Every kind, in code order.
    pub(crate) const ALL: [OpKind; 13] = [
        OpKind::AllReduce,
        OpKind::Broadcast,
        OpKind::Reduce,
        OpKind::AllGather,
        OpKind::ReduceScatter,
        OpKind::AllToAll,
        OpKind::Gather,
        OpKind::Scatter,
        OpKind::Send,
        OpKind::Recv,
        OpKind::Barrier,
        OpKind::Split,
        OpKind::AllToAllV,
    ];
}

/// The call made of several collectives that an op is a step of (the byte-string calls:
/// a length exchange, then the bytes). Ranks agree on it like on the rest of an op, so that
/// a step of `broadcast_bytes` on one rank never pairs with a plain `broadcast` of the same
/// shape on another (which would hand that rank the length word as its data, and `Ok`).
///
/// ```
/// use ruccl::op::{Composite, OpDesc, OpKind};
/// use ruccl::DType;
/// let plain = OpDesc::new(OpKind::Broadcast, DType::U8, 8);
/// let step = OpDesc { part_of: Some(Composite::BroadcastBytes), ..plain };
/// assert!(!plain.fingerprint().compatible(&step.fingerprint()));
/// assert_eq!(step.to_string(), "broadcast(8 x u8, in broadcast_bytes)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Composite {
    /// `all_gather_bytes`
    AllGatherBytes,
    /// `broadcast_bytes`
    BroadcastBytes,
    /// `gather_bytes`
    GatherBytes,
    /// `scatter_bytes`
    ScatterBytes,
    /// The peer API's `broadcast` ([`api::broadcast`](crate::api::broadcast)), whose first
    /// step, a small all_gather, finds the sender.
    PeerBroadcast,
}

impl Composite {
    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Composite::AllGatherBytes => "all_gather_bytes",
            Composite::BroadcastBytes => "broadcast_bytes",
            Composite::GatherBytes => "gather_bytes",
            Composite::ScatterBytes => "scatter_bytes",
            Composite::PeerBroadcast => "the peer API's broadcast",
        }
    }

    /// The code of `c` in fingerprints and on the wire (explicit, so adding a call never
    /// moves one): 0 for none.
    pub(crate) fn code(c: Option<Composite>) -> u8 {
        match c {
            None => 0,
            Some(Composite::AllGatherBytes) => 1,
            Some(Composite::BroadcastBytes) => 2,
            Some(Composite::GatherBytes) => 3,
            Some(Composite::ScatterBytes) => 4,
            Some(Composite::PeerBroadcast) => 5,
        }
    }

    /// The composite call of `code` (`Some(None)` for 0); `None` for a code no call has.
    pub(crate) fn from_code(code: u8) -> Option<Option<Composite>> {
        Some(match code {
            0 => None,
            1 => Some(Composite::AllGatherBytes),
            2 => Some(Composite::BroadcastBytes),
            3 => Some(Composite::GatherBytes),
            4 => Some(Composite::ScatterBytes),
            5 => Some(Composite::PeerBroadcast),
            _ => return None,
        })
    }
}

/// One rank's description of one operation, after validation.
///
/// `count` is in elements and means, per kind: the tensor's count (all_reduce, broadcast,
/// reduce, send, recv), the per-rank input (all_gather, gather), the per-rank output
/// (reduce_scatter, scatter), the per-peer block (all_to_all), this rank's whole input
/// (all_to_all_single_with_splits: not compared between ranks, whose inputs may differ; each
/// block's length is checked by its message), 0 (barrier).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpDesc {
    /// What kind of operation.
    pub kind: OpKind,
    /// Element type.
    pub dtype: DType,
    /// Element count (see above).
    pub count: usize,
    /// The reduction, for reducing kinds.
    pub op: Option<ReduceOp>,
    /// The root, for rooted kinds.
    pub root: Option<Rank>,
    /// The peer, for send and recv.
    pub peer: Option<Rank>,
    /// Whether input and output share memory.
    pub in_place: bool,
    /// The algorithm this op must run, when the caller chose one per op (the peer API's
    /// strategies); `None` runs the communicator's configured algorithm. Ranks must agree.
    pub algorithm: Option<Algorithm>,
    /// A digest of the caller's tensor shape ([`shape_hash`]: most shapes exactly), when the caller has one (the
    /// peer API): ranks that pass the same element count in different shapes disagree.
    pub shape: Option<u64>,
    /// The call made of several collectives this op is a step of, if any; ranks must agree.
    pub part_of: Option<Composite>,
}

/// The digest of a tensor shape that [`OpDesc::shape`] carries, so that `[2, 3]`, `[3, 2]`
/// and `[6]` all differ. Shapes of up to 4 dimensions whose dimensions are small enough
/// (below 2^60, 2^30, 2^20 or 2^15 for 1 to 4 of them) are the digest themselves, so a
/// mismatch names both sides' shapes ([`shape_of_digest`]); others are the crate's FNV-1a
/// over the number of dimensions and then each dimension, top bit set.
///
/// ```
/// use ruccl::op::{shape_hash, shape_of_digest};
/// assert_eq!(shape_hash(&[2, 3]), shape_hash(&[2, 3]));
/// assert_ne!(shape_hash(&[2, 3]), shape_hash(&[3, 2]));
/// assert_ne!(shape_hash(&[6]), shape_hash(&[6, 1]));
/// assert_eq!(shape_of_digest(shape_hash(&[2, 3])), Some(vec![2, 3]));
/// assert_eq!(shape_of_digest(shape_hash(&[1, 2, 3, 4, 5])), None); // hashed
/// ```
pub fn shape_hash(dims: &[usize]) -> u64 {
    let width = |n: usize| 60u32.checked_div(n as u32).unwrap_or(0);
    let exact = dims.len() <= 4 && dims.iter().all(|&d| (d as u64) < 1u64 << width(dims.len()));
    if exact {
        let w = width(dims.len());
        let packed = dims.iter().enumerate().fold(0u64, |acc, (i, &d)| acc | (d as u64) << (i as u32 * w));
        return (dims.len() as u64) << 60 | packed;
    }
    let h = crate::hash::fnv1a_words(std::iter::once(dims.len() as u64).chain(dims.iter().map(|&d| d as u64)));
    h | 1 << 63
}

/// The shape whose [`shape_hash`] `digest` is, when it holds the shape itself (`None` for
/// a hashed one, or bits no shape makes).
pub fn shape_of_digest(digest: u64) -> Option<Vec<usize>> {
    let n = (digest >> 60) as u32;
    if n > 4 {
        return None; // hashed (top bit) or no shape's
    }
    let w = 60u32.checked_div(n).unwrap_or(0);
    let dims: Vec<usize> = (0..n).map(|i| (digest >> (i * w) & ((1u64 << w) - 1)) as usize).collect();
    (shape_hash(&dims) == digest).then_some(dims)
}

impl OpDesc {
    /// A descriptor with no reduce op, root or peer.
    pub fn new(kind: OpKind, dtype: DType, count: usize) -> Self {
        OpDesc {
            kind,
            dtype,
            count,
            op: None,
            root: None,
            peer: None,
            in_place: false,
            algorithm: None,
            shape: None,
            part_of: None,
        }
    }

    /// A send's or receive's lane: (whether it sends, the peer). A rank's calls on one lane
    /// are matched to its peer's in order, so they run in order even where sends and
    /// receives move together (a group, a stage of non-blocking calls).
    pub(crate) fn lane(&self) -> Option<(bool, Rank)> {
        match self.kind {
            OpKind::Send | OpKind::Recv => self.peer.map(|p| (self.kind == OpKind::Send, p)),
            _ => None,
        }
    }

    /// The fingerprint other ranks must agree with.
    pub fn fingerprint(&self) -> Fingerprint {
        let (op, scalar) = self.op.map(ReduceOp::code).unwrap_or((0xff, 0));
        Fingerprint {
            kind: self.kind.code(),
            dtype: self.dtype.code(),
            op,
            scalar,
            root: self.root.map(|r| r as u64).unwrap_or(u64::MAX),
            // Ranks' inputs differ in length; each block's length is checked on arrival.
            count: if self.kind == OpKind::AllToAllV { 0 } else { self.count as u64 },
            algorithm: self.algorithm,
            shape: self.shape,
            part_of: Composite::code(self.part_of),
            desc: *self,
        }
    }

    /// Bytes one rank contributes (for tracing and the flight recorder).
    pub fn bytes(&self) -> usize {
        self.count * self.dtype.size()
    }
}

/// The op's label in every message about it: `all_reduce(sum, 16 x f32)`,
/// `broadcast(4 x u8, root 1)`, `send(4 x i32, to 1)`, `barrier`, `split_all/split_from`;
/// an op that names its algorithm, shape or composite call shows them too: `all_reduce(sum,
/// 6 x f32, algorithm ring, shape [2, 3])`, `broadcast(8 x u8, root 0, in broadcast_bytes)`.
impl fmt::Display for OpDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            OpKind::Barrier => return f.write_str("barrier"),
            // Its words are the ranks' lists, not the caller's tensor: named as the calls.
            OpKind::Split => return f.write_str("split_all/split_from"),
            _ => {}
        }
        write!(f, "{}(", self.kind.name())?;
        if let Some(op) = self.op {
            write!(f, "{op}, ")?;
        }
        write!(f, "{} x {}", self.count, self.dtype)?;
        if let Some(r) = self.root {
            write!(f, ", root {r}")?;
        }
        if let Some(p) = self.peer {
            write!(f, ", {} {p}", if self.kind == OpKind::Send { "to" } else { "from" })?;
        }
        if let Some(a) = self.algorithm {
            write!(f, ", algorithm {a}")?;
        }
        match self.shape.map(|h| (h, shape_of_digest(h))) {
            Some((_, Some(dims))) => write!(f, ", shape {dims:?}")?,
            // A long shape travels as a hash only.
            Some((h, None)) => write!(f, ", shape #{:08x}", h >> 32)?,
            None => {}
        }
        if let Some(c) = self.part_of {
            write!(f, ", in {}", c.name())?;
        }
        f.write_str(")")
    }
}

/// What ranks compare: everything about an op that must agree across ranks.
#[derive(Clone, Copy, Debug)]
pub struct Fingerprint {
    kind: u8,
    dtype: u8,
    op: u8,
    scalar: u64,
    root: u64,
    count: u64,
    algorithm: Option<Algorithm>,
    shape: Option<u64>,
    part_of: u8,
    /// The descriptor it came from (for messages).
    pub desc: OpDesc,
}

impl Fingerprint {
    /// Whether two ranks' calls are compatible: equal for collectives; for point-to-point, a
    /// send matched with a recv of the same count and dtype.
    pub fn compatible(&self, other: &Fingerprint) -> bool {
        let p2p = |a: &Fingerprint, b: &Fingerprint| {
            a.desc.kind == OpKind::Send && b.desc.kind == OpKind::Recv && a.dtype == b.dtype && a.count == b.count
        };
        if self.desc.kind.is_collective() || other.desc.kind.is_collective() {
            (
                self.kind,
                self.dtype,
                self.op,
                self.scalar,
                self.root,
                self.count,
                self.algorithm,
                self.shape,
                self.part_of,
            ) == (
                other.kind,
                other.dtype,
                other.op,
                other.scalar,
                other.root,
                other.count,
                other.algorithm,
                other.shape,
                other.part_of,
            )
        } else {
            p2p(self, other) || p2p(other, self)
        }
    }

    /// What [`compatible`](Self::compatible) compares for collectives, as words: two
    /// collectives' words are equal exactly when they are compatible (what ranks exchanging
    /// an op through shared slots compare).
    pub(crate) fn words(&self) -> [u64; crate::transport::slots::FP_WORDS] {
        let (algo, arity) = crate::transport::wire::algorithm_code(self.algorithm);
        let (algo, arity) = (u64::from(algo), u64::from(arity));
        let shape = self.shape.map_or(0, |_| 1u64);
        // Bits 24..28 the algorithm's code (0..=8), 28..31 the composite call's (0..=4).
        let head = u64::from(self.kind)
            | u64::from(self.dtype) << 8
            | u64::from(self.op) << 16
            | algo << 24
            | u64::from(self.part_of) << 28;
        [head | shape << 31 | arity << 32, self.scalar, self.root, self.count, self.shape.unwrap_or(0)]
    }

    /// The collective whose [`words`](Self::words) these are: what a mismatch names when the
    /// peer's call is known only from the words it published (a peer in another process,
    /// whose flight recorder this process cannot read). `None` for words no collective
    /// produces (a peer's garbage): what is returned encodes to exactly `w`. In-place-ness
    /// is not in the words (it is local), so the result is out of place.
    pub(crate) fn desc_of_words(w: &[u64; crate::transport::slots::FP_WORDS]) -> Option<OpDesc> {
        let byte = |at: u32| (w[0] >> at) as u8;
        let kind = OpKind::ALL.into_iter().find(|k| k.code() == byte(0))?;
        let dtype = DType::ALL.into_iter().find(|d| d.code() == byte(8))?;
        let op = match byte(16) {
            0xff => None,
            c => Some(match ReduceOp::ALL.into_iter().find(|o| o.code().0 == c)? {
                ReduceOp::PreMulSum(_) => ReduceOp::PreMulSum(f64::from_bits(w[1])),
                o => o,
            }),
        };
        let arity = (w[0] >> 32) as u32;
        let algorithm = crate::transport::wire::algorithm_from(byte(24) & 0x0f, arity)?;
        let part_of = Composite::from_code(byte(28) & 0x07)?;
        let mut d = OpDesc::new(kind, dtype, usize::try_from(w[3]).ok()?);
        d.op = op;
        d.root = if w[2] == u64::MAX { None } else { Some(usize::try_from(w[2]).ok()?) };
        d.algorithm = algorithm;
        d.shape = (w[0] >> 31 & 1 == 1).then_some(w[4]);
        d.part_of = part_of;
        (d.kind.is_collective() && d.fingerprint().words() == *w).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_shapes_are_their_own_digest() {
        let edge = (1usize << 15) - 1;
        for dims in [&[][..], &[0], &[1 << 59], &[7, 1 << 29], &[1, 2, 3], &[edge; 4], &[0, 0, 0, 0]] {
            assert_eq!(shape_of_digest(shape_hash(dims)).as_deref(), Some(dims), "{dims:?}");
        }
        for dims in [&[1usize << 60][..], &[edge + 1, 1, 1, 1], &[1, 1, 1, 1, 1], &[1 << 30, 1]] {
            assert!(shape_hash(dims) >> 63 == 1 && shape_of_digest(shape_hash(dims)).is_none(), "{dims:?}");
        }
        // Every exact digest differs from every other shape's: [6] vs [6, 1] vs [1, 6] vs [].
        let all = [shape_hash(&[6]), shape_hash(&[6, 1]), shape_hash(&[1, 6]), shape_hash(&[]), shape_hash(&[0])];
        assert!(all.iter().enumerate().all(|(i, a)| all[..i].iter().all(|b| a != b)), "{all:x?}");
    }

    #[test]
    fn fingerprints() {
        let mut a = OpDesc::new(OpKind::AllReduce, DType::F32, 8);
        a.op = Some(ReduceOp::Sum);
        let mut b = a;
        assert!(a.fingerprint().compatible(&b.fingerprint()));
        b.in_place = true;
        assert!(a.fingerprint().compatible(&b.fingerprint()), "in-place is local");
        b.op = Some(ReduceOp::Max);
        assert!(!a.fingerprint().compatible(&b.fingerprint()));
        let mut s = OpDesc::new(OpKind::Send, DType::I32, 4);
        s.peer = Some(1);
        let mut r = OpDesc::new(OpKind::Recv, DType::I32, 4);
        r.peer = Some(0);
        assert!(s.fingerprint().compatible(&r.fingerprint()));
        r.count = 5;
        assert!(!s.fingerprint().compatible(&r.fingerprint()));
        assert_eq!(a.to_string(), "all_reduce(sum, 8 x f32)");
        assert_eq!(s.to_string(), "send(4 x i32, to 1)");
        assert_eq!(OpDesc::new(OpKind::Barrier, DType::U8, 0).to_string(), "barrier");
        assert_eq!(OpDesc::new(OpKind::Split, DType::U64, 3).to_string(), "split_all/split_from");
    }

    #[test]
    fn algorithm_and_shape_are_part_of_the_fingerprint() {
        let mut a = OpDesc::new(OpKind::AllReduce, DType::F32, 6);
        a.op = Some(ReduceOp::Sum);
        let mut b = a;
        b.algorithm = Some(Algorithm::Ring);
        assert!(!a.fingerprint().compatible(&b.fingerprint()), "chosen vs configured algorithm");
        a.algorithm = Some(Algorithm::KaryTree(2));
        assert!(!a.fingerprint().compatible(&b.fingerprint()));
        a.algorithm = Some(Algorithm::Ring);
        assert!(a.fingerprint().compatible(&b.fingerprint()));
        a.shape = Some(shape_hash(&[2, 3]));
        b.shape = Some(shape_hash(&[3, 2]));
        assert!(!a.fingerprint().compatible(&b.fingerprint()));
        b.shape = a.shape;
        assert!(a.fingerprint().compatible(&b.fingerprint()));
        assert_eq!(a.to_string(), "all_reduce(sum, 6 x f32, algorithm ring, shape [2, 3])");
        a.shape = Some(shape_hash(&[1, 1, 1, 2, 3]));
        assert!(a.to_string().starts_with("all_reduce(sum, 6 x f32, algorithm ring, shape #"), "{a}");
    }

    #[test]
    fn words_are_equal_exactly_when_collectives_are_compatible() {
        let mut descs = Vec::new();
        for kind in [OpKind::AllReduce, OpKind::Broadcast, OpKind::AllGather] {
            for dtype in [DType::F32, DType::I8] {
                for count in [0, 1, 7] {
                    for op in
                        [None, Some(ReduceOp::Sum), Some(ReduceOp::PreMulSum(0.5)), Some(ReduceOp::PreMulSum(2.0))]
                    {
                        for root in [None, Some(0), Some(1)] {
                            for algorithm in [
                                None,
                                Some(Algorithm::Ring),
                                Some(Algorithm::KaryTree(2)),
                                Some(Algorithm::KaryTree(3)),
                            ] {
                                for shape in [None, Some(0), Some(9)] {
                                    for in_place in [false, true] {
                                        let mut d = OpDesc::new(kind, dtype, count);
                                        (d.op, d.root, d.algorithm, d.shape, d.in_place) =
                                            (op, root, algorithm, shape, in_place);
                                        descs.push(d.fingerprint());
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        for a in &descs {
            for b in descs.iter().step_by(7) {
                assert_eq!(a.words() == b.words(), a.compatible(b), "{} vs {}", a.desc, b.desc);
            }
        }
        // The words name the call: they decode to a descriptor compatible with it.
        for a in &descs {
            let d = Fingerprint::desc_of_words(&a.words());
            assert!(d.is_some_and(|d| d.fingerprint().compatible(a)), "{} -> {d:?}", a.desc);
        }
    }

    #[test]
    fn words_name_every_collective_and_garbage_names_none() {
        for kind in OpKind::ALL.into_iter().filter(|k| k.is_collective()) {
            for dtype in DType::ALL {
                for op in [None, Some(ReduceOp::Max), Some(ReduceOp::PreMulSum(-1.5))] {
                    let mut d = OpDesc::new(kind, dtype, 1 << 40);
                    (d.op, d.root, d.algorithm) = (op, Some(3), Some(Algorithm::KaryTree(5)));
                    // An uneven all_to_all's count (this rank's input) is not compared: not in the words.
                    let count = if kind == OpKind::AllToAllV { 0 } else { d.count };
                    assert_eq!(Fingerprint::desc_of_words(&d.fingerprint().words()), Some(OpDesc { count, ..d }));
                }
            }
        }
        assert!(OpKind::ALL.iter().enumerate().all(|(i, k)| usize::from(k.code()) == i));
        let mut s = OpDesc::new(OpKind::Send, DType::F32, 4);
        s.peer = Some(1);
        assert_eq!(Fingerprint::desc_of_words(&s.fingerprint().words()), None, "not a collective");
        // Garbage, and single bits flipped in real words: never a panic; what decodes
        // encodes back to the same words.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let real = OpDesc { op: Some(ReduceOp::Sum), ..OpDesc::new(OpKind::AllReduce, DType::F32, 8) };
        for i in 0..20_000 {
            let mut w: [u64; 5] = std::array::from_fn(|_| next());
            if i % 2 == 0 {
                w = real.fingerprint().words();
                let bit = next() % 320;
                w[(bit / 64) as usize] ^= 1 << (bit % 64);
            }
            if let Some(d) = Fingerprint::desc_of_words(&w) {
                assert_eq!(d.fingerprint().words(), w);
            }
        }
    }
}
