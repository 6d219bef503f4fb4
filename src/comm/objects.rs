//! Collectives of byte strings, each rank's of any length: torch's `all_gather_object`,
//! `broadcast_object_list`, `gather_object` and `scatter_object_list`, for bytes. torch
//! pickles the objects; here the caller serializes them with the format of its choice
//! (serde_json, bincode, postcard, ...). What training scripts pass this way: a config or
//! a checkpoint path from rank 0, a seed, every rank's metrics or hostname.
//!
//! Each call is two collectives on the communicator's device, as torch's are: the lengths
//! (8 bytes per rank), then the bytes, every rank's padded to the longest. An error names
//! the one that failed (an `all_gather` of `u8`, ...).

use super::Communicator;
use crate::device::Device;
use crate::error::{CollectiveError, Result};
use crate::op::Composite;
use crate::tensor::Tensor;
use crate::types::{DType, Rank};

/// The first length word of a `scatter_bytes` whose root refused its own `parts` (no part
/// is that long).
const REFUSED: u64 = u64::MAX;

impl<D: Device> Communicator<D> {
    /// Every rank's `bytes`, in rank order (torch's `all_gather_object`, for bytes; the
    /// ranks' byte strings may differ in length).
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(2, |comm| {
    ///     // Each rank's metrics, serialized (any format: JSON here).
    ///     let mine = serde_json::to_vec(&(comm.rank(), 0.5 * comm.rank() as f64)).expect("JSON");
    ///     comm.all_gather_bytes(&mine)
    /// })?;
    /// for all in out {
    ///     let metrics: Vec<(usize, f64)> = all.iter().map(|b| serde_json::from_slice(b).expect("JSON")).collect();
    ///     assert_eq!(metrics, [(0, 0.0), (1, 0.5)]);
    /// }
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`all_gather_into_tensor`](Self::all_gather_into_tensor) (its two calls);
    /// `Device` when the padded bytes of every rank cannot be allocated.
    pub fn all_gather_bytes(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
        // One call for the two-threads rule: no other thread's call between its steps.
        let entered = self.enter(|| "all_gather_bytes".to_string())?;
        // Its steps' ops say so: a plain collective elsewhere does not pair with them.
        entered.as_part_of(Composite::AllGatherBytes);
        // Errors name this call (their inner steps move into the message).
        let run = || -> Result<_> {
            let lens = self.all_lengths(bytes.len())?;
            let max = lens.iter().copied().max().unwrap_or(0);
            let input = self.bytes_tensor(bytes, max)?;
            let mut output = Tensor::zeros(&self.device, DType::U8, &[self.padded_total(max)?])?;
            self.all_gather_into_tensor(&mut output, &input)?;
            Ok(split(&output.to_vec::<u8>()?, &lens, max))
        };
        run().map_err(|e| e.with_outer_op("all_gather_bytes".to_string()))
    }

    /// Makes `bytes` on every rank what it is on `root` (torch's `broadcast_object_list`,
    /// for bytes). On the root it is left as it is; elsewhere it is replaced, whatever its
    /// length was.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(3, |comm| {
    ///     let mut path = if comm.rank() == 0 { b"ckpt/step-900".to_vec() } else { Vec::new() };
    ///     comm.broadcast_bytes(&mut path, 0)?;
    ///     Ok(path)
    /// })?;
    /// assert_eq!(out, vec![b"ckpt/step-900".to_vec(); 3]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`broadcast`](Self::broadcast) (its two calls).
    pub fn broadcast_bytes(&self, bytes: &mut Vec<u8>, root: Rank) -> Result<()> {
        // One call for the two-threads rule: no other thread's call between its steps.
        let entered = self.enter(|| "broadcast_bytes".to_string())?;
        // Its steps' ops say so: a plain collective elsewhere does not pair with them.
        entered.as_part_of(Composite::BroadcastBytes);
        // Errors name this call (their inner steps move into the message).
        let mut run = || -> Result<_> {
            let mut len = Tensor::from_slice(&self.device, &(bytes.len() as u64).to_le_bytes(), &[8])?;
            self.broadcast(&mut len, root)?;
            let len = self.length(&len.to_vec::<u8>()?, root)?;
            let mut data = if self.rank == root {
                self.bytes_tensor(bytes, len)?
            } else {
                Tensor::zeros(&self.device, DType::U8, &[len])?
            };
            self.broadcast(&mut data, root)?;
            if self.rank != root {
                *bytes = data.to_vec::<u8>()?;
            }
            Ok(())
        };
        run().map_err(|e| e.with_outer_op("broadcast_bytes".to_string()))
    }

    /// Every rank's `bytes` on `root`, in rank order; an empty list elsewhere (torch's
    /// `gather_object`, for bytes).
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(3, |comm| comm.gather_bytes(format!("node-{}", comm.rank()).as_bytes(), 0))?;
    /// assert_eq!(out[0], [b"node-0".to_vec(), b"node-1".to_vec(), b"node-2".to_vec()]);
    /// assert!(out[1].is_empty() && out[2].is_empty());
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`all_gather_into_tensor`](Self::all_gather_into_tensor) (the lengths: every
    /// rank pads to the longest) and [`gather`](Self::gather).
    pub fn gather_bytes(&self, bytes: &[u8], root: Rank) -> Result<Vec<Vec<u8>>> {
        // One call for the two-threads rule: no other thread's call between its steps.
        let entered = self.enter(|| "gather_bytes".to_string())?;
        // Its steps' ops say so: a plain collective elsewhere does not pair with them.
        entered.as_part_of(Composite::GatherBytes);
        // Errors name this call (their inner steps move into the message).
        let run = || -> Result<_> {
            let lens = self.all_lengths(bytes.len())?;
            let max = lens.iter().copied().max().unwrap_or(0);
            let input = self.bytes_tensor(bytes, max)?;
            if self.rank != root {
                self.gather(None, &input, root)?;
                return Ok(Vec::new());
            }
            let mut output = Tensor::zeros(&self.device, DType::U8, &[self.padded_total(max)?])?;
            self.gather(Some(&mut output), &input, root)?;
            Ok(split(&output.to_vec::<u8>()?, &lens, max))
        };
        run().map_err(|e| e.with_outer_op("gather_bytes".to_string()))
    }

    /// Rank `k`'s part of `root`'s `parts` (one per rank, of any lengths) on every rank `k`
    /// (torch's `scatter_object_list`, for bytes). `parts` is read on the root only.
    ///
    /// ```
    /// # use ruccl::{Communicator, HostDevice, UniqueId};
    /// # fn on_ranks<T: Send>(n: usize, f: impl Fn(Communicator<HostDevice>) -> ruccl::Result<T> + Sync) -> ruccl::Result<Vec<T>> {
    /// #     let (id, f) = (UniqueId::new()?, &f);
    /// #     std::thread::scope(|s| {
    /// #         let ranks: Vec<_> = (0..n).map(|r| { let id = id.clone(); s.spawn(move || f(Communicator::new(HostDevice::default(), n, id, r)?)) }).collect();
    /// #         ranks.into_iter().map(|r| r.join().expect("a rank panicked")).collect()
    /// #     })
    /// # }
    /// let out = on_ranks(2, |comm| {
    ///     let shards = if comm.rank() == 0 { vec![b"a.bin".to_vec(), b"bb.bin".to_vec()] } else { vec![] };
    ///     comm.scatter_bytes(&shards, 0)
    /// })?;
    /// assert_eq!(out, [b"a.bin".to_vec(), b"bb.bin".to_vec()]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` on the root when `parts` does not hold one part per rank (nothing
    /// sent); those of [`broadcast`](Self::broadcast) (the lengths) and
    /// [`scatter`](Self::scatter).
    pub fn scatter_bytes(&self, parts: &[Vec<u8>], root: Rank) -> Result<Vec<u8>> {
        // One call for the two-threads rule: no other thread's call between its steps.
        let entered = self.enter(|| "scatter_bytes".to_string())?;
        // Its steps' ops say so: a plain collective elsewhere does not pair with them.
        entered.as_part_of(Composite::ScatterBytes);
        // Errors name this call (their inner steps move into the message).
        let run = || -> Result<_> {
            let n = self.world_size();
            let is_root = self.rank == root;
            let refused = is_root && parts.len() != n;
            // The lengths, one word per rank (at least two: a root that refused its own `parts`
            // still sends [REFUSED, the count it passed], so that the other ranks hear of it at
            // once instead of waiting for the scatter).
            let mut words = vec![0u64; n.max(2)];
            if refused {
                words[..2].copy_from_slice(&[REFUSED, parts.len() as u64]);
            } else if is_root {
                words.iter_mut().zip(parts).for_each(|(w, p)| *w = p.len() as u64);
            }
            let lens: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut lens_t = Tensor::from_slice(&self.device, &lens, &[lens.len()])?;
            self.broadcast(&mut lens_t, root)?;
            let lens_b = lens_t.to_vec::<u8>()?;
            if lens_b.get(..8) == Some(&REFUSED.to_le_bytes()[..]) {
                let passed = lens_b.get(8..16).and_then(|w| <[u8; 8]>::try_from(w).ok()).map_or(0, u64::from_le_bytes);
                let whose =
                    if is_root { "this rank, the root,".to_string() } else { format!("the root, rank {root},") };
                return Err(CollectiveError::invalid(format!(
                    "{whose} passed {passed} parts to scatter_bytes, where one per rank ({n}) is needed; nothing was \
                     scattered"
                ))
                .with_rank(self.rank)
                .with_peer(root)
                .with_op("scatter_bytes")
                .on_usable_communicator());
            }
            let lens_b = &lens_b[..8 * n];
            let lens = lens_b.chunks(8).map(|l| self.length(l, root)).collect::<Result<Vec<_>>>()?;
            let max = lens.iter().copied().max().unwrap_or(0);
            let mut output = Tensor::zeros(&self.device, DType::U8, &[max])?;
            if is_root {
                let mut all = vec![0u8; self.padded_total(max)?];
                for (block, p) in all.chunks_mut(max.max(1)).zip(parts) {
                    block[..p.len()].copy_from_slice(p);
                }
                let input = Tensor::from_slice(&self.device, &all, &[all.len()])?;
                self.scatter(&mut output, Some(&input), root)?;
            } else {
                self.scatter(&mut output, None, root)?;
            }
            let mut mine = output.to_vec::<u8>()?;
            mine.truncate(lens.get(self.rank).copied().unwrap_or(0));
            Ok(mine)
        };
        run().map_err(|e| e.with_outer_op("scatter_bytes".to_string()))
    }

    /// Every rank's `len`, in rank order (an all_gather of 8 bytes per rank).
    fn all_lengths(&self, len: usize) -> Result<Vec<usize>> {
        let n = self.world_size();
        let mine = Tensor::from_slice(&self.device, &(len as u64).to_le_bytes(), &[8])?;
        let mut all = Tensor::zeros(&self.device, DType::U8, &[8 * n])?;
        self.all_gather_into_tensor(&mut all, &mine)?;
        all.to_vec::<u8>()?.chunks(8).enumerate().map(|(r, l)| self.length(l, r)).collect()
    }

    /// A length `from` sent as 8 little-endian bytes.
    fn length(&self, bytes: &[u8], from: Rank) -> Result<usize> {
        let word = <[u8; 8]>::try_from(bytes).map(u64::from_le_bytes).ok();
        word.and_then(|w| usize::try_from(w).ok()).ok_or_else(|| {
            CollectiveError::protocol(format!("rank {from} sent a byte-string length that does not fit this machine"))
                .with_rank(self.rank)
                .with_peer(from)
        })
    }

    /// `bytes` padded with zeros to `len`, as a tensor of `u8` on this rank's device.
    fn bytes_tensor(&self, bytes: &[u8], len: usize) -> Result<Tensor<D>> {
        let mut padded = bytes.to_vec();
        padded.resize(len, 0);
        Tensor::from_slice(&self.device, &padded, &[len])
    }

    /// `max` bytes for every rank, or an error when that overflows.
    fn padded_total(&self, max: usize) -> Result<usize> {
        max.checked_mul(self.world_size()).ok_or_else(|| {
            CollectiveError::invalid(format!(
                "{} ranks' byte strings padded to {max} bytes each do not fit in memory",
                self.world_size()
            ))
            .with_rank(self.rank)
        })
    }
}

/// Rank `r`'s `lens[r]` bytes, from its block of `max` in `all`.
fn split(all: &[u8], lens: &[usize], max: usize) -> Vec<Vec<u8>> {
    lens.iter().enumerate().map(|(r, &l)| all.get(r * max..r * max + l).unwrap_or_default().to_vec()).collect()
}
