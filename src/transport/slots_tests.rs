//! The slots' tests: publish, read and reuse; threads and views of one shared store; garbage a
//! peer leaves (never a panic, never a read past a slot); a slot left half-written.

use super::*;

#[test]
fn publish_read_and_reuse() {
    let s = Slots::new(3);
    let fp = [1, 2, 3, 4, 5];
    assert!(s.busy(0, 0).is_none());
    assert!(!s.arrived(0, 0));
    s.publish(0, 0, &fp, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert!(s.arrived(0, 0) && !s.arrived(0, 2));
    assert_eq!(s.fingerprint(0, 0), fp);
    assert!(s.agrees(0, 0, &fp) && !s.agrees(0, 0, &[1, 2, 3, 4, 6]));
    assert!(!s.disagrees(0, 0, &fp) && s.disagrees(0, 0, &[1, 2, 3, 4, 6]) && !s.disagrees(1, 0, &[0; 5]));
    let mut out = [0u8; 3];
    assert!(s.read(0, 0, 8, &mut out));
    assert_eq!(out, [9, 10, 11]);
    assert!(!s.read(0, 0, SLOT_BYTES - 3, &mut [0u8; 4]), "past the slot");
    let mut out = [9u8; 5];
    assert!(s.read(0, 0, 8, &mut out), "within the slot: the part, then its last word's padding");
    assert_eq!(out, [9, 10, 11, 0, 0]);
    let mut out = [0u8; 6];
    assert!(s.read(0, 0, 3, &mut out), "unaligned");
    assert_eq!(out, [4, 5, 6, 7, 8, 9]);
    let mut out = [0u8; 7];
    assert!(s.read(0, 0, 1, &mut out), "unaligned, across a word");
    assert_eq!(out, [2, 3, 4, 5, 6, 7, 8]);
    let mut out = [0u8; 11];
    assert!(s.read(0, 0, 0, &mut out), "a whole word and a tail");
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert!(s.read(0, 0, 11, &mut []), "nothing, at the end");
    // Whole words: the part's bytes in memory order, as `read` gives them.
    s.publish(1, 0, &fp, &(1..=24).collect::<Vec<u8>>());
    let mut words = [0u64; 2];
    assert!(s.read_words(1, 0, 1, &mut words));
    assert_eq!(bytemuck::cast_slice::<u64, u8>(&words), &(9..=24).collect::<Vec<u8>>()[..]);
    assert!(s.read_words(1, 0, SLOT_BYTES / 8 - 2, &mut words), "the slot's last words");
    assert!(!s.read_words(1, 0, SLOT_BYTES / 8 - 1, &mut words), "past the slot");
    assert!(!s.read_words(1, 0, usize::MAX, &mut words), "offset overflow");
    // The other slots are free; this one is held until ranks 1 and 2 finish op 0.
    let again = DEPTH as u64;
    assert!((1..again).all(|seq| s.busy(0, seq).is_none()));
    assert_eq!(s.busy(0, again), Some((1, 1)));
    s.finish(1, 0);
    assert_eq!(s.busy(0, again), Some((2, 1)));
    s.finish(2, 0);
    assert!(s.busy(0, again).is_none());
    s.publish(0, again, &fp, &[]);
    assert!(s.arrived(0, again) && !s.arrived(0, 0));
}

#[test]
fn hints_change_nothing() {
    let s = Slots::new(2);
    let fp = [7; FP_WORDS];
    s.publish(1, 3, &fp, &[1, 2, 3, 4]);
    // Any rank (past the world too) and any op number, published or not.
    for peer in 0..4 {
        for seq in [0, 3, 4, DEPTH as u64 + 3, u64::MAX] {
            s.prefetch(peer, seq);
            s.claim(peer, seq);
        }
    }
    assert!(s.arrived(1, 3) && s.agrees(1, 3, &fp) && !s.arrived(0, 3) && !s.arrived(1, 4));
    let mut out = [0u8; 4];
    assert!(s.read(1, 3, 0, &mut out));
    assert_eq!(out, [1, 2, 3, 4]);
}

#[test]
fn threads_see_whole_parts() {
    let s = std::sync::Arc::new(Slots::new(2));
    let fp = [0; FP_WORDS];
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    let t: Vec<_> = (0..2)
        .map(|me| {
            let s = s.clone();
            std::thread::spawn(move || {
                for seq in 0..rounds {
                    while s.busy(me, seq).is_some() {
                        std::hint::spin_loop();
                    }
                    s.publish(me, seq, &fp, &[(seq as u8).wrapping_add(me as u8); 24]);
                    let peer = 1 - me;
                    while !s.arrived(peer, seq) {
                        std::hint::spin_loop();
                    }
                    let mut out = [0u8; 24];
                    assert!(s.read(peer, seq, 0, &mut out));
                    assert_eq!(out, [(seq as u8).wrapping_add(peer as u8); 24]);
                    s.finish(me, seq);
                }
            })
        })
        .collect();
    for t in t {
        t.join().unwrap();
    }
}

/// A small xorshift: the garbage a peer may leave in a shared mapping.
fn noise(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn garbage_in_a_peers_slots_never_panics_nor_reads_past_a_slot() {
    // Under Miri, fewer ranks, ops and reads: the interpreter takes ~1 s per 10 k words.
    let (world, seqs, rounds) = if cfg!(miri) { (2, 2, 1) } else { (3, 2 * DEPTH as u64, 50) };
    let reads: &[(usize, usize)] = if cfg!(miri) {
        &[(SLOT_BYTES - 3, 3), (SLOT_BYTES - 3, 4), (8, 2 * SLOT_BYTES)]
    } else {
        &[(0, 8), (0, SLOT_BYTES), (SLOT_BYTES - 3, 3), (SLOT_BYTES - 3, 4), (5, 13), (8, 2 * SLOT_BYTES)]
    };
    let s = Slots::new(world);
    let mut x = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..rounds {
        // Every word of the slots looked at and of the `done` lines, peers' and our own, is
        // garbage.
        let garbage = |l: &Line, x: &mut u64| l.0.iter().for_each(|w| w.store(noise(x), Ordering::Relaxed));
        for p in 0..world {
            for seq in 0..seqs.min(DEPTH as u64) {
                s.slot(p, seq).iter().for_each(|l| garbage(l, &mut x));
            }
            s.done(p).into_iter().for_each(|l| garbage(l, &mut x));
        }
        let fp = [noise(&mut x); FP_WORDS];
        for seq in 0..seqs {
            for p in 0..world {
                let _ = (s.arrived(p, seq), s.agrees(p, seq, &fp), s.disagrees(p, seq, &fp));
                let _ = (s.fingerprint(p, seq), s.finished(p), s.busy(p, seq));
                for &(off, n) in reads {
                    let mut out = vec![0u8; n];
                    let ok = s.read(p, seq, off, &mut out);
                    assert!(!ok || off + n <= SLOT_BYTES, "read past the slot: {off} + {n}");
                }
                assert!(!s.read(p, seq, usize::MAX, &mut [0u8; 2]), "offset overflow");
                let mut words = [0u64; 2];
                assert!(!s.read_words(p, seq, usize::MAX - 1, &mut words), "word offset overflow");
                assert!(!s.read_words(p, seq, SLOT_BYTES / 8 - 1, &mut words), "words past the slot");
                assert!(!s.read(p, seq, SLOT_BYTES + 8, &mut []), "offset past the slot");
            }
        }
        // Ranks past the world have no `done` line: nothing is finished, nothing cleared.
        assert_eq!(s.finished(world), u64::MAX);
        s.finish(world, 7);
    }
}

#[test]
fn a_half_written_slot_never_reads_as_arrived() {
    let s = Slots::new(2);
    let fp = [1, 2, 3, 4, 5];
    s.publish(0, 0, &fp, &[7; 16]);
    s.finish(1, 0);
    // Rank 0 reuses the slot for op DEPTH and dies before its last store (the sequence
    // word): every word but that one is new.
    let again = DEPTH as u64;
    assert!(s.busy(0, again).is_none());
    let slot = s.slot(0, again);
    for i in 0..FP_WORDS {
        word(slot, FP_AT + i).store(9, Ordering::Relaxed);
    }
    word(slot, HEAD).store(u64::MAX, Ordering::Relaxed);
    assert!(!s.arrived(0, again), "the new op is not there");
    assert!(!s.disagrees(0, again, &fp), "nor does it disagree");
    // The sequence word still names op 0, whose part is half overwritten: no reader looks
    // at it, since a slot is rewritten only once every peer has finished its last op.
    assert!(s.arrived(0, 0) && s.finished(1) > 0);
}

#[test]
fn views_of_one_shared_store_exchange_like_processes() {
    // Two views of one store of lines, one per "process", as two mappings of one segment
    // are: each rank uses its own view only.
    let world = 2;
    let store: std::sync::Arc<[Line]> = (0..lines_for(world)).map(|_| Line::new()).collect();
    assert!(Slots::over(world, store.clone()).is_some());
    assert!(Slots::over(world + 1, store.clone()).is_none(), "a store too small for the world");
    let fp = [3; FP_WORDS];
    // Under Miri a few ops (each round costs seconds there); natively, past many reuses.
    let rounds = if cfg!(miri) { 4 } else { 2000 };
    let t: Vec<_> = (0..world)
        .map(|me| {
            let s = Slots::over(world, store.clone());
            std::thread::spawn(move || {
                let s = s.unwrap();
                let peer = 1 - me;
                for seq in 0..rounds {
                    while s.busy(me, seq).is_some() {
                        std::thread::yield_now();
                    }
                    let part: Vec<u8> = (0..13).map(|i| (seq as u8).wrapping_mul(3) ^ (me as u8) ^ i).collect();
                    s.publish(me, seq, &fp, &part);
                    while !s.arrived(peer, seq) {
                        std::thread::yield_now();
                    }
                    assert!(s.agrees(peer, seq, &fp));
                    let mut out = [0u8; 13];
                    assert!(s.read(peer, seq, 0, &mut out));
                    let want: Vec<u8> = (0..13).map(|i| (seq as u8).wrapping_mul(3) ^ (peer as u8) ^ i).collect();
                    assert_eq!(out[..], want[..]);
                    s.finish(me, seq);
                }
            })
        })
        .collect();
    for t in t {
        t.join().unwrap();
    }
}

/// A part withdrawn by its failed rank reads as missing (a late peer waits, and meets the
/// failure); withdrawing an op the slot does not hold changes nothing.
#[test]
fn a_withdrawn_part_reads_as_missing() {
    let s = Slots::new(2);
    let fp = [1, 2, 3, 4, 5];
    s.publish(0, 3, &fp, &[7; 8]);
    s.withdraw(0, 3 + DEPTH as u64);
    assert!(s.arrived(0, 3), "another op's withdrawal leaves it");
    s.withdraw(0, 3);
    assert!(!s.arrived(0, 3) && !s.disagrees(0, 3, &[0; 5]));
    s.withdraw(1, 0);
    assert!(!s.arrived(1, 0));
}
