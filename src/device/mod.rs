//! The device adapter contract: what the scheduler asks of a device, and nothing about how
//! data reaches other ranks (that is the transport's job; only the scheduler sees both).
//!
//! The contract is shaped for GPUs even though the host device is the only one today:
//! buffers are opaque handles the host may not touch ([`Device::host_view`] is how a device
//! says "you may"), work may be queued asynchronously (an upload or a kernel may return
//! before it ran, as long as later calls on the same device observe it, and
//! [`Device::download`] returns only once the bytes are in host memory), and
//! [`Device::synchronize`] is a fence with a deadline.

mod host;
mod kernels;
mod stream;

use std::fmt;
use std::time::Instant;

pub use host::HostDevice;

use crate::error::Result;
use crate::mem::HostMem;
use crate::types::{Combine, DType, Scale};

/// A place tensors live and reduction kernels run: CPU memory today, GPUs behind the same
/// trait tomorrow.
///
/// All offsets and lengths are in **bytes** and are multiples of the element size where a
/// dtype is involved. Implementations return [`ErrorKind::Device`](crate::ErrorKind::Device)
/// errors; they never panic on bad ranges.
///
/// ```
/// use ruccl::{Device, HostDevice, DType};
/// let dev = HostDevice::default();
/// let buf = dev.alloc(16)?;
/// dev.upload(&buf, 0, &7f32.to_le_bytes())?;
/// let mut out = [0u8; 4];
/// dev.download(&buf, 0, &mut out)?;
/// assert_eq!(f32::from_le_bytes(out), 7.0);
/// assert!(dev.supports(DType::BF16));
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub trait Device: Clone + Send + Sync + fmt::Debug + 'static {
    /// A buffer of device memory.
    type Buffer: Send + Sync + fmt::Debug + 'static;

    /// A short name for messages, e.g. `host:0` or `cuda:1`.
    fn describe(&self) -> String;

    /// Whether `other` is the same physical device (tensors of one communicator must be on
    /// its device).
    fn same_device(&self, other: &Self) -> bool;

    /// Whether kernels for `dtype` can run here. Checked before any launch, so an
    /// unsupported type is an [`Unsupported`](crate::ErrorKind::Unsupported) error rather
    /// than silently wrong data.
    fn supports(&self, dtype: DType) -> bool;

    /// Allocates `bytes` zeroed bytes.
    ///
    /// # Errors
    /// `Device` when the memory cannot be had.
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer>;

    /// The size of a buffer in bytes.
    fn len(&self, buf: &Self::Buffer) -> usize;

    /// A number naming the memory behind `buf`: the same for every handle on that memory,
    /// distinct between buffers alive at the same time. The communicator compares it to tell
    /// an in-place call (an output that is exactly the input) from overlapping buffers, and
    /// the scheduler tracks lent ranges by memory, never by the role a buffer plays.
    fn mem_id(&self, buf: &Self::Buffer) -> usize;

    /// Copies host bytes into `dst[off..]`. `src` may be reused as soon as this returns.
    ///
    /// # Errors
    /// `Device` for an out-of-range write or a device failure.
    fn upload(&self, dst: &Self::Buffer, off: usize, src: &[u8]) -> Result<()>;

    /// Copies `src[off..off + dst.len()]` to host memory; returns when the bytes are there.
    ///
    /// # Errors
    /// `Device` for an out-of-range read or a device failure.
    fn download(&self, src: &Self::Buffer, off: usize, dst: &mut [u8]) -> Result<()>;

    /// Copies `len` bytes between (possibly identical, non-overlapping) buffers.
    ///
    /// # Errors
    /// `Device` for out-of-range or overlapping ranges.
    fn copy(&self, src: &Self::Buffer, src_off: usize, dst: &Self::Buffer, dst_off: usize, len: usize) -> Result<()>;

    /// `dst[i] = combine(acc[i], incoming[i])` for `incoming.len() / dtype.size()` elements,
    /// where `incoming` is host memory (bytes received from a peer). `acc` and `dst` are
    /// either the very same range (accumulate in place) or disjoint.
    ///
    /// # Errors
    /// `Device` for bad ranges; `Unsupported` for a dtype the device cannot reduce.
    #[allow(clippy::too_many_arguments)]
    fn reduce_host(
        &self,
        dst: &Self::Buffer,
        dst_off: usize,
        acc: &Self::Buffer,
        acc_off: usize,
        incoming: &[u8],
        dtype: DType,
        combine: Combine,
    ) -> Result<()>;

    /// `dst[i] = acc[i] ⊕ incoming[0][i] ⊕ incoming[1][i] ⊕ ...`, combined left to right, in
    /// one pass where the device can (the host device tiles it through L1). The default runs
    /// [`reduce_host`](Self::reduce_host) once per source.
    ///
    /// # Errors
    /// As [`reduce_host`](Self::reduce_host).
    #[allow(clippy::too_many_arguments)]
    fn reduce_host_many(
        &self,
        dst: &Self::Buffer,
        dst_off: usize,
        acc: &Self::Buffer,
        acc_off: usize,
        incoming: &[&[u8]],
        dtype: DType,
        combine: Combine,
    ) -> Result<()> {
        let mut first = true;
        for src in incoming {
            if first {
                self.reduce_host(dst, dst_off, acc, acc_off, src, dtype, combine)?;
                first = false;
            } else {
                self.reduce_host(dst, dst_off, dst, dst_off, src, dtype, combine)?;
            }
        }
        Ok(())
    }

    /// `dst[i] = scale(src[i])` for `count` elements; `src` and `dst` are the same range or
    /// disjoint.
    ///
    /// # Errors
    /// `Device` for bad ranges; `Unsupported` for a dtype the device cannot scale.
    #[allow(clippy::too_many_arguments)]
    fn scale(
        &self,
        src: &Self::Buffer,
        src_off: usize,
        dst: &Self::Buffer,
        dst_off: usize,
        count: usize,
        dtype: DType,
        scale: Scale,
    ) -> Result<()>;

    /// The buffer's bytes as shared host memory, when the host may read and write them
    /// directly (so the scheduler can lend them to peers without a copy). GPU devices return
    /// `None` and the scheduler stages through host memory.
    fn host_view(&self, buf: &Self::Buffer) -> Option<HostMem>;

    /// Waits until all work queued on this device has finished.
    ///
    /// # Errors
    /// `Timeout` when `deadline` passes first; `Device` when queued work failed.
    fn synchronize(&self, deadline: Option<Instant>) -> Result<()>;
}
