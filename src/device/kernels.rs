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
mod tests {
    use super::*;
    use crate::types::Scale;

    use crate::mem::HostMem;

    fn bytes<T: bytemuck::Pod>(v: &[T]) -> Vec<u8> {
        bytemuck::cast_slice(v).to_vec()
    }

    fn aligned(v: &[u8]) -> HostMem {
        let m = HostMem::zeroed(v.len()).unwrap();
        m.write(0, v.len()).unwrap().copy_from_slice(v);
        m
    }

    fn all(m: &HostMem) -> Vec<u8> {
        m.read(0, m.len()).unwrap().to_vec()
    }

    #[test]
    fn every_dtype_and_combine() {
        for dt in DType::ALL {
            for (c, expect) in [(Combine::Sum, 7.0), (Combine::Prod, 12.0), (Combine::Min, 3.0), (Combine::Max, 4.0)] {
                let mk = |x: f64| -> Vec<u8> {
                    match dt {
                        DType::F32 => bytes(&[x as f32; 3]),
                        DType::F64 => bytes(&[x; 3]),
                        DType::F16 => bytes(&[f16::from_f64(x); 3]),
                        DType::BF16 => bytes(&[bf16::from_f64(x); 3]),
                        DType::I8 => bytes(&[x as i8; 3]),
                        DType::U8 => bytes(&[x as u8; 3]),
                        DType::I32 => bytes(&[x as i32; 3]),
                        DType::U32 => bytes(&[x as u32; 3]),
                        DType::I64 => bytes(&[x as i64; 3]),
                        DType::U64 => bytes(&[x as u64; 3]),
                    }
                };
                let d = aligned(&mk(3.0));
                let s = aligned(&mk(4.0));
                let n = d.len();
                reduce_many(dt, c, &mut d.write(0, n).unwrap(), None, &[&s.read(0, n).unwrap()]).unwrap();
                assert_eq!(all(&d), mk(expect), "{dt} {c:?}");
                // out of place
                let a = aligned(&mk(3.0));
                let o = aligned(&mk(0.0));
                reduce_many(
                    dt,
                    c,
                    &mut o.write(0, n).unwrap(),
                    Some(&a.read(0, n).unwrap()),
                    &[&s.read(0, n).unwrap()],
                )
                .unwrap();
                assert_eq!(all(&o), mk(expect), "{dt} {c:?} out of place");
            }
        }
    }

    #[test]
    fn integer_avg_truncates_like_nccl() {
        let d = aligned(&bytes(&[-7i32, 7, 9]));
        scale(DType::I32, Scale::DivBy(2), &mut d.write(0, 12).unwrap(), None).unwrap();
        assert_eq!(all(&d), bytes(&[-3i32, 3, 4]));
    }

    #[test]
    fn bad_lengths_are_errors() {
        let d = aligned(&[0; 8]);
        let s = aligned(&[0; 4]);
        let src = s.read(0, 4).unwrap();
        assert!(reduce_many(DType::F32, Combine::Sum, &mut d.write(0, 8).unwrap(), None, &[&src]).is_err());
        let src = s.read(0, 3).unwrap();
        assert!(reduce_many(DType::F32, Combine::Sum, &mut d.write(0, 3).unwrap(), None, &[&src]).is_err());
        // Misaligned views are refused explicitly, not assumed away.
        let big = aligned(&[0; 16]);
        let src = s.read(0, 4).unwrap();
        assert!(reduce_many(DType::F32, Combine::Sum, &mut big.write(1, 4).unwrap(), None, &[&src]).is_err());
    }

    /// Small destinations (element by element) and larger ones (tiles) give the bits of
    /// folding the sources in order, with and without an accumulator, for every combine.
    #[test]
    fn small_and_tiled_reductions_fold_in_order() {
        let combines = [Combine::Sum, Combine::Prod, Combine::Min, Combine::Max];
        for n in [1, 3, SMALL, SMALL + 1, 40] {
            for k in 1..=4 {
                for c in combines {
                    // Values whose sum depends on the order (f32 rounding).
                    let val = |src: usize, i: usize| ((src * 7 + i * 13) % 11) as f32 * 0.1 + 1e7 * (src % 2) as f32;
                    let srcs: Vec<Vec<u8>> =
                        (0..k).map(|j| bytes(&(0..n).map(|i| val(j + 1, i)).collect::<Vec<_>>())).collect();
                    let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
                    let acc = bytes(&(0..n).map(|i| val(0, i)).collect::<Vec<_>>());
                    let f = |x: f32, y: f32| match c {
                        Combine::Sum => x + y,
                        Combine::Prod => x * y,
                        Combine::Min => <f32 as Arith>::min(x, y),
                        Combine::Max => <f32 as Arith>::max(x, y),
                    };
                    let want: Vec<f32> = (0..n).map(|i| (1..=k).fold(val(0, i), |x, j| f(x, val(j, i)))).collect();
                    let d = aligned(&vec![0u8; n * 4]);
                    reduce_many(DType::F32, c, &mut d.write(0, n * 4).unwrap(), Some(&acc), &refs).unwrap();
                    assert_eq!(all(&d), bytes(&want), "{n} elements, {k} sources, {c:?}, accumulator");
                    let d = aligned(&acc);
                    reduce_many(DType::F32, c, &mut d.write(0, n * 4).unwrap(), None, &refs).unwrap();
                    assert_eq!(all(&d), bytes(&want), "{n} elements, {k} sources, {c:?}, in place");
                }
            }
        }
    }

    #[test]
    fn packed_parts_reduce_to_reduce_manys_bits() {
        // Every dtype and combine, 1 to 5 parts of 1 to SMALL elements, bytes that are NaNs,
        // infinities and order-dependent sums in the float types: the packed fold gives
        // exactly what `reduce_many` over the same parts gives (every rank must get the same
        // bits whichever path its op took).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        };
        for dt in DType::ALL {
            for c in [Combine::Sum, Combine::Prod, Combine::Min, Combine::Max] {
                for n in 1..=5 {
                    for count in [1, 2, 3, 7, SMALL] {
                        let len = count * dt.size();
                        let words = (n * len).div_ceil(8);
                        let mut buf = vec![0u64; words];
                        let parts = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut buf)[..n * len];
                        parts.iter_mut().for_each(|b| *b = byte());
                        let parts = &*parts;
                        let want = aligned(&vec![0u8; len]);
                        let srcs: Vec<&[u8]> = parts[len..].chunks(len).collect();
                        reduce_many(dt, c, &mut want.write(0, len).unwrap(), Some(&parts[..len]), &srcs).unwrap();
                        let got = aligned(&vec![0u8; len]);
                        reduce_packed(dt, c, &mut got.write(0, len).unwrap(), parts).unwrap();
                        assert_eq!(all(&got), all(&want), "{dt}, {c:?}, {n} parts of {count}");
                    }
                }
            }
        }
        let d = aligned(&[0; 8]);
        for parts in [&[0u8; 12][..], &[0u8; 0][..]] {
            assert!(reduce_packed(DType::F32, Combine::Sum, &mut d.write(0, 8).unwrap(), parts).is_err());
        }
        assert!(reduce_packed(DType::F64, Combine::Sum, &mut d.write(0, 4).unwrap(), &[0u8; 8]).is_err());
    }

    #[test]
    fn fused_reduce_streams_large_outputs_exactly() {
        // Large enough for the non-temporal path, odd length so the tail is exercised.
        let n = stream::STREAM_MIN_BYTES / 4 + 4099;
        let mk = |k: u32| aligned(&bytes(&(0..n as u32).map(|i| ((i + k) % 13) as f32).collect::<Vec<_>>()));
        let (a, s1, s2, s3) = (mk(0), mk(1), mk(2), mk(3));
        let len = 4 * n;
        let guards = [s1.read(0, len).unwrap(), s2.read(0, len).unwrap(), s3.read(0, len).unwrap()];
        let srcs: Vec<&[u8]> = guards.iter().map(|g| &**g).collect();
        let want: Vec<f32> = (0..n as u32).map(|i| (0..4).map(|k| ((i + k) % 13) as f32).sum()).collect();
        for store in [Store::Cached, Store::Streamed] {
            let out = aligned(&vec![0u8; len]);
            let acc = a.read(0, len).unwrap();
            reduce_many_with(DType::F32, Combine::Sum, &mut out.write(0, len).unwrap(), Some(&acc), &srcs, store)
                .unwrap();
            assert_eq!(all(&out), bytes(&want));
        }
        // In place (no separate accumulator).
        reduce_many(DType::F32, Combine::Max, &mut a.write(0, len).unwrap(), None, &srcs).unwrap();
        let want: Vec<f32> = (0..n as u32).map(|i| (0..4).map(|k| ((i + k) % 13) as f32).fold(0.0, f32::max)).collect();
        assert_eq!(all(&a), bytes(&want));
    }

    #[test]
    fn bf16_narrowing_matches_the_half_crate() {
        let mut x = 0x3f80_0000u32;
        let vals: Vec<f32> = (0..20000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                f32::from_bits(x)
            })
            .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, 1.0 + f32::EPSILON])
            .filter(|v| !v.is_nan())
            .collect();
        let mut ours = vec![bf16::ZERO; vals.len()];
        <bf16 as Half>::narrow(&vals, &mut ours);
        for (v, o) in vals.iter().zip(&ours) {
            assert_eq!(o.to_bits(), bf16::from_f32(*v).to_bits(), "{v:e}");
        }
        let mut back = vec![0f32; ours.len()];
        <bf16 as Half>::widen(&ours, &mut back);
        for (o, b) in ours.iter().zip(&back) {
            assert_eq!(*b, o.to_f32());
        }
    }
}
