//! [`CubeDevice`]'s side of the [`Device`] contract: allocation, transfers, copies and
//! reductions enqueued on the device's one stream, and their events.

use std::sync::atomic::Ordering;
use std::time::Instant;

use cubecl::Runtime;

use super::{
    CubeBuffer, CubeDevice, CubeEvent, contained, event, identical, launch, pad, part_len, partial_overlap, parts,
};
use crate::device::{Device, Range, Reach, Source};
use crate::error::{CollectiveError, Result};
use crate::mem::{HostMem, HostRegion};
use crate::types::{Combine, DType, Scale};

impl<R: Runtime> Device for CubeDevice<R> {
    type Buffer = CubeBuffer;
    type Event = CubeEvent;

    fn describe(&self) -> String {
        self.inner.name.clone()
    }

    fn same_device(&self, other: &Self) -> bool {
        self.inner.id == other.inner.id
    }

    fn reach(&self, other: &Self) -> Reach {
        if self.same_device(other) { Reach::Same } else { Reach::Host }
    }

    fn supports(&self, dtype: DType) -> bool {
        launch::supports(self.client(), dtype)
    }

    fn alloc(&self, bytes: usize) -> Result<CubeBuffer> {
        if bytes > self.inner.memory {
            return Err(CollectiveError::device(format!(
                "{}: cannot allocate {bytes} bytes: more than the device's {} bytes of memory",
                self.inner.name, self.inner.memory
            )));
        }
        let size = pad(bytes);
        let part_len = self.inner.part_len;
        let mut parts = Vec::with_capacity(size.div_ceil(part_len));
        for first in (0..size).step_by(part_len) {
            let part = (size - first).min(part_len);
            let handle = contained(&self.inner.name, "allocation", || self.client().empty(part))?;
            // CubeCL hands out reused, uninitialised memory; the contract promises zeroes.
            launch::fill(self.client(), &handle, part / 4, 0, &self.inner.name)?;
            parts.push(handle);
        }
        Ok(self.wrap_parts(parts, bytes))
    }

    fn alloc_staging(&self, bytes: usize) -> Result<HostMem> {
        HostMem::zeroed(bytes)
    }

    fn len(&self, buf: &CubeBuffer) -> usize {
        buf.inner.len
    }

    fn mem_id(&self, buf: &CubeBuffer) -> usize {
        buf.inner.id
    }

    fn write(&self, dst: &CubeBuffer, off: usize, src: &[u8]) -> Result<()> {
        crate::pins::check_device(crate::pins::Held::of::<Self>(dst.inner.id, off, src.len(), true), "Device::write")?;
        let mem = HostMem::zeroed(src.len())?;
        mem.write(0, src.len())?.copy_from_slice(src);
        let ev = self.upload(&Range::new(dst.clone(), off, src.len()), &HostRegion { mem, off: 0, len: src.len() })?;
        self.wait(&ev, None)
    }

    fn read(&self, src: &CubeBuffer, off: usize, dst: &mut [u8]) -> Result<()> {
        crate::pins::check_device(crate::pins::Held::of::<Self>(src.inner.id, off, dst.len(), false), "Device::read")?;
        let mem = HostMem::zeroed(dst.len())?;
        let region = HostRegion { mem: mem.clone(), off: 0, len: dst.len() };
        let ev = self.download(&Range::new(src.clone(), off, dst.len()), &region)?;
        self.wait(&ev, None)?;
        dst.copy_from_slice(&mem.read(0, dst.len())?);
        Ok(())
    }

    fn upload(&self, dst: &Range<CubeBuffer>, src: &HostRegion) -> Result<CubeEvent> {
        self.check_range(dst, "upload")?;
        if src.len != dst.len {
            return Err(CollectiveError::device(format!("upload of {} bytes into {}", src.len, dst.len)));
        }
        if dst.len == 0 {
            return Ok(CubeEvent::done());
        }
        self.inner.host_bytes.fetch_add(dst.len, Ordering::Relaxed);
        let bytes = src.read()?;
        for (pos, n) in parts::pieces(&[(&dst.buf, dst.off)], dst.len, usize::MAX) {
            let d = parts::piece(dst, pos, n);
            self.write_bytes(&d.buf, d.off, &bytes[pos..pos + n])?;
        }
        self.event()
    }

    fn download(&self, src: &Range<CubeBuffer>, dst: &HostRegion) -> Result<CubeEvent> {
        self.check_range(src, "download")?;
        if src.len != dst.len {
            return Err(CollectiveError::device(format!("download of {} bytes into {}", src.len, dst.len)));
        }
        if !dst.mem.check(dst.off, dst.len) {
            return Err(CollectiveError::device(format!("{}: download into a bad host range", self.inner.name)));
        }
        if src.len == 0 {
            return Ok(CubeEvent::done());
        }
        // Reads start and end on word boundaries (one read per part; pieces after the first
        // start on a part boundary, so they join up); the event copies out the wanted bytes.
        let mut handles = Vec::with_capacity(1);
        for (pos, n) in parts::pieces(&[(&src.buf, src.off)], src.len, usize::MAX) {
            let s = parts::piece(src, pos, n);
            let start = s.off / 4 * 4;
            let end = (s.off + n).div_ceil(4) * 4;
            handles.push(s.buf.handle().offset_start(start as u64).offset_end((s.buf.padded() - end) as u64));
        }
        self.inner.host_bytes.fetch_add(src.len, Ordering::Relaxed);
        // Enqueued here, on the caller's thread, so the read keeps its place in the device's
        // order; its future waits for it (on CUDA, inside its first poll: so there it is
        // waited for on the completion thread).
        let fut = contained(&self.inner.name, "download", || self.client().read_async(handles))?;
        let ev = CubeEvent::read(Box::pin(fut), event::Landing { dst: dst.clone(), skip: src.off % 4 });
        let ev = self.completed(ev);
        Ok(ev)
    }

    fn copy(&self, src: &Range<CubeBuffer>, dst: &Range<CubeBuffer>) -> Result<CubeEvent> {
        self.check_range(src, "copy source")?;
        self.check_range(dst, "copy destination")?;
        if src.len != dst.len {
            return Err(CollectiveError::device(format!("copy of {} bytes into {}", src.len, dst.len)));
        }
        if identical(src, dst) || src.len == 0 {
            return Ok(CubeEvent::done());
        }
        if partial_overlap(src, dst) {
            return Err(CollectiveError::device("copy between overlapping ranges"));
        }
        for (pos, n) in parts::pieces(&[(&src.buf, src.off), (&dst.buf, dst.off)], dst.len, usize::MAX) {
            let (s, d) = (parts::piece(src, pos, n), parts::piece(dst, pos, n));
            if !self.copy_queued(&s.buf, s.off, &d.buf, d.off, n)? {
                launch::copy(self.client(), &s.buf.handle(), s.off, &d.buf.handle(), d.off, n, &self.inner.name)?;
            }
        }
        self.event()
    }

    fn reduce(
        &self,
        dst: &Range<CubeBuffer>,
        acc: &Range<CubeBuffer>,
        srcs: &[Source<CubeBuffer>],
        dtype: DType,
        combine: Combine,
    ) -> Result<CubeEvent> {
        let len = dst.len;
        self.check_range(dst, "reduce destination")?;
        self.check_range(acc, "reduce accumulator")?;
        if acc.len != len || srcs.iter().any(|s| s.len() != len) || !len.is_multiple_of(dtype.size()) {
            return Err(CollectiveError::device("reduce ranges differ in length"));
        }
        if srcs.is_empty() {
            return self.copy(acc, dst);
        }
        if partial_overlap(acc, dst) {
            return Err(CollectiveError::device("reduce between overlapping ranges"));
        }
        if !self.supports(dtype) {
            return Err(CollectiveError::unsupported(format!("{} cannot reduce {dtype}", self.inner.name)));
        }
        if len == 0 {
            return Ok(CubeEvent::done());
        }
        for s in srcs {
            if let Source::Device(r) = s {
                self.check_range(r, "reduce source")?;
                if r.buf.inner.id == dst.buf.inner.id && r.off < dst.off + len && dst.off < r.off + len {
                    return Err(CollectiveError::device("a reduce source overlaps its destination"));
                }
            }
        }
        let mut ops = vec![(&dst.buf, dst.off), (&acc.buf, acc.off)];
        ops.extend(srcs.iter().filter_map(|s| match s {
            Source::Device(r) => Some((&r.buf, r.off)),
            Source::Host(_) => None,
        }));
        // 16-bit floats over several sources keep a running f32 (twice the bytes) in scratch
        // that must fit one binding too.
        let cap = if matches!(dtype, DType::F16 | DType::BF16) && srcs.len() > 1 {
            part_len(self.inner.max_binding / 2)
        } else {
            usize::MAX
        };
        for (pos, n) in parts::pieces(&ops, len, cap) {
            let piece_srcs: Vec<Source<CubeBuffer>> = srcs
                .iter()
                .map(|s| match s {
                    Source::Device(r) => Source::Device(parts::piece(r, pos, n)),
                    Source::Host(h) => Source::Host(HostRegion { mem: h.mem.clone(), off: h.off + pos, len: n }),
                })
                .collect();
            self.reduce_staged(&parts::piece(dst, pos, n), &parts::piece(acc, pos, n), &piece_srcs, dtype, combine)?;
        }
        self.event()
    }

    fn scale(&self, src: &Range<CubeBuffer>, dst: &Range<CubeBuffer>, dtype: DType, scale: Scale) -> Result<CubeEvent> {
        self.check_range(src, "scale source")?;
        self.check_range(dst, "scale destination")?;
        if src.len != dst.len || !dst.len.is_multiple_of(dtype.size()) {
            return Err(CollectiveError::device("scale ranges differ in length"));
        }
        if partial_overlap(src, dst) {
            return Err(CollectiveError::device("scale between overlapping ranges"));
        }
        if !self.supports(dtype) {
            return Err(CollectiveError::unsupported(format!("{} cannot scale {dtype}", self.inner.name)));
        }
        if dst.len == 0 {
            return Ok(CubeEvent::done());
        }
        for (pos, n) in parts::pieces(&[(&src.buf, src.off), (&dst.buf, dst.off)], dst.len, usize::MAX) {
            launch::scale(self, &parts::piece(src, pos, n), &parts::piece(dst, pos, n), dtype, scale)?;
        }
        self.event()
    }

    fn poll(&self, event: &CubeEvent) -> Result<bool> {
        event.poll(&self.inner.name)
    }

    fn poll_waking(&self, event: &CubeEvent, waker: &std::task::Waker) -> Result<bool> {
        event.poll_waking(&self.inner.name, waker)
    }

    /// wgpu's futures are woken by its poll thread, and a completion thread wakes too.
    fn wakes(&self) -> bool {
        true
    }

    fn wait(&self, event: &CubeEvent, deadline: Option<Instant>) -> Result<()> {
        event.wait(&self.inner.name, deadline)
    }

    fn host_view(&self, _buf: &CubeBuffer) -> Option<HostMem> {
        None
    }

    fn synchronize(&self, deadline: Option<Instant>) -> Result<()> {
        let ev = self.event()?;
        self.wait(&ev, deadline)
    }
}
