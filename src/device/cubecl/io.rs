//! Transfers without a CubeCL handle or kernel per step. On wgpu, host bytes go straight into
//! the destination's own wgpu buffer by a queued write (`Queue::write_buffer`, what CubeCL
//! itself does to fill a new handle), and word-aligned device copies are the queue's
//! buffer-to-buffer copy instead of the copy kernel. Both are issued after the device's
//! earlier work was submitted, so they land after every kernel enqueued before them and
//! before every kernel enqueued after. Host-resident reduction sources go into one reusable
//! scratch buffer per device. On CUDA, host bytes go straight into the destination's
//! allocation too, through page-locked bounce buffers (`direct`), and device copies take the
//! copy kernel. Where neither exists (a device ruCCL did not open), the old paths remain: a
//! fresh CubeCL handle and the copy kernel.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use cubecl::Runtime;

use super::{CubeBuffer, CubeDevice};
use super::{contained, pad};
use crate::device::{Range, Source};
use crate::error::{CollectiveError, Result};
use crate::mem::HostRegion;
use crate::types::{Combine, DType};

/// A device's transfer state.
pub(super) struct Io {
    /// The wgpu device and queue under the device, when ruCCL opened it and so holds them.
    #[cfg(feature = "wgpu")]
    queue: Option<(wgpu::Device, wgpu::Queue)>,
    /// Scratch for host-resident reduction sources. Held locked from the write into it until
    /// the kernels reading it are enqueued: the next writer's submit then orders them first.
    scratch: Mutex<Option<CubeBuffer>>,
    /// Direct writes into a CUDA GPU's memory, when ruCCL opened it.
    #[cfg(feature = "cuda")]
    cuda: Option<super::direct::Direct>,
}

impl Io {
    /// No queued writes (every upload through a CubeCL handle).
    pub(super) fn handles_only() -> Self {
        Io {
            #[cfg(feature = "wgpu")]
            queue: None,
            scratch: Mutex::new(None),
            #[cfg(feature = "cuda")]
            cuda: None,
        }
    }

    /// Queued writes through `queue`.
    #[cfg(feature = "wgpu")]
    pub(super) fn wgpu(queue: Option<(wgpu::Device, wgpu::Queue)>) -> Self {
        Io { queue, ..Io::handles_only() }
    }

    /// Direct writes into a CUDA GPU's memory.
    #[cfg(feature = "cuda")]
    pub(super) fn cuda(direct: super::direct::Direct) -> Self {
        Io { cuda: Some(direct), ..Io::handles_only() }
    }

    /// The same queue, or direct writes into the same GPU, with scratch (and bounce buffers)
    /// of its own.
    pub(super) fn share(&self) -> Self {
        Io {
            #[cfg(feature = "wgpu")]
            queue: self.queue.clone(),
            scratch: Mutex::new(None),
            #[cfg(feature = "cuda")]
            cuda: self.cuda.as_ref().map(super::direct::Direct::another),
        }
    }

    /// Whether host bytes can be written into a device buffer in place (queued or direct).
    fn writes_in_place(&self) -> bool {
        #[cfg(feature = "wgpu")]
        if self.queue.is_some() {
            return true;
        }
        #[cfg(feature = "cuda")]
        if self.cuda.is_some() {
            return true;
        }
        false
    }
}

/// The locked scratch and each host source's offset in it.
pub(super) type Scratch<'a> = (MutexGuard<'a, Option<CubeBuffer>>, Vec<usize>);

impl<R: Runtime> CubeDevice<R> {
    /// Writes `bytes` at byte `off` of `buf` by a queued write; `Ok(false)` when this device
    /// has none (then nothing was written). `off` and `bytes.len()` are multiples of 4.
    fn write_queued(&self, buf: &CubeBuffer, off: usize, bytes: &[u8]) -> Result<bool> {
        debug_assert!(off.is_multiple_of(4) && bytes.len().is_multiple_of(4) && off + bytes.len() <= buf.padded());
        if self.write_direct(buf, off, bytes)? {
            return Ok(true);
        }
        #[cfg(feature = "wgpu")]
        if let Some((_, queue)) = &self.inner.io.queue {
            let Some((buffer, base)) = self.wgpu_buffer(buf)? else { return Ok(false) };
            self.submit_pending()?;
            contained(&self.inner.name, "a queued write", || {
                queue.write_buffer(&buffer, base + off as u64, bytes);
                queue.submit([]);
            })?;
            return Ok(true);
        }
        let _ = (buf, off, bytes);
        Ok(false)
    }

    /// Writes `bytes` at byte `off` of `buf` directly (CUDA; any alignment), done when it
    /// returns; `Ok(false)` when this device has no direct writes (nothing was written).
    fn write_direct(&self, buf: &CubeBuffer, off: usize, bytes: &[u8]) -> Result<bool> {
        #[cfg(feature = "cuda")]
        if let Some(direct) = &self.inner.io.cuda {
            return direct.write(&self.inner.name, buf.handle(), off, bytes);
        }
        let _ = (buf, off, bytes);
        Ok(false)
    }

    /// `len` bytes from `src[src_off..]` to `dst[dst_off..]` by the queue's buffer-to-buffer
    /// copy; `Ok(false)` (nothing done) where there is no queue, the range is not
    /// word-aligned, or both lie in one wgpu buffer (CubeCL sub-allocates; a copy within one
    /// buffer is not allowed).
    pub(super) fn copy_queued(
        &self,
        src: &CubeBuffer,
        src_off: usize,
        dst: &CubeBuffer,
        dst_off: usize,
        len: usize,
    ) -> Result<bool> {
        #[cfg(feature = "wgpu")]
        if let Some((device, queue)) = &self.inner.io.queue {
            if !(src_off.is_multiple_of(4) && dst_off.is_multiple_of(4) && len.is_multiple_of(4)) {
                return Ok(false);
            }
            let (Some((sb, s_base)), Some((db, d_base))) = (self.wgpu_buffer(src)?, self.wgpu_buffer(dst)?) else {
                return Ok(false);
            };
            if sb == db {
                return Ok(false);
            }
            self.submit_pending()?;
            contained(&self.inner.name, "a buffer copy", || {
                let mut enc =
                    device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("ruccl copy") });
                enc.copy_buffer_to_buffer(&sb, s_base + src_off as u64, &db, d_base + dst_off as u64, len as u64);
                queue.submit([enc.finish()]);
            })?;
            return Ok(true);
        }
        let _ = (src, src_off, dst, dst_off, len);
        Ok(false)
    }

    /// The wgpu buffer under `buf` and where `buf` starts in it; `None` off wgpu.
    #[cfg(feature = "wgpu")]
    fn wgpu_buffer(&self, buf: &CubeBuffer) -> Result<Option<(wgpu::Buffer, u64)>> {
        let name = &self.inner.name;
        let res = contained(name, "looking up a buffer", || self.client().get_resource(buf.handle()))?
            .map_err(|e| CollectiveError::device(format!("{name}: looking up a buffer: {e}")))?;
        let any: &dyn std::any::Any = res.resource();
        Ok(any.downcast_ref::<cubecl::wgpu::WgpuResource>().map(|w| (w.buffer.clone(), w.offset)))
    }

    /// Submits the kernels enqueued so far: work put on the queue directly runs after them.
    #[cfg(feature = "wgpu")]
    fn submit_pending(&self) -> Result<()> {
        let name = &self.inner.name;
        contained(name, "flush", || self.client().flush())?
            .map_err(|e| CollectiveError::device(format!("{name}: device work failed: {e}")))
    }

    /// `bytes` into `buf[off..]`: the word-aligned middle by a queued write, ragged edges
    /// (and everything, where there is no queued write) through a handle and the copy kernel.
    pub(super) fn write_bytes(&self, buf: &CubeBuffer, off: usize, bytes: &[u8]) -> Result<()> {
        if self.write_direct(buf, off, bytes)? {
            return Ok(());
        }
        let end = off + bytes.len();
        let (mid_lo, mid_hi) = (off.next_multiple_of(4).min(end), (end / 4 * 4).max(off.next_multiple_of(4).min(end)));
        if mid_hi > mid_lo && self.write_queued(buf, mid_lo, &bytes[mid_lo - off..mid_hi - off])? {
            for (lo, hi) in [(off, mid_lo), (mid_hi, end)] {
                if hi > lo {
                    self.write_staged(buf, lo, &bytes[lo - off..hi - off])?;
                }
            }
            return Ok(());
        }
        self.write_staged(buf, off, bytes)
    }

    /// `bytes` into `buf[off..]` through a fresh CubeCL handle and the copy kernel.
    fn write_staged(&self, buf: &CubeBuffer, off: usize, bytes: &[u8]) -> Result<()> {
        let staged = self.stage_in(bytes)?;
        super::launch::copy(self.client(), &staged.handle(), 0, &buf.handle(), off, bytes.len(), &self.inner.name)
    }

    /// Host sources in device scratch (one region each, 8-byte aligned), with the lock that
    /// must stay held until the kernels reading them are enqueued. `None` when this device has
    /// no queued or direct writes.
    pub(super) fn scratch_for(&self, srcs: &[&crate::mem::HostRegion]) -> Result<Option<Scratch<'_>>> {
        if self.inner.io.writes_in_place() {
            let mut guard = self.inner.io.scratch.lock().unwrap_or_else(|e| e.into_inner());
            let mut offs = Vec::with_capacity(srcs.len());
            let mut total = 0;
            for s in srcs {
                offs.push(total);
                total += pad(s.len);
            }
            if guard.as_ref().is_none_or(|b| b.padded() < total) {
                if total > self.inner.max_binding {
                    return Ok(None);
                }
                let handle = contained(&self.inner.name, "scratch allocation", || self.client().empty(total))?;
                *guard = Some(self.wrap(handle, total));
            }
            let Some(scratch) = (*guard).clone() else { return Ok(None) };
            for (s, &o) in srcs.iter().zip(&offs) {
                let bytes = s.read()?;
                let whole = bytes.len() / 4 * 4;
                if whole > 0 && !self.write_queued(&scratch, o, &bytes[..whole])? {
                    return Ok(None);
                }
                if whole < bytes.len() {
                    // The last partial word, padded (scratch bytes past a source are unused).
                    let mut tail = [0u8; 4];
                    tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
                    if !self.write_queued(&scratch, o + whole, &tail)? {
                        return Ok(None);
                    }
                }
            }
            return Ok(Some((guard, offs)));
        }
        let _ = srcs;
        Ok(None)
    }
}

impl<R: Runtime> CubeDevice<R> {
    /// `dst = acc ⊕ srcs...` on ranges within one part each (checked by the caller): host
    /// sources go into the device's scratch, held until the kernels are enqueued (a fresh
    /// handle each where there are no queued writes).
    pub(super) fn reduce_staged(
        &self,
        dst: &Range<CubeBuffer>,
        acc: &Range<CubeBuffer>,
        srcs: &[Source<CubeBuffer>],
        dtype: DType,
        combine: Combine,
    ) -> Result<()> {
        let len = dst.len;
        let hosts: Vec<&HostRegion> = srcs
            .iter()
            .filter_map(|s| match s {
                Source::Host(h) => Some(h),
                Source::Device(_) => None,
            })
            .collect();
        let scratch = if hosts.is_empty() { None } else { self.scratch_for(&hosts)? };
        let mut ranges = Vec::with_capacity(srcs.len());
        let mut next_host = 0;
        for s in srcs {
            match s {
                Source::Device(r) => ranges.push(r.clone()),
                Source::Host(h) => {
                    self.inner.host_bytes.fetch_add(len, Ordering::Relaxed);
                    match &scratch {
                        Some((buf, offs)) => {
                            let Some(buf) = buf.as_ref() else {
                                return Err(CollectiveError::device("reduce scratch missing"));
                            };
                            ranges.push(Range::new(buf.clone(), offs[next_host], len));
                        }
                        None => ranges.push(Range::new(self.stage_in(&h.read()?)?, 0, len)),
                    }
                    next_host += 1;
                }
            }
        }
        super::launch::reduce(self, dst, acc, &ranges, dtype, combine)?;
        drop(scratch);
        Ok(())
    }
}
