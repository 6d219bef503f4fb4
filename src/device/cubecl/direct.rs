//! Host bytes into CUDA device memory without a CubeCL handle per transfer: the CUDA
//! analogue of wgpu's queued writes (`io`).
//!
//! CubeCL 0.10's `create` copies the bytes into fresh pageable memory and allocates a fresh
//! device buffer for every upload, and the copy kernel then moved them into place: on an H200
//! a 64 MiB upload took 165–175 ms that way (0.4 GiB/s, where the download of the same bytes
//! took 8 ms). Here the bytes go straight into the destination's own allocation, through two
//! page-locked bounce buffers: the DMA of one chunk overlaps the host copy into the other.
//!
//! **Order.** The write starts once the work enqueued on the device before it has finished
//! (CubeCL's `sync`, which also makes CubeCL allocate the destination: it allocates on its
//! stream) and returns once the bytes are in place, so every kernel enqueued after it reads
//! them. It runs on the caller's thread, on a stream of its own: other ranks' work on the
//! device goes on meanwhile.

use std::sync::Mutex;

use cubecl::client::ComputeClient;
use cubecl::cuda::CudaRuntime;
use cubecl::server::Handle;
use cudarc::driver::{DriverError, result as cu, sys};

use super::contained;
use crate::error::{CollectiveError, Result};

/// Bytes per bounce buffer (two per device handle).
const BOUNCE: usize = 4 << 20;

/// Direct writes into one CUDA GPU's memory.
pub(super) struct Direct {
    client: &'static ComputeClient<CudaRuntime>,
    /// The GPU's primary context: CubeCL's own, made current on the writing thread.
    ctx: sys::CUcontext,
    /// The bounce buffers and their stream, made at the first write; `Err` once they could
    /// not be (then every write falls back to CubeCL handles).
    bounce: Mutex<Option<std::result::Result<Bounce, ()>>>,
}

// SAFETY: `ctx` is a process-wide driver handle, valid on any thread once made current; the
// bounce buffers, stream and events are only touched under the `bounce` lock.
unsafe impl Send for Direct {}
// SAFETY: as above.
unsafe impl Sync for Direct {}

struct Bounce {
    stream: sys::CUstream,
    bufs: [*mut u8; 2],
    /// Recorded after each buffer's DMA: the buffer is free again once it has fired.
    done: [sys::CUevent; 2],
}

impl Direct {
    /// Direct writes into CUDA GPU `index`, whose CubeCL client is `client`.
    pub(super) fn new(client: &'static ComputeClient<CudaRuntime>, index: usize) -> std::result::Result<Self, String> {
        let ordinal = i32::try_from(index).map_err(|e| e.to_string())?;
        // SAFETY: `device::get` returned a valid device of the initialised driver (CubeCL has
        // opened it); retaining its primary context only raises a reference count.
        let ctx = cu::device::get(ordinal)
            .and_then(|dev| unsafe { cu::primary_ctx::retain(dev) })
            .map_err(|e| e.to_string())?;
        Ok(Direct { client, ctx, bounce: Mutex::new(None) })
    }

    /// Direct writes into the same GPU with bounce buffers of their own (another handle on
    /// the device: its writes do not wait for this one's).
    pub(super) fn another(&self) -> Self {
        Direct { client: self.client, ctx: self.ctx, bounce: Mutex::new(None) }
    }

    /// Writes `bytes` at byte `off` of `handle`'s memory, after the device's earlier work and
    /// before its later work (see the module docs). `Ok(false)`, with nothing written, where
    /// the bounce buffers cannot be had (the caller uploads through a CubeCL handle instead).
    pub(super) fn write(&self, name: &str, handle: Handle, off: usize, bytes: &[u8]) -> Result<bool> {
        let fail = |what: &str, e: &dyn std::fmt::Display| CollectiveError::device(format!("{name}: {what}: {e}"));
        let mut guard = self.bounce.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `ctx` is a retained primary context.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(|e| fail("making the GPU's context current", &e))?;
        let bounce = match guard.get_or_insert_with(|| Bounce::new().map_err(|_| ())) {
            Ok(b) => b,
            Err(()) => return Ok(false),
        };
        let resource = contained(name, "looking up a buffer", || self.client.get_resource(handle))?
            .map_err(|e| fail("looking up a buffer", &e))?;
        contained(name, "sync", || cubecl::future::block_on(self.client.sync()))?
            .map_err(|e| fail("device work failed", &e))?;
        let base = resource.resource().ptr + off as u64;
        // SAFETY: `base..base + bytes.len()` lies in `resource`'s allocation (the caller checked
        // the range against the buffer), which `resource` keeps alive until the copies are done.
        unsafe { bounce.copy(base, bytes) }.map_err(|e| fail("a host-to-device copy", &e))?;
        drop(resource);
        Ok(true)
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        // The bounce buffers are freed in the context that made them.
        // SAFETY: `ctx` is a retained primary context.
        let _ = unsafe { cu::ctx::set_current(self.ctx) };
    }
}

impl Bounce {
    /// Page-locked buffers, events and a stream, in the current context.
    fn new() -> std::result::Result<Self, DriverError> {
        let mut b =
            Bounce { stream: std::ptr::null_mut(), bufs: [std::ptr::null_mut(); 2], done: [std::ptr::null_mut(); 2] };
        // On failure `b` is dropped, freeing what was made.
        b.stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)?;
        for i in 0..2 {
            // SAFETY: a fresh page-locked allocation, freed in `drop`.
            b.bufs[i] = unsafe { cu::malloc_host(BOUNCE, 0) }?.cast();
            b.done[i] = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
        }
        Ok(b)
    }

    /// `bytes` to device address `dst` in chunks of [`BOUNCE`]: each chunk into a free bounce
    /// buffer, then its DMA, queued while the next chunk is copied; returns once all landed.
    ///
    /// # Safety
    /// `dst..dst + bytes.len()` is live device memory of the current context.
    unsafe fn copy(&mut self, dst: sys::CUdeviceptr, bytes: &[u8]) -> std::result::Result<(), DriverError> {
        for (i, chunk) in bytes.chunks(BOUNCE).enumerate() {
            let k = i % 2;
            // SAFETY: `done[k]` is a live event (never recorded yet for i < 2: skipped).
            if i >= 2 {
                unsafe { cu::event::synchronize(self.done[k]) }?;
            }
            // SAFETY: `bufs[k]` holds `BOUNCE` bytes and no DMA reads it (its event fired).
            let buf = unsafe { std::slice::from_raw_parts_mut(self.bufs[k], chunk.len()) };
            buf.copy_from_slice(chunk);
            // SAFETY: the destination is live (the caller); `buf` stays untouched until
            // `done[k]` fires or the stream is synchronised below.
            unsafe {
                cu::memcpy_htod_async(dst + (i * BOUNCE) as u64, &*buf, self.stream)?;
                cu::event::record(self.done[k], self.stream)?;
            }
        }
        // SAFETY: `stream` is live.
        unsafe { cu::stream::synchronize(self.stream) }
    }
}

impl Drop for Bounce {
    fn drop(&mut self) {
        // SAFETY: each handle is null or made in `new` in this context (current on every
        // thread that makes or uses a `Bounce`; the device's context outlives it), and no work
        // on them is pending: every copy synchronises its stream before returning.
        unsafe {
            for i in 0..2 {
                if !self.bufs[i].is_null() {
                    let _ = cu::free_host(self.bufs[i].cast());
                }
                if !self.done[i].is_null() {
                    let _ = cu::event::destroy(self.done[i]);
                }
            }
            if !self.stream.is_null() {
                let _ = cu::stream::destroy(self.stream);
            }
        }
    }
}
