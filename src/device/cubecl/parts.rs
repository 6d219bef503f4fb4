//! Buffers larger than one binding. A runtime binds at most so many bytes to one kernel
//! argument (128 MiB on lavapipe; the client's `max_page_size`, which is also the largest
//! allocation), so a [`CubeBuffer`] is a row of parts, each a CubeCL handle of at most that
//! size. Every operation is cut into pieces that lie within one part of each buffer it
//! touches; each piece is its own launch or transfer, in order on the device's one stream.
//! A buffer of one part (every buffer below the limit) is its own single piece.

use std::sync::Arc;

use super::{BufInner, CubeBuffer};
use crate::device::Range;

/// Views of parts other than the first get ids above this (buffer ids count up from 1 and
/// stay far below it), so a view is never mistaken for another buffer or another part.
const PART_ID: usize = 1 << 40;

impl CubeBuffer {
    /// Part `k` as a buffer of its own (the same memory; no copy).
    fn part(&self, k: usize) -> CubeBuffer {
        let inner = &self.inner;
        if inner.parts.len() == 1 {
            return self.clone();
        }
        let len = inner.len.saturating_sub(k * inner.part_len).min(inner.part_len);
        CubeBuffer {
            inner: Arc::new(BufInner {
                parts: vec![inner.parts[k].clone()],
                part_len: inner.part_len,
                len,
                id: inner.id + k * PART_ID,
                device: inner.device,
            }),
        }
    }
}

/// Bytes `[pos, pos + len)` of `r`, which lie in one part of its buffer, as a range of that
/// part.
pub(super) fn piece(r: &Range<CubeBuffer>, pos: usize, len: usize) -> Range<CubeBuffer> {
    let at = r.off + pos;
    let part_len = r.buf.inner.part_len;
    if r.buf.inner.parts.len() == 1 {
        return Range::new(r.buf.clone(), at, len);
    }
    debug_assert!(at % part_len + len <= part_len, "a piece crosses a part boundary");
    Range::new(r.buf.part(at / part_len), at % part_len, len)
}

/// `[pos, pos + len)` pieces of an operation on `len` bytes that starts at byte `off` of each
/// buffer in `ops`: no piece crosses a part boundary of any of them, and none is longer than
/// `cap`. Offsets and part sizes are multiples of the element size, so pieces are too.
pub(super) fn pieces(ops: &[(&CubeBuffer, usize)], len: usize, cap: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(1);
    let mut pos = 0;
    while pos < len {
        let mut step = (len - pos).min(cap.max(1));
        for (buf, off) in ops {
            if buf.inner.parts.len() > 1 {
                let part_len = buf.inner.part_len;
                step = step.min(part_len - (off + pos) % part_len);
            }
        }
        out.push((pos, step));
        pos += step;
    }
    out
}
