//! The printing thread's side: the run header, collecting every rank's half-rows into table
//! rows (printed in plan order as soon as complete), the `--json` records (one per row,
//! JSON Lines), and the nccl-tests footer.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use ruccl::CommConfig;
use serde_json::{Value, json};

use crate::args::{Average, Mode, Options, PREMUL_SCALAR};
use crate::check::FLOAT_ULPS;
use crate::run::{Failure, Msg, Plan};
use crate::table;

/// The lines printed before the table; `device` names the ranks' devices together, and
/// `per_rank[r]` rank `r`'s.
pub fn header(
    o: &Options,
    plan: &Plan,
    config: &CommConfig,
    device: &str,
    per_rank: &[String],
    notes: &[String],
) -> Vec<String> {
    let n = o.ranks();
    let mut h = vec![
        format!(
            "# ruccl-perf {} (ruCCL {}): nccl-tests columns, bandwidth in decimal GB/s",
            o.coll.name(),
            env!("CARGO_PKG_VERSION")
        ),
        format!(
            "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0",
            o.threads,
            o.gpus,
            o.min_bytes,
            o.max_bytes,
            if o.step_factor > 1 { o.step_factor } else { o.step_bytes },
            if o.step_factor > 1 { "factor" } else { "bytes" },
            o.warmup,
            o.iters,
            o.check
        ),
        format!(
            "# ranks: {n} ({})  device: {device}  transport: {}  algo: {}  timeout: {:?}  time: {}",
            match o.mode() {
                Mode::Threads if o.launch.is_some() && o.local_ranks() > 1 => {
                    "processes of the launch (--world/--rank/--master or the launcher's variables), -t x -g ranks each as threads, rank 0 prints"
                }
                Mode::Threads if o.launch.is_some() => {
                    "one per process (--world/--rank/--master or the launcher's variables), rank 0 prints"
                }
                Mode::Threads if config.shared_progress() => {
                    "threads in this process, ops driven by the shared progress thread (RUCCL_SHARED_PROGRESS)"
                }
                Mode::Threads => "threads in this process",
                Mode::Group => "--group: all driven by one thread, one ruccl::Group per call, time around run()",
                Mode::Peer => "--api peer: ruccl::api peers, one thread each",
            },
            transport_name(o),
            o.algo,
            config.timeout(),
            o.average.name()
        ),
    ];
    if o.nonblocking {
        h.push("# --nonblocking: each timed call is its _async form, then Work::wait".into());
    }
    if o.blocking {
        h.push("# Blocking: every ruCCL collective blocks until done; -z changes nothing".into());
    }
    if o.check > 0 {
        h.push(format!(
            "# check: small-integer inputs compared bit for bit (float avg and mulsum within {FLOAT_ULPS} ULP); mulsum scalar {PREMUL_SCALAR}"
        ));
    }
    if !o.coll.reduces() && o.ops.is_some() {
        h.push(format!("# note: {} does not reduce: -o is ignored (redop column: none)", o.coll.name()));
    }
    if !o.coll.rooted() && o.root.is_some() {
        h.push(format!("# note: {} has no root: -r is ignored (root column: -1)", o.coll.name()));
    }
    let halves = o.halves();
    if !o.coll.has_in_place() {
        h.push(format!("# note: ruCCL has no in-place {}: the in-place columns print N/A", o.coll.name()));
    } else if !halves[1] {
        h.push(format!("# note: --{} has no in-place {}: the in-place columns print N/A", mode_flag(o), o.coll.name()));
    }
    if !halves[0] {
        h.push(format!(
            "# note: --{} has no out-of-place {}: the out-of-place columns print N/A",
            mode_flag(o),
            o.coll.name()
        ));
    }
    if o.reference {
        h.push("# --ref: after each row, '#' lines with copies of the row's size (same run): one thread's memcpy, one thread's ruCCL streaming copy, two threads' memcpy at once".into());
    }
    h.extend(notes.iter().cloned());
    h.push("#".into());
    h.push("# Using devices".into());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let first = o.launch.as_ref().map_or(0, |l| l.rank);
    for (r, name) in per_rank.iter().enumerate() {
        let r = first + r;
        h.push(format!(
            "#  Rank {r:>2} Group  0 Pid {:>6} on {host:>10} device {r:>2} [{}] {name}",
            std::process::id(),
            o.device.name()
        ));
    }
    if o.launch.is_some() && n > per_rank.len() {
        h.push(format!("#  Ranks {}..{} in the other processes", per_rank.len(), n - 1));
    }
    h.push("#".into());
    if plan.rows.is_empty() {
        h.push("# no sizes in range: nothing to run".into());
    }
    h.extend(table::header_lines());
    h
}

/// How ranks talk: TCP between processes, else the `--transport` of this process's threads.
pub fn transport_name(o: &Options) -> &'static str {
    match (&o.launch, o.transport) {
        // Chosen per pair of ranks: the `# links` line says which.
        (Some(_), _) => "per pair",
        (None, ruccl::config::Transport::Tcp) => "tcp",
        _ => "inproc",
    }
}

fn mode_flag(o: &Options) -> &'static str {
    match o.mode() {
        Mode::Peer => "api peer",
        _ => "group",
    }
}

#[derive(Default)]
struct Pending {
    halves: [Vec<(usize, f64, Option<u64>)>; 2],
    reference: Option<crate::run::Reference>,
}

/// Collects messages and prints rows, JSON records and the footer.
pub struct Report<'a> {
    opts: &'a Options,
    plan: &'a Plan,
    json: Option<BufWriter<File>>,
    pending: Vec<Pending>,
    next: usize,
    /// (rank, half) checks that found wrong elements: nccl-tests' "Out of bounds values".
    bad_checks: u64,
    bw_sum: f64,
    bw_count: usize,
    pub failures: Vec<(usize, Failure)>,
    /// Whether this process prints (with one rank per process, rank 0 only; the others
    /// collect the same rows to learn whether any value was wrong).
    print: bool,
}

impl<'a> Report<'a> {
    pub fn new(opts: &'a Options, plan: &'a Plan, json: Option<File>, print: bool) -> Self {
        Report {
            opts,
            plan,
            json: json.map(BufWriter::new),
            pending: (0..plan.rows.len()).map(|_| Pending::default()).collect(),
            next: 0,
            bad_checks: 0,
            bw_sum: 0.0,
            bw_count: 0,
            failures: Vec::new(),
            print,
        }
    }

    /// Takes one message; prints every row that is now complete.
    pub fn on(&mut self, msg: Msg) -> io::Result<()> {
        match msg {
            Msg::Half { row, in_place, rank, secs, wrong } => {
                if let Some(p) = self.pending.get_mut(row) {
                    p.halves[usize::from(in_place)].push((rank, secs, wrong));
                }
            }
            Msg::Ref { row, secs } => {
                if let Some(p) = self.pending.get_mut(row) {
                    p.reference = Some(secs);
                }
            }
            Msg::Failed { rank, failure } => self.failures.push((rank, failure)),
        }
        while self.next < self.plan.rows.len() && self.complete(self.next) {
            self.print_row(self.next)?;
            self.next += 1;
        }
        Ok(())
    }

    fn complete(&self, k: usize) -> bool {
        let n = self.opts.ranks();
        let p = &self.pending[k];
        let [oop, ip] = self.opts.halves();
        (!oop || p.halves[0].len() == n)
            && (!ip || p.halves[1].len() == n)
            && (!self.opts.reference || !self.print || p.reference.is_some())
    }

    fn combine(&self, times: &[(usize, f64, Option<u64>)]) -> f64 {
        let it = times.iter().map(|t| t.1);
        match self.opts.average {
            Average::Rank0 => times.iter().find(|t| t.0 == 0).map_or(0.0, |t| t.1),
            Average::Mean => it.sum::<f64>() / times.len().max(1) as f64,
            Average::Min => it.fold(f64::INFINITY, f64::min),
            Average::Max => it.fold(0.0, f64::max),
        }
    }

    fn print_row(&mut self, k: usize) -> io::Result<()> {
        let o = self.opts;
        let n = o.ranks();
        let row = self.plan.rows[k];
        let combo = self.plan.combos[row.combo];
        let root = combo.root.map_or(-1, |r| r as i64);
        let mut line = table::row_prefix(row.shape.bytes, row.shape.count, combo.dtype, combo.op, root);
        let mut records: [Value; 2] = [Value::Null, Value::Null];
        for (h, rec) in records.iter_mut().enumerate() {
            if !o.halves()[h] {
                line.push_str(&table::half_na());
                continue;
            }
            let times = &self.pending[k].halves[h];
            let secs = self.combine(times);
            let (alg, bus) = o.coll.bandwidth(row.shape.count, combo.dtype, n, secs);
            let wrong = (o.check > 0).then(|| times.iter().filter_map(|t| t.2).sum::<u64>());
            self.bad_checks += times.iter().filter(|t| t.2.is_some_and(|w| w > 0)).count() as u64;
            self.bw_sum += bus;
            self.bw_count += 1;
            line.push_str(&table::half(secs * 1e6, alg, bus, wrong));
            *rec = json!({
                "time_us": secs * 1e6,
                "algbw_gbps": alg,
                "busbw_gbps": bus,
                "wrong": wrong,
            });
        }
        if !self.print {
            return Ok(());
        }
        crate::out::line(&line);
        let reference = self.pending[k].reference.map(|r| {
            let bytes = row.shape.bytes;
            let gbps = |secs: f64, copies: f64| if secs > 0.0 { copies * bytes as f64 / 1e9 / secs } else { 0.0 };
            let lines = [
                ("memcpy, 1 thread", r.memcpy, 1.0),
                ("streaming copy (ruCCL), 1 thread", r.stream, 1.0),
                ("memcpy, 2 threads at once", r.memcpy2, 2.0),
            ];
            for (what, secs, copies) in lines {
                crate::out::line(&table::ref_line(bytes, what, secs * 1e6, gbps(secs, copies)));
            }
            json!({
                "what": "memcpy, 1 thread", "time_us": r.memcpy * 1e6, "bw_gbps": gbps(r.memcpy, 1.0),
                "stream_time_us": r.stream * 1e6, "stream_bw_gbps": gbps(r.stream, 1.0),
                "memcpy_2_threads_time_us": r.memcpy2 * 1e6, "memcpy_2_threads_bw_gbps": gbps(r.memcpy2, 2.0),
            })
        });
        if let Some(w) = &mut self.json {
            let [oop, ip] = records;
            let rec = json!({
                "collective": o.coll.name(),
                "size_bytes": row.shape.bytes,
                "count": row.shape.count,
                "type": table::dtype_name(combo.dtype),
                "redop": table::op_name(combo.op),
                "op": combo.op.map(|op| op.to_string()),
                "root": root,
                "ranks": n,
                "device": "host",
                "transport": transport_name(o),
                "algo": o.algo.to_string(),
                "mode": if o.launch.is_some() { "processes" } else { o.mode().name() },
                "iters": o.iters,
                "warmup_iters": o.warmup,
                "time_average": o.average.name(),
                "out_of_place": oop,
                "in_place": ip,
                "ref": reference,
            });
            writeln!(w, "{rec}")?;
            w.flush()?;
        }
        Ok(())
    }

    /// Prints the footer; returns whether any element was wrong.
    pub fn footer(&mut self) -> io::Result<bool> {
        if let Some(w) = &mut self.json {
            w.flush()?;
        }
        let avg = if self.bw_count > 0 { self.bw_sum / self.bw_count as f64 } else { 0.0 };
        if !self.print {
            return Ok(self.bad_checks > 0);
        }
        // A run that stopped on an error is no pass, whatever its rows found (scripts grep
        // for the verdict).
        let verdict = match (self.bad_checks, self.failures.first()) {
            (_, Some(_)) => "FAILED (the run stopped on an error, shown below)".to_string(),
            (0, None) => "OK".to_string(),
            _ => "FAILED".to_string(),
        };
        crate::out::line(&format!("# Out of bounds values : {} {verdict}", self.bad_checks));
        crate::out::line(&format!("# Avg bus bandwidth    : {}", table::fmt_g(avg)));
        crate::out::line("#");
        Ok(self.bad_checks > 0)
    }
}
