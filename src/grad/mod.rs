//! Gradient synchronisation for data-parallel training: [`GradientSync`] packs a model's
//! gradients into a few flat buckets and all_reduces each bucket with one non-blocking call,
//! as PyTorch DDP's reducer does — so thousands of small gradients cost a few collectives,
//! not thousands.
//!
//! The module is small: `layout.rs` (sorting and packing, the parameter-set record ranks
//! compare, naming the first difference; pure), `agree.rs` (the comparison, once, when a
//! sync is built) and this file (the per-step calls).

mod agree;
mod config;
mod layout;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

pub use config::{DEFAULT_BUCKET_BYTES, DEFAULT_IN_PLACE_BYTES, SyncConfig};
pub use layout::ParamSpec;
use layout::{Layout, Wire};

use crate::comm::tagged::Tags;
use crate::comm::{Communicator, Work};
use crate::device::{Device, Range};
use crate::error::{CollectiveError, Result};
use crate::hash::fnv1a_words;
use crate::tensor::Tensor;

/// Writes `len` zero bytes into `buf` from `off`, a block at a time (no allocation).
fn write_zeros<D: Device>(dev: &D, buf: &D::Buffer, off: usize, len: usize) -> Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(ZEROS.len());
        dev.write(buf, off + done, &ZEROS[..n])?;
        done += n;
    }
    Ok(())
}

/// A refused gradient's error, saying what the step does without it: the other ranks are
/// not told (they would wait for this rank otherwise), so their results for that parameter
/// are off unless a good gradient follows before `wait`.
fn counts_as_zero(e: CollectiveError) -> CollectiveError {
    let message = format!(
        "{}; unless a valid gradient of it is handed over before `wait`, it counts as a zero gradient on this rank \
         this step, and every rank's reduced gradient of that parameter includes that zero",
        e.message()
    );
    let out = CollectiveError::new(e.kind(), message);
    match e.set_hint() {
        Some(h) => out.with_hint(h),
        None => out,
    }
}

/// One bucket: its flat tensor (allocated once, reused every step), how many of its
/// parameters this step still lacks, and its all_reduce once launched. A bucket of a single
/// parameter has no flat tensor: that gradient is reduced where it is, without a copy.
struct Bucket<D: Device> {
    flat: Option<Tensor<D>>,
    missing: usize,
    work: Option<Work>,
}

/// Averages (or otherwise reduces) a fixed set of gradients across the ranks of a
/// [`Communicator`], bucket by bucket.
///
/// Built once per training run from the parameter set — each parameter's id and the dtype
/// and shape of its gradient ([`ParamSpec`]). Ids are sorted, so every rank packs the same
/// buckets whatever order it lists its parameters in; building compares the ranks' sets
/// (once, by digest) and fails with `Mismatch`, naming the first difference, when they differ.
///
/// Each step, hand the gradients over with [`push`](Self::push) as backward produces them,
/// one at a time and in any order (a push may start a bucket's all_reduce on the
/// communicator: when the ranks push in different orders, make no other call on it between
/// their pushes, or the ranks' calls interleave differently and fail with `Mismatch`), then
/// call [`wait`](Self::wait), which returns them reduced
/// — or do both with [`all_reduce`](Self::all_reduce). A bucket's all_reduce starts as soon as
/// all of its gradients are in and every bucket before it has started (buckets go in the same
/// order on every rank: by dtype, then by id), and runs while the caller goes on. Backward
/// produces the last layer's gradients first: when ids follow the model forward, pass
/// [`SyncConfig::with_reverse_order`] (as PyTorch DDP buckets parameters in reverse), or no
/// bucket starts before the last gradient is in.
///
/// Gradients smaller than [`SyncConfig::in_place_bytes`] (1 MiB by default) are copied into
/// the flat buckets and back; larger ones are reduced where they are, one all_reduce each,
/// since they already amortise a collective's fixed cost (see
/// [`SyncConfig::with_in_place_bytes`]). The buckets are allocated once, when the sync is
/// built, and reused every step.
///
/// Ids are any ordered type that prints (`String`, `&str`, `u64`, a framework's parameter
/// id); ranks compare the printed ids, so two ids must not print the same.
///
/// ```
/// use ruccl::grad::{GradientSync, ParamSpec};
/// use ruccl::{Communicator, DType, HostDevice, Tensor, UniqueId};
///
/// let id = UniqueId::new()?;
/// let ranks: Vec<_> = (0..2)
///     .map(|rank| {
///         let id = id.clone();
///         std::thread::spawn(move || -> ruccl::Result<Vec<f32>> {
///             let dev = HostDevice::default();
///             let comm = Communicator::new(dev, 2, id, rank)?;
///             let params = [("bias", ParamSpec::new(DType::F32, &[2])), ("weight", ParamSpec::new(DType::F32, &[2, 2]))];
///             let mut sync = GradientSync::new(&comm, params)?;
///             // One step: gradients arrive one at a time, as backward produces them.
///             let r = rank as f32;
///             sync.push(&"weight", Tensor::from_slice(&dev, &[r, r, 1.0, 1.0], &[2, 2])?)?;
///             sync.push(&"bias", Tensor::from_slice(&dev, &[2.0 * r, 0.0], &[2])?)?;
///             let grads = sync.wait()?; // the mean over the ranks, in id order
///             assert_eq!(grads[0].0, "bias");
///             grads[1].1.to_vec::<f32>()
///         })
///     })
///     .collect();
/// for r in ranks {
///     assert_eq!(r.join().unwrap()?, vec![0.5, 0.5, 1.0, 1.0]);
/// }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
pub struct GradientSync<'c, D: Device, K> {
    comm: &'c Communicator<D>,
    config: SyncConfig,
    layout: Layout<K>,
    /// The digest of the agreed parameter set; tags every bucket's all_reduce.
    digest: u64,
    buckets: Vec<Bucket<D>>,
    /// This step's gradients, by parameter index.
    slots: Vec<Option<Tensor<D>>>,
    /// Where this step's gradients lie: (memory, first byte) -> (end, parameter index). They
    /// never overlap, so a new one is checked against its two neighbours only (a scan of
    /// every slot made a step quadratic in the parameter count: 20,000 took 0.46 s).
    held: BTreeMap<(usize, usize), (usize, usize)>,
    /// The next bucket to launch.
    next: usize,
}

impl<D: Device, K> fmt::Debug for GradientSync<'_, D, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GradientSync({} parameters in {} buckets, rank {} of {})",
            self.layout.entries.len(),
            self.buckets.len(),
            self.comm.rank(),
            self.comm.world_size()
        )
    }
}

impl<'c, D: Device, K: Ord + Clone + fmt::Display> GradientSync<'c, D, K> {
    /// A sync of `params` over `comm` with the default [`SyncConfig`] (25 MiB buckets, mean).
    /// A collective: every rank of `comm` calls it, with the same parameter set.
    ///
    /// # Errors
    /// `InvalidArgument` on this rank for a duplicate id or a shape too large to address (the
    /// other ranks then get `Mismatch` naming it); `Mismatch` on every rank when the ranks'
    /// ids, dtypes, shapes or settings differ, naming the first difference; `Device` when a
    /// bucket cannot be allocated; the communicator's errors (`Timeout`, `Aborted`, ...).
    pub fn new(comm: &'c Communicator<D>, params: impl IntoIterator<Item = (K, ParamSpec)>) -> Result<Self> {
        Self::with_config(comm, params, SyncConfig::default())
    }

    /// Like [`new`](Self::new) with explicit settings.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// ```
    /// use ruccl::grad::{GradientSync, ParamSpec, SyncConfig};
    /// use ruccl::{Communicator, DType, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// let params = (0..10u64).map(|i| (i, ParamSpec::new(DType::F32, &[256]))); // 1 KiB each
    /// let sync = GradientSync::with_config(&comm, params, SyncConfig::default().with_bucket_bytes(4096))?;
    /// assert_eq!(sync.bucket_count(), 3); // 4 + 4 + 2 parameters
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn with_config(
        comm: &'c Communicator<D>,
        params: impl IntoIterator<Item = (K, ParamSpec)>,
        config: SyncConfig,
    ) -> Result<Self> {
        let label = |e: CollectiveError| e.with_rank(comm.rank()).with_outer_op("GradientSync::new".into());
        // A rank that rejects its own set still takes part in the comparison (saying why),
        // so that its peers fail at once instead of waiting for it.
        let built = Layout::build(params, &config).and_then(|layout| {
            let buckets = layout
                .buckets
                .iter()
                .map(|b| {
                    let flat = match b.params.len() {
                        1 => None,
                        _ => Some(Tensor::zeros(comm.device(), b.dtype, &[b.bytes / b.dtype.size()])?),
                    };
                    Ok(Bucket { flat, missing: b.params.len(), work: None })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((layout, buckets))
        });
        let wire = match &built {
            Ok((layout, _)) => Wire::of(layout, &config),
            Err(e) => Wire::Rejected(e.message().to_string()),
        };
        let agreed = agree::agree(comm, &wire);
        let (layout, buckets) = built.map_err(label)?;
        agreed.map_err(label)?;
        let digest = layout::digest(&wire.encode());
        let slots = layout.entries.iter().map(|_| None).collect();
        crate::trace::debug_event!(
            rank = comm.rank(),
            params = layout.entries.len(),
            buckets = buckets.len(),
            packed = buckets.iter().filter(|b| b.flat.is_some()).count(),
            "GradientSync built"
        );
        Ok(GradientSync { comm, config, layout, digest, buckets, slots, held: BTreeMap::new(), next: 0 })
    }

    /// The number of buckets (and so of all_reduce calls per step).
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// The settings in force.
    pub fn config(&self) -> &SyncConfig {
        &self.config
    }

    /// The communicator the gradients are reduced over (their tensors must be on its device).
    pub fn communicator(&self) -> &'c Communicator<D> {
        self.comm
    }

    /// Hands over this step's gradient of parameter `id`: it is copied into its bucket, and
    /// any bucket that is now complete starts its all_reduce. The tensor is kept until
    /// [`wait`](Self::wait) writes the result into it and returns it.
    ///
    /// # Errors
    /// `InvalidArgument` (the step goes on; the tensor is dropped) for an id outside the set,
    /// an id handed twice in one step, a gradient of another dtype, shape or device than the
    /// set says, or one a non-blocking op not yet done still reads or writes; otherwise the communicator's or the device's errors, which end the step.
    pub fn push(&mut self, id: &K, grad: Tensor<D>) -> Result<()> {
        let label =
            |e: CollectiveError| e.with_rank(self.comm.rank()).with_outer_op(format!("GradientSync::push({id})"));
        let i = self.check(id, &grad).map_err(label)?;
        self.accept(i, grad).map_err(label)
    }

    /// Ends the step: waits for every bucket's all_reduce, writes the results into the
    /// gradients handed over, and returns them, in id order. A parameter with no gradient this
    /// step counts as a zero gradient on this rank (so its peers are not kept waiting), and
    /// its reduced gradient comes back in a new tensor — every rank gets every parameter.
    /// Zero leaves a sum or a mean as the other ranks make it; with [`crate::ReduceOp::Max`],
    /// [`crate::ReduceOp::Min`] or [`crate::ReduceOp::Prod`] (see [`SyncConfig::with_op`]) it takes part as
    /// any other value would: push every gradient on every rank there.
    ///
    /// # Errors
    /// The communicator's or the device's errors (`Timeout`, `Mismatch`, `Aborted`, ...), as
    /// the all_reduce calls report them. The step is over either way; the next one starts empty.
    pub fn wait(&mut self) -> Result<Vec<(K, Tensor<D>)>> {
        let r = self.finish();
        let out = self.end_step();
        r.map(|()| out).map_err(|e| e.with_rank(self.comm.rank()).with_outer_op("GradientSync::wait".into()))
    }

    /// One whole step: [`push`](Self::push) every gradient, then [`wait`](Self::wait).
    ///
    /// # Errors
    /// As [`push`](Self::push) and [`wait`](Self::wait); a rejected gradient ends the step
    /// (after the others are reduced, so the peers are not kept waiting).
    ///
    /// ```
    /// use ruccl::grad::{GradientSync, ParamSpec};
    /// use ruccl::{Communicator, DType, HostDevice, Tensor, UniqueId};
    /// let dev = HostDevice::default();
    /// let comm = Communicator::new(dev, 1, UniqueId::new()?, 0)?;
    /// let mut sync = GradientSync::new(&comm, [("w".to_string(), ParamSpec::new(DType::F64, &[2]))])?;
    /// let grads = sync.all_reduce([("w".to_string(), Tensor::from_slice(&dev, &[1.0f64, 2.0], &[2])?)])?;
    /// assert_eq!(grads[0].1.to_vec::<f64>()?, vec![1.0, 2.0]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn all_reduce(&mut self, grads: impl IntoIterator<Item = (K, Tensor<D>)>) -> Result<Vec<(K, Tensor<D>)>> {
        let mut rejected = None;
        for (id, grad) in grads {
            let label =
                |e: CollectiveError| e.with_rank(self.comm.rank()).with_outer_op(format!("GradientSync::push({id})"));
            match self.check(&id, &grad) {
                Ok(i) => self.accept(i, grad).map_err(label)?,
                Err(e) => {
                    rejected.get_or_insert(label(e));
                }
            }
        }
        let out = self.wait()?;
        match rejected {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The index of `id`, after checking that `grad` fits it and is not a second one.
    fn check(&self, id: &K, grad: &Tensor<D>) -> Result<usize> {
        let i = self.layout.index(id).ok_or_else(|| {
            CollectiveError::invalid(format!(
                "parameter {id} is not one of the {} this sync was built for",
                self.slots.len()
            ))
        })?;
        let spec = &self.layout.entries[i].spec;
        if self.slots[i].is_some() {
            return Err(CollectiveError::invalid(format!(
                "the gradient of parameter {id} was already handed over this step"
            )));
        }
        // A gradient refused from here on leaves the parameter without one this step.
        self.check_fit(id, spec, grad).map_err(counts_as_zero)?;
        Ok(i)
    }

    /// Whether `grad` may be parameter `id`'s gradient this step (of `spec`).
    fn check_fit(&self, id: &K, spec: &ParamSpec, grad: &Tensor<D>) -> Result<()> {
        if grad.dtype() != spec.dtype() || grad.shape() != spec.shape() {
            return Err(CollectiveError::invalid(format!(
                "the gradient of parameter {id} is {}, but the parameter set says {spec}",
                ParamSpec::of(grad)
            )));
        }
        if !grad.device().same_device(self.comm.device()) {
            return Err(CollectiveError::invalid(format!(
                "the gradient of parameter {id} is on {}, but the communicator is on {}",
                grad.device().describe(),
                self.comm.device().describe()
            )));
        }
        // Two parameters' gradients on one memory: reduced where they lie (large ones), it was
        // summed twice; packed into buckets, once. Either way one of them is not its own.
        if let Some(j) = self.sharing(grad) {
            return Err(CollectiveError::invalid(format!(
                "the gradient of parameter {id} shares memory with the gradient of parameter {}, handed over this \
                 step: every parameter needs a gradient tensor of its own",
                self.layout.entries[j].id
            )));
        }
        // The sync reads the gradient now and writes the result into it at `wait`: not while a
        // non-blocking op in flight (the caller's own, or this sync's for another parameter)
        // writes it (it would reduce the stale input, then overwrite that op's result) or
        // reads it.
        grad.check_pins(true)
    }

    /// The parameter whose gradient, handed over this step, shares memory with `grad`.
    fn sharing(&self, grad: &Tensor<D>) -> Option<usize> {
        let (mem, start, len) = (self.comm.device().mem_id(grad.buffer()), grad.byte_offset(), grad.byte_len());
        if len == 0 {
            return None;
        }
        // The one starting at or before `start` overlaps when it ends past it; the first one
        // after it when it starts before `grad` ends.
        let before = self.held.range((mem, 0)..=(mem, start)).next_back().filter(|(_, held)| held.0 > start);
        let after = self.held.range((mem, start)..(mem, start.saturating_add(len))).next();
        before.or(after).map(|(_, held)| held.1)
    }

    fn deadline(&self) -> Option<Instant> {
        Some(crate::config::deadline_after(self.comm.config().timeout()))
    }

    /// Takes parameter `i`'s checked gradient: copies it in and launches what is ready. An
    /// error ends the step.
    fn accept(&mut self, i: usize, grad: Tensor<D>) -> Result<()> {
        let r = self.copy_in(i, &grad).and_then(|()| {
            if grad.byte_len() > 0 {
                let (mem, start) = (self.comm.device().mem_id(grad.buffer()), grad.byte_offset());
                self.held.insert((mem, start), (start + grad.byte_len(), i));
            }
            self.slots[i] = Some(grad);
            self.launch_ready()
        });
        if r.is_err() {
            self.end_step();
        }
        r
    }

    /// Copies parameter `i`'s gradient into its place in its bucket.
    fn copy_in(&mut self, i: usize, grad: &Tensor<D>) -> Result<()> {
        let e = &self.layout.entries[i];
        let Some((b, off)) = e.place else { return Ok(()) };
        let (dev, deadline) = (self.comm.device(), self.deadline());
        let bucket = &mut self.buckets[b];
        if let Some(flat) = &bucket.flat {
            let src = Range::new(grad.buffer().clone(), 0, e.bytes);
            let dst = Range::new(flat.buffer().clone(), off, e.bytes);
            let event = dev.copy(&src, &dst)?;
            dev.wait(&event, deadline)?;
        }
        bucket.missing -= 1;
        Ok(())
    }

    /// Starts the all_reduce of every complete bucket whose predecessors have all started.
    fn launch_ready(&mut self) -> Result<()> {
        while let Some(b) = self.buckets.get_mut(self.next).filter(|b| b.missing == 0) {
            // The tag makes a rank that launches another bucket here a `Mismatch`, even when
            // two buckets have the same size. Its top bit marks it a hash (`op::shape_hash`), so
            // messages never read it as a shape.
            let tag = fnv1a_words([self.digest, self.next as u64]) | 1 << 63;
            let tags = Tags { algorithm: None, shape: Some(tag), part_of: None };
            let plan = &self.layout.buckets[self.next];
            let tensor = match &b.flat {
                Some(flat) => flat,
                // A complete bucket of one parameter: its gradient is in its slot.
                None => self.slots[plan.params[0]]
                    .as_ref()
                    .ok_or_else(|| CollectiveError::protocol("a complete bucket lacks its gradient"))?,
            };
            crate::trace::trace_event!(rank = self.comm.rank(), bucket = self.next, "GradientSync: bucket launched");
            b.work = Some(self.comm.tagged(tags).all_reduce_async(tensor, self.config.op())?);
            self.next += 1;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        // Parameters without a gradient this step contribute zeros.
        let dev = self.comm.device().clone();
        for (e, slot) in self.layout.entries.iter().zip(&mut self.slots) {
            if let (None, Some((b, off))) = (&slot, e.place) {
                let bucket = &mut self.buckets[b];
                match &bucket.flat {
                    Some(flat) => write_zeros(&dev, flat.buffer(), off, e.bytes)?,
                    None => *slot = Some(Tensor::zeros(&dev, e.spec.dtype(), e.spec.shape())?),
                }
                bucket.missing -= 1;
            }
        }
        self.launch_ready()?;
        let deadline = self.deadline();
        let n = self.buckets.len();
        for (k, (b, plan)) in self.buckets.iter_mut().zip(&self.layout.buckets).enumerate() {
            if let Some(work) = b.work.take() {
                // Which bucket: its all_reduce's own name shows its size and a tag digest only.
                work.wait().map_err(|e| e.appended(&format!("(the all_reduce of bucket {k} of {n})")))?;
            }
            let Some(flat) = &b.flat else { continue }; // reduced in place
            for &i in &plan.params {
                let e = &self.layout.entries[i];
                let grad = match self.slots[i].take() {
                    Some(t) => t,
                    None => Tensor::zeros(&dev, e.spec.dtype(), e.spec.shape())?,
                };
                let Some((_, off)) = e.place else { continue }; // bucketed parameters have a place
                let src = Range::new(flat.buffer().clone(), off, e.bytes);
                let dst = Range::new(grad.buffer().clone(), 0, e.bytes);
                let event = dev.copy(&src, &dst)?;
                self.slots[i] = Some(grad);
                dev.wait(&event, deadline)?;
            }
        }
        // Empty gradients are in no bucket; one not handed over comes back empty.
        for (e, slot) in self.layout.entries.iter().zip(&mut self.slots) {
            if slot.is_none() && e.place.is_none() {
                *slot = Some(Tensor::zeros(&dev, e.spec.dtype(), e.spec.shape())?);
            }
        }
        Ok(())
    }

    /// Takes the step's gradients out, in id order (empty gradients included), and makes the
    /// sync ready for the next step.
    fn end_step(&mut self) -> Vec<(K, Tensor<D>)> {
        self.next = 0;
        self.held.clear();
        for (b, plan) in self.buckets.iter_mut().zip(&self.layout.buckets) {
            b.missing = plan.params.len();
            b.work = None;
        }
        let mut out = Vec::with_capacity(self.slots.len());
        for (e, slot) in self.layout.entries.iter().zip(&mut self.slots) {
            if let Some(t) = slot.take() {
                out.push((e.id.clone(), t));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
