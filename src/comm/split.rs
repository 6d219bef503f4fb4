//! Splitting a communicator: every rank of the parent calls, the ranks agree through one
//! all-gather on the parent (so a rank that calls something else is a `Mismatch`), and the
//! members join a child whose id is derived from the parent's id and instance nonce (so two
//! groups that used the same id one after the other never share a child id).

use super::Communicator;
use super::validate::{Call, Input, Output};
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::op::OpKind;
use crate::tensor::Tensor;
use crate::types::Rank;

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
    /// forms at the parent's rendezvous, as [`split_from`](Self::split_from) says.
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
    /// Across processes, the new communicators meet at the parent's rendezvous: the listener
    /// of the process that made the parent's id (rank 0's, under a launcher), which must still
    /// run while they form, member or not. A rank 0 that is in no list and exits at once, or
    /// an id made by a helper process that is gone, leaves the members to fail
    /// (`PeerLost`, or `Timeout` naming that address): keep that process until the split
    /// returned on every rank.
    ///
    /// # Errors
    /// `InvalidArgument` for a rank out of range or listed twice; the other ranks then get
    /// `Mismatch` naming that rank, at once. `Mismatch` on every rank when a list names a rank
    /// that passed another list. After either, no rank joined a new communicator and the
    /// parent is still usable. Collective errors as for any collective.
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
        let findings = self.split_gather(&[finding]).map_err(outer)?;
        let split_no = {
            let mut l = self.lock();
            l.splits += 1;
            l.splits
        };
        rejected?;
        if let Some((f, &what)) = findings.iter().enumerate().find(|(_, w)| **w != FOUND_NOTHING) {
            return Err(self.split_mismatch(f, what, ranks).with_op(call));
        }
        if !member {
            return Ok(None);
        }
        let pos = ranks.iter().position(|&r| r == self.rank).unwrap_or(0);
        let id = self.shared.id.derive(self.shared.instance.nonce(), &[split_no, d]);
        let config = self.shared.config.clone().with_shared_progress(self.engine.shared_progress);
        Communicator::with_config(self.device.clone(), ranks.len(), id, pos, config).map(Some)
    }
}

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
