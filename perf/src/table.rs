//! The nccl-tests table: which collectives exist, how a row's `size` becomes element counts,
//! the algbw/busbw arithmetic, and the exact column formats, so ruccl-perf output can be
//! read (and parsed) like `all_reduce_perf` output.

use ruccl::{DType, ReduceOp};

/// One benchmarked collective (one subcommand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    /// `all_to_all_single_with_splits` with even splits (what its uneven path costs).
    AllToAllV,
    SendRecv,
    Gather,
    Scatter,
}

impl Coll {
    pub const ALL: [Coll; 10] = [
        Coll::AllReduce,
        Coll::AllGather,
        Coll::ReduceScatter,
        Coll::Broadcast,
        Coll::Reduce,
        Coll::AllToAll,
        Coll::AllToAllV,
        Coll::SendRecv,
        Coll::Gather,
        Coll::Scatter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Coll::AllReduce => "all_reduce",
            Coll::AllGather => "all_gather",
            Coll::ReduceScatter => "reduce_scatter",
            Coll::Broadcast => "broadcast",
            Coll::Reduce => "reduce",
            Coll::AllToAll => "all_to_all",
            Coll::AllToAllV => "all_to_allv",
            Coll::SendRecv => "sendrecv",
            Coll::Gather => "gather",
            Coll::Scatter => "scatter",
        }
    }

    /// Accepts the subcommand names, the nccl-tests binary names (`all_reduce_perf`,
    /// `alltoall_perf`) and their spellings without underscores.
    pub fn parse(s: &str) -> Option<Coll> {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_suffix("_perf").unwrap_or(&s).replace(['_', '-'], "");
        Coll::ALL.into_iter().find(|c| c.name().replace('_', "") == s)
    }

    /// Whether the collective takes a reduce op.
    pub fn reduces(self) -> bool {
        matches!(self, Coll::AllReduce | Coll::ReduceScatter | Coll::Reduce)
    }

    /// Whether the collective takes a root.
    pub fn rooted(self) -> bool {
        matches!(self, Coll::Broadcast | Coll::Reduce | Coll::Gather | Coll::Scatter)
    }

    /// Whether ruCCL has an in-place form (gather, scatter, send/recv and all_to_allv have
    /// none).
    pub fn has_in_place(self) -> bool {
        !matches!(self, Coll::SendRecv | Coll::Gather | Coll::Scatter | Coll::AllToAllV)
    }

    /// Whether the per-rank `count` is a `1/n` share of the row's `size` (nccl-tests'
    /// `count/nranks` ops).
    fn per_rank_share(self) -> bool {
        matches!(
            self,
            Coll::AllGather | Coll::ReduceScatter | Coll::AllToAll | Coll::AllToAllV | Coll::Gather | Coll::Scatter
        )
    }

    /// The nccl-tests bus-bandwidth factor.
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Coll::AllReduce => 2.0 * (n - 1.0) / n,
            Coll::AllGather | Coll::ReduceScatter | Coll::AllToAll | Coll::AllToAllV | Coll::Gather | Coll::Scatter => {
                (n - 1.0) / n
            }
            Coll::Broadcast | Coll::Reduce | Coll::SendRecv => 1.0,
        }
    }

    /// nccl-tests' `getCollByteCount` for a requested `size`: the row's printed size in
    /// bytes (`max(sendBytes, recvBytes)`) and the printed `count` (the count passed to the
    /// NCCL call: per-rank block for the gather/scatter family).
    pub fn shape(self, size: usize, dtype: DType, n: usize) -> Shape {
        let total = size / dtype.size();
        if self.per_rank_share() {
            let count = total / n;
            Shape { bytes: count * n * dtype.size(), count }
        } else {
            Shape { bytes: total * dtype.size(), count: total }
        }
    }

    /// algbw and busbw in decimal GB/s, exactly as nccl-tests' `*GetBw`.
    pub fn bandwidth(self, count: usize, dtype: DType, n: usize, secs: f64) -> (f64, f64) {
        if secs <= 0.0 {
            return (0.0, 0.0);
        }
        let moved = if self.per_rank_share() { count * n } else { count };
        let alg = (moved * dtype.size()) as f64 / 1.0e9 / secs;
        (alg, alg * self.bus_factor(n))
    }
}

/// The size and count printed on a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub bytes: usize,
    pub count: usize,
}

/// nccl-tests' type names, so columns compare directly with `all_reduce_perf` output.
pub fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::I8 => "int8",
        DType::U8 => "uint8",
        DType::I32 => "int32",
        DType::U32 => "uint32",
        DType::I64 => "int64",
        DType::U64 => "uint64",
        DType::F16 => "half",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::BF16 => "bfloat16",
        _ => "?",
    }
}

/// nccl-tests' op names (`mulsum` is PreMulSum); `none` for collectives that do not reduce.
pub fn op_name(op: Option<ReduceOp>) -> &'static str {
    match op {
        None => "none",
        Some(ReduceOp::Sum) => "sum",
        Some(ReduceOp::Prod) => "prod",
        Some(ReduceOp::Min) => "min",
        Some(ReduceOp::Max) => "max",
        Some(ReduceOp::Avg) => "avg",
        Some(ReduceOp::PreMulSum(_)) => "mulsum",
    }
}

/// The three column-header lines, byte for byte as nccl-tests prints them.
pub fn header_lines() -> [String; 3] {
    [
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
            "", "", "", "", ""
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}",
            "size",
            "count",
            "type",
            "redop",
            "root",
            "time",
            "algbw",
            "busbw",
            "#wrong",
            "time",
            "algbw",
            "busbw",
            "#wrong"
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""
        ),
    ]
}

/// The five leading columns of a row.
pub fn row_prefix(bytes: usize, count: usize, dtype: DType, op: Option<ReduceOp>, root: i64) -> String {
    format!("{bytes:>12}  {count:>12}  {:>8}  {:>6}  {root:>6}", dtype_name(dtype), op_name(op))
}

/// nccl-tests' time format: 2 decimals under 100 us, 1 under 10 ms, none above.
pub fn fmt_time(us: f64) -> String {
    if us >= 10000.0 {
        format!("{us:>7.0}")
    } else if us >= 100.0 {
        format!("{us:>7.1}")
    } else {
        format!("{us:>7.2}")
    }
}

/// One half (out-of-place or in-place) of a row; `wrong` is `None` when not checked.
pub fn half(us: f64, alg: f64, bus: f64, wrong: Option<u64>) -> String {
    let wrong = wrong.map_or_else(|| "N/A".to_string(), |w| w.to_string());
    format!("  {}  {alg:>6.2}  {bus:>6.2}  {wrong:>5}", fmt_time(us))
}

/// The half printed where ruCCL has no such form.
pub fn half_na() -> String {
    format!("  {:>7}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A")
}

/// A `--ref` line under a row: one copy ceiling for the same size (`what`), in the time and
/// bandwidth columns (a comment line, so nccl-tests parsers skip it). The bandwidth of
/// several threads copying at once is their sum.
pub fn ref_line(bytes: usize, what: &str, us: f64, gbps: f64) -> String {
    format!("#{bytes:>11}  {:<38}  {}  {gbps:>6.2}  {gbps:>6.2}", format!("ref: {what}"), fmt_time(us))
}

/// C's `%g`: 6 significant digits, trailing zeros dropped, exponent form outside 1e-4..1e6.
pub fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v == 0.0 {
            "0".into()
        } else {
            format!("{v}")
        };
    }
    let exp = v.abs().log10().floor() as i32;
    // Rounding to 6 digits may carry into the next decade (999999.5 -> 1e+06).
    let exp = {
        let rounded: f64 = format!("{:.5e}", v).parse().unwrap_or(v);
        if rounded.abs() >= 10f64.powi(exp + 1) { exp + 1 } else { exp }
    };
    let trim = |s: String| -> String {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    };
    if !(-4..6).contains(&exp) {
        let s = format!("{:.5e}", v);
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{}e{}{:02}", trim(mant.to_string()), if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        trim(format!("{v:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_bandwidth_follow_nccl_tests() {
        let s = Coll::AllGather.shape(1000, DType::F32, 3);
        assert_eq!((s.bytes, s.count), (996, 83));
        let s = Coll::AllReduce.shape(1000, DType::F32, 3);
        assert_eq!((s.bytes, s.count), (1000, 250));
        let (alg, bus) = Coll::AllReduce.bandwidth(250, DType::F32, 4, 1e-6);
        assert!((alg - 1.0).abs() < 1e-12 && (bus - 1.5).abs() < 1e-12);
        let (alg, bus) = Coll::AllGather.bandwidth(250, DType::F32, 4, 1e-6);
        assert!((alg - 4.0).abs() < 1e-12 && (bus - 3.0).abs() < 1e-12);
        assert_eq!(Coll::parse("alltoall_perf"), Some(Coll::AllToAll));
        assert_eq!(Coll::parse("send_recv"), Some(Coll::SendRecv));
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_g(1.23456789), "1.23457");
        assert_eq!(fmt_g(0.5), "0.5");
        assert_eq!(fmt_g(12.0), "12");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g(0.00001234), "1.234e-05");
        assert_eq!(fmt_time(5.0), "   5.00");
        assert_eq!(fmt_time(123.45), "  123.5");
        assert_eq!(fmt_time(12345.6), "  12346");
        let h = header_lines();
        assert!(h[1].starts_with("#       size         count      type   redop    root"));
        assert_eq!(row_prefix(8, 2, DType::F32, Some(ReduceOp::Sum), -1).len(), 52);
    }
}
