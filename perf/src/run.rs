//! Ranks as threads: the plan every rank walks in the same order, the per-rank loop (warm-up,
//! one untimed call, a harness barrier, `iters` timed calls, then the check runs), and the
//! messages each rank sends to the printing thread. Timing follows nccl-tests' `BenchTime`:
//! each rank times its `iters` calls together and divides; ranks' times are combined by the
//! printer (`-a`, mean by default).

use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use half::{bf16, f16};
use ruccl::{CollectiveError, CommConfig, Communicator, DType, HostDevice, ReduceOp, UniqueId};

use crate::args::Options;
use crate::case::{Case, Spec};
use crate::check::Num;
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
    /// The memcpy reference for row `row` (rank 0 measures it while the others wait).
    Ref { row: usize, secs: f64 },
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
    pub id: UniqueId,
    pub config: CommConfig,
    pub gate: Gate,
}

/// The body of rank `rank`'s thread: joins the communicator and walks the plan. Reports
/// failures through `tx` and aborts the communicator so that every rank stops promptly.
pub fn rank_main(ctx: &Ctx<'_>, rank: usize, tx: Sender<Msg>) {
    let dev = HostDevice::new(rank as u32);
    let comm = match Communicator::with_config(dev, ctx.opts.ranks(), ctx.id.clone(), rank, ctx.config.clone()) {
        Ok(c) => c,
        Err(e) => {
            ctx.gate.abort();
            let _ = tx.send(Msg::Failed { rank, failure: e.into() });
            return;
        }
    };
    let mut seed = 100u64;
    for ci in 0..ctx.plan.combos.len() {
        let combo = ctx.plan.combos[ci];
        let res = match combo.dtype {
            DType::F32 => run_combo::<f32>(ctx, &comm, &tx, ci, &mut seed),
            DType::F64 => run_combo::<f64>(ctx, &comm, &tx, ci, &mut seed),
            DType::F16 => run_combo::<f16>(ctx, &comm, &tx, ci, &mut seed),
            DType::BF16 => run_combo::<bf16>(ctx, &comm, &tx, ci, &mut seed),
            DType::I8 => run_combo::<i8>(ctx, &comm, &tx, ci, &mut seed),
            DType::U8 => run_combo::<u8>(ctx, &comm, &tx, ci, &mut seed),
            DType::I32 => run_combo::<i32>(ctx, &comm, &tx, ci, &mut seed),
            DType::U32 => run_combo::<u32>(ctx, &comm, &tx, ci, &mut seed),
            DType::I64 => run_combo::<i64>(ctx, &comm, &tx, ci, &mut seed),
            DType::U64 => run_combo::<u64>(ctx, &comm, &tx, ci, &mut seed),
            other => Err(Failure::Harness(format!("ruccl-perf does not know element type {other}"))),
        };
        if let Err(failure) = res {
            ctx.gate.abort();
            comm.abort();
            let _ = tx.send(Msg::Failed { rank, failure });
            return;
        }
    }
}

fn send(tx: &Sender<Msg>, m: Msg) -> Result<(), Failure> {
    tx.send(m).map_err(|_| Failure::Harness("the printing thread went away".into()))
}

fn run_combo<T: Num>(
    ctx: &Ctx<'_>,
    comm: &Communicator<HostDevice>,
    tx: &Sender<Msg>,
    ci: usize,
    seed: &mut u64,
) -> Result<(), Failure> {
    let o = ctx.opts;
    let combo = ctx.plan.combos[ci];
    let dev = *comm.device();
    let rows: Vec<(usize, Row)> = ctx.plan.rows.iter().copied().enumerate().filter(|(_, r)| r.combo == ci).collect();
    let spec = |count: usize, in_place: bool| Spec {
        coll: o.coll,
        op: combo.op,
        root: combo.root.unwrap_or(0),
        rank: comm.rank(),
        ranks: comm.world_size(),
        count,
        in_place,
    };
    // Warm-up at the largest and smallest size, out of place, as nccl-tests' TimeTest.
    if o.warmup > 0 {
        let ends = [rows.last(), rows.first()];
        for (_, row) in ends.into_iter().flatten() {
            let mut case = Case::<T>::new(&dev, spec(row.shape.count, false))?;
            for _ in 0..o.warmup {
                case.run(comm)?;
            }
        }
    }
    for (k, row) in rows {
        if o.reference {
            ctx.gate.wait()?;
            if comm.rank() == 0 {
                let secs = memcpy_secs(row.shape.bytes, o.iters);
                send(tx, Msg::Ref { row: k, secs })?;
            }
            ctx.gate.wait()?;
        }
        for in_place in [false, true] {
            if in_place && !o.coll.has_in_place() {
                continue;
            }
            let mut case = Case::<T>::new(&dev, spec(row.shape.count, in_place))?;
            // Always write real inputs (as nccl-tests does): a buffer never written stays the
            // kernel's shared zero page, which reads far faster than memory and would
            // flatter the out-of-place column.
            case.fill(99)?;
            // One untimed call, then line the ranks up, then time `iters` calls.
            case.run(comm)?;
            ctx.gate.wait()?;
            let t0 = Instant::now();
            for _ in 0..o.iters {
                case.run(comm)?;
            }
            let secs = t0.elapsed().as_secs_f64() / o.iters as f64;
            let mut wrong = None;
            for _ in 0..o.check {
                *seed += 1;
                case.fill(*seed)?;
                case.run(comm)?;
                *wrong.get_or_insert(0) += case.wrong(*seed)?;
            }
            send(tx, Msg::Half { row: k, in_place, rank: comm.rank(), secs, wrong })?;
        }
    }
    Ok(())
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
