//! The tasks that move frames: one reader and one writer per connection, on a small tokio
//! runtime shared by the process.

use std::io::IoSlice;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::runtime::{Handle, Runtime};

use super::rx::{Pumped, Reader};
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

/// Starts the reader and writer of `me`'s connection to `p`.
pub(super) fn spawn(rt: &Handle, e: Arc<Endpoint>, p: Arc<Peer>, read: OwnedReadHalf, write: OwnedWriteHalf) {
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

async fn writer(e: Arc<Endpoint>, p: Arc<Peer>, mut w: OwnedWriteHalf) {
    loop {
        let sent = match next(&p) {
            Next::Done => break,
            Next::Idle => {
                if tokio::time::timeout(e.heartbeat(), p.wake.notified()).await.is_err() {
                    p.push_control(e.control(FrameKind::Heartbeat, &[]));
                }
                continue;
            }
            Next::Control(frame) => {
                let r = w.write_all(&frame).await.map_err(|_| ());
                lock(&p.out).busy = false;
                r
            }
            Next::Data(m) => {
                let ticket = m.ticket;
                let r = write_data(&e, &mut w, m).await;
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
            lost(&e, &p);
            // Nothing will be written any more: whatever is queued counts as released.
            {
                let mut out = lock(&p.out);
                out.data.clear();
                out.sock = None;
            }
            p.flushed.store(true, Ordering::SeqCst);
            e.ring();
            return;
        }
    }
    lock(&p.out).sock = None;
    let _ = w.shutdown().await;
    p.flushed.store(true, Ordering::SeqCst);
}

/// The header of data message `m` from `e`'s rank.
pub(super) fn data_header(e: &Endpoint, m: &OutMsg) -> [u8; HEADER_LEN] {
    let mut h = FrameHeader::control(FrameKind::Data, e.comm, e.rank as u32, m.payload.len() as u64);
    (h.seq, h.p2p, h.index, h.fp) = (m.header.seq, m.header.p2p, m.header.index, Some(m.header.fp));
    wire::encode_header(&h)
}

async fn write_data(e: &Endpoint, w: &mut OwnedWriteHalf, m: OutMsg) -> std::result::Result<(), ()> {
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
    write_two(w, &header, &bytes).await.map_err(|_| ())
}

/// Writes `a` then `b` with vectored writes: a small message leaves in one segment (with
/// `TCP_NODELAY` a separate header write would be a packet, and a wake-up, of its own).
async fn write_two(w: &mut OwnedWriteHalf, mut a: &[u8], mut b: &[u8]) -> std::io::Result<()> {
    while !a.is_empty() || !b.is_empty() {
        let n = if a.is_empty() {
            w.write(b).await?
        } else {
            w.write_vectored(&[IoSlice::new(a), IoSlice::new(b)]).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_a = n.min(a.len());
        a = &a[from_a..];
        b = &b[n - from_a..];
    }
    Ok(())
}

async fn reader(e: Arc<Endpoint>, p: Arc<Peer>, r: OwnedReadHalf) {
    // The frames themselves are read by `Rx::pump`, here or by the waiting rank: this task
    // reads whatever the rank leaves (everything, while the rank sleeps or computes) and
    // watches for silence.
    loop {
        let left = {
            let rx = lock(&p.rx);
            if rx.ended {
                return;
            }
            e.silence.saturating_sub(rx.heard.elapsed())
        };
        match tokio::time::timeout(left, r.readable()).await {
            Ok(Ok(())) => {
                if lock(&p.rx).pump(&e, &p, Reader::Task(&r)) == Pumped::Ended {
                    return;
                }
            }
            Ok(Err(_)) => {
                lock(&p.rx).ended = true;
                lost(&e, &p);
                return;
            }
            Err(_) => {
                // Silent for too long, unless the rank heard something meanwhile.
                let mut rx = lock(&p.rx);
                if rx.ended {
                    return;
                }
                if rx.heard.elapsed() >= e.silence {
                    rx.ended = true;
                    drop(rx);
                    lost(&e, &p);
                    return;
                }
            }
        }
    }
}
