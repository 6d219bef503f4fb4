//! Launchers: how a process learns its rank, the world size and where the rendezvous root
//! listens, from the variables torchrun, `srun` and `mpirun` set ([`LaunchEnv`]). Pure
//! parsers: they read a map, never the network.

mod env;

pub use env::{LaunchEnv, LaunchError, Launcher};
