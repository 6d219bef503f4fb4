//! The address `RUCCL_SOCKET_IFNAME` selects, read as `NCCL_SOCKET_IFNAME` is: a comma-separated
//! list of interface-name prefixes (`eth` takes eth0, eth1, ...), `=` before a name for that
//! name exactly (`=eth0`), and `^` before the list to take every interface *but* those
//! (`^docker,lo`). This host's interfaces come from `getifaddrs`; the choice is pure
//! ([`pick`]).

use std::net::IpAddr;

/// One address of one interface.
pub(crate) type IfAddr = (String, IpAddr);

/// The address `spec` selects among `ifaces` (in the system's order): the first IPv4 address
/// of a selected interface, else its first IPv6 one. With an exclusion (`^`), a non-loopback
/// address is preferred. IPv6 link-local addresses (`fe80::/10`) are never chosen: an
/// address alone cannot be bound or reached without the interface's scope. `None` when
/// nothing is selected.
pub(crate) fn pick(spec: &str, ifaces: &[IfAddr]) -> Option<IpAddr> {
    let spec = spec.trim();
    let (exclude, list) = match spec.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let listed = |name: &str| {
        names.iter().any(|n| match n.strip_prefix('=') {
            Some(exact) => name == exact,
            None => name.starts_with(n),
        })
    };
    let link_local = |ip: &IpAddr| matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
    let chosen: Vec<IpAddr> =
        ifaces.iter().filter(|(name, ip)| listed(name) != exclude && !link_local(ip)).map(|(_, ip)| *ip).collect();
    let first = |keep: &dyn Fn(&IpAddr) -> bool| chosen.iter().copied().find(|ip| keep(ip));
    if exclude
        && let Some(ip) = first(&|ip| ip.is_ipv4() && !ip.is_loopback()).or_else(|| first(&|ip| !ip.is_loopback()))
    {
        return Some(ip);
    }
    first(&IpAddr::is_ipv4).or_else(|| chosen.first().copied())
}

/// `ifaces` as the error of a selection that found nothing lists them: `lo 127.0.0.1, eth0
/// 10.0.0.5`.
pub(crate) fn describe(ifaces: &[IfAddr]) -> String {
    if ifaces.is_empty() {
        return "none found".to_string();
    }
    ifaces.iter().map(|(n, ip)| format!("{n} {ip}")).collect::<Vec<_>>().join(", ")
}

/// Every address of every interface of this host, in the system's order.
#[cfg(all(unix, not(miri)))]
pub(crate) fn interfaces() -> Vec<IfAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let mut found = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `getifaddrs` writes the head of a list it allocates to `head`; the list is freed
    // below with `freeifaddrs`, and nothing read from it outlives that.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return found;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list `getifaddrs` returned, not freed yet.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        // SAFETY: `ifa_addr` is non-null and points to a `sockaddr` owned by the list.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: a `sockaddr` of family AF_INET is a `sockaddr_in`.
            let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            found.push((name, Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)).into()));
        } else if family == libc::AF_INET6 {
            // SAFETY: a `sockaddr` of family AF_INET6 is a `sockaddr_in6`.
            let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            found.push((name, Ipv6Addr::from(sa.sin6_addr.s6_addr).into()));
        }
    }
    // SAFETY: `head` came from a successful `getifaddrs` and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// No interface lookup on this platform: `RUCCL_SOCKET_IFNAME` must be an IP address.
#[cfg(not(all(unix, not(miri))))]
pub(crate) fn interfaces() -> Vec<IfAddr> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::{IfAddr, describe, pick};

    fn host() -> Vec<IfAddr> {
        [
            ("lo", "127.0.0.1"),
            ("lo", "::1"),
            ("eth0", "fe80::1"),
            ("eth0", "10.0.0.5"),
            ("eth1", "10.0.1.5"),
            ("docker0", "172.17.0.1"),
            ("ib0", "fe80::2"),
            ("ib1", "fe80::3"),
            ("ib1", "2001:db8::3"),
        ]
        .into_iter()
        .map(|(n, ip)| (n.to_string(), ip.parse().unwrap()))
        .collect()
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// The forms `NCCL_SOCKET_IFNAME` documents, on a host with loopback, two Ethernet
    /// interfaces, docker's bridge and InfiniBand ports: one with a global IPv6 address, one
    /// with only a link-local one (never chosen).
    #[test]
    fn selects_as_nccl_socket_ifname() {
        let h = host();
        for (spec, want) in [
            ("eth", ip("10.0.0.5")),
            ("eth1", ip("10.0.1.5")),
            ("=eth0", ip("10.0.0.5")),
            ("=eth", None),
            (" =eth1 , =eth0 ", ip("10.0.0.5")),
            ("ib", ip("2001:db8::3")),
            ("=ib0", None),
            ("lo", ip("127.0.0.1")),
            ("^lo", ip("10.0.0.5")),
            ("^eth,lo", ip("172.17.0.1")),
            ("^=eth0,=eth1,docker,lo", ip("2001:db8::3")),
            ("^=eth0,=eth1,docker,lo,ib1", None),
            ("^", ip("10.0.0.5")),
            ("wlan", None),
            ("", None),
        ] {
            assert_eq!(pick(spec, &h), want, "{spec:?}");
        }
        assert_eq!(pick("^lo", &h[..2]), None);
        assert_eq!(pick("eth", &[]), None);
    }

    #[test]
    fn describes_the_host() {
        assert_eq!(describe(&host()[..2]), "lo 127.0.0.1, lo ::1");
        assert_eq!(describe(&[]), "none found");
    }

    #[cfg(all(unix, not(miri)))]
    #[test]
    fn loopback_interface_has_an_address() {
        let here = super::interfaces();
        assert!(pick("=lo", &here).is_some_and(|ip| ip.is_loopback()), "{here:?}");
        assert_eq!(pick("no-such-interface0", &here), None);
    }
}
