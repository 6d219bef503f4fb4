//! `CommConfig`: per-communicator settings (deadline, warning interval, chunking, algorithm
//! override), the environment variables that override them, and `deadline_after`, the one
//! place a timeout becomes a deadline.

use std::time::{Duration, Instant};

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
    /// Exchange: for small ops between ranks that are threads of one process on host memory,
    /// every rank publishes its part in a slot the others read and computes its own result;
    /// no messages. `Auto` picks it wherever it applies (parts up to 4 KiB; see
    /// [`crate::algo`]); where it does not, choosing it is choosing `Auto`.
    Exchange,
}

impl Algorithm {
    /// The short name (`auto`, `ring`, `tree`, `rd`, `direct`, `kary`, `centralized`,
    /// `exchange`). The
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
            Algorithm::Exchange => "exchange",
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
            "exchange" => Ok(Algorithm::Exchange),
            other => match other.strip_prefix("kary:").map(|k| k.trim().parse::<u32>()) {
                Some(Ok(k)) if k >= 1 => Ok(Algorithm::KaryTree(k)),
                Some(_) => Err(CollectiveError::invalid(format!(
                    "bad k-ary tree {other:?}: write kary:K with an arity K of at least 1, e.g. kary:2"
                ))),
                None => Err(CollectiveError::invalid(format!(
                    "unknown algorithm {other:?}: use auto, ring, tree, rd, direct, kary:K, centralized or exchange"
                ))),
            },
        }
    }
}

/// Settings for one communicator.
///
/// Environment overrides, read by [`CommConfig::from_env`] (which `Communicator::new` uses):
/// `RUCCL_TIMEOUT`, `RUCCL_WARN_AFTER` and `RUCCL_PEER_SILENCE` (seconds, may be
/// fractional; `inf` or any huge value means never), `RUCCL_ALGO`
/// (`auto|ring|tree|rd|direct|kary:K|centralized|exchange`), `RUCCL_CHUNK_BYTES`,
/// `RUCCL_TRANSPORT` (`inproc|tcp`), `RUCCL_SHARED_PROGRESS`; and, checked here though read
/// where processes set up shared memory, `RUCCL_SHM_DISABLE`, `RUCCL_SHM_SLOTS` and
/// `RUCCL_SHM_CMA` (yes/no: `1|0`, `true|false`, `yes|no`, `on|off`). A malformed value is
/// an `InvalidArgument` naming the variable.
///
/// ```
/// use std::time::Duration;
/// use ruccl::{Algorithm, CommConfig};
/// let cfg = CommConfig::default()
///     .with_timeout(Duration::from_secs(5))
///     .with_warn_after(Duration::from_secs(1))
///     .with_algorithm(Algorithm::Ring)
///     .with_chunk_bytes(1 << 20);
/// assert_eq!(cfg.timeout(), Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct CommConfig {
    timeout: Duration,
    warn_after: Duration,
    chunk_bytes: usize,
    algorithm: Algorithm,
    #[cfg_attr(feature = "serde", serde(default))]
    shared_progress: bool,
    transport: Transport,
    #[cfg_attr(feature = "serde", serde(default = "default_peer_silence"))]
    peer_silence: Duration,
}

#[cfg(feature = "serde")]
fn default_peer_silence() -> Duration {
    DEFAULT_PEER_SILENCE
}

/// How the ranks of one communicator that live in one process talk to each other.
///
/// ```
/// use ruccl::{CommConfig, config::Transport};
/// assert_eq!("tcp".parse::<Transport>()?, Transport::Tcp);
/// let cfg = CommConfig::default().with_transport(Transport::Tcp);
/// assert_eq!(cfg.transport(), Transport::Tcp);
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Transport {
    /// Shared memory: peers read each other's buffers in place (the fastest).
    #[default]
    InProc,
    /// TCP over loopback, each rank its own endpoint, as if every rank were its own process
    /// (`RUCCL_TRANSPORT=tcp`): what runs between processes, testable in one.
    Tcp,
}

impl std::str::FromStr for Transport {
    type Err = CollectiveError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "inproc" | "" => Ok(Transport::InProc),
            "tcp" => Ok(Transport::Tcp),
            other => Err(CollectiveError::invalid(format!("unknown transport {other:?} (inproc or tcp)"))),
        }
    }
}

/// The default deadline of every wait (as torch.distributed's NCCL default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The default time a join or a collective waits before it logs who is missing.
pub const DEFAULT_WARN_AFTER: Duration = Duration::from_secs(30);
/// The default pipelining chunk.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;
/// The default time a peer process's connection may stay silent before the peer counts as
/// lost (heartbeats keep a live one talking).
pub const DEFAULT_PEER_SILENCE: Duration = Duration::from_secs(60);

/// The longest wait a deadline stands for: a timeout beyond it means "no deadline".
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The deadline `timeout` from now. Saturates: a timeout too large for an `Instant` (up to
/// `Duration::MAX`) gives a deadline about a century away, which no wait reaches.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    deadline_from(Instant::now(), timeout)
}

/// [`deadline_after`] from `now`, a time the caller read just before (one clock read serves
/// both).
pub(crate) fn deadline_from(now: Instant, timeout: Duration) -> Instant {
    let mut wait = timeout.min(FAR_FUTURE);
    loop {
        // A platform whose clock cannot reach a century ahead gets the furthest it can; the
        // loop ends at zero at the latest.
        if let Some(deadline) = now.checked_add(wait) {
            return deadline;
        }
        wait /= 2;
    }
}

/// Parses a positive number of seconds from the environment variable `name`. Values too large
/// for a `Duration` (`1e30`, `inf`) saturate to `Duration::MAX`: a wait that never ends.
fn parse_secs(name: &str, v: &str) -> Result<Duration> {
    let bad = || CollectiveError::invalid(format!("{name}={v:?} is not a positive number of seconds"));
    let secs: f64 = v.trim().parse().map_err(|_| bad())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(bad());
    }
    let d = Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
    // Below a nanosecond it is zero, which no wait can live with (`CommConfig::check`).
    if d.is_zero() {
        return Err(CollectiveError::invalid(format!("{name}={v:?} is less than a nanosecond")));
    }
    Ok(d)
}

/// The shortest peer-silence limit a communicator accepts: live peers send a heartbeat every
/// quarter of it, and a thread of theirs (or of this process's reader) that is not scheduled
/// for longer — a loaded host — would have every peer counted lost (1 ms lost them all at the
/// first op).
pub const MIN_PEER_SILENCE: Duration = Duration::from_millis(100);

/// `InvalidArgument` for a peer-silence limit below [`MIN_PEER_SILENCE`] (`what` set it).
fn too_short_silence(what: &str, silence: Duration) -> CollectiveError {
    CollectiveError::invalid(format!(
        "{what}: a peer-silence limit of {silence:?} is below the least, {MIN_PEER_SILENCE:?}: peers send a heartbeat \
         every quarter of it, and a process not scheduled for that long would count every peer lost"
    ))
    .with_hint("use a peer-silence limit of at least 100 ms (the default, 60 s, suits most jobs)")
}

impl CommConfig {
    /// `InvalidArgument` for a setting no wait can live with (the builders take any value;
    /// the environment's parser refuses the same values as it reads them).
    pub(crate) fn check(&self) -> Result<()> {
        let zero = |what: &str, var: &str| {
            CollectiveError::invalid(format!(
                "CommConfig::{what} is zero: every wait would fail at once ({var}=0 is refused alike)"
            ))
            .with_hint("pass a positive duration (Duration::MAX for no deadline), or leave it out for the default")
        };
        if self.timeout.is_zero() {
            return Err(zero("with_timeout", "RUCCL_TIMEOUT"));
        }
        if self.peer_silence.is_zero() {
            return Err(zero("with_peer_silence", "RUCCL_PEER_SILENCE"));
        }
        if self.peer_silence < MIN_PEER_SILENCE {
            return Err(too_short_silence("CommConfig::with_peer_silence", self.peer_silence));
        }
        Ok(())
    }
}

impl Default for CommConfig {
    fn default() -> Self {
        CommConfig {
            timeout: DEFAULT_TIMEOUT,
            warn_after: DEFAULT_WARN_AFTER,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            algorithm: Algorithm::Auto,
            shared_progress: false,
            transport: Transport::InProc,
            peer_silence: DEFAULT_PEER_SILENCE,
        }
    }
}

/// A yes/no variable's value: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any
/// case, blanks around ignored); `None` for an empty value (as if unset).
///
/// # Errors
/// `InvalidArgument` naming the variable for anything else.
pub(crate) fn parse_flag(name: &str, value: &str) -> Result<Option<bool>> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        "" => Ok(None),
        _ => {
            Err(CollectiveError::invalid(format!("{name}={value:?} is not one of 1, 0, true, false, yes, no, on, off")))
        }
    }
}

/// The yes/no variable `name` of the process environment ([`parse_flag`]); `None` when unset,
/// empty or malformed (communicators refuse a malformed one when they are made:
/// [`CommConfig::from_env`]). Only the shared-memory transport reads one (Linux, not Miri).
#[cfg_attr(not(all(target_os = "linux", not(miri))), allow(dead_code))]
pub(crate) fn env_flag(name: &str) -> Option<bool> {
    std::env::var(name).ok().and_then(|v| parse_flag(name, &v).ok().flatten())
}

impl CommConfig {
    /// The defaults with `RUCCL_*` environment overrides applied.
    ///
    /// # Errors
    /// `InvalidArgument` naming the variable when one is set but malformed.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_lookup`](Self::from_lookup), whose errors are about a variable, not a call's
    /// arguments, and say so.
    fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        Self::read_lookup(get).map_err(|e| {
            e.with_hint(
                "fix the RUCCL_* variable named above (or unset it for the default) in the environment of every \
                 process, then start them again",
            )
        })
    }

    /// The defaults with the overrides that `get` (a variable's value by name) returns: the
    /// parsing of [`from_env`](Self::from_env) without touching the process environment.
    /// An empty (or blank) value counts as unset, for every variable: `VAR= cmd` and a
    /// launcher forwarding an empty variable (`mpirun -x VAR`) mean "the default".
    fn read_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let mut c = CommConfig::default();
        if let Some(v) = get("RUCCL_TIMEOUT") {
            c.timeout = parse_secs("RUCCL_TIMEOUT", &v)?;
        }
        if let Some(v) = get("RUCCL_WARN_AFTER") {
            c.warn_after = parse_secs("RUCCL_WARN_AFTER", &v)?;
        }
        if let Some(v) = get("RUCCL_ALGO") {
            c.algorithm = v
                .parse()
                .map_err(|e: CollectiveError| CollectiveError::invalid(format!("RUCCL_ALGO: {}", e.message())))?;
        }
        if let Some(v) = get("RUCCL_TRANSPORT") {
            c.transport = v
                .parse()
                .map_err(|e: CollectiveError| CollectiveError::invalid(format!("RUCCL_TRANSPORT: {}", e.message())))?;
        }
        if let Some(v) = get("RUCCL_CHUNK_BYTES") {
            c.chunk_bytes = v.trim().parse().ok().filter(|&b: &usize| b > 0).ok_or_else(|| {
                CollectiveError::invalid(format!(
                    "RUCCL_CHUNK_BYTES={v:?} is not a positive integer of at most {} bytes",
                    usize::MAX
                ))
            })?;
        }
        if let Some(v) = get("RUCCL_PEER_SILENCE") {
            c.peer_silence = parse_secs("RUCCL_PEER_SILENCE", &v)?;
            if c.peer_silence < MIN_PEER_SILENCE {
                return Err(too_short_silence(&format!("RUCCL_PEER_SILENCE={v:?}"), c.peer_silence));
            }
        }
        if let Some(v) = get("RUCCL_SHARED_PROGRESS") {
            c.shared_progress = parse_flag("RUCCL_SHARED_PROGRESS", &v)?.unwrap_or(false);
        }
        // Read where processes set up shared memory (`transport::shm`), checked here, where
        // a communicator is made, so that a typo is an error rather than the default.
        for name in ["RUCCL_SHM_DISABLE", "RUCCL_SHM_SLOTS", "RUCCL_SHM_CMA"] {
            if let Some(v) = get(name) {
                parse_flag(name, &v)?;
            }
        }
        Ok(c)
    }

    /// Sets the deadline of every wait (joining, each collective). A timeout too large to
    /// add to the clock, up to `Duration::MAX`, means no deadline. Zero is refused where a
    /// communicator is made (`InvalidArgument`, as `RUCCL_TIMEOUT=0` is): every wait would
    /// fail at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruccl::CommConfig;
    /// let cfg = CommConfig::default().with_timeout(Duration::MAX);
    /// assert_eq!(cfg.timeout(), Duration::MAX);
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long a join (`Communicator::new`) or a collective waits before it logs, with
    /// `tracing::warn!`, which ranks it is still waiting for; it logs again each time the wait
    /// has doubled. Default [`DEFAULT_WARN_AFTER`]; `Duration::MAX` never warns. The warnings
    /// need the `tracing` feature (on by default) and a subscriber installed by the
    /// application.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruccl::CommConfig;
    /// let cfg = CommConfig::default().with_warn_after(Duration::from_secs(5));
    /// assert_eq!(cfg.warn_after(), Duration::from_secs(5));
    /// ```
    pub fn with_warn_after(mut self, after: Duration) -> Self {
        self.warn_after = after;
        self
    }

    /// Sets the pipelining chunk size in bytes (rounded to whole elements, at least one).
    /// Ranks that are threads of one process on one GPU do not pipeline (they pass device
    /// ranges: there is no transfer to overlap, and every chunk costs kernel launches), so it
    /// applies to every other configuration.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// Forces an algorithm where it applies (ops with a single algorithm ignore it).
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// Has this rank's ops driven by the process-wide progress thread (default: off, each
    /// rank drives its own). Every rank of the process with this setting, of any
    /// communicator, is then advanced by that one thread: blocking calls hand their op over
    /// and wait, and non-blocking ones run there too. It is what NCCL's group calls do for
    /// one op, for every op: a process with more ranks than cores stops paying a thread
    /// wake-up per message. A rank-local choice (ranks need not agree); split communicators
    /// inherit it. `RUCCL_SHARED_PROGRESS=1` sets it from the environment.
    ///
    /// ```
    /// use ruccl::{CommConfig, Communicator, HostDevice, ReduceOp, Tensor, UniqueId};
    /// let cfg = CommConfig::default().with_shared_progress(true);
    /// assert!(cfg.shared_progress());
    /// let comm = Communicator::with_config(HostDevice::default(), 1, UniqueId::new()?, 0, cfg)?;
    /// let mut t = Tensor::from_slice(&HostDevice::default(), &[2.0f32], &[1])?;
    /// comm.all_reduce(&mut t, ReduceOp::Sum)?; // driven by the progress thread
    /// assert_eq!(t.to_vec::<f32>()?, vec![2.0]);
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn with_shared_progress(mut self, shared: bool) -> Self {
        self.shared_progress = shared;
        self
    }

    /// Whether the process-wide progress thread drives this rank's ops.
    pub fn shared_progress(&self) -> bool {
        self.shared_progress
    }

    /// Sets how ranks in one process talk ([`Transport`]); all ranks must agree.
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// How ranks in one process talk.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Sets how long a connection to a peer in another process (or, with
    /// [`Transport::Tcp`], any peer) may stay silent before this rank counts the peer as lost
    /// and fails with `PeerLost` naming it — a process that hangs or is stopped without
    /// closing its sockets. Live peers send heartbeats at a quarter of it (at most every 2 s).
    /// `RUCCL_PEER_SILENCE` (seconds) sets it from the environment; the default is
    /// [`DEFAULT_PEER_SILENCE`]. Less than [`MIN_PEER_SILENCE`] is refused where a
    /// communicator is made, as the same `RUCCL_PEER_SILENCE` is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ruccl::CommConfig;
    /// let cfg = CommConfig::default().with_peer_silence(Duration::from_secs(5));
    /// assert_eq!(cfg.peer_silence(), Duration::from_secs(5));
    /// ```
    pub fn with_peer_silence(mut self, silence: Duration) -> Self {
        self.peer_silence = silence;
        self
    }

    /// How long a peer's connection may stay silent before the peer counts as lost.
    pub fn peer_silence(&self) -> Duration {
        self.peer_silence
    }

    /// The deadline of every wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How long a wait lasts before it logs who is missing.
    pub fn warn_after(&self) -> Duration {
        self.warn_after
    }

    /// The pipelining chunk size in bytes.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// The chunk in whole elements of `elem_bytes` (at least one): what plans cut messages
    /// to.
    pub(crate) fn chunk_elems(&self, elem_bytes: usize) -> usize {
        (self.chunk_bytes / elem_bytes.max(1)).max(1)
    }

    /// The algorithm override.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
