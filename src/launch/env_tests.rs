//! The launcher parser on maps: each launcher complete, precedence between them, and every
//! kind of missing or contradictory value.

use super::*;

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const MASTER: [(&str, &str); 2] = [("MASTER_ADDR", "node0"), ("MASTER_PORT", "29500")];

fn with_master(pairs: &[(&'static str, &'static str)]) -> HashMap<String, String> {
    map(&[pairs, &MASTER[..]].concat())
}

#[test]
fn torchrun() {
    let l = LaunchEnv::from_map(&with_master(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "2"),
    ]))
    .unwrap();
    assert_eq!(l.launcher, Launcher::Torchrun);
    assert_eq!((l.rank, l.world_size, l.local_rank), (3, 8, Some(1)));
    assert_eq!((l.master_addr.as_str(), l.master_port, l.socket_ifname), ("node0", 29500, None));
}

#[test]
fn openmpi() {
    let l = LaunchEnv::from_map(&with_master(&[
        ("OMPI_COMM_WORLD_RANK", "2"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ("RUCCL_SOCKET_IFNAME", "eth1"),
    ]))
    .unwrap();
    assert_eq!((l.launcher, l.rank, l.world_size, l.local_rank), (Launcher::OpenMpi, 2, 4, Some(2)));
    assert_eq!(l.socket_ifname.as_deref(), Some("eth1"));
    // Empty is unset, as for every RUCCL_* variable.
    let l = LaunchEnv::from_map(&with_master(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("RUCCL_SOCKET_IFNAME", " ")]));
    assert_eq!(l.unwrap().socket_ifname, None);
}

#[test]
fn slurm() {
    let l = LaunchEnv::from_map(&with_master(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1"), ("SLURM_LOCALID", "0")]))
        .unwrap();
    assert_eq!((l.launcher, l.rank, l.world_size, l.local_rank), (Launcher::Slurm, 0, 1, Some(0)));
}

#[test]
fn precedence_torchrun_then_openmpi_then_slurm() {
    let slurm = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")];
    let ompi = [("OMPI_COMM_WORLD_RANK", "5"), ("OMPI_COMM_WORLD_SIZE", "6")];
    let torch = [("RANK", "7"), ("WORLD_SIZE", "16")];
    let l = LaunchEnv::from_map(&with_master(&[&slurm[..], &ompi[..]].concat())).unwrap();
    assert_eq!((l.launcher, l.rank, l.world_size), (Launcher::OpenMpi, 5, 6), "mpirun inside a Slurm allocation");
    let l = LaunchEnv::from_map(&with_master(&[&slurm[..], &ompi[..], &torch[..]].concat())).unwrap();
    assert_eq!((l.launcher, l.rank, l.world_size), (Launcher::Torchrun, 7, 16), "torchrun under srun");
}

/// torchrun's variables beside another launcher's that disagree: said (to be logged) when no
/// torchrun agent set them, as a RANK / WORLD_SIZE left exported before `mpirun`; not when a
/// torchrun agent did (torchrun under srun or mpirun), nor when they agree, nor for OpenMPI
/// inside a Slurm allocation.
#[test]
fn stale_torchrun_variables_are_said() {
    let ompi = [("OMPI_COMM_WORLD_RANK", "2"), ("OMPI_COMM_WORLD_SIZE", "4")];
    let stale = [("RANK", "0"), ("WORLD_SIZE", "4")];
    let vars = with_master(&[&ompi[..], &stale[..]].concat());
    let why = LaunchEnv::from_map(&vars).unwrap().shadows(&vars).expect("said");
    assert!(why.contains("RANK=0 and WORLD_SIZE=4 are used, and OMPI_COMM_WORLD_RANK=2"), "{why}");
    assert!(why.contains("unset them"), "{why}");
    let agent = with_master(&[&ompi[..], &stale[..], &[("TORCHELASTIC_RUN_ID", "job")][..]].concat());
    assert_eq!(LaunchEnv::from_map(&agent).unwrap().shadows(&agent), None, "torchrun under mpirun");
    let same = with_master(&[&ompi[..], &[("RANK", "2"), ("WORLD_SIZE", "4")][..]].concat());
    assert_eq!(LaunchEnv::from_map(&same).unwrap().shadows(&same), None, "they agree");
    let slurm = with_master(&[&ompi[..], &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "1")][..]].concat());
    assert_eq!(LaunchEnv::from_map(&slurm).unwrap().shadows(&slurm), None, "mpirun in an allocation");
    let srun = with_master(&[&stale[..], &[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")][..]].concat());
    assert!(LaunchEnv::from_map(&srun).unwrap().shadows(&srun).is_some_and(|w| w.contains("SLURM_PROCID=3")));
}

/// A stale `WORLD_SIZE=1` under another launcher that says more: refused (the process would
/// run alone with no error); a real world of one, or one that agrees, is not.
#[test]
fn a_stale_world_of_one_is_refused() {
    let ompi = [("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")];
    let vars = with_master(&[&ompi[..], &[("RANK", "0"), ("WORLD_SIZE", "1")][..]].concat());
    let env = LaunchEnv::from_map(&vars).unwrap();
    let why = env.alone_by_mistake(env.shadows(&vars).as_deref()).expect("refused");
    assert!(why.contains("OMPI_COMM_WORLD_SIZE=2 (OpenMPI's)") && why.contains("would run alone"), "{why}");
    let alone = with_master(&[("RANK", "0"), ("WORLD_SIZE", "1")]);
    let env = LaunchEnv::from_map(&alone).unwrap();
    assert_eq!(env.alone_by_mistake(env.shadows(&alone).as_deref()), None);
    let stale4 = with_master(&[&ompi[..], &[("RANK", "0"), ("WORLD_SIZE", "4")][..]].concat());
    let env = LaunchEnv::from_map(&stale4).unwrap();
    assert_eq!(env.alone_by_mistake(env.shadows(&stale4).as_deref()), None, "fails at the join, with the note");
}

#[test]
fn an_impossible_world_size_is_refused() {
    let e = LaunchEnv::from_map(&with_master(&[("RANK", "0"), ("WORLD_SIZE", "99999999999")])).unwrap_err();
    assert!(e.to_string().contains("WORLD_SIZE=99999999999 is more than ruCCL's limit of 262144 ranks"), "{e}");
}

#[test]
fn nothing_set() {
    let e = LaunchEnv::from_map(&map(&MASTER)).unwrap_err();
    assert_eq!(e.launcher, None);
    assert!(e.to_string().contains("no launcher environment"), "{e}");
    let c = CollectiveError::from(e);
    assert_eq!(c.kind(), ErrorKind::InvalidArgument);
    // What to do names the launchers and what MASTER_ADDR and MASTER_PORT must be.
    let text = c.to_string();
    assert!(text.contains("What to do: start every process under torchrun, mpirun or srun"), "{text}");
    assert!(text.contains("MASTER_ADDR:MASTER_PORT, the host of rank 0 and a free port there"), "{text}");
}

#[test]
fn missing_values_are_all_listed() {
    let e = LaunchEnv::from_map(&map(&[("WORLD_SIZE", "4")])).unwrap_err();
    assert_eq!(e.launcher, Some(Launcher::Torchrun));
    assert_eq!(e.missing, ["RANK", "MASTER_ADDR", "MASTER_PORT"]);
    let text = e.to_string();
    assert!(text.contains("torchrun") && text.contains("missing: RANK, MASTER_ADDR, MASTER_PORT"), "{text}");
    // A partial torchrun set never falls through to a complete lower-precedence launcher.
    let e =
        LaunchEnv::from_map(&with_master(&[("RANK", "1"), ("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")])).unwrap_err();
    assert_eq!((e.launcher, e.missing.as_slice()), (Some(Launcher::Torchrun), &["WORLD_SIZE"][..]));
    let e = LaunchEnv::from_map(&map(&[("SLURM_NTASKS", "2"), ("MASTER_ADDR", "x")])).unwrap_err();
    assert_eq!((e.launcher, e.missing.as_slice()), (Some(Launcher::Slurm), &["SLURM_PROCID", "MASTER_PORT"][..]));
    // Empty counts as unset.
    let e = LaunchEnv::from_map(&with_master(&[("RANK", "0"), ("WORLD_SIZE", " ")])).unwrap_err();
    assert_eq!(e.missing, ["WORLD_SIZE"]);
}

#[test]
fn conflicting_and_malformed_values() {
    let e = LaunchEnv::from_map(&with_master(&[("RANK", "4"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "9")])).unwrap_err();
    assert_eq!(e.invalid, ["RANK=4 is not below WORLD_SIZE=4", "LOCAL_RANK=9 is not below WORLD_SIZE=4"]);
    let e = LaunchEnv::from_map(&with_master(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
    ]))
    .unwrap_err();
    assert_eq!(e.invalid, ["OMPI_COMM_WORLD_LOCAL_RANK=2 is not below OMPI_COMM_WORLD_LOCAL_SIZE=2"]);
    let e = LaunchEnv::from_map(&with_master(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "3")]))
        .unwrap_err();
    assert_eq!(e.invalid, ["LOCAL_WORLD_SIZE=3 is more than WORLD_SIZE=2"]);
    let e = LaunchEnv::from_map(&map(&[
        ("RANK", "-1"),
        ("WORLD_SIZE", "0"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "70000"),
        ("RUCCL_SOCKET_IFNAME", ""),
    ]))
    .unwrap_err();
    assert_eq!(
        e.invalid,
        [
            "RANK=\"-1\" is not a non-negative integer",
            "MASTER_PORT=\"70000\" is not a port (1 to 65535)",
            "WORLD_SIZE=0: there must be at least one rank",
        ]
    );
    assert!(e.missing.is_empty());
    let e = LaunchEnv::from_map(&with_master(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")])).unwrap_err();
    assert!(e.to_string().contains("SLURM_PROCID=\"x\""), "{e}");
    let e =
        LaunchEnv::from_map(&map(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "h"), ("MASTER_PORT", "0")]))
            .unwrap_err();
    assert_eq!(e.invalid.len(), 1);
}

/// Under mpirun or srun without the rendezvous address the advice says how to pass it (they
/// never set it), not to run under mpirun or srun.
#[test]
fn mpirun_without_the_address_is_told_how_to_pass_it() {
    let ompi = map(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]);
    let e = CollectiveError::from(LaunchEnv::from_map(&ompi).unwrap_err());
    assert!(format!("{e:?}").contains("mpirun -x MASTER_ADDR="), "{e:?}");
    let half = map(&[("RANK", "0")]);
    let e = CollectiveError::from(LaunchEnv::from_map(&half).unwrap_err());
    assert!(!format!("{e:?}").contains("mpirun -x"), "{e:?}");
}

/// `MASTER_ADDR` as an IPv6 address in brackets, as URLs write it: taken without them.
#[test]
fn an_ipv6_master_addr_may_come_in_brackets() {
    let mut vars = with_master(&[("RANK", "0"), ("WORLD_SIZE", "2")]);
    for (given, taken) in [("[::1]", "::1"), ("::1", "::1"), ("[fd00::2]", "fd00::2"), ("[host]", "[host]")] {
        vars.insert("MASTER_ADDR".into(), given.into());
        assert_eq!(LaunchEnv::from_map(&vars).unwrap().master_addr, taken, "{given}");
    }
}

/// A launch error's `Debug` (what `fn main() -> ruccl::Result<()>` prints) says its message
/// once: the `LaunchError` kept as the source says the same, and is not printed again.
#[test]
fn a_launch_error_is_said_once() {
    let partial = map(&[("RANK", "0")]);
    let e: crate::error::CollectiveError = LaunchEnv::from_map(&partial).unwrap_err().into();
    let d = format!("{e:?}");
    assert!(!d.contains("Caused by"), "{d}");
    assert_eq!(d.matches("WORLD_SIZE").count(), 1, "{d}");
    assert!(std::error::Error::source(&e).is_some());
}

/// Under torchrun's agent store its own process listens on MASTER_PORT for the whole job:
/// ruCCL's rendezvous takes the next port; RUCCL_MASTER_PORT chooses one for any launcher
/// (and MASTER_PORT is then not needed).
#[test]
fn the_rendezvous_port() {
    let base = [("RANK", "1"), ("WORLD_SIZE", "2")];
    let l = LaunchEnv::from_map(&with_master(&base)).unwrap();
    assert_eq!((l.master_port, l.port, l.port_from), (29500, 29500, "MASTER_PORT"));
    let l =
        LaunchEnv::from_map(&with_master(&[&base[..], &[("TORCHELASTIC_USE_AGENT_STORE", "True")]].concat())).unwrap();
    assert_eq!((l.master_port, l.port, l.port_from), (29500, 29501, "MASTER_PORT + 1"));
    let ours = [&base[..], &[("TORCHELASTIC_USE_AGENT_STORE", "True"), ("RUCCL_MASTER_PORT", "4000")]].concat();
    let l = LaunchEnv::from_map(&with_master(&ours)).unwrap();
    assert_eq!((l.port, l.port_from), (4000, "RUCCL_MASTER_PORT"));
    let l = LaunchEnv::from_map(&map(&[&base[..], &[("MASTER_ADDR", "h"), ("RUCCL_MASTER_PORT", "4000")]].concat()));
    assert_eq!(l.map(|l| (l.master_port, l.port)), Ok((0, 4000)));
    // MASTER_PORT is not used then, and not judged.
    let unused = [&base[..], &[("MASTER_ADDR", "h"), ("MASTER_PORT", "abc"), ("RUCCL_MASTER_PORT", "4000")]].concat();
    assert_eq!(LaunchEnv::from_map(&map(&unused)).map(|l| l.port), Ok(4000));
    let e = LaunchEnv::from_map(&with_master(&[&base[..], &[("RUCCL_MASTER_PORT", "0")]].concat())).unwrap_err();
    assert_eq!(e.invalid, ["RUCCL_MASTER_PORT=\"0\" is not a port (1 to 65535)"]);
    let top =
        map(&[&base[..], &[("MASTER_ADDR", "h"), ("MASTER_PORT", "65535"), ("TORCHELASTIC_USE_AGENT_STORE", "1")]]
            .concat());
    assert!(LaunchEnv::from_map(&top).unwrap_err().invalid[0].contains("set RUCCL_MASTER_PORT"));
}

/// Each launcher's job id, the same in every process of a job: torchrun's run id and restart
/// count, OpenMPI's namespace (or job id), Slurm's job and step.
#[test]
fn job_ids() {
    let job = |pairs: &[(&'static str, &'static str)]| LaunchEnv::from_map(&with_master(pairs)).unwrap().job;
    assert_eq!(job(&[("RANK", "0"), ("WORLD_SIZE", "2")]), None);
    let run = [("RANK", "0"), ("WORLD_SIZE", "2"), ("TORCHELASTIC_RUN_ID", "abc")];
    assert_eq!(job(&run).as_deref(), Some("torchrun abc"));
    // Not the restart count, on which torchrun's agents need not agree.
    let again = [&run[..], &[("TORCHELASTIC_RESTART_COUNT", "2")]].concat();
    assert_eq!(job(&again), job(&run));
    let mpi = [("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2"), ("OMPI_MCA_ess_base_jobid", "77")];
    assert_eq!(job(&mpi).as_deref(), Some("mpirun 77"));
    assert_eq!(job(&[&mpi[..], &[("PMIX_NAMESPACE", "ns")]].concat()).as_deref(), Some("mpirun ns"));
    let slurm = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_ID", "9"), ("SLURM_STEP_ID", "1")];
    assert_eq!(job(&slurm).as_deref(), Some("slurm 9.1"));
}

/// A RANK or WORLD_SIZE alone, left over in the environment of a complete mpirun or srun
/// launch, is named as what hides it (it said "missing WORLD_SIZE ... start every process
/// under mpirun" under mpirun).
#[test]
fn a_stray_rank_alone_names_the_launch_it_hides() {
    let mpi = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")];
    let e = LaunchEnv::from_map(&with_master(&[&mpi[..], &[("RANK", "0")]].concat())).unwrap_err();
    assert_eq!(e.launcher, Some(Launcher::Torchrun));
    assert_eq!(e.missing, ["WORLD_SIZE"]);
    assert!(e.invalid[0].contains("RANK is set without WORLD_SIZE, which hides OpenMPI's complete OMPI_COMM_WORLD_RANK=1 and OMPI_COMM_WORLD_SIZE=2"), "{e}");
    let slurm = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")];
    let e = LaunchEnv::from_map(&with_master(&[&slurm[..], &[("WORLD_SIZE", "1")]].concat())).unwrap_err();
    assert!(e.invalid[0].contains("WORLD_SIZE is set without RANK, which hides Slurm's complete"), "{e}");
}
