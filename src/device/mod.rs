//! The device adapter contract: what the scheduler asks of a device, and nothing about how
//! data reaches other ranks (that is the transport's job; only the scheduler sees both).
//!
//! The contract is written for GPUs, whose work completes later:
//! - **Work is enqueued.** [`upload`](Device::upload), [`download`](Device::download),
//!   [`copy`](Device::copy), [`reduce`](Device::reduce) and [`scale`](Device::scale) return
//!   an [`Event`](Device::Event) that [`poll`](Device::poll) and [`wait`](Device::wait)
//!   observe. Work enqueued on one device handle runs in the order it was enqueued (a kernel
//!   sees the results of the copies before it), but the host — and every other rank — may
//!   look at the bytes only once the event has completed. The host device completes at once;
//!   the scheduler never assumes it. A device that can wake a waiter when work completes
//!   says so ([`wakes`](Device::wakes)) and takes its waker in
//!   [`poll_waking`](Device::poll_waking): a thread driving several ranks then sleeps until
//!   the device is done instead of looking again every 200 µs.
//! - **Host memory the device reads or writes later is owned**, so the device can hold it
//!   until the work ran: sources and destinations in host memory are [`HostRegion`]s.
//!   [`alloc_staging`](Device::alloc_staging) gives the host memory transfers are fastest
//!   from (page-locked or mapped on a GPU).
//! - **Buffers are opaque handles** the host may not touch; [`host_view`](Device::host_view)
//!   is how a device says "you may" (then ranks lend each other its memory directly).
//! - **Reach.** [`reach`](Device::reach) says how this device gets at another's memory: it is
//!   the same device (ranks pass device ranges and reduce on the device, no host round trip),
//!   a peer it can access, or neither (bytes are staged through host memory).
//! - [`read`](Device::read) and [`write`](Device::write) are blocking conveniences for
//!   building and reading tensors; the scheduler does not use them.

#[cfg(any(feature = "wgpu", feature = "cuda", test))]
mod completion;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub mod cubecl;
mod host;
pub(crate) mod kernels;
pub(crate) mod stream;

use std::fmt;
use std::time::Instant;

#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub use self::cubecl::{CubeBuffer, CubeDevice, CubeEvent};
pub use host::{HostDevice, HostEvent};

use crate::error::Result;
use crate::mem::{HostMem, HostRegion};
use crate::types::{Combine, DType, Scale};

/// A byte range of a device buffer: `len` bytes from `off`.
#[derive(Clone, Debug)]
pub struct Range<B> {
    /// The buffer.
    pub buf: B,
    /// Offset in bytes.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl<B> Range<B> {
    /// `len` bytes of `buf` from `off`.
    pub fn new(buf: B, off: usize, len: usize) -> Self {
        Range { buf, off, len }
    }
}

/// Where a reduction reads one of its sources.
#[derive(Clone, Debug)]
pub enum Source<B> {
    /// Bytes in host memory (received from a peer, or staged).
    Host(HostRegion),
    /// A range of a buffer on this device (a peer's, when ranks share the device).
    Device(Range<B>),
}

impl<B> Source<B> {
    /// The length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Source::Host(r) => r.len,
            Source::Device(r) => r.len,
        }
    }

    /// Whether the source holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a device gets at another device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reach {
    /// The very same device: its ranges can be read and reduced by kernels here.
    Same,
    /// Another device whose memory this one can read directly (peer access).
    Peer,
    /// Neither: bytes go through host memory.
    Host,
}

/// A place tensors live and reduction kernels run: CPU memory today, GPUs behind the same
/// trait.
///
/// All offsets and lengths are in **bytes** and are multiples of the element size where a
/// dtype is involved. Implementations return [`ErrorKind::Device`](crate::ErrorKind::Device)
/// errors; they never panic on bad ranges.
///
/// ```
/// use ruccl::device::Range;
/// use ruccl::mem::{HostMem, HostRegion};
/// use ruccl::{DType, Device, HostDevice};
///
/// let dev = HostDevice::default();
/// let buf = dev.alloc(8)?;
/// dev.write(&buf, 0, &7f32.to_le_bytes())?; // blocking, for building tensors
/// // What the scheduler does: enqueue, get an event, look only once it completed.
/// let staging = dev.alloc_staging(4)?;
/// let ev = dev.download(&Range::new(buf.clone(), 0, 4), &HostRegion { mem: staging.clone(), off: 0, len: 4 })?;
/// dev.wait(&ev, None)?;
/// assert_eq!(&*staging.read(0, 4)?, &7f32.to_le_bytes());
/// assert!(dev.supports(DType::BF16));
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub trait Device: Clone + Send + Sync + fmt::Debug + 'static {
    /// A handle on a buffer of device memory; cloning it is cheap and names the same memory.
    type Buffer: Clone + Send + Sync + fmt::Debug + 'static;
    /// The completion of enqueued work.
    type Event: Send + Sync + fmt::Debug + 'static;

    /// A short name for messages, e.g. `host:0` or `cuda:1`.
    fn describe(&self) -> String;

    /// Whether `other` is the same physical device (tensors of one communicator must be on
    /// its device).
    fn same_device(&self, other: &Self) -> bool;

    /// How this device reaches `other`'s memory (see [`Reach`]).
    fn reach(&self, other: &Self) -> Reach;

    /// Whether reductions and scaling of `dtype` can run here ([`reduce`](Device::reduce),
    /// [`scale`](Device::scale)). Checked before a reducing op starts, so an unsupported type
    /// is an [`Unsupported`](crate::ErrorKind::Unsupported) error rather than silently wrong
    /// data. Ops that only move bytes (broadcast, gathers, scatters, all-to-all, send and
    /// receive) run on every dtype and do not ask.
    fn supports(&self, dtype: DType) -> bool;

    /// Allocates `bytes` zeroed bytes.
    ///
    /// # Errors
    /// `Device` when the memory cannot be had.
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer>;

    /// Allocates `bytes` of host memory that transfers to and from this device are fastest
    /// with (page-locked or mapped on a GPU; plain memory on the host).
    ///
    /// # Errors
    /// `Device` when the memory cannot be had.
    fn alloc_staging(&self, bytes: usize) -> Result<HostMem>;

    /// The size of a buffer in bytes.
    fn len(&self, buf: &Self::Buffer) -> usize;

    /// A number naming the memory behind `buf`: the same for every handle on that memory,
    /// distinct between buffers alive at the same time. The communicator compares it to tell
    /// an in-place call (an output that is exactly the input) from overlapping buffers, and
    /// the scheduler tracks lent ranges by memory, never by the role a buffer plays.
    fn mem_id(&self, buf: &Self::Buffer) -> usize;

    /// Copies host bytes into `dst[off..]`, blocking until they are there.
    ///
    /// # Errors
    /// `Device` for an out-of-range write or a device failure; on ruCCL's devices,
    /// `InvalidArgument` while a non-blocking op that reads or writes those bytes is pending
    /// (as [`Tensor::copy_from_slice`](crate::Tensor::copy_from_slice)). The scheduler never
    /// calls it on an op's own memory.
    fn write(&self, dst: &Self::Buffer, off: usize, src: &[u8]) -> Result<()>;

    /// Copies `src[off..off + dst.len()]` to host memory, blocking until it is there.
    ///
    /// # Errors
    /// `Device` for an out-of-range read or a device failure; on ruCCL's devices,
    /// `InvalidArgument` while a non-blocking op that writes those bytes is pending.
    fn read(&self, src: &Self::Buffer, off: usize, dst: &mut [u8]) -> Result<()>;

    /// Enqueues a copy of host bytes into `dst` (`src.len == dst.len`). `src` must not be
    /// written until the event completes.
    ///
    /// # Errors
    /// `Device` for bad ranges or a device failure.
    fn upload(&self, dst: &Range<Self::Buffer>, src: &HostRegion) -> Result<Self::Event>;

    /// Enqueues a copy of `src` into host memory; the bytes are there once the event completes.
    ///
    /// # Errors
    /// `Device` for bad ranges or a device failure.
    fn download(&self, src: &Range<Self::Buffer>, dst: &HostRegion) -> Result<Self::Event>;

    /// Enqueues a copy between ranges of this device that are identical or disjoint.
    ///
    /// # Errors
    /// `Device` for bad or partly overlapping ranges.
    fn copy(&self, src: &Range<Self::Buffer>, dst: &Range<Self::Buffer>) -> Result<Self::Event>;

    /// Enqueues `dst[i] = acc[i] ⊕ srcs[0][i] ⊕ srcs[1][i] ⊕ ...`, combined left to right, in
    /// one pass where the device can. `acc` and `dst` are the very same range (accumulate in
    /// place) or disjoint; every source is disjoint from `dst` and as long as it.
    ///
    /// # Errors
    /// `Device` for bad ranges; `Unsupported` for a dtype the device cannot reduce.
    fn reduce(
        &self,
        dst: &Range<Self::Buffer>,
        acc: &Range<Self::Buffer>,
        srcs: &[Source<Self::Buffer>],
        dtype: DType,
        combine: Combine,
    ) -> Result<Self::Event>;

    /// Enqueues `dst[i] = scale(src[i])`; `src` and `dst` are the same range or disjoint.
    ///
    /// # Errors
    /// `Device` for bad ranges; `Unsupported` for a dtype the device cannot scale.
    fn scale(
        &self,
        src: &Range<Self::Buffer>,
        dst: &Range<Self::Buffer>,
        dtype: DType,
        scale: Scale,
    ) -> Result<Self::Event>;

    /// Whether the work behind `event` has completed. Never blocks.
    ///
    /// # Errors
    /// `Device` when that work failed.
    fn poll(&self, event: &Self::Event) -> Result<bool>;

    /// [`poll`](Self::poll), and when the work has not completed, `waker` is woken once it
    /// has — on a device that can tell ([`wakes`](Self::wakes)); the default ignores `waker`.
    /// Never blocks. A thread that drives several ranks (group calls, the progress thread)
    /// arms the waker and sleeps until something moves, instead of looking again in slices.
    ///
    /// ```
    /// use ruccl::device::Range;
    /// use ruccl::mem::HostRegion;
    /// use ruccl::{Device, HostDevice};
    /// let dev = HostDevice::default();
    /// let buf = dev.alloc(16)?;
    /// let src = HostRegion { mem: ruccl::mem::HostMem::zeroed(16)?, off: 0, len: 16 };
    /// let ev = dev.upload(&Range::new(buf, 0, 16), &src)?;
    /// // The host device completes at once; a GPU device would keep the waker.
    /// assert!(dev.poll_waking(&ev, std::task::Waker::noop())?);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// `Device` when that work failed.
    fn poll_waking(&self, event: &Self::Event, waker: &std::task::Waker) -> Result<bool> {
        let _ = waker;
        self.poll(event)
    }

    /// Whether [`poll_waking`](Self::poll_waking) wakes its waker once the work completes
    /// (default: no). A thread waiting on a device that does not wakes every 200 µs to look.
    fn wakes(&self) -> bool {
        false
    }

    /// Blocks until the work behind `event` has completed.
    ///
    /// # Errors
    /// `Timeout` when `deadline` passes first; `Device` when the work failed.
    fn wait(&self, event: &Self::Event, deadline: Option<Instant>) -> Result<()>;

    /// The buffer's bytes as shared host memory, when the host may read and write them
    /// directly (so the scheduler can lend them to peers without a copy). GPU devices return
    /// `None`.
    fn host_view(&self, buf: &Self::Buffer) -> Option<HostMem>;

    /// [`host_view`](Self::host_view), borrowed: the buffer's own host-memory handle when the
    /// buffer is one (the host device's are), so that a caller reading or writing through it
    /// for a moment touches no reference count. `None` (the default) sends callers to
    /// `host_view`.
    fn host_mem<'b>(&self, _buf: &'b Self::Buffer) -> Option<&'b HostMem> {
        None
    }

    /// Whether nothing but `buf` can read or write its memory: no other handle on it, no
    /// mapping shared with another process. Whoever holds such a buffer can reuse it for a
    /// result without anyone seeing the input change (the peer API then reduces a tensor it
    /// was handed into that tensor's own memory instead of a new one). `false` unless the
    /// device can tell.
    ///
    /// ```
    /// use ruccl::{Device, HostDevice};
    /// let dev = HostDevice::default();
    /// let buf = dev.alloc(8)?;
    /// assert!(dev.is_exclusive(&buf));
    /// let alias = buf.clone();
    /// assert!(!dev.is_exclusive(&buf) && !dev.is_exclusive(&alias));
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    fn is_exclusive(&self, buf: &Self::Buffer) -> bool {
        let _ = buf;
        false
    }

    /// Whether every buffer of this device is host memory ([`host_view`](Self::host_view)
    /// always answers) and its reductions are the host's own element-wise kernels, bit for
    /// bit. Ranks that are threads of one process, all on such devices, run small ops through
    /// shared slots instead of messages. `false` unless a device says so.
    ///
    /// ```
    /// use ruccl::{Device, HostDevice};
    /// assert!(HostDevice::default().host_memory());
    /// ```
    fn host_memory(&self) -> bool {
        false
    }

    /// Waits until all work enqueued on this device has finished.
    ///
    /// # Errors
    /// `Timeout` when `deadline` passes first; `Device` when queued work failed.
    fn synchronize(&self, deadline: Option<Instant>) -> Result<()>;
}
