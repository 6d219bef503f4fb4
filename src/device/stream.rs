//! Copies that bypass the cache for large destinations. A large collective writes far more
//! than the caches hold, and ordinary stores first read every destination line in (a third
//! more memory traffic than a streaming `memcpy`); non-temporal stores skip that read.

/// Destinations at least this large are written with non-temporal stores.
pub(crate) const STREAM_MIN_BYTES: usize = 1 << 20;

/// A reduction streams its destination (where it is only written,
/// `kernels::Store::Streamed`) when the buffers it reads or writes are at least this
/// large: an op of this size leaves nothing in the cache worth keeping. A reduction sees one
/// chunk of its op at a time (1 MiB by default), so its own length cannot tell a 16 MiB op
/// from a 256 MiB one. Below this, its destination lines are read again soon (sent on or lent
/// to peers), and plain stores keep them in the cache. Measured (PERFORMANCE.md, session 38,
/// out of place, streamed against plain): 64 MiB all_reduce 4 processes 68-70 -> 55-59 ms,
/// reduce_scatter 44 -> 35; 256 MiB 2 processes all_reduce 87-96 -> 76, 4 threads
/// reduce_scatter 66-67 -> 59-60; but 16 MiB all_reduce 2 processes 3.3-3.7 -> 3.7-3.9 ms
/// and 4 threads 5.4-5.7 -> 5.9-6.3.
pub(crate) const STREAM_BUFFER_MIN: usize = 32 << 20;

/// `dst.copy_from_slice(src)`, with non-temporal stores for large copies on x86-64.
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    if dst.len() >= STREAM_MIN_BYTES {
        copy_streaming(dst, src);
    } else {
        dst.copy_from_slice(src);
    }
}

/// `dst.copy_from_slice(src)` with non-temporal stores whatever its length (on x86-64): one
/// tile of a large destination written tile by tile, whose caller made [`copy`]'s size
/// decision for the whole destination (a tile alone is below [`STREAM_MIN_BYTES`]).
pub(crate) fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    debug_assert_eq!(dst.len(), src.len());
    #[cfg(target_arch = "x86_64")]
    if dst.len() == src.len() {
        // SAFETY: lengths are equal; SSE2 is part of the x86-64 baseline.
        unsafe { stream_x86_64(dst, src) };
        return;
    }
    dst.copy_from_slice(src);
}

/// Asks for every cache line of `bytes` with intent to write (`PREFETCHW`), where the CPU has
/// it (elsewhere nothing happens): for a destination that is read and then written, such as
/// an in-place reduction's. When another core has read those lines since this one last wrote
/// them (a peer's single-copy receive), each load would fetch the line shared and each store
/// then take it over in a second transfer, one line after the other; asked for ahead, the
/// lines come once, owned, many at a time. Measured (`benches/study/in_place_after_peer_read.c`,
/// 32 KiB after a peer's read): 8-16 us a pass, 4.7-5.6 with the lines asked for first.
pub(crate) fn prefetch_for_write(bytes: &[u8]) {
    for line in bytes.chunks(64) {
        crate::cpu::prefetch_write(line.as_ptr());
    }
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
    /// A hint over any slice, empty or not line-aligned, changes no byte.
    #[test]
    fn prefetch_for_write_changes_nothing() {
        let bytes: Vec<u8> = (0..1000).map(|i| (i * 13 % 251) as u8).collect();
        for (lo, hi) in [(0, 0), (0, 1000), (3, 70), (999, 1000)] {
            super::prefetch_for_write(&bytes[lo..hi]);
        }
        assert!(bytes.iter().enumerate().all(|(i, &b)| b == (i * 13 % 251) as u8));
    }

    #[test]
    fn copies_every_byte_at_any_alignment() {
        let src: Vec<u8> = (0..super::STREAM_MIN_BYTES + 300).map(|i| (i * 7 % 251) as u8).collect();
        for shift in [0, 1, 3, 8, 15] {
            let mut dst = vec![0u8; src.len()];
            super::copy(&mut dst[shift..], &src[shift..]);
            assert_eq!(&dst[shift..], &src[shift..]);
        }
    }

    /// A streamed tile of any length: shorter than a line, no whole line after the head,
    /// whole lines, and a tail. (Not under Miri, which runs neither `movntdq` nor `sfence`:
    /// the streaming copy's `unsafe` is checked by these tests natively.)
    #[test]
    fn streams_a_tile_of_any_length() {
        let src: Vec<u8> = (0..5000).map(|i| (i * 7 % 251) as u8).collect();
        for (shift, len) in [(0, 0), (3, 5), (1, 70), (0, 64), (7, 4096 + 13)] {
            let mut dst = vec![0u8; shift + len];
            super::copy_streaming(&mut dst[shift..], &src[shift..shift + len]);
            assert_eq!(&dst[shift..], &src[shift..shift + len], "shift {shift}, {len} bytes");
        }
    }
}
