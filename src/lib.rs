//! ruccl
pub mod algo;
mod comm;
pub mod config;
pub mod device;
pub mod error;
pub mod mem;
pub mod op;
mod sched;
pub mod tensor;
mod trace;
pub(crate) mod transport;
pub mod types;
pub mod unique_id;

pub use comm::{Communicator, FlightEntry, OpState};
pub use config::{Algorithm, CommConfig};
pub use device::{Device, HostDevice};
pub use error::{CollectiveError, ErrorKind, Result};
pub use tensor::Tensor;
pub use types::{DType, Element, Rank, ReduceOp};
pub use unique_id::UniqueId;
