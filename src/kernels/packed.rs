//! 8- and 16-bit elements packed into `u32` words (little-endian lanes): `f16` and `bf16`
//! are widened to `f32`, combined there and rounded to nearest even exactly as the `half`
//! crate rounds; `i8` and `u8` are widened to `i32` and wrapped back. Each unit owns whole
//! destination words, so no two units write the same word.
//!
//! A reduction of several sources in 16-bit floats keeps its running value in an `f32`
//! scratch array and rounds once at the end, as the host does (modes below).

// Values are declared, then set in each comptime arm (CubeCL's branches on comptime values
// are not expressions), which rustc sees as dead first assignments.
#![allow(unused_assignments)]

use cubecl::prelude::*;

use super::native::combine;

/// Element kinds (comptime).
pub(crate) const F16: u32 = 0;
pub(crate) const BF16: u32 = 1;
pub(crate) const I8: u32 = 2;
pub(crate) const U8: u32 = 3;

/// Reduction modes (comptime): what the combine reads and where it writes.
/// `dst = acc ⊕ src`, rounded (one source, and every integer step).
pub(crate) const DIRECT: u32 = 0;
/// `scratch = acc ⊕ src` in `f32` (the first of several sources).
pub(crate) const FIRST: u32 = 1;
/// `scratch = scratch ⊕ src` (a middle source).
pub(crate) const MIDDLE: u32 = 2;
/// `dst = scratch ⊕ src`, rounded once (the last source).
pub(crate) const LAST: u32 = 3;

/// Bits of one lane of element `e`.
#[cube]
fn lane(arr: &Array<u32>, e: u32, #[comptime] width: u32) -> u32 {
    let per = comptime![32 / width];
    let mask = comptime![if width == 32 { u32::MAX } else { (1u32 << width) - 1 }];
    (arr[(e / per) as usize] >> ((e % per) * width)) & mask
}

/// `f16` bits to `f32` (exact).
#[cube]
fn f16_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u32) << 16;
    let exp = (h >> 10) & 0x1fu32;
    let man = h & 0x3ffu32;
    let mut bits = sign | ((exp + 112) << 23) | (man << 13);
    if exp == 31 {
        // Infinity, or a NaN made quiet (as the half crate and F16C widen it).
        bits = sign | 0x7f80_0000u32 | (man << 13);
        if man != 0 {
            bits |= 0x0040_0000u32;
        }
    }
    let mut out = f32::reinterpret(bits);
    if exp == 0 {
        // Zero or subnormal: man * 2^-24 is exact in f32.
        let mag = f32::cast_from(man) * 5.960_464_5e-8;
        out = mag;
        if sign != 0 {
            out = -mag;
        }
        if man == 0 {
            out = f32::reinterpret(sign);
        }
    }
    out
}

/// `f32` to `f16` bits, rounding to nearest even (the `half` crate's conversion).
#[cube]
fn f32_to_f16(x: f32) -> u32 {
    let b = u32::reinterpret(x);
    let sign = (b & 0x8000_0000u32) >> 16;
    let exp = b & 0x7f80_0000u32;
    let man = b & 0x007f_ffffu32;
    let mut out = 0u32;
    if exp == 0x7f80_0000u32 {
        let mut nan_bit = 0u32;
        if man != 0 {
            nan_bit = 0x0200u32;
        }
        out = sign | 0x7c00u32 | nan_bit | (man >> 13);
    } else {
        let half_exp = i32::cast_from(exp >> 23) - 127 + 15;
        if half_exp >= 31i32 {
            out = sign | 0x7c00u32;
        } else if half_exp <= 0 {
            if 14 - half_exp > 24 {
                out = sign;
            } else {
                let m = man | 0x0080_0000u32;
                let shift = u32::cast_from(14 - half_exp);
                let mut half_man = m >> shift;
                let round_bit = 1u32 << (shift - 1);
                if (m & round_bit) != 0 && (m & (3 * round_bit - 1)) != 0 {
                    half_man += 1;
                }
                out = sign | half_man;
            }
        } else {
            let he = u32::cast_from(half_exp) << 10;
            let half_man = man >> 13;
            let round_bit = 0x1000u32;
            out = sign | he | half_man;
            if (man & round_bit) != 0 && (man & (3 * round_bit - 1)) != 0 {
                out += 1;
            }
        }
    }
    out
}

/// `f32` to `bf16` bits: round to nearest even; a NaN stays a quiet NaN.
#[cube]
fn f32_to_bf16(x: f32) -> u32 {
    let b = u32::reinterpret(x);
    let mut out = (b + 0x7fffu32 + ((b >> 16) & 1)) >> 16;
    if (b & 0x7f80_0000u32) == 0x7f80_0000u32 && (b & 0x007f_ffffu32) != 0 {
        out = (b >> 16) | 0x40u32;
    }
    out & 0xffffu32
}

/// A 16-bit float lane widened.
#[cube]
fn widen_f(bits: u32, #[comptime] kind: u32) -> f32 {
    let mut r = f32::reinterpret(bits << 16);
    if comptime![kind == F16] {
        r = f16_to_f32(bits);
    }
    r
}

/// An `f32` narrowed to a 16-bit float lane.
#[cube]
fn narrow_f(x: f32, #[comptime] kind: u32) -> u32 {
    let mut r = 0u32;
    if comptime![kind == F16] {
        r = f32_to_f16(x);
    } else {
        r = f32_to_bf16(x);
    }
    r
}

/// An 8-bit integer lane widened (sign-extended for `i8`).
#[cube]
fn widen_i(bits: u32, #[comptime] kind: u32) -> i32 {
    let mut r = i32::reinterpret(bits);
    if comptime![kind == I8] {
        r = i32::reinterpret(bits << 24) >> 24;
    }
    r
}

/// Replaces lane `l` of `word`.
#[cube]
fn put(word: u32, l: u32, v: u32, #[comptime] width: u32) -> u32 {
    let mask = comptime![(1u32 << width) - 1];
    let shift = l * width;
    (word & !(mask << shift)) | ((v & mask) << shift)
}

/// One step of a reduction of packed elements; see the modes above. `n` elements, `words`
/// destination words touched; offsets in elements. `scratch` is indexed from the range start.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn reduce_packed(
    dst: &mut Array<u32>,
    dst_off: u32,
    acc: &Array<u32>,
    acc_off: u32,
    src: &Array<u32>,
    src_off: u32,
    scratch: &mut Array<f32>,
    n: u32,
    words: u32,
    stride: u32,
    #[comptime] kind: u32,
    #[comptime] op: u32,
    #[comptime] mode: u32,
) {
    let width = comptime![if kind == F16 || kind == BF16 { 16u32 } else { 8u32 }];
    let per = comptime![32 / width];
    let first = dst_off / per;
    let end = dst_off + n;
    let mut t = ABSOLUTE_POS as u32;
    while t < words {
        let w = first + t;
        let mut word = dst[w as usize];
        #[unroll]
        for l in 0..per {
            let e = w * per + l;
            if e >= dst_off && e < end {
                let i = e - dst_off;
                let s = lane(src, src_off + i, width);
                if comptime![kind == F16 || kind == BF16] {
                    let mut a = 0.0f32;
                    if comptime![mode == DIRECT || mode == FIRST] {
                        a = widen_f(lane(acc, acc_off + i, width), kind);
                    } else {
                        a = scratch[i as usize];
                    }
                    let r = combine::<f32>(a, widen_f(s, kind), op, 32u32);
                    if comptime![mode == DIRECT || mode == LAST] {
                        word = put(word, l, narrow_f(r, kind), width);
                    } else {
                        scratch[i as usize] = r;
                    }
                } else {
                    let a = widen_i(lane(acc, acc_off + i, width), kind);
                    let r = combine::<i32>(a, widen_i(s, kind), op, 0u32);
                    word = put(word, l, u32::reinterpret(r), width);
                }
            }
        }
        if comptime![mode == DIRECT || mode == LAST] {
            dst[w as usize] = word;
        }
        t += stride;
    }
}

/// `dst = src / factor` (`divide`) or `src * factor` on packed elements: floats in `f32`
/// with `ffactor`, integers in `i32` with `ifactor` (truncating division, wrapping product).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub fn scale_packed(
    dst: &mut Array<u32>,
    dst_off: u32,
    src: &Array<u32>,
    src_off: u32,
    ffactor: f32,
    ifactor: i32,
    n: u32,
    words: u32,
    stride: u32,
    #[comptime] kind: u32,
    #[comptime] divide: bool,
) {
    let width = comptime![if kind == F16 || kind == BF16 { 16u32 } else { 8u32 }];
    let per = comptime![32 / width];
    let first = dst_off / per;
    let end = dst_off + n;
    let mut t = ABSOLUTE_POS as u32;
    while t < words {
        let w = first + t;
        let mut word = dst[w as usize];
        #[unroll]
        for l in 0..per {
            let e = w * per + l;
            if e >= dst_off && e < end {
                let s = lane(src, src_off + e - dst_off, width);
                if comptime![kind == F16 || kind == BF16] {
                    let x = widen_f(s, kind);
                    let mut r = x * ffactor;
                    if comptime![divide] {
                        r = x / ffactor;
                    }
                    word = put(word, l, narrow_f(r, kind), width);
                } else {
                    let x = widen_i(s, kind);
                    let mut r = x * ifactor;
                    if comptime![divide] {
                        r = x / ifactor;
                    }
                    word = put(word, l, u32::reinterpret(r), width);
                }
            }
        }
        dst[w as usize] = word;
        t += stride;
    }
}
