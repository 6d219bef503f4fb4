//! Reduction and scaling of 32- and 64-bit elements in their own type.

// A comptime `if` (resolved while the kernel is expanded) cannot merge with the runtime `if`
// inside it; and `!(a < b) && !(b < a)` is the point: it is true for equal values and NaNs.
#![allow(clippy::collapsible_if, clippy::neg_cmp_op_on_partial_ord)]

use cubecl::prelude::*;

use super::{MAX, MIN, PROD, SUM};

/// `a | b` on the bits of a float of `bits` bits (32 or 64).
#[cube]
fn bits_or<T: Numeric>(a: T, b: T, #[comptime] bits: u32) -> T {
    let mut r = a;
    if comptime![bits == 32] {
        r = T::reinterpret(u32::reinterpret(a) | u32::reinterpret(b));
    }
    if comptime![bits == 64] {
        r = T::reinterpret(u64::reinterpret(a) | u64::reinterpret(b));
    }
    r
}

/// `a & b` on the bits of a float of `bits` bits (32 or 64).
#[cube]
fn bits_and<T: Numeric>(a: T, b: T, #[comptime] bits: u32) -> T {
    let mut r = a;
    if comptime![bits == 32] {
        r = T::reinterpret(u32::reinterpret(a) & u32::reinterpret(b));
    }
    if comptime![bits == 64] {
        r = T::reinterpret(u64::reinterpret(a) & u64::reinterpret(b));
    }
    r
}

/// `a ⊕ b`. For floats (`float_bits` 32 or 64) `Min` and `Max` are symmetric like the host's:
/// equal values (+0 and -0) and NaNs merge their bits; integers wrap (WGSL, SPIR-V and PTX
/// integer arithmetic is two's complement).
#[cube]
pub fn combine<T: Numeric>(a: T, b: T, #[comptime] op: u32, #[comptime] float_bits: u32) -> T {
    let mut r = a;
    if comptime![op == SUM] {
        r = a + b;
    }
    if comptime![op == PROD] {
        r = a * b;
    }
    if comptime![op == MIN] {
        if b < a {
            r = b;
        }
        if comptime![float_bits != 0] {
            if !(a < b) && !(b < a) {
                r = bits_or::<T>(a, b, float_bits);
            }
        }
    }
    if comptime![op == MAX] {
        if b > a {
            r = b;
        }
        if comptime![float_bits != 0] {
            if !(a > b) && !(b > a) {
                if a == b {
                    r = bits_and::<T>(a, b, float_bits);
                } else {
                    r = bits_or::<T>(a, b, float_bits);
                }
            }
        }
    }
    r
}

/// `a ⊕ b` lane by lane: vector arithmetic for `Sum` and `Prod`, [`combine`] on each lane for
/// `Min` and `Max` (their float rules need per-lane branches).
#[cube]
fn combine_vector<T: Numeric, N: Size>(
    a: Vector<T, N>,
    b: Vector<T, N>,
    #[comptime] op: u32,
    #[comptime] float_bits: u32,
) -> Vector<T, N> {
    let mut r = a;
    if comptime![op == SUM] {
        r = a + b;
    }
    if comptime![op == PROD] {
        r = a * b;
    }
    if comptime![op == MIN || op == MAX] {
        #[unroll]
        for l in 0..N::value() {
            r[l] = combine::<T>(a[l], b[l], op, float_bits);
        }
    }
    r
}

/// `dst[dst_off + i] = acc[acc_off + i] ⊕ src[src_off + i]` for `i < count`, on vectors of
/// `N` elements (offsets and `count` count vectors). `acc` may be `dst` itself (then `acc_off ==
/// dst_off`).
///
/// Launched unchecked: the launcher checks every range against its buffer, and the loop stays
/// inside them, so CubeCL's per-access bounds checks (a compare and a select on each load and
/// store, the lengths read from a metadata buffer each time) are left out.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn reduce_native<T: Numeric, N: Size>(
    dst: &mut Array<Vector<T, N>>,
    dst_off: u32,
    acc: &Array<Vector<T, N>>,
    acc_off: u32,
    src: &Array<Vector<T, N>>,
    src_off: u32,
    count: u32,
    stride: u32,
    #[comptime] op: u32,
    #[comptime] float_bits: u32,
) {
    let mut i = ABSOLUTE_POS as u32;
    while i < count {
        let a = acc[(acc_off + i) as usize];
        let s = src[(src_off + i) as usize];
        dst[(dst_off + i) as usize] = combine_vector::<T, N>(a, s, op, float_bits);
        i += stride;
    }
}

/// `dst[dst_off + i] = src[src_off + i] / factor` (`divide`) or `* factor`, for `i < count`,
/// on vectors of `N` elements (offsets and `count` count vectors). Unchecked, as [`reduce_native`].
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn scale_native<T: Numeric + CubeElement, N: Size>(
    dst: &mut Array<Vector<T, N>>,
    dst_off: u32,
    src: &Array<Vector<T, N>>,
    src_off: u32,
    factor: T,
    count: u32,
    stride: u32,
    #[comptime] divide: bool,
) {
    let f = Vector::<T, N>::new(factor);
    let mut i = ABSOLUTE_POS as u32;
    while i < count {
        let x = src[(src_off + i) as usize];
        if comptime![divide] {
            dst[(dst_off + i) as usize] = x / f;
        } else {
            dst[(dst_off + i) as usize] = x * f;
        }
        i += stride;
    }
}
