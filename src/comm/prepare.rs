//! From a public call to a running op and back: validation, the sticky-failure checks, the
//! sequence number, the plan (a message plan, or an exchange for small ops between threads),
//! scratch and staging memory; then driving it on the calling thread or queueing it for the
//! progress thread, and recording how it ended.

use std::sync::Arc;

use super::memo::{self, Memos};
use super::validate::{self, Call};
use super::work::Work;
use super::{Communicator, Local, Shared};
use crate::algo;
use crate::device::Device;
use crate::device::Range;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::{OpDesc, OpKind};
use crate::pins;
use crate::sched::{self, Binding, Bindings, Now, OpCtx, OpRun};
use crate::transport::slots::SLOT_BYTES;
use crate::types::{Rank, ReduceOp, Scale};

impl<D: Device> Communicator<D> {
    /// The single path from a public method to the scheduler: prepares the op and drives it
    /// on the calling thread (or, with shared progress, hands it to the progress thread and
    /// waits). The rank's driver stays locked until the op is over, so calls on one
    /// communicator run one at a time, in the order they were made.
    ///
    /// The lean path: an exchanged op (a small op between threads, or processes sharing
    /// slots) while none of this rank's ops is in flight ([`Local::in_flight`]) takes the
    /// rank's state lock alone and holds it until the op is over: no op of the rank can run
    /// meanwhile (a driver has none to run, and numbering one takes the lock). One lock pair
    /// instead of two (the driver's and the state's): each is a locked read-modify-write,
    /// and four cost 4 ranks on 2 cores ~15% of a 16-byte rooted op (PERFORMANCE.md, session
    /// 26).
    pub(super) fn submit(&self, mut call: Call<'_, D>) -> Result<()> {
        let entered = self.enter(|| call.kind.name().to_string())?;
        call.tags.part_of = self.caller.part_of();
        let kind = call.kind;
        let r = self.submit_entered(&call);
        self.unless_overlapped(&entered, kind, r)
    }

    /// `r`, the outcome of a call of `kind` made while `entered`, unless another thread's call
    /// was refused meanwhile: the ranks may have paired this call with that one, so an `Ok`
    /// cannot be trusted (the refusal aborted the communicator).
    fn unless_overlapped<T>(&self, entered: &super::caller::Entered<'_>, kind: OpKind, r: Result<T>) -> Result<T> {
        if r.is_err() || !entered.overlapped() {
            return r;
        }
        Err(CollectiveError::new(
            ErrorKind::Aborted,
            format!(
                "another thread called rank {}'s communicator while this {} was in flight: the ranks may have \
                 paired this call with that one, so its result cannot be trusted; the communicator is aborted",
                self.rank,
                kind.name()
            ),
        )
        .with_rank(self.rank)
        .with_op(kind.name().to_string())
        .with_hint(super::caller::ONE_THREAD_HINT))
    }

    /// [`submit`](Self::submit) once this thread holds the rank's calls.
    fn submit_entered(&self, call: &Call<'_, D>) -> Result<()> {
        // A send or receive behind non-blocking ops joins them if they are sends and receives
        // too (torch's `isend` then a blocking `recv` around a ring): the engine runs it.
        let joins = matches!(call.kind, OpKind::Send | OpKind::Recv) && self.engine.may_be_busy();
        if self.engine.shared_progress || joins {
            return self.issue_entered(call)?.wait();
        }
        // Checked under the rank's state, which remembers the last call checked (a repeat is
        // matched, not checked again: `memo`) and which the lean path keeps.
        let mut local = self.lock();
        if let Some(r) = self.again(&mut local, call) {
            return r;
        }
        let (desc, io) = self.check_with(Some(&mut local.memo), call, |b| b)?;
        let exchanged = self.exchanges(&desc).is_some();
        if exchanged && local.in_flight == 0 {
            return self.run_exchanged(local, desc, io, call.sole);
        }
        // Let go before taking the driver: the driver is always taken first.
        drop(local);
        let mut current = self.engine.driving.lock().unwrap_or_else(|e| e.into_inner());
        // Non-blocking ops issued earlier run first (issue order).
        if self.engine.has_queued(&current) {
            self.engine.drain(&mut current);
        }
        let mut local = loop {
            // Another thread may have issued an op since (it takes its sequence number and
            // queues the op under the rank's state lock): that one runs first too, or this
            // op, numbered after it, would run ahead of it and meet peers running it.
            let local = self.lock();
            if !self.engine.has_queued(&current) {
                break local;
            }
            drop(local);
            self.engine.drain(&mut current);
        };
        if exchanged {
            // Nothing is queued ahead: an exchange runs at once, without an `OpRun`, on the
            // call's own buffers.
            return self.run_exchanged(local, desc, io, call.sole);
        }
        let io = validate::Io {
            input: io.input.cloned(),
            output: io.output.cloned(),
            input_elems: io.input_elems,
            blocks: io.blocks,
        };
        let mut op = self.prepare_checked(&mut local, (desc, io))?;
        drop(local);
        // Driven at once: the flight recorder's entry starts at the deadline's clock read.
        op.run.start_at(op.issued);
        // A device without memory guards of its own (a GPU) holds the op's memory while it
        // runs, so that another rank using it at once is caught, not a race.
        let (hold, raced) = self.hold_unguarded(call, op.run.ctx.fp.desc, op.run.ctx.seq);
        let result = match raced {
            Some(e) => Err(e),
            None => sched::drive(&mut op.run),
        };
        drop(hold);
        complete(&self.shared, self.rank, &mut self.lock(), &mut op, result)
    }

    /// The non-blocking path: prepares the op now (so checks fail here, and its place in the
    /// rank's order is taken), queues it, and lets the progress thread drive it.
    pub(super) fn issue(&self, mut call: Call<'_, D>) -> Result<Work> {
        let entered = self.enter(|| call.kind.name().to_string())?;
        call.tags.part_of = self.caller.part_of();
        let kind = call.kind;
        let r = self.issue_entered(&call);
        self.unless_overlapped(&entered, kind, r)
    }

    /// [`issue`](Self::issue) once this thread holds the rank's calls.
    fn issue_entered(&self, call: &Call<'_, D>) -> Result<Work> {
        // What the op will read and write: held from now until it completes (`crate::pins`).
        let held = self.held(call);
        let work = {
            let mut local = self.lock();
            let mut op = self.prepare(&mut local, call)?;
            let (desc, seq) = (op.run.ctx.fp.desc, op.run.ctx.seq);
            let hold = pins::Hold::new(&held, self.pin_owner(), desc, self.rank, seq);
            // As a blocking op does on a device without memory guards (`hold_unguarded`).
            if !self.device.host_memory()
                && let Some(e) = self.raced(&held, desc, seq)
            {
                drop(hold);
                op.run.start_at(op.issued);
                complete(&self.shared, self.rank, &mut local, &mut op, Err(e.clone()))?;
                return Err(e);
            }
            self.engine.push(op, hold, &held)
        };
        self.engine.kick();
        Ok(work)
    }

    /// Checks a call and turns it into a running op: validation (`InvalidArgument`, nothing
    /// sent), the sticky failure checks, a sequence number, the plan, scratch memory.
    #[inline]
    pub(crate) fn prepare(&self, local: &mut Local<D>, call: &Call<'_, D>) -> Result<Prepared<D>> {
        let checked = self.check_with(Some(&mut local.memo), call, D::Buffer::clone)?;
        self.prepare_checked(local, checked)
    }

    /// [`check_with`](Self::check_with) lending the call's own buffers, remembering nothing.
    #[inline]
    pub(crate) fn check_lent<'a>(&self, call: &Call<'a, D>) -> Result<(OpDesc, validate::Io<&'a D::Buffer>)> {
        self.check_with(None, call, |b| b)
    }

    /// [`validate`]s a call on this rank (`InvalidArgument`, nothing sent), or matches it with
    /// the call `memo` remembers (see `memo`); then what other communicators' ops hold of its
    /// memory. `bind` makes the bindings' buffers: the call's own lent, or handles.
    #[inline]
    pub(crate) fn check_with<'a, B>(
        &self,
        memo: Option<&mut Memos>,
        call: &Call<'a, D>,
        bind: impl Fn(&'a D::Buffer) -> B,
    ) -> Result<(OpDesc, validate::Io<B>)> {
        // Checked in place: `map_err(..)?` moved the few-hundred-byte result once more per op
        // (a `memcpy` call, and its stores ahead of the next lock: ~5% of a 16-byte rooted op
        // with 4 ranks on one core, PERFORMANCE.md session 24).
        let checked = memo::validate(memo, call, self.rank, self.shared.world, &self.device, bind);
        if let Ok((desc, _)) = &checked {
            self.check_pins(call, desc)?;
        }
        checked.map_err(CollectiveError::on_usable_communicator)
    }

    /// Whether some peer of this rank is reached over a network (a socket or a shared
    /// segment) rather than by reading its memory: plans then cut long messages
    /// ([`algo::build`]'s `network`).
    fn network(&self) -> bool {
        self.shared.link.network(self.rank, self.shared.world)
    }

    /// [`prepare`](Self::prepare) for a call [`check`](Self::check) accepted.
    pub(crate) fn prepare_checked(
        &self,
        local: &mut Local<D>,
        (desc, io): (OpDesc, validate::Io<D::Buffer>),
    ) -> Result<Prepared<D>> {
        let world = self.shared.world;
        self.admit(local, &desc)?;
        let seq = next_seq(local, &desc);
        let cfg = &self.shared.config;
        let size = desc.dtype.size();
        let chunk = if self.unchunked { desc.count.max(1) } else { cfg.chunk_elems(size) };
        let exchanged = self.exchanges(&desc);
        // An exchange sends no messages and uses no scratch: it needs none of the rank's
        // staging or scratch memory.
        let owns_staging = exchanged.is_none();
        let plan = match (exchanged, &local.last_plan) {
            (Some(plan), _) => plan.clone(),
            // Its blocks differ per call (and per rank): built from them, never cached.
            _ if desc.kind == OpKind::AllToAllV => {
                let max_message = self.network().then_some(chunk);
                Arc::new(algo::all_to_all_v(self.rank, world, io.blocks.as_deref().unwrap_or_default(), max_message))
            }
            (None, Some((d, a, c, plan))) if *d == desc && *a == cfg.algorithm() && *c == chunk => plan.clone(),
            _ => {
                let network = self.network();
                let mut plan = algo::build(&desc, self.rank, world, cfg.algorithm(), chunk, network);
                if let Some(k) = desc.op.and_then(|o| o.avg_prescale(desc.dtype, world)) {
                    plan.steps = algo::prescaled_avg(&plan.steps, world, k);
                }
                let plan = Arc::new(plan);
                local.last_plan = Some((desc, cfg.algorithm(), chunk, plan.clone()));
                plan
            }
        };
        let algorithm = plan.algorithm;
        let issued = std::time::Instant::now();
        let ctx = OpCtx {
            rank: self.rank,
            world,
            seq,
            p2p: !desc.kind.is_collective(),
            fp: desc.fingerprint(),
            deadline: crate::config::deadline_from(issued, cfg.timeout()),
            dtype: desc.dtype,
            combine: desc.op.map_or(crate::types::Combine::Sum, ReduceOp::combine),
            shared: self.rank_shared.clone(),
        };
        let dev = &self.device;
        // The pre-multiplied input's buffer is the op's own until it completes: the rank's
        // (taken), or a new one while a pending op holds that. Two non-blocking `PreMulSum`s
        // (or a group's, or GradientSync's f16 buckets) shared it, and the first returned the
        // second's result, with `Ok`.
        let mut premul = None;
        let setup = (|| {
            if owns_staging {
                ensure(dev, &mut local.scratch, plan.scratch_elems * size)?;
            }
            let mut io = io;
            let mut prologue = smallvec::SmallVec::<[_; 1]>::new();
            if let Some(s) = desc.op.and_then(|o| o.premul(desc.dtype, world)) {
                premul = local.premul.take();
                if let Some((pre, work)) =
                    premultiply(dev, &mut premul, &io.input, io.input_elems * size, desc.dtype, s)?
                {
                    prologue = work;
                    io.input = Binding::Contig { id: dev.mem_id(pre), buf: pre.clone(), base: 0 };
                }
            }
            let bufs = Bindings {
                input: io.input,
                output: io.output,
                // An exchange names no scratch span.
                scratch: match &local.scratch {
                    Some(b) if owns_staging => Binding::Contig { buf: b.clone(), base: 0, id: dev.mem_id(b) },
                    _ => Binding::Unbound,
                },
            };
            Ok((bufs, prologue))
        })();
        let (bufs, prologue) = match setup {
            Ok(x) => x,
            Err(e) => return Err(self.failed_before_run(local, ctx.view(), desc, algorithm, issued, e)),
        };
        let stage = if owns_staging { local.staging.take() } else { None };
        let run = OpRun::new(dev.clone(), plan, bufs, ctx, stage, self.reach.clone(), prologue);
        // Every prepared op ends in `complete`, which counts it down.
        local.in_flight += 1;
        Ok(Prepared { run, issued, premul })
    }

    /// Ends an op that failed before it ran (scratch allocation, its pre-multiply, a device
    /// error): its peers stop at once instead of waiting out the timeout, the flight recorder
    /// shows it failed, and the failure is sticky. Both paths end such an op here (this one
    /// and the lean [`run_exchanged`](Self::run_exchanged)).
    #[cold]
    pub(super) fn failed_before_run(
        &self,
        local: &mut Local<D>,
        view: sched::View<'_>,
        desc: OpDesc,
        algorithm: crate::config::Algorithm,
        issued: std::time::Instant,
        e: CollectiveError,
    ) -> CollectiveError {
        sched::fail(view, &e);
        self.shared.board.start_at(self.rank, view.seq, desc, algorithm, issued);
        self.shared.board.finish(self.rank, false);
        let e = e.with_rank(self.rank).with_op(desc.to_string()).with_seq(view.seq);
        local.failed = Some(e.clone());
        e
    }

    /// Whether this rank may start `desc` at all (both paths ask, before the op takes a
    /// sequence number): not after a failure of its own (sticky), not on a poisoned link,
    /// and only in a dtype its device runs kernels on.
    #[inline]
    pub(super) fn admit(&self, local: &mut Local<D>, desc: &OpDesc) -> Result<()> {
        // The usual case in a few loads; anything amiss is sorted out below.
        if local.failed.is_none()
            && self.shared.link.sound(self.rank)
            && (desc.op.is_none() || self.device.supports(desc.dtype))
        {
            return Ok(());
        }
        self.refuse(local, desc)
    }

    /// [`admit`](Self::admit) once a check found something amiss: the error, or `Ok` when
    /// nothing was after all.
    #[cold]
    #[inline(never)]
    fn refuse(&self, local: &mut Local<D>, desc: &OpDesc) -> Result<()> {
        if let Some(e) = &local.failed {
            return Err(CollectiveError::failed_earlier(e).with_rank(self.rank).with_op(desc.to_string()));
        }
        if let Some(e) = self.shared.link.poisoned(self.rank) {
            // Where this call stands relative to the op that failed decides what it reports:
            // the original error if it is that op (arriving late) or past it, `Aborted` if not.
            let now = if desc.kind.is_collective() { Now::Collective(local.seq) } else { Now::NewP2p };
            let err = sched::after_failure(&e, self.rank, now).with_op(desc.to_string());
            local.failed = Some(err.clone());
            return Err(err);
        }
        // A peer process that crashed (or fell silent) is gone for every op, including those
        // that would never wait for it (a broadcast's root runs ahead, and its non-roots read
        // the root alone): the op fails now, naming it, rather than up to the slots' depth of
        // ops later or never.
        if let Some(p) = self.shared.link.lost_peer(self.rank) {
            let err = CollectiveError::new(
                ErrorKind::PeerLost,
                format!("rank {p} {}, before this call", self.shared.link.departure(self.rank, p)),
            )
            .with_rank(self.rank)
            .with_peer(p)
            .with_op(desc.to_string());
            // Told to the peers too, as any failure is: one that waits for this rank (a
            // broadcast from it) must hear of the lost peer before this rank's goodbye, or it
            // blames this rank for leaving.
            self.shared.link.poison(self.rank, err.clone());
            local.failed = Some(err.clone());
            return Err(err);
        }
        // Only reductions (and their scaling) run kernels on the elements: every other op
        // moves bytes, which any device does for any dtype.
        if desc.op.is_some() && !self.device.supports(desc.dtype) {
            return Err(CollectiveError::unsupported(format!(
                "{} cannot reduce {}",
                self.device.describe(),
                desc.dtype
            ))
            .with_rank(self.rank)
            .with_op(desc.to_string()));
        }
        Ok(())
    }

    /// The exchange plan, when `desc` runs as an exchange: the ranks are threads of this
    /// process, or processes of one host sharing slots, on host-memory devices
    /// ([`exchange_plan`]), no other algorithm was chosen, and
    /// each rank's part fits a slot ([`SLOT_BYTES`]). The same answer on every rank.
    pub(super) fn exchanges(&self, desc: &OpDesc) -> Option<&Arc<algo::Plan>> {
        self.exchange.as_ref().filter(|_| {
            matches!(
                desc.algorithm.unwrap_or(self.shared.config.algorithm()),
                crate::config::Algorithm::Auto | crate::config::Algorithm::Exchange
            ) && algo::exchange_part(desc, self.shared.world).is_some_and(|b| b <= SLOT_BYTES)
        })
    }
}

/// Records how a prepared op ended and gives its staging memory back for the next op (taken
/// in place: the op, a few hundred bytes, is not moved; the caller drops it next).
#[inline]
pub(crate) fn complete<D: Device>(
    shared: &Shared,
    rank: Rank,
    local: &mut Local<D>,
    op: &mut Prepared<D>,
    result: Result<()>,
) -> Result<()> {
    let (desc, seq) = (op.run.ctx.fp.desc, op.run.ctx.seq);
    local.in_flight = local.in_flight.saturating_sub(1);
    if let Some(mut stage) = op.run.take_staging() {
        stage.trim();
        local.staging = Some(stage);
    }
    if let Some(pre) = op.premul.take()
        && local.premul.is_none()
    {
        local.premul = Some(pre);
    }
    shared.board.finish_op(rank, seq, &desc, result.is_ok());
    let result = result.map_err(|e| e.with_rank(rank).with_op(desc.to_string()).with_seq(seq));
    if let Err(e) = &result {
        // The first failure stays what later calls quote (an op skipped after it fails too).
        local.failed.get_or_insert_with(|| e.clone());
    }
    result
}

/// An op that passed its checks and is ready to be driven, with what its communicator
/// records when it ends.
pub(crate) struct Prepared<D: Device> {
    pub(crate) run: OpRun<D>,
    /// When it was prepared: the clock read its deadline counts from.
    issued: std::time::Instant,
    /// The buffer its pre-multiplied input lives in, the op's own while it runs (given back
    /// to the rank at [`complete`]).
    premul: Option<D::Buffer>,
}

/// The plan of every exchanged op: one [`Step::Exchange`](algo::Step::Exchange). Ranks that
/// are threads of one process (or processes of one host sharing slots)
/// on host-memory devices run ops whose parts fit a slot
/// ([`SLOT_BYTES`]) this way, unless an algorithm was chosen: no messages, one published part
/// per rank, each rank computing its own result.
pub(super) fn exchange_plan() -> Arc<algo::Plan> {
    Arc::new(algo::Plan {
        steps: vec![algo::Step::Exchange],
        algorithm: crate::config::Algorithm::Exchange,
        scratch_elems: 0,
    })
}

pub(super) fn next_seq<D: Device>(local: &mut Local<D>, desc: &OpDesc) -> u64 {
    let counter = match (desc.kind, desc.peer) {
        (crate::op::OpKind::Send, Some(p)) => &mut local.p2p_sent[p],
        (crate::op::OpKind::Recv, Some(p)) => &mut local.p2p_received[p],
        _ => &mut local.seq,
    };
    let s = *counter;
    *counter += 1;
    s
}

/// Makes `slot` hold a buffer of at least `bytes` (reused across ops, grown when needed).
/// Even for 0 bytes: plans of empty ops still name zero-length scratch spans, which must
/// resolve to a bound buffer.
/// The device work of an op's prologue, each with the range it writes.
pub(super) type Prologue<E> = smallvec::SmallVec<[(E, (usize, usize, usize)); 1]>;

/// The buffer holding a pre-multiplied input, and the device work that writes it.
pub(super) type Premultiplied<'p, D> = (&'p <D as Device>::Buffer, Prologue<<D as Device>::Event>);

/// Pre-multiplies an op's input (`PreMulSum`, f16 `Avg`) by `s` into the rank's `premul`
/// buffer, which the op then reads instead: the one tensor, or an input list's tensors one
/// after the other (its blocks), `bytes` in all. The buffer and the device work, or `None`
/// for an op with no input.
pub(super) fn premultiply<'p, D: Device, B: std::borrow::Borrow<D::Buffer>>(
    dev: &D,
    premul: &'p mut Option<D::Buffer>,
    input: &Binding<B>,
    bytes: usize,
    dtype: crate::types::DType,
    s: f64,
) -> Result<Option<Premultiplied<'p, D>>> {
    let srcs: smallvec::SmallVec<[_; 1]> = match input {
        Binding::Contig { buf, base, .. } => smallvec::smallvec![(Range::new(buf.borrow().clone(), *base, bytes), 0)],
        Binding::Blocks { bufs, block } => {
            bufs.iter().enumerate().map(|(k, (b, _))| (Range::new(b.borrow().clone(), 0, *block), k * block)).collect()
        }
        Binding::Unbound => return Ok(None),
    };
    ensure(dev, premul, bytes)?;
    let Some(pre) = premul.as_ref() else { return Ok(None) };
    let id = dev.mem_id(pre);
    let mut work = Prologue::new();
    for (src, off) in srcs {
        let dst = Range::new(pre.clone(), off, src.len);
        let event = dev.scale(&src, &dst, dtype, Scale::MulBy(s))?;
        work.push((event, (id, off, dst.len)));
    }
    Ok(Some((pre, work)))
}

fn ensure<D: Device>(dev: &D, slot: &mut Option<D::Buffer>, bytes: usize) -> Result<()> {
    if slot.as_ref().is_some_and(|b| dev.len(b) >= bytes) {
        return Ok(());
    }
    *slot = Some(dev.alloc(bytes)?);
    Ok(())
}
