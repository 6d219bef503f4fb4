//! Launchers: how a process learns its rank, the world size and where the rendezvous root
//! listens, from the variables torchrun, `srun` and `mpirun` set ([`LaunchEnv`]): pure
//! parsers, which read a map, never the network; and [`free_port`], a port to launch on.
//!
//! # Precedence
//! The first launcher whose rank or size variable is set wins:
//! 1. **torchrun** (and Kubernetes jobs, and anyone setting them by hand): `RANK`,
//!    `WORLD_SIZE`, optional `LOCAL_RANK` / `LOCAL_WORLD_SIZE`;
//! 2. **OpenMPI** (`mpirun`): `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`, optional
//!    `OMPI_COMM_WORLD_LOCAL_RANK` / `OMPI_COMM_WORLD_LOCAL_SIZE`;
//! 3. **Slurm** (`srun`): `SLURM_PROCID`, `SLURM_NTASKS`, optional `SLURM_LOCALID`.
//!
//! torchrun's variables come first because they are the ones a user sets to override a
//! launcher (and torchrun under `srun` sets its own per-process `RANK` while Slurm's
//! `SLURM_PROCID` numbers the torchrun agents); OpenMPI's beat Slurm's because `mpirun` inside
//! a Slurm allocation inherits the allocation's `SLURM_*` variables, which describe the
//! allocation, not the MPI job. A launcher whose variables are only partly set is an error
//! (never a silent fall-through to the next one). When `RANK` / `WORLD_SIZE` win over
//! OpenMPI's or Slurm's variables that disagree, and no torchrun agent set them (no
//! `TORCHELASTIC_RUN_ID`), `Communicator::from_env` logs a warning (`tracing`): they are most
//! often left over in the shell that started `mpirun` or `srun`; and it refuses a
//! `WORLD_SIZE=1` that way (`InvalidArgument`), which would let each process run alone.
//!
//! A stray `RANK` or `WORLD_SIZE` alone (the other unset) under a complete OpenMPI or Slurm
//! launch is still an error, one that names the launch it hides.
//!
//! Every launcher also needs `MASTER_ADDR` and `MASTER_PORT`: the rendezvous root's address
//! (torchrun sets them; with `srun` and `mpirun` export them, e.g. `mpirun -x MASTER_ADDR=...
//! -x MASTER_PORT=...`). `RUCCL_MASTER_PORT`, when set, is the port instead (and
//! `MASTER_PORT` is then not needed); under torchrun's agent store
//! (`TORCHELASTIC_USE_AGENT_STORE=True`, set by `torchrun`, whose own process listens on
//! `MASTER_PORT` for the whole job) the port is `MASTER_PORT + 1`. The launcher's job id, when
//! it sets one (`TORCHELASTIC_RUN_ID`, `PMIX_NAMESPACE` or
//! `OMPI_MCA_ess_base_jobid`, `SLURM_JOB_ID` and `SLURM_STEP_ID`), is part of the
//! communicator's id: a rank of another job that reaches this job's rank 0 is refused at once
//! rather than joining. `RUCCL_SOCKET_IFNAME` names the interface to bind and advertise (as
//! `NCCL_SOCKET_IFNAME`); by default, the one that reaches `MASTER_ADDR`.

mod env;
mod port;

pub use env::{LaunchEnv, LaunchError, Launcher};
pub use port::free_port;
