//! A burn model's gradients through a [`GradientSync`]: the module's parameters are its
//! parameter set ([`param_specs`]), and [`AllReduceWith`] moves `GradientsParams` through the
//! buckets and back. Both walk the module with a visitor, which is where burn says each
//! parameter's rank (`GradientsParams` cannot list its ids, and burn checks ranks).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use ::burn::module::{AutodiffModule, Module, ModuleVisitor, Param, ParamId};
use ::burn::optim::GradientsParams;
use ::burn::tensor::backend::{AutodiffBackend, Backend as BurnBackend};
use ::burn::tensor::ops::FloatTensorOps;
use ::burn::tensor::{Tensor as BurnTensor, TensorPrimitive};

use super::backend::{block_on, data_to_ruccl, ruccl_dtype, ruccl_to_data};
use crate::device::HostDevice;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::grad::{GradientSync, ParamSpec};
use crate::tensor::Tensor;

/// The parameter set of `module` — every float parameter's id, dtype and shape — for
/// [`GradientSync::new`]. Reading the shapes initialises burn's lazily initialised
/// parameters, so call it before cloning a module to other ranks (each clone of an
/// uninitialised parameter would draw its own values). Every rank must hold the same parameter
/// ids: clone one module to every rank, or load the same record.
///
/// ```
/// use burn::backend::NdArray;
/// use burn::nn::{Linear, LinearConfig};
/// use ruccl::DType;
///
/// let model: Linear<NdArray> = LinearConfig::new(3, 2).init(&Default::default());
/// let specs = ruccl::burn::param_specs(&model);
/// let shapes: Vec<_> = specs.iter().map(|(_, s)| (s.dtype(), s.shape().to_vec())).collect();
/// assert_eq!(shapes, [(DType::F32, vec![3, 2]), (DType::F32, vec![2])]); // weight, bias
/// ```
pub fn param_specs<B: BurnBackend, M: Module<B>>(module: &M) -> Vec<(ParamId, ParamSpec)> {
    struct Specs<'a, B>(&'a mut Vec<(ParamId, ParamSpec)>, PhantomData<B>);
    impl<B: BurnBackend> ModuleVisitor<B> for Specs<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<BurnTensor<B, D>>) {
            let t = param.val();
            // A float parameter of a dtype ruCCL has no type for is left out of the set; its
            // gradient then stays on each rank (all_reduce_with reports it).
            if let Some(dtype) = ruccl_dtype(t.dtype()) {
                self.0.push((param.id, ParamSpec::new(dtype, &t.shape().to_vec())));
            }
        }
    }
    let mut out = Vec::new();
    module.visit(&mut Specs::<B>(&mut out, PhantomData));
    out
}

/// Averages burn gradients across ranks: `grads.all_reduce_with(&mut sync, &model)?` returns
/// the reduced gradients, ready for `optimizer.step`. The nearest equivalent of burn's
/// `GradientsParams::all_reduce(peer, op)` that can bucket: the [`GradientSync`] (built once,
/// from [`param_specs`]) carries the communicator and the reduce op, and the module says
/// which parameters there are.
pub trait AllReduceWith: Sized {
    /// Hands every gradient of `module`'s parameters to `sync` and returns the reduced ones
    /// (on the inner backend, on each parameter's device). A parameter without a gradient
    /// counts as zero on this rank and gets the reduced gradient, so every rank takes the same
    /// step.
    ///
    /// # Errors
    /// The [`GradientSync`]'s errors (`Mismatch`, `Timeout`, `Aborted`, ...); `Unsupported` for
    /// a quantized gradient or a float dtype outside the set; `Device` when burn cannot read a
    /// gradient.
    fn all_reduce_with<B: AutodiffBackend, M: AutodiffModule<B>>(
        self,
        sync: &mut GradientSync<'_, HostDevice, ParamId>,
        module: &M,
    ) -> Result<GradientsParams>;
}

impl AllReduceWith for GradientsParams {
    fn all_reduce_with<B: AutodiffBackend, M: AutodiffModule<B>>(
        mut self,
        sync: &mut GradientSync<'_, HostDevice, ParamId>,
        module: &M,
    ) -> Result<GradientsParams> {
        let mut push = Push::<B> { grads: &mut self, sync, result: Ok(()), _b: PhantomData };
        module.visit(&mut push);
        let pushed = push.result;
        // Even after a failed push the other gradients are reduced, so the peers are not kept
        // waiting; then the failure is reported.
        let reduced = sync.wait()?;
        pushed?;
        let mut back =
            Register::<B> { reduced: reduced.into_iter().collect(), out: self, result: Ok(()), _b: PhantomData };
        module.visit(&mut back);
        back.result.map(|()| back.out)
    }
}

/// Moves each parameter's gradient out of `grads` into `sync`.
struct Push<'a, 's, B> {
    grads: &'a mut GradientsParams,
    sync: &'a mut GradientSync<'s, HostDevice, ParamId>,
    result: Result<()>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> Push<'_, '_, B> {
    fn push<const D: usize>(&mut self, id: ParamId, grad: BurnTensor<B::InnerBackend, D>) -> Result<()> {
        let TensorPrimitive::Float(grad) = grad.into_primitive() else {
            return Err(CollectiveError::unsupported(format!("the gradient of parameter {id} is quantized")));
        };
        let data = block_on(B::InnerBackend::float_into_data(grad))?
            .map_err(|e| CollectiveError::new(ErrorKind::Device, format!("reading the gradient of {id}: {e:?}")))?;
        self.sync.push(&id, data_to_ruccl(&data, &HostDevice::default())?)
    }
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Push<'_, '_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<BurnTensor<B, D>>) {
        if self.result.is_ok()
            && let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id)
        {
            self.result = self.push(param.id, grad);
        }
    }
}

/// Registers each reduced gradient under its parameter, with the parameter's rank.
struct Register<B> {
    reduced: BTreeMap<ParamId, Tensor<HostDevice>>,
    out: GradientsParams,
    result: Result<()>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Register<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<BurnTensor<B, D>>) {
        let Some(t) = self.reduced.remove(&param.id) else { return };
        if t.shape().len() != D {
            self.result = Err(CollectiveError::invalid(format!(
                "parameter {} has rank {D}, but its gradient has shape {:?}",
                param.id,
                t.shape()
            )));
            return;
        }
        match ruccl_to_data(&t) {
            Ok(data) => {
                let grad = BurnTensor::<B::InnerBackend, D>::from_data(data, &param.lazy_device());
                self.out.register::<B::InnerBackend, D>(param.id, grad);
            }
            Err(e) => self.result = Err(e),
        }
    }
}
