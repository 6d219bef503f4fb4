//! The lean path of a blocking exchanged op: a small op between ranks sharing slots that
//! [`submit`](super::Communicator::submit) runs at once, with nothing queued ahead of it, no
//! shared progress engine; a pre-multiplied op (`PreMulSum`, f16 `Avg`) scales its input
//! first, at once. It does what `prepare_checked`, the
//! driver and `complete` do for such an op — the same admission checks, sequence number,
//! deadline, flight-recorder entry, sticky failure — but builds no `OpRun`: the exchange
//! runs on a borrowed [`Exchange`] on this stack ([`sched::run_exchange`]), the same code an
//! `OpRun` runs for group calls and `Work`.

use std::sync::MutexGuard;

use super::prepare::{next_seq, premultiply};
use super::validate::Io;
use super::{Communicator, Local};
use crate::device::Device;
use crate::error::Result;
use crate::mem::Sole;
use crate::op::OpDesc;
use crate::sched::{self, Binding, Bindings, Exchange, View};
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
        let view = View {
            rank,
            seq,
            p2p: !desc.kind.is_collective(),
            fp: &fp,
            // Counted from the op's first wait, if it waits (most never do: no clock read
            // before the op runs); the exchange keeps its flight-recorder entry.
            deadline: sched::Deadline::OnWait(shared.config.timeout()),
            shared,
        };
        // f16 `Avg` pre-multiplies its input (as the plan path's prologue does, so that every
        // rank's part is scaled alike whichever path its rank took); its result rescales.
        let premul = desc.op.and_then(|o| o.premul(desc.dtype, shared.world));
        let pre = match premul {
            None => None,
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
        let result = sched::run_exchange(&Exchange::new(&self.device, &bufs, view, sole));
        debug_event!(rank, seq, ok = result.is_ok(), "exchange done");
        result.map_err(|e| {
            let e = e.with_rank(rank).with_op(desc.to_string()).with_seq(seq);
            local.failed = Some(e.clone());
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
