//! One rank per process, as nccl-tests built with MPI: which rank this process is (from
//! `--world/--rank/--master`, or a launcher's environment: `mpirun`, torchrun, `srun`), and
//! the per-row exchange that lets every process see every rank's time and check result
//! through ruCCL's own collectives.

use std::collections::HashMap;

use ruccl::launch::LaunchEnv;
use ruccl::{Communicator, Tensor};

use crate::args::{Mode, Options, UsageError};
use crate::device::PerfDevice;
use crate::run::Failure;

/// The launchers' (rank, size) variables in `LaunchEnv`'s precedence.
const LAUNCHERS: [(&str, &str); 3] =
    [("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")];

/// This process's launch, or `None` when every rank is a thread of this process.
///
/// `--world N --rank R --master HOST:PORT` (all three) say it explicitly; otherwise the
/// first launcher whose variables are set in `env` does (see `ruccl::launch`). A launch of
/// one process (`srun -n 1`, `mpirun -np 1`) runs its ranks as threads (`-g`), so the tool
/// works unchanged inside a job step.
///
/// # Errors
/// A usage error for a partial `--world/--rank/--master`, a launcher's variables partly set
/// or contradicting each other, or a launch combined with `--group` or `--api peer`.
///
/// With several ranks per process (`-t` x `-g` = G above 1), the launch returned describes
/// the job's ranks: `rank` is this process's first (its launcher rank x G) and `world_size`
/// the launcher's size x G.
pub fn resolve(o: &Options, env: &HashMap<String, String>) -> Result<Option<LaunchEnv>, UsageError> {
    let launch = if o.world.is_some() || o.rank.is_some() || o.master.is_some() {
        let (Some(world), Some(rank), Some(master)) = (o.world, o.rank, &o.master) else {
            return Err(UsageError(
                "--world, --rank and --master go together (this process is rank R of N, the rendezvous at HOST:PORT)"
                    .into(),
            ));
        };
        let Some((host, port)) = master.rsplit_once(':') else {
            return Err(UsageError(format!("--master {master:?} is not HOST:PORT")));
        };
        contradiction(world, rank, env)?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let mut vars: HashMap<String, String> = [
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", world.to_string()),
            ("MASTER_ADDR", host.to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if let Some(v) = env.get("RUCCL_SOCKET_IFNAME") {
            vars.insert("RUCCL_SOCKET_IFNAME".into(), v.clone());
        }
        LaunchEnv::from_map(&vars).map_err(|e| UsageError(format!("--world/--rank/--master: {e}")))?
    } else {
        let one = LAUNCHERS
            .iter()
            .find(|(r, s)| env.contains_key(*r) || env.contains_key(*s))
            .is_some_and(|(_, s)| env.get(*s).is_some_and(|v| v.trim() == "1"));
        if one {
            return Ok(None);
        }
        match LaunchEnv::from_map(env) {
            Ok(l) => l,
            Err(e) if e.launcher.is_none() => return Ok(None),
            Err(e) => return Err(UsageError(e.to_string())),
        }
    };
    if o.mode() != Mode::Threads {
        return Err(UsageError(
            "--group and --api peer drive every rank from one process; with several processes use neither".into(),
        ));
    }
    // Several ranks per process (`-t` x `-g`, as nccl-tests built with MPI): process P of N
    // runs ranks P*G .. P*G+G-1 of N*G, one thread each. `launch` then describes the job's
    // ranks: its `rank` is this process's first, its `world_size` every process's ranks.
    let local = o.threads * o.gpus;
    let (Some(world), Some(rank)) = (launch.world_size.checked_mul(local), launch.rank.checked_mul(local)) else {
        return Err(UsageError(format!("{} processes x {local} ranks each is too many ranks", launch.world_size)));
    };
    let mut launch = launch;
    (launch.world_size, launch.rank) = (world, rank);
    Ok(Some(launch))
}

/// A usage error when `--world N --rank R` contradict the rank and size of the first launcher
/// whose variables `env` sets (say, four processes under `mpirun -np 4`, all started with
/// `--rank 0`: each would claim rank 0). A launch of one process (size 1: an allocation's shell,
/// `srun -n 1`) is no contradiction: there the flags say how to run several by hand.
fn contradiction(world: usize, rank: usize, env: &HashMap<String, String>) -> Result<(), UsageError> {
    let Some((rv, sv)) = LAUNCHERS.iter().find(|(r, s)| env.contains_key(*r) || env.contains_key(*s)) else {
        return Ok(());
    };
    let get = |k: &str| env.get(k).and_then(|v| v.trim().parse::<usize>().ok());
    let (theirs_rank, theirs_world) = (get(rv), get(sv));
    if theirs_world.is_some_and(|w| w <= 1) {
        return Ok(());
    }
    if theirs_rank.is_some_and(|r| r != rank) || theirs_world.is_some_and(|w| w != world) {
        let show = |k: &str| env.get(k).map_or_else(|| "unset".to_string(), |v| format!("{v:?}"));
        return Err(UsageError(format!(
            "--world {world} --rank {rank} contradict the launcher's {rv}={} and {sv}={}: under a launcher leave \
             out --world/--rank/--master (its variables say which rank this process is, with MASTER_ADDR and \
             MASTER_PORT), or start the processes by hand with the flags, outside the launcher",
            show(rv),
            show(sv)
        )));
    }
    Ok(())
}

/// Every rank's `(seconds, wrong)` for one half-row, gathered through `comm` (an
/// `all_gather` of two `f64` per rank; `wrong` travels as -1 when unchecked). Every process
/// learns every rank's result, so each exits non-zero on any rank's wrong values.
///
/// # Errors
/// The collective's error.
pub fn share<D: PerfDevice>(
    comm: &Communicator<D>,
    secs: f64,
    wrong: Option<u64>,
) -> Result<Vec<(f64, Option<u64>)>, Failure> {
    let n = comm.world_size();
    let mine = [secs, wrong.map_or(-1.0, |w| w as f64)];
    let input = Tensor::from_slice_1d(comm.device(), &mine)?;
    let mut all = Tensor::zeros(comm.device(), ruccl::DType::F64, &[2 * n])?;
    comm.all_gather_into_tensor(&mut all, &input)?;
    let v: Vec<f64> = all.to_vec()?;
    Ok(v.chunks_exact(2).map(|p| (p[0], (p[1] >= 0.0).then_some(p[1] as u64))).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::args::{Parsed, parse_with_env};

    fn run(argv: &str, env: &[(&str, &str)]) -> Result<Option<LaunchEnv>, UsageError> {
        let argv: Vec<String> = argv.split_whitespace().map(String::from).collect();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        match parse_with_env(&argv, &env)? {
            Parsed::Run(o) => Ok(o.launch),
            Parsed::Help => Ok(None),
        }
    }

    #[test]
    fn flags_and_launchers() {
        let l = run("all_reduce --world 4 --rank 3 --master 127.0.0.1:29500", &[]).unwrap().unwrap();
        assert_eq!((l.rank, l.world_size, l.master_addr.as_str(), l.master_port), (3, 4, "127.0.0.1", 29500));
        let mpi = [
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29501"),
        ];
        let l = run("all_reduce -r 1", &mpi).unwrap().unwrap();
        assert_eq!((l.rank, l.world_size), (1, 2));
        let torch = [("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "1")];
        assert_eq!(run("all_reduce", &torch).unwrap().unwrap().world_size, 2);
        // Nothing set, or a launch of one process: ranks are threads.
        assert!(run("all_reduce -g 4", &[]).unwrap().is_none());
        assert!(run("all_reduce -g 4", &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")]).unwrap().is_none());
        // Several ranks per process: process 1 of 2 with -g 2 runs ranks 2 and 3 of 4.
        let l = run("all_reduce -g 2 --world 2 --rank 1 --master 127.0.0.1:29500", &[]).unwrap().unwrap();
        assert_eq!((l.rank, l.world_size), (2, 4));
        let l = run("all_reduce -t 3", &mpi).unwrap().unwrap();
        assert_eq!((l.rank, l.world_size), (3, 6));
    }

    #[test]
    fn bad_launches_are_usage_errors() {
        assert!(run("all_reduce --world 2 --rank 0", &[]).is_err());
        assert!(run("all_reduce --world 2 --rank 2 --master h:1", &[]).is_err());
        assert!(run("all_reduce --world 2 --rank 0 --master h", &[]).is_err());
        assert!(run("all_reduce --world 2 --rank 0 --master h:1 --group", &[]).is_err());
        assert!(run("broadcast --world 2 --rank 0 --master h:1 -r 2", &[]).is_err());
        assert!(run("all_reduce", &[("RANK", "0"), ("WORLD_SIZE", "2")]).is_err());
    }

    #[test]
    fn flags_that_contradict_the_launcher_are_usage_errors() {
        let mpi = [("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "4")];
        let e = run("all_reduce --world 4 --rank 0 --master h:1", &mpi).unwrap_err().0;
        assert!(e.contains("--rank 0") && e.contains("OMPI_COMM_WORLD_RANK=\"3\""), "{e}");
        assert!(e.contains("leave out --world/--rank/--master"), "{e}");
        assert!(run("all_reduce --world 2 --rank 3 --master h:1", &mpi).is_err());
        let torch = [("RANK", "1"), ("WORLD_SIZE", "2")];
        assert!(run("all_reduce --world 3 --rank 1 --master h:1", &torch).is_err());
        // Agreeing flags, and a launch of one process, are fine.
        let l = run("all_reduce --world 4 --rank 3 --master h:1", &mpi).unwrap().unwrap();
        assert_eq!((l.rank, l.world_size), (3, 4));
        let one = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")];
        assert_eq!(run("all_reduce --world 2 --rank 1 --master h:1", &one).unwrap().unwrap().rank, 1);
    }
}
