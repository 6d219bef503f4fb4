//! Broadcast's metadata: the one operation whose receivers pass no tensor, so they learn the
//! sender, dtype and shape from the peers before the data moves. Every peer contributes a
//! fixed-size record — whether it sends, and if so its dtype and (up to [`DIMS`]) dimensions —
//! in one small all_gather; a shape with more dimensions follows from the sender in a second,
//! broadcast step. Every peer reads the same records, so zero or several senders are reported
//! identically on every peer, and the registration stays usable.

use super::PeerId;
use super::call::Failure;
use crate::comm::Communicator;
use crate::device::Device;
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::tensor::Tensor;
use crate::types::{DType, Rank};

/// Dimensions a record carries.
const DIMS: usize = 6;
/// `u32` words per record (every device moves `u32`): sender flag, dtype, ndim (2 words),
/// then two words per dimension.
const WORDS: usize = 4 + 2 * DIMS;
/// More dimensions than any real tensor has: a record claiming more is corrupt.
const MAX_NDIM: usize = 1 << 16;

/// What the peers learned from the sender.
pub(crate) struct Sent {
    pub root: Rank,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

fn split(x: u64) -> [u32; 2] {
    [x as u32, (x >> 32) as u32]
}

fn join(w: &[u32]) -> u64 {
    u64::from(w[0]) | u64::from(w.get(1).copied().unwrap_or(0)) << 32
}

/// Exchanges the records; `mine` is this peer's tensor when it sends.
pub(crate) fn exchange<D: Device>(
    comm: &Communicator<D>,
    peers: &[PeerId],
    mine: Option<&Tensor<D>>,
) -> std::result::Result<Sent, Failure> {
    exchange_any(comm, peers, mine)?.ok_or_else(|| {
        Failure::Agreed(CollectiveError::invalid(
            "no peer passed Some(tensor): exactly one peer sends a broadcast, the others pass None",
        ))
    })
}

/// [`exchange`], where no sender at all is `None` (a node of several whose peers do not send).
pub(crate) fn exchange_any<D: Device>(
    comm: &Communicator<D>,
    peers: &[PeerId],
    mine: Option<&Tensor<D>>,
) -> std::result::Result<Option<Sent>, Failure> {
    let mut rec = [0u32; WORDS];
    if let Some(t) = mine {
        rec[0] = 1;
        rec[1] = u32::from(t.dtype().code());
        rec[2..4].copy_from_slice(&split(t.shape().len() as u64));
        for (k, &d) in t.shape().iter().take(DIMS).enumerate() {
            rec[4 + 2 * k..6 + 2 * k].copy_from_slice(&split(d as u64));
        }
    }
    let dev = comm.device();
    let n = peers.len();
    let rec = Tensor::from_slice(dev, &rec, &[WORDS])?;
    let mut all = Tensor::zeros(dev, DType::U32, &[WORDS * n])?;
    {
        // Marked as the broadcast's step: a peer's plain all_gather does not pair with it,
        // and a mismatch names it so (not as an all_gather the peer never called).
        let entered = comm.enter(|| "broadcast".to_string())?;
        entered.as_part_of(crate::op::Composite::PeerBroadcast);
        comm.all_gather_into_tensor(&mut all, &rec)?;
    }
    let words = all.to_vec::<u32>()?;
    let records: Vec<&[u32]> = words.chunks(WORDS).collect();
    let senders: Vec<Rank> = (0..n).filter(|&r| records.get(r).is_some_and(|w| w[0] == 1)).collect();
    let named = |ranks: &[Rank]| ranks.iter().map(|&r| peers[r].to_string()).collect::<Vec<_>>().join(", ");
    let root = match senders[..] {
        [root] => root,
        [] => return Ok(None),
        _ => {
            return Err(Failure::Agreed(CollectiveError::new(
                ErrorKind::Mismatch,
                format!(
                    "peers {} each passed Some(tensor): exactly one peer sends a broadcast, the others pass None",
                    named(&senders)
                ),
            )));
        }
    };
    let w = records[root];
    let bad =
        |what: &str| CollectiveError::protocol(format!("the broadcast sender, peer {}, sent {what}", peers[root]));
    let dtype = DType::ALL.into_iter().find(|d| u32::from(d.code()) == w[1]).ok_or_else(|| bad("an unknown dtype"))?;
    let ndim = usize::try_from(join(&w[2..4])).ok().filter(|&d| d <= MAX_NDIM).ok_or_else(|| bad("a corrupt shape"))?;
    let shape = if ndim <= DIMS {
        (0..ndim).map(|k| join(&w[4 + 2 * k..6 + 2 * k]) as usize).collect()
    } else {
        full_shape(comm, root, ndim, mine)?
    };
    Ok(Some(Sent { root, dtype, shape }))
}

/// A shape with more than [`DIMS`] dimensions, broadcast by the sender.
fn full_shape<D: Device>(
    comm: &Communicator<D>,
    root: Rank,
    ndim: usize,
    mine: Option<&Tensor<D>>,
) -> Result<Vec<usize>> {
    let words: Vec<u32> = match mine {
        Some(t) => t.shape().iter().flat_map(|&d| split(d as u64)).collect(),
        None => vec![0; 2 * ndim],
    };
    let mut t = Tensor::from_slice(comm.device(), &words, &[2 * ndim])?;
    comm.broadcast(&mut t, root)?;
    Ok(t.to_vec::<u32>()?.chunks(2).map(|w| join(w) as usize).collect())
}
