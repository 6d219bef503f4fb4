//! The harness: one thread per rank, each with its own communicator, running one closure;
//! a panic on any rank fails the test with that rank named. Also the device fixture trait,
//! the seeded "shuffled arrival" delays and the bit-exact tensor checks.

use std::any::Any;
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ruccl::{CommConfig, Communicator, Device, Element, ErrorKind, HostDevice, Rank, Tensor, UniqueId};

use crate::reference::Elem;
use crate::vals::{Vals, assert_vals};

/// The deadline of ordinary tests: long enough never to fire on a loaded machine, short
/// enough that a library hang fails the test instead of stalling the run.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A device the suite runs on: which device each rank uses, and one that is *not* the
/// communicator's (for the wrong-device error).
pub trait TestDevice: Device<Buffer: Clone> {
    /// The device rank `rank` builds its communicator and tensors on.
    fn for_rank(rank: Rank) -> Self;
    /// A device other than `for_rank(rank)`.
    fn foreign(rank: Rank) -> Self;
    /// The config the suite's ranks use on this fixture, from the one a test asks for (a
    /// fixture may pick the transport).
    fn configure(config: CommConfig) -> CommConfig {
        config
    }
    /// What the device saw go wrong that the test's own checks cannot see (run after each
    /// test).
    fn check() -> Result<(), String> {
        Ok(())
    }
    /// Why this device cannot run here, if it cannot (the test then prints it and skips).
    fn unavailable() -> Option<String> {
        None
    }
    /// The largest world the suite's per-world tests run on this device (larger ones are
    /// skipped with a printed reason).
    fn max_world() -> usize {
        usize::MAX
    }
    /// Whether this device runs the suite's shortened form: a slow device (lavapipe runs
    /// every launch on the CPU) leaves out repetitions and the longer passes of sweeps that
    /// take the same device paths as the shorter ones; the host stamps run them all.
    fn short() -> bool {
        false
    }
    /// How many of the `n` rounds a test that repeats one scenario (to shake out races and
    /// orderings) runs on this device: all of them, or in the short form a tenth (at least 8,
    /// enough to cycle through every reduce op, communicator and root the tests rotate).
    fn rounds(n: usize) -> usize {
        if Self::short() { (n / 10).max(n.min(8)) } else { n }
    }
    /// Whether a group of every rank's collective runs without messages on this fixture
    /// (ranks on one device, in one process).
    fn direct_groups() -> bool {
        true
    }
    /// Whether the device's own `write` and `read` refuse memory a pending op holds (ruCCL's
    /// devices do; a device implemented elsewhere, as the staged test device, does not).
    fn guards_pending_memory() -> bool {
        true
    }
}

impl TestDevice for HostDevice {
    fn for_rank(_rank: Rank) -> Self {
        HostDevice::new(0)
    }
    fn foreign(_rank: Rank) -> Self {
        HostDevice::new(1)
    }
}

/// Runs `test` unless the device is unavailable, in which case it says so loudly.
pub fn guard<D: TestDevice>(test: impl FnOnce()) {
    match D::unavailable() {
        None => {
            test();
            if let Err(e) = D::check() {
                panic!("{e}");
            }
        }
        Some(why) => eprintln!("SKIPPED on {}: {why}", std::any::type_name::<D>()),
    }
}

/// How [`run`] builds communicators and paces calls.
#[derive(Clone, Debug)]
pub struct Opts {
    /// The config every rank passes.
    pub config: CommConfig,
    /// Random 0–300 µs delays before each call ([`Ctx::arrive`]).
    pub shuffle: bool,
    /// Seed of the delays (`RUCCL_TEST_SEED` overrides it).
    pub seed: u64,
}

impl Default for Opts {
    fn default() -> Self {
        let seed = std::env::var("RUCCL_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_c0de);
        Opts { config: CommConfig::default().with_timeout(TEST_TIMEOUT), shuffle: true, seed }
    }
}

impl Opts {
    /// Default options with `config` (its timeout is kept as given).
    pub fn with_config(config: CommConfig) -> Self {
        Opts { config, ..Opts::default() }
    }

    /// Default config with `timeout`, no shuffling (for tests that time things).
    pub fn timed(timeout: Duration) -> Self {
        Opts { config: CommConfig::default().with_timeout(timeout), shuffle: false, ..Opts::default() }
    }
}

/// What a rank's closure gets: its communicator and a few helpers.
pub struct Ctx<D: Device> {
    pub comm: Communicator<D>,
    pub dev: D,
    pub rank: Rank,
    pub world: usize,
    /// A barrier across this run's rank threads (outside the library) for tests that stage
    /// failures; it survives dropping the context.
    pub sync: Arc<SyncPoint>,
    rng: AtomicU64,
    shuffle: bool,
}

/// Runs `body` on `world` threads, one per rank, each with a communicator built with
/// `opts`; joins them all and fails naming every rank that panicked.
pub fn run<D: TestDevice, F>(world: usize, opts: &Opts, body: F)
where
    F: Fn(&Ctx<D>) + Sync,
{
    run_owned::<D, _>(world, opts, |ctx| body(&ctx));
}

/// Like [`run`], but each rank owns its context (and so may drop its communicator).
pub fn run_owned<D: TestDevice, F>(world: usize, opts: &Opts, body: F)
where
    F: Fn(Ctx<D>) + Sync,
{
    let id = UniqueId::new().expect("a UniqueId");
    let sync = Arc::new(SyncPoint::new(world));
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (id, body, sync) = (id.clone(), &body, sync.clone());
                std::thread::Builder::new()
                    .name(format!("rank {rank}/{world}"))
                    .spawn_scoped(s, move || {
                        let _guard = BreakOnPanic(sync.clone(), rank);
                        let dev = D::for_rank(rank);
                        let comm =
                            Communicator::with_config(dev.clone(), world, id, rank, D::configure(opts.config.clone()))
                                .unwrap_or_else(|e| panic!("Communicator::with_config failed: {e}"));
                        let ctx = Ctx {
                            comm,
                            dev,
                            rank,
                            world,
                            sync,
                            rng: AtomicU64::new(seed_for(opts.seed, world, rank)),
                            shuffle: opts.shuffle,
                        };
                        body(ctx);
                    })
                    .expect("spawn a rank thread")
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .filter_map(|(rank, h)| h.join().err().map(|p| format!("rank {rank}: {}", panic_text(&*p))))
            .collect()
    });
    if !failures.is_empty() {
        panic!(
            "world {world} (RUCCL_TEST_SEED={}): {} rank(s) failed:\n{}",
            opts.seed,
            failures.len(),
            failures.join("\n")
        );
    }
}

/// A reusable barrier for the rank threads of one [`run`]. Unlike `std::sync::Barrier` it
/// cannot hang a test: when a rank panics every waiter panics too, and no wait lasts more
/// than two minutes.
pub struct SyncPoint {
    world: usize,
    state: Mutex<SyncState>,
    cv: Condvar,
}

#[derive(Default)]
struct SyncState {
    arrived: usize,
    generation: u64,
    broken: Option<String>,
}

impl SyncPoint {
    fn new(world: usize) -> Self {
        SyncPoint { world, state: Mutex::new(SyncState::default()), cv: Condvar::new() }
    }

    /// Returns once every rank of the run has called `wait` (once more).
    pub fn wait(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.world {
            st.arrived = 0;
            st.generation += 1;
            self.cv.notify_all();
            return;
        }
        while st.generation == generation {
            if let Some(why) = &st.broken {
                panic!("test sync point abandoned: {why}");
            }
            let now = Instant::now();
            assert!(now < deadline, "test sync point: not every rank arrived within 2 minutes");
            st = self.cv.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    fn abandon(&self, why: String) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.broken.get_or_insert(why);
        self.cv.notify_all();
    }
}

/// Abandons the run's [`SyncPoint`] when its rank thread unwinds.
struct BreakOnPanic(Arc<SyncPoint>, Rank);

impl Drop for BreakOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon(format!("rank {} failed", self.1));
        }
    }
}

/// The text of a panic payload.
pub fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "(non-string panic)".to_string()
    }
}

fn seed_for(seed: u64, world: usize, rank: Rank) -> u64 {
    let s = seed ^ ((world as u64) << 32) ^ (rank as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if s == 0 { 1 } else { s }
}

impl<D: TestDevice> Ctx<D> {
    /// The next number of this rank's xorshift64 stream.
    pub fn next_u64(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        x
    }

    /// Shuffled arrival: sleeps 0–300 µs (when enabled) so ranks reach each call in a
    /// different order every time.
    pub fn arrive(&self) {
        if self.shuffle {
            let us = self.next_u64() % 301;
            if us > 0 {
                std::thread::sleep(Duration::from_micros(us));
            }
        }
    }

    /// A 1-D tensor on this rank's device.
    pub fn tensor<T: Element>(&self, data: &[T]) -> Tensor<D> {
        Tensor::from_slice(&self.dev, data, &[data.len()]).unwrap_or_else(|e| panic!("building a tensor: {e}"))
    }

    /// A 1-D tensor holding `v` on this rank's device.
    pub fn tensor_of(&self, v: &Vals) -> Tensor<D> {
        let t = Tensor::zeros(&self.dev, v.dtype(), &[v.len()]).unwrap_or_else(|e| panic!("building a tensor: {e}"));
        self.dev.write(t.buffer(), 0, v.bytes()).unwrap_or_else(|e| panic!("filling a tensor: {e}"));
        t
    }

    /// `t`'s elements.
    pub fn read(&self, t: &Tensor<D>, what: impl Display) -> Vals {
        let mut bytes = vec![0; t.byte_len()];
        t.device().read(t.buffer(), 0, &mut bytes).unwrap_or_else(|e| panic!("{what}: reading back: {e}"));
        Vals::from_bytes(t.dtype(), bytes)
    }

    /// Asserts `t` holds exactly the elements of `want` (and their dtype).
    pub fn check_vals(&self, t: &Tensor<D>, want: &Vals, what: impl Display) {
        assert_vals(&self.read(t, &what), want, what);
    }

    /// Unwraps a collective's result, naming the call on failure.
    pub fn ok<R>(&self, r: ruccl::Result<R>, what: impl Display) -> R {
        r.unwrap_or_else(|e| panic!("{what} failed: {e}"))
    }

    /// Asserts `t` holds exactly the bits of `want`.
    pub fn check<T: Elem>(&self, t: &Tensor<D>, want: &[T], what: impl Display) {
        let got = t.to_vec::<T>().unwrap_or_else(|e| panic!("{what}: reading back: {e}"));
        assert_bits(&got, want, what);
    }

    /// Asserts `err` has `kind` and that its text names this rank and every `needle`.
    pub fn expect_err(
        &self,
        r: ruccl::Result<()>,
        kind: ErrorKind,
        needles: &[&str],
        what: impl Display,
    ) -> ruccl::CollectiveError {
        let e = match r {
            Ok(()) => panic!("{what}: succeeded, expected a {kind:?} error"),
            Err(e) => e,
        };
        assert_eq!(e.kind(), kind, "{what}: wrong kind of error: {e}");
        let text = e.to_string();
        let me = format!("rank {}", self.rank);
        assert!(text.contains(&me), "{what}: error does not name {me}: {text}");
        for n in needles {
            assert!(text.contains(n), "{what}: error does not mention {n:?}: {text}");
        }
        e
    }
}

/// Asserts two element slices are equal bit for bit, reporting the first difference.
pub fn assert_bits<T: Elem>(got: &[T], want: &[T], what: impl Display) {
    assert_eq!(got.len(), want.len(), "{what}: {} elements, expected {}", got.len(), want.len());
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        let wrong = (0..got.len()).filter(|&i| got[i].bits() != want[i].bits()).count();
        panic!(
            "{what}: element {i} is {:?}, expected {:?} ({wrong} of {} elements differ; \
             first ones got {:?}, expected {:?})",
            got[i],
            want[i],
            got.len(),
            &got[i..(i + 8).min(got.len())],
            &want[i..(i + 8).min(want.len())],
        );
    }
}

/// Whether an error text names rank `r` ("rank 2", "rank(s) 1, 2", "ranks 0, 2" ...).
pub fn names_rank(text: &str, r: Rank) -> bool {
    let r = r.to_string();
    ["rank ", "rank(s) ", "ranks "].iter().any(|lead| {
        text.match_indices(lead).any(|(i, _)| {
            text[i + lead.len()..]
                .split(|c: char| !(c.is_ascii_digit() || c == ',' || c == ' '))
                .next()
                .is_some_and(|list| list.split(',').any(|x| x.trim() == r))
        })
    })
}
