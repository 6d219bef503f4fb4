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
/// peer and what to do, on one line (plus the flight recorder's report after a hang).
/// `Debug` — what `fn main() -> ruccl::Result<()>` prints — spreads the same over several
/// lines, as `anyhow` does: the message, then the context, the hint, the report and the
/// chain of causes. `{:#?}` shows the raw fields. It is cheap to clone (sticky errors are
/// handed to every rank).
///
/// ```
/// use ruccl::{CollectiveError, ErrorKind};
/// let e = CollectiveError::new(ErrorKind::InvalidArgument, "root 9 is out of range")
///     .with_rank(1)
///     .with_op("broadcast(256 x f32, root 9)");
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// assert!(e.to_string().contains("rank 1"));
/// assert!(format!("{e:?}").starts_with("invalid argument: root 9 is out of range\n"));
/// ```
#[derive(Clone)]
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
    /// Whether the error arose on a communicator that stays usable (a rejected argument of
    /// one of its calls); only then does the hint say so.
    comm_usable: bool,
    /// What to do, where the kind's own advice would mislead (a device error the caller
    /// caused, say).
    hint: Option<&'static str>,
}

/// Shorthand used across the crate.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;

/// The advice to a rank that another rank's `Timeout` names as the one it waited for.
const HELD_UP_BY_THIS_RANK: &str = "the other ranks gave up waiting for this one: look at what held it up (its \
     process stopped or swapped out, a long computation or a blocking call between collectives, a slow or hung \
     device), or raise CommConfig::timeout; this communicator is now aborted, create a new one";

/// The hint of a bad argument seen from another rank: nothing to fix on this one.
pub(crate) const ANOTHER_RANKS_ARGUMENT: &str = "another rank's call was refused (its arguments or dtype, named \
     above): fix that call there, where its own error says how; nothing is wrong with this rank's call. This \
     communicator is aborted: create a new one";

/// [`ANOTHER_RANKS_ARGUMENT`] for the peer API, whose peers register again.
pub(crate) const ANOTHER_PEERS_ARGUMENT: &str = "another peer's call was refused (named above): fix that call \
     there, where its own error says how; nothing is wrong with this peer's call. The registration is aborted: \
     every peer must register again";

/// The peer API's advice for a `Timeout` (the core's names `CommConfig` and communicators,
/// which a peer-API user never sees).
pub(crate) const PEER_TIMEOUT: &str = "the peer(s) named above held this operation up (never called it, or \
     stopped making progress in it): look for a crash, a hang, a stopped process or a missing call there, or raise \
     CollectiveConfig::with_timeout; the registration is now aborted: every peer must call finish_collective (or \
     reset_collective) and register again";

/// The peer API's advice for `PeerLost`.
pub(crate) const PEER_LOST: &str = "a peer's process or registration is gone; every remaining peer must call \
     finish_collective (or reset_collective) and register again";

/// The peer API's advice for `Aborted`.
pub(crate) const PEER_ABORTED: &str = "the registration was aborted (the first error is shown above): every peer \
     must call finish_collective (or reset_collective) and register again";

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
                comm_usable: false,
                hint: None,
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

    /// Sets the op sequence number, replacing any set before.
    pub(crate) fn at_seq(mut self, seq: u64) -> Self {
        self.inner.context.seq = Some(seq);
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
            .map(|r| {
                let me = if self.inner.context.peer == Some(rank) { ", naming this rank" } else { "" };
                format!("rank {r} failed first{me}: ")
            })
            .unwrap_or_default();
        let op = self.inner.context.op.as_deref().map(|o| format!("in {o}: ")).unwrap_or_default();
        // "this rank" in the quoted message is the rank that failed first, not the relaying one.
        let message = match self.inner.context.rank.filter(|&r| r != rank) {
            Some(r) => self.inner.message.replace("this rank", &format!("rank {r}")),
            None => self.inner.message.clone(),
        };
        let mut out = CollectiveError::new(self.inner.kind, format!("{origin}{op}{message}")).with_rank(rank);
        // The peer stays the one the first rank named — unless that is the relaying rank
        // itself, which then names the rank that failed first.
        let c = &self.inner.context;
        out.inner.context.peer = c.peer.filter(|&p| p != rank).or(c.rank.filter(|&r| r != rank));
        // The report is the first rank's view: "(another process)" there means another than
        // that rank's, which may be this one's own.
        out.inner.report =
            match self.inner.context.rank.filter(|&r| r != rank) {
                Some(r) => self.inner.report.as_ref().map(|report| {
                    format!("as rank {r} saw it (\"another process\": another than rank {r}'s):\n{report}")
                }),
                None => self.inner.report.clone(),
            };
        out.inner.hint = self.inner.hint;
        // "Fix the arguments" is the first rank's advice, not this one's.
        if out.inner.hint.is_none()
            && matches!(self.inner.kind, ErrorKind::InvalidArgument | ErrorKind::Unsupported)
            && c.rank.is_some_and(|r| r != rank)
        {
            out.inner.hint = Some(ANOTHER_RANKS_ARGUMENT);
        }
        // Not when the ranks waited for each other: the hint of the rank that gave up (what
        // to do about the cycle) stays.
        if self.inner.kind == ErrorKind::Timeout
            && c.peer == Some(rank)
            && c.rank != Some(rank)
            && !self.inner.message.contains(crate::comm::flight::DEADLOCK)
        {
            out.inner.hint = Some(HELD_UP_BY_THIS_RANK);
        }
        out
    }

    /// Names `op` as the op, the call the user made; an op already named (an inner step of
    /// that call) moves into the message ("in <inner>: ...").
    pub(crate) fn with_outer_op(mut self, op: String) -> Self {
        if let Some(inner) = self.inner.context.op.take().filter(|i| *i != op) {
            self.inner.message = format!("in {inner}: {}", self.inner.message);
        }
        self.inner.context.op = Some(op);
        self
    }

    /// Adds `more` (a sentence) to the message: something known where the error passes by
    /// that may explain it.
    pub(crate) fn appended(mut self, more: &str) -> Self {
        self.inner.message.push_str(". ");
        self.inner.message.push_str(more);
        self
    }

    /// The error as the caller's own call `to` reports it, where the code that failed names
    /// the call `from` it runs inside (`Communicator::from_env` joins as
    /// `Communicator::new` does): the op and the message say `to`.
    pub(crate) fn called_as(mut self, from: &str, to: &str) -> Self {
        if self.inner.context.op.as_deref() == Some(from) {
            self.inner.context.op = Some(to.to_string());
        }
        if self.inner.message.contains(from) {
            self.inner.message = self.inner.message.replace(from, to);
        }
        self
    }

    /// Marks an argument error of a call on a communicator, which stays usable (the hint
    /// says so; tensor, environment and `UniqueId` errors have no communicator to speak of).
    pub(crate) fn on_usable_communicator(mut self) -> Self {
        self.inner.comm_usable = true;
        self
    }

    /// Replaces the kind's advice ("What to do: ...") with `hint`, where the error's cause is
    /// known better than its kind says.
    /// The hint set on this error, if any (not the one its kind implies).
    pub(crate) fn set_hint(&self) -> Option<&'static str> {
        self.inner.hint
    }

    pub(crate) fn with_hint(mut self, hint: &'static str) -> Self {
        self.inner.hint = Some(hint);
        self
    }

    /// [`with_hint`](Self::with_hint) unless a hint is set already (a join's advice for the
    /// errors of its steps that carry only their kind's).
    pub(crate) fn or_hint(self, hint: &'static str) -> Self {
        if self.inner.hint.is_some() { self } else { self.with_hint(hint) }
    }

    /// The one-line `Display` without the reporting rank, the hint and the report: how a
    /// later error of the same rank quotes this one (so a hint is never printed twice).
    pub(crate) fn quoted(&self) -> String {
        Headline { error: self, rank: false }.to_string()
    }

    /// The error of an op that does not run because an earlier op of its rank failed
    /// (failures are sticky): `Aborted`, quoting that failure. For a call issued after it and
    /// for a non-blocking or grouped op issued before it alike, so that no rank finishes an op
    /// its failed peers never ran.
    pub(crate) fn failed_earlier(first: &CollectiveError) -> Self {
        Self::new(ErrorKind::Aborted, format!("this communicator failed earlier: {}", first.quoted()))
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
        if let Some(h) = self.inner.hint {
            return h;
        }
        match self.inner.kind {
            ErrorKind::InvalidArgument if self.inner.comm_usable => {
                "fix the arguments on this rank; nothing was sent and the communicator is still usable"
            }
            ErrorKind::InvalidArgument => "fix the arguments",
            ErrorKind::Mismatch => {
                "every rank must issue the same collectives, with the same counts, dtypes, reduce ops and roots, in the same order; a receive must match its peer's send in count and dtype (the sends and receives between two ranks pair up in the order they are issued)"
            }
            ErrorKind::Timeout => {
                "the rank(s) named above held this op up (never reached it, or stopped making progress in it): look for a crash, a hang, a stopped process or a missing call there, or raise CommConfig::timeout; this communicator is now aborted, create a new one"
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

/// `rank r: op (op #s): kind: message [peer: rank p]`, the first line of `Display`.
struct Headline<'a> {
    error: &'a CollectiveError,
    /// Whether to start with the reporting rank.
    rank: bool,
}

impl fmt::Display for Headline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.error.inner;
        let c = &e.context;
        if let Some(r) = c.rank.filter(|_| self.rank) {
            write!(f, "rank {r}: ")?;
        }
        if let Some(op) = &c.op {
            write!(f, "{op}")?;
            if let Some(s) = c.seq {
                write!(f, " (op #{s})")?;
            }
            f.write_str(": ")?;
        }
        write!(f, "{}: {}", e.kind, e.message)?;
        if let Some(p) = c.peer {
            write!(f, " [peer: rank {p}]")?;
        }
        Ok(())
    }
}

impl fmt::Display for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}. What to do: {}.", Headline { error: self, rank: true }, self.hint())?;
        if let Some(r) = &self.inner.report {
            write!(f, "\n{r}")?;
        }
        Ok(())
    }
}

/// Readable, as `anyhow` prints errors (this is what `fn main() -> ruccl::Result<()>`
/// shows): the kind and message, then the context, the hint, the report and the causes, one
/// section each. The alternate form (`{:#?}`) shows the raw fields instead.
impl fmt::Debug for CollectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.inner;
        if f.alternate() {
            return f
                .debug_struct("CollectiveError")
                .field("kind", &e.kind)
                .field("message", &e.message)
                .field("context", &e.context)
                .field("report", &e.report)
                .field("source", &e.source)
                .finish();
        }
        write!(f, "{}: {}", e.kind, e.message)?;
        let c = &e.context;
        let fields: [(&str, Option<String>); 4] = [
            ("rank", c.rank.map(|r| r.to_string())),
            ("op", c.op.clone()),
            ("seq", c.seq.map(|s| format!("{s} (the op's number on this communicator)"))),
            ("peer", c.peer.map(|p| format!("rank {p}"))),
        ];
        if fields.iter().any(|(_, v)| v.is_some()) {
            f.write_str("\n\nContext:")?;
            for (name, value) in fields.iter().filter_map(|(n, v)| Some((n, v.as_ref()?))) {
                write!(f, "\n    {name:<5} {value}")?;
            }
        }
        write!(f, "\n\nWhat to do: {}.", self.hint())?;
        if let Some(r) = &e.report {
            f.write_str("\n\nReport:")?;
            for line in r.lines() {
                write!(f, "\n    {line}")?;
            }
        }
        // A cause that says only what the message says (an error kept as the source for
        // callers who downcast it, whose text became the message) is not printed again.
        let mut causes: Vec<String> = Vec::new();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            let text = c.to_string();
            if text != e.message {
                causes.push(text);
            }
            cause = c.source();
        }
        if !causes.is_empty() {
            f.write_str("\n\nCaused by:")?;
        }
        for c in causes {
            write!(f, "\n    {c}")?;
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
#[path = "error_tests.rs"]
mod tests;
