//! `ruccl-perf`: the nccl-tests-compatible benchmark and correctness tool for ruCCL.
//!
//! ```text
//! cargo run --release -p ruccl-perf -- all_reduce -b 8 -e 64M -f 4 -g 4
//! ```
//!
//! Same flags, columns and bandwidth arithmetic as nccl-tests' `*_perf` binaries, so the
//! numbers read side by side with NCCL's. Ranks are threads of this process (or, with
//! `--group`, all driven by one thread; with `--api peer`, peers of `ruccl::api`). Ranks run
//! on the host, or with the crate's `wgpu` / `cuda` features on a GPU (`--device wgpu`: the
//! default adapter's device shared by every rank; `--distinct`: one device per rank):
//!
//! ```text
//! XDG_RUNTIME_DIR=/tmp cargo run --release -p ruccl-perf --features wgpu -- all_reduce -g 2 --device wgpu
//! ```
//!
//! Several processes, as nccl-tests built with MPI (`mpirun`, torchrun-style variables,
//! `srun`, or `--world/--rank/--master`; one rank per process, or `-g` ranks each; rank 0
//! prints the table):
//!
//! ```text
//! mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ruccl-perf all_reduce -b 4K -e 256M -f 4 --tcp-ref
//! ```
//!
//! `--help` says everything; `PERFORMANCE.md` holds measured tables.

mod args;
mod case;
mod check;
mod device;
mod launch;
mod memory;
mod out;
mod report;
mod run;
mod table;
mod tcpref;
mod warn;

use std::process::ExitCode;
use std::sync::mpsc;

use ruccl::{CommConfig, UniqueId};

use crate::args::{DEVICES, Mode, Options, Parsed};
use crate::device::{DeviceKind, PerfDevice};
use crate::report::Report;
use crate::run::{Ctx, Failure, Gate, Plan};

const HELP: &str = "\
ruccl-perf: nccl-tests-compatible benchmark and correctness check for ruCCL

USAGE: ruccl-perf <collective> [flags]
  collectives: all_reduce all_gather reduce_scatter broadcast reduce all_to_all
               all_to_allv sendrecv gather scatter   (nccl-tests names such as alltoall_perf
               work too)

FLAGS (as nccl-tests; short, long, '-b8' and '--minbytes=8' forms)
  -b, --minbytes <size>     smallest size (default 32M); K, M, G suffixes are binary (1K = 1024)
  -e, --maxbytes <size>     largest size (default 32M)
  -f, --stepfactor <n>      multiply the size by n each step (default 1: use -i)
  -i, --stepbytes <size>    add this much each step when -f is 1 (default 1M)
  -g, --ngpus <n>           ranks in this process, one thread each (default 1)
  -t, --nthreads <n>        multiplies -g (nccl-tests threads x GPUs); ranks = t * g
  -n, --iters <n>           timed iterations per row (default 20)
  -w, --warmup_iters <n>    warm-up iterations at the largest and smallest size (default 5)
  -c, --check <n>           check runs per row (default 1; 0 disables, #wrong prints N/A)
  -o, --op <op>             sum|prod|min|max|avg|premulsum (alias mulsum)|all (default sum)
  -d, --datatype <type>     float|half|bfloat16|double|int8|uint8|int32|uint32|int64|uint64|all
                            (aliases: float32 fp32 f32, float16 fp16 f16, bf16, float64 fp64
                            f64, char i8, u8, int i32, u32, i64, u64; default float)
  -r, --root <rank>         root of broadcast/reduce/gather/scatter (default 0; -1 = every root)
  -z, --blocking <0/1>      accepted for compatibility: ruCCL collectives always block until
                            done, so every timed call is already synchronous
  -T, --timeout <secs>      deadline of every wait inside ruCCL (0 or absent: the library
                            default, 600 s, or RUCCL_TIMEOUT); while a wait lasts past
                            RUCCL_WARN_AFTER (30 s), ruCCL's warnings name whom it waits for
                            on standard error, as '# ruccl WARN: ...' lines
  -a, --average <0-3>       how ranks' times combine: 0 rank 0, 1 mean (default), 2 min, 3 max
  -m 1  -G 0  -N 1  -p 0|1  -C 0  -R 0  -M 0
                            nccl-tests flags accepted at these values, which change nothing
                            here (other values are refused)
      --device <name>       what the ranks run on; compiled-in devices: DEVICES (wgpu and
                            cuda with the perf crate's features of those names). wgpu: the
                            default adapter's device, shared by every rank; cuda: GPU 0,
                            shared. Inputs are written and checked through host copies
                            outside the timed calls
      --distinct            with a GPU --device: one device per rank (wgpu: devices opened
                            on the default adapter; cuda: GPU `rank`), staged through host
                            memory as distinct GPUs are
      --transport <name>    how this process's ranks talk: inproc (default) or tcp (each
                            rank its own loopback endpoint); RUCCL_TRANSPORT applies too.
                            Ranks in other processes: shared memory on one host (TCP with
                            RUCCL_SHM_DISABLE=1), TCP between hosts; '# links' says which
      --world <n>           with --rank and --master: this process is rank R of N (see
      --rank <r>            SEVERAL PROCESSES); HOST:PORT is rank 0's rendezvous address
      --master <host:port>
      --tcp-ref             before the table, measure one loopback TCP stream (1 GiB in
                            4 MiB writes: the ceiling for busbw over TCP), the median
                            round trip of a -b sized message (at most 1 MiB) with TCP_NODELAY,
                            and with N ranks, N streams at once (256 MiB each: what each
                            link of a ring can carry when all move data on these cores)
      --algo <name>         auto (default) or a plan ruCCL should force: ring, tree, rd
                            (recursive doubling), direct, ... (any name this ruCCL accepts; a
                            wrong one lists them). Ops with a single algorithm ignore it.
                            RUCCL_ALGO and RUCCL_CHUNK_BYTES apply too
      --json <file>         also write one JSON record per table row (JSON Lines)
      --ref                 after each row print '#' lines measured in the same run: one
                            thread's memcpy of the row's size (the ceiling to read busbw
                            against), one thread's copy with ruCCL's streaming host copy, and
                            two threads memcpy-ing at once (how far bandwidth scales)
      --group               drive every rank from ONE thread: Communicator::init_all, and each
                            call (warm-up, timed, check) is one ruccl::Group holding every
                            rank's call; the time is measured around Group::run. Every
                            collective, both halves as without it (sendrecv: one group of
                            every rank's send and receive)
      --nonblocking         each call is its non-blocking form (all_reduce_async, ...;
                            sendrecv: send_async and recv_async), then Work::wait: the time
                            includes the hand-over to the rank's progress thread. Not with
                            --group or --api peer
      --api <comm|peer>     comm (default): Communicator methods, one thread per rank.
                            peer: the peer API (ruccl::api, host backend), one thread per
                            peer; supports all_reduce broadcast reduce all_gather
                            reduce_scatter, float types only, --algo auto. In place (all_reduce
                            only): each call is handed the only handle on the tensor the last
                            call returned, so the result reuses its memory; the other in-place
                            columns print N/A (the API returns new tensors there)
  -h, --help                this text

SIZES, as nccl-tests (so rows compare with NCCL's):
  size  is max(send bytes, receive bytes) per rank; count is the count passed to the call.
  all_reduce, broadcast, reduce, sendrecv: count = size / typesize.
  all_gather, gather: each rank sends count = size / typesize / ranks and receives size.
  reduce_scatter, scatter: each rank (scatter: the root) sends size and receives count.
  all_to_all: each rank sends and receives size, count = size / typesize / ranks per peer;
  all_to_allv the same through all_to_all_single_with_splits (every split = count).
BANDWIDTH (decimal GB/s): algbw = bytes / time, with bytes = count * typesize, times ranks
  for the gather/scatter family; busbw = algbw * factor: all_reduce 2(n-1)/n; all_gather,
  reduce_scatter, all_to_all(v), gather, scatter (n-1)/n; broadcast, reduce, sendrecv 1.
TIME: each rank times -n calls back to back after one untimed call and a barrier, and divides
  by -n; the printed time combines ranks with -a (the mean, as nccl-tests).
IN PLACE: all_reduce, all_gather, reduce_scatter, broadcast, reduce and all_to_all run their
  in-place forms; ruCCL has no in-place gather, scatter, sendrecv or all_to_allv: those
  columns print N/A.
SENDRECV: each rank sends to rank+1 and receives from rank-1, the two in one ruccl::Group
  (as nccl-tests' ncclGroupStart/End): they move together. Needs at least 2 ranks.
CHECK: inputs are small integers chosen so every reduction is exact in any order; results
  are compared bit for bit, except float avg and premulsum, allowed 1 ULP (one rounding at
  the end may round twice); integer avg is exact (wrapping sum, then truncating division).
  premulsum uses the scalar 3 on every rank. Non-root outputs of reduce and gather must be
  left untouched. #wrong sums the ranks' wrong elements; 'Out of bounds values' counts the
  rank checks that found any.
SEVERAL PROCESSES (as nccl-tests built with MPI): -t x -g ranks per process (1 by default;
  process P of N runs ranks P*G.. of N*G, one thread each, reaching each other in-process),
  started by mpirun (OMPI_COMM_WORLD_RANK/SIZE), torchrun-style variables (RANK,
  WORLD_SIZE) or srun (SLURM_PROCID/NTASKS), each with MASTER_ADDR and MASTER_PORT (rank 0
  listens there), or by hand with --world/--rank/--master. The harness barrier is ruCCL's
  barrier; each rank's time and check result reach every process through ruCCL's
  all_gather; rank 0 prints the one table (-a combines the ranks' times as usual). Every
  process exits non-zero if any rank failed or any value was wrong. A launch of one process
  runs -g ranks as threads. Example:
    mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 ruccl-perf all_reduce -b 4K -e 256M -f 4
EXIT STATUS: 0 all good; 1 wrong values, a failed collective or a device that cannot be
  opened (no adapter, no driver); 2 bad command line (also an unknown device, or launcher
  variables that are partly set).
";

fn main() -> ExitCode {
    let code = run_main();
    // A diagnostic for the bimodal mode of ranks on too few cores: how the parks ended.
    if std::env::var_os("RUCCL_PARK_STATS").is_some() {
        let p = ruccl::diag::parks();
        let ms = |nanos: u64, n: u64| nanos as f64 / 1e6 / n.max(1) as f64;
        eprintln!(
            "# parks: {} woken by a ring ({:.3} ms each), {} timed out ({:.3} ms each), {} spurious",
            p.rung,
            ms(p.rung_nanos, p.rung),
            p.timed_out,
            ms(p.timed_out_nanos, p.timed_out),
            p.spurious
        );
    }
    code
}

fn run_main() -> ExitCode {
    warn::install();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let env = std::env::vars().collect();
    let mut opts = match args::parse_with_env(&argv, &env) {
        Ok(Parsed::Help) => {
            out::text(&HELP.replace("DEVICES", &DEVICES.join(", ")));
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Run(o)) => *o,
        Err(e) => {
            eprintln!("ruccl-perf: {e}");
            eprintln!("run `ruccl-perf --help` for usage");
            return ExitCode::from(2);
        }
    };
    let mut config = match CommConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ruccl-perf: {}", e.message());
            return ExitCode::from(2);
        }
    };
    if let Some(t) = opts.timeout {
        config = config.with_timeout(t);
    }
    if opts.algo != ruccl::Algorithm::Auto {
        config = config.with_algorithm(opts.algo);
    } else {
        // RUCCL_ALGO applies without --algo: the header and the JSON say what ran.
        opts.algo = config.algorithm();
    }
    // `--transport tcp` wins over RUCCL_TRANSPORT; without it, RUCCL_TRANSPORT applies.
    if opts.transport == ruccl::config::Transport::Tcp {
        config = config.with_transport(opts.transport);
    } else {
        opts.transport = config.transport();
    }
    let json = match &opts.json {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("ruccl-perf: cannot create --json file {path:?}: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    match opts.device {
        DeviceKind::Host => run(&opts, config, json, device::host(opts.local_ranks())),
        #[cfg(feature = "wgpu")]
        DeviceKind::Wgpu => match quietly(|| device::wgpu(opts.local_ranks(), opts.distinct)) {
            Ok(devices) => run(&opts, config, json, devices),
            Err(e) => no_device(&e),
        },
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda => match quietly(|| device::cuda(opts.local_ranks(), opts.distinct)) {
            Ok(devices) => run(&opts, config, json, devices),
            Err(e) => no_device(&e),
        },
        // The parser only lets through the devices in `DEVICES`.
        #[allow(unreachable_patterns)]
        other => {
            eprintln!("ruccl-perf: device {:?} is not compiled into this build", other.name());
            ExitCode::from(2)
        }
    }
}

/// Runs `open` with the panic hook silenced. CubeCL panics when it finds no adapter or
/// driver (on the caller's thread and on its device thread); ruCCL contains the panic and
/// returns a `Device` error, but the default hook would still print each panic and its
/// backtrace over the one line [`no_device`] prints. A hook runs before its panic unwinds,
/// so every panic of the failed open has gone through the silent hook by the time ruCCL
/// returns.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn quietly<T>(open: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = open();
    std::panic::set_hook(hook);
    out
}

/// The one line for a device that cannot be opened.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn no_device(e: &ruccl::CollectiveError) -> ExitCode {
    eprintln!("ruccl-perf: no device to run on: {e}");
    ExitCode::FAILURE
}

/// The run itself on `devices` (rank `r` on `devices[r]`): header, every rank's thread,
/// the table and the footer. Monomorphised per device type.
fn run<D: PerfDevice>(opts: &Options, config: CommConfig, json: Option<std::fs::File>, devices: Vec<D>) -> ExitCode {
    // With several processes, the ranks join through the launch's rendezvous.
    let (id, first, print) = match &opts.launch {
        Some(l) => (None, l.rank, l.rank == 0),
        None => match UniqueId::new() {
            Ok(id) => (Some(id), 0, true),
            Err(e) => {
                eprintln!("ruccl-perf: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let plan = Plan::new(opts);
    if opts.device == DeviceKind::Host {
        let local = opts.local_ranks();
        let need = memory::needed(&plan, opts.coll, opts.ranks(), local);
        if let Some(why) = memory::available().and_then(|avail| memory::refusal(need, avail, local)) {
            eprintln!("ruccl-perf: {why}");
            return ExitCode::FAILURE;
        }
    }
    // Measured before any rank starts (the other processes wait in the rendezvous).
    let mut notes = Vec::new();
    if opts.tcp_ref && print {
        match tcpref::measure(opts.min_bytes.clamp(1, 1 << 20), opts.ranks()) {
            Ok(r) => notes.extend(r.lines()),
            Err(e) => {
                eprintln!("ruccl-perf: --tcp-ref: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let per_rank: Vec<String> = devices.iter().map(ruccl::Device::describe).collect();
    if print {
        for line in report::header(opts, &plan, &config, &device::describe(&devices), &per_rank, &notes) {
            out::line(&line);
        }
    }
    let mut report = Report::new(opts, &plan, json.filter(|_| print), print);
    // The harness barrier is not what -T bounds: ranks wait there while rank 0 runs the
    // memcpy reference or others check results. It only guards against a rank that never
    // comes back, with the longer of -T and ten minutes.
    let gate = Gate::new(opts.local_ranks(), config.timeout().max(std::time::Duration::from_secs(600)));
    let ctx = Ctx { opts, plan: &plan, id, gate, config };
    let mut io_error = None;
    if !plan.rows.is_empty() {
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::channel();
            for (i, dev) in devices.iter().enumerate() {
                let rank = first + i;
                let (tx, dev) = (tx.clone(), dev.clone());
                let ctx = &ctx;
                let builder = std::thread::Builder::new().name(format!("rank-{rank}"));
                let spawned = match opts.mode() {
                    Mode::Threads => builder.spawn_scoped(s, move || run::rank_main(ctx, rank, dev, tx)),
                    Mode::Peer => builder.spawn_scoped(s, move || run::peer_main(ctx, rank, dev, tx)),
                    // One thread drives every rank.
                    Mode::Group if rank == 0 => std::thread::Builder::new().name("group".into()).spawn_scoped(s, {
                        let all = devices.clone();
                        move || run::group_main(ctx, all, tx)
                    }),
                    Mode::Group => break,
                };
                if let Err(e) = spawned {
                    ctx.gate.abort();
                    report.failures.push((rank, Failure::Harness(format!("cannot start rank {rank}'s thread: {e}"))));
                    break;
                }
            }
            drop(tx);
            for msg in rx {
                if let Err(e) = report.on(msg) {
                    io_error.get_or_insert(e);
                }
            }
        });
    }
    let any_wrong = match report.footer() {
        Ok(w) => w,
        Err(e) => {
            io_error.get_or_insert(e);
            false
        }
    };
    if let Some(e) = io_error {
        eprintln!("ruccl-perf: writing results failed: {e}");
        return ExitCode::FAILURE;
    }
    if !report.failures.is_empty() {
        // The first failure that is not just "aborted because another rank failed" is the
        // cause; the rest are its echo.
        let cause = report.failures.iter().position(|(_, f)| !is_echo(f)).unwrap_or(0);
        let (rank, f) = &report.failures[cause];
        eprintln!("ruccl-perf: rank {rank} failed: {f}");
        if opts.launch.is_some() && matches!(f, run::Failure::Lib(e) if e.kind() == ruccl::ErrorKind::Mismatch) {
            // The ops named are the harness's own (its barriers, result gathers): what differs
            // is how the processes were started.
            eprintln!(
                "ruccl-perf: the processes disagree on what to run: start every one with the same flags (sizes, \
                 -n, -w, -c, -o, -d, -r, --ref, ...) and the same RUCCL_* variables"
            );
        }
        let others = report.failures.len() - 1;
        if others > 0 {
            eprintln!("ruccl-perf: ({others} other rank(s) stopped after it)");
        }
        return ExitCode::FAILURE;
    }
    if any_wrong {
        eprintln!("ruccl-perf: some results were wrong (see #wrong)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn is_echo(f: &Failure) -> bool {
    match f {
        Failure::Lib(e) => e.kind() == ruccl::ErrorKind::Aborted,
        Failure::Harness(s) => s == "another rank failed",
    }
}
