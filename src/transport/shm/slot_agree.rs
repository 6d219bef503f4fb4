//! The setup agreement on a host's exchange slots ([`slot_segment`](super::slot_segment)):
//! whether the ranks of a communicator that are processes of one host run small ops through
//! one shared segment of slots instead of messages. All or none: a rank that exchanged while
//! a peer sent messages would wait for it until the deadline, so the slots are used only when
//! *every* rank says yes.
//!
//! Over the pair connections, right after [`negotiate`](super::negotiate) (every process
//! runs it, whatever it wants, so the connections stay in step), in four rounds that each
//! write before they read, so processes never wait for each other in a cycle:
//! 1. rank 0 creates the segment (when it wants slots and shares memory with every peer)
//!    and offers `(fd, pid)` to every peer (fd -1: no segment);
//! 2. every other rank maps it and answers one byte: yes when it wants slots, shares memory
//!    with every peer and mapped the segment;
//! 3. rank 0 sends every peer the verdict (yes only when every answer and its own were yes),
//!    then closes its descriptor: from now on only the mappings keep the segment;
//! 4. every other rank reads the verdict.
//!
//! A rank wants slots unless `RUCCL_SHM_SLOTS=0` or shared memory is disabled, and only
//! when every device of its process keeps its memory on the host (the exchange reads and
//! writes host bytes). Any no (a pair on TCP, `RUCCL_SHM_DISABLE=1` or `RUCCL_SHM_SLOTS=0` on
//! one process, a process on a GPU device, `/proc` refused, another host) keeps every rank on
//! messages.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{Pair, Rows, io_err, slot_segment};
use crate::error::Result;
use crate::transport::slots::Slots;
use crate::types::Rank;

/// Whether this process lets processes of one host exchange small ops through shared slots:
/// yes unless `RUCCL_SHM_SLOTS=0` (or shared memory is disabled).
pub(crate) fn wanted() -> bool {
    crate::config::env_flag("RUCCL_SHM_SLOTS") != Some(false) && !super::disabled()
}

/// Runs the agreement over `rows` (`rows[me][peer]`, the pair connections of this process's
/// ranks; `pairs[me][peer]`, the pair segments [`negotiate`](super::negotiate) set up): the
/// host's slots when every rank agreed, else `None`. The same answer in every process.
/// `host_memory`: every device of this process's ranks keeps its memory on the host (the
/// exchange reads and writes host bytes); a process whose devices do not says no.
///
/// # Errors
/// `Io` when a connection breaks or stays silent past `deadline`, naming the rank and peer.
pub(crate) fn agree(
    rows: &mut Rows,
    pairs: &[Vec<Option<Pair>>],
    host_memory: bool,
    deadline: Instant,
) -> Result<Option<Slots>> {
    let want = host_memory && wanted();
    let world = rows.len();
    // Whether rank `r` (of this process) shares memory with every peer and wants slots: a
    // segment with each peer of another process; those of this one share its memory.
    let here: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let ok = |r: Rank| {
        want && (0..world)
            .all(|p| p == r || here[p] || pairs.get(r).and_then(|row| row.get(p)).is_some_and(Option::is_some))
    };
    agree_with(rows, &ok, deadline)
}

/// [`agree`], with `ok(r)`: whether this process's rank `r` says yes (before mapping).
fn agree_with(rows: &mut Rows, ok: &dyn Fn(Rank) -> bool, deadline: Instant) -> Result<Option<Slots>> {
    let world = rows.len();
    if world < 2 {
        return Ok(None);
    }
    let here: Vec<bool> = rows.iter().map(Option::is_some).collect();
    let here = |r: Rank| here[r];
    let others: Vec<Rank> = (1..world).filter(|&r| here(r)).collect();
    // 1. Rank 0 offers its segment.
    let mut mine = None;
    let mut made = None;
    if here(0) {
        if ok(0) {
            made = slot_segment::create(world).ok();
        }
        let fd = made.as_ref().map_or(-1, |(_, fd)| fd.as_raw_fd());
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&fd.to_le_bytes());
        b[4..8].copy_from_slice(&std::process::id().to_le_bytes());
        for p in 1..world {
            conn(rows, 0, p, deadline)?.write_all(&b).map_err(|e| io_err(0, p, "slot offer", e))?;
        }
    }
    // 2. The other ranks map it (once per process) and answer.
    let mut mapped = made.as_ref().is_some();
    for &r in &others {
        let mut b = [0u8; 8];
        conn(rows, r, 0, deadline)?.read_exact(&mut b).map_err(|e| io_err(r, 0, "reading the slot offer", e))?;
        let fd = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let pid = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        if ok(r) && fd >= 0 && !mapped {
            mine = slot_segment::open(pid, fd, world).ok();
            mapped = mine.is_some();
        }
        let yes = ok(r) && fd >= 0 && mapped;
        conn(rows, r, 0, deadline)?.write_all(&[u8::from(yes)]).map_err(|e| io_err(r, 0, "slot answer", e))?;
    }
    // 3. Rank 0 hears every answer and tells the verdict.
    let mut verdict = false;
    if here(0) {
        let mut all = made.is_some();
        for p in 1..world {
            let mut a = [0u8; 1];
            conn(rows, 0, p, deadline)?.read_exact(&mut a).map_err(|e| io_err(0, p, "reading a slot answer", e))?;
            all &= a[0] == 1;
        }
        for p in 1..world {
            conn(rows, 0, p, deadline)?.write_all(&[u8::from(all)]).map_err(|e| io_err(0, p, "slot verdict", e))?;
        }
        verdict = all;
        // The descriptor closes here: every rank that said yes has mapped the segment.
        mine = made.map(|(s, _fd)| s);
    }
    // 4. The other ranks hear it.
    for &r in &others {
        let mut v = [0u8; 1];
        conn(rows, r, 0, deadline)?.read_exact(&mut v).map_err(|e| io_err(r, 0, "reading the slot verdict", e))?;
        verdict = v[0] == 1;
    }
    for (me, row) in rows.iter_mut().enumerate() {
        for (peer, s) in row.iter_mut().flat_map(|r| r.iter_mut().enumerate()) {
            if let Some(s) = s {
                s.set_read_timeout(None).map_err(|e| io_err(me, peer, "configuring", e))?;
            }
        }
    }
    Ok(mine.filter(|_| verdict))
}

/// The connection of `me` to `peer`, reads bounded by `deadline`.
fn conn(rows: &mut Rows, me: Rank, peer: Rank, deadline: Instant) -> Result<&mut TcpStream> {
    let s = rows.get_mut(me).and_then(Option::as_mut).and_then(|r| r.get_mut(peer)).and_then(Option::as_mut);
    let s = s.ok_or_else(|| {
        io_err(me, peer, "slots", std::io::Error::new(std::io::ErrorKind::NotConnected, "no connection"))
    })?;
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    s.set_read_timeout(Some(left)).map_err(|e| io_err(me, peer, "configuring", e))?;
    Ok(s)
}

#[cfg(test)]
#[path = "slot_agree_tests.rs"]
mod tests;
