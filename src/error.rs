//! The one error type: who is at fault ([`ErrorKind`]), where it happened (op, rank, peer,
//! sequence number) and, for hangs, the flight recorder's view of every rank.

use std::fmt;
use std::sync::Arc;

use crate::types::Rank;

/// Who is at fault, and so what to do about it.
///
/// ```
/// use ruccl::ErrorKind;
/// assert_eq!(ErrorKind::Timeout.to_string(), "timeout");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something wrong; nothing was sent and the communicator is usable.
    #[error("invalid argument")]
    InvalidArgument,
    /// Ranks called different collectives (op, dtype, count, reduce op or root differ).
    #[error("mismatched collectives")]
    Mismatch,
    /// A wait passed its deadline: some rank did not arrive.
    #[error("timeout")]
    Timeout,
    /// A peer left (dropped its communicator or its connection) mid-operation.
    #[error("peer lost")]
    PeerLost,
    /// The communicator was aborted, by `abort()` or by an earlier failure.
    #[error("aborted")]
    Aborted,
    /// The request is valid but this build, device or transport cannot do it.
    #[error("unsupported")]
    Unsupported,
    /// The device (allocation, kernel, copy) failed.
    #[error("device error")]
    Device,
    /// An operating-system I/O error.
    #[error("I/O error")]
    Io,
    /// A peer sent bytes that break the protocol (a bug or a foreign peer).
    #[error("protocol error")]
    Protocol,
}

/// Where an error happened. Every field is optional because errors also arise outside
/// collectives (building a tensor, joining a communicator).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorContext {
    /// The operation, e.g. `all_reduce(sum, 257 x f32)`.
    pub op: Option<String>,
    /// The rank that reports the error.
    pub rank: Option<Rank>,
    /// The peer involved (the one waited on, or the one that disagreed).
    pub peer: Option<Rank>,
    /// The op sequence number on this communicator (0 for the first collective).
    pub seq: Option<u64>,
}

/// The error every fallible ruCCL call returns.
///
/// [`kind`](Self::kind) says who is at fault; `Display` says which rank, which op, which
/// peer and what to do. It is cheap to clone (sticky errors are handed to every rank).
///
/// ```
/// use ruccl::{CollectiveError, ErrorKind};
/// let e = CollectiveError::new(ErrorKind::InvalidArgument, "root 9 is out of range")
///     .with_rank(1)
///     .with_op("broadcast(256 x f32, root 9)");
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// assert!(e.to_string().contains("rank 1"));
/// ```
#[derive(Clone, Debug)]
pub struct CollectiveError {
    // Boxed so that `Result<T, CollectiveError>` stays one pointer wide on the happy path.
    inner: Box<Inner>,
}

#[derive(Clone, Debug)]
struct Inner {
    kind: ErrorKind,
    message: String,
    context: ErrorContext,
    report: Option<String>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

/// Shorthand used across the crate.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;

impl CollectiveError {
    /// A new error of `kind` with a human-readable message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CollectiveError {
            inner: Box::new(Inner {
                kind,
                message: message.into(),
                context: ErrorContext::default(),
                report: None,
                source: None,
            }),
        }
    }

    /// Who is at fault.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The message without context.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Where it happened.
    pub fn context(&self) -> &ErrorContext {
        &self.inner.context
    }

    /// The flight recorder's view of every rank at the time of a hang, when known.
    pub fn report(&self) -> Option<&str> {
        self.inner.report.as_deref()
    }

    /// Sets the reporting rank (kept if already set).
    pub fn with_rank(mut self, rank: Rank) -> Self {
        self.inner.context.rank.get_or_insert(rank);
        self
    }

    /// Sets the peer involved (kept if already set).
    pub fn with_peer(mut self, peer: Rank) -> Self {
        self.inner.context.peer.get_or_insert(peer);
        self
    }

    /// Sets the operation (kept if already set).
    pub fn with_op(mut self, op: impl Into<String>) -> Self {
        if self.inner.context.op.is_none() {
            self.inner.context.op = Some(op.into());
        }
        self
    }

    /// Sets the op sequence number (kept if already set).
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.inner.context.seq.get_or_insert(seq);
        self
    }

    /// Attaches a multi-line report (flight recorder) shown after the message.
    pub fn with_report(mut self, report: impl Into<String>) -> Self {
        self.inner.report = Some(report.into());
        self
    }

    /// Attaches the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.inner.source = Some(Arc::new(source));
        self
    }

    /// How `rank` reports an error another rank hit first (same kind, the original message
    /// quoted, the original peer kept).
    pub(crate) fn relayed(&self, rank: Rank) -> Self {
        let origin = self
            .inner
            .context
            .rank
            .filter(|&r| r != rank)
            .map(|r| format!("rank {r} failed first: "))
            .unwrap_or_default();
        let op = self.inner.context.op.as_deref().map(|o| format!("in {o}: ")).unwrap_or_default();
        let mut out =
            CollectiveError::new(self.inner.kind, format!("{origin}{op}{}", self.inner.message)).with_rank(rank);
        out.inner.context.peer = self.inner.context.peer;
        out.inner.report = self.inner.report.clone();
        out
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    pub(crate) fn device(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Device, message)
    }

    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Protocol, message)
    }

    fn hint(&self) -> &'static str {
        match self.inner.kind {
            ErrorKind::InvalidArgument => "fix the arguments on this rank; the communicator is still usable",
            ErrorKind::Mismatch => {
                "every rank must issue the same collectives, with the same counts, dtypes, reduce ops and roots, in the same order"
            }
            ErrorKind::Timeout => {
                "the rank(s) named above never reached this point: look for a crash, a hang or a missing call there, or raise CommConfig::timeout; this communicator is now aborted, create a new one"
            }
            ErrorKind::PeerLost => "the peer's process or communicator is gone; create a new communicator",
            ErrorKind::Aborted => "create a new communicator; the first error on this one is shown above",
            ErrorKind::Unsupported => "choose another dtype, device, algorithm or operation",
            ErrorKind::Device => "check the device and its driver",
            ErrorKind::Io => "check the network and the peer's host",
            ErrorKind::Protocol => {
                "a peer sent malformed data or ruCCL broke one of its own invariants: check that every rank runs the same ruCCL version, and if they do, report this message as a bug"
            }
        }
    }
}

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.inner.context;
        if let Some(r) = c.rank {
            write!(f, "rank {r}: ")?;
        }
        if let Some(op) = &c.op {
            write!(f, "{op}")?;
            if let Some(s) = c.seq {
                write!(f, " (op #{s})")?;
            }
            f.write_str(": ")?;
        }
        write!(f, "{}: {}", self.inner.kind, self.inner.message)?;
        if let Some(p) = c.peer {
            write!(f, " [peer: rank {p}]")?;
        }
        write!(f, ". What to do: {}.", self.hint())?;
        if let Some(r) = &self.inner.report {
            write!(f, "\n{r}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CollectiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<std::io::Error> for CollectiveError {
    fn from(e: std::io::Error) -> Self {
        CollectiveError::new(ErrorKind::Io, e.to_string()).with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_rank_op_peer_and_hint() {
        let e = CollectiveError::new(ErrorKind::Timeout, "waited 1s for data")
            .with_rank(2)
            .with_op("all_reduce(sum, 4 x f32)")
            .with_seq(7)
            .with_peer(3)
            .with_report("rank 3: idle");
        let s = e.to_string();
        assert!(s.starts_with("rank 2: all_reduce(sum, 4 x f32) (op #7): timeout: waited 1s"), "{s}");
        assert!(s.contains("[peer: rank 3]"), "{s}");
        assert!(s.contains("What to do"), "{s}");
        assert!(s.ends_with("rank 3: idle"), "{s}");
    }

    #[test]
    fn context_is_set_once() {
        let e = CollectiveError::invalid("x").with_rank(1).with_rank(2);
        assert_eq!(e.context().rank, Some(1));
        assert_eq!(e.relayed(5).context().rank, Some(5));
    }
}
