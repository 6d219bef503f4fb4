//! The parameter layout every rank must agree on: parameters sorted by id and packed into
//! buckets, its wire form (a rank's description of its parameter set, exchanged only when
//! digests differ), and the first difference between two ranks' wire forms. Pure: no I/O.

use std::fmt;

use super::SyncConfig;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::hash::{FNV_OFFSET, fnv1a};
use crate::tensor::Tensor;
use crate::types::{DType, ReduceOp};

/// The dtype and shape of one parameter's gradient.
///
/// ```
/// use ruccl::grad::ParamSpec;
/// use ruccl::{DType, HostDevice, Tensor};
/// let spec = ParamSpec::new(DType::F32, &[64, 32]);
/// assert_eq!((spec.dtype(), spec.shape()), (DType::F32, &[64, 32][..]));
/// let t = Tensor::zeros(&HostDevice::default(), DType::F32, &[64, 32])?;
/// assert_eq!(ParamSpec::of(&t), spec);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamSpec {
    dtype: DType,
    shape: Vec<usize>,
}

impl ParamSpec {
    /// A gradient of `dtype` and `shape`.
    pub fn new(dtype: DType, shape: &[usize]) -> Self {
        ParamSpec { dtype, shape: shape.to_vec() }
    }

    /// The dtype and shape of `tensor`.
    pub fn of<D: Device>(tensor: &Tensor<D>) -> Self {
        Self::new(tensor.dtype(), tensor.shape())
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
}

impl fmt::Display for ParamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}", self.shape, self.dtype)
    }
}

/// One parameter, in id order.
#[derive(Debug)]
pub(crate) struct Entry<K> {
    pub id: K,
    pub spec: ParamSpec,
    pub bytes: usize,
    /// The bucket it is packed into and its byte offset there; `None` for an empty gradient.
    pub place: Option<(usize, usize)>,
}

/// One bucket: a flat buffer of one dtype holding several parameters back to back.
#[derive(Debug)]
pub(crate) struct BucketPlan {
    pub dtype: DType,
    pub bytes: usize,
    /// Indices into the entries, in id order.
    pub params: Vec<usize>,
}

/// A parameter set, sorted and packed.
#[derive(Debug)]
pub(crate) struct Layout<K> {
    pub entries: Vec<Entry<K>>,
    pub buckets: Vec<BucketPlan>,
}

impl<K: Ord + fmt::Display> Layout<K> {
    /// Sorts `params` by id and packs them into buckets, dtype by dtype in [`DType::ALL`]'s
    /// order: first each gradient of at least `config.in_place_bytes()` in a bucket of its own
    /// (reduced in place), then the others, in id order (from the last id with
    /// [`SyncConfig::with_reverse_order`]), into buckets of at most
    /// `config.bucket_bytes()` (one larger than that alone). So every rank with the same set
    /// builds the same buckets.
    ///
    /// # Errors
    /// `InvalidArgument` for a duplicate id or a shape too large to address.
    pub(crate) fn build(params: impl IntoIterator<Item = (K, ParamSpec)>, config: &SyncConfig) -> Result<Self> {
        let (bucket_bytes, in_place) = (config.bucket_bytes(), config.in_place_bytes());
        let mut entries = Vec::new();
        for (id, spec) in params {
            let bytes =
                spec.shape.iter().try_fold(spec.dtype.size(), |a, &d| a.checked_mul(d)).ok_or_else(|| {
                    CollectiveError::invalid(format!("parameter {id}: {spec} is too large to address"))
                })?;
            entries.push(Entry { id, spec, bytes, place: None });
        }
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(w) = entries.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(CollectiveError::invalid(format!("parameter id {} appears twice", w[0].id)));
        }
        let mut buckets: Vec<BucketPlan> = Vec::new();
        // The order buckets are filled (and launched) in: by id, or from the last id.
        let order: Vec<usize> =
            if config.reverse_order() { (0..entries.len()).rev().collect() } else { (0..entries.len()).collect() };
        for dtype in DType::ALL {
            let of_dtype = |e: &Entry<K>| e.spec.dtype == dtype && e.bytes > 0;
            for &i in &order {
                let e = &mut entries[i];
                if !of_dtype(e) || e.bytes < in_place {
                    continue;
                }
                e.place = Some((buckets.len(), 0));
                buckets.push(BucketPlan { dtype, bytes: e.bytes, params: vec![i] });
            }
            let mut open: Option<BucketPlan> = None;
            for &i in &order {
                let e = &mut entries[i];
                if !of_dtype(e) || e.bytes >= in_place {
                    continue;
                }
                if let Some(b) = open.take_if(|b| b.bytes.saturating_add(e.bytes) > bucket_bytes) {
                    buckets.push(b);
                }
                let b = open.get_or_insert_with(|| BucketPlan { dtype, bytes: 0, params: Vec::new() });
                e.place = Some((buckets.len(), b.bytes));
                b.bytes += e.bytes;
                b.params.push(i);
            }
            buckets.extend(open);
        }
        Ok(Layout { entries, buckets })
    }

    /// The index of `id` among the entries.
    pub(crate) fn index(&self, id: &K) -> Option<usize> {
        self.entries.binary_search_by(|e| e.id.cmp(id)).ok()
    }
}

/// What a rank says about its parameter set when the ranks compare: the settings that shape
/// the buckets and every parameter in id order — or why it rejected its own set.
#[derive(Debug, PartialEq)]
pub(crate) enum Wire {
    Layout { bucket_bytes: u64, in_place_bytes: u64, op: (u8, u64), reverse: bool, params: Vec<WireParam> },
    Rejected(String),
}

/// One parameter as ranks compare it: printed id, dtype code, shape.
pub(crate) type WireParam = (String, u8, Vec<u64>);

const LAYOUT: u8 = 0;
const REJECTED: u8 = 1;

impl Wire {
    pub(crate) fn of<K: fmt::Display>(layout: &Layout<K>, config: &SyncConfig) -> Self {
        let params = layout
            .entries
            .iter()
            .map(|e| (e.id.to_string(), e.spec.dtype.code(), e.spec.shape.iter().map(|&d| d as u64).collect()))
            .collect();
        Wire::Layout {
            bucket_bytes: config.bucket_bytes() as u64,
            in_place_bytes: config.in_place_bytes() as u64,
            op: config.op().code(),
            reverse: config.reverse_order(),
            params,
        }
    }

    /// The bytes ranks exchange (little-endian, length-prefixed).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let word = |out: &mut Vec<u8>, w: u64| out.extend_from_slice(&w.to_le_bytes());
        let text = |out: &mut Vec<u8>, s: &str| {
            word(out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        };
        match self {
            Wire::Rejected(why) => {
                out.push(REJECTED);
                text(&mut out, why);
            }
            Wire::Layout { bucket_bytes, in_place_bytes, op, reverse, params } => {
                out.push(LAYOUT);
                word(&mut out, *bucket_bytes);
                word(&mut out, *in_place_bytes);
                out.push(op.0);
                word(&mut out, op.1);
                out.push(u8::from(*reverse));
                word(&mut out, params.len() as u64);
                for (name, dtype, shape) in params {
                    text(&mut out, name);
                    out.push(*dtype);
                    word(&mut out, shape.len() as u64);
                    shape.iter().for_each(|&d| word(&mut out, d));
                }
            }
        }
        out
    }

    /// Parses another rank's bytes.
    ///
    /// # Errors
    /// `Protocol` for bytes [`encode`](Self::encode) cannot have written.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader(bytes);
        let wire = match r.byte()? {
            REJECTED => Wire::Rejected(r.text()?),
            LAYOUT => {
                let bucket_bytes = r.word()?;
                let in_place_bytes = r.word()?;
                let op = (r.byte()?, r.word()?);
                let reverse = match r.byte()? {
                    0 => false,
                    1 => true,
                    b => return Err(CollectiveError::protocol(format!("a bucket order of {b} (0 or 1)"))),
                };
                let n = r.len()?;
                let mut params = Vec::new();
                for _ in 0..n {
                    let name = r.text()?;
                    let dtype = r.byte()?;
                    let dims = r.len()?;
                    let shape = (0..dims).map(|_| r.word()).collect::<Result<_>>()?;
                    params.push((name, dtype, shape));
                }
                Wire::Layout { bucket_bytes, in_place_bytes, op, reverse, params }
            }
            other => return Err(CollectiveError::protocol(format!("unknown parameter-set record kind {other}"))),
        };
        if !r.0.is_empty() {
            return Err(CollectiveError::protocol("trailing bytes after a parameter-set record"));
        }
        Ok(wire)
    }
}

/// The digest ranks compare first: FNV-1a over the wire form.
pub(crate) fn digest(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.0.len() < n {
            return Err(CollectiveError::protocol("a parameter-set record ends early"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn word(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }

    /// A count, bounded by the bytes left (each counted item takes at least one byte), so a
    /// corrupt count cannot make the reader allocate.
    fn len(&mut self) -> Result<usize> {
        let n = self.word()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.0.len())
            .ok_or_else(|| CollectiveError::protocol(format!("a parameter-set record claims {n} items")))
    }

    fn text(&mut self) -> Result<String> {
        let n = self.len()?;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| CollectiveError::protocol("a parameter id in a parameter-set record is not UTF-8"))
    }
}

fn dtype_name(code: u8) -> String {
    DType::ALL.iter().find(|d| d.code() == code).map_or_else(|| format!("dtype #{code}"), |d| d.name().to_string())
}

fn op_name((code, bits): (u8, u64)) -> String {
    let op = match code {
        0 => ReduceOp::Sum,
        1 => ReduceOp::Prod,
        2 => ReduceOp::Min,
        3 => ReduceOp::Max,
        4 => ReduceOp::Avg,
        5 => ReduceOp::PreMulSum(f64::from_bits(bits)),
        _ => return format!("reduce op #{code}"),
    };
    op.to_string()
}

fn param((name, dtype, shape): &WireParam) -> String {
    format!("`{name}` {shape:?} {}", dtype_name(*dtype))
}

/// The first way rank `b`'s parameter set differs from rank `a`'s, in words; `None` when
/// they are the same.
pub(crate) fn first_difference(a: (usize, &Wire), b: (usize, &Wire)) -> Option<String> {
    let ((ra, wa), (rb, wb)) = (a, b);
    let (pa, pb) = match (wa, wb) {
        (Wire::Rejected(why), _) => return Some(format!("rank {ra} rejected its own parameter set: {why}")),
        (_, Wire::Rejected(why)) => return Some(format!("rank {rb} rejected its own parameter set: {why}")),
        (
            Wire::Layout { bucket_bytes: ba, in_place_bytes: ia, op: oa, reverse: va, params: pa },
            Wire::Layout { bucket_bytes: bb, in_place_bytes: ib, op: ob, reverse: vb, params: pb },
        ) => {
            if va != vb {
                let order = |v: bool| if v { "from the last id (with_reverse_order)" } else { "in id order" };
                return Some(format!("buckets are filled {} on rank {ra} but {} on rank {rb}", order(*va), order(*vb)));
            }
            if ba != bb {
                return Some(format!("the bucket size is {ba} bytes on rank {ra} but {bb} bytes on rank {rb}"));
            }
            if ia != ib {
                return Some(format!(
                    "gradients are reduced in place from {ia} bytes on rank {ra} but from {ib} bytes on rank {rb}"
                ));
            }
            if oa != ob {
                return Some(format!(
                    "the reduce op is {} on rank {ra} but {} on rank {rb}",
                    op_name(*oa),
                    op_name(*ob)
                ));
            }
            (pa, pb)
        }
    };
    let has = |list: &[WireParam], name: &str| list.iter().any(|p| p.0 == name);
    for (i, (x, y)) in pa.iter().zip(pb).enumerate() {
        if x == y {
            continue;
        }
        let which = format!("parameter #{i} in id order");
        return Some(if x.0 == y.0 {
            format!("{which} is {} on rank {ra} but {} on rank {rb}", param(x), param(y))
        } else if !has(pb, &x.0) {
            format!("rank {ra} has parameter {} ({which}), which rank {rb} does not have", param(x))
        } else {
            format!("rank {rb} has parameter {} ({which}), which rank {ra} does not have", param(y))
        });
    }
    let extra = |(r, list): (usize, &[WireParam]), other: usize, n: usize| {
        format!("rank {r} has parameter {} (#{n} in id order), which rank {other} does not have", param(&list[n]))
    };
    match pa.len().cmp(&pb.len()) {
        std::cmp::Ordering::Greater => Some(extra((ra, pa), rb, pb.len())),
        std::cmp::Ordering::Less => Some(extra((rb, pb), ra, pa.len())),
        std::cmp::Ordering::Equal => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dtype: DType, shape: &[usize]) -> ParamSpec {
        ParamSpec::new(dtype, shape)
    }

    fn mixed() -> Vec<(&'static str, ParamSpec)> {
        vec![
            ("c", spec(DType::F32, &[4])),    // 16 bytes
            ("a", spec(DType::F32, &[2, 2])), // 16
            ("b", spec(DType::F16, &[3])),    // 6
            ("d", spec(DType::F32, &[0, 5])), // empty: no bucket
            ("e", spec(DType::F32, &[10])),   // 40: larger than a bucket, alone
            ("f", spec(DType::F32, &[1])),    // 4
        ]
    }

    #[test]
    fn sorted_and_packed_by_dtype_then_id() {
        let params = mixed();
        let l = Layout::build(params, &SyncConfig::default().with_bucket_bytes(32)).unwrap();
        let ids: Vec<_> = l.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
        let places: Vec<_> = l.entries.iter().map(|e| e.place).collect();
        assert_eq!(places, [Some((0, 0)), Some((3, 0)), Some((0, 16)), None, Some((1, 0)), Some((2, 0))]);
        let sizes: Vec<_> = l.buckets.iter().map(|b| (b.dtype, b.bytes, b.params.clone())).collect();
        assert_eq!(
            sizes,
            [
                (DType::F32, 32, vec![0, 2]),
                (DType::F32, 40, vec![4]),
                (DType::F32, 4, vec![5]),
                (DType::F16, 6, vec![1])
            ]
        );
        assert_eq!(l.index(&"e"), Some(4));
        assert_eq!(l.index(&"z"), None);
        // Gradients of 16 bytes or more alone first (reduced in place), then the rest packed.
        let l = Layout::build(mixed(), &SyncConfig::default().with_bucket_bytes(32).with_in_place_bytes(16));
        let sizes: Vec<_> = l.unwrap().buckets.iter().map(|b| (b.dtype, b.bytes, b.params.clone())).collect();
        assert_eq!(
            sizes,
            [
                (DType::F32, 16, vec![0]),
                (DType::F32, 16, vec![2]),
                (DType::F32, 40, vec![4]),
                (DType::F32, 4, vec![5]),
                (DType::F16, 6, vec![1])
            ]
        );
    }

    /// From the last id: the same buckets' rules, filled backwards (what backward hands over
    /// first goes into bucket 0), and entries still sorted for lookups.
    #[test]
    fn reverse_order_fills_from_the_last_id() {
        let c = SyncConfig::default().with_bucket_bytes(32).with_reverse_order(true);
        let l = Layout::build(mixed(), &c).unwrap();
        let ids: Vec<_> = l.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
        let sizes: Vec<_> = l.buckets.iter().map(|b| (b.dtype, b.bytes, b.params.clone())).collect();
        assert_eq!(
            sizes,
            [
                (DType::F32, 4, vec![5]),
                (DType::F32, 40, vec![4]),
                (DType::F32, 32, vec![2, 0]),
                (DType::F16, 6, vec![1])
            ]
        );
        let places: Vec<_> = l.entries.iter().map(|e| e.place).collect();
        assert_eq!(places, [Some((2, 16)), Some((3, 0)), Some((2, 0)), None, Some((1, 0)), Some((0, 0))]);
        // Ranks that disagree on the order are told so.
        let (a, b) = (Wire::of(&l, &c), Wire::of(&l, &c.with_reverse_order(false)));
        assert_eq!(Wire::decode(&a.encode()).unwrap(), a);
        let why = first_difference((0, &a), (1, &b)).unwrap();
        assert!(why.contains("from the last id (with_reverse_order) on rank 0 but in id order on rank 1"), "{why}");
    }

    #[test]
    fn duplicates_and_huge_shapes_are_rejected() {
        let c = SyncConfig::default();
        let dup = Layout::build([(1u64, spec(DType::F32, &[1])), (1, spec(DType::F32, &[2]))], &c).unwrap_err();
        assert!(dup.to_string().contains("parameter id 1 appears twice"), "{dup}");
        let huge = Layout::build([(1u64, spec(DType::F64, &[usize::MAX, 2]))], &c).unwrap_err();
        assert!(huge.to_string().contains("too large"), "{huge}");
    }

    fn wire(params: &[(&str, DType, &[usize])]) -> Wire {
        let c = SyncConfig::default();
        let l = Layout::build(params.iter().map(|&(n, d, s)| (n.to_string(), spec(d, s))), &c).unwrap();
        Wire::of(&l, &c)
    }

    #[test]
    fn wire_round_trips_and_rejects_garbage() {
        let w = wire(&[("w", DType::F32, &[3, 4]), ("b", DType::BF16, &[])]);
        let bytes = w.encode();
        assert_eq!(Wire::decode(&bytes).unwrap(), w);
        let r = Wire::Rejected("bad".into());
        assert_eq!(Wire::decode(&r.encode()).unwrap(), r);
        for cut in 0..bytes.len() {
            assert!(Wire::decode(&bytes[..cut]).is_err(), "a record cut at {cut} parsed");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(Wire::decode(&long).is_err());
        assert!(Wire::decode(&[7]).is_err());
        let mut huge_count = vec![LAYOUT];
        huge_count.extend_from_slice(&[0; 17]);
        huge_count.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(Wire::decode(&huge_count).is_err());
    }

    #[test]
    fn first_difference_names_it() {
        let a = wire(&[("a", DType::F32, &[2]), ("b", DType::F32, &[3])]);
        let same = wire(&[("b", DType::F32, &[3]), ("a", DType::F32, &[2])]);
        assert_eq!(first_difference((0, &a), (1, &same)), None);
        assert_eq!(digest(&a.encode()), digest(&same.encode()));

        let shape = wire(&[("a", DType::F32, &[2]), ("b", DType::F32, &[1, 3])]);
        assert_eq!(
            first_difference((0, &a), (2, &shape)).unwrap(),
            "parameter #1 in id order is `b` [3] f32 on rank 0 but `b` [1, 3] f32 on rank 2"
        );
        let dtype = wire(&[("a", DType::F16, &[2]), ("b", DType::F32, &[3])]);
        assert!(first_difference((0, &a), (1, &dtype)).unwrap().contains("`a` [2] f32 on rank 0 but `a` [2] f16"));
        let missing = wire(&[("b", DType::F32, &[3])]);
        assert_eq!(
            first_difference((0, &a), (1, &missing)).unwrap(),
            "rank 0 has parameter `a` [2] f32 (parameter #0 in id order), which rank 1 does not have"
        );
        let extra = wire(&[("a", DType::F32, &[2]), ("b", DType::F32, &[3]), ("c", DType::F32, &[1])]);
        assert_eq!(
            first_difference((0, &a), (3, &extra)).unwrap(),
            "rank 3 has parameter `c` [1] f32 (#2 in id order), which rank 0 does not have"
        );
        let renamed = wire(&[("a", DType::F32, &[2]), ("ab", DType::F32, &[3])]);
        assert!(first_difference((0, &a), (1, &renamed)).unwrap().starts_with("rank 0 has parameter `b`"));

        let c = SyncConfig::default().with_bucket_bytes(1 << 20);
        let l = Layout::build([("a".to_string(), spec(DType::F32, &[2]))], &c).unwrap();
        let (small, sum) = (Wire::of(&l, &c.with_bucket_bytes(64)), Wire::of(&l, &c.with_op(ReduceOp::Sum)));
        let (big, in_place) = (Wire::of(&l, &c), Wire::of(&l, &c.with_in_place_bytes(8)));
        assert!(first_difference((0, &small), (1, &big)).unwrap().starts_with("the bucket size is 64 bytes on rank 0"));
        assert_eq!(first_difference((0, &big), (1, &sum)).unwrap(), "the reduce op is avg on rank 0 but sum on rank 1");
        assert_eq!(
            first_difference((0, &big), (1, &in_place)).unwrap(),
            "gradients are reduced in place from 1048576 bytes on rank 0 but from 8 bytes on rank 1"
        );
        let rejected = Wire::Rejected("parameter id x appears twice".into());
        assert_eq!(
            first_difference((0, &a), (1, &rejected)).unwrap(),
            "rank 1 rejected its own parameter set: parameter id x appears twice"
        );
    }
}
