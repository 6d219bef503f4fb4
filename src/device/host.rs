//! The host device: tensors in CPU memory, kernels as vectorisable loops. It is the
//! reference every other device is tested against, and the default that runs anywhere.

use std::time::Instant;

use super::{Device, kernels, stream};
use crate::error::{CollectiveError, Result};
use crate::mem::HostMem;
use crate::types::{Combine, DType, Scale};

/// CPU memory as a ruCCL device.
///
/// Every `HostDevice` is the same memory; the `ordinal` only exists so that a program (or a
/// test) can keep tensors of different logical devices apart: a communicator built on
/// `HostDevice::new(0)` rejects tensors made on `HostDevice::new(1)`.
///
/// ```
/// use ruccl::{HostDevice, Tensor};
/// let dev = HostDevice::default();
/// let t = Tensor::from_slice(&dev, &[1.0f32, 2.0, 3.0], &[3])?;
/// assert_eq!(t.to_vec::<f32>()?, vec![1.0, 2.0, 3.0]);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HostDevice {
    ordinal: u32,
}

impl HostDevice {
    /// The host device with a given logical ordinal.
    pub fn new(ordinal: u32) -> Self {
        HostDevice { ordinal }
    }

    /// The logical ordinal.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }
}

fn check(mem: &HostMem, off: usize, len: usize, what: &str) -> Result<()> {
    if mem.check(off, len) {
        Ok(())
    } else {
        Err(CollectiveError::device(format!(
            "{what}: range {off}..{} is outside a {}-byte host buffer",
            off.saturating_add(len),
            mem.len()
        )))
    }
}

/// Whether two ranges of the same block overlap without being identical.
fn partial_overlap(a: &HostMem, a_off: usize, b: &HostMem, b_off: usize, len: usize) -> bool {
    a.same(b) && a_off != b_off && a_off < b_off + len && b_off < a_off + len
}

impl Device for HostDevice {
    type Buffer = HostMem;

    fn describe(&self) -> String {
        format!("host:{}", self.ordinal)
    }

    fn same_device(&self, other: &Self) -> bool {
        self.ordinal == other.ordinal
    }

    fn supports(&self, _dtype: DType) -> bool {
        true
    }

    fn alloc(&self, bytes: usize) -> Result<HostMem> {
        Ok(HostMem::zeroed(bytes))
    }

    fn len(&self, buf: &HostMem) -> usize {
        buf.len()
    }

    fn upload(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        check(dst, off, src.len(), "upload")?;
        // SAFETY: in range; the scheduler never writes a range that is lent or being read.
        stream::copy(unsafe { dst.bytes_mut(off, src.len()) }, src);
        Ok(())
    }

    fn download(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        check(src, off, dst.len(), "download")?;
        // SAFETY: in range; reading is allowed while nobody writes the range.
        dst.copy_from_slice(unsafe { src.bytes(off, dst.len()) });
        Ok(())
    }

    fn copy(&self, src: &HostMem, src_off: usize, dst: &HostMem, dst_off: usize, len: usize) -> Result<()> {
        check(src, src_off, len, "copy source")?;
        check(dst, dst_off, len, "copy destination")?;
        if src.same(dst) && src_off == dst_off {
            return Ok(());
        }
        if partial_overlap(src, src_off, dst, dst_off, len) {
            return Err(CollectiveError::device("copy between overlapping ranges"));
        }
        // SAFETY: both in range and disjoint (checked above).
        unsafe { stream::copy(dst.bytes_mut(dst_off, len), src.bytes(src_off, len)) };
        Ok(())
    }

    fn reduce_host(
        &self,
        dst: &HostMem,
        dst_off: usize,
        acc: &HostMem,
        acc_off: usize,
        incoming: &[u8],
        dtype: DType,
        combine: Combine,
    ) -> Result<()> {
        self.reduce_host_many(dst, dst_off, acc, acc_off, &[incoming], dtype, combine)
    }

    fn reduce_host_many(
        &self,
        dst: &HostMem,
        dst_off: usize,
        acc: &HostMem,
        acc_off: usize,
        incoming: &[&[u8]],
        dtype: DType,
        combine: Combine,
    ) -> Result<()> {
        let Some(len) = incoming.first().map(|s| s.len()) else { return Ok(()) };
        check(dst, dst_off, len, "reduce destination")?;
        check(acc, acc_off, len, "reduce accumulator")?;
        if partial_overlap(acc, acc_off, dst, dst_off, len) {
            return Err(CollectiveError::device("reduce between overlapping ranges"));
        }
        let d0 = dst.base() as usize + dst_off;
        if incoming
            .iter()
            .any(|s| s.len() != len || (len > 0 && d0 < s.as_ptr() as usize + len && (s.as_ptr() as usize) < d0 + len))
        {
            return Err(CollectiveError::device("fused reduce sources differ in length or overlap the destination"));
        }
        // SAFETY: as in `reduce_host`: in bounds, destination disjoint from every source and
        // identical to or disjoint from the accumulator.
        unsafe {
            let d = dst.bytes_mut(dst_off, len);
            let a = if acc.same(dst) && acc_off == dst_off { None } else { Some(acc.bytes(acc_off, len)) };
            kernels::reduce_many(dtype, combine, d, a, incoming)
        }
    }

    fn scale(
        &self,
        src: &HostMem,
        src_off: usize,
        dst: &HostMem,
        dst_off: usize,
        count: usize,
        dtype: DType,
        scale: Scale,
    ) -> Result<()> {
        let len = count.checked_mul(dtype.size()).ok_or_else(|| CollectiveError::device("scale length overflows"))?;
        check(src, src_off, len, "scale source")?;
        check(dst, dst_off, len, "scale destination")?;
        if partial_overlap(src, src_off, dst, dst_off, len) {
            return Err(CollectiveError::device("scale between overlapping ranges"));
        }
        // SAFETY: in bounds; identical or disjoint ranges (checked above).
        unsafe {
            let d = dst.bytes_mut(dst_off, len);
            let s = if src.same(dst) && src_off == dst_off { None } else { Some(src.bytes(src_off, len)) };
            kernels::scale(dtype, scale, d, s)
        }
    }

    fn host_view(&self, buf: &HostMem) -> Option<HostMem> {
        Some(buf.clone())
    }

    fn synchronize(&self, _deadline: Option<Instant>) -> Result<()> {
        Ok(())
    }
}
