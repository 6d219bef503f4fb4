//! The host kernels' tests: every dtype and combine, bad lengths, the small and tiled
//! folds' order, streamed outputs, bf16 narrowing, packed parts.

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
            reduce_many(dt, c, &mut o.write(0, n).unwrap(), Some(&a.read(0, n).unwrap()), &[&s.read(0, n).unwrap()])
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
                    // Parts of whole words fold in place in the words, the same bits; the
                    // half types are left to `reduce_packed`, untouched.
                    if len.is_multiple_of(8) {
                        let mut w = buf.clone();
                        let folded = reduce_words(dt, c, &mut w, len / 8, n);
                        let half = matches!(dt, DType::F16 | DType::BF16);
                        assert_eq!(folded, !half, "{dt}");
                        if folded {
                            assert_eq!(
                                &bytemuck::cast_slice::<u64, u8>(&w)[..len],
                                &all(&want)[..],
                                "{dt}, {c:?}, {n}"
                            );
                        } else {
                            assert_eq!(w, buf, "{dt}: left as it was");
                        }
                    }
                }
            }
        }
    }
    let d = aligned(&[0; 8]);
    for parts in [&[0u8; 12][..], &[0u8; 0][..]] {
        assert!(reduce_packed(DType::F32, Combine::Sum, &mut d.write(0, 8).unwrap(), parts).is_err());
    }
    assert!(reduce_packed(DType::F64, Combine::Sum, &mut d.write(0, 4).unwrap(), &[0u8; 8]).is_err());
    // Words that are not `n` whole parts are refused, untouched.
    for (len, part, n) in [(5, 2, 2), (4, 2, 3), (4, 0, 2), (0, 0, 0)] {
        let mut w = vec![7u64; len];
        assert!(!reduce_words(DType::F32, Combine::Sum, &mut w, part, n), "{len} words, {n} parts of {part}");
        assert_eq!(w, vec![7u64; len]);
    }
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
        reduce_many_with(DType::F32, Combine::Sum, &mut out.write(0, len).unwrap(), Some(&acc), &srcs, store).unwrap();
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
