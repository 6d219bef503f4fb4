//! `--tcp-ref`: what loopback TCP itself does on this machine, measured in the same run as
//! the table: one connection's bandwidth (large writes, one stream: the ceiling a busbw over
//! TCP is read against) and one round trip of a small message with `TCP_NODELAY` (the floor
//! of a small collective's latency). Plain `std::net` between two threads of this process.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::Instant;

/// Bytes each write of the stream test carries.
const WRITE: usize = 4 << 20;

/// The figures, and how they were taken.
pub struct TcpRef {
    /// Decimal GB/s of one stream moving `stream_bytes`.
    pub stream_gbps: f64,
    pub stream_bytes: usize,
    /// Median round trip of `rtt_bytes` each way, in microseconds, over `rtt_iters` trips.
    pub rtt_us: f64,
    pub rtt_bytes: usize,
    pub rtt_iters: usize,
}

impl TcpRef {
    /// The header lines.
    pub fn lines(&self) -> [String; 2] {
        [
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
        ]
    }
}

/// Measures both figures.
///
/// # Errors
/// Any socket error (this tool's own connection on 127.0.0.1).
pub fn measure(rtt_bytes: usize) -> io::Result<TcpRef> {
    let stream_bytes = 1 << 30;
    let stream_gbps = stream(stream_bytes)?;
    let rtt_iters = 2000;
    let rtt_us = round_trip(rtt_bytes, rtt_iters)?;
    Ok(TcpRef { stream_gbps, stream_bytes, rtt_us, rtt_bytes, rtt_iters })
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
    fn round_trip_and_stream_measure() {
        let rtt = super::round_trip(64, 20).unwrap();
        assert!(rtt > 0.0);
        assert!(super::stream(8 << 20).unwrap() > 0.0);
    }
}
