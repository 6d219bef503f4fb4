//! The CubeCL device: the [`Device`] contract on any CubeCL runtime (wgpu, CUDA), with the
//! kernels of `crate::kernels`.
//!
//! **Paths.** Ranks whose devices are the same CubeCL device
//! ([`Reach::Same`](super::Reach::Same)) pass device ranges to each other and reduce on the
//! device: no byte crosses host memory. Ranks on distinct devices — two GPUs, or two CubeCL
//! devices opened on one adapter — reach each other through the host
//! ([`Reach::Host`](super::Reach::Host)): the scheduler downloads into host staging and the
//! receiving device uploads and reduces.
//!
//! **Completion.** Events are CubeCL's futures. wgpu's never block and are woken by its poll
//! thread; CUDA's wait on their fence inside the first poll, so a CUDA device hands them to a
//! thread of its own (`device::completion`) and its polls never block. Either way the device
//! wakes ([`Device::wakes`]): a thread driving several ranks sleeps until the work is done.
//!
//! **Order.** All work on one CubeCL device goes to one CubeCL stream (a fixed stream id,
//! not the per-thread default), so work runs in the order it was enqueued whichever thread
//! enqueues it — the contract's ordering, and what lets ranks driven from different threads
//! share a device.
//!
//! **Silent failures.** CubeCL 0.10 drops a launch that panics on its device thread and still
//! reports success. So every launch is checked first: element types against the runtime's
//! supported types, lengths against the largest binding, and client-side panics are
//! contained and turned into `Device` errors.

mod contract;
#[cfg(feature = "cuda")]
mod direct;
mod event;
mod io;
mod launch;
mod open;
mod parts;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cubecl::Runtime;
use cubecl::client::ComputeClient;
use cubecl::device::{Device as _, DeviceId};
use cubecl::server::Handle;

pub use event::CubeEvent;
#[cfg(feature = "cuda")]
pub use open::CudaCubeDevice;
#[cfg(feature = "wgpu")]
pub use open::WgpuCubeDevice;

use super::completion::Completer;
pub(crate) use super::completion::panic_message;
use super::{Device, Range};
use crate::error::{CollectiveError, Result};

/// A device buffer: CubeCL handles (one, or several parts where the buffer is larger than the
/// runtime binds at once; see `parts`) with its length. Allocations are padded to whole 8-byte
/// words (kernels address `u32` words; 64-bit elements need 8).
#[derive(Clone)]
pub struct CubeBuffer {
    inner: Arc<BufInner>,
}

struct BufInner {
    /// The parts: each `part_len` bytes but the last (padded to whole words).
    parts: Vec<Handle>,
    part_len: usize,
    len: usize,
    id: usize,
    device: DeviceId,
}

impl fmt::Debug for CubeBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CubeBuffer(#{}, {} bytes)", self.inner.id, self.inner.len)
    }
}

impl CubeBuffer {
    /// The handle of a buffer of one part (kernels and transfers see pieces of one part only).
    fn handle(&self) -> Handle {
        debug_assert_eq!(self.inner.parts.len(), 1, "a handle of a buffer in parts");
        self.inner.parts[0].clone()
    }
    /// The padded size in bytes (a multiple of 8, or of 4 for an imported handle) of a buffer
    /// of one part.
    fn padded(&self) -> usize {
        self.handle().size_in_used() as usize
    }

    /// The CubeCL handle on exactly this buffer's bytes (the padding cut off): device memory
    /// handed to a framework built on CubeCL (burn) without a copy. The buffer and the
    /// handle then share the memory.
    ///
    /// # Errors
    /// `Unsupported` for a buffer stored in several parts (above the runtime's binding
    /// limit): no single handle holds it.
    pub fn to_handle(&self) -> Result<Handle> {
        if self.inner.parts.len() != 1 {
            return Err(CollectiveError::unsupported(format!(
                "a {}-byte GPU buffer is stored in {} parts (above the device's binding limit); no single \
                 CubeCL handle holds it",
                self.inner.len,
                self.inner.parts.len()
            )));
        }
        Ok(match self.padded() - self.inner.len {
            0 => self.handle(),
            cut => self.handle().offset_end(cut as u64),
        })
    }
}

static NEXT_BUFFER: AtomicUsize = AtomicUsize::new(1);

/// A CubeCL device: one CubeCL device of runtime `R` (a GPU, or a device opened on an
/// adapter), shared by every clone.
///
/// Open one with `WgpuCubeDevice::wgpu_default` / `WgpuCubeDevice::wgpu_distinct` (feature
/// `wgpu`) or `CudaCubeDevice::cuda` (feature `cuda`); every rank that should share the
/// device uses a clone.
///
/// ```
/// // The host device is the runnable example of the contract; a CubeCL device is used the
/// // same way: `Communicator::new(device.clone(), world, id, rank)`.
/// use ruccl::{Device, HostDevice};
/// assert!(HostDevice::default().supports(ruccl::DType::BF16));
/// ```
pub struct CubeDevice<R: Runtime> {
    inner: Arc<Inner<R>>,
}

struct Inner<R: Runtime> {
    /// One per device for the process's life (see [`static_client`]).
    client: &'static ComputeClient<R>,
    id: DeviceId,
    name: String,
    /// Largest buffer the runtime binds to a kernel.
    max_binding: usize,
    /// Size of the parts of buffers larger than that (see `parts`).
    part_len: usize,
    /// The most bytes one buffer may hold: the device's memory (see `open`). A buffer held in
    /// parts is many allocations, so without this bound an impossible request would allocate
    /// part after part until the machine ran out of memory.
    memory: usize,
    /// Bytes moved between this device and host memory by `upload`/`download`/host sources.
    host_bytes: AtomicUsize,
    /// Host→device transfers: queued (wgpu) or direct (CUDA) writes and reusable scratch
    /// (see `io`).
    io: io::Io,
    /// Where events are waited for when the runtime's futures block the thread that polls
    /// them (CUDA's synchronise in their first poll): `Device::poll` never blocks.
    completer: Option<Arc<Completer>>,
}

impl<R: Runtime> Clone for CubeDevice<R> {
    fn clone(&self) -> Self {
        CubeDevice { inner: self.inner.clone() }
    }
}

/// Two handles are equal when they open the same device (as [`Device::same_device`]).
impl<R: Runtime> PartialEq for CubeDevice<R> {
    fn eq(&self, other: &Self) -> bool {
        self.same_device(other)
    }
}

impl<R: Runtime> fmt::Debug for CubeDevice<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.name)
    }
}

/// Runs a CubeCL call, turning a panic into a `Device` error naming `what`.
fn contained<T>(device: &str, what: &str, f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|p| CollectiveError::device(format!("{device}: {what} failed inside CubeCL: {}", panic_message(&*p))))
}

/// Whether `a` and `b` of one buffer overlap without being identical.
fn partial_overlap(a: &Range<CubeBuffer>, b: &Range<CubeBuffer>) -> bool {
    a.buf.inner.id == b.buf.inner.id && a.off != b.off && a.off < b.off + a.len && b.off < a.off + a.len
}

fn identical(a: &Range<CubeBuffer>, b: &Range<CubeBuffer>) -> bool {
    a.buf.inner.id == b.buf.inner.id && a.off == b.off
}

impl<R: Runtime> CubeDevice<R> {
    /// Wraps a CubeCL device whose client is `client` (opened by the constructors in `open`).
    fn from_client(mut client: ComputeClient<R>, device: &R::Device, label: String, io: io::Io, memory: usize) -> Self {
        // One stream for the whole device, whatever thread enqueues (see the module docs).
        // SAFETY: the stream id only selects which of CubeCL's streams records the work;
        // every handle this device makes is created and used on that one stream.
        unsafe { client.set_stream(cubecl::stream_id::StreamId { value: STREAM }) };
        let max_binding = usize::try_from(client.properties().memory.max_page_size).unwrap_or(usize::MAX);
        // CubeCL's CUDA futures wait on their fence inside the first poll (cubecl-cuda 0.10,
        // `Fence::wait_sync`); wgpu's are woken by its poll thread.
        let completer = (runtime_name(&client) == "cuda").then(|| Arc::new(Completer::new(&label)));
        let client = static_client(client, device.to_id());
        CubeDevice {
            inner: Arc::new(Inner {
                client,
                id: device.to_id(),
                name: label,
                max_binding,
                part_len: part_len(max_binding),
                memory,
                host_bytes: AtomicUsize::new(0),
                io,
                completer,
            }),
        }
    }

    /// Another handle on the same device whose new buffers are split into parts of at most
    /// `bytes` bytes (rounded down to 256-byte multiples; at least 256) instead of the
    /// runtime's binding limit: a test hook, so the path for buffers above the limit runs
    /// with small buffers. Buffers keep the part size they were made with.
    #[doc(hidden)]
    pub fn with_part_limit(&self, bytes: usize) -> Self {
        let i = &self.inner;
        self.another_handle(i.id, i.name.clone(), part_len(bytes.min(i.max_binding)))
    }

    /// Another handle on this device's client (its own host-byte count and scratch), named
    /// `name`, counted as device `id`, whose new buffers are held in parts of `part_len`.
    fn another_handle(&self, id: DeviceId, name: String, part_len: usize) -> Self {
        let i = &self.inner;
        CubeDevice {
            inner: Arc::new(Inner {
                client: i.client,
                id,
                name,
                max_binding: i.max_binding,
                part_len,
                memory: i.memory,
                host_bytes: AtomicUsize::new(0),
                io: i.io.share(),
                completer: i.completer.clone(),
            }),
        }
    }

    /// Another handle on the same device whose events are waited for on a thread of its own
    /// (as CUDA's always are), so that polls never block whatever the runtime's futures do: a
    /// test hook, so that path runs where the runtime is wgpu.
    #[doc(hidden)]
    pub fn with_completion_thread(&self) -> Self {
        let mut h = self.another_handle(self.inner.id, self.inner.name.clone(), self.inner.part_len);
        if let Some(i) = Arc::get_mut(&mut h.inner) {
            i.completer = Some(Arc::new(Completer::new(&i.name)));
        }
        h
    }

    /// Another handle on the same GPU that ruCCL treats as a distinct device: not the same
    /// device, so ranks on the two reach each other through host memory, as ranks on two GPUs
    /// do. A test hook, so the distinct-devices path (staging through the host) runs on a
    /// machine with one GPU; `n` (from 1) tells several such handles apart.
    #[doc(hidden)]
    pub fn as_distinct(&self, n: u16) -> Self {
        let i = &self.inner;
        // Far above any real device's index.
        let id = DeviceId { type_id: i.id.type_id, index_id: u16::MAX.saturating_sub(n) };
        self.another_handle(id, format!("{} (as distinct device {n})", i.name), i.part_len)
    }

    /// Whether this is CubeCL's device `device` (whose handles this device may use).
    pub fn is_device(&self, device: &R::Device) -> bool {
        device.to_id() == self.inner.id
    }

    /// A buffer of `len` bytes on `handle`, a CubeCL handle of `device` — a tensor of a
    /// framework built on CubeCL (burn) taken without a copy; the buffer and the framework's
    /// tensor then share the memory. Kernels address whole 32-bit words, so the handle must
    /// hold a whole number of them.
    ///
    /// # Errors
    /// `Device` when `device` is not this device, or the handle holds fewer than `len` bytes
    /// or not a whole number of 32-bit words; `Unsupported` above the size the device binds
    /// at once (`len` larger than one part of a buffer).
    pub fn import(&self, device: &R::Device, handle: Handle, len: usize) -> Result<CubeBuffer> {
        if !self.is_device(device) {
            return Err(CollectiveError::device(format!(
                "{}: a CubeCL handle of {device:?} is not this device's",
                self.inner.name
            )));
        }
        let size = handle.size_in_used() as usize;
        if len > self.inner.part_len {
            return Err(CollectiveError::unsupported(format!(
                "{}: a {len}-byte CubeCL handle is above the {}-byte parts this device binds at once; \
                 reduce it in smaller tensors",
                self.inner.name, self.inner.part_len
            )));
        }
        if size < len || !size.is_multiple_of(4) {
            return Err(CollectiveError::device(format!(
                "{}: a CubeCL handle of {size} bytes cannot hold a buffer of {len} bytes in whole 32-bit words",
                self.inner.name
            )));
        }
        Ok(self.wrap(handle, len))
    }

    /// Bytes this device (and its clones) moved between device and host memory for uploads,
    /// downloads and host-resident reduction sources. Ranks sharing a device move none.
    pub fn host_bytes(&self) -> usize {
        self.inner.host_bytes.load(Ordering::Relaxed)
    }

    fn client(&self) -> &'static ComputeClient<R> {
        self.inner.client
    }

    fn check_range(&self, r: &Range<CubeBuffer>, what: &str) -> Result<()> {
        if r.buf.inner.device != self.inner.id {
            return Err(CollectiveError::device(format!(
                "{}: {what} names a buffer of another device",
                self.inner.name
            )));
        }
        if r.off.checked_add(r.len).is_none_or(|end| end > r.buf.inner.len) {
            return Err(CollectiveError::device(format!(
                "{}: {what} range {}..{} is outside a buffer of {} bytes",
                self.inner.name,
                r.off,
                r.off.saturating_add(r.len),
                r.buf.inner.len
            )));
        }
        Ok(())
    }

    /// An event for everything enqueued so far.
    fn event(&self) -> Result<CubeEvent> {
        let fut = contained(&self.inner.name, "sync", || self.client().sync())?;
        Ok(self.completed(CubeEvent::sync(fut)))
    }

    /// `ev`, waited for on the completion thread where this device has one.
    fn completed(&self, ev: CubeEvent) -> CubeEvent {
        match &self.inner.completer {
            Some(c) => ev.on_thread(c, &self.inner.name),
            None => ev,
        }
    }

    /// A device copy of host bytes (a fresh handle; CubeCL reuses its memory once dropped).
    /// One copy here into a buffer handed to CubeCL whole; CubeCL 0.10 copies it once more
    /// before the transfer (`create` takes a `to_vec` of it; `create_from_slice` took two).
    fn stage_in(&self, bytes: &[u8]) -> Result<CubeBuffer> {
        let mut padded = vec![0u8; pad(bytes.len())];
        padded[..bytes.len()].copy_from_slice(bytes);
        let data = cubecl::bytes::Bytes::from_bytes_vec(padded);
        let handle = contained(&self.inner.name, "upload", || self.client().create(data))?;
        Ok(self.wrap(handle, bytes.len()))
    }

    fn wrap(&self, handle: Handle, len: usize) -> CubeBuffer {
        self.wrap_parts(vec![handle], len)
    }

    fn wrap_parts(&self, parts: Vec<Handle>, len: usize) -> CubeBuffer {
        CubeBuffer {
            inner: Arc::new(BufInner {
                parts,
                part_len: self.inner.part_len,
                len,
                id: NEXT_BUFFER.fetch_add(1, Ordering::Relaxed),
                device: self.inner.id,
            }),
        }
    }
}

/// A client of device `id` that lives as long as the process — one per device and runtime,
/// the first one asked for (clients of one device differ only in their stream, and every
/// client here was set to [`STREAM`]), as CubeCL keeps the device itself. `read_async`'s
/// future borrows the client it is called on, so only a `'static` client lets the read be
/// enqueued at once, on the caller's thread, and waited for later on another
/// (`contract.rs`'s `download`).
fn static_client<R: Runtime>(client: ComputeClient<R>, id: DeviceId) -> &'static ComputeClient<R> {
    type Clients = Vec<((std::any::TypeId, DeviceId), &'static (dyn std::any::Any + Send + Sync))>;
    static CLIENTS: std::sync::Mutex<Clients> = std::sync::Mutex::new(Vec::new());
    let key = (std::any::TypeId::of::<R>(), id);
    let mut all = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = all.iter().filter(|(k, _)| *k == key).find_map(|(_, c)| c.downcast_ref::<ComputeClient<R>>()) {
        return c;
    }
    let c: &'static ComputeClient<R> = Box::leak(Box::new(client));
    all.push((key, c));
    c
}

/// CubeCL's stream id for all of ruCCL's work (any value works; it names one stream).
const STREAM: u64 = 0x7275_6363_6c00;

/// `len` rounded up to whole 8-byte words (at least one).
fn pad(len: usize) -> usize {
    len.div_ceil(8).max(1) * 8
}

/// Parts of `limit` bytes rounded down to whole 256 bytes (every element and vector size
/// divides them, and they keep CubeCL's alignment), at least 256.
fn part_len(limit: usize) -> usize {
    (limit / 256 * 256).max(256)
}

/// The runtime's name for messages, with the shader path it compiles kernels to (CubeCL's
/// own name: `wgpu<wgsl>`, `wgpu<spirv>`, `wgpu<msl>`, `cuda`), so a device's description
/// says which compiler its kernels went through.
fn runtime_name<R: Runtime>(client: &ComputeClient<R>) -> &'static str {
    R::name(client)
}
