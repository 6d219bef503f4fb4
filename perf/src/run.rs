//! Ranks as threads: the plan every rank walks in the same order, the per-rank loop (warm-up,
//! one untimed call, a harness barrier, `iters` timed calls, then the check runs), and the
//! messages each rank sends to the printing thread. Timing follows nccl-tests' `BenchTime`:
//! each rank times its `iters` calls together and divides; ranks' times are combined by the
//! printer (`-a`, mean by default).
//!
//! Two other drivers walk the same plan: `--api peer` (one thread per peer of `ruccl::api`,
//! otherwise as above) and `--group` ([`group_main`]: one thread holds every rank's
//! communicator and runs each iteration as one `ruccl::Group`, timing `run()` only).

use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use half::{bf16, f16};
use ruccl::api::{self, CollectiveConfig, PeerId};
use ruccl::{CollectiveError, CommConfig, Communicator, DType, Group, ReduceOp, UniqueId};

use crate::args::Options;
use crate::case::{Case, Spec, Via};
use crate::check::Num;
use crate::device::PerfDevice;
use crate::table::{Coll, Shape};

/// One (dtype, op, root) combination of the sweep.
#[derive(Clone, Copy, Debug)]
pub struct Combo {
    pub dtype: DType,
    pub op: Option<ReduceOp>,
    pub root: Option<usize>,
}

/// One table row.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub combo: usize,
    pub shape: Shape,
}

/// Everything every rank runs, in order.
#[derive(Clone, Debug)]
pub struct Plan {
    pub combos: Vec<Combo>,
    pub rows: Vec<Row>,
}

impl Plan {
    pub fn new(o: &Options) -> Plan {
        let n = o.ranks();
        let ops: Vec<Option<ReduceOp>> = if o.coll.reduces() {
            o.ops.clone().unwrap_or_else(|| vec![ReduceOp::Sum]).into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        let roots: Vec<Option<usize>> = match (o.coll.rooted(), o.root) {
            (false, _) => vec![None],
            (true, Some(-1)) => (0..n).map(Some).collect(),
            (true, r) => vec![Some(r.map_or(0, |r| r.max(0) as usize))],
        };
        let mut combos = Vec::new();
        for &dtype in &o.dtypes {
            for &op in &ops {
                for &root in &roots {
                    combos.push(Combo { dtype, op, root });
                }
            }
        }
        // A send to oneself is invalid in ruCCL: sendrecv on one rank has nothing to run
        // (the printer says so).
        let sizes = if o.coll == Coll::SendRecv && n < 2 { Vec::new() } else { o.sizes() };
        let mut rows = Vec::new();
        for (ci, c) in combos.iter().enumerate() {
            for &size in &sizes {
                rows.push(Row { combo: ci, shape: o.coll.shape(size, c.dtype, n) });
            }
        }
        Plan { combos, rows }
    }
}

/// Why a rank stopped.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("{0}")]
    Lib(#[from] CollectiveError),
    #[error("{0}")]
    Harness(String),
}

/// What ranks tell the printer.
#[derive(Debug)]
pub enum Msg {
    /// One rank's result for one half of row `row`.
    Half { row: usize, in_place: bool, rank: usize, secs: f64, wrong: Option<u64> },
    /// The copy references for row `row` (rank 0 measures them while the others wait).
    Ref { row: usize, secs: Reference },
    /// A rank stopped.
    Failed { rank: usize, failure: Failure },
}

/// A barrier for the harness (not timed), with a deadline and an abort switch so that one
/// failing rank cannot leave the others waiting forever.
pub struct Gate {
    n: usize,
    timeout: Duration,
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

impl Gate {
    pub fn new(n: usize, timeout: Duration) -> Gate {
        Gate { n, timeout, state: Mutex::new((0, 0, false)), cv: Condvar::new() }
    }

    pub fn wait(&self) -> Result<(), Failure> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let gen_at_entry = s.1;
        if s.2 {
            return Err(Failure::Harness("another rank failed".into()));
        }
        s.0 += 1;
        if s.0 == self.n {
            s.0 = 0;
            s.1 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        // Saturating: `--timeout 1e30` means no deadline, not a panic.
        let deadline = Instant::now().checked_add(self.timeout);
        while s.1 == gen_at_entry && !s.2 {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(Failure::Harness(format!(
                    "harness barrier: {} of {} ranks arrived within {:?}",
                    s.0, self.n, self.timeout
                )));
            }
            let slice = deadline.map_or(Duration::from_secs(3600), |d| d - now);
            s = self.cv.wait_timeout(s, slice).unwrap_or_else(|e| e.into_inner()).0;
        }
        if s.1 == gen_at_entry {
            return Err(Failure::Harness("another rank failed".into()));
        }
        Ok(())
    }

    pub fn abort(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.2 = true;
        self.cv.notify_all();
    }
}

/// What all ranks share.
pub struct Ctx<'a> {
    pub opts: &'a Options,
    pub plan: &'a Plan,
    /// The id threads of this process join (`None`: one rank per process, joined through
    /// the launch).
    pub id: Option<UniqueId>,
    pub config: CommConfig,
    pub gate: Gate,
}

/// The body of rank `rank`'s thread on `dev`: joins the communicator and walks the plan.
/// Reports failures through `tx` and aborts the communicator so that every rank stops
/// promptly.
pub fn rank_main<D: PerfDevice>(ctx: &Ctx<'_>, rank: usize, dev: D, tx: Sender<Msg>) {
    let joined = match (&ctx.opts.launch, &ctx.id) {
        (Some(launch), _) => {
            // This thread's rank of the job (the launch's `rank` is this process's first).
            let mut mine = launch.clone();
            mine.rank = rank;
            Communicator::from_launch(dev, &mine, ctx.config.clone()).map_err(Failure::from)
        }
        (None, Some(id)) => Communicator::with_config(dev, ctx.opts.ranks(), id.clone(), rank, ctx.config.clone())
            .map_err(Failure::from),
        (None, None) => Err(Failure::Harness("no id to join".into())),
    };
    let comm = match joined {
        Ok(c) => c,
        Err(failure) => {
            ctx.gate.abort();
            let _ = tx.send(Msg::Failed { rank, failure });
            return;
        }
    };
    // Several processes: how rank 0 reaches its peers (the transport is chosen per pair).
    if rank == 0 && ctx.opts.launch.is_some() {
        crate::out::line(&links(&comm));
    }
    if let Err(failure) = walk_plan(ctx, Via::Comm(&comm), comm.device(), rank, &tx) {
        ctx.gate.abort();
        comm.abort();
        let _ = tx.send(Msg::Failed { rank, failure });
    }
}

/// `# links from rank 0: shared memory to ranks 1-3, tcp to ranks 4-7`: how `comm`'s rank
/// reaches each peer, grouped by kind.
fn links<D: PerfDevice>(comm: &Communicator<D>) -> String {
    let mut kinds: Vec<(ruccl::PeerLink, Vec<usize>)> = Vec::new();
    for peer in (0..comm.world_size()).filter(|&p| p != comm.rank()) {
        let Ok(link) = comm.peer_link(peer) else { continue };
        match kinds.iter_mut().find(|(k, _)| *k == link) {
            Some((_, ranks)) => ranks.push(peer),
            None => kinds.push((link, vec![peer])),
        }
    }
    let parts: Vec<String> = kinds.iter().map(|(k, ranks)| format!("{k} to {}", ranks_text(ranks))).collect();
    format!("# links from rank {}: {}", comm.rank(), parts.join(", "))
}

/// `ranks 1-3, 5` (`rank 4` alone).
fn ranks_text(ranks: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, hi)) if *hi + 1 == r => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    let text: Vec<String> =
        runs.iter().map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }).collect();
    format!("{} {}", if ranks.len() == 1 { "rank" } else { "ranks" }, text.join(", "))
}

/// The body of peer `rank`'s thread with `--api peer`: registers with the peer API (the
/// device's backend, peer id = rank) on `dev`, walks the plan, and finishes the session. A
/// failure resets the service, which wakes every other peer at once (`Aborted`).
pub fn peer_main<D: PerfDevice>(ctx: &Ctx<'_>, rank: usize, dev: D, tx: Sender<Msg>) {
    let peer = PeerId::from(rank);
    let config = CollectiveConfig::default().with_num_devices(ctx.opts.ranks()).with_timeout(ctx.config.timeout());
    let res = api::register::<D::Peer>(peer, dev.clone(), config)
        .map_err(Failure::from)
        .and_then(|()| walk_plan(ctx, Via::<D>::Peer(peer), &dev, rank, &tx))
        .and_then(|()| Ok(api::finish_collective::<D::Peer>(peer)?));
    if let Err(failure) = res {
        ctx.gate.abort();
        api::reset_collective::<D::Peer>();
        let _ = tx.send(Msg::Failed { rank, failure });
    }
}

/// Runs every combo of the plan as rank `rank` on `dev`, through `via`.
fn walk_plan<D: PerfDevice>(
    ctx: &Ctx<'_>,
    via: Via<'_, D>,
    dev: &D,
    rank: usize,
    tx: &Sender<Msg>,
) -> Result<(), Failure> {
    let mut seed = 100u64;
    for ci in 0..ctx.plan.combos.len() {
        let r = Rankwise { ctx, via, dev, rank, tx };
        match ctx.plan.combos[ci].dtype {
            DType::F32 => run_combo::<f32, D>(&r, ci, &mut seed),
            DType::F64 => run_combo::<f64, D>(&r, ci, &mut seed),
            DType::F16 => run_combo::<f16, D>(&r, ci, &mut seed),
            DType::BF16 => run_combo::<bf16, D>(&r, ci, &mut seed),
            DType::I8 => run_combo::<i8, D>(&r, ci, &mut seed),
            DType::U8 => run_combo::<u8, D>(&r, ci, &mut seed),
            DType::I32 => run_combo::<i32, D>(&r, ci, &mut seed),
            DType::U32 => run_combo::<u32, D>(&r, ci, &mut seed),
            DType::I64 => run_combo::<i64, D>(&r, ci, &mut seed),
            DType::U64 => run_combo::<u64, D>(&r, ci, &mut seed),
            other => Err(Failure::Harness(format!("ruccl-perf does not know element type {other}"))),
        }?;
    }
    Ok(())
}

/// One rank's thread: what [`run_combo`] needs.
struct Rankwise<'c, 'a, D: PerfDevice> {
    ctx: &'c Ctx<'a>,
    via: Via<'c, D>,
    /// This rank's device: where its tensors live.
    dev: &'c D,
    rank: usize,
    tx: &'c Sender<Msg>,
}

fn send(tx: &Sender<Msg>, m: Msg) -> Result<(), Failure> {
    tx.send(m).map_err(|_| Failure::Harness("the printing thread went away".into()))
}

fn run_combo<T: Num, D: PerfDevice>(r: &Rankwise<'_, '_, D>, ci: usize, seed: &mut u64) -> Result<(), Failure> {
    let Rankwise { ctx, via, dev, rank, tx } = *r;
    let o = ctx.opts;
    let combo = ctx.plan.combos[ci];
    let rows = rows_of(ctx.plan, ci);
    let spec = |count: usize, in_place: bool| Spec {
        coll: o.coll,
        op: combo.op,
        root: combo.root.unwrap_or(0),
        rank,
        ranks: o.ranks(),
        count,
        in_place,
        nonblocking: o.nonblocking,
    };
    // Warm-up at the largest and smallest size, out of place, as nccl-tests' TimeTest.
    if o.warmup > 0 {
        let ends = [rows.last(), rows.first()];
        for (_, row) in ends.into_iter().flatten() {
            let mut case = Case::<T, D>::new(dev, spec(row.shape.count, false))?;
            for _ in 0..o.warmup {
                case.run(via)?;
            }
        }
    }
    for (k, row) in rows {
        if o.reference {
            barrier(ctx, via)?;
            if rank == 0 {
                let secs = reference(row.shape.bytes, o.iters)?;
                send(tx, Msg::Ref { row: k, secs })?;
            }
            barrier(ctx, via)?;
        }
        for in_place in [false, true] {
            if !o.halves()[usize::from(in_place)] {
                continue;
            }
            let mut case = Case::<T, D>::new(dev, spec(row.shape.count, in_place))?;
            // Always write real inputs (as nccl-tests does): a buffer never written stays the
            // kernel's shared zero page, which reads far faster than memory and would
            // flatter the out-of-place column.
            case.fill(99)?;
            // One untimed call, then line the ranks up, then time `iters` calls.
            case.run(via)?;
            barrier(ctx, via)?;
            let t0 = Instant::now();
            for _ in 0..o.iters {
                case.run(via)?;
            }
            let secs = t0.elapsed().as_secs_f64() / o.iters as f64;
            let mut wrong = None;
            for _ in 0..o.check {
                *seed += 1;
                case.fill(*seed)?;
                case.run(via)?;
                *wrong.get_or_insert(0) += case.wrong(*seed)?;
            }
            match via {
                // Several processes: every process learns every rank's result, and its first
                // rank reports them all (the others of the process report none).
                Via::Comm(comm) if let Some(launch) = &o.launch => {
                    let all = crate::launch::share(comm, secs, wrong)?;
                    if rank == launch.rank {
                        for (rank, (secs, wrong)) in all.into_iter().enumerate() {
                            send(tx, Msg::Half { row: k, in_place, rank, secs, wrong })?;
                        }
                    }
                }
                _ => send(tx, Msg::Half { row: k, in_place, rank, secs, wrong })?,
            }
        }
    }
    Ok(())
}

/// The harness barrier (not timed): the gate between threads, or ruCCL's own `barrier`
/// between processes.
fn barrier<D: PerfDevice>(ctx: &Ctx<'_>, via: Via<'_, D>) -> Result<(), Failure> {
    match via {
        Via::Comm(comm) if ctx.opts.launch.is_some() => Ok(comm.barrier()?),
        _ => ctx.gate.wait(),
    }
}

/// The rows of combo `ci`, with their index in the plan.
fn rows_of(plan: &Plan, ci: usize) -> Vec<(usize, Row)> {
    plan.rows.iter().copied().enumerate().filter(|(_, r)| r.combo == ci).collect()
}

/// `--group`: one thread creates every rank's communicator on `devices` (one per rank) with
/// `init_all` and walks the plan, running each call of every rank as one `Group`. Failures
/// are reported as rank 0's.
pub fn group_main<D: PerfDevice>(ctx: &Ctx<'_>, devices: Vec<D>, tx: Sender<Msg>) {
    let comms = match Communicator::init_all(devices, ctx.config.clone()) {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.send(Msg::Failed { rank: 0, failure: e.into() });
            return;
        }
    };
    let mut seed = 100u64;
    for ci in 0..ctx.plan.combos.len() {
        let res = match ctx.plan.combos[ci].dtype {
            DType::F32 => run_group_combo::<f32, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::F64 => run_group_combo::<f64, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::F16 => run_group_combo::<f16, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::BF16 => run_group_combo::<bf16, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::I8 => run_group_combo::<i8, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::U8 => run_group_combo::<u8, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::I32 => run_group_combo::<i32, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::U32 => run_group_combo::<u32, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::I64 => run_group_combo::<i64, D>(ctx, &comms, &tx, ci, &mut seed),
            DType::U64 => run_group_combo::<u64, D>(ctx, &comms, &tx, ci, &mut seed),
            other => Err(Failure::Harness(format!("ruccl-perf does not know element type {other}"))),
        };
        if let Err(failure) = res {
            for c in &comms {
                c.abort();
            }
            let _ = tx.send(Msg::Failed { rank: 0, failure });
            return;
        }
    }
}

/// Runs every rank's call once as one group; returns the seconds `run()` took.
fn group_run<T: Num, D: PerfDevice>(comms: &[Communicator<D>], cases: &mut [Case<T, D>]) -> Result<f64, Failure> {
    let mut group = Group::new();
    for (comm, case) in comms.iter().zip(cases.iter_mut()) {
        case.push(comm, &mut group)?;
    }
    let t0 = Instant::now();
    group.run()?;
    Ok(t0.elapsed().as_secs_f64())
}

/// [`run_combo`] for `--group`: the same steps for every rank at once. There is no harness
/// barrier (one thread), and every rank reports the same time: the group's.
fn run_group_combo<T: Num, D: PerfDevice>(
    ctx: &Ctx<'_>,
    comms: &[Communicator<D>],
    tx: &Sender<Msg>,
    ci: usize,
    seed: &mut u64,
) -> Result<(), Failure> {
    let o = ctx.opts;
    let combo = ctx.plan.combos[ci];
    let halves = o.halves();
    let cases = |count: usize, in_place: bool| -> Result<Vec<Case<T, D>>, Failure> {
        let spec = |rank: usize| Spec {
            coll: o.coll,
            op: combo.op,
            root: combo.root.unwrap_or(0),
            rank,
            ranks: comms.len(),
            count,
            in_place,
            nonblocking: false,
        };
        Ok(comms.iter().enumerate().map(|(r, c)| Case::<T, D>::new(c.device(), spec(r))).collect::<Result<_, _>>()?)
    };
    let rows = rows_of(ctx.plan, ci);
    if o.warmup > 0 {
        // Out of place as the threaded driver, unless the group has only the in-place form.
        let warm_in_place = !halves[0];
        for (_, row) in [rows.last(), rows.first()].into_iter().flatten() {
            let mut cs = cases(row.shape.count, warm_in_place)?;
            for _ in 0..o.warmup {
                group_run(comms, &mut cs)?;
            }
        }
    }
    for (k, row) in rows {
        if o.reference {
            send(tx, Msg::Ref { row: k, secs: reference(row.shape.bytes, o.iters)? })?;
        }
        for in_place in [false, true] {
            if !halves[usize::from(in_place)] {
                continue;
            }
            let mut cs = cases(row.shape.count, in_place)?;
            for c in &mut cs {
                c.fill(99)?;
            }
            group_run(comms, &mut cs)?;
            let mut secs = 0.0;
            for _ in 0..o.iters {
                secs += group_run(comms, &mut cs)?;
            }
            let secs = secs / o.iters as f64;
            let mut wrong: Vec<Option<u64>> = vec![None; cs.len()];
            for _ in 0..o.check {
                *seed += 1;
                for c in &mut cs {
                    c.fill(*seed)?;
                }
                group_run(comms, &mut cs)?;
                for (w, c) in wrong.iter_mut().zip(&cs) {
                    *w.get_or_insert(0) += c.wrong(*seed)?;
                }
            }
            for (rank, wrong) in wrong.into_iter().enumerate() {
                send(tx, Msg::Half { row: k, in_place, rank, secs, wrong })?;
            }
        }
    }
    Ok(())
}

/// The same-run ceilings a host busbw is read against: seconds per copy of a row's size.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// One thread's `copy_from_slice` (glibc's `memcpy`). Below glibc's non-temporal
    /// threshold (derived from the last-level cache it detects; 99 MiB on the 2-core machine
    /// of PERFORMANCE.md) it stores through the cache, reading every destination line first.
    pub memcpy: f64,
    /// One thread's copy with ruCCL's host device (non-temporal stores from 1 MiB, ruCCL's
    /// own host memory): what one rank's copy of the same bytes costs.
    pub stream: f64,
    /// Two threads at once, each `memcpy`-ing the row's size between its own buffers: the
    /// slower one's time. Read against `memcpy`, it says how far memory bandwidth scales past
    /// one core (4 ranks on 2 cores can at best use both).
    pub memcpy2: f64,
}

/// Measures the [`Reference`] of a `bytes` row (means of `iters` copies after one warm-up).
///
/// # Errors
/// When ruCCL cannot allocate its host memory.
pub fn reference(bytes: usize, iters: usize) -> Result<Reference, CollectiveError> {
    let memcpy = memcpy_secs(bytes, iters);
    let stream = {
        use ruccl::Device;
        let dev = ruccl::HostDevice::default();
        let (src, dst) = (ruccl::mem::HostMem::zeroed(bytes)?, ruccl::mem::HostMem::zeroed(bytes)?);
        dst.write(0, bytes)?.fill(1);
        let copy = || dev.write(&dst, 0, &std::hint::black_box(src.read(0, bytes))?);
        copy()?;
        let t0 = Instant::now();
        for _ in 0..iters.max(1) {
            copy()?;
        }
        t0.elapsed().as_secs_f64() / iters.max(1) as f64
    };
    let memcpy2 = std::thread::scope(|s| {
        let a = s.spawn(|| memcpy_secs(bytes, iters));
        let b = memcpy_secs(bytes, iters);
        a.join().map_or(b, |a| a.max(b))
    });
    Ok(Reference { memcpy, stream, memcpy2 })
}

/// Seconds per single-thread `memcpy` of `bytes` (mean of `iters` copies after one warm-up
/// copy), the ceiling a host busbw is read against.
pub fn memcpy_secs(bytes: usize, iters: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src);
    let iters = iters.max(1);
    let t0 = Instant::now();
    for _ in 0..iters {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    t0.elapsed().as_secs_f64() / iters as f64
}
