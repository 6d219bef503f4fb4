//! Byte copies between ranges at any byte offset, on `u32` words: each unit owns one
//! destination word, keeps the bytes of it outside the range, and gathers the others from
//! the source (a whole-word move when both ranges share their alignment).

use cubecl::prelude::*;

/// `dst` bytes `[dst_off, dst_off + len)` = `src` bytes `[src_off, src_off + len)`.
/// `words` is the number of destination words the range touches.
#[cube(launch)]
pub fn copy_bytes(
    dst: &mut Array<u32>,
    dst_off: u32,
    src: &Array<u32>,
    src_off: u32,
    len: u32,
    words: u32,
    stride: u32,
) {
    let first = dst_off / 4;
    let end = dst_off + len;
    let mut t = ABSOLUTE_POS as u32;
    while t < words {
        let w = first + t;
        let lo = w * 4;
        if lo >= dst_off && lo + 4 <= end && (src_off % 4) == (dst_off % 4) {
            dst[w as usize] = src[((lo - dst_off + src_off) / 4) as usize];
        } else {
            let mut word = dst[w as usize];
            for b in 0..4u32 {
                let at = lo + b;
                if at >= dst_off && at < end {
                    let s = at - dst_off + src_off;
                    let byte = (src[(s / 4) as usize] >> ((s % 4) * 8)) & 0xffu32;
                    let shift = b * 8;
                    word = (word & !(0xffu32 << shift)) | (byte << shift);
                }
            }
            dst[w as usize] = word;
        }
        t += stride;
    }
}

/// `dst[first..first + words] = value` (zeroing fresh allocations).
#[cube(launch)]
pub fn fill_words(dst: &mut Array<u32>, first: u32, words: u32, value: u32, stride: u32) {
    let mut t = ABSOLUTE_POS as u32;
    while t < words {
        dst[(first + t) as usize] = value;
        t += stride;
    }
}
