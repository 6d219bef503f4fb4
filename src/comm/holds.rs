//! What a rank's ops hold of tensors' memory (`crate::pins`) and what a call finds held by
//! others: a pending non-blocking op of another communicator (refused; the communicator stays
//! usable), or another rank's op running on the same memory (a race: the communicator is
//! aborted).

use std::sync::Arc;

use super::Communicator;
use super::validate::Call;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::op::OpDesc;
use crate::pins;
use crate::tensor::Tensor;

impl<D: Device> Communicator<D> {
    /// The byte ranges `call` reads (its input, unless in place) and writes (its outputs).
    pub(super) fn held(&self, call: &Call<'_, D>) -> pins::Ranges {
        let range = |t: &Tensor<D>, write: bool| {
            pins::Held::of::<D>(self.device.mem_id(t.buffer()), t.byte_offset(), t.byte_len(), write)
        };
        let mut held = smallvec::SmallVec::new();
        held.extend(call.input.tensors().iter().map(|t| range(t, call.in_place)));
        held.extend(call.output.tensors().iter().map(|t| range(t, true)));
        held
    }

    /// On a device that does not guard its own memory (`Device::host_memory` false: a GPU,
    /// whose kernels race silently), holds what the blocking op `seq` of `call` reads and
    /// writes while it runs; and, once held, whether another rank's (or communicator's) op
    /// holds any of it at once: two ranks given one buffer (`Tensor::from_buffer` of one GPU
    /// buffer on two ranks) got wrong sums that differed between ranks, with `Ok`. Then the
    /// op fails and the communicator is aborted, so the other rank's op, waiting for this
    /// one, fails at once too. The host device's memory guards catch the same themselves.
    pub(super) fn hold_unguarded(
        &self,
        call: &Call<'_, D>,
        desc: OpDesc,
        seq: u64,
    ) -> (Option<pins::Hold>, Option<CollectiveError>) {
        if self.device.host_memory() {
            return (None, None);
        }
        let (hold, raced) = self.hold_blocking(&self.held(call), desc, seq);
        (Some(hold), raced)
    }

    /// Holds `held` for the blocking op `seq` while it runs, and whether another rank's op
    /// holds any of it at once (see [`hold_unguarded`](Self::hold_unguarded)): a group's op,
    /// whose ranges were found before its call was consumed.
    pub(super) fn hold_blocking(
        &self,
        held: &[pins::Held],
        desc: OpDesc,
        seq: u64,
    ) -> (pins::Hold, Option<CollectiveError>) {
        let hold = pins::Hold::blocking(held, self.pin_owner(), desc, self.rank, seq);
        (hold, self.raced(held, desc, seq))
    }

    /// Whether an op of another rank (or communicator) holds memory that this rank's op `seq`,
    /// holding `held` already, uses: then the error it fails with, the communicator aborted.
    pub(super) fn raced(&self, held: &[pins::Held], desc: OpDesc, seq: u64) -> Option<CollectiveError> {
        pins::racing(held, self.pin_owner()).map(|(i, by, _)| self.race(held[i].write, i, &by, desc, Some(seq)))
    }

    /// The error of a call whose tensor #`i` (which it writes, or reads) another rank's op,
    /// running at once, uses (`by`): two ranks were given one memory. Aborts the
    /// communicator, so that the other rank, waiting for this one in its op, fails at once.
    #[cold]
    fn race(&self, write: bool, i: usize, by: &str, desc: OpDesc, seq: Option<u64>) -> CollectiveError {
        let e = CollectiveError::invalid(format!(
            "tensor #{i} of this call (which it {}) is {by}, running at the same time on memory this call uses: two \
             ranks (or communicators) were given one tensor's memory, and nothing orders their ops (on this device \
             they would race, with no error); the communicator is aborted",
            if write { "writes" } else { "reads" }
        ))
        .with_rank(self.rank)
        .with_op(desc.to_string())
        .with_hint("give each rank a tensor (a buffer) of its own, then create the communicators again");
        let e = match seq {
            Some(s) => e.with_seq(s),
            None => e,
        };
        self.poison_now(e.clone());
        e
    }

    /// This communicator's name for the pins its non-blocking ops hold.
    pub(super) fn pin_owner(&self) -> pins::Owner {
        pins::Owner { rank: Arc::as_ptr(&self.engine) as usize, comm: Arc::as_ptr(&self.shared) as usize }
    }

    /// Whether another communicator's pending non-blocking op holds memory `call` uses
    /// (`crate::pins`): `InvalidArgument` naming that op; the communicator stays usable. A
    /// blocking op of another rank running on it ([`hold_unguarded`](Self::hold_unguarded))
    /// is a race instead: the communicator is aborted.
    #[inline]
    pub(super) fn check_pins(&self, call: &Call<'_, D>, desc: &OpDesc) -> Result<()> {
        if pins::any() { self.check_held(call, desc) } else { Ok(()) }
    }

    /// [`check_pins`](Self::check_pins) once some op holds something.
    #[inline(never)]
    fn check_held(&self, call: &Call<'_, D>, desc: &OpDesc) -> Result<()> {
        let held = self.held(call);
        match pins::racing(&held, self.pin_owner()) {
            None => Ok(()),
            Some((i, by, true)) => Err(self.race(held[i].write, i, &by, *desc, None)),
            Some((i, by, false)) => Err(CollectiveError::invalid(format!(
                "tensor #{i} of this call (which it {}) is {by}, a non-blocking op of another communicator not \
                 finished yet; nothing orders the two: wait for that op's `Work` first",
                if held[i].write { "writes" } else { "reads" }
            ))
            .with_rank(self.rank)
            .with_op(desc.to_string())
            .on_usable_communicator()),
        }
    }
}
