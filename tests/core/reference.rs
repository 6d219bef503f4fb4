//! Test data and the host reference every result is compared against, bit for bit.
//!
//! Inputs are small integers, so every float sum and product the library can form (in any
//! order, f16/bf16 rounding once per combine) is exact, and the reference can be computed
//! exactly in `i128` and converted once:
//! - reduce inputs lie in 0..=8 (unsigned) or -4..=4 (signed and floats): a sum over 8 ranks,
//!   even pre-multiplied by 2, stays within ±128, exact in bf16 (8 significant bits);
//! - `Prod` inputs are ±1 or ±2 (1 or 2 unsigned): products reach at most 2^8 = 256, exact
//!   in bf16; integer products past the type's range wrap, which is the defined semantics;
//! - data for movement ops lies in 0..=100 (or -50..=50), and [`SENTINEL`] = 120 lies outside.

use half::{bf16, f16};
use ruccl::{Element, ReduceOp};

/// A value no generated input takes: marks memory a collective must not write.
pub const SENTINEL: i128 = 120;

/// What the reference needs of an element type beyond [`Element`].
pub trait Elem: Element {
    /// Signed integers and floats (inputs may be negative).
    const SIGNED: bool;
    /// Floating point.
    const FLOAT: bool;
    /// `v` in this type: exact for the small values used, wrapping for integers.
    fn of(v: i128) -> Self;
    /// `Avg`'s finish: integer division truncating toward zero for integers, division by
    /// the rank count in the element type for floats (f16/bf16 through f32, rounded once).
    fn avg(sum: Self, n: usize) -> Self;
    /// The bit pattern, for exact comparison.
    fn bits(self) -> u64;
}

macro_rules! int_elem {
    ($($t:ty: $signed:expr),*) => {$(
        impl Elem for $t {
            const SIGNED: bool = $signed;
            const FLOAT: bool = false;
            fn of(v: i128) -> Self {
                v as $t
            }
            fn avg(sum: Self, n: usize) -> Self {
                (sum as i128 / n as i128) as $t
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
int_elem!(i8: true, u8: false, i32: true, u32: false, i64: true, u64: false);

impl Elem for f32 {
    const SIGNED: bool = true;
    const FLOAT: bool = true;
    fn of(v: i128) -> Self {
        v as f32
    }
    fn avg(sum: Self, n: usize) -> Self {
        sum / n as f32
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Elem for f64 {
    const SIGNED: bool = true;
    const FLOAT: bool = true;
    fn of(v: i128) -> Self {
        v as f64
    }
    fn avg(sum: Self, n: usize) -> Self {
        sum / n as f64
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

macro_rules! half_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIGNED: bool = true;
            const FLOAT: bool = true;
            fn of(v: i128) -> Self {
                <$t>::from_f64(v as f64)
            }
            fn avg(sum: Self, n: usize) -> Self {
                <$t>::from_f32(sum.to_f32() / n as f32)
            }
            fn bits(self) -> u64 {
                u64::from(self.to_bits())
            }
        }
    )*};
}
half_elem!(f16, bf16);

/// Rank `rank`'s element `i` of a reduction input for `op` (see the module docs). `salt`
/// varies the pattern between calls.
pub fn reduce_value(op: ReduceOp, signed: bool, rank: usize, i: usize, salt: usize) -> i128 {
    if op == ReduceOp::Prod {
        let m = 1 + ((rank * 3 + i + salt) % 2) as i128;
        if signed && (rank + 2 * i + salt).is_multiple_of(3) { -m } else { m }
    } else {
        let v = ((rank * 5 + i * 3 + salt) % 9) as i128;
        if signed { v - 4 } else { v }
    }
}

/// Rank `rank`'s input of `n` elements for a reduction with `op`.
pub fn reduce_input<T: Elem>(op: ReduceOp, rank: usize, n: usize, salt: usize) -> Vec<T> {
    (0..n).map(|i| T::of(reduce_value(op, T::SIGNED, rank, i, salt))).collect()
}

/// The exact result of reducing element `i` over `world` ranks' [`reduce_input`]s.
pub fn reduce_one<T: Elem>(op: ReduceOp, world: usize, i: usize, salt: usize) -> T {
    let vals = (0..world).map(|r| reduce_value(op, T::SIGNED, r, i, salt));
    let sum = || vals.clone().sum::<i128>();
    match op {
        ReduceOp::Sum => T::of(sum()),
        ReduceOp::Prod => T::of(vals.product()),
        ReduceOp::Min => T::of(vals.min().unwrap_or(0)),
        ReduceOp::Max => T::of(vals.max().unwrap_or(0)),
        ReduceOp::Avg => T::avg(T::of(sum()), world),
        ReduceOp::PreMulSum(s) => {
            if T::FLOAT {
                T::from_f64(vals.map(|v| v as f64 * s).sum())
            } else {
                // Integers multiply by the scalar converted to the type (`as`), then wrap.
                T::of(sum() * s as i128)
            }
        }
    }
}

/// The exact reduction of `n` elements over `world` ranks.
pub fn reduced<T: Elem>(op: ReduceOp, world: usize, n: usize, salt: usize) -> Vec<T> {
    (0..n).map(|i| reduce_one::<T>(op, world, i, salt)).collect()
}

/// Rank `rank`'s data of `n` elements for movement ops (distinct per rank and element).
pub fn data<T: Elem>(rank: usize, n: usize, salt: usize) -> Vec<T> {
    (0..n)
        .map(|i| {
            let v = ((rank * 37 + i * 11 + salt * 5) % 101) as i128;
            T::of(if T::SIGNED { v - 50 } else { v })
        })
        .collect()
}

/// `n` copies of [`SENTINEL`].
pub fn sentinel<T: Elem>(n: usize) -> Vec<T> {
    vec![T::of(SENTINEL); n]
}

/// The element counts every sweep covers for `world` ranks: 0, 1, world-1, world+1, 257
/// (without repeats).
pub fn counts(world: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for n in [0, 1, world.saturating_sub(1), world + 1, 257] {
        if !v.contains(&n) {
            v.push(n);
        }
    }
    v
}
