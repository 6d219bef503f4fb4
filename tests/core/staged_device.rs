//! Test devices: the host device behind a GPU-like contract, so the whole suite runs every
//! path a GPU takes on any machine. One implementation, three policies:
//!
//! - [`StagedDevice`]: the host may not touch its buffers ([`Device::host_view`] is `None`)
//!   and no device reaches another ([`Reach::Host`]): every send is downloaded into host
//!   staging and every receive uploaded or reduced from it — ranks on distinct GPUs;
//! - [`SharedDevice`]: no host view, but every rank is on the same device ([`Reach::Same`]):
//!   ranks pass device ranges and reduce on the device, and it counts the bytes that cross
//!   host memory, which must be zero — the seed's "4 logical ranks on GPU 0";
//! - [`AsyncDevice`]: like `SharedDevice`, but every operation completes later, on a worker
//!   thread, after a small delay: a scheduler that looks at memory (or releases a message)
//!   before the device work on it completed reads stale bytes and fails the suite. It wakes
//!   ([`Device::wakes`]): threads driving several ranks sleep until its worker wakes them,
//!   so a wake the scheduler fails to arm ends a test at the op's deadline.

use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;
use std::time::{Duration, Instant};

use ruccl::config::Transport;
use ruccl::device::{Range, Reach, Source};
use ruccl::mem::{HostMem, HostRegion};
use ruccl::types::{Combine, Scale};
use ruccl::{CollectiveError, CommConfig, DType, Device, ErrorKind, HostDevice, Rank, Result};

use crate::harness::TestDevice;

/// How a test device differs from the host device.
pub trait Policy: Send + Sync + 'static {
    const NAME: &'static str;
    const REACH: Reach;
    const ASYNC: bool;
    /// Whether the host may touch its buffers (as on the host device).
    const HOST_VIEW: bool = false;
    /// Whether [`fail_next_alloc`] applies.
    const FLAKY: bool = false;
    /// Whether the suite's communicators run on the process-wide progress thread.
    const SHARED_PROGRESS: bool = false;
    /// How the ranks of one process talk.
    const TRANSPORT: Transport = Transport::InProc;
    /// Whether the suite runs in its short form here ([`TestDevice::short`]): fewer rounds of
    /// repeated scenarios, no longer passes that repeat a shorter pass's paths.
    const SHORT: bool = false;
    /// A dtype this device cannot reduce ([`Device::supports`] says no), as CubeCL's CUDA
    /// runtime once could not reduce `f64`.
    const CANNOT_REDUCE: Option<DType> = None;
    /// How long every job of an async device takes (by default most complete at once and
    /// every fourth within 90 µs).
    const DELAY: Option<Duration> = None;
}

#[derive(Debug)]
pub struct Staged;
impl Policy for Staged {
    const NAME: &'static str = "staged";
    const REACH: Reach = Reach::Host;
    const ASYNC: bool = false;
}

#[derive(Debug)]
pub struct Shared;
impl Policy for Shared {
    const NAME: &'static str = "shared";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
}

#[derive(Debug)]
pub struct Async;
impl Policy for Async {
    const NAME: &'static str = "async";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = true;
}

/// [`Async`] whose every job takes `MS` milliseconds: 1 is longer than a waiting thread
/// spins and yields (the threads driving ranks sleep on every device wait and must be woken);
/// 700 outlasts a short op deadline (a rank gives up while it waits on its own device).
#[derive(Debug)]
pub struct DelayedAsync<const MS: u64>;
impl<const MS: u64> Policy for DelayedAsync<MS> {
    const NAME: &'static str = "delayed-async";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = true;
    const DELAY: Option<Duration> = Some(Duration::from_millis(MS));
}

/// The shared device with every rank its own TCP endpoint on loopback: the library must send
/// host bytes (staging device ranges) to peers across a socket, whatever the devices reach.
/// The suite runs here in its short form: the whole suite runs over TCP in `tcp_host` and on
/// the shared device in `shared`, so the longer passes and the repetitions would only
/// repeat paths those runs take (and, with thousands of one-chunk messages over sockets,
/// they were the slowest tests of the binary).
#[derive(Debug)]
#[allow(dead_code)] // stamped by tests/core_tcp.rs alone
pub struct Tcp;
impl Policy for Tcp {
    const NAME: &'static str = "tcp";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
    const TRANSPORT: Transport = Transport::Tcp;
    const SHORT: bool = true;
}

/// The host device (peers' bytes read in place) over loopback TCP.
#[derive(Debug)]
#[allow(dead_code)] // stamped by tests/core_tcp.rs alone
pub struct TcpHost;
impl Policy for TcpHost {
    const NAME: &'static str = "tcp-host";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
    const HOST_VIEW: bool = true;
    const TRANSPORT: Transport = Transport::Tcp;
}

/// The host device, except that the next allocation on a thread that asked for it fails
/// (see [`fail_next_alloc`]).
#[derive(Debug)]
pub struct Flaky;
impl Policy for Flaky {
    const NAME: &'static str = "flaky";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
    const HOST_VIEW: bool = true;
    const FLAKY: bool = true;
}

/// The host device, with every rank's ops driven by the one process-wide progress thread
/// (`CommConfig::with_shared_progress`): the whole suite with all ranks driven by one thread.
#[derive(Debug)]
pub struct OneThread;
impl Policy for OneThread {
    const NAME: &'static str = "one-thread";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
    const HOST_VIEW: bool = true;
    const SHARED_PROGRESS: bool = true;
}

/// The host device, except that it cannot reduce `f64`: every op that only moves bytes must
/// still run on `f64`, and every reduction of `f64` must fail on every rank with
/// `Unsupported` (see `movement::on_a_dtype_the_device_cannot_reduce`).
#[derive(Debug)]
pub struct NoF64;
impl Policy for NoF64 {
    const NAME: &'static str = "no-f64";
    const REACH: Reach = Reach::Same;
    const ASYNC: bool = false;
    const HOST_VIEW: bool = true;
    const CANNOT_REDUCE: Option<DType> = Some(DType::F64);
}

/// Scheduler steps a [`OneThreadDevice`] saw issued off the progress thread.
static OFF_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static FAIL_NEXT_ALLOC: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes the next allocation of a [`FlakyDevice`] on this thread fail.
pub fn fail_next_alloc() {
    FAIL_NEXT_ALLOC.with(|f| f.set(true));
}

pub type StagedDevice = TestDev<Staged>;
pub type FlakyDevice = TestDev<Flaky>;
pub type SharedDevice = TestDev<Shared>;
pub type AsyncDevice = TestDev<Async>;
pub type OneThreadDevice = TestDev<OneThread>;
#[allow(dead_code)] // stamped by tests/core_tcp.rs alone
pub type TcpDevice = TestDev<Tcp>;
#[allow(dead_code)] // stamped by tests/core_tcp.rs alone
pub type TcpHostDevice = TestDev<TcpHost>;
pub type NoF64Device = TestDev<NoF64>;

type Job = Box<dyn FnOnce() + Send>;

/// The completion of a job, shared by the worker and the event.
#[derive(Debug, Default)]
pub struct Done {
    state: Mutex<Option<Result<()>>>,
    cv: Condvar,
    /// Woken once the job ran ([`Device::poll_waking`]); pushed under `state`'s lock.
    wakers: Mutex<Vec<Waker>>,
}

/// A [`TestDev`]'s event: complete at once, or when its worker ran the job.
#[derive(Debug, Clone)]
pub struct TestEvent(Option<Arc<Done>>);

struct Worker {
    tx: Mutex<Sender<Job>>,
}

/// The host device under a [`Policy`].
pub struct TestDev<P> {
    host: HostDevice,
    /// Bytes moved between this device and host memory by the scheduler.
    host_bytes: Arc<AtomicUsize>,
    worker: Option<Arc<Worker>>,
    _policy: PhantomData<P>,
}

impl<P> Clone for TestDev<P> {
    fn clone(&self) -> Self {
        TestDev {
            host: self.host,
            host_bytes: self.host_bytes.clone(),
            worker: self.worker.clone(),
            _policy: PhantomData,
        }
    }
}

impl<P: Policy> fmt::Debug for TestDev<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", P::NAME, self.host.describe())
    }
}

impl<P: Policy> TestDev<P> {
    /// Refuses a reduction this device cannot run, as a GPU whose runtime lacks the type.
    fn can_reduce(&self, dtype: DType) -> Result<()> {
        if P::CANNOT_REDUCE == Some(dtype) {
            return Err(CollectiveError::new(ErrorKind::Unsupported, format!("{} cannot reduce {dtype}", P::NAME)));
        }
        Ok(())
    }

    pub(crate) fn new(host: HostDevice) -> Self {
        let worker = P::ASYNC.then(|| {
            let (tx, rx) = channel::<Job>();
            std::thread::spawn(move || {
                for (n, job) in rx.into_iter().enumerate() {
                    // Every job completes on this thread, after the call returned; some of them
                    // noticeably later than others.
                    if let Some(d) = P::DELAY {
                        std::thread::sleep(d);
                    } else if n % 4 == 3 {
                        std::thread::sleep(Duration::from_micros(30 + (n as u64 * 37) % 60));
                    }
                    job();
                }
            });
            Arc::new(Worker { tx: Mutex::new(tx) })
        });
        TestDev { host, host_bytes: Arc::default(), worker, _policy: PhantomData }
    }

    /// Bytes this device (and its clones) moved through host memory for the scheduler.
    pub fn host_bytes(&self) -> usize {
        self.host_bytes.load(Ordering::SeqCst)
    }

    /// Notes a scheduler step that a harness rank thread ran itself when the progress thread
    /// should drive every rank (see [`TestDevice::check`]). Group calls and communicators a
    /// test builds on its own thread are driven by that thread, as they should be.
    fn note_thread(&self) {
        if P::SHARED_PROGRESS && std::thread::current().name().is_some_and(|n| n.starts_with("rank ")) {
            OFF_THREAD.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Runs `job` now, or queues it on the worker.
    fn enqueue(&self, job: impl FnOnce() -> Result<()> + Send + 'static) -> Result<TestEvent> {
        let Some(w) = &self.worker else {
            job()?;
            return Ok(TestEvent(None));
        };
        let done = Arc::new(Done::default());
        let d = done.clone();
        let boxed: Job = Box::new(move || {
            let r = job();
            *d.state.lock().unwrap() = Some(r);
            d.cv.notify_all();
            let wakers = std::mem::take(&mut *d.wakers.lock().unwrap());
            wakers.into_iter().for_each(Waker::wake);
        });
        w.tx.lock()
            .unwrap()
            .send(boxed)
            .map_err(|_| CollectiveError::new(ErrorKind::Device, "the test device's worker is gone"))?;
        Ok(TestEvent(Some(done)))
    }
}

impl<P: Policy> TestDevice for TestDev<P> {
    fn short() -> bool {
        P::SHORT
    }
    fn guards_pending_memory() -> bool {
        false
    }
    fn direct_groups() -> bool {
        P::REACH == Reach::Same && matches!(P::TRANSPORT, Transport::InProc)
    }
    fn for_rank(rank: Rank) -> Self {
        Self::new(HostDevice::for_rank(rank))
    }
    fn foreign(rank: Rank) -> Self {
        Self::new(HostDevice::foreign(rank))
    }
    fn configure(config: CommConfig) -> CommConfig {
        config.with_transport(P::TRANSPORT).with_shared_progress(P::SHARED_PROGRESS)
    }
    fn check() -> Result<(), String> {
        if !P::SHARED_PROGRESS {
            return Ok(());
        }
        match OFF_THREAD.swap(0, Ordering::SeqCst) {
            0 => Ok(()),
            n => Err(format!("{n} scheduler steps ran off the shared progress thread")),
        }
    }
}

impl<P: Policy> Device for TestDev<P> {
    type Buffer = HostMem;
    type Event = TestEvent;

    fn describe(&self) -> String {
        format!("{}:{}", P::NAME, self.host.ordinal())
    }
    fn same_device(&self, other: &Self) -> bool {
        self.host.same_device(&other.host)
    }
    fn reach(&self, other: &Self) -> Reach {
        if self.same_device(other) { P::REACH } else { Reach::Host }
    }
    fn supports(&self, dtype: DType) -> bool {
        P::CANNOT_REDUCE != Some(dtype) && self.host.supports(dtype)
    }
    fn alloc(&self, bytes: usize) -> Result<HostMem> {
        if P::FLAKY && FAIL_NEXT_ALLOC.with(|f| f.replace(false)) {
            return Err(CollectiveError::new(ErrorKind::Device, format!("out of memory allocating {bytes} bytes")));
        }
        self.host.alloc(bytes)
    }
    fn alloc_staging(&self, bytes: usize) -> Result<HostMem> {
        self.host.alloc_staging(bytes)
    }
    fn len(&self, buf: &HostMem) -> usize {
        self.host.len(buf)
    }
    fn mem_id(&self, buf: &HostMem) -> usize {
        self.host.mem_id(buf)
    }
    fn write(&self, dst: &HostMem, off: usize, src: &[u8]) -> Result<()> {
        self.host.write(dst, off, src)
    }
    fn read(&self, src: &HostMem, off: usize, dst: &mut [u8]) -> Result<()> {
        self.host.read(src, off, dst)
    }
    fn upload(&self, dst: &Range<HostMem>, src: &HostRegion) -> Result<TestEvent> {
        self.host_bytes.fetch_add(src.len, Ordering::SeqCst);
        let (h, dst, src) = (self.host, dst.clone(), src.clone());
        self.enqueue(move || h.upload(&dst, &src).map(drop))
    }
    fn download(&self, src: &Range<HostMem>, dst: &HostRegion) -> Result<TestEvent> {
        self.host_bytes.fetch_add(src.len, Ordering::SeqCst);
        let (h, src, dst) = (self.host, src.clone(), dst.clone());
        self.enqueue(move || h.download(&src, &dst).map(drop))
    }
    fn copy(&self, src: &Range<HostMem>, dst: &Range<HostMem>) -> Result<TestEvent> {
        self.note_thread();
        let (h, src, dst) = (self.host, src.clone(), dst.clone());
        self.enqueue(move || h.copy(&src, &dst).map(drop))
    }
    fn reduce(
        &self,
        dst: &Range<HostMem>,
        acc: &Range<HostMem>,
        srcs: &[Source<HostMem>],
        dtype: DType,
        combine: Combine,
    ) -> Result<TestEvent> {
        self.note_thread();
        self.can_reduce(dtype)?;
        let host: usize = srcs.iter().filter(|s| matches!(s, Source::Host(_))).map(Source::len).sum();
        self.host_bytes.fetch_add(host, Ordering::SeqCst);
        let (h, dst, acc, srcs) = (self.host, dst.clone(), acc.clone(), srcs.to_vec());
        self.enqueue(move || h.reduce(&dst, &acc, &srcs, dtype, combine).map(drop))
    }
    fn scale(&self, src: &Range<HostMem>, dst: &Range<HostMem>, dtype: DType, scale: Scale) -> Result<TestEvent> {
        self.can_reduce(dtype)?;
        let (h, src, dst) = (self.host, src.clone(), dst.clone());
        self.enqueue(move || h.scale(&src, &dst, dtype, scale).map(drop))
    }
    fn poll(&self, event: &TestEvent) -> Result<bool> {
        match &event.0 {
            None => Ok(true),
            Some(d) => match &*d.state.lock().unwrap() {
                None => Ok(false),
                Some(r) => r.clone().map(|()| true),
            },
        }
    }
    /// An async device wakes: its worker wakes the waker once the job ran (the group
    /// drivers then sleep until it does, with no slices: a lost wake fails the suite at the
    /// op's deadline).
    fn poll_waking(&self, event: &TestEvent, waker: &Waker) -> Result<bool> {
        let Some(d) = &event.0 else { return Ok(true) };
        let st = d.state.lock().unwrap();
        match &*st {
            Some(r) => r.clone().map(|()| true),
            None => {
                let mut wakers = d.wakers.lock().unwrap();
                if !wakers.iter().any(|w| w.will_wake(waker)) {
                    wakers.push(waker.clone());
                }
                Ok(false)
            }
        }
    }
    fn wakes(&self) -> bool {
        self.worker.is_some()
    }
    fn wait(&self, event: &TestEvent, deadline: Option<Instant>) -> Result<()> {
        let Some(d) = &event.0 else { return Ok(()) };
        let mut st = d.state.lock().unwrap();
        loop {
            if let Some(r) = &*st {
                return r.clone();
            }
            let slice = deadline.map_or(Duration::from_millis(50), |t| t.saturating_duration_since(Instant::now()));
            if deadline.is_some() && slice.is_zero() {
                return Err(CollectiveError::new(ErrorKind::Timeout, "device work did not finish in time"));
            }
            st = d.cv.wait_timeout(st, slice).unwrap().0;
        }
    }
    /// The main difference from the host device: the host may not read or write these
    /// buffers (unless the policy says it may).
    fn host_view(&self, buf: &HostMem) -> Option<HostMem> {
        P::HOST_VIEW.then(|| buf.clone())
    }
    fn synchronize(&self, deadline: Option<Instant>) -> Result<()> {
        let ev = self.enqueue(|| Ok(()))?;
        self.wait(&ev, deadline)
    }
}
