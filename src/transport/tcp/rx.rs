//! The receiving side of one connection: a frame parser over the socket's bytes, driven by
//! whichever thread gets there first, behind the peer's `rx` lock —
//! - the connection's reader task (`io::reader`), woken by the runtime when bytes arrive;
//! - the rank itself while it waits for this peer ([`Peer::poll_inline`]): a message or a
//!   credit is taken off the socket by the thread that waits for it, instead of waiting for
//!   the reader task to be scheduled first (on a busy core that wake-up costs more than the
//!   round trip, and a small op used to wait for two of them in series: its data, then the
//!   credit that ends it). Large payloads too: the rank waits for them anyway, and handing
//!   each to the task cost a wake-up and a trip to another core per chunk, while the rank
//!   idled (a waiting rank used to leave payloads over 64 KiB to the task: 2 processes, 1
//!   MiB all_reduce 940 -> 550 us, 64 MiB sendrecv 1.83 -> 2.17 GB/s, 4 processes' 256 MiB
//!   all_reduce +4-6%).
//!
//! The task reads only while the rank does not: a rank that finds the socket empty takes it
//! over (`Peer::inline`) and the task then drops it from the runtime's poller, so that frames
//! arriving for a rank that reads them itself wake no runtime thread; it is handed back before
//! any thread of the process sleeps (`arm_readers`) and whenever the rank leaves a frame to the
//! task. Both read through the same non-blocking handle.

use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{DIRECT_MAX, Endpoint, MAX_MESSAGE, Peer, WINDOW, lock, lost};
use crate::error::CollectiveError;
use crate::mem::{HostMem, HostRegion};
use crate::transport::Header;
use crate::transport::wire::{self, FrameKind, HEADER_LEN, Limits};

/// How a pump ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pumped {
    /// The socket is empty for now.
    Drained,
    /// The connection ended; nothing more is read.
    Ended,
}

/// Why the connection ended.
enum End {
    /// Closed without a goodbye, or broken.
    Lost,
    Goodbye,
    /// The peer broke the protocol.
    Protocol(String),
    /// This rank cannot go on (a buffer it cannot allocate).
    Failed(CollectiveError),
}

/// A frame whose body is being read.
#[derive(Debug)]
enum Body {
    Data {
        header: Header,
        mem: HostMem,
        len: usize,
        filled: usize,
    },
    Abort {
        bytes: Vec<u8>,
        len: usize,
    },
    /// A peer's flight-recorder answer to query number `asked`.
    Answer {
        bytes: Vec<u8>,
        len: usize,
        asked: u64,
    },
}

impl Body {
    fn remaining(&self) -> usize {
        match self {
            Body::Data { len, filled, .. } => len - filled,
            Body::Abort { bytes, len } | Body::Answer { bytes, len, .. } => len - bytes.len(),
        }
    }

    /// Takes what it still needs from `b`; how many bytes it took.
    fn take(&mut self, b: &[u8]) -> Result<usize, End> {
        let n = self.remaining().min(b.len());
        match self {
            Body::Data { mem, filled, .. } => {
                mem.write(*filled, n).map_err(End::Failed)?.copy_from_slice(&b[..n]);
                *filled += n;
            }
            Body::Abort { bytes, .. } | Body::Answer { bytes, .. } => bytes.extend_from_slice(&b[..n]),
        }
        Ok(n)
    }
}

/// The parser's state: bytes read and not parsed yet, and the frame being read.
#[derive(Debug)]
pub(super) struct Rx {
    /// The rank's handle on the socket (non-blocking).
    sock: TcpStream,
    buf: Box<[u8]>,
    /// Unparsed bytes: `buf[start..end]`.
    start: usize,
    end: usize,
    body: Option<Body>,
    /// The last fingerprint decoded from this peer's data frames (most frames repeat it).
    fps: wire::FpMemo,
    /// When bytes last arrived (through either reader): the silence limit counts from here.
    pub(super) heard: Instant,
    /// The connection ended (goodbye, close, error, a protocol breach): nothing more is read.
    pub(super) ended: bool,
}

/// One non-blocking read: `None` when the socket is empty.
fn read(mut sock: &TcpStream, b: &mut [u8]) -> Result<Option<usize>, End> {
    loop {
        return match sock.read(b) {
            Ok(0) if !b.is_empty() => Err(End::Lost),
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => Err(End::Lost),
        };
    }
}

impl Rx {
    /// A parser reading (when the rank reads) through `sock`, a non-blocking handle.
    pub(super) fn new(sock: TcpStream) -> Self {
        Rx {
            sock,
            buf: vec![0u8; HEADER_LEN + DIRECT_MAX].into_boxed_slice(),
            start: 0,
            end: 0,
            body: None,
            fps: wire::FpMemo::default(),
            heard: Instant::now(),
            ended: false,
        }
    }

    /// Reads and handles every frame the socket has now.
    pub(super) fn pump(&mut self, e: &Endpoint, p: &Peer) -> Pumped {
        if self.ended {
            return Pumped::Ended;
        }
        match self.run(e, p) {
            Ok(done) => done,
            Err(end) => {
                self.ended = true;
                match end {
                    End::Lost => lost(e, p),
                    End::Goodbye => {
                        p.gone.store(true, Ordering::SeqCst);
                        e.ring();
                    }
                    End::Protocol(what) => e.protocol(p.rank, what),
                    End::Failed(err) => e.set_poison(err.with_rank(e.rank).with_peer(p.rank)),
                }
                Pumped::Ended
            }
        }
    }

    fn run(&mut self, e: &Endpoint, p: &Peer) -> Result<Pumped, End> {
        loop {
            if let Some(body) = &mut self.body {
                let n = body.take(&self.buf[self.start..self.end])?;
                self.start += n;
                let left = body.remaining();
                if left == 0 {
                    if let Some(body) = self.body.take() {
                        finish(e, p, body)?;
                    }
                    continue;
                }
                if left >= self.buf.len()
                    && let Body::Data { mem, filled, .. } = body
                {
                    // A large payload goes straight into its buffer.
                    let got = {
                        let mut g = mem.write(*filled, left).map_err(End::Failed)?;
                        read(&self.sock, &mut g)?
                    };
                    let Some(n) = got else { return Ok(Pumped::Drained) };
                    *filled += n;
                    self.heard = Instant::now();
                    continue;
                }
            } else if self.end - self.start >= HEADER_LEN {
                self.header(e, p)?;
                continue;
            }
            // Refill the buffer (everything buffered is less than one header, or taken).
            self.buf.copy_within(self.start..self.end, 0);
            (self.end, self.start) = (self.end - self.start, 0);
            let Some(n) = read(&self.sock, &mut self.buf[self.end..])? else { return Ok(Pumped::Drained) };
            self.end += n;
            self.heard = Instant::now();
        }
    }

    /// Decodes and checks the header at `start`, and handles it (a frame with a body starts
    /// being read).
    fn header(&mut self, e: &Endpoint, p: &Peer) -> Result<(), End> {
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&self.buf[self.start..self.start + HEADER_LEN]);
        self.start += HEADER_LEN;
        let peer = p.rank;
        let buffered = lock(&p.inbox).buffered;
        let max_data = if buffered == 0 { MAX_MESSAGE } else { WINDOW.saturating_sub(buffered) };
        let h = wire::decode_header_memo(&hb, Limits { max_data }, &mut self.fps)
            .map_err(|err| End::Protocol(err.to_string()))?;
        if h.comm != e.comm || h.from as usize != peer {
            return Err(End::Protocol(format!(
                "a frame for communicator/rank {:02x?}/{} on this connection",
                &h.comm[..6],
                h.from
            )));
        }
        // Lengths are bounded by `decode_header` (data by `max_data`, the rest by MAX_CONTROL).
        let len = h.len as usize;
        match h.kind {
            FrameKind::Data => {
                let Some(fp) = h.fp else { return Err(End::Protocol("a data frame without a fingerprint".into())) };
                let mem = p.recv_buffer(len).map_err(End::Failed)?;
                let header = Header { seq: h.seq, p2p: h.p2p, index: h.index, fp };
                self.body = Some(Body::Data { header, mem, len, filled: 0 });
            }
            FrameKind::Abort => self.body = Some(Body::Abort { bytes: Vec::with_capacity(len), len }),
            FrameKind::FlightAnswer => {
                self.body = Some(Body::Answer { bytes: Vec::with_capacity(len), len, asked: h.seq });
            }
            FrameKind::Credit => {
                // Only a writer with data queued may be waiting for credits (waking it for
                // nothing costs a runtime thread's wake-up per small op).
                let queued = {
                    let mut out = lock(&p.out);
                    out.in_flight = out.in_flight.saturating_sub(h.seq);
                    !out.data.is_empty()
                };
                p.delivered.fetch_add(u64::from(h.index), Ordering::SeqCst);
                e.ring();
                if queued {
                    p.wake.notify_one();
                }
            }
            FrameKind::Goodbye => return Err(End::Goodbye),
            FrameKind::Heartbeat => {}
            FrameKind::FlightQuery => e.answer_flight(p, h.seq),
            FrameKind::Hello => return Err(End::Protocol("a second hello".into())),
            FrameKind::Register | FrameKind::Table => {
                return Err(End::Protocol(format!("a rendezvous {:?} frame on a mesh connection", h.kind)));
            }
        }
        Ok(())
    }
}

/// A frame's body is complete: a message joins the inbox, an abort poisons this rank, a
/// flight-recorder answer waits for the rank that asked.
fn finish(e: &Endpoint, p: &Peer, body: Body) -> Result<(), End> {
    match body {
        Body::Data { header, mem, len, .. } => {
            p.arrive(header, HostRegion { mem, off: 0, len });
            e.ring();
        }
        Body::Abort { bytes, .. } => {
            let err = wire::decode_error(&bytes).map_err(|err| End::Protocol(err.to_string()))?;
            e.set_poison(err);
            e.tell();
        }
        Body::Answer { bytes, asked, .. } => {
            *lock(&p.answer) = Some((asked, bytes));
            e.ring();
        }
    }
    Ok(())
}
