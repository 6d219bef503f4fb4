//! The agreement step every peer-API operation starts with. Each peer describes its call in a
//! fixed-size [`Record`] (operation, dtype, shape, reduce op, root, whether it sends, whether
//! its own arguments were rejected); the records are all-gathered, and every peer runs the
//! same pure [`agree`] over the same records. So a disagreement — different operations,
//! shapes, dtypes, reduce ops or roots, zero or several broadcast senders, or one peer's bad
//! arguments — is reported on every peer with the same diagnosis, before any tensor data
//! moves, and the registration stays usable.

use std::fmt;

use super::PeerId;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::types::{DType, Rank, ReduceOp};

/// Dimensions carried exactly in a record; longer shapes are compared by hash, and a
/// broadcast sends its full shape in a second step.
pub(crate) const DIMS: usize = 6;
/// 64-bit values in a record.
const VALUES: usize = 10 + DIMS;
/// `u32` words on the wire (every device moves `u32`).
pub(crate) const WORDS: usize = 2 * VALUES;
const MAGIC: u64 = 0x7275_6363_6c5f_6170; // "ruccl_ap"
const NONE: u64 = u64::MAX;

/// The operation a peer called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    AllReduce = 1,
    Reduce = 2,
    Broadcast = 3,
    AllGather = 4,
    ReduceScatter = 5,
    Barrier = 6,
}

impl Call {
    const ALL: [Call; 6] =
        [Call::AllReduce, Call::Reduce, Call::Broadcast, Call::AllGather, Call::ReduceScatter, Call::Barrier];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::AllReduce => "all_reduce",
            Call::Reduce => "reduce",
            Call::Broadcast => "broadcast",
            Call::AllGather => "all_gather",
            Call::ReduceScatter => "reduce_scatter",
            Call::Barrier => "barrier",
        }
    }
}

/// A tensor shape as records carry it: exact up to [`DIMS`] dimensions, hashed beyond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub ndim: u64,
    pub numel: u64,
    pub hash: u64,
    /// The first `min(ndim, DIMS)` dimensions.
    pub head: Vec<u64>,
}

impl Shape {
    pub(crate) fn of(dims: &[usize]) -> Self {
        let hash = crate::hash::fnv1a_words(dims.iter().map(|&d| d as u64));
        Shape {
            ndim: dims.len() as u64,
            numel: dims.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64)),
            hash,
            head: dims.iter().take(DIMS).map(|&d| d as u64).collect(),
        }
    }

    /// The exact dimensions, when the record holds all of them.
    pub(crate) fn dims(&self) -> Option<Vec<usize>> {
        (self.ndim as usize <= DIMS).then(|| self.head.iter().map(|&d| d as usize).collect())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head: Vec<String> = self.head.iter().map(u64::to_string).collect();
        if self.ndim as usize <= DIMS {
            write!(f, "[{}]", head.join(", "))
        } else {
            write!(f, "[{}, … ({} dims, {} elements)]", head.join(", "), self.ndim, self.numel)
        }
    }
}

/// What one peer called, as every peer sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Record {
    pub call: Call,
    /// This peer's own arguments were rejected (it reports why; the others say who).
    pub failed: bool,
    /// Broadcast: this peer passed `Some(tensor)`.
    pub sender: bool,
    pub dtype: Option<DType>,
    pub shape: Option<Shape>,
    pub op: Option<ReduceOp>,
    /// The root's rank (reduce).
    pub root: Option<Rank>,
}

impl Record {
    pub(crate) fn new(call: Call) -> Self {
        Record { call, failed: false, sender: false, dtype: None, shape: None, op: None, root: None }
    }

    pub(crate) fn encode(&self) -> [u32; WORDS] {
        let (op, scalar) = self.op.map_or((NONE, 0), |o| {
            let (c, s) = o.code();
            (u64::from(c), s)
        });
        let shape = self.shape.as_ref();
        let mut v = [0u64; VALUES];
        v[0] = MAGIC;
        v[1] = self.call as u64;
        v[2] = u64::from(self.failed) | u64::from(self.sender) << 1;
        v[3] = self.dtype.map_or(NONE, |d| u64::from(d.code()));
        v[4] = op;
        v[5] = scalar;
        v[6] = self.root.map_or(NONE, |r| r as u64);
        v[7] = shape.map_or(NONE, |s| s.ndim);
        v[8] = shape.map_or(0, |s| s.numel);
        v[9] = shape.map_or(0, |s| s.hash);
        for (slot, d) in v[10..].iter_mut().zip(shape.map(|s| s.head.as_slice()).unwrap_or_default()) {
            *slot = *d;
        }
        let mut out = [0u32; WORDS];
        for (i, x) in v.iter().enumerate() {
            out[2 * i] = *x as u32;
            out[2 * i + 1] = (*x >> 32) as u32;
        }
        out
    }

    pub(crate) fn decode(words: &[u32]) -> Result<Self> {
        let bad = |what: &str| CollectiveError::protocol(format!("a peer sent a malformed agreement record ({what})"));
        if words.len() != WORDS {
            return Err(bad("length"));
        }
        let v: Vec<u64> = words.chunks(2).map(|w| u64::from(w[0]) | u64::from(w[1]) << 32).collect();
        if v[0] != MAGIC {
            return Err(bad("magic"));
        }
        let call = Call::ALL.into_iter().find(|c| *c as u64 == v[1]).ok_or_else(|| bad("operation"))?;
        let dtype = match v[3] {
            NONE => None,
            c => Some(DType::ALL.into_iter().find(|d| u64::from(d.code()) == c).ok_or_else(|| bad("dtype"))?),
        };
        let op = match v[4] {
            NONE => None,
            c => Some(
                [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg]
                    .into_iter()
                    .find(|o| u64::from(o.code().0) == c)
                    .or_else(|| {
                        (u64::from(ReduceOp::PreMulSum(0.0).code().0) == c)
                            .then(|| ReduceOp::PreMulSum(f64::from_bits(v[5])))
                    })
                    .ok_or_else(|| bad("reduce op"))?,
            ),
        };
        let shape = (v[7] != NONE).then(|| Shape {
            ndim: v[7],
            numel: v[8],
            hash: v[9],
            head: v[10..10 + (v[7] as usize).min(DIMS)].to_vec(),
        });
        Ok(Record {
            call,
            failed: v[2] & 1 != 0,
            sender: v[2] & 2 != 0,
            dtype,
            shape,
            op,
            root: (v[6] != NONE).then_some(v[6] as Rank),
        })
    }
}

/// What the peers agreed on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Agreement {
    /// The root (reduce) or the sender (broadcast).
    pub root: Option<Rank>,
    /// The sender's dtype and shape (broadcast).
    pub dtype: Option<DType>,
    pub shape: Option<Shape>,
}

fn peers_list(peers: &[PeerId], ranks: &[Rank]) -> String {
    let ids: Vec<String> = ranks.iter().map(|&r| peers.get(r).map_or(format!("rank {r}"), |p| p.to_string())).collect();
    format!("{} {}", if ids.len() == 1 { "peer" } else { "peers" }, ids.join(", "))
}

/// `"A on peers 0, 1; B on peer 2"`, or `None` when every record shows the same value.
fn disagreement<T: PartialEq>(
    records: &[Record],
    peers: &[PeerId],
    key: impl Fn(&Record) -> T,
    show: impl Fn(&Record) -> String,
) -> Option<String> {
    let mut groups: Vec<(T, Vec<Rank>)> = Vec::new();
    for (r, rec) in records.iter().enumerate() {
        let k = key(rec);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, ranks)) => ranks.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    (groups.len() > 1).then(|| {
        let shown =
            groups.iter().map(|(_, ranks)| format!("{} on {}", show(&records[ranks[0]]), peers_list(peers, ranks)));
        shown.collect::<Vec<_>>().join("; ")
    })
}

/// The check every peer runs over every peer's record (indexed by rank; `peers[rank]` names
/// them). Pure: the same records give the same answer on every peer.
pub(crate) fn agree(records: &[Record], peers: &[PeerId]) -> Result<Agreement> {
    let Some(first) = records.first() else {
        return Err(CollectiveError::protocol("no agreement records"));
    };
    let call = first.call.name();
    let mismatch = |what: String| CollectiveError::new(ErrorKind::Mismatch, what);
    if let Some(d) = disagreement(records, peers, |r| r.call, |r| r.call.name().to_string()) {
        return Err(mismatch(format!("peers called different operations: {d}")));
    }
    let failed: Vec<Rank> = (0..records.len()).filter(|&r| records[r].failed).collect();
    if !failed.is_empty() {
        return Err(CollectiveError::invalid(format!(
            "the arguments of {} were rejected (the error returned there says why), so no peer's {call} ran",
            peers_list(peers, &failed)
        )));
    }
    match first.call {
        Call::Barrier => Ok(Agreement { root: None, dtype: None, shape: None }),
        Call::Broadcast => {
            let senders: Vec<Rank> = (0..records.len()).filter(|&r| records[r].sender).collect();
            match senders.as_slice() {
                [] => Err(CollectiveError::invalid(
                    "no peer passed Some(tensor) to broadcast: exactly one peer must send, the others pass None",
                )),
                [root] => {
                    let rec = &records[*root];
                    Ok(Agreement { root: Some(*root), dtype: rec.dtype, shape: rec.shape.clone() })
                }
                several => Err(mismatch(format!(
                    "{} each passed Some(tensor) to broadcast: exactly one peer may send, the others pass None",
                    peers_list(peers, several)
                ))),
            }
        }
        Call::AllReduce | Call::Reduce | Call::AllGather | Call::ReduceScatter => {
            let none = || "none".to_string();
            let checks = [
                ("dtypes", disagreement(records, peers, |r| r.dtype, |r| r.dtype.map_or_else(none, |d| d.to_string()))),
                (
                    "shapes",
                    disagreement(
                        records,
                        peers,
                        |r| r.shape.clone(),
                        |r| r.shape.as_ref().map_or_else(none, Shape::to_string),
                    ),
                ),
                (
                    "reduce ops",
                    disagreement(
                        records,
                        peers,
                        |r| r.op.map(ReduceOp::code),
                        |r| r.op.map_or_else(none, |o| o.to_string()),
                    ),
                ),
                (
                    "roots",
                    disagreement(
                        records,
                        peers,
                        |r| r.root,
                        |r| {
                            r.root.map_or_else(none, |k| {
                                format!("root peer {}", peers.get(k).map_or(k as u64, |p| p.get()))
                            })
                        },
                    ),
                ),
            ];
            if let Some((what, d)) = checks.into_iter().find_map(|(what, d)| d.map(|d| (what, d))) {
                return Err(mismatch(format!("peers passed different {what} to {call}: {d}")));
            }
            Ok(Agreement { root: first.root, dtype: first.dtype, shape: first.shape.clone() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> Vec<PeerId> {
        (0..n).map(|i| PeerId::new(i * 10)).collect()
    }

    fn tensor(call: Call, dims: &[usize]) -> Record {
        Record { dtype: Some(DType::F32), shape: Some(Shape::of(dims)), ..Record::new(call) }
    }

    #[test]
    fn records_round_trip() {
        let mut r = tensor(Call::Reduce, &[2, 3, 4, 5, 6, 7, 8]);
        r.op = Some(ReduceOp::PreMulSum(0.25));
        r.root = Some(3);
        r.sender = true;
        let back = Record::decode(&r.encode());
        assert_eq!(back.as_ref().ok(), Some(&r));
        assert_eq!(
            r.shape.as_ref().map(|s| s.to_string()).unwrap_or_default(),
            "[2, 3, 4, 5, 6, 7, … (7 dims, 40320 elements)]"
        );
        assert_eq!(Shape::of(&[4, 2]).dims(), Some(vec![4, 2]));
        assert_eq!(Shape::of(&[]).dims(), Some(vec![]));
        let mut bad = r.encode();
        bad[0] ^= 1;
        assert!(Record::decode(&bad).is_err());
    }

    #[test]
    fn shapes_not_just_counts() {
        let recs =
            [tensor(Call::AllReduce, &[4, 2]), tensor(Call::AllReduce, &[2, 4]), tensor(Call::AllReduce, &[4, 2])];
        let e = agree(&recs, &ids(3)).err().map(|e| (e.kind(), e.message().to_string()));
        assert_eq!(
            e,
            Some((
                ErrorKind::Mismatch,
                "peers passed different shapes to all_reduce: [4, 2] on peers 0, 20; [2, 4] on peer 10".into()
            ))
        );
    }

    #[test]
    fn every_disagreement_is_named() {
        let p = ids(2);
        let msg = |recs: &[Record]| agree(recs, &p).err().map(|e| (e.kind(), e.message().to_string()));
        let a = tensor(Call::AllReduce, &[3]);
        let (mut b, mut c) = (a.clone(), a.clone());
        b.dtype = Some(DType::F64);
        assert_eq!(msg(&[a.clone(), b]).map(|m| m.0), Some(ErrorKind::Mismatch));
        c.op = Some(ReduceOp::Max);
        let mut a_sum = a.clone();
        a_sum.op = Some(ReduceOp::Sum);
        assert_eq!(
            msg(&[a_sum, c]).map(|m| m.1),
            Some("peers passed different reduce ops to all_reduce: sum on peer 0; max on peer 10".into())
        );
        let mut r0 = tensor(Call::Reduce, &[3]);
        r0.root = Some(0);
        let mut r1 = r0.clone();
        r1.root = Some(1);
        assert_eq!(
            msg(&[r0.clone(), r1]).map(|m| m.1),
            Some("peers passed different roots to reduce: root peer 0 on peer 0; root peer 10 on peer 10".into())
        );
        assert_eq!(msg(&[r0, tensor(Call::AllGather, &[3])]).map(|m| m.0), Some(ErrorKind::Mismatch));
        let mut bad = a.clone();
        bad.failed = true;
        assert_eq!(msg(&[a.clone(), bad]).map(|m| m.0), Some(ErrorKind::InvalidArgument));
    }

    #[test]
    fn broadcast_needs_exactly_one_sender() {
        let p = ids(3);
        let recv = Record::new(Call::Broadcast);
        let mut send = tensor(Call::Broadcast, &[5, 1]);
        send.sender = true;
        let none = agree(&[recv.clone(), recv.clone(), recv.clone()], &p).err().map(|e| e.kind());
        assert_eq!(none, Some(ErrorKind::InvalidArgument));
        let two = agree(&[send.clone(), recv.clone(), send.clone()], &p).err().map(|e| e.message().to_string());
        assert_eq!(two.as_deref().map(|m| m.starts_with("peers 0, 20 each passed Some(tensor)")), Some(true));
        let one = agree(&[recv.clone(), send.clone(), recv], &p).ok();
        assert_eq!(one, Some(Agreement { root: Some(1), dtype: Some(DType::F32), shape: Some(Shape::of(&[5, 1])) }));
    }
}
