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

impl<D: Device> Communicator<D> {
    /// A new communicator with the same ranks (`ncclCommSplit` with one color). Every rank
    /// must call it, in the same order relative to other collectives.
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
        self.split_from(&all)?
            .ok_or_else(|| CollectiveError::protocol("split_all left this rank out").with_rank(self.rank))
    }

    /// A new communicator of the listed parent ranks; new rank `i` is `ranks[i]`. Every rank
    /// of the parent must call; ranks not in their list (an empty list is allowed for them)
    /// get `None`. All members must pass the same list.
    ///
    /// # Errors
    /// `InvalidArgument` for a rank out of range or listed twice; `Mismatch` when members
    /// passed different lists; collective errors as for any collective.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// let comm = Communicator::new(HostDevice::default(), 1, UniqueId::new()?, 0)?;
    /// assert!(comm.split_from(&[])?.is_none());
    /// assert!(comm.split_from(&[0, 0]).is_err());
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn split_from(&self, ranks: &[Rank]) -> Result<Option<Self>> {
        let n = self.world_size();
        let bad = |m: String| CollectiveError::invalid(m).with_rank(self.rank).with_op("split_from");
        let mut seen = vec![false; n];
        for &r in ranks {
            if r >= n {
                return Err(bad(format!("rank {r} is out of range for a communicator of {n} ranks")));
            }
            if std::mem::replace(&mut seen[r], true) {
                return Err(bad(format!("rank {r} is listed twice")));
            }
        }
        let member = seen.get(self.rank).copied().unwrap_or(false);
        let d = digest(ranks);
        let mine = Tensor::from_slice(&self.device, &[u64::from(member), d, ranks.len() as u64], &[3])?;
        let all = Tensor::<D>::zeros(&self.device, crate::DType::U64, &[3 * n])?;
        self.submit(Call { input: Input::One(&mine), output: Output::One(&all), ..Call::new(OpKind::Split) })?;
        let split_no = {
            let mut l = self.lock();
            l.splits += 1;
            l.splits
        };
        if !member {
            return Ok(None);
        }
        let got = all.to_vec::<u64>()?;
        for &k in ranks {
            let rec = &got[3 * k..3 * k + 3];
            if rec != [1, d, ranks.len() as u64] {
                return Err(CollectiveError::new(
                    ErrorKind::Mismatch,
                    format!("rank {k} passed a different rank list to split_from than this rank ({ranks:?})"),
                )
                .with_rank(self.rank)
                .with_peer(k)
                .with_op("split_from"));
            }
        }
        let pos = ranks.iter().position(|&r| r == self.rank).unwrap_or(0);
        let id = self.shared.id.derive(self.shared.instance.nonce(), &[split_no, d]);
        let config = self.shared.config.clone().with_shared_progress(self.engine.shared_progress);
        Communicator::with_config(self.device.clone(), ranks.len(), id, pos, config).map(Some)
    }
}
