//! A node's side of the orchestrator: connect to `global_address` (retrying with backoff while
//! the orchestrator is not up yet), say [`Hello`], wait for the answer — all before one
//! deadline, and each wait cut short when the registration is cancelled (a reset).

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::wire::{self, Hello, Msg, Refused, Welcome};
use crate::error::{CollectiveError, ErrorKind, Result};

/// How often a wait looks whether it was cancelled.
const SLICE: Duration = Duration::from_millis(50);

/// How a cancelled wait's message ends.
pub(super) const CANCELLED: &str = ": its registration was cancelled";

fn cancel_error(global: &str, hello: &Hello) -> CollectiveError {
    CollectiveError::new(
        ErrorKind::Aborted,
        format!("node {} stopped waiting for the orchestrator at {global}{CANCELLED}", hello.data_addr),
    )
}

/// Meets the other nodes through the orchestrator at `global`.
///
/// # Errors
/// `InvalidArgument` when `global` does not resolve; `Timeout` when no orchestrator answers
/// there, or the other nodes do not all arrive, before `deadline`; the orchestrator's own
/// error (`Mismatch`, `InvalidArgument`, `Timeout` naming who arrived) when it refuses this
/// node; `Protocol` when something else answers; `Aborted` as soon as `cancelled()` holds
/// (looked at every [`SLICE`]).
pub(crate) fn rendezvous(
    global: &str,
    hello: &Hello,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<Welcome> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = global
        .to_socket_addrs()
        .map_err(|e| {
            // A host without a port reads "invalid socket address": say which is missing.
            let why = match global.rsplit_once(':') {
                Some((_, port)) if port.parse::<u16>().is_ok() => format!("does not resolve: {e}"),
                _ => "has no port: it is the orchestrator's host:port".to_string(),
            };
            CollectiveError::invalid(format!("global_address {global:?} {why}")).with_hint(
                "set CollectiveConfig::with_global_address to the orchestrator's host:port (e.g. 10.0.0.1:29400, \
                 where ruccl::orchestrator or examples/orchestrator.rs listens), the same on every node; nothing \
                 was created: register every peer again",
            )
        })?
        .collect();
    let mut backoff = Duration::from_millis(10);
    let mut last = String::from("no address");
    let mut stream = loop {
        let mut found = None;
        for a in &addrs {
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            match TcpStream::connect_timeout(a, left.min(Duration::from_secs(1))) {
                Ok(s) => {
                    found = Some(s);
                    break;
                }
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        if let Some(s) = found {
            break s;
        }
        if cancelled() {
            return Err(cancel_error(global, hello));
        }
        if Instant::now() + backoff >= deadline {
            return Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!(
                    "no orchestrator answered at global_address {global} within {timeout:?} (last attempt: {last}); \
                     start one there (ruccl::orchestrator, examples/orchestrator.rs)"
                ),
            ));
        }
        std::thread::sleep(backoff.min(SLICE));
        backoff = (backoff * 2).min(SLICE);
    };
    let _ = stream.set_nodelay(true);
    wire::write_msg(&mut stream, &Msg::Hello(hello.clone()))?;
    let io = |e: std::io::Error| CollectiveError::new(ErrorKind::Io, format!("the orchestrator at {global}: {e}"));
    // Wait for the answer's first byte in slices (a partial read cut by a timeout would lose
    // bytes), then read it whole.
    loop {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left.min(SLICE))).map_err(io)?;
        match stream.peek(&mut [0u8; 1]) {
            Ok(0) => return Err(closed(global, hello)),
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted) =>
            {
                return Err(closed(global, hello));
            }
            Ok(_) => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if cancelled() {
                    return Err(cancel_error(global, hello));
                }
                if Instant::now() >= deadline {
                    break; // read_msg below times out and says so
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break, // read_msg below reports it
        }
    }
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left)).map_err(io)?;
    match wire::read_msg(&mut stream) {
        Ok(Msg::Welcome(w)) => Ok(w),
        Ok(Msg::Refused(Refused { kind: ErrorKind::Timeout, message })) => Err(CollectiveError::new(
            ErrorKind::Timeout,
            format!(
                "node {} waited for the orchestrator at {global} to gather {} nodes, and it gave up: {message}",
                hello.data_addr, hello.num_nodes
            ),
        )),
        Ok(Msg::Refused(Refused { kind, message })) => Err(CollectiveError::new(
            kind,
            format!("the orchestrator at {global} refused node {}: {message}", hello.data_addr),
        )),
        Ok(Msg::Hello(_)) => Err(CollectiveError::protocol(format!("{global} answered a hello with a hello"))),
        Err(e) if e.kind() == ErrorKind::Timeout => Err(CollectiveError::new(
            ErrorKind::Timeout,
            format!(
                "node {} waited {timeout:?} for the orchestrator at {global} to gather {} nodes; it did not answer",
                hello.data_addr, hello.num_nodes
            ),
        )),
        Err(e) => Err(CollectiveError::new(e.kind(), format!("the orchestrator at {global}: {}", e.message()))),
    }
}

/// The orchestrator's side closed the connection before it answered this node's hello.
#[cold]
fn closed(global: &str, hello: &Hello) -> CollectiveError {
    CollectiveError::new(
        ErrorKind::Io,
        format!(
            "the orchestrator at {global} closed the connection without answering node {}: it stopped, or \
             global_address is not an orchestrator's address (a node's data_service_port, say)",
            hello.data_addr
        ),
    )
    .with_hint(
        "start the orchestrator at global_address (ruccl::orchestrator, examples/orchestrator.rs), the same host:port \
         on every node and not a node's data_service_port, then register every peer again",
    )
}
