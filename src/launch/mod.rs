//! Launchers: how a process learns its rank, the world size and where the rendezvous root
//! listens, from the variables torchrun, `srun` and `mpirun` set ([`LaunchEnv`]): pure
//! parsers, which read a map, never the network; and [`free_port`], a port to launch on.

mod env;
mod port;

pub use env::{LaunchEnv, LaunchError, Launcher};
pub use port::free_port;
