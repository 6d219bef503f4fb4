//! `CommConfig`: per-communicator settings (deadline, chunking, algorithm override) and
//! the environment variables that override them.

use std::time::Duration;

use crate::error::{CollectiveError, Result};

/// Which plan a collective runs. `Auto` picks by message and world size (see
/// [`crate::algo`] for the thresholds).
///
/// ```
/// use ruccl::Algorithm;
/// assert_eq!("ring".parse::<Algorithm>().unwrap(), Algorithm::Ring);
/// assert_eq!("kary:3".parse::<Algorithm>().unwrap(), Algorithm::KaryTree(3));
/// assert_eq!(Algorithm::KaryTree(3).to_string(), "kary:3");
/// assert_eq!("centralized".parse::<Algorithm>().unwrap(), Algorithm::Centralized);
/// assert!("warp".parse::<Algorithm>().is_err());
/// assert!("kary:0".parse::<Algorithm>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Algorithm {
    /// Choose by size.
    #[default]
    Auto,
    /// Ring: pipelined reduce-scatter + all-gather (all_reduce), chain (broadcast, reduce).
    Ring,
    /// Binomial tree (broadcast, reduce; all_reduce as tree reduce + tree broadcast).
    Tree,
    /// Recursive doubling (all_reduce), latency-optimal for small messages.
    RecursiveDoubling,
    /// Direct reads between ranks that share memory (all_reduce, reduce_scatter, all_gather):
    /// each rank reduces its block from every peer in one pass.
    Direct,
    /// A pipelined k-ary tree (broadcast, reduce; all_reduce as tree reduce to rank 0 + tree
    /// broadcast): every rank has at most `k` children. Arity 1 is a chain; 0 counts as 1.
    KaryTree(u32),
    /// Centralized (broadcast, reduce, all_reduce): every rank sends to the root, which
    /// reduces and sends the result back — the k-ary tree with `k = world_size - 1`.
    Centralized,
}

impl Algorithm {
    /// The short name (`auto`, `ring`, `tree`, `rd`, `direct`, `kary`, `centralized`). The
    /// arity of `KaryTree` is not part of it; `Display` writes it (`kary:3`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Ring => "ring",
            Algorithm::Tree => "tree",
            Algorithm::RecursiveDoubling => "rd",
            Algorithm::Direct => "direct",
            Algorithm::KaryTree(_) => "kary",
            Algorithm::Centralized => "centralized",
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Algorithm::KaryTree(k) => write!(f, "kary:{k}"),
            other => f.write_str(other.name()),
        }
    }
}

impl std::str::FromStr for Algorithm {
    type Err = CollectiveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Algorithm::Auto),
            "ring" | "chain" => Ok(Algorithm::Ring),
            "tree" => Ok(Algorithm::Tree),
            "rd" | "recursive_doubling" | "recursive-doubling" => Ok(Algorithm::RecursiveDoubling),
            "direct" => Ok(Algorithm::Direct),
            "centralized" | "central" | "star" => Ok(Algorithm::Centralized),
            other => match other.strip_prefix("kary:").map(|k| k.trim().parse::<u32>()) {
                Some(Ok(k)) if k >= 1 => Ok(Algorithm::KaryTree(k)),
                Some(_) => Err(CollectiveError::invalid(format!(
                    "bad k-ary tree {other:?}: write kary:K with an arity K of at least 1, e.g. kary:2"
                ))),
                None => Err(CollectiveError::invalid(format!(
                    "unknown algorithm {other:?}: use auto, ring, tree, rd, direct, kary:K or centralized"
                ))),
            },
        }
    }
}

/// Settings for one communicator.
///
/// Environment overrides, read by [`CommConfig::from_env`] (which `Communicator::new` uses):
/// `RUCCL_TIMEOUT` (seconds, may be fractional),
/// `RUCCL_ALGO` (`auto|ring|tree|rd|direct|kary:K|centralized`), `RUCCL_CHUNK_BYTES`.
///
/// ```
/// use std::time::Duration;
/// use ruccl::{Algorithm, CommConfig};
/// let cfg = CommConfig::default()
///     .with_timeout(Duration::from_secs(5))
///     .with_algorithm(Algorithm::Ring)
///     .with_chunk_bytes(1 << 20);
/// assert_eq!(cfg.timeout(), Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CommConfig {
    timeout: Duration,
    chunk_bytes: usize,
    algorithm: Algorithm,
}

/// The default deadline of every wait (as torch.distributed's NCCL default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The default pipelining chunk.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

impl Default for CommConfig {
    fn default() -> Self {
        CommConfig { timeout: DEFAULT_TIMEOUT, chunk_bytes: DEFAULT_CHUNK_BYTES, algorithm: Algorithm::Auto }
    }
}

impl CommConfig {
    /// The defaults with `RUCCL_*` environment overrides applied.
    ///
    /// # Errors
    /// `InvalidArgument` naming the variable when one is set but malformed.
    pub fn from_env() -> Result<Self> {
        let mut c = CommConfig::default();
        if let Ok(v) = std::env::var("RUCCL_TIMEOUT") {
            let secs: f64 = v.trim().parse().ok().filter(|s: &f64| s.is_finite() && *s > 0.0).ok_or_else(|| {
                CollectiveError::invalid(format!("RUCCL_TIMEOUT={v:?} is not a positive number of seconds"))
            })?;
            c.timeout = Duration::from_secs_f64(secs);
        }
        if let Ok(v) = std::env::var("RUCCL_ALGO") {
            c.algorithm = v
                .parse()
                .map_err(|e: CollectiveError| CollectiveError::invalid(format!("RUCCL_ALGO: {}", e.message())))?;
        }
        if let Ok(v) = std::env::var("RUCCL_CHUNK_BYTES") {
            c.chunk_bytes = v.trim().parse().ok().filter(|&b: &usize| b > 0).ok_or_else(|| {
                CollectiveError::invalid(format!("RUCCL_CHUNK_BYTES={v:?} is not a positive integer"))
            })?;
        }
        Ok(c)
    }

    /// Sets the deadline of every wait (joining, each collective).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the pipelining chunk size in bytes (rounded to whole elements, at least one).
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// Forces an algorithm where it applies (ops with a single algorithm ignore it).
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The deadline of every wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The pipelining chunk size in bytes.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// The algorithm override.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}
