//! Data generation and `#wrong` counting.
//!
//! Every input is a small integer (nccl-tests scales its values to one exponent for the same
//! reason), chosen so that every partial result a reduction can form, in any order, is
//! exactly representable in the element type:
//! - sum / avg / premulsum: `|v| <= m` with `ranks * m * scale <= 2^p` (p = 24 for float,
//!   53 for double, 11 for half, 8 for bfloat16; the type's range for integers);
//! - prod: floats draw from {1, 2} (products are powers of two: exact, or +inf for every
//!   order alike); integers draw odd values, whose wrapping product never reaches 0;
//! - min / max and the collectives that move data unchanged: any exactly representable value.
//!
//! Results are therefore compared bit for bit. Two float ops round once at the end, and get
//! a documented bound instead: `avg` (the exact sum divided by the rank count) and
//! `premulsum` may differ from the correctly rounded value by at most [`FLOAT_ULPS`] unit in
//! the last place. Integer results, including integer `avg` (wrapping sum, then division
//! truncated toward zero, as NCCL), are always exact.

use half::{bf16, f16};
use ruccl::{Element, ReduceOp};

use crate::args::PREMUL_SCALAR;

/// The ULP bound for float `avg` and `premulsum`: the expected value is the exact result
/// rounded once; an implementation that rounds the exact sum divided by `n` in its own
/// precision can land one unit away through double rounding (f64 -> half, f32 -> half).
pub const FLOAT_ULPS: u64 = 1;

/// What the perf tool needs from an element type beyond [`Element`].
pub trait Num: Element {
    /// The largest magnitude below which every integer is exact (floats) or the largest
    /// value (integers).
    const EXACT: f64;
    const SIGNED: bool;
    const FLOAT: bool;
    /// The value of an integer: exact for floats within `EXACT`, wrapping for integers.
    fn from_int(v: i128) -> Self;
    /// The exact integer value (integers only; floats return their truncation).
    fn to_int(self) -> i128;
    /// The bit pattern, widened.
    fn bits(self) -> u64;
    /// The sign bit's position in [`bits`](Self::bits).
    const SIGN_BIT: u32;
}

macro_rules! int_num {
    ($t:ty, $signed:expr) => {
        impl Num for $t {
            const EXACT: f64 = <$t>::MAX as f64;
            const SIGNED: bool = $signed;
            const FLOAT: bool = false;
            const SIGN_BIT: u32 = <$t>::BITS - 1;
            fn from_int(v: i128) -> Self {
                v as $t
            }
            fn to_int(self) -> i128 {
                self as i128
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    };
}
int_num!(i8, true);
int_num!(u8, false);
int_num!(i32, true);
int_num!(u32, false);
int_num!(i64, true);
int_num!(u64, false);

macro_rules! float_num {
    ($t:ty, $p:expr, $sign:expr, |$s:ident| $bits:expr) => {
        impl Num for $t {
            const EXACT: f64 = (1u64 << $p) as f64;
            const SIGNED: bool = true;
            const FLOAT: bool = true;
            const SIGN_BIT: u32 = $sign;
            fn from_int(v: i128) -> Self {
                <$t as Element>::from_f64(v as f64)
            }
            fn to_int(self) -> i128 {
                self.to_f64() as i128
            }
            fn bits($s) -> u64 {
                $bits
            }
        }
    };
}
float_num!(f32, 24, 31, |self| u64::from(self.to_bits()));
float_num!(f64, 53, 63, |self| self.to_bits());
float_num!(f16, 11, 15, |self| u64::from(self.to_bits()));
float_num!(bf16, 8, 15, |self| u64::from(self.to_bits()));

/// How inputs are drawn for one row.
#[derive(Clone, Copy, Debug)]
pub struct Gen {
    /// Values are `lo + (hash mod span)`, or odd values for integer products.
    lo: i128,
    span: u64,
    odd: bool,
    seed: u64,
}

fn mix(mut z: u64) -> u64 {
    // splitmix64's finaliser: cheap, and no period a misplaced block could hide in.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Gen {
    /// The generator for element type `T`, reduce op `op` (`None`: data is only moved),
    /// `ranks` ranks and a per-run `seed`.
    pub fn new<T: Num>(op: Option<ReduceOp>, ranks: usize, seed: u64) -> Gen {
        let cap = 1u64 << 20;
        let exact = T::EXACT.min(cap as f64) as u64;
        let mk = |lo: i128, span: u64| Gen { lo, span: span.max(1), odd: false, seed };
        match op {
            None | Some(ReduceOp::Min) | Some(ReduceOp::Max) => {
                if T::SIGNED {
                    mk(-((exact / 2) as i128), exact)
                } else {
                    mk(0, exact)
                }
            }
            Some(ReduceOp::Prod) => {
                if T::FLOAT {
                    mk(1, 2)
                } else if T::SIGNED {
                    Gen { lo: -7, span: 8, odd: true, seed }
                } else {
                    Gen { lo: 1, span: 4, odd: true, seed }
                }
            }
            Some(ReduceOp::Sum | ReduceOp::Avg | ReduceOp::PreMulSum(_)) => {
                let scale = match op {
                    Some(ReduceOp::PreMulSum(_)) => PREMUL_SCALAR.abs().max(1.0),
                    _ => 1.0,
                };
                let m = ((exact as f64) / (ranks.max(1) as f64 * scale)).floor().max(1.0) as u64;
                let m = m.min(cap);
                if T::SIGNED { mk(-(m as i128), 2 * m + 1) } else { mk(0, m + 1) }
            }
        }
    }

    /// The integer rank `rank` contributes at element `idx`.
    #[inline]
    pub fn int(&self, rank: usize, idx: usize) -> i128 {
        let h = mix((idx as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (rank as u64).wrapping_mul(0xd6e8_feb8_6659_fd93)
            ^ self.seed.wrapping_mul(0xa076_1d64_78bd_642f));
        let k = (h % self.span) as i128;
        if self.odd { self.lo + 2 * k } else { self.lo + k }
    }

    /// The value rank `rank` contributes at element `idx`.
    #[inline]
    pub fn value<T: Num>(&self, rank: usize, idx: usize) -> T {
        T::from_int(self.int(rank, idx))
    }

    /// The fully reduced value at `idx` over `ranks` ranks.
    pub fn reduced<T: Num>(&self, op: ReduceOp, ranks: usize, idx: usize) -> T {
        let vals = (0..ranks).map(|r| self.int(r, idx));
        if T::FLOAT {
            // Every partial result is an exact integer, so f64 computes it exactly.
            let v: f64 = match op {
                ReduceOp::Sum => vals.map(|v| v as f64).sum(),
                ReduceOp::Prod => vals.map(|v| v as f64).product(),
                ReduceOp::Min => vals.map(|v| v as f64).fold(f64::INFINITY, f64::min),
                ReduceOp::Max => vals.map(|v| v as f64).fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Avg => vals.map(|v| v as f64).sum::<f64>() / ranks as f64,
                ReduceOp::PreMulSum(s) => vals.map(|v| T::from_int(v).to_f64() * s).sum(),
            };
            T::from_f64(v)
        } else {
            // i128 arithmetic wraps modulo 2^128, a multiple of the type's modulus, so the
            // final cast gives the type's wrapping result.
            let v: i128 = match op {
                ReduceOp::Sum => vals.fold(0i128, i128::wrapping_add),
                ReduceOp::Prod => vals.fold(1i128, i128::wrapping_mul),
                ReduceOp::Min => vals.min().unwrap_or(0),
                ReduceOp::Max => vals.max().unwrap_or(0),
                ReduceOp::Avg => {
                    let sum = T::from_int(vals.fold(0i128, i128::wrapping_add)).to_int();
                    sum / ranks.max(1) as i128
                }
                ReduceOp::PreMulSum(s) => {
                    let s = T::from_f64(s).to_int();
                    vals.fold(0i128, |a, v| a.wrapping_add(T::from_int(v.wrapping_mul(s)).to_int()))
                }
            };
            T::from_int(v)
        }
    }
}

/// The ULPs a result may be off by for `op` on `T` (0: bit for bit).
pub fn tolerance<T: Num>(op: Option<ReduceOp>) -> u64 {
    match op {
        Some(ReduceOp::Avg | ReduceOp::PreMulSum(_)) if T::FLOAT => FLOAT_ULPS,
        _ => 0,
    }
}

/// Whether `got` matches `want` within `ulps` units in the last place.
#[inline]
pub fn matches<T: Num>(got: T, want: T, ulps: u64) -> bool {
    let (g, w) = (got.bits(), want.bits());
    if g == w {
        return true;
    }
    if ulps == 0 || !T::FLOAT || got.to_f64().is_nan() || want.to_f64().is_nan() {
        return false;
    }
    // Map sign-magnitude bits onto a line where adjacent floats are adjacent integers.
    let key = |b: u64| -> i128 {
        let mag = i128::from(b & ((1u64 << T::SIGN_BIT) - 1));
        if b >> T::SIGN_BIT & 1 == 1 { -mag } else { mag }
    };
    (key(g) - key(w)).unsigned_abs() <= u128::from(ulps)
}

/// Counts the elements of `got` that differ from `want(i)`.
pub fn count_wrong<T: Num>(got: &[T], ulps: u64, want: impl Fn(usize) -> T) -> u64 {
    got.iter().enumerate().filter(|&(i, &g)| !matches(g, want(i), ulps)).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reductions_are_exact_and_in_range() {
        let g = Gen::new::<bf16>(Some(ReduceOp::Sum), 4, 1);
        for i in 0..1000 {
            let v = g.int(3, i);
            assert!(v.abs() <= 64, "{v}");
        }
        let g = Gen::new::<i8>(Some(ReduceOp::Prod), 3, 7);
        assert!((0..100).all(|i| g.int(0, i) % 2 != 0));
        let g = Gen::new::<u8>(Some(ReduceOp::Avg), 3, 2);
        let want: u8 = g.reduced(ReduceOp::Avg, 3, 5);
        let sum: u32 = (0..3).map(|r| g.int(r, 5) as u32).sum();
        assert_eq!(u32::from(want), (sum % 256) / 3);
    }

    #[test]
    fn ulp_matching() {
        let a = 1.0f32;
        let b = f32::from_bits(a.to_bits() + 1);
        assert!(matches(a, b, 1));
        assert!(!matches(a, b, 0));
        assert!(matches(-0.0f32, 0.0f32, 1));
        assert!(!matches(f32::from_bits(b.to_bits() + 1), a, 1));
        assert!(!matches(3i32, 4i32, 1));
    }
}
