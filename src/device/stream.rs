//! Copies that bypass the cache for large destinations. A large collective writes far more
//! than the caches hold, and ordinary stores first read every destination line in (a third
//! more memory traffic than a streaming `memcpy`); non-temporal stores skip that read.

/// Destinations at least this large are written with non-temporal stores.
pub(crate) const STREAM_MIN_BYTES: usize = 1 << 20;

/// `dst.copy_from_slice(src)`, with non-temporal stores for large copies on x86-64.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    if dst.len() >= STREAM_MIN_BYTES && dst.len() == src.len() {
        // SAFETY: lengths are equal; SSE2 is part of the x86-64 baseline.
        unsafe { stream_x86_64(dst, src) };
        return;
    }
    dst.copy_from_slice(src);
}

/// Makes earlier non-temporal stores visible before the caller publishes the data.
pub(crate) fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline; a fence has no other effect.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Copies `src` into `dst` with non-temporal stores, then fences.
///
/// # Safety
/// `dst` and `src` must have the same length, and the CPU must support SSE2 (always true on
/// x86-64, where this is compiled).
#[cfg(target_arch = "x86_64")]
unsafe fn stream_x86_64(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let len = dst.len();
    let head = dst.as_ptr().align_offset(16).min(len);
    dst[..head].copy_from_slice(&src[..head]);
    let body_end = head + (len - head) / 64 * 64;
    let mut i = head;
    while i < body_end {
        // SAFETY: `i..i + 64` is inside both slices; `dst + i` is 16-byte aligned (after the
        // head), as `_mm_stream_si128` requires; loads are unaligned.
        unsafe {
            let s = src.as_ptr().add(i).cast::<__m128i>();
            let d = dst.as_mut_ptr().add(i).cast::<__m128i>();
            let (a, b, c, e) =
                (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)), _mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        i += 64;
    }
    dst[body_end..].copy_from_slice(&src[body_end..]);
    fence();
}

#[cfg(test)]
mod tests {
    #[test]
    fn copies_every_byte_at_any_alignment() {
        let src: Vec<u8> = (0..super::STREAM_MIN_BYTES + 300).map(|i| (i * 7 % 251) as u8).collect();
        for shift in [0, 1, 3, 8, 15] {
            let mut dst = vec![0u8; src.len()];
            super::copy(&mut dst[shift..], &src[shift..]);
            assert_eq!(&dst[shift..], &src[shift..]);
        }
    }
}
