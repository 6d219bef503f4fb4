//! `UniqueId`: the 128-byte name that ranks share to find each other.

use std::fmt;

#[cfg(feature = "serde")]
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{CollectiveError, Result};
use crate::hash::{FNV_OFFSET, fnv1a};

/// The number of bytes in a [`UniqueId`] (as NCCL's `ncclUniqueId`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// An opaque id: every rank given the same id joins the same communicator.
///
/// Make it once (on one rank, or before spawning threads) with [`UniqueId::new`] and hand it
/// to every rank — by cloning, or as bytes / hex through any channel. The layout is opaque;
/// today it is 16 random bytes after a tag, and the TCP transport will carry the root's
/// address in the rest.
///
/// An id names one group at a time: while any communicator made with it exists, joining with
/// it again is refused (`InvalidArgument`), and two groups that join with it at the same time
/// are refused rather than paired at random. Once every communicator of the group is dropped,
/// the id may form a new group.
///
/// ```
/// use ruccl::UniqueId;
/// let id = UniqueId::new()?;
/// let copy = UniqueId::from_bytes(&id.to_bytes())?;
/// assert_eq!(id, copy);
/// assert_ne!(id, UniqueId::new()?);
/// # #[cfg(feature = "serde")] {
/// let json = serde_json::to_string(&id).unwrap(); // with the `serde` feature
/// assert_eq!(serde_json::from_str::<UniqueId>(&json).unwrap(), id);
/// # }
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct UniqueId {
    bytes: [u8; UNIQUE_ID_BYTES],
}

const TAG: &[u8; 4] = b"rucl";

impl UniqueId {
    /// A fresh random id.
    ///
    /// # Errors
    /// `Io` when the operating system's random source fails.
    pub fn new() -> Result<Self> {
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes[..4].copy_from_slice(TAG);
        getrandom::fill(&mut bytes[4..20])
            .map_err(|e| CollectiveError::new(crate::ErrorKind::Io, format!("no randomness for a UniqueId: {e}")))?;
        Ok(UniqueId { bytes })
    }

    /// The raw bytes.
    pub fn to_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.bytes
    }

    /// Rebuilds an id from [`to_bytes`](Self::to_bytes) output.
    ///
    /// # Errors
    /// `InvalidArgument` when the length is not 128 or the bytes are not a ruCCL id.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let bytes: [u8; UNIQUE_ID_BYTES] = b.try_into().map_err(|_| {
            CollectiveError::invalid(format!("a UniqueId has {UNIQUE_ID_BYTES} bytes, got {}", b.len()))
        })?;
        if &bytes[..4] != TAG {
            return Err(CollectiveError::invalid("these bytes are not a ruCCL UniqueId (bad tag)"));
        }
        Ok(UniqueId { bytes })
    }

    /// A derived id (for splits): the same for every rank that derives it from the same
    /// parent instance with the same salt, different from the parent. `nonce` names the
    /// parent's instance (see `comm::rendezvous`): two groups that used the same id one after
    /// the other have different nonces, so their children never share an id.
    pub(crate) fn derive(&self, nonce: u128, salt: &[u64]) -> UniqueId {
        let data = |seed: u64| {
            let h = fnv1a(fnv1a(seed, &self.bytes[4..20]), &nonce.to_le_bytes());
            salt.iter().fold(h, |h, s| fnv1a(h, &s.to_le_bytes()))
        };
        // Two independent 64-bit digests of the same data fill the 16 random bytes.
        let (h1, h2) = (data(FNV_OFFSET), data(FNV_OFFSET ^ 0x9e37_79b9_7f4a_7c15));
        let mut bytes = self.bytes;
        bytes[4..12].copy_from_slice(&h1.to_le_bytes());
        bytes[12..20].copy_from_slice(&h2.to_le_bytes());
        UniqueId { bytes }
    }

    /// The 16 bytes that name the communicator on the wire.
    pub(crate) fn comm_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b.copy_from_slice(&self.bytes[4..20]);
        b
    }

    /// A short hex prefix for logs and errors.
    pub fn short(&self) -> String {
        hex(&self.bytes[4..10])
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId({})", hex(&self.bytes))
    }
}

#[cfg(feature = "serde")]
impl Serialize for UniqueId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&hex(&self.bytes))
    }
}

#[cfg(feature = "serde")]
impl<'de> Deserialize<'de> for UniqueId {
    fn deserialize<De: Deserializer<'de>>(d: De) -> std::result::Result<Self, De::Error> {
        let s = String::deserialize(d)?;
        if s.len() != 2 * UNIQUE_ID_BYTES || !s.is_ascii() {
            return Err(serde::de::Error::custom("a UniqueId is 256 hex digits"));
        }
        let bytes: std::result::Result<Vec<u8>, _> =
            (0..UNIQUE_ID_BYTES).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16)).collect();
        let bytes = bytes.map_err(serde::de::Error::custom)?;
        UniqueId::from_bytes(&bytes).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derive_is_stable_and_distinct() {
        let id = UniqueId::new().unwrap();
        assert_eq!(id.derive(7, &[1, 2]), id.derive(7, &[1, 2]));
        assert_ne!(id.derive(7, &[1, 2]), id.derive(7, &[1, 3]));
        assert_ne!(id.derive(7, &[1, 2]), id.derive(8, &[1, 2]), "another instance of the parent id");
        assert_ne!(id.derive(7, &[1]), id);
        assert!(UniqueId::from_bytes(&[0; 128]).is_err());
        assert!(UniqueId::from_bytes(&[0; 3]).is_err());
        assert!(format!("{id:?}").len() > 256);
    }
}
