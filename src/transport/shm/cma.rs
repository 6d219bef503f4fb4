//! Single-copy reads of a peer process's memory (Linux cross-memory attach,
//! `process_vm_readv`): the one place the shared-memory transport reads another process's
//! address space, and the handshake's test of whether it may.
//!
//! A large message is not copied into the ring: the sender puts a record naming its lent
//! memory there, and the receiver copies the bytes straight out of the sender's process —
//! into the destination when the step is a plain copy — and tells the sender it is done
//! (only then is the lend released). `RUCCL_SHM_CMA=0` keeps every pair on ring copies; so
//! does a pair whose test read fails (another user, a seccomp filter, Yama's `ptrace_scope`,
//! a kernel without it). The kernel's copy runs at about 0.7 of `memcpy` where measured, so
//! single copy wins when cores are scarce for the ring's two copies, and can lose to them
//! where a core sits idle (PERFORMANCE.md, session 10).

use std::io;

/// Messages at least this large travel by single copy where the pair can; smaller ones are
/// copied into the ring, where a message read in place costs no system call. Measured
/// (PERFORMANCE.md, session 12: 2 and 4 processes, all_gather, broadcast, all_to_all,
/// single copy against ring copies, alternated): single copy was faster in 55% of the
/// pairings at 32 KiB messages, 58% at 64 KiB, 68% at 128 KiB and 80% at 256 KiB.
pub(crate) const CMA_MIN: usize = 128 << 10;

/// [`CMA_MIN`] for the gathering and scattering ops (all_gather, all_to_all, gather,
/// scatter: each message goes from its sender straight to its receiver's output, and nobody
/// reads it on), with several peers on the host: from 64 KiB. Once blocks started on a cache
/// line (`mem::HeapWords`), single copy won there with 3 peers too. Measured (PERFORMANCE.md,
/// session 36; 4 processes, builds with 128 and 64 KiB alternated, us): all_gather of 256 KiB
/// (64 KiB blocks) 63.6-86.5 -> 53.7-64.7 in 6 rounds (OpenMPI 65.8), all_to_all of 256 KiB
/// 60-81 -> 39-58, gather of 256 KiB 21.2-21.4 -> 16.8-18.0, scatter of 256 KiB 17.8-23.5 ->
/// 13.0-19.1. The others keep [`CMA_MIN`]: all_reduce of 256 KiB was slower lent (99-124 ->
/// 116-133), reduce_scatter no faster, and a 64 KiB broadcast, whose chain hands each message
/// on, slower (median ~18 -> ~26 in 6 rounds).
pub(crate) const CMA_MIN_COPY: usize = 64 << 10;

/// [`CMA_MIN`] for a rank whose only peer on this host is the one process it sends to: from
/// 32 KiB. Nobody else reads the sender's memory meanwhile, and the receiver's one copy saves
/// the ring's second. Measured (PERFORMANCE.md, session 34; 2 processes, old and new builds
/// alternated, 3 rounds, 64 / 128 KiB): all_gather 5.7-6.3 / 10.1-12.4 us by ring copies
/// against 4.0 (one round 8.8) / 5.7-6.1 by single copy, all_to_all 6.2-6.3 / 10.8-12.1
/// against 3.9-4.3 / 5.7-5.8, gather 3.7-3.9 / 7.1-7.2 against 3.3-3.5 / 4.9-5.1,
/// broadcast of 64 KiB 6.0-6.8 against 4.2-4.6, and nothing slower. With 3 peers (4
/// processes) the same threshold made all_gather of 64-256 KiB 1.3-1.5 times slower: a rank
/// then makes a system call per peer and message, and its peers' reads of its memory contend.
pub(crate) const CMA_MIN_ONE_PEER: usize = 32 << 10;

/// A value every process holds at a known address: the peer test-reads it at the handshake.
pub(crate) static PROBE: u64 = u64::from_le_bytes(*b"RUCCLCMA");

/// The address of [`PROBE`] in this process.
pub(crate) fn probe_addr() -> u64 {
    std::ptr::addr_of!(PROBE) as u64
}

/// Whether `RUCCL_SHM_CMA` allows single-copy reads (unless it says no: `0`, `false`, `no`, `off`).
pub(crate) fn allowed() -> bool {
    crate::config::env_flag("RUCCL_SHM_CMA") != Some(false)
}

/// Whether this process may read process `pid`'s memory: both sides allow it, and a test read
/// of the peer's [`PROBE`] at `addr` gives the value it must hold.
pub(crate) fn can_read(allowed: bool, peer_allows: bool, pid: u32, addr: u64) -> bool {
    if !allowed || !peer_allows || addr == 0 {
        return false;
    }
    let mut b = [0u8; 8];
    read(pid, addr, &mut b).is_ok() && u64::from_le_bytes(b) == PROBE
}

/// Copies `dst.len()` bytes at `addr` in process `pid` into `dst`.
///
/// # Errors
/// What the kernel says (`EPERM`, `ESRCH` for a process that is gone, `EFAULT` for memory it
/// no longer has), or `UnexpectedEof` when it reads nothing.
pub(crate) fn read(pid: u32, addr: u64, dst: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < dst.len() {
        let local = libc::iovec { iov_base: dst[done..].as_mut_ptr().cast(), iov_len: dst.len() - done };
        let remote = libc::iovec { iov_base: (addr as usize + done) as *mut libc::c_void, iov_len: dst.len() - done };
        // SAFETY: `local` covers `dst[done..]`, memory this function holds exclusively (a
        // `&mut`) for the call; the kernel writes at most `iov_len` bytes there. `remote`
        // names memory of another process: the kernel checks it (a bad address is an error,
        // never a write or a fault here).
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer's memory ended")),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_capability_needs_both_sides_and_a_good_test_read() {
        let me = std::process::id();
        assert!(can_read(true, true, me, probe_addr()));
        assert!(!can_read(false, true, me, probe_addr()), "RUCCL_SHM_CMA=0 here");
        assert!(!can_read(true, false, me, probe_addr()), "RUCCL_SHM_CMA=0 there");
        assert!(!can_read(true, true, me, 0), "no address advertised");
        // An address that does not hold the probe's value, and one that is not mapped.
        let other = 7u64;
        assert!(!can_read(true, true, me, std::ptr::addr_of!(other) as u64));
        assert!(!can_read(true, true, me, 8));
        // A process that does not exist (pid_max is at most 2^22).
        assert!(!can_read(true, true, u32::MAX >> 1, probe_addr()));
    }

    #[test]
    fn reads_large_ranges_and_reports_bad_addresses() {
        let src: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        read(std::process::id(), src.as_ptr() as u64, &mut dst).unwrap();
        assert_eq!(src, dst);
        assert!(read(std::process::id(), 8, &mut dst[..16]).is_err());
    }

    /// What a receiver sees of a sender killed mid-collective (`shm_lend` maps it to
    /// `PeerLost`): `ESRCH`, both while the process is a zombie (no memory left) and once it
    /// is reaped.
    #[test]
    fn a_process_that_has_exited_reads_as_no_such_process() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        child.kill().unwrap();
        // Not reaped yet: a zombie once the kernel has torn it down (soon after the signal).
        let mut b = [0u8; 8];
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let zombie = loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.split(") ").nth(1).is_some_and(|s| s.starts_with('Z')) || std::time::Instant::now() > until {
                break read(pid, 8, &mut b).unwrap_err();
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(zombie.raw_os_error(), Some(libc::ESRCH), "{zombie}");
        child.wait().unwrap();
        let reaped = read(pid, 8, &mut b).unwrap_err();
        assert_eq!(reaped.raw_os_error(), Some(libc::ESRCH), "{reaped}");
    }
}
