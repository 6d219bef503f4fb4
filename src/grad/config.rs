//! [`SyncConfig`]: how gradients are packed into buckets and reduced.

use crate::types::ReduceOp;

/// PyTorch DDP's default bucket size: 25 MiB.
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// The default size from which a gradient is reduced where it is instead of being copied
/// into a bucket: 1 MiB (see [`SyncConfig::with_in_place_bytes`]).
pub const DEFAULT_IN_PLACE_BYTES: usize = 1 << 20;

/// How a [`GradientSync`](super::GradientSync) packs and reduces: the bucket size, the size
/// from which a gradient is reduced in place, and the reduce op. Every rank must use the same
/// settings (building the sync checks it).
///
/// ```
/// use ruccl::ReduceOp;
/// use ruccl::grad::{DEFAULT_BUCKET_BYTES, DEFAULT_IN_PLACE_BYTES, SyncConfig};
/// let c = SyncConfig::default();
/// assert_eq!((c.bucket_bytes(), c.op()), (DEFAULT_BUCKET_BYTES, ReduceOp::Avg));
/// assert_eq!(c.in_place_bytes(), DEFAULT_IN_PLACE_BYTES);
/// let c = c.with_bucket_bytes(1 << 20).with_op(ReduceOp::Sum);
/// assert_eq!((c.bucket_bytes(), c.op()), (1 << 20, ReduceOp::Sum));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyncConfig {
    bucket_bytes: usize,
    in_place_bytes: usize,
    op: ReduceOp,
    reverse: bool,
}

impl Default for SyncConfig {
    /// Buckets of [`DEFAULT_BUCKET_BYTES`]; gradients of [`DEFAULT_IN_PLACE_BYTES`] or more
    /// reduced in place; the mean of the ranks' gradients ([`ReduceOp::Avg`]).
    fn default() -> Self {
        SyncConfig {
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            in_place_bytes: DEFAULT_IN_PLACE_BYTES,
            op: ReduceOp::Avg,
            reverse: false,
        }
    }
}

impl SyncConfig {
    /// Sets the bucket size in bytes (at least 1): parameters are packed into a bucket until
    /// the next would overflow it; a parameter larger than a bucket gets one of its own.
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes.max(1);
        self
    }

    /// Sets the size from which a gradient is reduced where it is, by an all_reduce of its
    /// own, instead of being copied into a bucket and back (at least 1; `usize::MAX` packs
    /// every gradient, as PyTorch DDP does).
    ///
    /// Packing pays for itself where a collective's fixed cost is high and copies are cheap
    /// (small gradients; GPUs, whose copies run at memory bandwidth); a gradient of a
    /// megabyte or more already amortises the fixed cost, and on the host — where the
    /// all_reduce itself runs at memory speed — the two copies would cost more than they save.
    pub fn with_in_place_bytes(mut self, bytes: usize) -> Self {
        self.in_place_bytes = bytes.max(1);
        self
    }

    /// Sets the reduce op (the default, [`ReduceOp::Avg`], averages the gradients).
    pub fn with_op(mut self, op: ReduceOp) -> Self {
        self.op = op;
        self
    }

    /// Fills buckets from the last parameter id to the first (`true`) instead of from the
    /// first (`false`, the default). Buckets start their all_reduce in order, each once it is
    /// full and every bucket before it has started, so the order should be the one backward
    /// produces gradients in: when ids follow the model forward (`layer0.w`, `layer1.w`, ...),
    /// backward hands the last id over first, and only the reverse order lets the first
    /// buckets reduce while backward goes on — what PyTorch DDP does, which buckets
    /// parameters in reverse. Every rank must pass the same. Ids sort as their type does:
    /// strings as text, so `layer10.w` comes before `layer2.w` — pad the numbers
    /// (`layer02.w`) or use integer ids for the order to follow the model.
    ///
    /// ```
    /// use ruccl::grad::SyncConfig;
    /// assert!(!SyncConfig::default().reverse_order());
    /// assert!(SyncConfig::default().with_reverse_order(true).reverse_order());
    /// ```
    pub fn with_reverse_order(mut self, reverse: bool) -> Self {
        self.reverse = reverse;
        self
    }

    /// Whether buckets are filled from the last parameter id ([`with_reverse_order`](Self::with_reverse_order)).
    pub fn reverse_order(&self) -> bool {
        self.reverse
    }

    /// The bucket size in bytes.
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_bytes
    }

    /// The size from which a gradient is reduced in place.
    pub fn in_place_bytes(&self) -> usize {
        self.in_place_bytes
    }

    /// The reduce op.
    pub fn op(&self) -> ReduceOp {
        self.op
    }
}
