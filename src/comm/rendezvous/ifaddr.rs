//! An interface's address by name (`RUCCL_SOCKET_IFNAME`), through `getifaddrs`.

use std::net::IpAddr;

/// The first IPv4 address of interface `name`, else its first IPv6 address.
#[cfg(all(unix, not(miri)))]
pub(crate) fn interface_ip(name: &str) -> Option<IpAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let mut found: Vec<IpAddr> = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `getifaddrs` writes the head of a list it allocates to `head`; the list is freed
    // below with `freeifaddrs`, and nothing read from it outlives that.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
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
        let n = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() != name.as_bytes() {
            continue;
        }
        // SAFETY: `ifa_addr` is non-null and points to a `sockaddr` owned by the list.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: a `sockaddr` of family AF_INET is a `sockaddr_in`.
            let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            found.push(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)).into());
        } else if family == libc::AF_INET6 {
            // SAFETY: a `sockaddr` of family AF_INET6 is a `sockaddr_in6`.
            let sa = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
            found.push(Ipv6Addr::from(sa.sin6_addr.s6_addr).into());
        }
    }
    // SAFETY: `head` came from a successful `getifaddrs` and is freed once.
    unsafe { libc::freeifaddrs(head) };
    found.iter().find(|ip| ip.is_ipv4()).or(found.first()).copied()
}

/// No interface lookup on this platform: `RUCCL_SOCKET_IFNAME` must be an IP address.
#[cfg(not(all(unix, not(miri))))]
pub(crate) fn interface_ip(_name: &str) -> Option<IpAddr> {
    None
}

#[cfg(all(test, unix, not(miri)))]
mod tests {
    #[test]
    fn loopback_interface_has_an_address() {
        assert!(super::interface_ip("lo").is_some_and(|ip| ip.is_loopback()));
        assert_eq!(super::interface_ip("no-such-interface0"), None);
    }
}
