//! `UniqueId`: the 128-byte name that ranks share to find each other, and where its root
//! listens (NCCL style).
//!
//! Layout: `rucl` tag (4 bytes), token (16: 14 random, the lowest bit of the first set in
//! ids made by [`UniqueId::new`], then a CRC-16 of those 14, so a mistyped or damaged id is
//! refused where it is read), address family (1: 0 none, 4 IPv4,
//! 6 IPv6), port (2, big-endian), IP address (16, an IPv4 address in the first 4), zeros.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

#[cfg(feature = "serde")]
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{CollectiveError, Result};
use crate::hash::{FNV_OFFSET, fnv1a};

/// The number of bytes in a [`UniqueId`] (as NCCL's `ncclUniqueId`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// An opaque id: every rank given the same id joins the same communicator.
///
/// Make it once (on one rank, or before spawning threads) with [`UniqueId::new`] and hand it
/// to every rank — by cloning, or through any channel as bytes ([`to_bytes`](Self::to_bytes))
/// or text ([`Display`](fmt::Display) / [`FromStr`], e.g. `ruccl:<32 hex digits>@127.0.0.1:41234`).
/// The token's last 4 hex digits check the others: an id damaged on its way (a digit changed)
/// is refused where it is read, rather than waiting at the root for a group that is not there.
///
/// The id carries a random token and the address of the process-wide rendezvous listener
/// of the process that made it (the *root*). Ranks in the root's process meet in memory;
/// a rank in another process connects to that address, so ranks of several processes (or
/// hosts) join one communicator. Which address the listener binds and advertises:
/// 1. `RUCCL_SOCKET_IFNAME`: an IP address, or interfaces selected as `NCCL_SOCKET_IFNAME`
///    selects them — name prefixes separated by commas (`eth`), `=` for one name exactly
///    (`=eth0`), `^` before the list to exclude them (`^docker,lo`) — the first selected IPv4
///    address, else IPv6;
/// 2. else, when `MASTER_ADDR` is set, the local address that routes to it;
/// 3. else `127.0.0.1` (processes of one host only).
///
/// When no listener can be started (or under Miri), the id has no address and only ranks of
/// this process can use it.
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

/// The bit of the token's first byte that marks an id made by [`UniqueId::new`] (rooted in the
/// process that made it, which remembers it); clear in derived, launch and orchestrator ids.
const MADE_BY_NEW: u8 = 1;
/// The bit of the token's first byte that marks a launch's id ([`UniqueId::for_launch`]):
/// the root's process refuses at once a launch id other than its own at its address (a rank
/// of another job on the same `MASTER_PORT`).
const LAUNCH: u8 = 2;

/// The tokens this process made with [`UniqueId::new`] (16 bytes each, kept for the process's
/// life): its rendezvous listener refuses at once a registration for an id of that kind it
/// did not make (an earlier run's), which would otherwise wait for a group that never forms.
fn made() -> std::sync::MutexGuard<'static, std::collections::HashSet<[u8; 16]>> {
    static MADE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<[u8; 16]>>> =
        std::sync::LazyLock::new(Default::default);
    MADE.lock().unwrap_or_else(|e| e.into_inner())
}

impl UniqueId {
    /// A fresh random id.
    ///
    /// The first call starts this process's rendezvous listener (see the type's docs).
    ///
    /// # Errors
    /// `Io` when the operating system's random source fails; `InvalidArgument` when
    /// `RUCCL_SOCKET_IFNAME` is not an address and selects no interface of this host (the
    /// error lists the host's interfaces).
    pub fn new() -> Result<Self> {
        let mut token = [0u8; 16];
        getrandom::fill(&mut token)
            .map_err(|e| CollectiveError::new(crate::ErrorKind::Io, format!("no randomness for a UniqueId: {e}")))?;
        token[0] = (token[0] & !LAUNCH) | MADE_BY_NEW;
        let mut id = UniqueId::unchecked(token, crate::comm::rendezvous::listener::default_address()?);
        id.seal();
        made().insert(id.comm_bytes());
        Ok(id)
    }

    /// Whether this id came from [`UniqueId::new`] in some process, and so is rooted in the
    /// process that made it.
    pub(crate) fn is_made_by_new(&self) -> bool {
        self.bytes[4] & MADE_BY_NEW != 0
    }

    /// Whether a rank of this id's group can be started again in its rendezvous (its process
    /// went away before the group formed): an id of [`UniqueId::new`] or of a launch, which a
    /// restarted process is given again; not a split's child's or the peer API's leaders',
    /// which only the communicator call that made them hands out.
    pub(crate) fn restartable(&self) -> bool {
        self.is_made_by_new() || self.is_launch()
    }

    /// Whether this process made this id with [`UniqueId::new`].
    pub(crate) fn made_here(&self) -> bool {
        made().contains(&self.comm_bytes())
    }

    /// Another id of [`UniqueId::new`]'s kind at the same root, which this process did not
    /// make (an earlier run's).
    #[cfg(test)]
    pub(crate) fn of_another_run(&self) -> Self {
        let mut id = self.clone();
        id.bytes[5] ^= 0xff;
        id.seal();
        id
    }

    /// The id every process of a launch derives from the root's address (the same on every
    /// rank, with no exchange): see `Communicator::from_launch`. Not from the world size too:
    /// processes launched with different sizes then meet in one rendezvous, which tells
    /// every one of them at once that the sizes differ (with the size in the id, each size
    /// waited in a rendezvous of its own until the timeout, blaming ranks that never came).
    /// `job`: the launcher's id of the job, when it sets one (`LaunchEnv::job`), so that a
    /// rank of another job on the same address does not join this one.
    pub(crate) fn for_launch(root: SocketAddr, job: Option<&str>) -> Self {
        let text = format!("ruccl-launch {root} {}", job.unwrap_or(""));
        let h1 = fnv1a(FNV_OFFSET, text.as_bytes());
        let h2 = fnv1a(FNV_OFFSET ^ 0x9e37_79b9_7f4a_7c15, text.as_bytes());
        let mut token = [0u8; 16];
        token[..8].copy_from_slice(&h1.to_le_bytes());
        token[8..].copy_from_slice(&h2.to_le_bytes());
        let mut id = Self::from_parts(token, Some(root));
        id.bytes[4] |= LAUNCH;
        id.seal();
        id
    }

    /// Whether this id is a launch's ([`for_launch`](Self::for_launch)).
    pub(crate) fn is_launch(&self) -> bool {
        self.bytes[4] & LAUNCH != 0
    }

    /// An id made of a token (its last 2 bytes replaced by the check of the first 14) and a
    /// root address.
    pub(crate) fn from_parts(mut token: [u8; 16], root: Option<SocketAddr>) -> Self {
        token[0] &= !(MADE_BY_NEW | LAUNCH);
        let mut id = Self::unchecked(token, root);
        id.seal();
        id
    }

    /// Sets the token's check bytes.
    fn seal(&mut self) {
        let c = check(&self.bytes[4..18]);
        self.bytes[18..20].copy_from_slice(&c);
    }

    /// `Ok` when the token's check bytes match it; else the `InvalidArgument` error for an id
    /// read from `what`.
    fn verify(self, what: &dyn fmt::Display) -> Result<Self> {
        if check(&self.bytes[4..18]) == self.bytes[18..20] {
            return Ok(self);
        }
        Err(CollectiveError::invalid(format!(
            "{what} is a damaged UniqueId: the last 4 hex digits of its token do not match the first 28 (a digit \
             was changed or lost on its way from the process that made it)"
        ))
        .with_hint("copy the id again, whole, from the process that made it (rank 0), and start this rank again"))
    }

    /// An id made of `token` as it is and a root address.
    fn unchecked(token: [u8; 16], root: Option<SocketAddr>) -> Self {
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        bytes[..4].copy_from_slice(TAG);
        bytes[4..20].copy_from_slice(&token);
        if let Some(addr) = root {
            bytes[21..23].copy_from_slice(&addr.port().to_be_bytes());
            match addr.ip() {
                IpAddr::V4(ip) => {
                    bytes[20] = 4;
                    bytes[23..27].copy_from_slice(&ip.octets());
                }
                IpAddr::V6(ip) => {
                    bytes[20] = 6;
                    bytes[23..39].copy_from_slice(&ip.octets());
                }
            }
        }
        UniqueId { bytes }
    }

    /// The address of the root's rendezvous listener, if the id has one.
    ///
    /// ```
    /// let id = ruccl::UniqueId::new()?;
    /// if let Some(root) = id.root_address() {
    ///     assert!(root.port() != 0);
    /// }
    /// # Ok::<(), ruccl::CollectiveError>(())
    /// ```
    pub fn root_address(&self) -> Option<SocketAddr> {
        let port = u16::from_be_bytes([self.bytes[21], self.bytes[22]]);
        let ip: IpAddr = match self.bytes[20] {
            4 => Ipv4Addr::new(self.bytes[23], self.bytes[24], self.bytes[25], self.bytes[26]).into(),
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&self.bytes[23..39]);
                Ipv6Addr::from(o).into()
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
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
        let used = match bytes[20] {
            0 => 21,
            4 => 27,
            6 => 39,
            f => return Err(CollectiveError::invalid(format!("a UniqueId with unknown address family {f}"))),
        };
        if bytes[used..].iter().any(|&b| b != 0) || (bytes[20] == 0 && bytes[21..39].iter().any(|&b| b != 0)) {
            return Err(CollectiveError::invalid("these bytes are not a ruCCL UniqueId (reserved bytes set)"));
        }
        UniqueId { bytes }.verify(&"this byte string")
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
        bytes[4] &= !(MADE_BY_NEW | LAUNCH);
        let mut id = UniqueId { bytes };
        id.seal();
        id
    }

    /// This id rooted at `root` instead (a split's child id, rooted at its first member's
    /// process): the same token, so the same communicator on the wire.
    pub(crate) fn rooted_at(&self, root: SocketAddr) -> UniqueId {
        let mut token = [0u8; 16];
        token.copy_from_slice(&self.bytes[4..20]);
        let mut id = Self::unchecked(token, Some(root));
        id.seal();
        id
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

/// CRC-16/CCITT (polynomial 0x1021, start 0xFFFF) of `data`, big-endian: it catches every
/// change confined to 16 consecutive bits, so any one hex digit changed, and two in a row.
fn check(data: &[u8]) -> [u8; 2] {
    let mut crc: u16 = 0xFFFF;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc.to_be_bytes()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()).collect()
}

/// The text form: `ruccl:<token, 32 hex digits>`, then `@<root address>` when there is one.
impl fmt::Display for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ruccl:{}", hex(&self.bytes[4..20]))?;
        match self.root_address() {
            Some(a) => write!(f, "@{a}"),
            None => Ok(()),
        }
    }
}

/// Parses the [`Display`](fmt::Display) form, or the 256 hex digits of the bytes.
///
/// ```
/// use ruccl::UniqueId;
/// let id = UniqueId::new()?;
/// assert_eq!(id.to_string().parse::<UniqueId>()?, id);
/// assert!("ruccl:00@nowhere".parse::<UniqueId>().is_err());
/// # Ok::<(), ruccl::CollectiveError>(())
/// ```
impl FromStr for UniqueId {
    type Err = CollectiveError;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || CollectiveError::invalid(format!("{s:?} is not a UniqueId (ruccl:<32 hex digits>[@ip:port])"));
        if s.len() == 2 * UNIQUE_ID_BYTES {
            return UniqueId::from_bytes(&unhex(s).ok_or_else(bad)?);
        }
        let rest = s.trim().strip_prefix("ruccl:").ok_or_else(bad)?;
        let (token, addr) = match rest.split_once('@') {
            Some((t, a)) => (t, Some(a.parse::<SocketAddr>().map_err(|_| bad())?)),
            None => (rest, None),
        };
        let token: [u8; 16] = unhex(token).ok_or_else(bad)?.try_into().map_err(|_| bad())?;
        UniqueId::unchecked(token, addr).verify(&format_args!("{:?}", s.trim()))
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId({})", hex(&self.bytes))
    }
}

#[cfg(feature = "serde")]
impl Serialize for UniqueId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(feature = "serde")]
impl<'de> Deserialize<'de> for UniqueId {
    fn deserialize<De: Deserializer<'de>>(d: De) -> std::result::Result<Self, De::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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

    #[test]
    fn text_and_bytes_round_trip() {
        let v4 = UniqueId::from_parts([7; 16], Some("10.1.2.3:29500".parse().unwrap()));
        let v6 = UniqueId::from_parts([8; 16], Some("[::1]:80".parse().unwrap()));
        let none = UniqueId::from_parts([9; 16], None);
        for id in [v4.clone(), v6, none] {
            assert_eq!(id.to_string().parse::<UniqueId>().unwrap(), id);
            assert_eq!(hex(&id.to_bytes()).parse::<UniqueId>().unwrap(), id);
            assert_eq!(UniqueId::from_bytes(&id.to_bytes()).unwrap(), id);
        }
        // The first byte's two lowest bits are clear (not an id of `UniqueId::new`, nor a
        // launch's), the last two check the first 14.
        let mut first = [7u8; 14];
        first[0] = 4;
        let sealed = format!("04{}{}", "07".repeat(13), hex(&check(&first)));
        assert_eq!(v4.to_string(), format!("ruccl:{sealed}@10.1.2.3:29500"));
        assert_eq!(v4.derive(1, &[2]).root_address(), v4.root_address(), "a split keeps its root");
        for bad in ["", "ruccl:", "ruccl:zz", "rucc:0707", &format!("ruccl:{}@host", "07".repeat(16))] {
            assert!(bad.parse::<UniqueId>().is_err(), "{bad}");
        }
        assert_eq!(check(b"123456789"), [0x29, 0xB1], "CRC-16/CCITT-FALSE's check value");
        let mut b = v4.to_bytes();
        b[20] = 5;
        assert!(UniqueId::from_bytes(&b).is_err());
        b[20] = 4;
        b[100] = 1;
        assert!(UniqueId::from_bytes(&b).is_err());
    }

    /// Any one hex digit of the token changed, in the text or the bytes, is refused where the
    /// id is read, saying it is damaged (it reached the root and waited out the timeout).
    #[test]
    fn a_damaged_token_is_refused_where_it_is_read() {
        let id = UniqueId::from_parts([0x5a; 16], Some("10.1.2.3:29500".parse().unwrap()));
        let text = id.to_string();
        for at in 6..38 {
            for d in "0123456789abcdef".chars() {
                let mut t: Vec<char> = text.chars().collect();
                if t[at] == d {
                    continue;
                }
                t[at] = d;
                let t: String = t.into_iter().collect();
                let e = t.parse::<UniqueId>().unwrap_err();
                assert!(e.to_string().contains("is a damaged UniqueId"), "{t}: {e}");
            }
        }
        let mut b = id.to_bytes();
        b[9] ^= 0x10;
        assert!(UniqueId::from_bytes(&b).unwrap_err().to_string().contains("damaged"));
        assert!(hex(&b).parse::<UniqueId>().is_err());
        let root = "127.0.0.1:29500".parse().unwrap();
        let launch = UniqueId::for_launch(root, None);
        for split in [id.derive(3, &[1]), launch.clone()] {
            assert_eq!(split.to_string().parse::<UniqueId>().unwrap(), split, "derived ids are sealed too");
            assert!(!split.is_made_by_new(), "derived ids are not of UniqueId::new's kind");
        }
        let made = UniqueId::new().unwrap();
        assert!(made.is_made_by_new() && made.made_here() && !made.of_another_run().made_here());
        assert!(!made.derive(1, &[2]).is_made_by_new());
        // Launch ids: the same for every rank of a job, another for another job; only they
        // are marked so (not their splits, nor ids of other kinds).
        assert!(launch.is_launch() && !launch.derive(1, &[2]).is_launch() && !made.is_launch());
        assert_eq!(UniqueId::for_launch(root, Some("mpirun 7")), UniqueId::for_launch(root, Some("mpirun 7")));
        assert_ne!(UniqueId::for_launch(root, Some("mpirun 7")), UniqueId::for_launch(root, Some("mpirun 8")));
        assert_ne!(UniqueId::for_launch(root, Some("mpirun 7")), launch);
    }
}
