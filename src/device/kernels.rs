//! Host reduction and scaling kernels: one monomorphised loop per dtype and operator, chosen
//! once per call (never per element), written so the compiler can vectorise them.

use half::{bf16, f16};

use super::stream;
use crate::error::{CollectiveError, Result};
use crate::types::{Combine, DType};

/// Arithmetic a reduction kernel needs from an element type.
trait Arith: Copy + Default + bytemuck::Pod {
    fn add(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn div_n(a: Self, n: u64) -> Self;
    fn mul_s(a: Self, s: f64) -> Self;
}

macro_rules! float_arith {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                // Symmetric in its arguments, so ranks that combine the same pair in opposite
                // order get the same bits: equal values (+0 and -0) and NaNs merge their bits
                // (min(+0, -0) = -0, and a NaN stays a NaN).
                let merged = <$t>::from_bits(a.to_bits() | b.to_bits());
                if a < b {
                    a
                } else if b < a {
                    b
                } else {
                    merged
                }
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                let merged = if a == b {
                    <$t>::from_bits(a.to_bits() & b.to_bits())
                } else {
                    <$t>::from_bits(a.to_bits() | b.to_bits())
                };
                if a > b {
                    a
                } else if b > a {
                    b
                } else {
                    merged
                }
            }
            #[inline(always)]
            fn div_n(a: Self, n: u64) -> Self {
                a / n as $t
            }
            #[inline(always)]
            fn mul_s(a: Self, s: f64) -> Self {
                a * s as $t
            }
        }
    };
}

macro_rules! half_arith {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() + b.to_f32())
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                <$t>::from_f32(a.to_f32() * b.to_f32())
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                let (x, y) = (a.to_f32(), b.to_f32());
                if y < x || (y == x && y.is_sign_negative()) { b } else { a }
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                let (x, y) = (a.to_f32(), b.to_f32());
                if y > x || (y == x && x.is_sign_negative()) { b } else { a }
            }
            #[inline(always)]
            fn div_n(a: Self, n: u64) -> Self {
                <$t>::from_f32(a.to_f32() / n as f32)
            }
            #[inline(always)]
            fn mul_s(a: Self, s: f64) -> Self {
                <$t>::from_f32(a.to_f32() * <$t>::from_f64(s).to_f32())
            }
        }
    };
}

macro_rules! int_arith {
    ($t:ty) => {
        impl Arith for $t {
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                Ord::min(a, b)
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                Ord::max(a, b)
            }
            #[inline(always)]
            fn div_n(a: Self, n: u64) -> Self {
                (a as i128 / n as i128) as $t
            }
            #[inline(always)]
            fn mul_s(a: Self, s: f64) -> Self {
                a.wrapping_mul(s as $t)
            }
        }
    };
}

float_arith!(f32);
float_arith!(f64);
half_arith!(f16);
half_arith!(bf16);
int_arith!(i8);
int_arith!(u8);
int_arith!(i32);
int_arith!(u32);
int_arith!(i64);
int_arith!(u64);

fn as_bytes<T: Arith>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn as_bytes_mut<T: Arith>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

fn misaligned<T>(len: usize) -> CollectiveError {
    CollectiveError::device(format!(
        "a host buffer of {len} bytes is not aligned to {} bytes or not a whole number of elements",
        std::mem::align_of::<T>()
    ))
}

/// The bytes as elements; alignment and length are checked explicitly (never assumed).
fn view<T: Arith>(b: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(b).map_err(|_| misaligned::<T>(b.len()))
}

fn view_mut<T: Arith>(b: &mut [u8]) -> Result<&mut [T]> {
    let n = b.len();
    bytemuck::try_cast_slice_mut(b).map_err(|_| misaligned::<T>(n))
}

#[inline(always)]
fn zip_with<T: Arith>(dst: &mut [T], acc: Option<&[T]>, src: &[T], f: impl Fn(T, T) -> T) {
    match acc {
        None => {
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = f(*d, s);
            }
        }
        Some(acc) => {
            for ((d, &a), &s) in dst.iter_mut().zip(acc).zip(src) {
                *d = f(a, s);
            }
        }
    }
}

/// Elements per tile of the fused multi-source reduction (16 KiB of f32: stays in L1).
const TILE: usize = 4096;

/// Destinations up to this many elements are reduced element by element ([`fold_small`]):
/// a 16-byte reduce of 4 ranks spent ~450 instructions in per-source dispatch and loop
/// set-up for 12 additions.
pub(crate) const SMALL: usize = 16;

/// `dst[i] = f(...f(f(acc[i] or dst[i], srcs[0][i]), srcs[1][i])..., srcs[k][i])`: what
/// [`zip_with`] over each source in turn computes. Every source is `dst`'s length.
#[inline(always)]
fn fold_small<T: Arith>(dst: &mut [T], acc: Option<&[T]>, srcs: &[&[T]], f: impl Fn(T, T) -> T) {
    for (i, d) in dst.iter_mut().enumerate() {
        let mut x = acc.and_then(|a| a.get(i)).copied().unwrap_or(*d);
        for s in srcs {
            if let Some(&y) = s.get(i) {
                x = f(x, y);
            }
        }
        *d = x;
    }
}

fn reduce_many_typed<T: Arith>(
    dst: &mut [u8],
    acc: Option<&[u8]>,
    srcs: &[&[u8]],
    combine: Combine,
    store: Store,
) -> Result<()> {
    let d = view_mut::<T>(dst)?;
    let a = acc.map(view::<T>).transpose()?;
    let mut s: smallvec::SmallVec<[&[T]; 8]> = smallvec::SmallVec::with_capacity(srcs.len());
    for x in srcs {
        s.push(view::<T>(x)?);
    }
    if d.len() <= SMALL {
        // A small op's few elements: element by element, every source folded in order (the
        // same order, so the same bits, as the tiles), one dispatch on `combine` instead of
        // one per source.
        match combine {
            Combine::Sum => fold_small(d, a, &s, T::add),
            Combine::Prod => fold_small(d, a, &s, T::mul),
            Combine::Min => fold_small(d, a, &s, T::min),
            Combine::Max => fold_small(d, a, &s, T::max),
        }
        return Ok(());
    }
    if std::mem::size_of_val(d) < stream::STREAM_MIN_BYTES {
        // Tile by tile, so that each tile of the destination stays in L1 across the sources.
        // An in-place reduction (no `acc`) reads each destination line, then writes it: its
        // lines are asked for owned first (`stream::prefetch_for_write`).
        let mut start = 0;
        while start < d.len() {
            let end = (start + TILE).min(d.len());
            if a.is_none() {
                stream::prefetch_for_write(as_bytes(&d[start..end]));
            }
            for (i, src) in s.iter().enumerate() {
                let first = if i == 0 { a.map(|a| &a[start..end]) } else { None };
                zip_dispatch(&mut d[start..end], first, &src[start..end], combine);
            }
            start = end;
        }
        return Ok(());
    }
    // Large destinations: reduce each tile into an L1-resident buffer, then write it out.
    // (Small ones skip the tile: zeroing it would cost more than their whole reduction.)
    // A large op's destination with an accumulator of its own is only written: its tiles
    // go out with non-temporal stores, so no destination line is read for ownership first
    // (`Store::Streamed`). In place, every destination line was just read (it is the
    // accumulator) and is in the cache: plain stores. Measured (PERFORMANCE.md, session 38;
    // out of place / in place): 2 processes' reduce of 64 MiB 18.3-19.1 / 10.6-11.7 ms with
    // plain stores, 13.1-14.7 / 9.6-10.6 streamed when out of place, 12.9-13.3 / 17.1-18.1
    // streamed in place too.
    let mut tmp = [T::default(); TILE];
    let mut start = 0;
    while start < d.len() {
        let end = (start + TILE).min(d.len());
        let w = end - start;
        for (i, src) in s.iter().enumerate() {
            let src = &src[start..end];
            let first = if i == 0 { Some(a.map_or(&d[start..end], |a| &a[start..end])) } else { None };
            zip_dispatch(&mut tmp[..w], first, src, combine);
        }
        let (out, tile) = (as_bytes_mut(&mut d[start..end]), as_bytes(&tmp[..w]));
        if a.is_some() && store == Store::Streamed {
            stream::copy_streaming(out, tile)
        } else {
            out.copy_from_slice(tile)
        }
        start = end;
    }
    Ok(())
}

/// 16-bit floats, combined in `f32`: each tile is widened with the `half` crate's slice
/// conversions (SIMD where the CPU has them), reduced over every source, and rounded once.
trait Half: Arith {
    fn widen(src: &[Self], dst: &mut [f32]);
    fn narrow(src: &[f32], dst: &mut [Self]);
    /// A scale's scalar converted to this type, then widened (what `mul_s` multiplies by).
    fn scalar(s: f64) -> f32;
}

impl Half for f16 {
    fn scalar(s: f64) -> f32 {
        f16::from_f64(s).to_f32()
    }
    fn widen(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
    }
    fn narrow(src: &[f32], dst: &mut [Self]) {
        half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src);
    }
}

// bfloat16 is the top half of an f32: widening is a shift, narrowing rounds to nearest even
// (NaNs stay quiet NaNs). Written as plain loops, which vectorise.
impl Half for bf16 {
    fn scalar(s: f64) -> f32 {
        bf16::from_f64(s).to_f32()
    }
    fn widen(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits(u32::from(s.to_bits()) << 16);
        }
    }
    fn narrow(src: &[f32], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            let b = s.to_bits();
            let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
            let nan = ((b >> 16) as u16) | 0x40;
            *d = bf16::from_bits(if s.is_nan() { nan } else { rounded });
        }
    }
}

fn reduce_many_half<H: Half>(dst: &mut [u8], acc: Option<&[u8]>, srcs: &[&[u8]], combine: Combine) -> Result<()> {
    let d = view_mut::<H>(dst)?;
    let a = acc.map(view::<H>).transpose()?;
    let s: smallvec::SmallVec<[&[H]; 8]> = srcs.iter().map(|x| view::<H>(x)).collect::<Result<_>>()?;
    const HT: usize = 1024;
    let (mut t_acc, mut t_src) = ([0f32; HT], [0f32; HT]);
    let mut start = 0;
    while start < d.len() {
        let end = (start + HT).min(d.len());
        let w = end - start;
        H::widen(a.map_or(&d[start..end], |a| &a[start..end]), &mut t_acc[..w]);
        for src in &s {
            H::widen(&src[start..end], &mut t_src[..w]);
            zip_dispatch::<f32>(&mut t_acc[..w], None, &t_src[..w], combine);
        }
        H::narrow(&t_acc[..w], &mut d[start..end]);
        start = end;
    }
    Ok(())
}

#[inline(always)]
fn zip_dispatch<T: Arith>(d: &mut [T], a: Option<&[T]>, s: &[T], combine: Combine) {
    // One monomorphised loop per combine so each vectorises on its own.
    match combine {
        Combine::Sum => zip_with(d, a, s, T::add),
        Combine::Prod => zip_with(d, a, s, T::mul),
        Combine::Min => zip_with(d, a, s, T::min),
        Combine::Max => zip_with(d, a, s, T::max),
    }
}

macro_rules! by_dtype {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            DType::F32 => $f::<f32>($($arg),*),
            DType::F64 => $f::<f64>($($arg),*),
            DType::F16 => $f::<f16>($($arg),*),
            DType::BF16 => $f::<bf16>($($arg),*),
            DType::I8 => $f::<i8>($($arg),*),
            DType::U8 => $f::<u8>($($arg),*),
            DType::I32 => $f::<i32>($($arg),*),
            DType::U32 => $f::<u32>($($arg),*),
            DType::I64 => $f::<i64>($($arg),*),
            DType::U64 => $f::<u64>($($arg),*),
        }
    };
}

/// `dst = combine(acc or dst, srcs[0], srcs[1], ...)` element-wise, left to right, tiled.
pub(crate) fn reduce_many(
    dtype: DType,
    combine: Combine,
    dst: &mut [u8],
    acc: Option<&[u8]>,
    srcs: &[&[u8]],
) -> Result<()> {
    reduce_many_with(dtype, combine, dst, acc, srcs, Store::Cached)
}

/// `dst` = the fold, left to right, of the parts laid end to end in `parts`, each `dst`'s
/// length: `dst[i] = f(...f(parts[0][i], parts[1][i])..., parts[k][i])`, the bits
/// [`reduce_many`]`(dst, Some(parts[0]), parts[1..])` gives. For an exchanged op's few
/// elements (at most [`SMALL`] per part), copied out of the slots into one buffer: no slice
/// per part and one dispatch (a 16-byte all_reduce of 2 processes spent ~280 instructions in
/// `reduce_many` for 4 additions). Half types fold in f32 and round once, as
/// [`reduce_many`] does.
pub(crate) fn reduce_packed(dtype: DType, combine: Combine, dst: &mut [u8], parts: &[u8]) -> Result<()> {
    let len = dst.len();
    if len == 0 || !parts.len().is_multiple_of(len) || !len.is_multiple_of(dtype.size()) {
        return Err(CollectiveError::device(format!(
            "packed reduce kernel got {} bytes of parts for {len} bytes of {dtype}",
            parts.len()
        )));
    }
    match dtype {
        DType::F16 | DType::BF16 => {
            let (first, rest) = parts.split_at(len);
            let srcs: smallvec::SmallVec<[&[u8]; 8]> = rest.chunks(len).collect();
            reduce_many(dtype, combine, dst, Some(first), &srcs)
        }
        _ => by_dtype!(dtype, reduce_packed_typed, dst, parts, combine),
    }
}

/// [`reduce_packed`] over parts held in words, the usual exchanged reduction (whole words of
/// a peer's slot): `words` holds `n` parts end to end, each `part` words long, and the fold,
/// left to right, lands in the first part. Words are aligned for every dtype, so there is no
/// byte view to check and no output of the caller's to align: a 16-byte all_reduce of 2
/// processes spent ~145 instructions in [`reduce_packed`] for 4 additions. False, leaving
/// `words` as they were, for the half types (they fold in f32 and round once: the caller
/// uses [`reduce_packed`]) and for `words` not `n` whole parts.
pub(crate) fn reduce_words(dtype: DType, combine: Combine, words: &mut [u64], part: usize, n: usize) -> bool {
    if matches!(dtype, DType::F16 | DType::BF16) || part == 0 || words.len() != part * n {
        return false;
    }
    by_dtype!(dtype, fold_words, words, part, combine)
}

fn fold_words<T: Arith>(words: &mut [u64], part: usize, combine: Combine) -> bool {
    let (acc, rest) = words.split_at_mut(part);
    // Never fails: a word holds whole elements of every dtype, at their alignment.
    let Ok(acc) = bytemuck::try_cast_slice_mut::<u64, T>(acc) else {
        return false;
    };
    match combine {
        Combine::Sum => fold_parts(acc, rest, part, T::add),
        Combine::Prod => fold_parts(acc, rest, part, T::mul),
        Combine::Min => fold_parts(acc, rest, part, T::min),
        Combine::Max => fold_parts(acc, rest, part, T::max),
    }
    true
}

#[inline(always)]
fn fold_parts<T: Arith>(acc: &mut [T], rest: &[u64], part: usize, f: impl Fn(T, T) -> T) {
    for p in rest.chunks_exact(part) {
        let Ok(p) = bytemuck::try_cast_slice::<u64, T>(p) else { continue };
        for (a, &y) in acc.iter_mut().zip(p) {
            *a = f(*a, y);
        }
    }
}

fn reduce_packed_typed<T: Arith>(dst: &mut [u8], parts: &[u8], combine: Combine) -> Result<()> {
    let (d, p) = (view_mut::<T>(dst)?, view::<T>(parts)?);
    match combine {
        Combine::Sum => fold_packed(d, p, T::add),
        Combine::Prod => fold_packed(d, p, T::mul),
        Combine::Min => fold_packed(d, p, T::min),
        Combine::Max => fold_packed(d, p, T::max),
    }
    Ok(())
}

#[inline(always)]
fn fold_packed<T: Arith>(dst: &mut [T], parts: &[T], f: impl Fn(T, T) -> T) {
    let mut parts = parts.chunks_exact(dst.len());
    if let Some(first) = parts.next() {
        dst.copy_from_slice(first);
    }
    for part in parts {
        for (d, &y) in dst.iter_mut().zip(part) {
            *d = f(*d, y);
        }
    }
}

/// How a large reduction's tiles reach their destination (see [`reduce_many_with`]).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Store {
    /// Plain stores: the lines stay in the cache.
    Cached,
    /// Non-temporal stores where the destination is not the accumulator and at least
    /// [`stream::STREAM_MIN_BYTES`] long: for a destination the caller knows belongs to a
    /// large op ([`Store::for_buffers`]).
    Streamed,
}

impl Store {
    /// `Streamed` when the largest buffer an op's reduction works on is at least
    /// [`stream::STREAM_BUFFER_MIN`].
    pub(crate) fn for_buffers(largest: usize) -> Self {
        if largest >= stream::STREAM_BUFFER_MIN { Store::Streamed } else { Store::Cached }
    }
}

/// [`reduce_many`], its destination written as `store` says.
pub(crate) fn reduce_many_with(
    dtype: DType,
    combine: Combine,
    dst: &mut [u8],
    acc: Option<&[u8]>,
    srcs: &[&[u8]],
    store: Store,
) -> Result<()> {
    if srcs.iter().any(|x| x.len() != dst.len())
        || acc.is_some_and(|a| a.len() != dst.len())
        || !dst.len().is_multiple_of(dtype.size())
    {
        return Err(CollectiveError::device(format!("fused reduce kernel got mismatched lengths for {dtype}")));
    }
    match dtype {
        DType::F16 => reduce_many_half::<f16>(dst, acc, srcs, combine),
        DType::BF16 => reduce_many_half::<bf16>(dst, acc, srcs, combine),
        _ => by_dtype!(dtype, reduce_many_typed, dst, acc, srcs, combine, store),
    }
}

mod scale;
pub(crate) use scale::scale;

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
