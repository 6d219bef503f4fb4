//! `--tcp-ref`: what loopback TCP itself does on this machine, measured in the same run as
//! the table: one connection's bandwidth (large writes, one stream: the ceiling a busbw over
//! TCP is read against) and one round trip of a small message with `TCP_NODELAY` (the floor
//! of a small collective's latency). Plain `std::net` between two threads of this process.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::Instant;

/// Bytes each write of the stream test carries.
const WRITE: usize = 4 << 20;
/// Bytes of each buffer the ring's streams write from and read into, cycled through: more than
/// the caches hold between them, as a collective's buffers are.
const RING_BUF: usize = 16 << 20;

/// The figures, and how they were taken.
pub struct TcpRef {
    /// Decimal GB/s of one stream moving `stream_bytes`.
    pub stream_gbps: f64,
    pub stream_bytes: usize,
    /// Median round trip of `rtt_bytes` each way, in microseconds, over `rtt_iters` trips.
    pub rtt_us: f64,
    pub rtt_bytes: usize,
    pub rtt_iters: usize,
    /// Decimal GB/s of each of `ring_links` streams moving `ring_bytes` at once (none with
    /// fewer than 2 links).
    pub ring_gbps: Option<f64>,
    pub ring_links: usize,
    pub ring_bytes: usize,
}

impl TcpRef {
    /// The header lines.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "# tcp-ref: one loopback TCP stream, {} MiB in {} MiB writes: {:.2} GB/s (the ceiling for busbw over TCP)",
                self.stream_bytes >> 20,
                WRITE >> 20,
                self.stream_gbps
            ),
            format!(
                "# tcp-ref: round trip of {} B each way over loopback TCP (TCP_NODELAY), median of {}: {:.1} us",
                self.rtt_bytes, self.rtt_iters, self.rtt_us
            ),
        ];
        if let Some((allowed, online)) = cpus().filter(|(a, o)| a < o) {
            lines.push(format!(
                "# tcp-ref: this process may run on {allowed} of the {online} CPUs (bound by its launcher; mpirun \
                 binds unless --bind-to none): the threads above shared them, so the figures are not the machine's"
            ));
        }
        if let Some(gbps) = self.ring_gbps {
            lines.push(format!(
                "# tcp-ref: {} loopback TCP streams at once (a ring of {} ranks' links), {} MiB each: {:.2} GB/s a \
                 stream (what busbw over TCP can reach here with every link busy and nothing reduced)",
                self.ring_links,
                self.ring_links,
                self.ring_bytes >> 20,
                gbps
            ));
        }
        lines
    }
}

/// The CPUs this process may run on (its affinity) and the CPUs online, where the system says
/// (Linux: `/sys/devices/system/cpu/online`, a list such as `0-3,6`).
fn cpus() -> Option<(usize, usize)> {
    let allowed = std::thread::available_parallelism().ok()?.get();
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    Some((allowed, count_cpus(&list)?))
}

/// How many CPUs a kernel CPU list (`0-3,6`) names; `None` if it is not one.
fn count_cpus(list: &str) -> Option<usize> {
    list.trim().split(',').try_fold(0, |n, part| {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        Some(n + b.checked_sub(a)? + 1)
    })
}

/// Measures the figures; the ring's with `ranks` links (none below 2 ranks).
///
/// # Errors
/// Any socket error (this tool's own connections on 127.0.0.1).
pub fn measure(rtt_bytes: usize, ranks: usize) -> io::Result<TcpRef> {
    let stream_bytes = 1 << 30;
    let stream_gbps = stream(stream_bytes)?;
    let rtt_iters = 2000;
    let rtt_us = round_trip(rtt_bytes, rtt_iters)?;
    let ring_bytes = 256 << 20;
    let ring_gbps = if ranks >= 2 { Some(streams(ranks, ring_bytes)?) } else { None };
    Ok(TcpRef { stream_gbps, stream_bytes, rtt_us, rtt_bytes, rtt_iters, ring_gbps, ring_links: ranks, ring_bytes })
}

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let a = TcpStream::connect(l.local_addr()?)?;
    let (b, _) = l.accept()?;
    a.set_nodelay(true)?;
    b.set_nodelay(true)?;
    Ok((a, b))
}

/// GB/s of `bytes` written in [`WRITE`]-byte writes and read in as large reads by another
/// thread, after as many bytes of warm-up; timed from the first write to the reader's
/// one-byte answer that it has everything.
fn stream(bytes: usize) -> io::Result<f64> {
    let (mut tx, mut rx) = pair()?;
    let reader = std::thread::spawn(move || -> io::Result<()> {
        let mut buf = vec![0u8; WRITE];
        for _ in 0..2 {
            let mut left = bytes;
            while left > 0 {
                let n = rx.read(&mut buf[..left.min(WRITE)])?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                left -= n;
            }
            rx.write_all(&[1])?;
        }
        Ok(())
    });
    let buf = vec![7u8; WRITE];
    let mut ack = [0u8; 1];
    let mut secs = 0.0;
    for _ in 0..2 {
        let t0 = Instant::now();
        let mut left = bytes;
        while left > 0 {
            let n = left.min(WRITE);
            tx.write_all(&buf[..n])?;
            left -= n;
        }
        tx.read_exact(&mut ack)?;
        secs = t0.elapsed().as_secs_f64();
    }
    let _ = tx.shutdown(Shutdown::Both);
    reader.join().map_err(|_| io::Error::other("the reader thread panicked"))??;
    Ok(bytes as f64 / 1e9 / secs)
}

/// GB/s of each of `links` connections moving `bytes` at once, each written by one thread and
/// read by another through [`RING_BUF`]-byte buffers (in [`WRITE`]-byte calls), after a round
/// of warm-up; timed from a common start (every thread has its buffer) until every reader has
/// everything. A thread's error ends its round early and is returned.
fn streams(links: usize, bytes: usize) -> io::Result<f64> {
    let mut pairs = (0..links).map(|_| pair()).collect::<io::Result<Vec<_>>>()?;
    let mut secs = 0.0;
    for _round in 0..2 {
        let start = Arc::new(Barrier::new(2 * links + 1));
        let mut writers = Vec::with_capacity(links);
        let mut readers = Vec::with_capacity(links);
        for (mut tx, mut rx) in pairs.drain(..) {
            let go = start.clone();
            writers.push(std::thread::spawn(move || -> io::Result<TcpStream> {
                let buf = vec![7u8; RING_BUF];
                go.wait();
                let mut sent = 0;
                while sent < bytes {
                    let at = sent % RING_BUF;
                    let n = (bytes - sent).min(WRITE).min(RING_BUF - at);
                    tx.write_all(&buf[at..at + n])?;
                    sent += n;
                }
                Ok(tx)
            }));
            let go = start.clone();
            readers.push(std::thread::spawn(move || -> io::Result<TcpStream> {
                let mut buf = vec![0u8; RING_BUF];
                go.wait();
                let mut got = 0;
                while got < bytes {
                    let at = got % RING_BUF;
                    let n = rx.read(&mut buf[at..at + (bytes - got).min(WRITE).min(RING_BUF - at)])?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    got += n;
                }
                Ok(rx)
            }));
        }
        start.wait();
        let t0 = Instant::now();
        let joined = |t: std::thread::JoinHandle<io::Result<TcpStream>>| {
            t.join().map_err(|_| io::Error::other("a stream thread panicked"))?
        };
        let rxs = readers.into_iter().map(joined).collect::<Vec<_>>();
        secs = t0.elapsed().as_secs_f64();
        let txs = writers.into_iter().map(joined).collect::<Vec<_>>();
        for (tx, rx) in txs.into_iter().zip(rxs) {
            pairs.push((tx?, rx?));
        }
    }
    Ok(bytes as f64 / 1e9 / secs)
}

/// Median microseconds of `iters` ping-pongs of `size` bytes, after `iters / 10` untimed.
fn round_trip(size: usize, iters: usize) -> io::Result<f64> {
    let (mut a, mut b) = pair()?;
    let size = size.max(1);
    let warm = iters / 10;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        let mut buf = vec![0u8; size];
        for _ in 0..warm + iters {
            b.read_exact(&mut buf)?;
            b.write_all(&buf)?;
        }
        Ok(())
    });
    let mut buf = vec![3u8; size];
    let mut times = Vec::with_capacity(iters);
    for i in 0..warm + iters {
        let t0 = Instant::now();
        a.write_all(&buf)?;
        a.read_exact(&mut buf)?;
        if i >= warm {
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    echo.join().map_err(|_| io::Error::other("the echo thread panicked"))??;
    times.sort_by(f64::total_cmp);
    Ok(times.get(times.len() / 2).copied().unwrap_or(0.0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn cpu_lists_count() {
        assert_eq!(super::count_cpus("0-1\n"), Some(2));
        assert_eq!(super::count_cpus("0-3,6,8-9"), Some(7));
        assert_eq!(super::count_cpus("5"), Some(1));
        assert_eq!(super::count_cpus("3-1"), None);
        assert_eq!(super::count_cpus("x"), None);
    }

    #[test]
    fn round_trip_and_stream_measure() {
        let rtt = super::round_trip(64, 20).unwrap();
        assert!(rtt > 0.0);
        assert!(super::stream(8 << 20).unwrap() > 0.0);
        assert!(super::streams(3, 8 << 20).unwrap() > 0.0);
    }
}
