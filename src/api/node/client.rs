//! A node's side of the orchestrator: connect to `global_address` (retrying with backoff while
//! the orchestrator is not up yet), say [`Hello`], wait for the answer — all before one
//! deadline.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::wire::{self, Hello, Msg, Refused, Welcome};
use crate::error::{CollectiveError, ErrorKind, Result};

/// Meets the other nodes through the orchestrator at `global`.
///
/// # Errors
/// `InvalidArgument` when `global` does not resolve; `Timeout` when no orchestrator answers
/// there, or the other nodes do not all arrive, before `deadline`; the orchestrator's own
/// error (`Mismatch`, `InvalidArgument`, `Timeout` naming who arrived) when it refuses this
/// node; `Protocol` when something else answers.
pub(crate) fn rendezvous(global: &str, hello: &Hello, timeout: Duration) -> Result<Welcome> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = global
        .to_socket_addrs()
        .map_err(|e| CollectiveError::invalid(format!("global_address {global:?} does not resolve: {e}")))?
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
        if Instant::now() + backoff >= deadline {
            return Err(CollectiveError::new(
                ErrorKind::Timeout,
                format!(
                    "no orchestrator answered at global_address {global} within {timeout:?} (last attempt: {last}); \
                     start one there (ruccl::orchestrator, examples/orchestrator.rs)"
                ),
            ));
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(500));
    };
    let _ = stream.set_nodelay(true);
    wire::write_msg(&mut stream, &Msg::Hello(hello.clone()))?;
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left)).map_err(|e| CollectiveError::new(ErrorKind::Io, e.to_string()))?;
    match wire::read_msg(&mut stream) {
        Ok(Msg::Welcome(w)) => Ok(w),
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
