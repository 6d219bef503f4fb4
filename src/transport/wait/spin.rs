//! The spin policy of waits: whether live ranks each have a core ([`Cores`]), and how long a
//! thread spins before it yields ([`Spin`], adapting to whether spinning paid). Pure but for
//! reading the machine's cores.

/// The cores ranks may spin on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cores {
    /// Those this process may run on (its affinity mask, and a cgroup quota).
    own: usize,
    /// Those of the host that the processes of this host share: the CPUs online, or a cgroup
    /// quota where one limits this process (it limits its peers of the same job alike).
    host: usize,
}

impl Cores {
    pub(super) fn find() -> Self {
        let own = std::thread::available_parallelism().map_or(1, usize::from);
        let (mask, online) = affinity_and_online();
        // `available_parallelism` below the affinity mask is a cgroup quota.
        let host = if own < mask { own } else { online.max(own) };
        Cores { own, host }
    }

    /// Whether `mine` ranks of this process and `others` of this host's other processes each
    /// have a core. Pure.
    pub(super) fn fit(self, mine: usize, others: usize) -> bool {
        mine <= self.own && mine + others <= self.host
    }
}

/// The CPUs in this process's affinity mask, and those online (Linux); elsewhere both are
/// `available_parallelism`.
fn affinity_and_online() -> (usize, usize) {
    let avail = std::thread::available_parallelism().map_or(1, usize::from);
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: `cpu_set_t` is plain data, zeroed is a valid empty set, and
        // `sched_getaffinity` writes at most `size_of::<cpu_set_t>()` bytes into it.
        let mask = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                usize::try_from(libc::CPU_COUNT(&set)).unwrap_or(avail)
            } else {
                avail
            }
        };
        // SAFETY: `sysconf` reads a system value; no memory is passed.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        (mask.max(1), usize::try_from(online).ok().filter(|&n| n > 0).unwrap_or(avail))
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        (avail, avail)
    }
}

/// Most spin iterations before yielding. A `pause` costs 3-40 ns by CPU (~30 ns on this
/// project's 2-core KVM machine, so 200 are ~6 us).
pub(super) const SPIN: u32 = 200;
/// Spin iterations a thread whose spins stopped paying first tries every [`PROBE_EVERY`]
/// waits, to notice when its peers run beside it again.
const PROBE: u32 = 8;
/// How often a thread that does not spin first probes.
const PROBE_EVERY: u32 = 8;
/// The longest probe: a probe that fails doubles the next one's spins up to this (a round
/// trip longer than [`PROBE`] pauses, as across sockets, could never pay back otherwise),
/// and then the waits between probes, up to [`PROBE_EVERY_MAX`].
const PROBE_MAX: u32 = SPIN / 2;
/// The most waits between two probes: a thread whose spins never pay spends at most
/// [`PROBE_MAX`] pauses per this many waits (~2 pauses a wait).
const PROBE_EVERY_MAX: u32 = 64;

/// How long a thread spins before it yields: the spin budget adapts to whether spinning
/// ended the thread's recent waits. Live ranks may fit on the cores while other processes
/// hold them, or the scheduler may put two ranks on one core; a waiter then spins out its
/// whole budget on the core the awaited peer needs, every wait (two ranks' 8-byte all_reduce
/// took 10-20 us instead of 2 that way). A wait that spins out its budget halves it; one
/// that ends while spinning doubles it, up to [`SPIN`]; at zero a thread still probes, with
/// [`PROBE`] spins every [`PROBE_EVERY`] waits at first, and longer probes further apart
/// while they fail (up to [`PROBE_MAX`] spins every [`PROBE_EVERY_MAX`] waits). Pure: no
/// clock, no I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spin {
    budget: u32,
    /// Waits since the last probe, while the budget is zero.
    idle: u32,
    /// The next probe's spins, and the waits before it, while the budget is zero.
    probe: u32,
    every: u32,
}

impl Spin {
    /// A thread starts out spinning fully.
    pub(crate) const fn new() -> Self {
        Spin { budget: SPIN, idle: 0, probe: PROBE, every: PROBE_EVERY }
    }

    /// Spin iterations for the next wait.
    pub(crate) fn spins(&mut self) -> u32 {
        if self.budget > 0 {
            return self.budget;
        }
        self.idle += 1;
        if self.idle >= self.every {
            self.idle = 0;
            self.probe
        } else {
            0
        }
    }

    /// Records how a wait that spun `spun` iterations went: `paid` when it ended while
    /// spinning.
    pub(crate) fn record(&mut self, spun: u32, paid: bool) {
        if spun == 0 {
            return;
        }
        if paid {
            self.budget = (self.budget.max(spun) * 2).min(SPIN);
            (self.probe, self.every) = (PROBE, PROBE_EVERY);
        } else if self.budget > 0 {
            self.budget /= 2;
        } else if self.probe < PROBE_MAX {
            self.probe = (self.probe * 2).min(PROBE_MAX);
        } else {
            self.every = (self.every * 2).min(PROBE_EVERY_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_spin_only_where_each_has_a_core() {
        // mpirun binds each of 2 processes to a core of its own: both spin.
        let bound = Cores { own: 1, host: 2 };
        assert!(bound.fit(1, 1));
        // 4 processes on 2 cores, or two ranks of one bound process: none spins.
        assert!(!bound.fit(1, 3));
        assert!(!bound.fit(2, 0));
        // Unbound on 2 cores: 2 ranks as threads, or 2 processes, spin; 3 do not.
        let free = Cores { own: 2, host: 2 };
        assert!(free.fit(2, 0) && free.fit(1, 1) && !free.fit(2, 1));
        let found = Cores::find();
        assert!(found.own >= 1 && found.host >= found.own, "{found:?}");
    }

    #[test]
    fn spin_budget_adapts() {
        let mut s = Spin::new();
        assert_eq!(s.spins(), SPIN);
        // Spins that do not pay shrink the budget to nothing...
        for _ in 0..8 {
            let n = s.spins();
            s.record(n, false);
        }
        assert_eq!(s.budget, 0);
        // ...after which one wait in PROBE_EVERY probes with a few spins,
        let probes: Vec<u32> = (0..2 * PROBE_EVERY).map(|_| s.spins()).collect();
        assert_eq!(probes.iter().filter(|&&n| n == PROBE).count(), 2);
        assert!(probes.iter().all(|&n| n == 0 || n == PROBE));
        // and a probe that pays grows the budget back to the full spin.
        let mut failing = s;
        s.record(PROBE, true);
        assert_eq!(s.budget, 2 * PROBE);
        for _ in 0..16 {
            let n = s.spins();
            s.record(n, true);
        }
        assert_eq!(s.spins(), SPIN);
        // A wait that did not spin tells nothing.
        s.record(0, false);
        assert_eq!(s.spins(), SPIN);
        // Probes that fail grow (a round trip longer than PROBE pauses pays back only then),
        // then come further apart: at most PROBE_MAX spins every PROBE_EVERY_MAX waits.
        let mut spun = Vec::new();
        for _ in 0..4096 {
            let n = failing.spins();
            failing.record(n, false);
            spun.push(n);
        }
        let probes: Vec<u32> = spun.iter().copied().filter(|&n| n > 0).collect();
        assert_eq!(probes[..5], [PROBE, 2 * PROBE, 4 * PROBE, 8 * PROBE, PROBE_MAX]);
        assert!(spun[spun.len() - 1024..].iter().sum::<u32>() <= 1024 / PROBE_EVERY_MAX * PROBE_MAX);
        // A long probe that pays spins fully again, and starts probing short and often.
        failing.record(PROBE_MAX, true);
        assert_eq!(failing.spins(), SPIN);
        assert_eq!((failing.probe, failing.every), (PROBE, PROBE_EVERY));
    }
}
