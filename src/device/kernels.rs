//! Host reduction and scaling kernels: one monomorphised loop per dtype and operator, chosen
//! once per call (never per element), written so the compiler can vectorise them.

use half::{bf16, f16};

use crate::error::{CollectiveError, Result};
use crate::types::{Combine, DType, Scale};

/// Arithmetic a reduction kernel needs from an element type.
trait Arith: Copy + bytemuck_free::Plain {
    fn add(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn min(a: Self, b: Self) -> Self;
    fn max(a: Self, b: Self) -> Self;
    fn div_n(a: Self, n: u64) -> Self;
    fn mul_s(a: Self, s: f64) -> Self;
}

mod bytemuck_free {
    /// Types for which every bit pattern is valid and which have no padding, so a byte
    /// range may be viewed as a slice of them.
    ///
    /// # Safety
    /// Implement only for such types.
    pub unsafe trait Plain {}
}

macro_rules! float_arith {
    ($t:ty) => {
        // SAFETY: floats have no padding and every bit pattern is a valid value.
        unsafe impl bytemuck_free::Plain for $t {}
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
                // Symmetric in its arguments (min(+0, -0) is -0 either way), so ranks that
                // combine the same pair in opposite order get the same bits.
                if b < a || (b == a && b.is_sign_negative()) { b } else { a }
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                if b > a || (b == a && a.is_sign_negative()) { b } else { a }
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
        // SAFETY: 16-bit floats are plain `u16` bit patterns.
        unsafe impl bytemuck_free::Plain for $t {}
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
        // SAFETY: integers have no padding and every bit pattern is a valid value.
        unsafe impl bytemuck_free::Plain for $t {}
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

fn view<T: Arith>(b: &[u8]) -> Result<&[T]> {
    // SAFETY: `T: Plain`, so any bytes are valid `T`s; `align_to` only yields the aligned
    // middle part, and we reject inputs where that is not all of it.
    let (pre, mid, post) = unsafe { b.align_to::<T>() };
    if pre.is_empty() && post.is_empty() {
        Ok(mid)
    } else {
        Err(CollectiveError::device(format!("host buffer of {} bytes is not aligned for its dtype", b.len())))
    }
}

fn view_mut<T: Arith>(b: &mut [u8]) -> Result<&mut [T]> {
    let n = b.len();
    // SAFETY: as in `view`; writes of any `T` leave valid bytes behind.
    let (pre, mid, post) = unsafe { b.align_to_mut::<T>() };
    if pre.is_empty() && post.is_empty() {
        Ok(mid)
    } else {
        Err(CollectiveError::device(format!("host buffer of {n} bytes is not aligned for its dtype")))
    }
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

fn reduce_typed<T: Arith>(dst: &mut [u8], acc: Option<&[u8]>, src: &[u8], combine: Combine) -> Result<()> {
    let d = view_mut::<T>(dst)?;
    let a = acc.map(view::<T>).transpose()?;
    zip_dispatch(d, a, view::<T>(src)?, combine);
    Ok(())
}

/// Elements per tile of the fused multi-source reduction (16 KiB of f32: stays in L1).
const TILE: usize = 4096;

fn reduce_many_typed<T: Arith>(dst: &mut [u8], acc: Option<&[u8]>, srcs: &[&[u8]], combine: Combine) -> Result<()> {
    let d = view_mut::<T>(dst)?;
    let a = acc.map(view::<T>).transpose()?;
    let s: Vec<&[T]> = srcs.iter().map(|x| view::<T>(x)).collect::<Result<_>>()?;
    let mut start = 0;
    while start < d.len() {
        let end = (start + TILE).min(d.len());
        let dt = &mut d[start..end];
        for (i, src) in s.iter().enumerate() {
            let acc_tile = if i == 0 { a.map(|a| &a[start..end]) } else { None };
            zip_dispatch(dt, acc_tile, &src[start..end], combine);
        }
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

fn scale_typed<T: Arith>(dst: &mut [u8], src: Option<&[u8]>, scale: Scale) -> Result<()> {
    let d = view_mut::<T>(dst)?;
    let f = move |x: T| match scale {
        Scale::DivBy(n) => T::div_n(x, n),
        Scale::MulBy(s) => T::mul_s(x, s),
    };
    match src {
        None => d.iter_mut().for_each(|x| *x = f(*x)),
        Some(s) => {
            for (x, &y) in d.iter_mut().zip(view::<T>(s)?) {
                *x = f(y);
            }
        }
    }
    Ok(())
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

/// `dst = combine(acc or dst, src)` element-wise; lengths must agree.
pub(crate) fn reduce(dtype: DType, combine: Combine, dst: &mut [u8], acc: Option<&[u8]>, src: &[u8]) -> Result<()> {
    if dst.len() != src.len() || acc.is_some_and(|a| a.len() != dst.len()) || dst.len() % dtype.size() != 0 {
        return Err(CollectiveError::device(format!(
            "reduce kernel got mismatched lengths (dst {}, src {}) for {dtype}",
            dst.len(),
            src.len()
        )));
    }
    by_dtype!(dtype, reduce_typed, dst, acc, src, combine)
}

/// `dst = combine(acc or dst, srcs[0], srcs[1], ...)` element-wise, left to right, tiled.
pub(crate) fn reduce_many(
    dtype: DType,
    combine: Combine,
    dst: &mut [u8],
    acc: Option<&[u8]>,
    srcs: &[&[u8]],
) -> Result<()> {
    if srcs.iter().any(|x| x.len() != dst.len())
        || acc.is_some_and(|a| a.len() != dst.len())
        || dst.len() % dtype.size() != 0
    {
        return Err(CollectiveError::device(format!("fused reduce kernel got mismatched lengths for {dtype}")));
    }
    by_dtype!(dtype, reduce_many_typed, dst, acc, srcs, combine)
}

/// `dst = scale(src or dst)` element-wise.
pub(crate) fn scale(dtype: DType, scale: Scale, dst: &mut [u8], src: Option<&[u8]>) -> Result<()> {
    if src.is_some_and(|s| s.len() != dst.len()) || dst.len() % dtype.size() != 0 {
        return Err(CollectiveError::device(format!("scale kernel got mismatched lengths for {dtype}")));
    }
    by_dtype!(dtype, scale_typed, dst, src, scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
        // SAFETY: test helper over plain numeric types.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)).to_vec() }
    }

    fn aligned(v: &[u8]) -> crate::mem::HostMem {
        let m = crate::mem::HostMem::zeroed(v.len());
        // SAFETY: fresh, unshared block.
        unsafe { m.bytes_mut(0, v.len()).copy_from_slice(v) };
        m
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
                // SAFETY: two distinct fresh blocks, single thread.
                unsafe { reduce(dt, c, d.bytes_mut(0, n), None, s.bytes(0, n)) }.unwrap();
                assert_eq!(unsafe { d.bytes(0, n) }, &mk(expect)[..], "{dt} {c:?}");
                // out of place
                let a = aligned(&mk(3.0));
                let o = aligned(&mk(0.0));
                unsafe { reduce(dt, c, o.bytes_mut(0, n), Some(a.bytes(0, n)), s.bytes(0, n)) }.unwrap();
                assert_eq!(unsafe { o.bytes(0, n) }, &mk(expect)[..], "{dt} {c:?} out of place");
            }
        }
    }

    #[test]
    fn integer_avg_truncates_like_nccl() {
        let d = aligned(&bytes(&[-7i32, 7, 9]));
        unsafe { scale(DType::I32, Scale::DivBy(2), d.bytes_mut(0, 12), None) }.unwrap();
        assert_eq!(unsafe { d.bytes(0, 12) }, &bytes(&[-3i32, 3, 4])[..]);
    }

    #[test]
    fn bad_lengths_are_errors() {
        let d = aligned(&[0; 8]);
        let s = aligned(&[0; 4]);
        assert!(unsafe { reduce(DType::F32, Combine::Sum, d.bytes_mut(0, 8), None, s.bytes(0, 4),) }.is_err());
        assert!(unsafe { reduce(DType::F32, Combine::Sum, d.bytes_mut(0, 3), None, s.bytes(0, 3),) }.is_err());
    }
}
