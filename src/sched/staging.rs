//! Host staging buffers owned by one rank and reused across ops: where incoming bytes wait
//! when their destination is still lent out, and where a device that the host cannot read
//! directly puts the bytes it sends.

use crate::error::Result;
use crate::mem::HostMem;
use crate::types::Rank;

/// One send staging slot and the lend that holds it, if any.
#[derive(Debug)]
pub(crate) struct SendSlot {
    pub(crate) mem: HostMem,
    pub(crate) held_by: Option<(Rank, u64)>,
}

/// A rank's reusable staging memory.
#[derive(Debug, Default)]
pub struct Staging {
    recv: Option<HostMem>,
    pub(crate) send: Vec<SendSlot>,
}

impl Staging {
    /// The receive staging block, grown to at least `len` bytes.
    ///
    /// # Errors
    /// `Device` when the memory cannot be had.
    pub(crate) fn recv(&mut self, len: usize) -> Result<HostMem> {
        match &self.recv {
            Some(m) if m.len() >= len => Ok(m.clone()),
            _ => {
                let m = HostMem::zeroed(len)?;
                self.recv = Some(m.clone());
                Ok(m)
            }
        }
    }
}
