//! How the ranks agree on their parameter sets once, when a
//! [`GradientSync`](super::GradientSync) is built: every rank all_gathers a digest of its
//! [`Wire`] form; only when the digests differ do they all_gather the wire forms themselves,
//! so that each rank can name the first difference. Every rank makes the same calls whatever
//! it finds, so none is left waiting.

use super::layout::{Wire, digest, first_difference};
use crate::comm::Communicator;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::DType;

/// All ranks call this with their wire form. `Ok` when every rank's digest matches;
/// `Mismatch` naming the first difference otherwise (on every rank).
pub(crate) fn agree<D: Device>(comm: &Communicator<D>, mine: &Wire) -> Result<()> {
    let bytes = mine.encode();
    let digests = gather_words(comm, digest(&bytes))?;
    let Some(odd) = digests.iter().position(|&d| d != digests[0]) else {
        return Ok(());
    };
    // The digests differ: exchange the records themselves, padded to the longest.
    let lens = gather_words(comm, bytes.len() as u64)?;
    let longest = lens.iter().copied().max().unwrap_or(0);
    let longest = usize::try_from(longest)
        .map_err(|_| CollectiveError::protocol(format!("a rank's parameter-set record claims {longest} bytes")))?;
    let dev = comm.device();
    let mut padded = bytes;
    padded.resize(longest, 0);
    let input = Tensor::from_slice(dev, &padded, &[longest])?;
    let total = longest
        .checked_mul(comm.world_size())
        .ok_or_else(|| CollectiveError::protocol(format!("parameter-set records of {longest} bytes are too large")))?;
    let mut all = Tensor::zeros(dev, DType::U8, &[total])?;
    comm.all_gather_into_tensor(&mut all, &input)?;
    let all = all.to_vec::<u8>()?;
    let record = |r: usize| -> Result<Wire> {
        let len = usize::try_from(lens[r]).unwrap_or(usize::MAX).min(longest);
        Wire::decode(&all[r * longest..r * longest + len]).map_err(|e| e.with_peer(r))
    };
    // Every rank names the same difference: rank 0's set against the first rank that
    // differs from it — or this rank's own set, when this rank is one that differs.
    let me = comm.rank();
    let other = if digests[me] != digests[0] { me } else { odd };
    let what = first_difference((0, &record(0)?), (other, &record(other)?))
        .unwrap_or_else(|| format!("rank {other}'s parameter-set digest differs from rank 0's"));
    let peer = if me == other { 0 } else { other };
    Err(CollectiveError::new(ErrorKind::Mismatch, format!("the ranks' parameter sets differ: {what}"))
        .with_peer(peer)
        .with_hint(
            "build the GradientSync on every rank from the same parameters (ids, dtypes, shapes) and the same \
             SyncConfig; nothing was reduced",
        ))
}

/// One word from every rank, in rank order.
fn gather_words<D: Device>(comm: &Communicator<D>, word: u64) -> Result<Vec<u64>> {
    let dev = comm.device();
    let input = Tensor::from_slice(dev, &[word], &[1])?;
    let mut all = Tensor::zeros(dev, DType::U64, &[comm.world_size()])?;
    comm.all_gather_into_tensor(&mut all, &input)?;
    all.to_vec::<u64>()
}
