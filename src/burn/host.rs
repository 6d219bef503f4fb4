//! Every burn backend through host data: [`Handover<HostDevice>`](super::Handover) for all of
//! them, the conversions between burn's `TensorData` and ruCCL host tensors, and blocking on
//! burn's read futures.

use std::task::{Context, Poll};
use std::time::Duration;

use ::burn::tensor::backend::Backend as BurnBackend;
use ::burn::tensor::{DType as BurnDType, TensorData};

use super::{Access, Handover};
use crate::device::{Device, HostDevice};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::DType;

/// Each conversion is a copy through host data, so `access` makes no difference: the tensor
/// handed to ruCCL never shares memory with a burn tensor.
impl<B: BurnBackend> Handover<HostDevice> for B {
    fn comm_device(_device: &B::Device) -> Result<HostDevice> {
        Ok(HostDevice::default())
    }

    fn to_ruccl(tensor: B::FloatTensorPrimitive, comm: &HostDevice, _access: Access) -> Result<Tensor<HostDevice>> {
        let data = block_on(B::float_into_data(tensor))?
            .map_err(|e| CollectiveError::new(ErrorKind::Device, format!("reading a burn tensor failed: {e:?}")))?;
        data_to_ruccl(&data, comm)
    }

    fn from_ruccl(tensor: Tensor<HostDevice>, device: &B::Device) -> Result<B::FloatTensorPrimitive> {
        Ok(B::float_from_data(ruccl_to_data(&tensor)?, device))
    }
}

/// burn's host data → a new ruCCL host tensor (a copy).
pub(super) fn data_to_ruccl(data: &TensorData, device: &HostDevice) -> Result<Tensor<HostDevice>> {
    let dtype = ruccl_dtype(data.dtype).ok_or_else(|| {
        CollectiveError::unsupported(format!("burn's {:?} tensors have no ruCCL float dtype", data.dtype))
    })?;
    let t = Tensor::zeros(device, dtype, &data.shape.to_vec())?;
    let bytes = data.as_bytes();
    if bytes.len() != t.byte_len() {
        return Err(CollectiveError::device(format!(
            "burn tensor data holds {} bytes for {:?} x {dtype}",
            bytes.len(),
            data.shape
        )));
    }
    device.write(t.buffer(), 0, bytes)?;
    Ok(t)
}

/// A ruCCL host tensor → burn's host data (a copy).
pub(super) fn ruccl_to_data(t: &Tensor<HostDevice>) -> Result<TensorData> {
    let dtype = burn_dtype(t.dtype())
        .ok_or_else(|| CollectiveError::unsupported(format!("burn float tensors cannot hold {}", t.dtype())))?;
    let mut bytes = vec![0u8; t.byte_len()];
    t.device().read(t.buffer(), 0, &mut bytes)?;
    Ok(TensorData::from_bytes_vec(bytes, t.shape().to_vec(), dtype))
}

pub(super) fn ruccl_dtype(d: BurnDType) -> Option<DType> {
    Some(match d {
        BurnDType::F32 => DType::F32,
        BurnDType::F64 => DType::F64,
        BurnDType::F16 => DType::F16,
        BurnDType::BF16 => DType::BF16,
        _ => return None,
    })
}

pub(super) fn burn_dtype(d: DType) -> Option<BurnDType> {
    Some(match d {
        DType::F32 => BurnDType::F32,
        DType::F64 => BurnDType::F64,
        DType::F16 => BurnDType::F16,
        DType::BF16 => BurnDType::BF16,
        _ => return None,
    })
}

/// Runs one of burn's read futures to completion on this thread (host backends are ready at
/// once; a GPU backend's read wakes the thread when its data arrives), for at most the
/// default collective timeout.
pub(super) fn block_on<T>(f: impl Future<Output = T>) -> Result<T> {
    let timeout = crate::config::CommConfig::default().timeout();
    let deadline = crate::config::deadline_after(timeout);
    let mut f = std::pin::pin!(f);
    let mut out = None;
    crate::park::until(Some(deadline), Duration::MAX, |w| {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(w)) {
            out = Some(v);
        }
        Ok::<_, std::convert::Infallible>(out.is_some())
    })
    .unwrap_or_else(|never| match never {});
    out.ok_or_else(|| {
        CollectiveError::new(ErrorKind::Timeout, format!("a burn tensor's data was not readable within {timeout:?}"))
    })
}
