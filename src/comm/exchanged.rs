//! The lean path of a blocking exchanged op: a small op between ranks sharing slots that
//! [`submit`](super::Communicator::submit) runs at once, with nothing queued ahead of it, no
//! shared progress engine; a pre-multiplied op (`PreMulSum`, f16 `Avg`) scales its input
//! first, at once. It does what `prepare_checked`, the
//! driver and `complete` do for such an op — the same admission checks, sequence number,
//! deadline, flight-recorder entry, sticky failure — but builds no `OpRun`: the exchange
//! runs on a borrowed [`Exchange`] on this stack ([`sched::run_exchange`]), the same code an
//! `OpRun` runs for group calls and `Work`.
//!
//! A repeat of the call (a training loop's, a benchmark's) that the rank's memo holds runs
//! from what the first run worked out ([`Again`]: the fingerprint, whose parts the rank
//! reads), after the checks every call gets (the memo's match, nothing in flight, no memory
//! held by another communicator's op, no failure): [`again`](Communicator::again).

use std::sync::MutexGuard;

use super::memo::Again;
use super::prepare::{next_seq, premultiply};
use super::validate::{Call, Io};
use super::{Communicator, Local};
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::mem::Sole;
use crate::op::{Fingerprint, OpDesc};
use crate::pins;
use crate::sched::{self, Binding, Bindings, Exchange, Lean, View};
use crate::trace::debug_event;

impl<D: Device> Communicator<D> {
    /// Runs an exchanged op that [`check`](Self::check) accepted, on this thread. The caller
    /// holds the rank's state (`local`, held until the op is over: see `submit`'s lean path),
    /// and no op of the rank is in flight.
    pub(super) fn run_exchanged(
        &self,
        mut local: MutexGuard<'_, Local<D>>,
        desc: OpDesc,
        io: Io<&D::Buffer>,
        sole: Sole<'_>,
    ) -> Result<()> {
        let (rank, shared) = (self.rank, &*self.shared);
        self.admit(&mut local, &desc)?;
        let seq = next_seq(&mut local, &desc);
        let fp = desc.fingerprint();
        let lean = Lean::of(&fp, rank);
        let view = self.view(seq, &fp);
        // f16 `Avg` pre-multiplies its input (as the plan path's prologue does, so that every
        // rank's part is scaled alike whichever path its rank took); its result rescales.
        let premul = desc.op.and_then(|o| o.premul(desc.dtype, shared.world));
        let pre = match premul {
            None => {
                // A repeat of this call runs at once (`again`), unless it pre-multiplies.
                local.memo.keep(&desc, Again { fp, lean });
                None
            }
            Some(s) => match self.premultiplied(&mut local, &io, &desc, s) {
                Ok(pre) => pre,
                Err(e) => {
                    let (exchange, now) = (crate::config::Algorithm::Exchange, std::time::Instant::now());
                    return Err(self.failed_before_run(&mut local, view, desc, exchange, now, e));
                }
            },
        };
        let input = match &pre {
            Some(buf) => Binding::Contig { buf, base: 0, id: self.device.mem_id(buf) },
            None => io.input,
        };
        let bufs = Bindings { input, output: io.output, scratch: Binding::Unbound };
        self.exchange_now(&mut local.failed, &Exchange::new(&self.device, &bufs, view, lean, sole))
    }

    /// A repeat of a call this rank's memo holds, when that call ran as an exchange
    /// ([`Again`]) and the rank is as it was then (nothing in flight, no memory held by
    /// another op, no failure known): run at once, on what the first run worked out. `None`
    /// when not: the caller takes the full path (which reports any failure).
    ///
    /// What it skips (a repeated 16-byte broadcast's non-root, callgrind): building the
    /// call's bindings as a value returned through `check`, the fingerprint and what the
    /// exchange derives from it, and moving each along.
    #[inline]
    pub(super) fn again(&self, local: &mut Local<D>, call: &Call<'_, D>) -> Option<Result<()>> {
        let Local { memo, seq, failed, in_flight, .. } = local;
        if *in_flight != 0 || failed.is_some() || pins::any() || !self.shared.link.sound(self.rank) {
            return None;
        }
        let m = memo.find(call, &self.device)?;
        let again = m.again()?;
        let s = *seq;
        *seq += 1;
        let (input, output) = m.bind(call, |b| b);
        let bufs = Bindings { input, output, scratch: Binding::Unbound };
        let view = self.view(s, &again.fp);
        Some(self.exchange_now(failed, &Exchange::new(&self.device, &bufs, view, again.lean, call.sole)))
    }

    /// The view of this rank's exchanged op `seq` of fingerprint `fp`.
    #[inline]
    fn view<'a>(&'a self, seq: u64, fp: &'a Fingerprint) -> View<'a> {
        View {
            rank: self.rank,
            seq,
            p2p: !fp.desc.kind.is_collective(),
            fp,
            // Counted from the op's first wait, if it waits (most never do: no clock read
            // before the op runs); the exchange keeps its flight-recorder entry.
            deadline: sched::Deadline::OnWait(self.shared.config.timeout()),
            shared: &self.shared,
        }
    }

    /// Runs `ex` to its end; a failure is the rank's (sticky: `failed`).
    #[inline]
    fn exchange_now(&self, failed: &mut Option<CollectiveError>, ex: &Exchange<'_, D, &D::Buffer>) -> Result<()> {
        let v = ex.view();
        let result = sched::run_exchange(ex);
        debug_event!(v.rank, v.seq, ok = result.is_ok(), "exchange done");
        result.map_err(|e| {
            let e = e.with_rank(v.rank).with_op(v.fp.desc.to_string()).with_seq(v.seq);
            *failed = Some(e.clone());
            e
        })
    }

    /// The rank's `premul` buffer holding the input scaled by `s`, once the scaling is done
    /// (a handle of its own: the caller keeps the rank's state locked meanwhile); `None` for
    /// an op with no input.
    fn premultiplied(
        &self,
        local: &mut Local<D>,
        io: &Io<&D::Buffer>,
        desc: &OpDesc,
        s: f64,
    ) -> Result<Option<D::Buffer>> {
        let bytes = io.input_elems * desc.dtype.size();
        let Some((pre, work)) = premultiply(&self.device, &mut local.premul, &io.input, bytes, desc.dtype, s)? else {
            return Ok(None);
        };
        for (event, _) in &work {
            self.device.wait(event, None)?;
        }
        Ok(Some(pre.clone()))
    }
}
