//! Joining across processes: a rank whose id is rooted in another process registers at the
//! root's listener and waits for the table ([`join`]); the root's listener joins the room on
//! its behalf and answers with the table or the error ([`serve`]).

use std::any::Any;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::proto::{self, ProcAddr, Registration};
use super::{Joined, Shared, assemble, listener};
use crate::config::{CommConfig, deadline_after};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::transport::tcp::setup;
use crate::transport::wire::{self, FrameHeader, FrameKind, HEADER_LEN, Limits};
use crate::types::Rank;
use crate::unique_id::UniqueId;

/// How much longer than its own deadline a rank waits for the root's answer (the root keeps
/// the rank in its room for the time the rank had left when it registered, so the answer
/// comes at the rank's own deadline, give or take the network).
const GRACE: Duration = Duration::from_secs(1);
/// The longest a root waits for a rank of another process, whatever it asks.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// The process that roots `id`, as an error names it, and the advice when nothing listens
/// there: a launch's rank 0; the process that made the id (which may be no rank at all, and
/// may have exited); or a split's root (the first member of the new communicator).
fn root_process(id: &UniqueId) -> (&'static str, &'static str) {
    if id.is_launch() {
        (
            "rank 0 of the launch (at MASTER_ADDR:MASTER_PORT)",
            "read rank 0's output for an error of its own; start rank 0 with the others; check that \
             MASTER_ADDR:MASTER_PORT is rank 0's and reachable from this host (no firewall between them), or raise \
             CommConfig::timeout (RUCCL_TIMEOUT) if rank 0 starts late",
        )
    } else if id.is_made_by_new() {
        (
            "the process that made the id with UniqueId::new",
            "read that process's output for an error of its own; keep it running until every rank has joined (the \
             id's rendezvous lives in it: a process that made the id and exited took it along), and start it with \
             the others; check that the id's address is that process's and reachable from this host (no firewall \
             between them), or raise CommConfig::timeout (RUCCL_TIMEOUT) if it starts late",
        )
    } else {
        (
            "the process that roots this communicator (rank 0's, or a split's first member's)",
            "read that process's output for an error of its own; start it with the others; check that the id's \
             address is that process's and reachable from this host (no firewall between them), or raise \
             CommConfig::timeout (RUCCL_TIMEOUT) if it starts late",
        )
    }
}

/// Joins `id` (rooted in another process) as `rank` of `world`.
///
/// # Errors
/// `Timeout` when the root cannot be reached, or names the ranks that never came; the
/// root's errors (duplicate rank, world or config mismatch); `Protocol` for a bad answer;
/// as [`assemble::assemble`].
pub(super) fn join(
    id: &UniqueId,
    world: usize,
    rank: Rank,
    device: Arc<dyn Any + Send + Sync>,
    host_memory: bool,
    config: &CommConfig,
) -> Result<Arc<Shared>> {
    let fail = |e: CollectiveError| e.with_rank(rank).with_op("Communicator::new");
    let Some(root) = id.root_address() else {
        return Err(fail(CollectiveError::invalid("this UniqueId has no root address")));
    };
    let deadline = deadline_after(config.timeout());
    let at = ProcAddr { token: listener::process_token(), addr: listener::mesh_address().map_err(fail)? };
    let mut s = setup::connect(root, deadline).map_err(|_| {
        let (who, hint) = root_process(id);
        fail(
            CollectiveError::new(
                ErrorKind::Timeout,
                format!(
                    "could not reach the rendezvous root of communicator {} at {root} within {:?}: nothing \
                     listened there ({who} was not running — it may have started and failed already: a \
                     rendezvous error there, such as ranks that disagree on the world size, ends it, so see its \
                     own output — or {root} is not reachable from this host)",
                    id.short(),
                    config.timeout()
                ),
            )
            .with_hint(hint),
        )
    })?;
    let io = |what: &str, e: std::io::Error| {
        let kind = match e.kind() {
            // Something took the registration and never answered, within the rank's whole
            // timeout and a grace: the usual cause is another program on the port.
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                return fail(
                    CollectiveError::new(
                        ErrorKind::Timeout,
                        format!(
                            "{what} the rendezvous root at {root}: no answer within {:?} (this rank's timeout and \
                             a grace of {GRACE:?}) — what listens there took the registration and said nothing: \
                             another program on that port, or a stuck root process",
                            config.timeout() + GRACE
                        ),
                    )
                    .with_hint(SILENT_ROOT),
                );
            }
            // The root's process went away with this rank registered: it exited or crashed
            // (a launch's rank 0 that gave up waiting for a missing rank exits so), not a
            // stranger speaking another protocol.
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => {
                return fail(
                    CollectiveError::new(
                        ErrorKind::PeerLost,
                        format!(
                            "the rendezvous root of communicator {} at {root} closed the connection before answering \
                             ({what} it: {e}): {} exited or crashed",
                            id.short(),
                            root_process(id).0
                        ),
                    )
                    .with_hint(ROOT_GONE),
                );
            }
            _ => ErrorKind::Protocol,
        };
        let e = CollectiveError::new(kind, format!("{what} the rendezvous root at {root}: {e}"));
        fail(if kind == ErrorKind::Protocol { e.with_hint(NOT_THE_ROOT) } else { e })
    };
    // The root keeps this rank in its room for the time it has left (not its whole timeout:
    // connecting may have taken some of it, while the root was not up yet).
    let reg = Registration {
        id: id.clone(),
        rank,
        world,
        at,
        timeout: deadline.saturating_duration_since(Instant::now()),
        chunk_bytes: config.chunk_bytes() as u64,
        algorithm: config.algorithm(),
        peer_silence: config.peer_silence(),
    };
    s.write_all(&proto::encode_register(&reg)).map_err(|e| io("registering at", e))?;
    let wait = deadline.saturating_duration_since(Instant::now()) + GRACE;
    s.set_read_timeout(Some(wait)).map_err(|e| io("configuring the connection to", e))?;
    let mut hb = [0u8; HEADER_LEN];
    s.read_exact(&mut hb).map_err(|e| io("waiting for an answer from", e))?;
    let bad = |what: String| {
        fail(CollectiveError::protocol(format!("the rendezvous root at {root} {what}")).with_hint(NOT_THE_ROOT))
    };
    let h = wire::decode_header(&hb, Limits { max_data: 0 }).map_err(|e| bad(format!("answered badly: {e}")))?;
    if h.comm != id.comm_bytes() {
        return Err(bad("answered for another communicator".into()));
    }
    let mut body = vec![0u8; h.len as usize];
    s.read_exact(&mut body).map_err(|e| io("a truncated answer from", e))?;
    match h.kind {
        FrameKind::Table => {
            let table = proto::decode_table(&h, &body).map_err(|e| bad(format!("sent a bad table: {e}")))?;
            if table.procs.len() != world {
                return Err(bad(format!("sent a table of {} ranks for a world of {world}", table.procs.len())));
            }
            assemble::assemble(id, world, &table, &[(rank, device)], host_memory, config, deadline)
        }
        FrameKind::Abort => {
            let e = wire::decode_error(&body).map_err(|e| bad(format!("sent a bad error: {e}")))?;
            // The root's hint stays in its process: the advice for this side, by kind (a room not
            // complete in time is `Timeout`, or `PeerLost` naming a rank whose process went away;
            // nothing was created either way).
            Err(fail(match e.kind() {
                ErrorKind::InvalidArgument => e.with_hint(REFUSED),
                ErrorKind::Timeout | ErrorKind::PeerLost => e.with_hint(super::absent::INCOMPLETE),
                _ => e,
            }))
        }
        k => Err(bad(format!("answered with a {k:?} frame"))),
    }
}

/// The advice when the root refused this rank's registration for a reason its message gives.
const REFUSED: &str = "fix what the rendezvous root's refusal above says (the ranks of one launch share one \
     WORLD_SIZE and one CommConfig — RUCCL_CHUNK_BYTES, RUCCL_ALGO, RUCCL_PEER_SILENCE alike —, each has a RANK of its own, and each \
     launch its own MASTER_PORT), then start every rank again";

/// The advice when what listens at the root's address never answers.
const SILENT_ROOT: &str = "check that MASTER_ADDR:MASTER_PORT (or the UniqueId's address) is rank 0's rendezvous \
     (rank 0's own error says whether it could listen there) and not another program's port; then start every \
     rank again";

/// The advice when the root's process went away during the rendezvous.
const ROOT_GONE: &str = "look at that process's own error first: most often it gave up waiting for ranks that never \
     started (its Timeout names them) or failed to start; then start every rank again";

/// The advice when what answers at the root's address does not speak the rendezvous.
const NOT_THE_ROOT: &str = "check that the address (MASTER_ADDR and MASTER_PORT, or the UniqueId's) is rank 0's \
     rendezvous and not another program's port, and that every rank runs the same ruCCL version; if both hold, \
     report this message as a bug";

/// Registrations this process's rendezvous is answering now. A root whose own join fails
/// waits for these answers ([`answers_written`]) before it returns its error: its process may
/// exit right after, and a refusal not yet written would reach the other rank as a closed
/// connection (`PeerLost`) instead of the reason (seen under load: two launches disagreeing
/// on WORLD_SIZE).
static ANSWERING: AtomicUsize = AtomicUsize::new(0);

/// One registration being answered (counted in [`ANSWERING`] while it lives).
struct Answering;

impl Answering {
    fn start() -> Self {
        ANSWERING.fetch_add(1, Ordering::SeqCst);
        Answering
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        ANSWERING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits until every registration this process is answering has its answer written, or
/// `deadline`.
pub(super) fn answers_written(deadline: Instant) {
    while ANSWERING.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The root's side: a registration `h` + `body` arrived on `s`. Joins the room for the rank
/// and answers with the table, or with the error (an `Abort` frame). Returns the error of a
/// registration that is not one (logged by the listener).
pub(super) fn serve(h: &FrameHeader, body: &[u8], mut s: TcpStream) -> Result<()> {
    let _answering = Answering::start();
    let answer = |s: &mut TcpStream, frame: &[u8]| {
        // The rank may be gone; it then learns nothing more from us anyway.
        let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
        let _ = s.write_all(frame);
    };
    let refuse = |s: &mut TcpStream, e: CollectiveError| {
        let mut hd = FrameHeader::control(FrameKind::Abort, h.comm, 0, 0);
        let b = wire::encode_error(&e);
        hd.len = b.len() as u64;
        let mut f = wire::encode_header(&hd).to_vec();
        f.extend_from_slice(&b);
        answer(s, &f);
        e
    };
    let reg = match proto::decode_register(h, body) {
        Ok(r) => r,
        Err(e) => return Err(refuse(&mut s, CollectiveError::from(e))),
    };
    if reg.id.comm_bytes() != h.comm || !reg.id.root_address().is_some_and(listener::serves) {
        let e = CollectiveError::protocol(format!(
            "rank {} registered for communicator {}, which is not rooted in this process",
            reg.rank,
            reg.id.short()
        ));
        return Err(refuse(&mut s, e));
    }
    if listener::another_launch(&reg.id) {
        if let Some(root) = reg.id.root_address() {
            listener::note_stranger(root, reg.rank);
        }
        let at = reg.id.root_address().map_or_else(String::new, |a| a.to_string());
        let e = CollectiveError::invalid(format!(
            "rank {} is of another launch than the one whose rank 0 listens at {at}: two jobs use the same \
             MASTER_ADDR:MASTER_PORT (their launchers' job ids differ: TORCHELASTIC_RUN_ID, PMIX_NAMESPACE or \
             OMPI_MCA_ess_base_jobid, SLURM_JOB_ID and SLURM_STEP_ID); give each job its own MASTER_PORT (or \
             RUCCL_MASTER_PORT)",
            reg.rank
        ))
        .with_hint("give each job its own MASTER_PORT (or RUCCL_MASTER_PORT), then start this job's ranks again");
        return Err(refuse(&mut s, e));
    }
    if reg.id.is_made_by_new() && !reg.id.made_here() {
        let e = CollectiveError::invalid(format!(
            "rank {} registered for communicator {}, which this process (the one listening at {}) never made: the \
             UniqueId is from an earlier run of the process that listened there, or from another job",
            reg.rank,
            reg.id.short(),
            reg.id.root_address().map_or_else(String::new, |a| a.to_string())
        ))
        .with_hint("pass this run's UniqueId (the one its rank 0 made) to every rank, and start this rank again");
        return Err(refuse(&mut s, e));
    }
    let config = CommConfig::default()
        .with_chunk_bytes(reg.chunk_bytes.min(usize::MAX as u64) as usize)
        .with_algorithm(reg.algorithm)
        .with_timeout(reg.timeout.min(MAX_WAIT))
        .with_peer_silence(reg.peer_silence);
    let member: super::Entrant = (reg.rank, Arc::new(()), Some(reg.at));
    // The registrant sends nothing more: its connection closing means its process went away.
    let probe: Option<super::Probe> = match s.try_clone() {
        Ok(c) => Some(Arc::new(move || !closed(&c))),
        Err(_) => None,
    };
    match super::enter(&reg.id, reg.world, &[member], probe, &config) {
        Ok(Joined::Table(t)) => answer(&mut s, &proto::encode_table(h.comm, &t)),
        Ok(Joined::Group(_)) => {
            refuse(&mut s, CollectiveError::protocol("a group of one process formed around a rank of another"));
        }
        Err(e) => {
            refuse(&mut s, e);
        }
    }
    Ok(())
}

/// Whether the other end closed `s` (or reset it), without blocking or consuming what it
/// sent: a peek of one byte that returns end-of-stream or an error other than "nothing yet".
#[cfg(unix)]
fn closed(s: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut b = 0u8;
    // SAFETY: `recv` writes at most 1 byte into `b`, which outlives the call; the descriptor
    // is `s`'s, open for as long as `s` is borrowed.
    let n = unsafe { libc::recv(s.as_raw_fd(), (&raw mut b).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted)
    } else {
        n == 0
    }
}

/// Elsewhere a closed registration is not noticed before the rank's deadline.
#[cfg(not(unix))]
fn closed(_: &TcpStream) -> bool {
    false
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
