//! The non-blocking ops issued before a group: the group starts once they are done, so one
//! that waits for a rank whose next call is in the group itself finishes only if another
//! thread issues that rank's call first. If none does, both wait out the timeout, and the
//! report blames the rank for "not issuing" what the group holds: such a group is told so at
//! once (a `tracing` warning), and its timeouts carry the explanation as their advice.

use std::sync::Arc;

use super::super::validate::Call;
use super::{Few, addr};
use crate::comm::Communicator;
use crate::device::Device;

/// What to do when the group's timeout came from such a wait.
pub(super) const HINT: &str = "a non-blocking op issued before this group needs a call that is in the group, and a \
     group runs only after the ops issued before it on its communicators: wait for that op's `Work` before running \
     the group, or add the op to the group instead (as ncclGroupStart/End would hold it)";

/// The explanation when a rank of another communicator of `calls` (a rank of the same group
/// of ranks) has not issued as many ops as the oldest unfinished op of a communicator of
/// `calls` needs: that rank's next call is in this group, which runs after the op, so only
/// another thread issuing it lets the two finish. (Ranks that issue point-to-point ops in
/// different numbers may be suspected wrongly; it only adds advice.)
pub(super) fn suspect<D: Device>(calls: &[(&Communicator<D>, Call<'_, D>)]) -> Option<String> {
    let mut comms: Few<&Communicator<D>> = Few::new();
    for (c, _) in calls {
        if !comms.iter().any(|k| addr(k) == addr(c)) {
            comms.push(*c);
        }
    }
    // Usually no communicator has a non-blocking op outstanding: no lock is taken then.
    if comms.len() < 2 || !comms.iter().any(|c| c.engine.may_be_busy()) {
        return None;
    }
    let next = |c: &Communicator<D>| {
        let l = c.local.lock().unwrap_or_else(|e| e.into_inner());
        (l.seq, l.in_flight as u64)
    };
    for c in &comms {
        let (seq, in_flight) = next(c);
        if in_flight == 0 {
            continue;
        }
        let oldest = seq.saturating_sub(in_flight);
        if let Some(p) =
            comms.iter().find(|p| Arc::ptr_eq(&p.shared, &c.shared) && p.rank != c.rank && next(p).0 <= oldest)
        {
            return Some(format!(
                "rank {}'s non-blocking op #{oldest}, issued before this group and not finished, needs rank {}'s \
                 matching call, and rank {} has issued only {} op(s), its next call being in this group, which starts \
                 only once that op is done: unless another thread issues it first, both wait out the timeout",
                c.rank,
                p.rank,
                p.rank,
                next(p).0
            ));
        }
    }
    None
}
