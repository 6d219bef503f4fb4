//! A look before the run at whether this process's ranks' buffers fit in host memory. The
//! host device's memory is the process's: Linux hands out more than it has (overcommit), so
//! a run of rows too large for the machine does not fail to allocate; the kernel kills it
//! while its buffers are filled, with no word from ruccl-perf ("Killed", status 137). What
//! it needs at least — every local rank's input and output at the largest row — is compared
//! with what the kernel says is available; more than that ends the run before it starts,
//! saying how much and what to lower.

use crate::case;
use crate::run::Plan;
use crate::table::Coll;

/// The least host memory, in bytes, that `local` ranks of `ranks` need for `plan`'s largest
/// row of `coll`: each rank's input and output (out of place: the larger of the two
/// placements), nothing of ruCCL's own. The harness fills and checks buffers a piece at a
/// time (`case::PIECE`), so its own host copies add nothing of a buffer's size.
pub fn needed(plan: &Plan, coll: Coll, ranks: usize, local: usize) -> u64 {
    let per_rank = plan
        .rows
        .iter()
        .map(|r| {
            let (i, o) = case::lens(coll, r.shape.count, ranks);
            let size = plan.combos.get(r.combo).map_or(1, |c| c.dtype.size());
            (i as u64).saturating_add(o as u64).saturating_mul(size as u64)
        })
        .max()
        .unwrap_or(0);
    per_rank.saturating_mul(local as u64)
}

/// Bytes the kernel says can still be had: `MemAvailable` plus `SwapFree` of a
/// `/proc/meminfo` text; `None` when it says neither.
pub fn available_in(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?.trim();
            let kib: u64 = rest.strip_suffix("kB").unwrap_or(rest).trim().parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    match (field("MemAvailable"), field("SwapFree")) {
        (None, None) => None,
        (m, s) => Some(m.unwrap_or(0).saturating_add(s.unwrap_or(0))),
    }
}

/// This machine's available memory (Linux's `/proc/meminfo`; `None` elsewhere).
pub fn available() -> Option<u64> {
    available_in(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The refusal when `need` is more than `avail`: `None` when it fits.
pub fn refusal(need: u64, avail: u64, local: usize) -> Option<String> {
    (need > avail).then(|| {
        format!(
            "the largest row needs at least {} of host memory for this process's {local} rank(s) (each rank's \
             input and output), more than the {} this machine has available (MemAvailable + SwapFree); lower -e, \
             or run fewer ranks per process (-g, -t)",
            gib(need),
            gib(avail)
        )
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn available_memory_is_read_from_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   1000 kB\nSwapTotal: 0 kB\nSwapFree:  24 kB\n";
        assert_eq!(available_in(text), Some(1024 * 1024));
        assert_eq!(available_in("MemAvailable: 2 kB\n"), Some(2048));
        assert_eq!(available_in("MemTotal: 5 kB\n"), None);
        assert_eq!(available_in("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn a_run_larger_than_memory_is_refused_with_the_figures() {
        assert_eq!(refusal(10, 10, 1), None);
        let r = refusal(128 << 30, 23 << 30, 64).unwrap();
        assert!(
            r.contains("128.0 GiB") && r.contains("23.0 GiB") && r.contains("64 rank(s)") && r.contains("-e"),
            "{r}"
        );
    }
}
