//! Splitting a communicator: every rank of the parent calls, the ranks agree through two
//! all-gathers on the parent (so a rank that calls something else is a `Mismatch`), and the
//! members join a child whose id is derived from the parent's id and instance nonce (so two
//! groups that used the same id one after the other never share a child id) and rooted at
//! its first member's process, which names it to the others.

use super::Communicator;
use super::validate::{Call, Input, Output};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpKind;
use crate::tensor::Tensor;
use crate::types::Rank;
use crate::unique_id::{UNIQUE_ID_BYTES, UniqueId};

use super::rendezvous::listener;

fn digest(ranks: &[Rank]) -> u64 {
    crate::hash::fnv1a_words(ranks.iter().map(|&r| r as u64))
}

/// A rank's record flag: its own list was rejected (else 0 or 1: whether it is a member).
const REJECTED: u64 = 2;
/// What a rank found about the split: nothing wrong, its own list rejected, or (plus `k`)
/// that rank `k` of its list passed another list.
const FOUND_NOTHING: u64 = 0;
const FOUND_REJECTED: u64 = 1;
const FOUND_PEER: u64 = 2;

/// Why `ranks` is not a list of distinct ranks of a communicator of `n`.
fn check_list(ranks: &[Rank], n: usize) -> std::result::Result<(), String> {
    let mut seen = vec![false; n];
    for &r in ranks {
        if r >= n {
            return Err(format!("rank {r} is out of range for a communicator of {n} ranks"));
        }
        if std::mem::replace(&mut seen[r], true) {
            return Err(format!("rank {r} is listed twice"));
        }
    }
    Ok(())
}

impl<D: Device> Communicator<D> {
    /// A new communicator with the same ranks (`ncclCommSplit` with one color). Every rank
    /// must call it, in the same order relative to other collectives. Across processes it
    /// forms at rank 0's process, as [`split_from`](Self::split_from) says.
    ///
    /// # Errors
    /// Collective errors as for any collective; `Timeout` if the child cannot be formed.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// let child = comm.split_all()?;
    /// assert_eq!(child.world_size(), 1);
    /// assert_ne!(child.unique_id(), comm.unique_id());
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn split_all(&self) -> Result<Self> {
        let all: Vec<Rank> = (0..self.world_size()).collect();
        self.split_as(&all, "split_all")?
            .ok_or_else(|| CollectiveError::protocol("split_all left this rank out").with_rank(self.rank))
    }

    /// A new communicator of the listed parent ranks; new rank `i` is `ranks[i]`. Every rank
    /// of the parent must call; ranks not in their list (an empty list is allowed for them)
    /// get `None`. All members must pass the same list. Ranks may pass disjoint lists in one
    /// call and so form several communicators at once, as `ncclCommSplit`'s colors (torch's
    /// `new_subgroups`) do: ranks 0 and 1 passing `[0, 1]` and ranks 2 and 3 passing `[2, 3]`
    /// form two communicators of 2.
    ///
    /// Across processes, each new communicator meets at the process of the first rank its
    /// list names (at the parent's rendezvous when that process serves it, else at that
    /// process's own listener, started as [`UniqueId::new`] starts one), so it needs no
    /// process but its members': a rank left out may exit as soon as its call returns, and
    /// the process that made the parent's id need not still run.
    ///
    /// # Errors
    /// `InvalidArgument` for a rank out of range or listed twice; the other ranks then get
    /// `Mismatch` naming that rank, at once. `Mismatch` on every rank when a list names a rank
    /// that passed another list. After either, no rank joined a new communicator and the
    /// parent is still usable. A member that fails or exits while the new communicator forms
    /// fails it for every member at once (`PeerLost` naming it in the parent's numbering; the
    /// parent is unchanged). Collective errors as for any collective.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// assert!(comm.split_from(&[])?.is_none());
    /// assert!(comm.split_from(&[0, 0]).is_err());
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn split_from(&self, ranks: &[Rank]) -> Result<Option<Self>> {
        self.split_as(ranks, "split_from")
    }

    /// [`split_from`](Self::split_from), its errors naming `call` (the public call made).
    fn split_as(&self, ranks: &[Rank], call: &str) -> Result<Option<Self>> {
        // One call for the two-threads rule: no other thread's call between its steps.
        let _entered = self.enter(|| call.to_string())?;
        let n = self.world_size();
        // A rank whose own list is bad still takes part (saying so), so that its peers fail
        // at once too rather than wait for it.
        let rejected = check_list(ranks, n)
            .map_err(|m| CollectiveError::invalid(m).with_rank(self.rank).with_op(call).on_usable_communicator());
        let member = rejected.is_ok() && ranks.contains(&self.rank);
        let d = digest(ranks);
        let flag = if rejected.is_err() { REJECTED } else { u64::from(member) };
        let outer = |e: CollectiveError| e.with_outer_op(call.to_string());
        let got = self.split_gather(&[flag, d, ranks.len() as u64]).map_err(outer)?;
        // What this rank found: a member checks that every rank of its list passed the same
        // list (and is a member); then every rank learns what every rank found, so that all
        // fail together (a rank that another rank's list names, but that passed a list of its
        // own, would else go on alone).
        let finding = match &rejected {
            Err(_) => FOUND_REJECTED,
            Ok(()) if member => {
                let differs = |&&k: &&Rank| got.get(3 * k..3 * k + 3) != Some(&[1, d, ranks.len() as u64][..]);
                ranks.iter().find(differs).map_or(FOUND_NOTHING, |&k| FOUND_PEER + k as u64)
            }
            Ok(()) => FOUND_NOTHING,
        };
        let split_no = {
            let mut l = self.lock();
            l.splits += 1;
            l.splits
        };
        // The first member of each list names its child's id (with the finding): the other
        // members read it there, so the child meets where that member's process listens.
        let mut record = [0u64; RECORD];
        record[0] = finding;
        if member && ranks.first() == Some(&self.rank) {
            let id = self.child_id(split_no, d);
            for (w, b) in record[1..].iter_mut().zip(id.to_bytes().chunks_exact(8)) {
                *w = u64::from_le_bytes(b.try_into().unwrap_or_default());
            }
        }
        let findings = self.split_gather(&record).map_err(outer)?;
        rejected?;
        // A rank whose own list was rejected is the cause of what the others found (a rank
        // before it whose list names it found only that it passed another list).
        let mut found: Vec<(Rank, u64)> =
            findings.chunks_exact(RECORD).map(|r| r[0]).enumerate().filter(|&(_, w)| w != FOUND_NOTHING).collect();
        found.sort_by_key(|&(f, w)| (w != FOUND_REJECTED, f));
        if let Some(&(f, what)) = found.first() {
            return Err(self.split_mismatch(f, what, ranks).with_op(call));
        }
        if !member {
            return Ok(None);
        }
        let pos = ranks.iter().position(|&r| r == self.rank).unwrap_or(0);
        let first = ranks.first().copied().unwrap_or(self.rank);
        let words = findings.get(first * RECORD + 1..(first + 1) * RECORD).unwrap_or_default();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let id = UniqueId::from_bytes(&bytes).map_err(|e| {
            CollectiveError::protocol(format!(
                "rank {first} named the new communicator's id in bytes that are not one: {e}"
            ))
            .with_rank(self.rank)
            .with_peer(first)
            .with_op(call)
        })?;
        let config = self.shared.config.clone().with_shared_progress(self.engine.shared_progress);
        Communicator::with_config(self.device.clone(), ranks.len(), id, pos, config)
            .map(Some)
            .map_err(|e| self.child_failed(&e, ranks, pos, call))
    }

    /// The error of a split whose new communicator did not form (`e`, its
    /// `Communicator::new`'s): about the split, its ranks the parent's (the child's rank `k`
    /// is `ranks[k]`), with a split's advice. Its ranks used to read as the parent's, and its
    /// advice was to start ranks again with the same UniqueId, which no split can follow.
    #[cold]
    fn child_failed(&self, e: &CollectiveError, ranks: &[Rank], pos: usize, call: &str) -> CollectiveError {
        let out = CollectiveError::new(
            e.kind(),
            format!(
                "the new communicator of parent ranks {ranks:?} did not form (in its numbering rank k is parent rank \
                 ranks[k], this rank its rank {pos}): {}",
                e.message()
            ),
        )
        .with_rank(self.rank)
        .with_op(call)
        .on_usable_communicator()
        .with_hint(
            "a member of the new communicator failed or exited while it formed: look at the output of the ranks \
             named above; this communicator (the parent) is unchanged: once they run again, call the split again on \
             every rank",
        )
        .with_source(e.clone());
        match e.context().peer.and_then(|p| ranks.get(p)) {
            Some(&p) => out.with_peer(p),
            None => out,
        }
    }

    /// The id of the child this rank, its list's first member, forms (the `split_no`th split
    /// of this rank, of the list whose digest is `d`): derived from the parent's id and
    /// instance, so that two children never share one; rooted where the parent's is when this
    /// process serves the parent's rendezvous (or none can be started here), else at this
    /// process's own listener. The child then needs no process but its members': under a
    /// launcher, rank 0 left out of a split may exit at once, and an id made by a helper
    /// process serves splits after the helper is gone.
    fn child_id(&self, split_no: u64, d: u64) -> UniqueId {
        let derived = self.shared.id.derive(self.shared.instance.nonce(), &[split_no, d]);
        let Some(parent) = self.shared.id.root_address() else { return derived };
        if listener::serves(parent) {
            return derived;
        }
        match listener::default_address() {
            Ok(Some(here)) if !here.ip().is_unspecified() => derived.rooted_at(here),
            _ => derived,
        }
    }
}

/// Words of a rank's second record of a split: what it found, then the child id its list's
/// first member names ([`UNIQUE_ID_BYTES`] bytes; zeros from every other rank).
const RECORD: usize = 1 + UNIQUE_ID_BYTES / 8;

impl<D: Device> Communicator<D> {
    /// Every rank's `words` (the same count on every rank), through one all-gather on this
    /// communicator, in rank order.
    fn split_gather(&self, words: &[u64]) -> Result<Vec<u64>> {
        let n = self.world_size();
        let mine = Tensor::from_slice(&self.device, words, &[words.len()])?;
        let all = Tensor::<D>::zeros(&self.device, crate::DType::U64, &[words.len() * n])?;
        self.submit(Call { input: Input::One(&mine), output: Output::One(&all), ..Call::new(OpKind::Split) })?;
        all.to_vec::<u64>()
    }

    /// The error of a split that rank `f` found wrong (`what`: its finding); `ranks` is this
    /// rank's list.
    fn split_mismatch(&self, f: Rank, what: u64, ranks: &[Rank]) -> CollectiveError {
        let whose = if f == self.rank { "this rank's".to_string() } else { format!("rank {f}'s") };
        let message = if what == FOUND_REJECTED {
            format!(
                "rank {f} passed an invalid rank list to split_from (it got InvalidArgument, saying why); no rank \
                 joined a new communicator"
            )
        } else {
            let k = (what - FOUND_PEER) as usize;
            let named = if k == self.rank { format!("this rank (rank {k})") } else { format!("rank {k}") };
            format!(
                "{whose} list names {named}, which passed a different list to split_from (or called split_all, \
                 which lists every rank) or left itself out; this rank passed {ranks:?}; no rank joined a new \
                 communicator"
            )
        };
        // The other rank involved: the one at fault, or the one whose list names this rank.
        let peer = match what.checked_sub(FOUND_PEER).map(|k| k as usize) {
            Some(k) if k != self.rank => k,
            _ => f,
        };
        CollectiveError::new(ErrorKind::Mismatch, message)
            .with_rank(self.rank)
            .with_peer(peer)
            .on_usable_communicator()
            .with_hint(
                "every rank must call split_from (split_all is split_from with every rank) in the same order; the \
                 members of a new communicator must pass the same list, and a rank left out passes a list without \
                 itself (an empty one will do) or the list of its own group",
            )
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{CollectiveError, ErrorKind};
    use crate::{Communicator, HostDevice, UniqueId};

    /// A child that did not form is reported as the split's failure: the call named, the
    /// peer in the parent's numbering (the child's rank 1 of `[2, 0, 1]` is parent rank 0),
    /// and a split's advice (it read as `Communicator::new`'s, with the child's numbers and
    /// advice to start ranks again with the same UniqueId, which no split can follow).
    #[test]
    fn a_child_that_did_not_form_is_the_splits_error() {
        let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new().unwrap(), 0).unwrap();
        let inner = CollectiveError::new(ErrorKind::PeerLost, "rank 1 of another process left the rendezvous")
            .with_rank(2)
            .with_peer(1)
            .with_op("Communicator::new");
        let e = comm.child_failed(&inner, &[2, 0, 1], 2, "split_from");
        assert_eq!(e.kind(), ErrorKind::PeerLost);
        let c = e.context();
        assert_eq!((c.op.as_deref(), c.rank, c.peer), (Some("split_from"), Some(0), Some(0)), "{e}");
        let text = e.to_string();
        assert!(text.contains("the new communicator of parent ranks [2, 0, 1] did not form"), "{text}");
        assert!(text.contains("this rank its rank 2") && text.contains("left the rendezvous"), "{text}");
        assert!(text.contains("call the split again on every rank") && !text.contains("same UniqueId"), "{text}");
        assert!(comm.is_usable());
    }
}
