//! The host memory's tests: blocks inline and on the heap, zeroed and aligned allocation, the
//! guards' refusals (a write overlapping any live access, a read overlapping a live write),
//! the lock-free single guard's hand-over to the listed guards, clones on several threads, and
//! unregistered writes under a `Sole` proof (only for the one handle, held exclusively).

use super::*;

#[test]
fn zeroed_aligned_and_overlap() {
    let m = HostMem::zeroed(13).unwrap();
    assert_eq!(m.len(), 13);
    assert_eq!(m.base() as usize % 8, 0);
    assert!(m.read(0, 13).unwrap().iter().all(|&b| b == 0));
    m.write(3, 2).unwrap().copy_from_slice(&[7, 8]);
    assert_eq!(&*m.read(2, 4).unwrap(), &[0, 7, 8, 0]);
    let a = HostRegion { mem: m.clone(), off: 0, len: 4 };
    let b = HostRegion { mem: m.clone(), off: 4, len: 4 };
    let c = HostRegion { mem: m, off: 3, len: 2 };
    assert!(!a.overlaps(&b));
    assert!(a.overlaps(&c) && b.overlaps(&c));
    assert!(!a.overlaps(&HostRegion { mem: HostMem::zeroed(8).unwrap(), off: 0, len: 4 }));
    assert!(HostMem::zeroed(0).unwrap().is_empty());
}

#[test]
fn heap_blocks_are_cache_line_aligned_and_freed_with_their_layout() {
    // Blocks past the inline limit, of sizes the allocator would otherwise place at 16 bytes
    // past a page or anywhere in its heap; dropped in another order than allocated (Miri
    // checks each free against its allocation's layout).
    let sizes: &[usize] = if cfg!(miri) { &[65, 4096, 5000] } else { &[65, 4096, 5000, 128 << 10, 3 << 20] };
    let blocks: Vec<HostMem> = sizes.iter().map(|&n| HostMem::zeroed(n).unwrap()).collect();
    for m in &blocks {
        assert_eq!(m.base() as usize % HEAP_ALIGN, 0, "a {}-byte block", m.len());
        assert!(m.read(0, m.len()).unwrap().iter().all(|&b| b == 0));
    }
    let mut blocks = blocks;
    blocks.swap(0, 2);
    drop(blocks);
}

#[test]
fn inline_and_heap_blocks_hold_every_byte() {
    // Both sides of the inline limit, and an odd length on each.
    for len in [1, 63, 64, 65, 200] {
        let m = HostMem::zeroed(len).unwrap();
        assert!(m.read(0, len).unwrap().iter().all(|&b| b == 0));
        let bytes: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5a).collect();
        m.write(0, len).unwrap().copy_from_slice(&bytes);
        assert_eq!(&*m.clone().read(0, len).unwrap(), &bytes[..]);
        assert_eq!(&*m.read(len - 1, 1).unwrap(), &bytes[len - 1..]);
        assert!(m.read(len, 1).is_err(), "past the end of a {len}-byte block");
    }
}

#[test]
fn guards_refuse_overlapping_access_and_release_on_drop() {
    let m = HostMem::zeroed(64).unwrap();
    let clone = m.clone();
    let r1 = m.read(0, 16).unwrap();
    let r2 = clone.read(8, 16).unwrap(); // reads share
    let e = clone.write(15, 1).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Device);
    // The caller caused it: the advice says what to change, not to check a driver.
    assert!(
        e.to_string().contains("What to do: a tensor an op reads or writes") && !e.to_string().contains("driver"),
        "{e}"
    );
    let w = clone.write(24, 8).unwrap(); // disjoint
    assert!(m.read(30, 4).is_err());
    assert!(m.write(0, 1).is_err());
    drop((r1, r2, w));
    assert!(m.write(0, 64).is_ok());
    assert!(m.read(60, 5).is_err(), "out of bounds");
    assert!(m.read(usize::MAX, 2).is_err(), "overflow");
    assert!(m.write(64, 0).is_ok(), "empty range at the end");
}

#[test]
fn clones_on_two_threads_never_race() {
    let m = HostMem::zeroed(4096).unwrap();
    let (a, b) = (m.clone(), m);
    let writer = |mem: HostMem, v: u8| {
        std::thread::spawn(move || {
            let mut ok = 0;
            for _ in 0..50 {
                if let Ok(mut g) = mem.write(0, 4096) {
                    g.fill(v);
                    assert!(g.iter().all(|&x| x == v), "another thread wrote under a write guard");
                    ok += 1;
                }
            }
            ok
        })
    };
    let (t1, t2) = (writer(a, 1), writer(b, 2));
    assert!(t1.join().unwrap() + t2.join().unwrap() > 0);
}

#[test]
fn solo_and_listed_guards_hand_over() {
    let m = HostMem::zeroed(64).unwrap();
    // One guard: the solo word; a second moves both into the list; releasing them in
    // either order leaves the block free for a whole-block write.
    for first_out in [true, false] {
        let a = m.read(0, 8).unwrap();
        assert!(m.write(4, 8).is_err(), "conflicts with the solo guard");
        let b = m.read(4, 8).unwrap();
        assert!(m.write(0, 1).is_err() && m.write(11, 1).is_err(), "conflicts with a listed guard");
        let c = m.write(12, 4).unwrap();
        if first_out {
            drop(a);
            assert!(m.write(0, 4).is_ok());
            assert!(m.write(4, 1).is_err());
            drop((b, c));
        } else {
            drop((c, b));
            assert!(m.write(0, 1).is_err(), "the first guard is still live");
            drop(a);
        }
        assert!(m.write(0, 64).is_ok());
    }
    // Two identical reads: dropping one leaves the other in force.
    let (r1, r2) = (m.read(8, 8).unwrap(), m.read(8, 8).unwrap());
    drop(r1);
    assert!(m.write(8, 1).is_err());
    drop(r2);
    assert!(m.write(8, 8).is_ok());
    // Words round-trip at the limits of the solo encoding.
    for b in [Borrow { off: 0, len: 1, write: false }, Borrow { off: (1 << 31) - 1, len: (1 << 31) - 1, write: true }] {
        assert_eq!(Borrow::decode(b.encode().unwrap()), b);
    }
    assert_eq!(Borrow { off: 1 << 31, len: 1, write: false }.encode(), None);
    assert_eq!(Borrow { off: 0, len: 1 << 31, write: true }.encode(), None);
}

#[test]
fn solo_and_listed_guards_on_several_threads_never_race() {
    // Two threads writing disjoint halves and one reading the whole block: the solo word
    // and the list change hands under contention.
    let m = HostMem::zeroed(64).unwrap();
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let writer = |mem: HostMem, off: usize, v: u8| {
        std::thread::spawn(move || {
            for _ in 0..rounds {
                if let Ok(mut g) = mem.write(off, 32) {
                    g.fill(v);
                    assert!(g.iter().all(|&x| x == v), "another thread wrote under a write guard");
                }
            }
        })
    };
    let reader = {
        let mem = m.clone();
        std::thread::spawn(move || {
            for _ in 0..rounds {
                if let Ok(g) = mem.read(0, 64) {
                    let first = g[0];
                    assert!(g[..32].iter().all(|&x| x == first), "read a half-written block");
                }
            }
        })
    };
    let (t1, t2) = (writer(m.clone(), 0, 1), writer(m.clone(), 32, 2));
    for t in [t1, t2, reader] {
        t.join().unwrap();
    }
    assert!(m.write(0, 64).is_ok(), "every guard released");
}

#[test]
fn impossible_sizes_are_errors_not_aborts() {
    assert!(HostMem::zeroed(usize::MAX).is_err());
    #[cfg(not(miri))]
    assert!(HostMem::zeroed(1 << 50).is_err());
}

#[test]
fn a_sole_write_registers_nothing_and_only_for_the_one_handle() {
    let mut m = HostMem::zeroed(16).unwrap();
    let other = HostMem::zeroed(16).unwrap();
    let (m_ref, sole) = lend_sole(&mut m, |m| m);
    {
        // The only handle, held exclusively: nothing registered.
        let mut w = m_ref.write_sole(sole, 0, 8).unwrap();
        w.copy_from_slice(&[1; 8]);
        assert_eq!(m_ref.block.solo.load(Ordering::Relaxed), EMPTY);
    }
    // The proof names another block: the write registers, as `write` does.
    let w = other.write_sole(sole, 0, 8).unwrap();
    assert_ne!(other.block.solo.load(Ordering::Relaxed), EMPTY);
    drop(w);
    // A live guard on the block: registered, and a conflict is refused as ever.
    let r = m_ref.read(0, 4).unwrap();
    assert!(m_ref.write_sole(sole, 2, 4).is_err());
    drop(r);
    // Out of bounds: refused.
    assert!(m_ref.write_sole(sole, 12, 8).is_err());
    assert_eq!(&*m_ref.read(0, 8).unwrap(), &[1; 8]);
}

#[test]
fn a_sole_write_registers_when_another_handle_exists() {
    let mut m = HostMem::zeroed(16).unwrap();
    let clone = m.clone();
    let (m_ref, sole) = lend_sole(&mut m, |m| m);
    // A second handle can read or write the block meanwhile: the proof does not hold, and
    // the guards keep the accesses apart.
    let w = m_ref.write_sole(sole, 0, 8).unwrap();
    assert!(clone.read(4, 4).is_err(), "a read overlapping the write must be refused");
    assert!(clone.read(8, 4).is_ok());
    drop(w);
    assert!(clone.read(4, 4).is_ok());
    // Once the other handle is gone (on another thread, after its accesses), the write
    // registers nothing again.
    std::thread::spawn(move || {
        clone.write(0, 16).unwrap().fill(3);
    })
    .join()
    .unwrap();
    let w = m_ref.write_sole(sole, 0, 16).unwrap();
    assert_eq!(&*w, &[3; 16]);
    assert_eq!(m_ref.block.solo.load(Ordering::Relaxed), EMPTY);
}

#[test]
fn a_sole_read_registers_nothing_and_only_for_the_one_handle() {
    let mut m = HostMem::zeroed(16).unwrap();
    m.write(0, 16).unwrap().fill(5);
    let clone = m.clone();
    let (m_ref, sole) = lend_sole(&mut m, |m| m);
    // Another handle exists: the read registers, and a write through that handle is refused
    // while it lives.
    let r = m_ref.read_sole(sole, 0, 8).unwrap();
    assert_ne!(m_ref.block.solo.load(Ordering::Relaxed), EMPTY);
    assert!(clone.write(4, 4).is_err(), "a write overlapping the read must be refused");
    drop(r);
    drop(clone);
    {
        // The only handle, held exclusively: nothing registered, and the bytes are there.
        let r = m_ref.read_sole(sole, 0, 8).unwrap();
        assert_eq!(&*r, &[5; 8]);
        assert_eq!(m_ref.block.solo.load(Ordering::Relaxed), EMPTY);
        assert_eq!(format!("{r:?}").split(" of ").next(), Some("ReadGuard(0..8"));
    }
    // A live guard on the block, or a range out of bounds: as `read`.
    let w = m_ref.write(0, 4).unwrap();
    assert!(m_ref.read_sole(sole, 2, 4).is_err());
    drop(w);
    assert!(m_ref.read_sole(sole, 12, 8).is_err());
    assert_eq!(m_ref.block.solo.load(Ordering::Relaxed), EMPTY);
}

#[test]
fn no_proof_for_a_value_that_holds_no_host_memory() {
    let mut v = 5u32;
    let (_, sole) = lend_sole(&mut v, |v| v);
    let m = HostMem::zeroed(8).unwrap();
    let w = m.write_sole(sole, 0, 8).unwrap();
    assert_ne!(m.block.solo.load(Ordering::Relaxed), EMPTY);
    drop(w);
    assert!(Sole::none().block.is_none());
}
