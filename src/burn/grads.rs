//! A burn model's gradients through a [`GradientSync`]: the module's parameters are its
//! parameter set ([`param_specs`]), and [`AllReduceWith`] moves `GradientsParams` through the
//! buckets and back. Both walk the module with a visitor, which is where burn says each
//! parameter's rank (`GradientsParams` cannot list its ids, and burn checks ranks). Gradients
//! reach the sync's device through the inner backend's [`Handover`] — on the host for every
//! backend, on their own CubeCL device for burn's wgpu backend — for [`Access::Write`]: the
//! sync writes the results into them.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use ::burn::module::{AutodiffModule, Module, ModuleVisitor, Param, ParamId};
use ::burn::optim::GradientsParams;
use ::burn::tensor::backend::{AutodiffBackend, Backend as BurnBackend};
use ::burn::tensor::{Tensor as BurnTensor, TensorPrimitive};

use super::host::ruccl_dtype;
use super::{Access, Handover};
use crate::device::Device;
use crate::error::{CollectiveError, Result};
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
    /// step. The sync's communicator is on the host ([`HostDevice`](crate::HostDevice)) for
    /// any backend, or on the gradients' own CubeCL device for burn's wgpu backend (see
    /// [`Handover`]).
    ///
    /// # Errors
    /// The [`GradientSync`]'s errors (`Mismatch`, `Timeout`, `Aborted`, ...); `Unsupported` for
    /// a quantized gradient or a float dtype outside the set; `Device` when burn cannot read a
    /// gradient; `InvalidArgument` for a gradient on a device the communicator cannot use.
    fn all_reduce_with<B: AutodiffBackend, M: AutodiffModule<B>, D: Device>(
        self,
        sync: &mut GradientSync<'_, D, ParamId>,
        module: &M,
    ) -> Result<GradientsParams>
    where
        B::InnerBackend: Handover<D>;
}

impl AllReduceWith for GradientsParams {
    fn all_reduce_with<B: AutodiffBackend, M: AutodiffModule<B>, D: Device>(
        mut self,
        sync: &mut GradientSync<'_, D, ParamId>,
        module: &M,
    ) -> Result<GradientsParams>
    where
        B::InnerBackend: Handover<D>,
    {
        let mut push = Push::<B, D> { grads: &mut self, sync, result: Ok(()), _b: PhantomData };
        module.visit(&mut push);
        let pushed = push.result;
        // Even after a failed push the other gradients are reduced, so the peers are not kept
        // waiting; then the failure is reported.
        let reduced = sync.wait()?;
        pushed?;
        let mut back =
            Register::<B, D> { reduced: reduced.into_iter().collect(), out: self, result: Ok(()), _b: PhantomData };
        module.visit(&mut back);
        back.result.map(|()| back.out)
    }
}

/// Moves each parameter's gradient out of `grads` into `sync`.
struct Push<'a, 's, B, D: Device> {
    grads: &'a mut GradientsParams,
    sync: &'a mut GradientSync<'s, D, ParamId>,
    result: Result<()>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend, D: Device> Push<'_, '_, B, D>
where
    B::InnerBackend: Handover<D>,
{
    fn push<const N: usize>(&mut self, id: ParamId, grad: BurnTensor<B::InnerBackend, N>) -> Result<()> {
        let TensorPrimitive::Float(grad) = grad.into_primitive() else {
            return Err(CollectiveError::unsupported(format!("the gradient of parameter {id} is quantized")));
        };
        let comm = self.sync.communicator().device();
        let grad = <B::InnerBackend as Handover<D>>::to_ruccl(grad, comm, Access::Write)
            .map_err(|e| e.with_op(format!("reading the gradient of {id}")))?;
        self.sync.push(&id, grad)
    }
}

impl<B: AutodiffBackend, D: Device> ModuleVisitor<B> for Push<'_, '_, B, D>
where
    B::InnerBackend: Handover<D>,
{
    fn visit_float<const N: usize>(&mut self, param: &Param<BurnTensor<B, N>>) {
        if self.result.is_ok()
            && let Some(grad) = self.grads.remove::<B::InnerBackend, N>(param.id)
        {
            self.result = self.push(param.id, grad);
        }
    }
}

/// Registers each reduced gradient under its parameter, with the parameter's rank.
struct Register<B, D: Device> {
    reduced: BTreeMap<ParamId, Tensor<D>>,
    out: GradientsParams,
    result: Result<()>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend, D: Device> ModuleVisitor<B> for Register<B, D>
where
    B::InnerBackend: Handover<D>,
{
    fn visit_float<const N: usize>(&mut self, param: &Param<BurnTensor<B, N>>) {
        let Some(t) = self.reduced.remove(&param.id) else { return };
        if t.shape().len() != N {
            self.result = Err(CollectiveError::invalid(format!(
                "parameter {} has rank {N}, but its gradient has shape {:?}",
                param.id,
                t.shape()
            )));
            return;
        }
        match <B::InnerBackend as Handover<D>>::from_ruccl(t, &param.lazy_device()) {
            Ok(grad) => {
                let grad = BurnTensor::<B::InnerBackend, N>::from_primitive(TensorPrimitive::Float(grad));
                self.out.register::<B::InnerBackend, N>(param.id, grad);
            }
            Err(e) => self.result = Err(e),
        }
    }
}
