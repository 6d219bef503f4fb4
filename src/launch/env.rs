//! Launcher environments as a pure function over a variable map: which rank this process is,
//! how many there are, and where the rendezvous root listens.
//! (The launchers, their variables and their precedence: the `launch` module's docs.)

use std::collections::HashMap;
use std::fmt;

use crate::error::{CollectiveError, ErrorKind};
use crate::types::Rank;

/// The launcher whose variables described this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Launcher {
    /// torchrun (or `RANK` / `WORLD_SIZE` set by hand or by a Kubernetes job).
    Torchrun,
    /// OpenMPI's `mpirun`.
    OpenMpi,
    /// Slurm's `srun`.
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => "torchrun",
            Launcher::OpenMpi => "OpenMPI",
            Launcher::Slurm => "Slurm",
        })
    }
}

/// What a launcher told this process.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchEnv {
    /// Which launcher's variables were used.
    pub launcher: Launcher,
    /// This process's rank.
    pub rank: Rank,
    /// The number of ranks.
    pub world_size: usize,
    /// This process's rank among those on its host, when the launcher says.
    pub local_rank: Option<Rank>,
    /// The rendezvous root's host (`MASTER_ADDR`).
    pub master_addr: String,
    /// `MASTER_PORT` (0 when only `RUCCL_MASTER_PORT` is set).
    pub master_port: u16,
    /// The port ruCCL's rendezvous root listens on: `RUCCL_MASTER_PORT` when set; under
    /// torchrun's agent store (`TORCHELASTIC_USE_AGENT_STORE=True`: torchrun's own process
    /// listens on `MASTER_PORT` for the whole job), `MASTER_PORT + 1`; else `MASTER_PORT`.
    pub port: u16,
    /// Where [`port`](Self::port) comes from, for messages (`"MASTER_PORT"`,
    /// `"RUCCL_MASTER_PORT"`, or `"MASTER_PORT + 1"` under torchrun's agent store).
    pub port_from: &'static str,
    /// The launcher's id of this job, when it sets one (`TORCHELASTIC_RUN_ID`, OpenMPI's `PMIX_NAMESPACE` or `OMPI_MCA_ess_base_jobid`, Slurm's `SLURM_JOB_ID`
    /// and `SLURM_STEP_ID`): part of the communicator's id, so that a rank of another job on
    /// the same `MASTER_ADDR:MASTER_PORT` is refused instead of joining this one.
    pub job: Option<String>,
    /// The interface to bind and advertise (`RUCCL_SOCKET_IFNAME`), if set.
    pub socket_ifname: Option<String>,
    /// Whether the launch spans several hosts, when the launcher says (`LOCAL_WORLD_SIZE` or
    /// `OMPI_COMM_WORLD_LOCAL_SIZE` below the world size, Slurm's `SLURM_NNODES` above 1).
    pub spans_hosts: Option<bool>,
}

/// Why the environment does not describe a launch: every missing and every bad variable.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchError {
    /// The launcher whose variables were looked at, if any was found.
    pub launcher: Option<Launcher>,
    /// Variables that must be set and are not.
    pub missing: Vec<&'static str>,
    /// Variables that are set to something unusable, or that contradict each other, each
    /// with the reason.
    pub invalid: Vec<String>,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.launcher {
            Some(l) => write!(f, "the {l} launch environment is incomplete or wrong")?,
            None => f.write_str(
                "no launcher environment found (set RANK and WORLD_SIZE as torchrun does, or run under mpirun or srun)",
            )?,
        }
        if !self.missing.is_empty() {
            write!(f, "; missing: {}", self.missing.join(", "))?;
        }
        if !self.invalid.is_empty() {
            write!(f, "; {}", self.invalid.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for LaunchError {}

impl From<LaunchError> for CollectiveError {
    fn from(e: LaunchError) -> Self {
        // mpirun and srun set the rank and size, never the rendezvous address.
        let address_only = matches!(e.launcher, Some(Launcher::OpenMpi | Launcher::Slurm))
            && !e.missing.is_empty()
            && e.missing.iter().all(|m| matches!(*m, "MASTER_ADDR" | "MASTER_PORT"));
        let hint = if address_only { NO_ADDRESS } else { INCOMPLETE };
        CollectiveError::new(ErrorKind::InvalidArgument, e.to_string()).with_source(e).with_hint(hint)
    }
}

/// The advice for a launch environment missing more than the rendezvous address.
const INCOMPLETE: &str = "start every process under torchrun, mpirun or srun, or set the variables yourself: the \
     rank and world size (the launchers set these), and MASTER_ADDR:MASTER_PORT, the host of rank 0 and a free port \
     there, the same in every process; the docs of ruccl::launch list every variable each launcher sets";

/// The advice under mpirun or srun without `MASTER_ADDR`/`MASTER_PORT`, which they never set.
const NO_ADDRESS: &str = "mpirun and srun set the rank and world size but not MASTER_ADDR and MASTER_PORT: pass \
     them to every process (mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=<free port>; under srun, export \
     them in the job script), the same in every process";

/// The job id `launcher` sets (the same in every process of one job, different in another
/// job), if it sets one.
fn job_of<'a>(launcher: Launcher, get: &impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    match launcher {
        // Not the restart count: torchrun's agents do not agree on it (one node's restart
        // leaves the others' counts behind), and its ranks refused each other.
        Launcher::Torchrun => get("TORCHELASTIC_RUN_ID").map(|run| format!("torchrun {run}")),
        Launcher::OpenMpi => {
            get("PMIX_NAMESPACE").or_else(|| get("OMPI_MCA_ess_base_jobid")).map(|j| format!("mpirun {j}"))
        }
        Launcher::Slurm => {
            let job = get("SLURM_JOB_ID").or_else(|| get("SLURM_JOBID"))?;
            Some(format!("slurm {job}.{}", get("SLURM_STEP_ID").or_else(|| get("SLURM_STEPID")).unwrap_or("-")))
        }
    }
}

/// The variables of one launcher: rank, size, local rank, local size.
struct Names {
    launcher: Launcher,
    rank: &'static str,
    size: &'static str,
    local_rank: &'static str,
    local_size: Option<&'static str>,
}

const LAUNCHERS: [Names; 3] = [
    Names {
        launcher: Launcher::Torchrun,
        rank: "RANK",
        size: "WORLD_SIZE",
        local_rank: "LOCAL_RANK",
        local_size: Some("LOCAL_WORLD_SIZE"),
    },
    Names {
        launcher: Launcher::OpenMpi,
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: Some("OMPI_COMM_WORLD_LOCAL_SIZE"),
    },
    Names {
        launcher: Launcher::Slurm,
        rank: "SLURM_PROCID",
        size: "SLURM_NTASKS",
        local_rank: "SLURM_LOCALID",
        local_size: None,
    },
];

impl LaunchEnv {
    /// Reads the launcher variables of `env` (see the module docs for the precedence).
    ///
    /// # Errors
    /// [`LaunchError`] naming every variable that is missing, malformed or contradicts
    /// another (a rank not below the world size, a local rank not below the local size, a
    /// port out of range).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use ruccl::launch::{LaunchEnv, Launcher};
    /// let env: HashMap<String, String> = [("RANK", "1"), ("WORLD_SIZE", "4"), ("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29500")]
    ///     .into_iter()
    ///     .map(|(k, v)| (k.to_string(), v.to_string()))
    ///     .collect();
    /// let l = LaunchEnv::from_map(&env)?;
    /// assert_eq!((l.launcher, l.rank, l.world_size, l.master_port), (Launcher::Torchrun, 1, 4, 29500));
    /// let partial: HashMap<String, String> = [("RANK".to_string(), "1".to_string())].into();
    /// let e = LaunchEnv::from_map(&partial).unwrap_err();
    /// assert_eq!(e.missing, ["WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]);
    /// # Ok::<(), ruccl::launch::LaunchError>(())
    /// ```
    pub fn from_map(env: &HashMap<String, String>) -> Result<Self, LaunchError> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let Some(names) = LAUNCHERS.iter().find(|n| get(n.rank).is_some() || get(n.size).is_some()) else {
            return Err(LaunchError { launcher: None, missing: Vec::new(), invalid: Vec::new() });
        };
        let mut err = LaunchError { launcher: Some(names.launcher), missing: Vec::new(), invalid: Vec::new() };
        // A stray RANK or WORLD_SIZE alone, under a launcher whose variables are all there:
        // not used in its place (never a silent fall-through), but named.
        if get(names.rank).is_none() || get(names.size).is_none() {
            let complete = LAUNCHERS.iter().find(|n| get(n.rank).is_some() && get(n.size).is_some());
            if let Some(n) = complete {
                let (set, unset) =
                    if get(names.rank).is_some() { (names.rank, names.size) } else { (names.size, names.rank) };
                err.invalid.push(format!(
                    "{set} is set without {unset}, which hides {}'s complete {}={} and {}={}: if {set} is left over \
                     in this environment (exported by hand), unset it",
                    n.launcher,
                    n.rank,
                    get(n.rank).unwrap_or_default(),
                    n.size,
                    get(n.size).unwrap_or_default()
                ));
            }
        }
        let mut number = |name: &'static str, required: bool| -> Option<usize> {
            match get(name) {
                None => {
                    if required {
                        err.missing.push(name);
                    }
                    None
                }
                Some(v) => match v.parse::<usize>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        err.invalid.push(format!("{name}={v:?} is not a non-negative integer"));
                        None
                    }
                },
            }
        };
        let rank = number(names.rank, true);
        let world = number(names.size, true);
        let local_rank = number(names.local_rank, false);
        let local_size = names.local_size.and_then(|n| number(n, false));
        // An IPv6 address may come in brackets ("[::1]", as in a URL or `[::1]:29500`).
        let addr = get("MASTER_ADDR")
            .map(|a| a.strip_prefix('[').and_then(|a| a.strip_suffix(']')).filter(|a| a.contains(':')).unwrap_or(a))
            .map(str::to_string);
        if addr.is_none() {
            err.missing.push("MASTER_ADDR");
        }
        let mut port_of = |name: &'static str| {
            get(name).and_then(|v| match v.parse::<u16>() {
                Ok(p) if p > 0 => Some(p),
                _ => {
                    err.invalid.push(format!("{name}={v:?} is not a port (1 to 65535)"));
                    None
                }
            })
        };
        let ruccl_port = port_of("RUCCL_MASTER_PORT");
        // Not needed, nor judged, when RUCCL_MASTER_PORT is set.
        let master_port = if get("RUCCL_MASTER_PORT").is_some() {
            get("MASTER_PORT").and_then(|v| v.parse::<u16>().ok())
        } else {
            port_of("MASTER_PORT")
        };
        let agent_store =
            get("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let port = match (ruccl_port, master_port) {
            (Some(p), _) => Some((p, "RUCCL_MASTER_PORT")),
            (None, Some(p)) if agent_store => match p.checked_add(1) {
                Some(p) => Some((p, "MASTER_PORT + 1")),
                None => {
                    err.invalid.push(format!(
                        "MASTER_PORT={p}: torchrun's agent listens there, and ruCCL's rendezvous takes the next \
                         port, which does not exist; set RUCCL_MASTER_PORT"
                    ));
                    None
                }
            },
            (None, Some(p)) => Some((p, "MASTER_PORT")),
            (None, None) => {
                if get("MASTER_PORT").is_none() {
                    err.missing.push("MASTER_PORT");
                }
                None
            }
        };
        if world == Some(0) {
            err.invalid.push(format!("{}=0: there must be at least one rank", names.size));
        }
        if let Some(w) = world.filter(|&w| w > crate::types::MAX_WORLD) {
            err.invalid.push(format!(
                "{}={w} is more than ruCCL's limit of {} ranks",
                names.size,
                crate::types::MAX_WORLD
            ));
        }
        if let (Some(r), Some(w)) = (rank, world)
            && w > 0
            && r >= w
        {
            err.invalid.push(format!("{}={r} is not below {}={w}", names.rank, names.size));
        }
        if let (Some(l), Some(w)) = (local_rank, world)
            && w > 0
            && l >= w
        {
            err.invalid.push(format!("{}={l} is not below {}={w}", names.local_rank, names.size));
        }
        if let (Some(l), Some(s), Some(sn)) = (local_rank, local_size, names.local_size)
            && l >= s
        {
            err.invalid.push(format!("{}={l} is not below {sn}={s}", names.local_rank));
        }
        if let (Some(s), Some(w), Some(sn)) = (local_size, world, names.local_size)
            && s > w
        {
            err.invalid.push(format!("{sn}={s} is more than {}={w}", names.size));
        }
        // Empty counts as unset, as for every RUCCL_* variable (`CommConfig::from_env`).
        let socket_ifname =
            env.get("RUCCL_SOCKET_IFNAME").map(|v| v.trim()).filter(|v| !v.is_empty()).map(str::to_string);
        let job = job_of(names.launcher, &get);
        let spans_hosts = match names.launcher {
            Launcher::Slurm => get("SLURM_NNODES")
                .or_else(|| get("SLURM_JOB_NUM_NODES"))
                .and_then(|v| v.parse::<usize>().ok())
                .map(|n| n > 1),
            _ => local_size.zip(world).map(|(l, w)| l < w),
        };
        match (rank, world, addr, port) {
            (Some(rank), Some(world_size), Some(master_addr), Some((port, port_from)))
                if err.missing.is_empty() && err.invalid.is_empty() =>
            {
                Ok(LaunchEnv {
                    launcher: names.launcher,
                    rank,
                    world_size,
                    local_rank,
                    master_addr,
                    master_port: master_port.unwrap_or(0),
                    port,
                    port_from,
                    socket_ifname,
                    job,
                    spans_hosts,
                })
            }
            _ => Err(err),
        }
    }

    /// What another launcher's variables in `env` say that this launch's (read from `env`)
    /// overrode: `Some` when this launch is torchrun's, no torchrun agent set them (its
    /// `TORCHELASTIC_RUN_ID` is absent), and OpenMPI's or Slurm's rank or size disagree —
    /// most often a `RANK` / `WORLD_SIZE` left exported in the shell that starts `mpirun` or
    /// `srun`, which then silently give every process the same numbers.
    pub(crate) fn shadows(&self, env: &HashMap<String, String>) -> Option<String> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        if self.launcher != Launcher::Torchrun || get("TORCHELASTIC_RUN_ID").is_some() {
            return None;
        }
        let (rank, size) = (self.rank.to_string(), self.world_size.to_string());
        LAUNCHERS.iter().filter(|n| n.launcher != Launcher::Torchrun).find_map(|n| {
            let (r, s) = (get(n.rank)?, get(n.size)?);
            (r != rank || s != size).then(|| {
                format!(
                    "RANK={rank} and WORLD_SIZE={size} are used, and {}={r} and {}={s} ({}'s) are not: torchrun's \
                     variables come first. If RANK and WORLD_SIZE are left over in this environment (exported by \
                     hand, no torchrun here), unset them, or every process takes the same rank",
                    n.rank, n.size, n.launcher
                )
            })
        })
    }

    /// Why this launch must not go on, given what it [`shadows`](Self::shadows): a world of
    /// one rank from `RANK` / `WORLD_SIZE` that another launcher's variables contradict. Such
    /// a process would join nobody and run every collective on its own, with no error — a
    /// `WORLD_SIZE=1` left exported before `mpirun -np 4` trains four separate models. (A
    /// stale world of several ranks fails at the join instead, where the note is added.)
    pub(crate) fn alone_by_mistake(&self, shadowed: Option<&str>) -> Option<String> {
        let why = shadowed.filter(|_| self.world_size == 1)?;
        Some(format!(
            "{why}. Refused: with WORLD_SIZE=1 this process would run alone, without an error, while the launcher \
             started others"
        ))
    }

    /// Reads this process's environment ([`from_map`](Self::from_map) over `std::env::vars`).
    ///
    /// # Errors
    /// As [`from_map`](Self::from_map).
    pub fn from_process() -> Result<Self, LaunchError> {
        Self::from_map(&std::env::vars().collect())
    }
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
