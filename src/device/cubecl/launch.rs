//! Launches of `crate::kernels` for a [`CubeDevice`]: one function per contract operation,
//! choosing the kernel family by dtype and refusing what the runtime cannot run (a refused
//! launch is an error here, never a launch CubeCL would drop silently).

use cubecl::Runtime;
use cubecl::client::ComputeClient;
use cubecl::prelude::*;
use cubecl::server::Handle;
use half::{bf16, f16};

use super::{CubeBuffer, CubeDevice, contained};
use crate::device::Range;
use crate::error::{CollectiveError, Result};
use crate::kernels::{CUBE_DIM, MAX_CUBES, combine_code, copy, grid, native, packed};
use crate::types::{Combine, DType, Scale};

/// Whether the runtime has the element type `T` natively.
fn native_type<R: Runtime, T: CubePrimitive>(client: &ComputeClient<R>) -> bool {
    T::as_type_native().is_some_and(|t| client.properties().supports_type(t))
}

/// Whether kernels for `dtype` run on this client: 8- and 16-bit types always (packed into
/// `u32` words), 32-bit types always, 64-bit types where the runtime has them (emulating
/// 64-bit arithmetic in 32-bit words is not done).
///
/// CUDA has `double` on every GPU CubeCL runs on, and CubeCL's CUDA compiler writes it, but
/// CubeCL 0.10 leaves `f64` out of the CUDA runtime's registered types (a matmul of its own
/// failed with it): the elementwise kernels here use none of that, so `f64` counts there
/// (the core suite on CUDA reduces `f64` bit for bit against the host).
pub(super) fn supports<R: Runtime>(client: &ComputeClient<R>, dtype: DType) -> bool {
    match dtype {
        DType::F64 => native_type::<R, f64>(client) || R::name(client) == "cuda",
        DType::I64 => native_type::<R, i64>(client),
        DType::U64 => native_type::<R, u64>(client),
        _ => true,
    }
}

fn words(handle: &Handle) -> usize {
    handle.size_in_used() as usize / 4
}

/// Element or word counts and offsets travel as `u32`.
fn u32_of(x: usize, what: &str) -> Result<u32> {
    u32::try_from(x)
        .map_err(|_| CollectiveError::unsupported(format!("{what} of {x} exceeds what one kernel addresses")))
}

/// `off` as the `u32` an unchecked kernel adds its index `i < units` to, after checking
/// that `off + units` stays within an array of `len` units, and that neither the index nor
/// its grid-stride step past `units` overflows `u32` (what makes the unchecked launches
/// sound, whatever the caller checked before).
fn within(off: usize, units: usize, len: usize) -> Result<u32> {
    let step = (MAX_CUBES * CUBE_DIM) as usize;
    match off.checked_add(units) {
        Some(end) if end <= len && u32::try_from(end.max(units + step)).is_ok() => u32_of(off, "an offset"),
        _ => Err(CollectiveError::device(format!(
            "a kernel range {off}..{} is outside its array of {len} elements",
            off.saturating_add(units)
        ))),
    }
}

fn count(cubes: u32) -> CubeCount {
    CubeCount::Static(cubes, 1, 1)
}

/// Sets `words` words of `handle` to `value`.
pub(super) fn fill<R: Runtime>(
    client: &ComputeClient<R>,
    handle: &Handle,
    n: usize,
    value: u32,
    name: &str,
) -> Result<()> {
    let n = u32_of(n, "a fill")?;
    let (cubes, stride) = grid(n);
    contained(name, "the fill kernel", || {
        copy::fill_words::launch::<R>(
            client,
            count(cubes),
            CubeDim::new_1d(CUBE_DIM),
            // SAFETY: the array covers the whole allocation.
            unsafe { ArrayArg::from_raw_parts(handle.clone(), words(handle)) },
            0,
            n,
            value,
            stride,
        )
    })
}

/// Copies `len` bytes from `src[src_off..]` to `dst[dst_off..]`.
pub(super) fn copy<R: Runtime>(
    client: &ComputeClient<R>,
    src: &Handle,
    src_off: usize,
    dst: &Handle,
    dst_off: usize,
    len: usize,
    name: &str,
) -> Result<()> {
    let touched = (dst_off + len).div_ceil(4) - dst_off / 4;
    let (s_off, d_off, l, w) = (
        u32_of(src_off, "an offset")?,
        u32_of(dst_off, "an offset")?,
        u32_of(len, "a copy")?,
        u32_of(touched, "a copy")?,
    );
    let (cubes, stride) = grid(w);
    contained(name, "the copy kernel", || {
        copy::copy_bytes::launch::<R>(
            client,
            count(cubes),
            CubeDim::new_1d(CUBE_DIM),
            // SAFETY: both arrays cover their whole allocation; the kernel stays inside the
            // checked ranges.
            unsafe { ArrayArg::from_raw_parts(dst.clone(), words(dst)) },
            d_off,
            unsafe { ArrayArg::from_raw_parts(src.clone(), words(src)) },
            s_off,
            l,
            w,
            stride,
        )
    })
}

/// The bits of a float type (0 for integers), for the symmetric `Min`/`Max`.
fn float_bits(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 32,
        DType::F64 => 64,
        _ => 0,
    }
}

fn packed_kind(dtype: DType) -> Option<u32> {
    match dtype {
        DType::F16 => Some(packed::F16),
        DType::BF16 => Some(packed::BF16),
        DType::I8 => Some(packed::I8),
        DType::U8 => Some(packed::U8),
        _ => None,
    }
}

/// `dst = acc ⊕ srcs[0] ⊕ srcs[1] ...`, left to right (all ranges on this device).
pub(super) fn reduce<R: Runtime>(
    dev: &CubeDevice<R>,
    dst: &Range<CubeBuffer>,
    acc: &Range<CubeBuffer>,
    srcs: &[Range<CubeBuffer>],
    dtype: DType,
    combine: Combine,
) -> Result<()> {
    let size = dtype.size();
    let n = dst.len / size;
    let op = combine_code(combine);
    match packed_kind(dtype) {
        Some(kind) => reduce_packed(dev, dst, acc, srcs, n, kind, op),
        None => {
            for (i, s) in srcs.iter().enumerate() {
                let a = if i == 0 { acc } else { dst };
                let args = (dst, a, s, n, op, float_bits(dtype));
                match dtype {
                    DType::F32 => reduce_native::<R, f32>(dev, args)?,
                    DType::F64 => reduce_native::<R, f64>(dev, args)?,
                    DType::I32 => reduce_native::<R, i32>(dev, args)?,
                    DType::U32 => reduce_native::<R, u32>(dev, args)?,
                    DType::I64 => reduce_native::<R, i64>(dev, args)?,
                    DType::U64 => reduce_native::<R, u64>(dev, args)?,
                    other => return Err(CollectiveError::unsupported(format!("no kernel reduces {other}"))),
                }
            }
            Ok(())
        }
    }
}

type NativeArgs<'a> = (&'a Range<CubeBuffer>, &'a Range<CubeBuffer>, &'a Range<CubeBuffer>, usize, u32, u32);

/// How `n` elements of `size` bytes at element offsets `offs` split into launches: a body in
/// the widest vectors the runtime loads well that every offset is aligned to, then the last
/// few elements one by one. Each piece is (vector size, first element, elements).
fn vector_pieces<R: Runtime>(
    client: &ComputeClient<R>,
    size: usize,
    offs: &[usize],
    n: usize,
) -> [(usize, usize, usize); 2] {
    let v = client.io_optimized_vector_sizes(size).find(|&v| v > 0 && offs.iter().all(|o| o % v == 0)).unwrap_or(1);
    let body = n / v * v;
    [(v, 0, body), (1, body, n - body)]
}

fn reduce_native<R: Runtime, T: Numeric + CubeElement>(dev: &CubeDevice<R>, args: NativeArgs<'_>) -> Result<()> {
    let (dst, acc, src, n, op, fbits) = args;
    let size = std::mem::size_of::<T>();
    let elems = |h: &Handle| h.size_in_used() as usize / size;
    let (dh, ah, sh) = (dst.buf.handle(), acc.buf.handle(), src.buf.handle());
    let (d, a, s) = (dst.off / size, acc.off / size, src.off / size);
    for (v, first, len) in vector_pieces(dev.client(), size, &[d, a, s], n) {
        if len == 0 {
            continue;
        }
        let units = len / v;
        let (d_off, a_off, s_off) = (
            within((d + first) / v, units, elems(&dh) / v)?,
            within((a + first) / v, units, elems(&ah) / v)?,
            within((s + first) / v, units, elems(&sh) / v)?,
        );
        let units = u32_of(units, "a reduction")?;
        let (cubes, stride) = grid(units);
        contained(&dev.inner.name, "the reduce kernel", || {
            // SAFETY: each array covers its whole allocation (in whole vectors), and the
            // kernel touches only vectors `off + i` for `i < units` of each, which `within`
            // checked lie inside the array (with no `u32` overflow), so the unchecked
            // accesses stay in bounds.
            unsafe {
                native::reduce_native::launch_unchecked::<T, R>(
                    dev.client(),
                    count(cubes),
                    CubeDim::new_1d(CUBE_DIM),
                    v,
                    ArrayArg::from_raw_parts(dh.clone(), elems(&dh) / v),
                    d_off,
                    ArrayArg::from_raw_parts(ah.clone(), elems(&ah) / v),
                    a_off,
                    ArrayArg::from_raw_parts(sh.clone(), elems(&sh) / v),
                    s_off,
                    units,
                    stride,
                    op,
                    fbits,
                )
            }
        })?;
    }
    Ok(())
}

fn reduce_packed<R: Runtime>(
    dev: &CubeDevice<R>,
    dst: &Range<CubeBuffer>,
    acc: &Range<CubeBuffer>,
    srcs: &[Range<CubeBuffer>],
    n: usize,
    kind: u32,
    op: u32,
) -> Result<()> {
    let size = if kind == packed::F16 || kind == packed::BF16 { 2 } else { 1 };
    let per = 4 / size;
    let e = |r: &Range<CubeBuffer>| u32_of(r.off / size, "an offset");
    let d_off = e(dst)?;
    let words_touched = u32_of((dst.off / size + n).div_ceil(per) - dst.off / size / per, "a reduction")?;
    let n32 = u32_of(n, "a reduction")?;
    let float = size == 2;
    // 16-bit floats over several sources keep the running value in f32 and round once.
    let scratch = if float && srcs.len() > 1 {
        contained(&dev.inner.name, "scratch allocation", || dev.client().empty(n * 4))?
    } else {
        contained(&dev.inner.name, "scratch allocation", || dev.client().empty(4))?
    };
    let (cubes, stride) = grid(words_touched);
    let dh = dst.buf.handle();
    for (i, s) in srcs.iter().enumerate() {
        let last = i + 1 == srcs.len();
        let mode = match (float && srcs.len() > 1, i, last) {
            (false, _, _) => packed::DIRECT,
            (true, 0, _) => packed::FIRST,
            (true, _, true) => packed::LAST,
            (true, _, false) => packed::MIDDLE,
        };
        // The accumulator is read by the first step; later steps read `dst` or the scratch.
        let a = if i == 0 { acc } else { dst };
        let (ah, sh) = (a.buf.handle(), s.buf.handle());
        let (a_off, s_off) = (e(a)?, e(s)?);
        contained(&dev.inner.name, "the packed reduce kernel", || {
            packed::reduce_packed::launch::<R>(
                dev.client(),
                count(cubes),
                CubeDim::new_1d(CUBE_DIM),
                // SAFETY: each array covers its whole allocation; the kernel stays inside the
                // checked ranges.
                unsafe { ArrayArg::from_raw_parts(dh.clone(), words(&dh)) },
                d_off,
                unsafe { ArrayArg::from_raw_parts(ah.clone(), words(&ah)) },
                a_off,
                unsafe { ArrayArg::from_raw_parts(sh.clone(), words(&sh)) },
                s_off,
                unsafe { ArrayArg::from_raw_parts(scratch.clone(), words(&scratch)) },
                n32,
                words_touched,
                stride,
                kind,
                op,
                mode,
            )
        })?;
    }
    Ok(())
}

/// `dst = scale(src)`.
pub(super) fn scale<R: Runtime>(
    dev: &CubeDevice<R>,
    src: &Range<CubeBuffer>,
    dst: &Range<CubeBuffer>,
    dtype: DType,
    scale: Scale,
) -> Result<()> {
    let divide = matches!(scale, Scale::DivBy(_));
    // The factor in the element type, converted as the host kernels convert it.
    let (n_div, s_mul) = match scale {
        Scale::DivBy(n) => (n, 0.0),
        Scale::MulBy(s) => (1, s),
    };
    macro_rules! native {
        ($t:ty, $f:expr) => {
            scale_native::<R, $t>(dev, src, dst, if divide { n_div as $t } else { $f }, divide)
        };
    }
    match dtype {
        DType::F32 => native!(f32, s_mul as f32),
        DType::F64 => native!(f64, s_mul),
        DType::I32 => native!(i32, s_mul as i32),
        DType::U32 => native!(u32, s_mul as u32),
        DType::I64 => native!(i64, s_mul as i64),
        DType::U64 => native!(u64, s_mul as u64),
        DType::F16 => scale_packed(
            dev,
            src,
            dst,
            packed::F16,
            if divide { n_div as f32 } else { f16::from_f64(s_mul).to_f32() },
            0,
            divide,
        ),
        DType::BF16 => scale_packed(
            dev,
            src,
            dst,
            packed::BF16,
            if divide { n_div as f32 } else { bf16::from_f64(s_mul).to_f32() },
            0,
            divide,
        ),
        DType::I8 => scale_packed(
            dev,
            src,
            dst,
            packed::I8,
            0.0,
            if divide { n_div.min(i32::MAX as u64) as i32 } else { i32::from(s_mul as i8) },
            divide,
        ),
        DType::U8 => scale_packed(
            dev,
            src,
            dst,
            packed::U8,
            0.0,
            if divide { n_div.min(i32::MAX as u64) as i32 } else { i32::from(s_mul as u8) },
            divide,
        ),
    }
}

fn scale_native<R: Runtime, T: Numeric + CubeElement>(
    dev: &CubeDevice<R>,
    src: &Range<CubeBuffer>,
    dst: &Range<CubeBuffer>,
    factor: T,
    divide: bool,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let elems = |h: &Handle| h.size_in_used() as usize / size;
    let (dh, sh) = (dst.buf.handle(), src.buf.handle());
    let (d, s) = (dst.off / size, src.off / size);
    for (v, first, len) in vector_pieces(dev.client(), size, &[d, s], dst.len / size) {
        if len == 0 {
            continue;
        }
        let units = len / v;
        let (d_off, s_off) =
            (within((d + first) / v, units, elems(&dh) / v)?, within((s + first) / v, units, elems(&sh) / v)?);
        let units = u32_of(units, "a scale")?;
        let (cubes, stride) = grid(units);
        contained(&dev.inner.name, "the scale kernel", || {
            // SAFETY: as in `reduce_native`: whole allocations, and `within` checked that
            // vectors `off..off + units` of each lie inside them.
            unsafe {
                native::scale_native::launch_unchecked::<T, R>(
                    dev.client(),
                    count(cubes),
                    CubeDim::new_1d(CUBE_DIM),
                    v,
                    ArrayArg::from_raw_parts(dh.clone(), elems(&dh) / v),
                    d_off,
                    ArrayArg::from_raw_parts(sh.clone(), elems(&sh) / v),
                    s_off,
                    factor,
                    units,
                    stride,
                    divide,
                )
            }
        })?;
    }
    Ok(())
}

fn scale_packed<R: Runtime>(
    dev: &CubeDevice<R>,
    src: &Range<CubeBuffer>,
    dst: &Range<CubeBuffer>,
    kind: u32,
    ffactor: f32,
    ifactor: i32,
    divide: bool,
) -> Result<()> {
    let size = if kind == packed::F16 || kind == packed::BF16 { 2 } else { 1 };
    let per = 4 / size;
    let n = dst.len / size;
    let (dh, sh) = (dst.buf.handle(), src.buf.handle());
    let (d_off, s_off) = (u32_of(dst.off / size, "an offset")?, u32_of(src.off / size, "an offset")?);
    let touched = u32_of((dst.off / size + n).div_ceil(per) - dst.off / size / per, "a scale")?;
    let n = u32_of(n, "a scale")?;
    let (cubes, stride) = grid(touched);
    contained(&dev.inner.name, "the packed scale kernel", || {
        packed::scale_packed::launch::<R>(
            dev.client(),
            count(cubes),
            CubeDim::new_1d(CUBE_DIM),
            // SAFETY: each array covers its whole allocation; the kernel stays inside the
            // checked ranges.
            unsafe { ArrayArg::from_raw_parts(dh.clone(), words(&dh)) },
            d_off,
            unsafe { ArrayArg::from_raw_parts(sh.clone(), words(&sh)) },
            s_off,
            ffactor,
            ifactor,
            n,
            touched,
            stride,
            kind,
            divide,
        )
    })
}
