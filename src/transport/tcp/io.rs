//! The tasks that move frames: one reader and one writer per connection, on a small tokio
//! runtime shared by the process. Each registers its own handle on the socket with the
//! runtime's poller for the one readiness it waits for: the writer for room to write, the
//! reader for bytes to read — and the reader only while the rank does not read the socket
//! itself (see [`rx`](super::rx)), so that a frame the rank reads wakes no runtime thread.

use std::io::{IoSlice, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::runtime::{Handle, Runtime};

use super::rx::Pumped;
use super::{Endpoint, OutMsg, Peer, WINDOW, lock, lost};
use crate::error::{CollectiveError, ErrorKind, Result};
use crate::mem::HostRegion;
use crate::transport::Payload;
use crate::transport::wire::{self, FrameHeader, FrameKind, HEADER_LEN};

/// The process's transport runtime (two worker threads: I/O, not compute, runs there).
pub(super) fn runtime() -> Result<Handle> {
    static RT: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ruccl-tcp")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(e) => Err(CollectiveError::new(ErrorKind::Io, format!("cannot start the TCP transport's runtime: {e}"))),
    }
}

/// Registers `sock` with the runtime's poller for `interest` only (a task calls it, so there
/// is a current runtime).
fn register(sock: TcpStream, interest: Interest) -> std::io::Result<AsyncFd<TcpStream>> {
    // SAFETY: the `TcpStream` owns its descriptor, which stays open and names the same socket
    // for as long as the `AsyncFd` owns the stream (until it is dropped or gives the stream
    // back with `into_inner`), and `as_raw_fd` always returns it.
    unsafe { AsyncFd::register_with_interest(sock, interest) }.map_err(std::io::Error::from)
}

/// Starts the reader and writer of `me`'s connection to `p`, each with its own non-blocking
/// handle on the socket.
pub(super) fn spawn(rt: &Handle, e: Arc<Endpoint>, p: Arc<Peer>, read: TcpStream, write: TcpStream) {
    rt.spawn(reader(e.clone(), p.clone(), read));
    rt.spawn(writer(e, p, write));
}

/// What the writer does next.
enum Next {
    Control(Vec<u8>),
    Data(OutMsg),
    Idle,
    Done,
}

fn next(p: &Peer) -> Next {
    let mut out = lock(&p.out);
    if out.rank_writing {
        // The sending rank is writing a frame itself; it wakes this task when done if anything
        // is queued.
        return Next::Idle;
    }
    if out.data.front().is_some_and(|m| m.done > 0) {
        // The rest of a frame the sending rank began on the socket: before anything else (its
        // credits are counted).
        out.writing = out.data.front().map(|m| m.ticket);
        out.busy = true;
        return out.data.pop_front().map_or(Next::Idle, Next::Data);
    }
    if let Some(mut c) = out.control.pop_front() {
        // Every queued control frame in one write (credits come in runs).
        while let Some(more) = out.control.pop_front() {
            c.extend_from_slice(&more);
        }
        out.busy = true;
        return Next::Control(c);
    }
    if out.closing {
        return Next::Done;
    }
    let fits = |len: u64, in_flight: u64| in_flight == 0 || in_flight + len <= WINDOW;
    let Some((len, ticket)) = out.data.front().map(|m| (m.payload.len() as u64, m.ticket)) else { return Next::Idle };
    if !fits(len, out.in_flight) {
        return Next::Idle;
    }
    out.in_flight += len;
    out.writing = Some(ticket);
    out.busy = true;
    out.data.pop_front().map_or(Next::Idle, Next::Data)
}

/// How long a writer whose socket failed waits for the reader to read the peer's last
/// frames (a goodbye, an abort) before it counts the peer lost.
const READER_DECIDES: std::time::Duration = std::time::Duration::from_millis(500);

async fn writer(e: Arc<Endpoint>, p: Arc<Peer>, w: TcpStream) {
    let w = match register(w, Interest::WRITABLE) {
        Ok(w) => w,
        Err(_) => {
            lost(&e, &p);
            lock(&p.out).open = false;
            p.flushed.store(true, Ordering::SeqCst);
            e.ring();
            return;
        }
    };
    loop {
        let sent = match next(&p) {
            Next::Done => break,
            Next::Idle => {
                if !lock(&p.out).data.is_empty() {
                    // Waiting for credits: the rank may not be reading this socket.
                    p.arm();
                }
                if tokio::time::timeout(e.heartbeat(), p.wake.notified()).await.is_err() {
                    p.push_control(e.control(FrameKind::Heartbeat, &[]));
                }
                continue;
            }
            Next::Control(frame) => {
                let r = write_two(&w, &frame, &[]).await.map_err(|_| ());
                lock(&p.out).busy = false;
                r
            }
            Next::Data(m) => {
                let ticket = m.ticket;
                let r = write_data(&e, &w, m).await;
                {
                    let mut out = lock(&p.out);
                    out.writing = None;
                    out.busy = false;
                }
                if r.is_ok() {
                    p.released.fetch_max(ticket, Ordering::SeqCst);
                }
                e.ring();
                r
            }
        };
        if sent.is_err() {
            // Nothing will be written any more: whatever is queued counts as released.
            {
                let mut out = lock(&p.out);
                out.data.clear();
                out.open = false;
            }
            p.flushed.store(true, Ordering::SeqCst);
            // The peer closed (a process that exits with bytes of ours unread resets the
            // connection), but what it sent before is still readable: its goodbye, or the
            // abort that says why. The reader decides whether it left or was lost; this only
            // steps in if the reader does not. Marked lost at once, a peer that dropped its
            // communicator and exited while this rank sent to it read "closed without a
            // goodbye" (2 runs in 3, 64 MiB send/recv over TCP; a stranger's review).
            let until = tokio::time::Instant::now() + READER_DECIDES;
            while !p.gone.load(Ordering::SeqCst) && tokio::time::Instant::now() < until {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            lost(&e, &p);
            e.ring();
            return;
        }
    }
    lock(&p.out).open = false;
    let _ = w.get_ref().shutdown(std::net::Shutdown::Write);
    p.flushed.store(true, Ordering::SeqCst);
}

/// The header of data message `m` from `e`'s rank.
pub(super) fn data_header(e: &Endpoint, m: &OutMsg) -> [u8; HEADER_LEN] {
    let mut h = FrameHeader::control(FrameKind::Data, e.comm, e.rank as u32, m.payload.len() as u64);
    (h.seq, h.p2p, h.index, h.fp) = (m.header.seq, m.header.p2p, m.header.index, Some(m.header.fp));
    wire::encode_header(&h)
}

async fn write_data(e: &Endpoint, w: &AsyncFd<TcpStream>, m: OutMsg) -> std::result::Result<(), ()> {
    let region: HostRegion = match &m.payload {
        Payload::Host(r) => r.clone(),
        Payload::Device(..) => {
            // The scheduler stages device memory to the host for peers it cannot reach.
            e.set_poison(CollectiveError::unsupported("a device range cannot cross a socket").with_rank(e.rank));
            return Err(());
        }
    };
    let header = data_header(e, &m);
    let bytes = match region.read() {
        Ok(b) => b,
        Err(err) => {
            e.set_poison(err.with_rank(e.rank));
            return Err(());
        }
    };
    // What the sending rank wrote already (`Peer::direct_large`): the header first.
    let (h, b) = (m.done.min(header.len()), m.done.saturating_sub(header.len()).min(bytes.len()));
    write_two(w, &header[h..], &bytes[b..]).await.map_err(|_| ())
}

/// Writes `a` then `b` with vectored writes: a small message leaves in one segment (with
/// `TCP_NODELAY` a separate header write would be a packet, and a wake-up, of its own).
async fn write_two(w: &AsyncFd<TcpStream>, mut a: &[u8], mut b: &[u8]) -> std::io::Result<()> {
    while !a.is_empty() || !b.is_empty() {
        let mut ready = w.writable().await?;
        let r = ready.try_io(|s| {
            let mut s = s.get_ref();
            if a.is_empty() { s.write(b) } else { s.write_vectored(&[IoSlice::new(a), IoSlice::new(b)]) }
        });
        // `Err`: the socket was full after all (its readiness is cleared); wait again.
        let Ok(n) = r else { continue };
        let n = n?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[n - from_a..];
    }
    Ok(())
}

/// The silence limit's time left on this connection; `None` once it ended.
fn silence_left(e: &Endpoint, p: &Peer) -> Option<std::time::Duration> {
    let rx = lock(&p.rx);
    (!rx.ended).then(|| e.silence.saturating_sub(rx.heard.elapsed()))
}

/// The silence limit passed: the peer is lost, unless the rank heard from it meanwhile.
/// True when the connection ended.
fn silent(e: &Endpoint, p: &Peer) -> bool {
    let mut rx = lock(&p.rx);
    if rx.ended {
        return true;
    }
    if rx.heard.elapsed() < e.silence {
        return false;
    }
    rx.ended = true;
    drop(rx);
    p.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    lost(e, p);
    true
}

/// How often a reader task whose rank reads the socket itself looks at it anyway.
const LOOK: std::time::Duration = std::time::Duration::from_millis(200);

async fn reader(e: Arc<Endpoint>, p: Arc<Peer>, mut sock: TcpStream) {
    // The frames themselves are read by `Rx::pump`, here or by the waiting rank: this task
    // reads whatever the rank leaves (everything, while the rank sleeps or computes) and
    // watches for silence. It polls the socket only while armed (`Peer::inline` clear).
    loop {
        let r = match register(sock, Interest::READABLE) {
            Ok(r) => r,
            Err(_) => {
                lock(&p.rx).ended = true;
                lost(&e, &p);
                return;
            }
        };
        // Armed: first whatever is there already (the rank may have stopped reading long ago).
        if p.pump_unless_read(&e) == Some(Pumped::Ended) {
            return;
        }
        while !p.inline.load(Ordering::SeqCst) {
            let Some(left) = silence_left(&e, &p) else { return };
            match tokio::time::timeout(left, r.readable()).await {
                Ok(Ok(mut ready)) => match p.pump_unless_read(&e) {
                    Some(Pumped::Ended) => return,
                    // Read until the socket was empty, here or by the rank that holds the
                    // parser: its readiness is spent (unless bytes came after that read,
                    // which the guard's tick keeps).
                    _ => ready.clear_ready(),
                },
                Ok(Err(_)) => {
                    lock(&p.rx).ended = true;
                    lost(&e, &p);
                    return;
                }
                Err(_) => {
                    // What came meanwhile first: a process resumed after a stop (SIGSTOP, a
                    // debugger) finds the limit passed and the peer's bytes unread, its
                    // heartbeats and perhaps its abort, and would blame a healthy peer.
                    if p.pump_unless_read(&e) == Some(Pumped::Ended) || silent(&e, &p) {
                        return;
                    }
                }
            }
        }
        // The rank reads the socket itself: out of the poller until it hands it back, or the
        // silence limit passes (then this task looks, in case the rank stopped reading).
        // Meanwhile a look every `LOOK`, unless the rank is reading right then: a rank back in
        // the caller's code reads nothing, and a peer's flight-recorder query (its timeout
        // report waits for the answer) or abort must not wait for this rank's next call.
        sock = r.into_inner();
        while p.inline.load(Ordering::SeqCst) {
            let Some(left) = silence_left(&e, &p) else { return };
            match tokio::time::timeout(left.min(LOOK), p.armed.notified()).await {
                Ok(()) => {}
                Err(_) if left <= LOOK => p.arm(),
                Err(_) => {
                    if p.pump_unless_read(&e) == Some(Pumped::Ended) {
                        return;
                    }
                }
            }
        }
    }
}
