//! The host device: tensors in CPU memory, kernels as vectorisable loops. It is the
//! reference every other device is tested against, and the default that runs anywhere.

use std::time::Instant;

use super::{Device, Range, Reach, Source, kernels, stream};
use crate::error::{CollectiveError, Result};
use crate::mem::{HostMem, HostRegion};
use crate::pins::{self, Held};
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

/// The host device's event: its work is done by the time the call returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostEvent;

/// Bytes of a reduction source, read-guarded for the duration of the kernel.
fn source_guard(src: &Source<HostMem>) -> Result<crate::mem::ReadGuard<'_>> {
    match src {
        Source::Host(r) => r.read(),
        Source::Device(r) => r.buf.read(r.off, r.len),
    }
}

/// Host bytes into `dst[off..]` (the device's own path: no pending-op check).
fn put(dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
    stream::copy(&mut dst.write(off, src.len())?, src);
    Ok(())
}

/// `src[off..off + dst.len()]` to host bytes (the device's own path: no pending-op check).
fn get(src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
    dst.copy_from_slice(&src.read(off, dst.len())?);
    Ok(())
}

impl Device for HostDevice {
    type Buffer = HostMem;
    type Event = HostEvent;

    fn describe(&self) -> String {
        format!("host:{}", self.ordinal)
    }

    fn same_device(&self, other: &Self) -> bool {
        self.ordinal == other.ordinal
    }

    fn reach(&self, _other: &Self) -> Reach {
        // Every host device is the same memory.
        Reach::Same
    }

    fn supports(&self, _dtype: DType) -> bool {
        true
    }

    fn alloc(&self, bytes: usize) -> Result<HostMem> {
        HostMem::zeroed(bytes)
    }

    fn alloc_staging(&self, bytes: usize) -> Result<HostMem> {
        HostMem::zeroed(bytes)
    }

    fn len(&self, buf: &HostMem) -> usize {
        buf.len()
    }

    fn mem_id(&self, buf: &HostMem) -> usize {
        buf.id()
    }

    fn write(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        pins::check_device(Held::of::<Self>(dst.id(), off, src.len(), true), "Device::write")?;
        put(dst, off, src)
    }

    fn read(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        pins::check_device(Held::of::<Self>(src.id(), off, dst.len(), false), "Device::read")?;
        get(src, off, dst)
    }

    fn upload(&self, dst: &Range<HostMem>, src: &HostRegion) -> Result<HostEvent> {
        if src.len != dst.len {
            return Err(CollectiveError::device(format!("upload of {} bytes into {}", src.len, dst.len)));
        }
        put(&dst.buf, dst.off, &src.read()?)?;
        Ok(HostEvent)
    }

    fn download(&self, src: &Range<HostMem>, dst: &HostRegion) -> Result<HostEvent> {
        if src.len != dst.len {
            return Err(CollectiveError::device(format!("download of {} bytes into {}", src.len, dst.len)));
        }
        get(&src.buf, src.off, &mut dst.mem.write(dst.off, dst.len)?)?;
        Ok(HostEvent)
    }

    fn copy(&self, src: &Range<HostMem>, dst: &Range<HostMem>) -> Result<HostEvent> {
        let len = src.len;
        if dst.len != len {
            return Err(CollectiveError::device(format!("copy of {len} bytes into {}", dst.len)));
        }
        if identical(&src.buf, src.off, &dst.buf, dst.off) {
            // Still a bounds check, but nothing to move.
            return src.buf.read(src.off, len).map(|_| HostEvent);
        }
        if partial_overlap(&src.buf, src.off, &dst.buf, dst.off, len) {
            return Err(CollectiveError::device("copy between overlapping ranges"));
        }
        let s = src.buf.read(src.off, len)?;
        stream::copy(&mut dst.buf.write(dst.off, len)?, &s);
        Ok(HostEvent)
    }

    fn reduce(
        &self,
        dst: &Range<HostMem>,
        acc: &Range<HostMem>,
        srcs: &[Source<HostMem>],
        dtype: DType,
        combine: Combine,
    ) -> Result<HostEvent> {
        let len = dst.len;
        if acc.len != len || srcs.iter().any(|s| s.len() != len) {
            return Err(CollectiveError::device("reduce ranges differ in length"));
        }
        if srcs.is_empty() {
            return self.copy(acc, dst);
        }
        if partial_overlap(&acc.buf, acc.off, &dst.buf, dst.off, len) {
            return Err(CollectiveError::device("reduce between overlapping ranges"));
        }
        // Sources and the accumulator are read-guarded before the destination is claimed: a
        // source that aliases the destination makes the write guard refuse, never race.
        // Pushed one by one: a `Result` collect goes through an adapter that costs more than
        // the few sources themselves.
        let mut guards: smallvec::SmallVec<[_; 4]> = smallvec::SmallVec::with_capacity(srcs.len());
        for s in srcs {
            guards.push(source_guard(s)?);
        }
        let mut inputs: smallvec::SmallVec<[&[u8]; 4]> = smallvec::SmallVec::with_capacity(guards.len());
        for g in &guards {
            inputs.push(&**g);
        }
        let a = if identical(&acc.buf, acc.off, &dst.buf, dst.off) { None } else { Some(acc.buf.read(acc.off, len)?) };
        let mut d = dst.buf.write(dst.off, len)?;
        let store = kernels::Store::for_buffers(dst.buf.len().max(acc.buf.len()));
        kernels::reduce_many_with(dtype, combine, &mut d, a.as_deref(), &inputs, store)?;
        Ok(HostEvent)
    }

    fn scale(&self, src: &Range<HostMem>, dst: &Range<HostMem>, dtype: DType, scale: Scale) -> Result<HostEvent> {
        let len = dst.len;
        if src.len != len {
            return Err(CollectiveError::device("scale ranges differ in length"));
        }
        if partial_overlap(&src.buf, src.off, &dst.buf, dst.off, len) {
            return Err(CollectiveError::device("scale between overlapping ranges"));
        }
        let s = if identical(&src.buf, src.off, &dst.buf, dst.off) { None } else { Some(src.buf.read(src.off, len)?) };
        let mut d = dst.buf.write(dst.off, len)?;
        kernels::scale(dtype, scale, &mut d, s.as_deref())?;
        Ok(HostEvent)
    }

    fn poll(&self, _event: &HostEvent) -> Result<bool> {
        Ok(true)
    }

    fn wait(&self, _event: &HostEvent, _deadline: Option<Instant>) -> Result<()> {
        Ok(())
    }

    fn host_memory(&self) -> bool {
        true
    }

    fn host_view(&self, buf: &HostMem) -> Option<HostMem> {
        Some(buf.clone())
    }

    fn host_mem<'b>(&self, buf: &'b HostMem) -> Option<&'b HostMem> {
        Some(buf)
    }

    fn is_exclusive(&self, buf: &HostMem) -> bool {
        buf.is_private()
    }

    fn synchronize(&self, _deadline: Option<Instant>) -> Result<()> {
        Ok(())
    }
}
