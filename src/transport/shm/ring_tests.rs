#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::*;

const CAP: usize = 4096;

fn ring() -> (Producer, Consumer, Arc<Mapping>) {
    let (m, _fd) = Mapping::create(CAP).unwrap();
    (Producer::new(m.clone(), 0), Consumer::new(m.clone(), 0), m)
}

fn frame(tag: u8) -> [u8; HEADER_LEN] {
    [tag; HEADER_LEN]
}

fn payload(r: &Record, c: &Consumer) -> Vec<u8> {
    let mut v = vec![0u8; r.len];
    c.copy(r.off, &mut v);
    v
}

#[test]
fn records_arrive_in_order_across_many_wraps() {
    let (mut p, mut c, _m) = ring();
    let mut seed = 7u64;
    for i in 0..2000u32 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let len = (seed >> 33) as usize % 1500;
        let data: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
        assert!(p.push(Kind::Data, &frame(i as u8), u64::from(i), &data), "record {i} of {len} bytes");
        let r = c.next().unwrap().unwrap();
        assert_eq!((r.kind, r.extra, r.len, r.frame), (Kind::Data, u64::from(i), len, frame(i as u8)));
        assert_eq!(r.off % 64, 0);
        assert_eq!(payload(&r, &c), data);
        c.free(r.end);
        assert!(c.next().unwrap().is_none());
    }
}

#[test]
fn a_full_ring_refuses_until_the_oldest_record_is_freed() {
    let (mut p, mut c, _m) = ring();
    let mut ends = Vec::new();
    while p.push(Kind::Data, &frame(1), 0, &[5u8; 900]) {
        ends.push(c.next().unwrap().unwrap().end);
    }
    assert!(ends.len() >= 3 && !p.fits(900));
    // Freeing a younger record does not free space: the oldest still holds the tail.
    c.free(ends[1]);
    assert!(!p.fits(900));
    c.free(ends[0]);
    assert!(p.fits(900));
    assert!(p.push(Kind::Data, &frame(2), 0, &[6u8; 900]));
}

#[test]
fn bad_records_are_errors_not_accesses() {
    let (mut p, mut c, m) = ring();
    assert!(p.push(Kind::Data, &frame(1), 0, &[1u8; 10]));
    // A record that claims to run past the ring's end.
    m.copy_in(m.ring_at(0), &(1u64 << 40).to_le_bytes());
    assert!(c.next().is_err());
    let (mut p, mut c, m) = ring();
    assert!(p.push(Kind::Data, &frame(1), 0, &[1u8; 10]));
    m.copy_in(m.ring_at(0) + 8, &99u32.to_le_bytes());
    assert!(c.next().unwrap_err().contains("unknown kind"));
    let (mut p, mut c, m) = ring();
    assert!(p.push(Kind::Data, &frame(1), 0, &[1u8; 10]));
    m.copy_in(m.ring_at(0) + 16, &4000u64.to_le_bytes());
    assert!(c.next().is_err());
    // A head that jumps past the ring.
    let (_, mut c, m) = ring();
    m.u64_at(Ctrl::of(0).head).store(1 << 30, Ordering::SeqCst);
    assert!(c.next().is_err());
}

#[test]
fn a_second_mapping_through_proc_sees_the_same_bytes_and_no_name_is_left() {
    let before = std::fs::read_dir("/dev/shm").map(|d| d.count()).unwrap_or(0);
    let (m, fd) = Mapping::create(CAP).unwrap();
    let other = Mapping::open(std::process::id(), fd.as_raw_fd()).unwrap();
    drop(fd);
    let mut p = Producer::new(m.clone(), 1);
    let mut c = Consumer::new(other.clone(), 1);
    assert!(p.push(Kind::Data, &frame(3), 9, b"hello"));
    let r = c.next().unwrap().unwrap();
    assert_eq!(payload(&r, &c), b"hello");
    let mem = other.ring_mem(1);
    assert_eq!(&*mem.read(r.off, r.len).unwrap(), b"hello");
    assert_eq!(std::fs::read_dir("/dev/shm").map(|d| d.count()).unwrap_or(0), before);
    assert!(Mapping::open(std::process::id(), i32::MAX).is_err());
}

#[test]
fn a_producer_goes_back_to_the_start_once_past_the_warm_part_if_it_is_free() {
    const WARM: usize = 8 * 384;
    let (m, _fd) = Mapping::create(4 * WARM).unwrap();
    let mut p = Producer::new(m.clone(), 0).with_warm(WARM as u64);
    let mut c = Consumer::new(m.clone(), 0);
    // A consumer that keeps up: every record (384 bytes) lies in the warm part.
    for i in 0..200u32 {
        let data = [i as u8; 200];
        assert!(p.push(Kind::Data, &frame(i as u8), u64::from(i), &data));
        let r = c.next().unwrap().unwrap();
        assert!(r.off + r.len <= WARM, "record {i} at {}", r.off);
        assert_eq!((r.extra, payload(&r, &c)), (u64::from(i), data.to_vec()));
        c.free(r.end);
    }
    // A consumer that holds the start: the producer runs on past the warm part.
    let first = {
        assert!(p.push(Kind::Data, &frame(1), 0, &[1u8; 200]));
        c.next().unwrap().unwrap()
    };
    let mut offs = Vec::new();
    while p.push(Kind::Data, &frame(2), 0, &[2u8; 200]) {
        let r = c.next().unwrap().unwrap();
        offs.push(r.off);
        if offs.len() > 64 {
            break;
        }
    }
    assert!(offs.iter().any(|&o| o > WARM), "{offs:?}");
    assert!(offs.iter().all(|&o| o != first.off), "{offs:?}");
}
