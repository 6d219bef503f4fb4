//! Runs the `ruccl-perf` binary on small ranges and reads its output the way a person (or a
//! script written for nccl-tests) would: every table row checked, `#wrong` 0 everywhere, the
//! footer OK, `--json` one valid record per row, and bad command lines rejected with a
//! message and exit status 2.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn perf(args: &[&str]) -> Output {
    command(args).output().expect("ruccl-perf runs")
}

/// `ruccl-perf args`, without the caller's ruCCL and launcher variables.
fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ruccl-perf"));
    c.args(args)
        .env_remove("RUCCL_ALGO")
        .env_remove("RUCCL_TIMEOUT")
        .env_remove("RUCCL_CHUNK_BYTES")
        .env_remove("RUCCL_TRANSPORT")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("SLURM_PROCID")
        .env_remove("SLURM_NTASKS");
    c
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One table row: the five leading columns and the two halves.
#[derive(Debug)]
struct Row {
    size: u64,
    count: u64,
    dtype: String,
    redop: String,
    root: i64,
    /// (time, algbw, busbw, #wrong) out of place and in place, as printed.
    halves: [[String; 4]; 2],
}

fn rows(out: &str) -> Vec<Row> {
    out.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 13, "a row has 13 columns: {l:?}");
            let half = |i: usize| -> [String; 4] { std::array::from_fn(|k| f[i + k].to_string()) };
            Row {
                size: f[0].parse().unwrap(),
                count: f[1].parse().unwrap(),
                dtype: f[2].to_string(),
                redop: f[3].to_string(),
                root: f[4].parse().unwrap(),
                halves: [half(5), half(9)],
            }
        })
        .collect()
}

/// Asserts a clean run: exit 0, footer OK, every checked half `#wrong` 0, numbers parse.
fn assert_clean(o: &Output, in_place: bool) -> Vec<Row> {
    assert_clean_halves(o, [true, in_place])
}

/// [`assert_clean`] where either half may be absent (`false`: that half must print N/A).
fn assert_clean_halves(o: &Output, halves: [bool; 2]) -> Vec<Row> {
    let out = stdout(o);
    assert!(o.status.success(), "exit {:?}\nstdout:\n{out}\nstderr:\n{}", o.status, stderr(o));
    assert!(out.contains("# Out of bounds values : 0 OK"), "{out}");
    assert!(out.contains("# Avg bus bandwidth    : "), "{out}");
    let rows = rows(&out);
    assert!(!rows.is_empty(), "{out}");
    for r in &rows {
        for (h, half) in r.halves.iter().enumerate() {
            if !halves[h] {
                assert!(half.iter().all(|c| c == "N/A"), "{r:?}");
                continue;
            }
            for c in &half[..3] {
                let v: f64 = c.parse().unwrap_or_else(|_| panic!("number in {r:?}"));
                assert!(v >= 0.0, "{r:?}");
            }
            assert_eq!(half[3], "0", "wrong elements in {r:?}");
        }
    }
    rows
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ruccl-perf-{}-{name}", std::process::id()))
}

#[test]
fn all_reduce_every_dtype_and_op_is_exact_and_json_matches_the_table() {
    let json = temp("all_reduce.jsonl");
    let o = perf(&[
        "all_reduce",
        "-b",
        "8",
        "-e",
        "4K",
        "-f",
        "4",
        "-g",
        "3",
        "-d",
        "all",
        "-o",
        "all",
        "-c",
        "1",
        "-n",
        "2",
        "-w",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let rows = assert_clean(&o, true);
    // 10 dtypes x 6 ops x sizes 8, 32, 128, 512, 2048.
    assert_eq!(rows.len(), 10 * 6 * 5);
    let mut seen = std::collections::BTreeSet::new();
    for r in &rows {
        assert_eq!(r.root, -1);
        seen.insert((r.dtype.clone(), r.redop.clone()));
    }
    assert_eq!(seen.len(), 60, "{seen:?}");
    for (d, op) in [("bfloat16", "mulsum"), ("int8", "avg"), ("double", "prod")] {
        assert!(seen.contains(&(d.to_string(), op.to_string())));
    }
    let text = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    let records: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("each line is one JSON record")).collect();
    assert_eq!(records.len(), rows.len(), "one record per table row");
    for (rec, row) in records.iter().zip(&rows) {
        assert_eq!(rec["collective"], "all_reduce");
        assert_eq!(rec["size_bytes"].as_u64(), Some(row.size));
        assert_eq!(rec["count"].as_u64(), Some(row.count));
        assert_eq!(rec["type"].as_str(), Some(row.dtype.as_str()));
        assert_eq!(rec["redop"].as_str(), Some(row.redop.as_str()));
        assert_eq!(rec["ranks"], 3);
        assert_eq!(rec["out_of_place"]["wrong"], 0);
        assert_eq!(rec["in_place"]["wrong"], 0);
        assert!(rec["out_of_place"]["busbw_gbps"].as_f64().unwrap() >= 0.0);
        assert!(rec["ref"].is_null());
    }
}

#[test]
fn data_movement_collectives_check_clean_for_every_dtype() {
    for (args, in_place) in [
        (&["all_gather", "-b", "8", "-e", "1K", "-f", "8", "-g", "3"][..], true),
        (&["reduce_scatter", "-b", "8", "-e", "1K", "-f", "8", "-g", "2", "-o", "all"][..], true),
        (&["broadcast", "-b", "8", "-e", "1K", "-f", "8", "-g", "3", "-r", "-1"][..], true),
        (&["reduce", "-b", "8", "-e", "1K", "-f", "8", "-g", "3", "-r", "2", "-o", "max"][..], true),
        (&["all_to_all", "-b", "8", "-e", "1K", "-f", "8", "-g", "3"][..], true),
        (&["sendrecv", "-b", "8", "-e", "1K", "-f", "8", "-g", "3"][..], false),
        (&["gather", "-b", "8", "-e", "1K", "-f", "8", "-g", "3", "-r", "1"][..], false),
        (&["scatter", "-b", "8", "-e", "1K", "-f", "8", "-g", "3", "-r", "-1"][..], false),
    ] {
        let mut a = args.to_vec();
        a.extend(["-d", "all", "-c", "1", "-n", "2", "-w", "1"]);
        let rows = assert_clean(&perf(&a), in_place);
        let coll = args[0];
        if coll == "broadcast" || coll == "scatter" {
            let roots: std::collections::BTreeSet<i64> = rows.iter().map(|r| r.root).collect();
            assert_eq!(roots.into_iter().collect::<Vec<_>>(), vec![0, 1, 2], "{coll}");
        }
        if coll == "all_gather" {
            // nccl-tests sizes: size = count * ranks * typesize, count = size / typesize / ranks.
            let r = rows.iter().find(|r| r.dtype == "float").unwrap();
            assert_eq!((r.size, r.count), (0, 0));
            let r = rows.iter().rfind(|r| r.dtype == "float").unwrap();
            assert_eq!((r.size, r.count), (504, 42));
            assert_eq!(r.redop, "none");
        }
    }
}

/// Counts of 0 (8 B of double over 3 ranks) are valid calls; the first in-place all_to_all
/// of 0 elements once failed with "plan uses unbound slot Scratch".
#[test]
fn all_to_all_with_zero_counts() {
    let args = ["all_to_all", "-b", "8", "-e", "64", "-f", "2", "-g", "3", "-d", "double", "-n", "1", "-w", "0"];
    let rows = assert_clean(&perf(&args), true);
    assert_eq!(rows[0].count, 0);
}

#[test]
fn ref_lines_follow_rows() {
    let json = temp("ref.jsonl");
    let o = perf(&[
        "all_gather",
        "-b",
        "1K",
        "-e",
        "16K",
        "-f",
        "4",
        "-g",
        "2",
        "-n",
        "2",
        "-w",
        "0",
        "--ref",
        "--json",
        json.to_str().unwrap(),
    ]);
    let rows = assert_clean(&o, true);
    let out = stdout(&o);
    for what in ["ref: memcpy, 1 thread", "ref: streaming copy (ruCCL), 1 thread", "ref: memcpy, 2 threads at once"] {
        let refs = out.lines().filter(|l| l.contains(what)).count();
        assert_eq!(refs, rows.len(), "{what}: {out}");
    }
    let text = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&json);
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["ref"]["bw_gbps"].as_f64().unwrap() > 0.0, "{l}");
        assert!(v["ref"]["memcpy_2_threads_bw_gbps"].as_f64().unwrap() > 0.0, "{l}");
    }
}

/// One rank cannot run sendrecv: a usage error, not an empty table ending in "OK".
#[test]
fn one_rank_sendrecv_is_refused_with_a_reason() {
    let o = perf(&["sendrecv", "-b", "8", "-e", "64", "-g", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("sendrecv needs at least 2 ranks"), "{}", stderr(&o));
}

/// More ranks than one process starts threads for: a usage error (it aborted in the runtime).
#[test]
fn too_many_ranks_in_one_process_are_refused() {
    let o = perf(&["all_reduce", "-b", "8", "-e", "8", "-g", "20000"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("at most 4096"), "{}", stderr(&o));
}

#[test]
fn bad_command_lines_fail_with_a_message() {
    for (args, needle) in [
        (&["all_reduce", "--bogus"][..], "unknown option"),
        (&["all_reduce", "-d", "float128"][..], "unknown datatype"),
        (&["all_reduce", "-o", "xor"][..], "unknown reduce op"),
        (&["all_reduce", "-b", "1M", "-e", "1K"][..], "invalid sizes"),
        (&["all_reduce", "-b", "lots"][..], "invalid size"),
        (&["all_reduce", "-n"][..], "needs a value"),
        (&["broadcast", "-g", "2", "-r", "5"][..], "out of range"),
        (&["allscan"][..], "unknown collective"),
        (&["-g", "2"][..], "no collective"),
        (&["all_reduce", "--transport", "udp"][..], "unknown transport"),
        (&["all_reduce", "--world", "2", "--rank", "0"][..], "go together"),
        (&["all_reduce", "--world", "2", "--rank", "0", "--master", "h:1", "--group"][..], "use neither"),
        (&["all_reduce", "--device", "metal"][..], "is not compiled into this build; compiled-in devices: host"),
        (&["all_reduce", "--device", "tpu"][..], "unknown device"),
        (&["all_reduce", "--distinct"][..], "--distinct needs a GPU --device"),
        (&["all_reduce", "--algo", "warp"][..], "unknown algorithm"),
        (&["all_to_all", "-g", "2", "--api", "peer"][..], "--api peer supports: all_reduce"),
        (&["all_reduce", "--api", "peer", "-d", "int32"][..], "float tensors only"),
        (&["all_reduce", "--api", "peer", "--group"][..], "cannot be combined"),
        (&["all_reduce", "--api", "nccl"][..], "unknown --api"),
        (&["all_reduce", "--nonblocking", "--group"][..], "cannot be combined with --group"),
        (&["all_reduce", "--nonblocking", "--api", "peer"][..], "cannot be combined with --api peer"),
    ] {
        let o = perf(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(rows(&stdout(&o)).is_empty());
    }
}

#[test]
fn help_documents_the_flags() {
    let o = perf(&["--help"]);
    assert!(o.status.success());
    let h = stdout(&o);
    for flag in ["-b,", "-e,", "-f,", "-g,", "-n,", "-w,", "-c,", "-o,", "-d,", "-r,", "-z,", "-T,"] {
        assert!(h.contains(flag), "{flag} missing from --help");
    }
    for word in [
        "--device",
        "--distinct",
        "--transport",
        "--algo",
        "--json",
        "--ref",
        "always block",
        "--group",
        "--nonblocking",
        "--api",
        "--world",
        "--tcp-ref",
        "SEVERAL PROCESSES",
    ] {
        assert!(h.contains(word), "{word} missing from --help");
    }
}

/// Every collective of the threaded run, at small sizes, with `mode`'s flag: each checks
/// clean, with the halves it has, and the header says `header`. `extra`: further rows.
fn every_collective_checks_clean(mode: &str, header: &str, extra: &[(&[&str], [bool; 2])]) {
    let rows: [(&[&str], [bool; 2]); 9] = [
        (&["all_reduce", "-g", "4", "-d", "all", "-o", "all"], [true, true]),
        (&["all_gather", "-g", "3"], [true, true]),
        (&["reduce_scatter", "-g", "3", "-o", "max"], [true, true]),
        (&["broadcast", "-g", "3", "-r", "-1"], [true, true]),
        (&["reduce", "-g", "3", "-r", "2"], [true, true]),
        (&["all_to_all", "-g", "3"], [true, true]),
        (&["gather", "-g", "3", "-r", "-1"], [true, false]),
        (&["scatter", "-g", "4", "-r", "1"], [true, false]),
        (&["sendrecv", "-g", "3"], [true, false]),
    ];
    for (args, halves) in rows.iter().chain(extra) {
        let mut a = args.to_vec();
        a.extend(["-b", "8", "-e", "1K", "-f", "8", "-c", "1", "-n", "2", "-w", "1", mode]);
        let o = perf(&a);
        assert_clean_halves(&o, *halves);
        assert!(stdout(&o).contains(header), "{mode} {args:?}: {}", stdout(&o));
    }
}

/// `--group`: one thread drives every rank through `Group`; the same checker runs, and the
/// halves are those of the threaded run (gather, scatter and sendrecv have no in-place half).
#[test]
fn group_mode_checks_clean() {
    every_collective_checks_clean("--group", "--group: all driven by one thread", &[]);
}

/// `--nonblocking`: each call is its `_async` form, then `Work::wait`; the same checker runs,
/// both halves where the blocking run has them, over threads and over TCP.
#[test]
fn nonblocking_mode_checks_clean() {
    every_collective_checks_clean(
        "--nonblocking",
        "# --nonblocking: each timed call is its _async form",
        &[
            (&["all_reduce", "-g", "2", "--transport", "tcp"], [true, true]),
            (&["all_to_allv", "-g", "3"], [true, false]),
        ],
    );
}

/// `--api peer`: one thread per peer of `ruccl::api`; only all_reduce has an in-place half
/// (each call is handed the only handle on its tensor), the others return new tensors.
#[test]
fn peer_api_checks_clean() {
    for args in [
        &["all_reduce", "-g", "4", "-o", "all"][..],
        &["all_reduce", "-g", "2", "-d", "bf16", "-o", "avg"][..],
        &["broadcast", "-g", "3", "-r", "-1", "-d", "half"][..],
        &["reduce", "-g", "3", "-r", "1", "-d", "double"][..],
        &["all_gather", "-g", "3"][..],
        &["reduce_scatter", "-g", "3"][..],
    ] {
        let mut a = args.to_vec();
        a.extend(["-b", "8", "-e", "1K", "-f", "8", "-c", "1", "-n", "2", "-w", "1", "--api", "peer"]);
        let o = perf(&a);
        assert_clean_halves(&o, [true, args[0] == "all_reduce"]);
        assert!(stdout(&o).contains("--api peer: ruccl::api peers"), "{}", stdout(&o));
    }
}

/// Without the `cuda` feature, `--device cuda` is a usage error naming the devices there are.
#[cfg(not(feature = "cuda"))]
#[test]
fn a_device_not_compiled_in_is_a_usage_error() {
    let o = perf(&["all_reduce", "--device", "cuda"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("device \"cuda\" is not compiled into this build"), "{}", stderr(&o));
}

/// With the `cuda` feature on a machine without a CUDA driver or GPU, `--device cuda` says so
/// in one line and exits 1 (no panic); with a GPU it runs and checks clean.
#[cfg(feature = "cuda")]
#[test]
fn cuda_runs_or_says_there_is_no_device() {
    let o =
        perf(&["all_reduce", "-b", "1K", "-e", "4K", "-f", "4", "-g", "2", "-n", "2", "-w", "1", "--device", "cuda"]);
    if o.status.code() == Some(1) && stderr(&o).contains("no device to run on") {
        assert_eq!(stderr(&o).lines().count(), 1, "one line: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        eprintln!("SKIPPED the CUDA run: {}", stderr(&o).trim());
        return;
    }
    assert_clean(&o, true);
    assert!(stdout(&o).contains("device: cuda:0"), "{}", stdout(&o));
}

/// `--device wgpu` (ranks sharing the default adapter's device) and `--distinct` (one device
/// per rank, staged through host memory), in each driver mode: every row checked on the GPU.
/// Skipped, with the reason printed, where no wgpu adapter can be opened.
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_devices_check_clean() {
    let runs: [(&[&str], [bool; 2], &str); 6] = [
        (&["all_reduce", "-g", "2", "-d", "all"], [true, true], "shared by 2 rank(s)"),
        (&["all_reduce", "-g", "3", "-o", "avg", "--distinct"], [true, true], "one per rank: wgpu"),
        (&["all_gather", "-g", "3", "-d", "half"], [true, true], "shared by 3 rank(s)"),
        (&["reduce_scatter", "-g", "2", "-d", "bf16", "--distinct"], [true, true], "one per rank: wgpu"),
        (&["all_reduce", "-g", "3", "-d", "int8", "--group"], [true, true], "shared by 3 rank(s)"),
        (&["all_reduce", "-g", "2", "--api", "peer"], [true, true], "shared by 2 rank(s)"),
    ];
    for (args, halves, device) in runs {
        let mut a = args.to_vec();
        a.extend(["-b", "64", "-e", "1K", "-f", "16", "-c", "1", "-n", "2", "-w", "1", "--device", "wgpu"]);
        let o = perf(&a);
        if o.status.code() == Some(1) && stderr(&o).contains("no device to run on") {
            assert_eq!(stderr(&o).lines().count(), 1, "one line: {}", stderr(&o));
            eprintln!("SKIPPED the wgpu runs: {}", stderr(&o).trim());
            return;
        }
        assert_clean_halves(&o, halves);
        assert!(stdout(&o).contains(device), "{a:?}: {}", stdout(&o));
    }
}

/// Runs `args` as ranks 0..n of one launch, each in its own process (`vars(rank)` adds
/// environment variables); returns every process's output, rank order.
fn processes(n: usize, args: &[&str], vars: impl Fn(usize, u16) -> Vec<(String, String)>) -> Vec<Output> {
    let port = ruccl::launch::free_port().expect("a free port");
    let children: Vec<_> = (0..n)
        .map(|r| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ruccl-perf"));
            c.args(args.iter().map(|a| a.replace("{rank}", &r.to_string()).replace("{port}", &port.to_string())))
                .env_remove("RUCCL_ALGO")
                .env_remove("RUCCL_CHUNK_BYTES")
                .env_remove("RUCCL_TRANSPORT")
                .env_remove("RUCCL_SHM_DISABLE")
                .envs(vars(r, port))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            c.spawn().expect("ruccl-perf starts")
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().expect("ruccl-perf ends")).collect()
}

#[test]
fn two_processes_print_one_table() {
    let args = [
        "all_reduce",
        "-b",
        "8",
        "-e",
        "4K",
        "-f",
        "8",
        "-d",
        "float",
        "-c",
        "2",
        "-n",
        "2",
        "-w",
        "1",
        "-T",
        "60",
        "--world",
        "2",
        "--rank",
        "{rank}",
        "--master",
        "127.0.0.1:{port}",
        "--tcp-ref",
    ];
    let out = processes(2, &args, |_, _| Vec::new());
    let rows = assert_clean(&out[0], true);
    assert_eq!(rows.len(), 4, "sizes 8, 64, 512, 4096");
    let text = stdout(&out[0]);
    assert_eq!(text.matches("# Out of bounds values").count(), 1, "{text}");
    assert!(text.contains("transport: per pair"), "{text}");
    // The harness sets no RUCCL_SHM_DISABLE: the two processes of this host share memory.
    let shm = if cfg!(target_os = "linux") { "shared memory" } else { "tcp" };
    assert!(text.contains(&format!("# links from rank 0: {shm} to rank 1")), "{text}");
    assert_eq!(text.matches("# tcp-ref: ").count(), 3, "stream, round trip, streams at once: {text}");
    assert!(text.contains("2 loopback TCP streams at once"), "{text}");
    assert!(out[1].status.success(), "rank 1: {:?}\n{}", out[1].status, stderr(&out[1]));
    assert!(stdout(&out[1]).is_empty(), "only rank 0 prints: {}", stdout(&out[1]));
}

/// Several ranks per process (`-g 2` with 2 processes: ranks 0-1 and 2-3), as nccl-tests built
/// with MPI: rank 0 prints the one table with every rank's check.
#[test]
fn two_processes_of_two_ranks_each() {
    let args = [
        "reduce_scatter",
        "-b",
        "64",
        "-e",
        "64K",
        "-f",
        "32",
        "-g",
        "2",
        "-c",
        "1",
        "-n",
        "2",
        "-w",
        "1",
        "-T",
        "60",
        "--world",
        "2",
        "--rank",
        "{rank}",
        "--master",
        "127.0.0.1:{port}",
    ];
    let out = processes(2, &args, |_, _| Vec::new());
    let rows = assert_clean(&out[0], true);
    assert_eq!(rows.len(), 3, "sizes 64, 2K, 64K");
    let text = stdout(&out[0]);
    assert!(text.contains("# ranks: 4 ") && text.contains("Ranks 2..3 in the other processes"), "{text}");
    assert!(out[1].status.success(), "rank 1: {:?}\n{}", out[1].status, stderr(&out[1]));
    assert!(stdout(&out[1]).is_empty(), "only rank 0 prints: {}", stdout(&out[1]));
}

#[test]
fn torchrun_variables_make_one_rank_per_process() {
    let args = ["broadcast", "-b", "64", "-e", "64", "-r", "1", "-n", "2", "-w", "1", "-T", "60"];
    let out = processes(2, &args, |r, port| {
        [
            ("RANK", r.to_string()),
            ("WORLD_SIZE", "2".into()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    });
    let rows = assert_clean(&out[0], true);
    assert_eq!((rows.len(), rows[0].root), (1, 1));
    assert!(out[1].status.success(), "{}", stderr(&out[1]));
}

#[test]
fn a_failure_on_one_process_fails_every_process() {
    // Rank 1 runs doubles where rank 0 runs floats: both get a mismatch, both exit 1.
    let args = [
        "all_reduce",
        "-b",
        "64",
        "-e",
        "64",
        "-d",
        "{dtype}",
        "-n",
        "1",
        "-w",
        "0",
        "-T",
        "30",
        "--world",
        "2",
        "--rank",
        "{rank}",
        "--master",
        "127.0.0.1:{port}",
    ];
    let port = ruccl::launch::free_port().expect("a free port");
    let children: Vec<_> = ["float", "double"]
        .iter()
        .enumerate()
        .map(|(r, d)| {
            Command::new(env!("CARGO_BIN_EXE_ruccl-perf"))
                .args(args.iter().map(|a| {
                    a.replace("{rank}", &r.to_string()).replace("{port}", &port.to_string()).replace("{dtype}", d)
                }))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (r, c) in children.into_iter().enumerate() {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(1), "rank {r}: {}\n{}", stdout(&o), stderr(&o));
        // The mismatch itself on both ranks, named at once: a rank that waited out its
        // timeout instead (a mismatch it never saw) fails here.
        assert!(
            stderr(&o).contains("failed") && stderr(&o).contains("mismatched collectives"),
            "rank {r}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn threads_over_tcp_check_clean() {
    let o =
        perf(&["all_reduce", "-g", "3", "--transport", "tcp", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"]);
    let rows = assert_clean(&o, true);
    assert_eq!(rows.len(), 5);
    assert!(stdout(&o).contains("transport: tcp"), "{}", stdout(&o));
}

/// A reader that stops early (`ruccl-perf … | head -1`): the run ends quietly with success,
/// as nccl-tests killed by `SIGPIPE` does, never with `println!`'s "failed printing to
/// stdout" panic and its backtrace.
#[test]
fn a_reader_that_stops_early_ends_the_run_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = command(&["all_reduce", "-b", "8", "-e", "4M", "-f", "2", "-g", "2", "-n", "2", "-w", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ruccl-perf runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("# ruccl-perf all_reduce"), "{first}");
    // The reader is dropped here: every later write finds the pipe closed.
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
}

/// nccl-tests' flags that change nothing here are accepted at that value (scripts written for
/// `all_reduce_perf` pass them), and refused at any other, saying why.
#[test]
fn nccl_tests_no_op_flags_are_accepted_at_their_no_op_values() {
    let o =
        perf(&["all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-m", "1", "-G", "0", "-N", "1", "-C", "0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = perf(&["all_reduce", "-b", "8", "-e", "8", "-G", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("ruCCL has no CUDA graph launches"), "{}", stderr(&o));
}

/// A rank that never comes: the library's warnings while rank 0 waits for it reach standard
/// error (the tool installs a printer: ruCCL installs no `tracing` subscriber), before the
/// timeout's error.
#[test]
fn the_librarys_warnings_are_printed_while_a_rank_is_missing() {
    let port = ruccl::launch::free_port().expect("a free port").to_string();
    let master = format!("127.0.0.1:{port}");
    let o =
        command(&["all_reduce", "-b", "8", "-e", "8", "--world", "2", "--rank", "0", "--master", &master, "-T", "2"])
            .env("RUCCL_WARN_AFTER", "0.5")
            .output()
            .expect("ruccl-perf runs");
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("# ruccl WARN: rank 0 has waited") && err.contains("rank(s) 1 have not joined yet"), "{err}");
}
