//! Command-line parsing, by hand: the nccl-tests flags (short, long, `-b8`, `--op=sum`) plus
//! ruCCL's own (`--device`, `--transport`, `--algo`, `--json`, `--ref`). No parsing crate,
//! so the binary adds nothing to the library's dependency tree.

use std::collections::HashMap;
use std::time::Duration;

use ruccl::config::Transport;
use ruccl::launch::LaunchEnv;
use ruccl::{Algorithm, DType, ReduceOp};

use crate::device::DeviceKind;
use crate::table::Coll;

/// Devices this build can run on: the host, and each GPU device whose feature is compiled in.
pub const DEVICES: &[&str] = &[
    "host",
    #[cfg(feature = "wgpu")]
    "wgpu",
    #[cfg(feature = "cuda")]
    "cuda",
];

/// How per-rank times are combined into the table's time (nccl-tests `-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Average {
    /// Rank 0's time.
    Rank0,
    /// The mean over ranks (the nccl-tests default).
    Mean,
    /// The fastest rank.
    Min,
    /// The slowest rank.
    Max,
}

impl Average {
    pub fn name(self) -> &'static str {
        match self {
            Average::Rank0 => "rank 0",
            Average::Mean => "mean over ranks",
            Average::Min => "min over ranks",
            Average::Max => "max over ranks",
        }
    }
}

/// Which ruCCL entry point the timed calls go through (`--api`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `Communicator` methods (the default).
    Comm,
    /// The peer API (`ruccl::api`, host backend): one registered peer per thread.
    Peer,
}

/// How ranks are driven: one thread each, or all from one thread through group calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One thread per rank calling `Communicator` methods (today's default).
    Threads,
    /// `--group`: one thread, `Communicator::init_all`, one `ruccl::Group` per iteration.
    Group,
    /// `--api peer`: one thread per peer calling `ruccl::api`.
    Peer,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Threads => "threads",
            Mode::Group => "group",
            Mode::Peer => "peer",
        }
    }
}

/// The collectives `--api peer` can run: what `ruccl::api` offers.
pub const PEER_COLLS: &[Coll] = &[Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter];

fn names(colls: &[Coll]) -> String {
    colls.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

/// Everything a run needs, parsed and checked.
#[derive(Clone, Debug)]
pub struct Options {
    pub coll: Coll,
    pub threads: usize,
    pub gpus: usize,
    pub min_bytes: usize,
    pub max_bytes: usize,
    pub step_bytes: usize,
    pub step_factor: usize,
    pub iters: usize,
    pub warmup: usize,
    pub check: usize,
    /// `None` means the flag was not given (the op's default applies).
    pub ops: Option<Vec<ReduceOp>>,
    pub dtypes: Vec<DType>,
    /// `None`: not given (root 0 for rooted ops); `Some(-1)`: every root.
    pub root: Option<i64>,
    pub blocking: bool,
    pub timeout: Option<Duration>,
    pub average: Average,
    pub algo: Algorithm,
    pub json: Option<String>,
    pub reference: bool,
    /// `--group`: every rank driven from one thread through group calls.
    pub group: bool,
    /// `--nonblocking`: each call is its `_async` form, then `Work::wait`.
    pub nonblocking: bool,
    pub api: Api,
    /// `--device`: what the ranks run on.
    pub device: DeviceKind,
    /// `--distinct`: one device per rank instead of one device every rank shares.
    pub distinct: bool,
    /// `--transport`: how the ranks of this process talk (one rank per process: always TCP).
    pub transport: Transport,
    /// `--world N --rank R --master HOST:PORT`: this process is one rank of N (all three
    /// or none).
    pub world: Option<usize>,
    pub rank: Option<usize>,
    pub master: Option<String>,
    /// `--tcp-ref`: measure one loopback TCP stream, a round trip and, with several ranks,
    /// as many streams at once, before the table.
    pub tcp_ref: bool,
    /// One rank per process: set by [`crate::launch::resolve`] from the flags above or a
    /// launcher's environment, `None` when every rank is a thread of this process.
    pub launch: Option<LaunchEnv>,
}

impl Options {
    /// The number of ranks: the launch's world size with one rank per process, else
    /// nccl-tests' threads x GPUs per thread, all threads here.
    pub fn ranks(&self) -> usize {
        self.launch.as_ref().map_or(self.threads * self.gpus, |l| l.world_size)
    }

    /// The ranks this process runs (one per process, else all of them).
    pub fn local_ranks(&self) -> usize {
        self.threads * self.gpus
    }

    /// How ranks are driven (checked by [`parse_with_env`]: `--group` and `--api peer` exclude
    /// each other).
    pub fn mode(&self) -> Mode {
        match (self.group, self.api) {
            (true, _) => Mode::Group,
            (false, Api::Peer) => Mode::Peer,
            (false, Api::Comm) => Mode::Threads,
        }
    }

    /// Which halves of a row run: `[out of place, in place]`. The others print N/A.
    /// `Group` has in-place broadcast and reduce only (no `*_into` forms) and no in-place
    /// all_gather, reduce_scatter or all_to_all; the peer API's only in-place form is an
    /// all_reduce handed the only handle on its tensor.
    pub fn halves(&self) -> [bool; 2] {
        let c = self.coll;
        match self.mode() {
            // The group has every call the threads make.
            Mode::Threads | Mode::Group => [true, c.has_in_place()],
            Mode::Peer => [true, c == Coll::AllReduce],
        }
    }

    /// The byte sizes of the sweep, as nccl-tests walks them.
    pub fn sizes(&self) -> Vec<usize> {
        let mut out = Vec::new();
        let mut size = self.min_bytes;
        while size <= self.max_bytes {
            out.push(size);
            let next = if self.step_factor > 1 {
                // A sweep from 0 would multiply forever; continue from one byte.
                size.saturating_mul(self.step_factor).max(1)
            } else {
                size.saturating_add(self.step_bytes)
            };
            if next == size {
                break;
            }
            size = next;
        }
        out
    }
}

/// What the command line asked for.
#[derive(Debug)]
pub enum Parsed {
    Run(Box<Options>),
    Help,
}

/// A command-line problem, with the exit code it deserves (2 for usage errors).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// `8`, `4K`, `64M`, `1G`, `1.5K`, `64MB`, `64MiB` (binary units, as nccl-tests).
pub fn parse_size(s: &str) -> Option<usize> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (num, unit) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        Some(_) => (body, 1),
        None => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let bytes = v * unit as f64;
    if bytes > usize::MAX as f64 / 2.0 {
        return None;
    }
    Some(bytes as usize)
}

/// Parses an integer the way `strtol(s, NULL, 0)` does (decimal or `0x` hex), strictly.
fn parse_int(flag: &str, s: &str) -> Result<i64, UsageError> {
    let t = s.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16).ok(),
        None => t.parse::<i64>().ok(),
    };
    match v {
        Some(v) => Ok(if neg { -v } else { v }),
        None => err(format!("{flag} expects an integer, got {s:?}")),
    }
}

fn parse_count(flag: &str, s: &str, min: i64) -> Result<usize, UsageError> {
    let v = parse_int(flag, s)?;
    if v < min {
        return err(format!("{flag} must be at least {min}, got {v}"));
    }
    usize::try_from(v).or_else(|_| err(format!("{flag} {v} is out of range")))
}

/// nccl-tests type names and the usual aliases, case-insensitive.
pub fn parse_dtype(s: &str) -> Option<DType> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "float" | "float32" | "fp32" | "f32" => DType::F32,
        "double" | "float64" | "fp64" | "f64" => DType::F64,
        "half" | "float16" | "fp16" | "f16" => DType::F16,
        "bfloat16" | "bf16" => DType::BF16,
        "int8" | "i8" | "char" => DType::I8,
        "uint8" | "u8" => DType::U8,
        "int32" | "i32" | "int" => DType::I32,
        "uint32" | "u32" => DType::U32,
        "int64" | "i64" => DType::I64,
        "uint64" | "u64" => DType::U64,
        _ => return None,
    })
}

/// The scalar every rank passes to `PreMulSum`. All ranks must agree on it in ruCCL (it is
/// part of the op fingerprint), unlike nccl-tests, which gives each rank its own.
pub const PREMUL_SCALAR: f64 = 3.0;

fn parse_op(s: &str) -> Option<Vec<ReduceOp>> {
    Some(match s.trim().to_ascii_lowercase().as_str() {
        "sum" => vec![ReduceOp::Sum],
        "prod" => vec![ReduceOp::Prod],
        "min" => vec![ReduceOp::Min],
        "max" => vec![ReduceOp::Max],
        "avg" => vec![ReduceOp::Avg],
        "premulsum" | "mulsum" => vec![ReduceOp::PreMulSum(PREMUL_SCALAR)],
        "all" => vec![
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Avg,
            ReduceOp::PreMulSum(PREMUL_SCALAR),
        ],
        _ => return None,
    })
}

/// The order nccl-tests sweeps with `-d all`.
pub const ALL_DTYPES: [DType; 10] = [
    DType::I8,
    DType::U8,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::F16,
    DType::F32,
    DType::F64,
    DType::BF16,
];

/// Flags that take a value: (short, long names, canonical key).
const VALUED: &[(&str, &[&str], &str)] = &[
    ("-t", &["--nthreads"], "t"),
    ("-g", &["--ngpus"], "g"),
    ("-b", &["--minbytes"], "b"),
    ("-e", &["--maxbytes"], "e"),
    ("-i", &["--stepbytes"], "i"),
    ("-f", &["--stepfactor"], "f"),
    ("-n", &["--iters"], "n"),
    ("-w", &["--warmup_iters"], "w"),
    ("-c", &["--check"], "c"),
    ("-o", &["--op"], "o"),
    ("-d", &["--datatype"], "d"),
    ("-r", &["--root"], "r"),
    ("-z", &["--blocking"], "z"),
    ("-T", &["--timeout"], "T"),
    ("-a", &["--average"], "a"),
    // nccl-tests flags that change nothing here, accepted at the value that means so.
    ("-m", &["--agg_iters"], "m"),
    ("-G", &["--cudagraph"], "G"),
    ("-N", &["--run_cycles"], "N"),
    ("-p", &["--parallel_init"], "p"),
    ("-C", &["--report_cputime"], "C"),
    ("-R", &["--local_register"], "R"),
    ("-M", &["--memory_report"], "M"),
    ("", &["--device"], "device"),
    ("", &["--transport"], "transport"),
    ("", &["--algo"], "algo"),
    ("", &["--json"], "json"),
    ("", &["--api"], "api"),
    ("", &["--world"], "world"),
    ("", &["--rank"], "rank"),
    ("", &["--master"], "master"),
];

fn key_of(flag: &str) -> Option<&'static str> {
    VALUED.iter().find(|(s, longs, _)| *s == flag || longs.contains(&flag)).map(|(_, _, k)| *k)
}

/// The most ranks one process runs as threads (`-t` x `-g`).
pub const MAX_LOCAL_RANKS: usize = 4096;

/// Parses `argv[1..]`.
///
/// # Errors
/// As [`parse_with_env`] with an empty environment (one process, ranks as threads).
#[cfg(test)]
pub fn parse(argv: &[String]) -> Result<Parsed, UsageError> {
    parse_with_env(argv, &HashMap::new())
}

/// Parses `argv[1..]` for a process whose environment is `env`: a launcher's variables there
/// (or `--world/--rank/--master`) make this process one rank of several
/// ([`crate::launch::resolve`]).
///
/// # Errors
/// A [`UsageError`] naming the flag and what was wrong with it; also for a device that is
/// not compiled in, and a launcher's variables that are partly set or contradict the flags.
pub fn parse_with_env(argv: &[String], env: &HashMap<String, String>) -> Result<Parsed, UsageError> {
    let mut coll: Option<Coll> = None;
    let mut o = Options {
        coll: Coll::AllReduce,
        threads: 1,
        gpus: 1,
        min_bytes: 32 << 20,
        max_bytes: 32 << 20,
        step_bytes: 1 << 20,
        step_factor: 1,
        iters: 20,
        warmup: 5,
        check: 1,
        ops: None,
        dtypes: vec![DType::F32],
        root: None,
        blocking: false,
        timeout: None,
        average: Average::Mean,
        algo: Algorithm::Auto,
        json: None,
        reference: false,
        group: false,
        nonblocking: false,
        api: Api::Comm,
        device: DeviceKind::Host,
        distinct: false,
        transport: Transport::InProc,
        world: None,
        rank: None,
        master: None,
        tcp_ref: false,
        launch: None,
    };
    let mut i = 0;
    while i < argv.len() {
        let a = argv[i].as_str();
        i += 1;
        if a == "-h" || a == "--help" {
            return Ok(Parsed::Help);
        }
        if a == "--ref" {
            o.reference = true;
            continue;
        }
        if a == "--group" {
            o.group = true;
            continue;
        }
        if a == "--nonblocking" {
            o.nonblocking = true;
            continue;
        }
        if a == "--distinct" {
            o.distinct = true;
            continue;
        }
        if a == "--tcp-ref" {
            o.tcp_ref = true;
            continue;
        }
        if !a.starts_with('-') || a == "-" {
            if coll.is_some() {
                return err(format!("unexpected argument {a:?} (one collective per run)"));
            }
            coll = Some(Coll::parse(a).ok_or_else(|| {
                UsageError(format!("unknown collective {a:?}: use one of {}", Coll::ALL.map(Coll::name).join(", ")))
            })?);
            continue;
        }
        // Split `--flag=value` and `-b8` forms.
        let (flag, inline) = if let Some(rest) = a.strip_prefix("--") {
            match rest.split_once('=') {
                Some((f, v)) => (format!("--{f}"), Some(v.to_string())),
                None => (a.to_string(), None),
            }
        } else if a.len() > 2 && a.is_char_boundary(2) {
            (a[..2].to_string(), Some(a[2..].to_string()))
        } else {
            (a.to_string(), None)
        };
        let Some(key) = key_of(&flag) else {
            return err(format!("unknown option {a:?} (see --help)"));
        };
        let value = match inline {
            Some(v) => v,
            None => {
                let Some(v) = argv.get(i) else {
                    return err(format!("{flag} needs a value"));
                };
                i += 1;
                v.clone()
            }
        };
        apply(&mut o, key, &flag, &value)?;
    }
    o.coll = coll.ok_or_else(|| {
        UsageError(format!("no collective given: use one of {}", Coll::ALL.map(Coll::name).join(", ")))
    })?;
    if o.min_bytes > o.max_bytes {
        return err(format!("invalid sizes: -b {} is larger than -e {}", o.min_bytes, o.max_bytes));
    }
    if o.step_factor <= 1 && o.step_bytes == 0 {
        return err("-i 0 with no -f factor would never advance: give -i > 0 or -f > 1");
    }
    o.launch = crate::launch::resolve(&o, env)?;
    if let Some(r) = o.root.filter(|&r| r >= o.ranks() as i64) {
        return err(format!(
            "root {r} is out of range for {} ranks (valid: 0..{}, or -1 for every root)",
            o.ranks(),
            o.ranks()
        ));
    }
    check_mode(&o)?;
    if o.distinct && o.device == DeviceKind::Host {
        return err("--distinct needs a GPU --device (host ranks are one memory already)");
    }
    Ok(Parsed::Run(Box::new(o)))
}

/// What `--group` and `--api peer` cannot run, as usage errors rather than failed runs.
fn check_mode(o: &Options) -> Result<(), UsageError> {
    // One thread per rank (but in --group mode): past a few thousand, starting them fails in
    // the runtime (an abort, "failed to set up alternative stack guard page"), not here.
    if o.local_ranks() > MAX_LOCAL_RANKS && o.mode() != Mode::Group {
        return err(format!(
            "-t x -g = {} ranks in this process: at most {MAX_LOCAL_RANKS} (one thread each); run more processes \
             (mpirun, the launchers' variables, or --world/--rank/--master) or --group (one thread for all)",
            o.local_ranks()
        ));
    }
    if o.coll == Coll::SendRecv && o.ranks() < 2 {
        // nccl-tests sends to itself on one GPU; a rank here cannot (outside a group): say so
        // rather than print an empty table that looks like a pass.
        return err(
            "sendrecv needs at least 2 ranks (each sends to the next, and a rank cannot send to itself): use -g 2 or more",
        );
    }
    if o.nonblocking && o.mode() != Mode::Threads {
        return err(format!(
            "--nonblocking times Communicator calls made one thread per rank; it cannot be combined with {}",
            if o.group { "--group" } else { "--api peer" }
        ));
    }
    match o.mode() {
        Mode::Threads => {}
        Mode::Group if o.api == Api::Peer => {
            return err("--group drives Communicators; it cannot be combined with --api peer");
        }
        // The group has every call of the blocking API.
        Mode::Group => {}
        Mode::Peer => {
            if !PEER_COLLS.contains(&o.coll) {
                return err(format!(
                    "--api peer cannot run {}: the peer API has no such operation; --api peer supports: {}",
                    o.coll.name(),
                    names(PEER_COLLS)
                ));
            }
            let floats = <ruccl::api::HostBackend as ruccl::api::Backend>::FLOAT_DTYPES;
            if let Some(d) = o.dtypes.iter().find(|d| !floats.contains(d)) {
                return err(format!(
                    "--api peer cannot run datatype {}: the peer API takes float tensors only (float, half, bfloat16, double)",
                    crate::table::dtype_name(*d)
                ));
            }
            if o.transport != Transport::InProc {
                return err("--transport does not apply to --api peer: its peers are threads of this process");
            }
            if o.algo != Algorithm::Auto {
                return err(
                    "--algo does not apply to --api peer: the peer API chooses its plan itself (Strategy::Auto)",
                );
            }
        }
    }
    Ok(())
}

fn apply(o: &mut Options, key: &str, flag: &str, v: &str) -> Result<(), UsageError> {
    match key {
        "t" => o.threads = parse_count(flag, v, 1)?,
        "g" => o.gpus = parse_count(flag, v, 1)?,
        "b" | "e" => {
            let bytes = parse_size(v).ok_or_else(|| {
                UsageError(format!("invalid size {v:?} for {flag}: use bytes with an optional K, M or G suffix"))
            })?;
            if key == "b" {
                o.min_bytes = bytes;
            } else {
                o.max_bytes = bytes;
            }
        }
        "i" => {
            o.step_bytes = parse_size(v).ok_or_else(|| UsageError(format!("invalid increment {v:?} for {flag}")))?;
        }
        "f" => o.step_factor = parse_count(flag, v, 1)?,
        "n" => o.iters = parse_count(flag, v, 1)?,
        "w" => o.warmup = parse_count(flag, v, 0)?,
        "c" => o.check = parse_count(flag, v, 0)?,
        "o" => {
            o.ops = Some(parse_op(v).ok_or_else(|| {
                UsageError(format!("unknown reduce op {v:?}: use sum, prod, min, max, avg, premulsum (mulsum) or all"))
            })?);
        }
        "d" => {
            o.dtypes = if v.trim().eq_ignore_ascii_case("all") {
                ALL_DTYPES.to_vec()
            } else {
                vec![parse_dtype(v).ok_or_else(|| {
                    UsageError(format!(
                        "unknown datatype {v:?}: use float, half, bfloat16, double, int8, \
                         uint8, int32, uint32, int64, uint64 (or f32, fp16, bf16, i32, ...) or all"
                    ))
                })?]
            };
        }
        "r" => {
            let r = parse_int(flag, v)?;
            if r < -1 {
                return err(format!("root must be a rank or -1 (every root), got {r}"));
            }
            o.root = Some(r);
        }
        "z" => o.blocking = parse_int(flag, v)? != 0,
        "m" | "G" | "N" | "p" | "C" | "R" | "M" => {
            // (key, the values that change nothing, what the flag does in nccl-tests)
            let (ok, what): (&[i64], &str) = match key {
                "m" => (&[1], "aggregated iterations"),
                "G" => (&[0], "CUDA graph launches"),
                "N" => (&[1], "run cycles"),
                "p" => (&[0, 1], "parallel init"),
                "C" => (&[0], "CPU-time reporting"),
                "R" => (&[0], "buffer registration"),
                _ => (&[0], "memory reports"),
            };
            let n = parse_int(flag, v)?;
            if !ok.contains(&n) {
                return err(format!(
                    "{flag} {n}: ruCCL has no {what}; {flag} is accepted for nccl-tests command lines only as {}",
                    ok.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" or ")
                ));
            }
        }
        "T" => {
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| UsageError(format!("{flag} expects a number of seconds, got {v:?}")))?;
            // nccl-tests treats 0 as "no timeout"; ruCCL always has a deadline, so 0 keeps
            // the library's default.
            o.timeout = (secs > 0.0).then(|| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
        }
        "a" => {
            o.average = match parse_int(flag, v)? {
                0 => Average::Rank0,
                1 => Average::Mean,
                2 => Average::Min,
                3 => Average::Max,
                other => return err(format!("{flag} expects 0, 1, 2 or 3, got {other}")),
            }
        }
        "device" => {
            let d = v.trim().to_ascii_lowercase();
            if !DEVICES.contains(&d.as_str()) {
                let known = ["wgpu", "vulkan", "metal", "cuda"];
                let why = if known.contains(&d.as_str()) {
                    format!("device {d:?} is not compiled into this build")
                } else {
                    format!("unknown device {d:?}")
                };
                return err(format!("{why}; compiled-in devices: {}", DEVICES.join(", ")));
            }
            o.device = match d.as_str() {
                "wgpu" => DeviceKind::Wgpu,
                "cuda" => DeviceKind::Cuda,
                _ => DeviceKind::Host,
            };
        }
        "transport" => {
            o.transport = v.parse().map_err(|e: ruccl::CollectiveError| UsageError(e.message().to_string()))?;
        }
        "world" => o.world = Some(parse_count(flag, v, 1)?),
        "rank" => o.rank = Some(parse_count(flag, v, 0)?),
        "master" => o.master = Some(v.trim().to_string()),
        "algo" => {
            o.algo = v.parse().map_err(|e: ruccl::CollectiveError| UsageError(e.message().to_string()))?;
        }
        "json" => o.json = Some(v.to_string()),
        "api" => {
            o.api = match v.trim().to_ascii_lowercase().as_str() {
                "comm" => Api::Comm,
                "peer" => Api::Peer,
                other => return err(format!("unknown --api {other:?}: use comm (default) or peer")),
            }
        }
        _ => return err(format!("unknown option {flag:?} (see --help)")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn sizes_and_forms() {
        assert_eq!(parse_size("8"), Some(8));
        assert_eq!(parse_size("4K"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("2MiB"), Some(2 << 20));
        assert_eq!(parse_size("x"), None);
        let Ok(Parsed::Run(o)) = parse(&args("all_gather -b8 --maxbytes=64 -f 2 -g3 -d all")) else { unreachable!() };
        assert_eq!(o.coll, Coll::AllGather);
        assert_eq!(o.sizes(), vec![8, 16, 32, 64]);
        assert_eq!(o.ranks(), 3);
        assert_eq!(o.dtypes.len(), 10);
        assert!(parse(&args("all_reduce --transport udp")).is_err());
        let Ok(Parsed::Run(o)) = parse(&args("all_reduce --transport tcp -g 2")) else { unreachable!() };
        assert_eq!(o.transport, Transport::Tcp);
        assert_eq!(parse(&args("all_reduce --device cuda")).is_err(), cfg!(not(feature = "cuda")));
        assert_eq!(parse(&args("all_reduce --device wgpu")).is_err(), cfg!(not(feature = "wgpu")));
        assert!(parse(&args("all_reduce --distinct")).is_err());
        assert!(parse(&args("all_reduce -q 1")).is_err());
        assert!(parse(&args("broadcast -g 2 -r 2")).is_err());
    }

    #[test]
    fn modes_and_their_halves() {
        let Ok(Parsed::Run(o)) = parse(&args("broadcast -g 2 --group")) else { unreachable!() };
        assert_eq!((o.mode(), o.halves()), (Mode::Group, [true, true]));
        let Ok(Parsed::Run(o)) = parse(&args("gather -g 2 --group")) else { unreachable!() };
        assert_eq!((o.mode(), o.halves()), (Mode::Group, [true, false]));
        let Ok(Parsed::Run(o)) = parse(&args("all_reduce --api=peer -d half")) else { unreachable!() };
        assert_eq!((o.mode(), o.halves()), (Mode::Peer, [true, true]));
        let Ok(Parsed::Run(o)) = parse(&args("reduce --api=peer")) else { unreachable!() };
        assert_eq!((o.mode(), o.halves()), (Mode::Peer, [true, false]));
        assert!(parse(&args("all_to_all --api peer")).is_err());
        assert!(parse(&args("all_reduce --api peer -d int32")).is_err());
        assert!(parse(&args("all_reduce --api peer --group")).is_err());
        assert!(parse(&args("all_reduce --api mpi")).is_err());
        let Ok(Parsed::Run(o)) = parse(&args("sendrecv -g 2 --nonblocking")) else { unreachable!() };
        assert_eq!((o.mode(), o.halves(), o.nonblocking), (Mode::Threads, [true, false], true));
        assert!(parse(&args("all_reduce --nonblocking --group")).is_err());
        assert!(parse(&args("all_reduce --nonblocking --api peer")).is_err());
    }
}
