//! What the transport does for the flight recorder: a rank of another process asks a peer
//! for its recorder (`FlightQuery`), and the peer's reader task answers from what the
//! communicator set ([`FlightSource`]), even while the peer's thread is outside ruCCL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::peer::{Peer, arm_readers};
use super::wire::{self, FrameKind};
use super::{Endpoint, Mesh, lock};
use crate::types::Rank;

/// A rank's flight-recorder answer, as the communicator renders it for a peer of another
/// process (the transport only carries the bytes).
#[derive(Clone)]
pub(crate) struct FlightSource(pub(crate) Arc<dyn Fn(Rank) -> Option<Vec<u8>> + Send + Sync>);

impl std::fmt::Debug for FlightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FlightSource")
    }
}

/// The longest a timeout report waits for the peers' flight-recorder answers (a twentieth of
/// the op's timeout when that is less, so the error comes at most 5% late; peers not heard
/// from lately are not waited for at all).
pub(crate) const FLIGHT_WAIT: Duration = Duration::from_secs(1);

impl Endpoint {
    /// A peer asked for this rank's flight recorder (query number `asked`): the answer goes
    /// back on its connection, carrying the query's number (none before the communicator set
    /// what to answer).
    pub(super) fn answer_flight(&self, p: &Peer, asked: u64) {
        let Some(body) = self.flight.get().and_then(|f| (f.0)(self.rank)) else { return };
        let body = &body[..body.len().min(wire::MAX_CONTROL as usize)];
        p.push_control(self.control_numbered(FrameKind::FlightAnswer, asked, body));
    }
}

impl Mesh {
    /// Sets what every rank of this mesh answers a peer that asks for its flight recorder.
    pub(in crate::transport) fn set_flight(&self, source: &FlightSource) {
        for e in self.endpoints.iter().flatten() {
            let _ = e.flight.set(source.clone());
        }
    }

    /// Asks `ranks`, those of `me`'s peers that are still connected, for their flight
    /// recorders and waits up to `wait` for the answers: (rank, answer) for each that came.
    pub(in crate::transport) fn ask_flight(&self, me: Rank, ranks: &[Rank], wait: Duration) -> Vec<(Rank, Vec<u8>)> {
        let Some(e) = self.ep(me) else { return Vec::new() };
        let asked: Vec<&Arc<Peer>> =
            ranks.iter().filter_map(|&r| e.peer(r)).filter(|p| !p.gone.load(Ordering::SeqCst)).collect();
        if asked.is_empty() {
            return Vec::new();
        }
        // Each query has a number of its own, which the answer repeats: an answer to an
        // earlier query that came too late for it (after its wait ended) is not taken for
        // this one's.
        static QUERIES: AtomicU64 = AtomicU64::new(0);
        let n = QUERIES.fetch_add(1, Ordering::Relaxed) + 1;
        let query = e.control_numbered(FrameKind::FlightQuery, n, &[]);
        for p in &asked {
            p.push_control(query.clone());
        }
        // The reader tasks take the answers (this rank may have read some sockets itself).
        arm_readers();
        let until = Instant::now() + wait;
        let answered = |p: &Peer| lock(&p.answer).as_ref().is_some_and(|(of, _)| *of == n);
        // A live peer is heard at least every heartbeat (its reader task answers, even while
        // its thread is elsewhere). One not heard for longer is stopped or hung: waiting for
        // its answer would only make this rank's error late.
        let quiet = e.heartbeat() * 3 / 2;
        let heard = |p: &Peer| lock(&p.rx).heard.elapsed() < quiet;
        let pending = || asked.iter().any(|p| !answered(p) && !p.gone.load(Ordering::SeqCst) && heard(p));
        while pending() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        let take = |p: &Peer| lock(&p.answer).take_if(|(of, _)| *of == n).map(|(_, a)| (p.rank, a));
        asked.iter().filter_map(|p| take(p)).collect()
    }
}
