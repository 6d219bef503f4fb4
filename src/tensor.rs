//! `Tensor<D>`: a buffer on a device with a dtype and a shape. The only thing collectives
//! read and write.

use std::fmt;

use crate::device::{Device, Range};
use crate::error::{CollectiveError, Result};
use crate::types::{DType, Element};

/// A dense, contiguous tensor on a [`Device`].
///
/// ```
/// use ruccl::{HostDevice, Tensor, DType};
/// let dev = HostDevice::default();
/// let t = Tensor::from_vec(&dev, vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
/// assert_eq!(t.shape(), &[2, 3]);
/// assert_eq!(t.dtype(), DType::I32);
/// assert_eq!(t.numel(), 6);
/// assert!(t.to_vec::<f32>().is_err()); // wrong element type
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct Tensor<D: Device> {
    device: D,
    buf: D::Buffer,
    dtype: DType,
    shape: smallvec::SmallVec<[usize; 4]>,
    numel: usize,
    /// Where the elements start in `buf`, in bytes: 0 but for the crate's own views
    /// ([`narrow`](Self::narrow)), which never reach a caller.
    off: usize,
}

fn numel_of(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| CollectiveError::invalid(format!("shape {shape:?} has more elements than fit in memory")))
}

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    bytemuck::cast_slice(data)
}

impl<D: Device> Tensor<D> {
    /// A zero-filled tensor.
    ///
    /// # Errors
    /// `InvalidArgument` for a shape too large to address; `Device` if allocation fails.
    pub fn zeros(device: &D, dtype: DType, shape: &[usize]) -> Result<Self> {
        let numel = numel_of(shape)?;
        let bytes = numel
            .checked_mul(dtype.size())
            .ok_or_else(|| CollectiveError::invalid(format!("shape {shape:?} of {dtype} is too large")))?;
        let buf = device.alloc(bytes)?;
        Ok(Tensor { device: device.clone(), buf, dtype, shape: shape.into(), numel, off: 0 })
    }

    /// A tensor holding a copy of `data`, which must have exactly `shape`'s element count.
    ///
    /// # Errors
    /// `InvalidArgument` when `data.len()` does not match `shape`; `Device` on device failure.
    pub fn from_slice<T: Element>(device: &D, data: &[T], shape: &[usize]) -> Result<Self> {
        let numel = numel_of(shape)?;
        if numel != data.len() {
            return Err(CollectiveError::invalid(format!(
                "shape {shape:?} holds {numel} elements but {} were given",
                data.len()
            )));
        }
        let t = Self::zeros(device, T::DTYPE, shape)?;
        device.write(&t.buf, 0, as_bytes(data))?;
        Ok(t)
    }

    /// Like [`from_slice`](Self::from_slice): the elements are copied into device memory and
    /// `data` is dropped (the tensor never reuses the `Vec`'s allocation).
    ///
    /// # Errors
    /// As [`from_slice`](Self::from_slice).
    pub fn from_vec<T: Element>(device: &D, data: Vec<T>, shape: &[usize]) -> Result<Self> {
        Self::from_slice(device, &data, shape)
    }

    /// A 1-D tensor holding a copy of `data`.
    ///
    /// # Errors
    /// `Device` on device failure.
    pub fn from_slice_1d<T: Element>(device: &D, data: &[T]) -> Result<Self> {
        Self::from_slice(device, data, &[data.len()])
    }

    /// Copies the elements back to the host.
    ///
    /// # Errors
    /// `InvalidArgument` when `T` is not the tensor's dtype, or while a non-blocking op that
    /// writes this tensor is pending (see [`Work`](crate::Work)); `Device` on device failure.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let off = self.element_range::<T>("to_vec", 0, self.numel)?;
        let mut out = Vec::new();
        out.try_reserve_exact(self.numel).map_err(|_| {
            CollectiveError::device(format!("cannot allocate {} bytes of host memory for to_vec", self.byte_len()))
        })?;
        out.resize(self.numel, T::default());
        self.read_from(off, &mut out)?;
        Ok(out)
    }

    /// Overwrites the contents from host data of the same dtype and element count.
    ///
    /// # Errors
    /// `InvalidArgument` on a dtype or length mismatch, or while a non-blocking op that reads
    /// or writes this tensor is pending (see [`Work`](crate::Work)); `Device` on device failure.
    pub fn copy_from_slice<T: Element>(&mut self, data: &[T]) -> Result<()> {
        if T::DTYPE != self.dtype || data.len() != self.numel {
            return Err(CollectiveError::invalid(format!(
                "copy_from_slice of {} x {} into a tensor of {} x {}",
                data.len(),
                T::DTYPE,
                self.numel,
                self.dtype
            )));
        }
        self.write_to(self.off, data)
    }

    /// Overwrites elements `start..start + data.len()` of the flattened tensor from host data
    /// of its dtype, leaving the others as they are: a large tensor filled piece by piece
    /// needs no host copy of its whole size.
    ///
    /// ```
    /// use ruccl::{DType, HostDevice, Tensor};
    /// let dev = HostDevice::default();
    /// let mut t = Tensor::zeros(&dev, DType::F32, &[2, 3])?;
    /// t.write_at(2, &[7.0f32, 8.0])?;
    /// assert_eq!(t.to_vec::<f32>()?, [0.0, 0.0, 7.0, 8.0, 0.0, 0.0]);
    /// assert!(t.write_at(5, &[1.0f32, 2.0]).is_err()); // past the end
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when `T` is not the tensor's dtype or the range is not inside the
    /// tensor, or while a non-blocking op that reads or writes this tensor is pending (see
    /// [`Work`](crate::Work)); `Device` on device failure.
    pub fn write_at<T: Element>(&mut self, start: usize, data: &[T]) -> Result<()> {
        let off = self.element_range::<T>("write_at", start, data.len())?;
        self.write_to(off, data)
    }

    /// Reads elements `start..start + out.len()` of the flattened tensor into `out`: a large
    /// tensor checked piece by piece needs no host copy of its whole size.
    ///
    /// ```
    /// use ruccl::{HostDevice, Tensor};
    /// let dev = HostDevice::default();
    /// let t = Tensor::from_vec(&dev, vec![1i32, 2, 3, 4, 5, 6], &[2, 3])?;
    /// let mut row = [0i32; 3];
    /// t.read_at(3, &mut row)?;
    /// assert_eq!(row, [4, 5, 6]);
    /// assert!(t.read_at(4, &mut row).is_err()); // past the end
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when `T` is not the tensor's dtype or the range is not inside the
    /// tensor, or while a non-blocking op that writes this tensor is pending (see
    /// [`Work`](crate::Work)); `Device` on device failure.
    pub fn read_at<T: Element>(&self, start: usize, out: &mut [T]) -> Result<()> {
        let off = self.element_range::<T>("read_at", start, out.len())?;
        self.read_from(off, out)
    }

    /// Writes `data` at byte `off` of the buffer, once no pending op forbids it.
    fn write_to<T: Element>(&self, off: usize, data: &[T]) -> Result<()> {
        self.check_pins(true)?;
        self.device.write(&self.buf, off, as_bytes(data))
    }

    /// Reads `out` from byte `off` of the buffer, once no pending op forbids it.
    fn read_from<T: Element>(&self, off: usize, out: &mut [T]) -> Result<()> {
        self.check_pins(false)?;
        self.device.read(&self.buf, off, bytemuck::cast_slice_mut(out))
    }

    /// The byte offset in the buffer of elements `start..start + len` of `T`, once `T` is
    /// the dtype and the range is inside the tensor (`what` names the call in the error).
    fn element_range<T: Element>(&self, what: &str, start: usize, len: usize) -> Result<usize> {
        if T::DTYPE != self.dtype {
            return Err(CollectiveError::invalid(format!("{what}::<{}>() on a tensor of {}", T::DTYPE, self.dtype)));
        }
        self.check_range(start, len).map_err(|e| e.with_op(format!("Tensor::{what}")))?;
        Ok(self.off + start * self.dtype.size())
    }

    /// Whether elements `start..start + len` lie inside the tensor.
    fn check_range(&self, start: usize, len: usize) -> Result<()> {
        if start.checked_add(len).is_none_or(|end| end > self.numel) {
            return Err(CollectiveError::invalid(format!(
                "elements {start}..{} of a tensor of {} elements",
                start.saturating_add(len),
                self.numel
            )));
        }
        Ok(())
    }

    /// Whether this tensor may be read (or written) now: not while a non-blocking op that
    /// writes it (or, for a write, reads it) is pending (`crate::pins`).
    pub(crate) fn check_pins(&self, write: bool) -> Result<()> {
        let id = self.device.mem_id(&self.buf);
        crate::pins::check(crate::pins::Held::of::<D>(id, self.off, self.byte_len(), write))
    }

    /// A new tensor with the same contents on the same device.
    ///
    /// # Errors
    /// `InvalidArgument` while a non-blocking op that writes this tensor is pending (see
    /// [`Work`](crate::Work)); `Device` on device failure.
    pub fn try_clone(&self) -> Result<Self> {
        self.check_pins(false)?;
        let t = Self::zeros(&self.device, self.dtype, &self.shape)?;
        let len = self.byte_len();
        let event =
            self.device.copy(&Range::new(self.buf.clone(), self.off, len), &Range::new(t.buf.clone(), 0, len))?;
        self.device.wait(&event, None)?;
        Ok(t)
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements (the product of the shape).
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// The size in bytes.
    pub fn byte_len(&self) -> usize {
        self.numel * self.dtype.size()
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// This tensor, shared, with the proof that the caller holds it exclusively for as long
    /// ([`Sole`](crate::mem::Sole)): an op's exchange writes its output without registering
    /// the write when the tensor's buffer is the only handle on its block.
    pub(crate) fn lend_sole(&mut self) -> (&Self, crate::mem::Sole<'_>) {
        crate::mem::lend_sole(self, |t| &mut t.buf)
    }

    /// [`lend_sole`](Self::lend_sole) for an output only some ranks pass (gather's root).
    pub(crate) fn lend_sole_opt(t: Option<&mut Self>) -> (Option<&Self>, crate::mem::Sole<'_>) {
        t.map_or((None, crate::mem::Sole::none()), |t| {
            let (t, sole) = t.lend_sole();
            (Some(t), sole)
        })
    }

    /// The underlying device buffer.
    pub fn buffer(&self) -> &D::Buffer {
        &self.buf
    }

    /// Where the elements start in [`buffer`](Self::buffer), in bytes: 0 for every tensor a
    /// caller holds; a view's offset ([`narrow`](Self::narrow)).
    pub(crate) fn byte_offset(&self) -> usize {
        self.off
    }

    /// A 1-D view of elements `start..start + len` of this tensor (flattened): the same
    /// memory, no copy. Views stay inside the crate (the peer API's pipelined stages run
    /// collectives on chunks of one tensor); `buffer` and `into_buffer` of a view give the
    /// whole buffer, so a view is only ever passed to the communicator, which binds it at
    /// its [`byte_offset`](Self::byte_offset).
    ///
    /// # Errors
    /// `InvalidArgument` when the range is not inside the tensor.
    pub(crate) fn narrow(&self, start: usize, len: usize) -> Result<Self> {
        self.check_range(start, len)?;
        Ok(Tensor {
            device: self.device.clone(),
            buf: self.buf.clone(),
            dtype: self.dtype,
            shape: smallvec::smallvec![len],
            numel: len,
            off: self.off + start * self.dtype.size(),
        })
    }

    /// Wraps an existing device buffer (for framework adapters that hand over their memory).
    ///
    /// # Errors
    /// `InvalidArgument` when the buffer is smaller than `shape` of `dtype` needs.
    pub fn from_buffer(device: &D, buf: D::Buffer, dtype: DType, shape: &[usize]) -> Result<Self> {
        let numel = numel_of(shape)?;
        let need = numel.saturating_mul(dtype.size());
        if device.len(&buf) < need {
            return Err(CollectiveError::invalid(format!(
                "buffer of {} bytes is too small for {shape:?} x {dtype}",
                device.len(&buf)
            )));
        }
        Ok(Tensor { device: device.clone(), buf, dtype, shape: shape.into(), numel, off: 0 })
    }

    /// Gives the device buffer back.
    pub fn into_buffer(self) -> D::Buffer {
        self.buf
    }
}

impl<D: Device> fmt::Debug for Tensor<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({:?} x {} on {})", self.shape, self.dtype, self.device.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostDevice;

    #[test]
    fn round_trip_and_errors() {
        let d = HostDevice::default();
        let t = Tensor::from_slice(&d, &[1u8, 2, 3], &[3]).unwrap();
        assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 2, 3]);
        assert!(Tensor::from_slice(&d, &[1u8, 2, 3], &[2]).is_err());
        assert!(Tensor::<HostDevice>::zeros(&d, DType::F64, &[usize::MAX, 2]).is_err());
        let mut c = t.try_clone().unwrap();
        c.copy_from_slice(&[9u8, 9, 9]).unwrap();
        assert_eq!(t.to_vec::<u8>().unwrap(), vec![1, 2, 3]);
        assert_eq!(c.to_vec::<u8>().unwrap(), vec![9, 9, 9]);
        let z = Tensor::<HostDevice>::zeros(&d, DType::F32, &[0]).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), Vec::<f32>::new());
    }

    #[test]
    fn views_share_memory() {
        let d = HostDevice::default();
        let t = Tensor::from_slice(&d, &[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let mut v = t.narrow(2, 3).unwrap();
        assert_eq!((v.shape(), v.byte_offset()), (&[3][..], 8));
        assert_eq!(v.to_vec::<i32>().unwrap(), vec![3, 4, 5]);
        let w = v.narrow(1, 2).unwrap();
        assert_eq!((w.byte_offset(), w.to_vec::<i32>().unwrap()), (12, vec![4, 5]));
        v.copy_from_slice(&[7, 8, 9]).unwrap();
        assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 7, 8, 9, 6]);
        assert_eq!(v.try_clone().unwrap().to_vec::<i32>().unwrap(), vec![7, 8, 9]);
        assert_eq!(t.narrow(6, 0).unwrap().numel(), 0);
        assert!(t.narrow(4, 3).is_err());
        assert!(t.narrow(usize::MAX, 2).is_err());
    }
}
