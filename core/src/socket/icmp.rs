//! Raw ICMP sockets that receive echo replies only: a raw socket otherwise gets
//! a copy of every ICMP packet of its namespace (requests from other nodes,
//! neighbour discovery), which fills its receive buffer on a busy node.

use socket2::Socket;
use std::os::fd::AsRawFd;

/// `ICMP_FILTER` (linux/icmp.h): a raw IPv4 ICMP socket drops the types whose
/// bit is set.
const ICMP_FILTER: libc::c_int = 1;
const ICMP_ECHOREPLY: u32 = 0;
/// `ICMP6_FILTER` (linux/icmpv6.h): 256 bits, a set bit blocks that type.
const ICMP6_FILTER: libc::c_int = 1;
const ICMP6_ECHO_REPLY: usize = 129;

/// Lets only echo replies through to `sock`, a raw ICMP (`v6` false) or
/// ICMPv6 socket. False when the kernel refuses (the socket then sees all).
pub fn echo_replies_only(sock: &Socket, v6: bool) -> bool {
    if v6 {
        let mut blocked = [u32::MAX; 8];
        blocked[ICMP6_ECHO_REPLY / 32] &= !(1 << (ICMP6_ECHO_REPLY % 32));
        set(sock, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &blocked)
    } else {
        let blocked: u32 = !(1 << ICMP_ECHOREPLY);
        set(sock, libc::SOL_RAW, ICMP_FILTER, &blocked)
    }
}

fn set<T>(sock: &Socket, level: libc::c_int, name: libc::c_int, v: &T) -> bool {
    // SAFETY: passes a pointer to a plain value and its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        ) == 0
    }
}
