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

/// Whether two ranges of the same block overlap without being identical.
fn partial_overlap(a: &HostMem, a_off: usize, b: &HostMem, b_off: usize, len: usize) -> bool {
    a.same(b) && a_off != b_off && a_off < b_off + len && b_off < a_off + len
}

/// Whether `a_off..a_off + len` of `a` is exactly `b_off..b_off + len` of `b`.
fn identical(a: &HostMem, a_off: usize, b: &HostMem, b_off: usize) -> bool {
    a.same(b) && a_off == b_off
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
        HostMem::zeroed(bytes)
    }

    fn mem_id(&self, buf: &HostMem) -> usize {
        buf.id()
    }

    fn len(&self, buf: &HostMem) -> usize {
        buf.len()
    }

    fn upload(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        stream::copy(&mut dst.write(off, src.len())?, src);
        Ok(())
    }

    fn download(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        dst.copy_from_slice(&src.read(off, dst.len())?);
        Ok(())
    }

    fn copy(&self, src: &HostMem, src_off: usize, dst: &HostMem, dst_off: usize, len: usize) -> Result<()> {
        if identical(src, src_off, dst, dst_off) {
            // Still a bounds check, but nothing to move.
            return src.read(src_off, len).map(drop);
        }
        if partial_overlap(src, src_off, dst, dst_off, len) {
            return Err(CollectiveError::device("copy between overlapping ranges"));
        }
        let s = src.read(src_off, len)?;
        stream::copy(&mut dst.write(dst_off, len)?, &s);
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
        if partial_overlap(acc, acc_off, dst, dst_off, len) {
            return Err(CollectiveError::device("reduce between overlapping ranges"));
        }
        if incoming.iter().any(|s| s.len() != len) {
            return Err(CollectiveError::device("fused reduce sources differ in length"));
        }
        // The accumulator is read before the destination is claimed; an incoming slice that
        // aliases the destination is held by a read guard of its own, so the write is refused.
        let a = if identical(acc, acc_off, dst, dst_off) { None } else { Some(acc.read(acc_off, len)?) };
        let mut d = dst.write(dst_off, len)?;
        kernels::reduce_many(dtype, combine, &mut d, a.as_deref(), incoming)
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
        if partial_overlap(src, src_off, dst, dst_off, len) {
            return Err(CollectiveError::device("scale between overlapping ranges"));
        }
        let s = if identical(src, src_off, dst, dst_off) { None } else { Some(src.read(src_off, len)?) };
        let mut d = dst.write(dst_off, len)?;
        kernels::scale(dtype, scale, &mut d, s.as_deref())
    }

    fn host_view(&self, buf: &HostMem) -> Option<HostMem> {
        Some(buf.clone())
    }

    fn synchronize(&self, _deadline: Option<Instant>) -> Result<()> {
        Ok(())
    }
}
