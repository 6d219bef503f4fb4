//! Element types, reduction operators and ranks: the vocabulary every layer shares.

use std::fmt;

use half::{bf16, f16};

/// A rank: the index of a participant in a communicator, `0..world_size`.
pub type Rank = usize;

/// The largest world size a communicator may have (262,144 ranks, beyond the largest jobs
/// run today): a larger one is refused with `InvalidArgument` before anything is allocated
/// for it (a typo in `WORLD_SIZE` aborted the process, allocating per-rank state).
///
/// ```
/// assert!(ruccl::MAX_WORLD >= 100_000);
/// ```
pub const MAX_WORLD: usize = 1 << 18;

/// `InvalidArgument` for a world size above [`MAX_WORLD`] (or zero).
pub(crate) fn check_world(world: usize) -> crate::error::Result<()> {
    if world == 0 {
        return Err(crate::error::CollectiveError::invalid("world_size must be at least 1"));
    }
    if world > MAX_WORLD {
        return Err(crate::error::CollectiveError::invalid(format!(
            "world_size {world} is more than ruCCL's limit of {MAX_WORLD} ranks: check WORLD_SIZE (or the world_size \
             passed)"
        )));
    }
    Ok(())
}

/// How a rank's data reaches a peer (what NCCL's `NCCL_DEBUG=INFO` prints per channel as
/// `via P2P/IPC`, `via SHM` or `via NET/Socket`): see
/// [`Communicator::peer_link`](crate::Communicator::peer_link). Control frames (abort,
/// goodbye, heartbeats) of a group that spans processes go over TCP whatever this says.
///
/// ```
/// use ruccl::{Communicator, HostDevice, PeerLink, UniqueId};
/// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
/// assert_eq!(comm.peer_link(0)?, PeerLink::Itself);
/// assert_eq!(PeerLink::SharedMemory.to_string(), "shared memory");
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerLink {
    /// The rank itself: a local copy.
    Itself,
    /// A rank of this process: it reads the sender's memory in place (device memory too,
    /// where the two devices reach each other).
    InProcess,
    /// A rank of another process on this host: data through a segment both map.
    SharedMemory,
    /// Over a TCP connection (another host, `RUCCL_SHM_DISABLE=1`, or `RUCCL_TRANSPORT=tcp`).
    Tcp,
}

impl fmt::Display for PeerLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeerLink::Itself => "itself",
            PeerLink::InProcess => "in process",
            PeerLink::SharedMemory => "shared memory",
            PeerLink::Tcp => "tcp",
        })
    }
}

/// The element type of a tensor.
///
/// ```
/// use ruccl::DType;
/// assert_eq!(DType::F32.size(), 4);
/// assert_eq!(DType::BF16.to_string(), "bf16");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary64.
    F64,
    /// IEEE 754 binary16 (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    BF16,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
}

impl DType {
    /// Every supported element type, in a fixed order.
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
    ];

    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// The short name used in messages and by `ruccl-perf` (`f32`, `bf16`, `i32`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
        }
    }

    pub(crate) const fn code(self) -> u8 {
        match self {
            DType::F32 => 0,
            DType::F64 => 1,
            DType::F16 => 2,
            DType::BF16 => 3,
            DType::I8 => 4,
            DType::U8 => 5,
            DType::I32 => 6,
            DType::U32 => 7,
            DType::I64 => 8,
            DType::U64 => 9,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that can be the element of a [`Tensor`](crate::Tensor).
///
/// Implemented for `f32`, `f64`, `half::f16`, `half::bf16`, `i8`, `u8`, `i32`, `u32`,
/// `i64` and `u64`; sealed, so the set matches [`DType`].
///
/// ```
/// use ruccl::{DType, Element};
/// assert_eq!(<half::bf16 as Element>::DTYPE, DType::BF16);
/// ```
pub trait Element:
    Copy + Send + Sync + PartialEq + fmt::Debug + Default + bytemuck::Pod + 'static + sealed::Sealed
{
    /// The matching [`DType`].
    const DTYPE: DType;
    /// Converts from `f64` the way `as` does (used to build test data and scale factors).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64` the way `as` does.
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:expr, |$v:ident| $from:expr, |$s:ident| $to:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = $d;
            fn from_f64($v: f64) -> Self {
                $from
            }
            fn to_f64($s) -> f64 {
                $to
            }
        }
    };
}

element!(f32, DType::F32, |v| v as f32, |self| self as f64);
element!(f64, DType::F64, |v| v, |self| self);
element!(f16, DType::F16, |v| f16::from_f64(v), |self| f16::to_f64(self));
element!(bf16, DType::BF16, |v| bf16::from_f64(v), |self| bf16::to_f64(self));
element!(i8, DType::I8, |v| v as i8, |self| self as f64);
element!(u8, DType::U8, |v| v as u8, |self| self as f64);
element!(i32, DType::I32, |v| v as i32, |self| self as f64);
element!(u32, DType::U32, |v| v as u32, |self| self as f64);
element!(i64, DType::I64, |v| v as i64, |self| self as f64);
element!(u64, DType::U64, |v| v as u64, |self| self as f64);

/// How values from different ranks are combined.
///
/// Semantics follow NCCL:
/// - `Sum`, `Prod`, `Min`, `Max` combine element-wise; integer `Sum`/`Prod` wrap on overflow.
/// - `Avg` sums, then divides by the number of ranks. For integer types that is integer
///   division of the (wrapping) sum, truncated toward zero, exactly as NCCL does; for floats
///   the sum is divided by the rank count in the element type. On `f16`, whose sums overflow
///   early (65504 at most), each input is first multiplied by `2^-k`, `2^k` the least power
///   of two at least the rank count (exact), and the result by `2^k` after the division: an
///   average that fits `f16` comes out finite (40000 and 60000 average to 50000, where a
///   plain sum would be `inf`), as NCCL's half-precision `Avg`, which scales by `1/n` first,
///   promises; only inputs below `2^k` times `f16`'s smallest normal lose precision.
/// - `PreMulSum(s)` multiplies every rank's input by `s` (converted to the element type),
///   then sums. On integer types `s` must be a whole number the type holds; any other scalar
///   (as a non-finite one on any type) is refused with `InvalidArgument`.
///
/// `f16` and `bf16` are combined in `f32` and rounded once per combine. Floating-point `Min`
/// and `Max` do not promise how NaN propagates. A float result that is NaN is NaN on every
/// rank, but its sign and payload bits may differ between ranks (which operand's NaN an
/// addition keeps depends on the operand order, which some algorithms swap from rank to
/// rank); every other result has the same bits on every rank.
///
/// ```
/// use ruccl::ReduceOp;
/// assert_eq!(ReduceOp::PreMulSum(0.5).to_string(), "premulsum(0.5)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ReduceOp {
    /// Element-wise sum.
    Sum,
    /// Element-wise product.
    Prod,
    /// Element-wise minimum.
    Min,
    /// Element-wise maximum.
    Max,
    /// Sum divided by the number of ranks (integer division for integer types).
    Avg,
    /// Each input multiplied by the scalar, then summed.
    PreMulSum(f64),
}

impl ReduceOp {
    /// Every operator, with `PreMulSum(2.0)` standing for the scalar family.
    pub const ALL: [ReduceOp; 6] =
        [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg, ReduceOp::PreMulSum(2.0)];

    /// The scalar an op's inputs are multiplied by before they are summed: `PreMulSum`'s, and
    /// `Avg`'s on f16 over `world` ranks ([`avg_prescale`](Self::avg_prescale)).
    /// Every op asks (a call, not an inline check, cost a 16-byte all_reduce ~60 instructions).
    #[inline]
    pub(crate) fn premul(self, dtype: DType, world: usize) -> Option<f64> {
        match self {
            ReduceOp::PreMulSum(s) => Some(s),
            ReduceOp::Avg => Self::avg_prescale(self, dtype, world).map(|k| 0.5f64.powi(k as i32)),
            _ => None,
        }
    }

    /// How `Avg` keeps an f16 sum in range: its inputs are pre-multiplied by `2^-k` (exact),
    /// `2^k` the least power of two at least `world`, so that no partial sum exceeds the
    /// largest input (NCCL pre-multiplies half-precision averages by `1/n` for the same
    /// reason: 40000 and 60000 averaged to `inf`). The finish divides by `world` as usual
    /// and multiplies by `2^k` again (exact), so an average whose sum fits f16 keeps the bits
    /// a sum divided once has; with `world` a power of two the prescale is the whole
    /// division. `Some(k)` for `Avg` on f16 over more than one rank, else `None`.
    pub(crate) fn avg_prescale(self, dtype: DType, world: usize) -> Option<u32> {
        (self == ReduceOp::Avg && dtype == DType::F16 && world > 1).then(|| world.next_power_of_two().trailing_zeros())
    }

    /// The element-wise combine a kernel runs for this operator.
    pub(crate) fn combine(self) -> Combine {
        match self {
            ReduceOp::Sum | ReduceOp::Avg | ReduceOp::PreMulSum(_) => Combine::Sum,
            ReduceOp::Prod => Combine::Prod,
            ReduceOp::Min => Combine::Min,
            ReduceOp::Max => Combine::Max,
        }
    }

    pub(crate) fn code(self) -> (u8, u64) {
        match self {
            ReduceOp::Sum => (0, 0),
            ReduceOp::Prod => (1, 0),
            ReduceOp::Min => (2, 0),
            ReduceOp::Max => (3, 0),
            ReduceOp::Avg => (4, 0),
            ReduceOp::PreMulSum(s) => (5, s.to_bits()),
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReduceOp::Sum => f.write_str("sum"),
            ReduceOp::Prod => f.write_str("prod"),
            ReduceOp::Min => f.write_str("min"),
            ReduceOp::Max => f.write_str("max"),
            ReduceOp::Avg => f.write_str("avg"),
            ReduceOp::PreMulSum(s) => write!(f, "premulsum({s})"),
        }
    }
}

/// The element-wise combine that reduction kernels implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Combine {
    /// `a + b`
    Sum,
    /// `a * b`
    Prod,
    /// `min(a, b)`
    Min,
    /// `max(a, b)`
    Max,
}

/// An element-wise scaling that kernels implement (for `Avg` and `PreMulSum`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Scale {
    /// Divide by a rank count (integer division for integer types).
    DivBy(u64),
    /// Multiply by a scalar converted to the element type.
    MulBy(f64),
}

/// `ranks` (ascending) as text, runs of three or more as ranges: "0-2999, 3005, 3007".
pub(crate) fn ranks_text(ranks: &[Rank]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            out.push(format!("{}-{}", ranks[i], ranks[j]));
        } else {
            out.extend(ranks[i..=j].iter().map(|r| r.to_string()));
        }
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod ranks_text_tests {
    use super::ranks_text;

    #[test]
    fn runs_of_three_or_more_are_ranges() {
        assert_eq!(ranks_text(&[]), "");
        assert_eq!(ranks_text(&[4]), "4");
        assert_eq!(ranks_text(&[0, 1]), "0, 1");
        assert_eq!(ranks_text(&[0, 1, 2, 5, 7, 8, 9, 10]), "0-2, 5, 7-10");
        assert_eq!(ranks_text(&(0..3000).collect::<Vec<_>>()), "0-2999");
    }
}
