//! Element-wise scaling (`Avg`'s division, `PreMulSum`'s and f16 `Avg`'s multiplications):
//! per element for most types; f16 through `f32` tile by tile, and on the exponent for a
//! power of two.

use half::{bf16, f16};

use super::{Arith, Half, view, view_mut};
use crate::error::{CollectiveError, Result};
use crate::types::{DType, Scale};

/// `dst = scale(src or dst)` element-wise.
pub(crate) fn scale(dtype: DType, scale: Scale, dst: &mut [u8], src: Option<&[u8]>) -> Result<()> {
    if src.is_some_and(|s| s.len() != dst.len()) || !dst.len().is_multiple_of(dtype.size()) {
        return Err(CollectiveError::device(format!("scale kernel got mismatched lengths for {dtype}")));
    }
    match dtype {
        DType::F16 => match scale {
            // f16 `Avg`'s prescale and rescale (`ReduceOp::avg_prescale`): on the exponent.
            Scale::MulBy(f) => match pow2(f) {
                Some(j) => scale_f16_pow2(dst, src, j),
                None => scale_half::<f16>(dst, src, scale),
            },
            _ => scale_half::<f16>(dst, src, scale),
        },
        // bf16 converts with a shift and a rounding add per element: no faster in tiles.
        _ => by_dtype!(dtype, scale_typed, dst, src, scale),
    }
}

/// [`scale_typed`] for f16, tile by tile through `f32` (the slice conversions are
/// vectorised, where one conversion per element each way is not). The same bits as `div_n`
/// and `mul_s`.
fn scale_half<H: Half>(dst: &mut [u8], src: Option<&[u8]>, scale: Scale) -> Result<()> {
    let d = view_mut::<H>(dst)?;
    let s = src.map(view::<H>).transpose()?;
    const HT: usize = 1024;
    let mut t = [0f32; HT];
    let mut start = 0;
    while start < d.len() {
        let end = (start + HT).min(d.len());
        let w = end - start;
        H::widen(s.map_or(&d[start..end], |s| &s[start..end]), &mut t[..w]);
        match scale {
            Scale::DivBy(n) => {
                let n = n as f32;
                t[..w].iter_mut().for_each(|x| *x /= n);
            }
            Scale::MulBy(f) => {
                let f = H::scalar(f);
                t[..w].iter_mut().for_each(|x| *x *= f);
            }
        }
        H::narrow(&t[..w], &mut d[start..end]);
        start = end;
    }
    Ok(())
}

/// `j` when `f` is `2^j` for a small `j` (multiplying an f16 by it moves its exponent).
fn pow2(f: f64) -> Option<i32> {
    let j = f.abs().log2().round();
    (f > 0.0 && (-24.0..=24.0).contains(&j) && f == 2f64.powi(j as i32)).then_some(j as i32)
}

/// `dst = (src or dst) * 2^j` on f16, bit for bit as `mul_s` (through `f32`), but on the
/// exponent where the result stays normal: an integer add per element instead of two
/// conversions (a 4-rank 4 MiB f16 `Avg`, whose inputs are pre-multiplied by a power of two,
/// ran at a third of `Sum`'s speed). Zeros, subnormals and results past the normal range
/// take the conversion; infinities and NaNs are kept.
fn scale_f16_pow2(dst: &mut [u8], src: Option<&[u8]>, j: i32) -> Result<()> {
    let d = view_mut::<f16>(dst)?;
    let s = src.map(view::<f16>).transpose()?;
    let by = 2f32.powi(j);
    let delta = (j << 10) as u16;
    const T: usize = 1024;
    let mut tile = [0u16; T];
    let mut start = 0;
    while start < d.len() {
        let end = (start + T).min(d.len());
        let w = end - start;
        let from = s.map_or(&d[start..end], |s| &s[start..end]);
        tile[..w].iter_mut().zip(from).for_each(|(t, x)| *t = x.to_bits());
        // Branch-free, so that it vectorises: the exponent moved; zeros, infinities and NaNs
        // kept; whether any element needs the conversion instead (a subnormal, or a result
        // past the normal range).
        let mut slow = false;
        for (o, &x) in d[start..end].iter_mut().zip(&tile[..w]) {
            let e = i32::from((x >> 10) & 0x1f);
            let keep = (e == 0x1f) | (x & 0x7fff == 0);
            slow |= !keep & ((e == 0) | (e + j < 1) | (e + j > 30));
            *o = f16::from_bits(if keep { x } else { x.wrapping_add(delta) });
        }
        if slow {
            for (o, &x) in d[start..end].iter_mut().zip(&tile[..w]) {
                let e = i32::from((x >> 10) & 0x1f);
                if e != 0x1f && x & 0x7fff != 0 && (e == 0 || !(1..=30).contains(&(e + j))) {
                    *o = f16::from_f32(f16::from_bits(x).to_f32() * by);
                }
            }
        }
        start = end;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The f16 power-of-two scale moves exponents where it can and converts elsewhere, with
    /// the bits of the general path (`mul_s`) for every f16 and every shift it is used for.
    #[test]
    fn f16_power_of_two_scale_matches_the_general_path() {
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let src = bytemuck::cast_slice::<u16, u8>(&all).to_vec();
        for j in [-3, -2, -1, 1, 2, 3, 10, -10] {
            let f = 2f64.powi(j);
            assert_eq!(pow2(f), Some(j));
            let mut fast = vec![0u8; src.len()];
            scale_f16_pow2(&mut fast, Some(&src), j).unwrap();
            let mut slow = vec![0u8; src.len()];
            scale_typed::<f16>(&mut slow, Some(&src), Scale::MulBy(f)).unwrap();
            for (k, (a, b)) in fast.chunks(2).zip(slow.chunks(2)).enumerate() {
                let (a, b) = (f16::from_le_bytes([a[0], a[1]]), f16::from_le_bytes([b[0], b[1]]));
                assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "2^{j} * {:#06x}: {a} vs {b}", k);
            }
        }
        assert_eq!((pow2(0.3), pow2(-2.0), pow2(1.0)), (None, None, Some(0)));
    }
}
