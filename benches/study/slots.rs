//! The exchange slots' protocol alone, without ruCCL around it: what a 16-byte gather costs
//! per op when nothing but the slot protocol runs, and what each of its pieces adds. Not a
//! cargo target (std only):
//!
//! ```sh
//! rustc -O benches/study/slots.rs -o /tmp/slots && /tmp/slots 2 && /tmp/slots 4
//! ```
//!
//! `WORLD` threads, rank 0 the root. Each op: a non-root publishes a part (fingerprint words,
//! 16 bytes, then the sequence word, release) in its ring of slots, once every peer finished
//! the op that last used the slot; the root waits for every part, checks the fingerprints and
//! reads the bytes; every rank then stores the op as finished. The variants add, one at a
//! time, what `transport::slots` and `sched::exchange` do (PERFORMANCE.md, session 23).

use std::sync::atomic::{AtomicU64, Ordering::*, fence};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// 128 bytes, as `transport::slots::Line`.
#[repr(C, align(128))]
struct Line([AtomicU64; 16]);

#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    /// Slots per rank.
    depth: usize,
    /// Lines from one slot to the next (ruCCL's: a header line and 4 KiB of part = 33).
    stride: usize,
    /// The root publishes its own part too (ruCCL's gather root does).
    root_publishes: bool,
    /// Non-roots, which wait for nobody, check every published peer's fingerprint after a
    /// fence (the mismatch scan).
    scan: bool,
    /// A rank remembers the least `finished` it saw, and skips the peers' lines while its
    /// slot's last op is below it (`Slots::busy`'s memo).
    memo: bool,
    /// `pause` iterations before a waiter yields its core.
    spin: u32,
    /// Uncontended mutex lock/unlock pairs per op, and `SeqCst` fences per op (what the path
    /// around the protocol adds: driver and state locks, the flight recorder, wake-ups).
    locks: usize,
    fences: usize,
    /// A flight-recorder entry per op, as the board writes one: a record of ~150 bytes
    /// written into a ring of 256 under the rank's own (padded) lock.
    record: bool,
    /// The clock read per op for that entry.
    clock: Clock,
    /// The host-memory guards: a compare-and-swap to take and one to let go of each tensor
    /// (the input; the root's output too).
    guards: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Clock {
    None,
    /// `Instant::now()`.
    Precise,
    /// `CLOCK_MONOTONIC_COARSE` (Linux), as `ruccl::clock` reads it.
    Coarse,
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// Nanoseconds of `CLOCK_MONOTONIC_COARSE` (6 on Linux).
#[cfg(target_os = "linux")]
fn coarse() -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { clock_gettime(6, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

#[cfg(not(target_os = "linux"))]
fn coarse() -> u64 {
    0
}

/// The rank's own flight-recorder ring, on lines of its own.
#[repr(align(128))]
struct Recorder(Mutex<(Vec<[u64; 19]>, usize)>);

/// A tensor's guard word, on a line of its own.
#[repr(align(128))]
struct Guard(AtomicU64);

impl Guard {
    fn take(&self) {
        assert!(self.0.compare_exchange(0, 1, Acquire, Relaxed).is_ok(), "guard taken twice");
    }
    fn let_go(&self) {
        assert!(self.0.compare_exchange(1, 0, Release, Relaxed).is_ok(), "guard not held");
    }
}

struct Slots {
    lines: Vec<Line>,
    v: Variant,
    world: usize,
}

impl Slots {
    fn new(v: Variant, world: usize) -> Self {
        let n = world * v.depth * v.stride + world;
        Slots { lines: (0..n).map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0)))).collect(), v, world }
    }
    fn head(&self, r: usize, seq: u64) -> &Line {
        &self.lines[(r * self.v.depth + seq as usize % self.v.depth) * self.v.stride]
    }
    /// Word 0: last op finished + 1; word 8: the memo (its own half of the line pair).
    fn done(&self, r: usize) -> &Line {
        &self.lines[self.world * self.v.depth * self.v.stride + r]
    }
}

fn wait(v: &Variant, mut ready: impl FnMut() -> bool) {
    let mut k = 0;
    while !ready() {
        k += 1;
        if k < v.spin { std::hint::spin_loop() } else { std::thread::yield_now() }
    }
}

fn rank(s: &Slots, me: usize, iters: u64) {
    let (v, n, root) = (&s.v, s.world, 0);
    let fp = [7u64, 1, 2, 3, 4];
    let locks: Vec<Mutex<u64>> = (0..v.locks).map(|_| Mutex::new(0)).collect();
    let recorder = Recorder(Mutex::new((vec![[0u64; 19]; 256], 0)));
    let (input, output) = (Guard(AtomicU64::new(0)), Guard(AtomicU64::new(0)));
    let t0 = Instant::now();
    let mut got = [0u64; 2];
    for seq in 0..iters {
        let mine = s.head(me, seq);
        let held = mine.0[0].load(Relaxed);
        if held != 0 && !(v.memo && held <= s.done(me).0[8].load(Relaxed)) {
            let mut least = u64::MAX;
            for p in (0..n).filter(|&p| p != me) {
                wait(v, || s.done(p).0[0].load(Acquire) >= held);
                least = least.min(s.done(p).0[0].load(Acquire));
            }
            s.done(me).0[8].store(least, Relaxed);
        }
        if v.guards {
            input.take();
        }
        if me != root || v.root_publishes {
            for (i, w) in fp.iter().enumerate() {
                mine.0[2 + i].store(*w, Relaxed);
            }
            mine.0[8].store(seq, Relaxed);
            mine.0[9].store(!seq, Relaxed);
            mine.0[0].store(seq + 1, Release);
        }
        if me != root && v.scan {
            fence(SeqCst);
            for p in (0..n).filter(|&p| p != me) {
                let theirs = s.head(p, seq);
                let differs = (0..5).any(|i| theirs.0[2 + i].load(Relaxed) != fp[i]);
                assert!(!(theirs.0[0].load(Acquire) == seq + 1 && differs), "mismatch");
            }
        }
        if v.guards {
            input.let_go();
        }
        if me == root {
            if v.guards {
                output.take();
            }
            for p in (0..n).filter(|&p| p != me) {
                let theirs = s.head(p, seq);
                wait(v, || theirs.0[0].load(Acquire) == seq + 1);
                assert!((0..5).all(|i| theirs.0[2 + i].load(Relaxed) == fp[i]), "mismatch");
                got = [theirs.0[8].load(Relaxed), theirs.0[9].load(Relaxed)];
            }
            if v.guards {
                output.let_go();
            }
        }
        for l in &locks {
            *l.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        }
        for _ in 0..v.fences {
            fence(SeqCst);
        }
        s.done(me).0[0].store(seq + 1, Release);
        let now = match v.clock {
            Clock::None => 0,
            Clock::Precise => Instant::now().duration_since(t0).as_nanos() as u64,
            Clock::Coarse => coarse(),
        };
        if v.record {
            let mut r = recorder.0.lock().unwrap_or_else(|e| e.into_inner());
            let i = r.1;
            r.1 = (i + 1) % 256;
            r.0[i] = std::array::from_fn(|k| seq ^ now ^ k as u64);
        }
    }
    std::hint::black_box(got);
}

/// Microseconds per op.
fn run(v: Variant, world: usize, iters: u64) -> f64 {
    let s = Arc::new(Slots::new(v, world));
    let t = Instant::now();
    let ranks: Vec<_> = (0..world)
        .map(|me| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || rank(&s, me, iters))
        })
        .collect();
    ranks.into_iter().for_each(|r| r.join().expect("a rank panicked"));
    t.elapsed().as_secs_f64() * 1e6 / iters as f64
}

fn main() {
    let world: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let bare = Variant {
        name: "bare: 16 slots of one line, spin 200",
        depth: 16,
        stride: 1,
        root_publishes: false,
        scan: false,
        memo: false,
        spin: 200,
        locks: 0,
        fences: 0,
        record: false,
        clock: Clock::None,
        guards: false,
    };
    let deep = Variant { name: "+ 128 slots", depth: 128, ..bare };
    let wide = Variant { name: "+ ruCCL's slot stride (33 lines)", stride: 33, ..deep };
    let root = Variant { name: "+ the root publishes its part", root_publishes: true, ..wide };
    let scan = Variant { name: "+ the non-roots' mismatch scan", scan: true, ..root };
    let memo = Variant { name: "+ busy's memo (= ruCCL's protocol)", memo: true, ..scan };
    let around = Variant { name: "+ 2 lock/unlock pairs and 1 fence per op", locks: 2, fences: 1, ..memo };
    let clock = Variant { name: "+ a precise clock read per op", clock: Clock::Precise, ..around };
    let record = Variant { name: "+ a flight-recorder entry (ruCCL before s23)", record: true, ..clock };
    let coarse = Variant { name: "  the same, the clock coarse (ruCCL now)", clock: Clock::Coarse, ..record };
    let guards = Variant { name: "+ the memory guards", guards: true, ..coarse };
    let yields = Variant { name: "ruCCL's protocol, yield at once (no spin)", spin: 0, ..memo };
    let all_yield = Variant { name: "ruCCL's path, roughly, yield at once", spin: 0, ..guards };
    let variants = [bare, deep, wide, root, scan, memo, around, clock, record, coarse, guards, yields, all_yield];
    let rounds = 3;
    let mut times = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (v, t) in variants.iter().zip(&mut times) {
            t.push(run(*v, world, 200_000));
        }
    }
    println!("# {world} threads, 16-byte gather, 200,000 ops, {rounds} rounds interleaved: us per op, each round");
    for (v, t) in variants.iter().zip(&times) {
        let t: Vec<String> = t.iter().map(|x| format!("{x:.3}")).collect();
        println!("{:<46} {}", v.name, t.join(" "));
    }
}
