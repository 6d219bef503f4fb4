//! The exchange slots of ranks that are processes of one host, in one segment every local
//! rank maps: [`Slots`] over the segment's lines instead of the process's own memory.
//!
//! Like a pair's segment ([`segment`](super::segment)), it is a nameless `memfd` (nothing is
//! left behind by a crash), made by one rank and opened by the others through
//! `/proc/<pid>/fd/<fd>`. Layout: one control page (a magic word and the world size, which
//! an opener checks along with the size), then [`lines_for`]`(world)` lines of slots. No
//! pointers, only atomics; what peers write there is not trusted ([`Slots`] clamps it).
//! Whether a communicator uses it is agreed at setup ([`slot_agree`](super::slot_agree)).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::segment::{CTRL, Mapping, map, memfd, open_fd};
use crate::transport::slots::{LINES_PER_RANK, Line, Lines, Slots, lines_for};

/// The name a slot segment's mappings show in `/proc/<pid>/maps` (`memfd:ruccl-slots`).
pub(crate) const SEGMENT_NAME: &std::ffi::CStr = c"ruccl-slots";

/// Identifies a slot segment (a pair's segment has another).
const MAGIC: u64 = u64::from_le_bytes(*b"RUCCLSLT");
const MAGIC_AT: usize = 2048;
const WORLD_AT: usize = 2056;

/// Bytes of a slot segment for `world` ranks (`None` when that overflows).
fn len_for(world: usize) -> Option<usize> {
    world.checked_mul(LINES_PER_RANK)?.checked_mul(std::mem::size_of::<Line>())?.checked_add(CTRL)
}

/// The slots over `map`'s lines, for `world` ranks.
fn lines(map: Arc<Mapping>, world: usize) -> io::Result<Slots> {
    let n = lines_for(world);
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "not a ruCCL slot segment (size)");
    if len_for(world) != Some(map.len()) {
        return Err(bad());
    }
    let at = map.addr_of(CTRL) as *const Line;
    // SAFETY: the `n` lines from `at` lie inside `map` (its length was checked above),
    // 128-aligned (the mapping is page-aligned and `at` a page into it), mapped while the
    // `Arc` that `Lines` keeps lives. A `Line` is atomics only: any bits are a valid value
    // (fresh, all zero), and every process reads and writes them atomically only.
    let lines = unsafe { Lines::mapped(at, n, map) };
    Slots::over(world, lines).ok_or_else(bad)
}

/// Creates the slot segment of `world` ranks: its slots, and the descriptor the other
/// local ranks [`open`] (kept only until they have).
pub(crate) fn create(world: usize) -> io::Result<(Slots, OwnedFd)> {
    let len = len_for(world).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "world too large"))?;
    let fd = memfd(len, SEGMENT_NAME)?;
    let m = Arc::new(map(&fd, len, 0)?);
    m.u64_at(MAGIC_AT).store(MAGIC, Ordering::SeqCst);
    m.u64_at(WORLD_AT).store(world as u64, Ordering::SeqCst);
    Ok((lines(m, world)?, fd))
}

/// Maps the slot segment of `world` ranks that process `pid` created as descriptor `fd`;
/// an `InvalidData` error when it is not one (another size, magic or world).
pub(crate) fn open(pid: u32, fd: i32, world: usize) -> io::Result<Slots> {
    let f = open_fd(pid, fd)?;
    let len = usize::try_from(f.metadata()?.len()).unwrap_or(usize::MAX);
    if len_for(world) != Some(len) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a ruCCL slot segment for this world (size)"));
    }
    let m = Arc::new(map(&f, len, 0)?);
    if m.u64_at(MAGIC_AT).load(Ordering::SeqCst) != MAGIC || m.u64_at(WORLD_AT).load(Ordering::SeqCst) != world as u64 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a ruCCL slot segment for this world (magic)"));
    }
    lines(m, world)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn two_mappings_of_one_slot_segment_exchange() {
        let world = 2;
        let (a, fd) = create(world).unwrap();
        let b = open(std::process::id(), fd.as_raw_fd(), world).unwrap();
        drop(fd); // both mapped: the memory lives on in the mappings alone
        let fp = [7; crate::transport::slots::FP_WORDS];
        let rounds = 200u64;
        let t: Vec<_> = [a, b]
            .into_iter()
            .enumerate()
            .map(|(me, s)| {
                std::thread::spawn(move || {
                    let peer = 1 - me;
                    for seq in 0..rounds {
                        while s.busy(me, seq).is_some() {
                            std::thread::yield_now();
                        }
                        s.publish(me, seq, &fp, &(seq * 10 + me as u64).to_le_bytes());
                        while !s.arrived(peer, seq) {
                            std::thread::yield_now();
                        }
                        let mut out = [0u8; 8];
                        assert!(s.agrees(peer, seq, &fp) && s.read(peer, seq, 0, &mut out));
                        assert_eq!(u64::from_le_bytes(out), seq * 10 + peer as u64);
                        s.finish(me, seq);
                    }
                })
            })
            .collect();
        for t in t {
            t.join().unwrap();
        }
    }

    #[test]
    fn an_opener_rejects_other_segments() {
        let (_s, fd) = create(3).unwrap();
        let me = std::process::id();
        let e = open(me, fd.as_raw_fd(), 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        // A pair's segment of the same size: the magic differs.
        let (_m, pair) = Mapping::create((len_for(2).unwrap() - CTRL) / 2).unwrap();
        let e = open(me, pair.as_raw_fd(), 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        assert!(len_for(usize::MAX / 2).is_none());
    }
}
