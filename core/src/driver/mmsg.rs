//! The raw parts a sendmmsg/recvmmsg message points at, shared by the sender
//! and the receiver: a peer's address as the kernel takes and gives it, and
//! room for one control message (UDP_SEGMENT out, UDP_GRO in).

use super::shared::SockKind;
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A socket address as the kernel takes and gives it.
#[derive(Clone, Copy)]
#[repr(C)]
pub(super) union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl RawAddr {
    pub(super) fn zeroed() -> RawAddr {
        // SAFETY: all-zero is a valid sockaddr_in6 (and sockaddr_in).
        unsafe { std::mem::zeroed() }
    }

    /// `a` in the socket's family (an IPv4 peer on an IPv6 UDP socket becomes
    /// v4-mapped); None when it cannot be expressed. Raw sockets take port 0.
    #[inline]
    pub(super) fn from(a: SocketAddr, kind: SockKind) -> Option<(RawAddr, libc::socklen_t)> {
        let port = if kind.is_udp() { a.port() } else { 0 };
        let mut r = RawAddr::zeroed();
        match (a, kind.is_v6()) {
            (SocketAddr::V4(v4), false) => {
                r.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*v4.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                Some((r, std::mem::size_of::<libc::sockaddr_in>() as _))
            }
            (SocketAddr::V6(v6), true) => {
                r.v6 = sockaddr_in6(*v6.ip(), port, v6.scope_id());
                Some((r, std::mem::size_of::<libc::sockaddr_in6>() as _))
            }
            (SocketAddr::V4(v4), true) if kind.is_udp() => {
                r.v6 = sockaddr_in6(v4.ip().to_ipv6_mapped(), port, 0);
                Some((r, std::mem::size_of::<libc::sockaddr_in6>() as _))
            }
            (SocketAddr::V6(v6), false) => {
                let v4 = v6.ip().to_ipv4_mapped()?;
                r.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(v4).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                Some((r, std::mem::size_of::<libc::sockaddr_in>() as _))
            }
            _ => None,
        }
    }

    /// The address the kernel wrote; v4-mapped IPv6 comes back as IPv4.
    #[inline]
    pub(super) fn to_socket_addr(self) -> Option<SocketAddr> {
        // SAFETY: the family field lies at the same place in both, and the kernel
        // filled the variant it names.
        unsafe {
            match self.v4.sin_family as libc::c_int {
                libc::AF_INET => Some(SocketAddr::V4(SocketAddrV4::new(
                    u32::from_be(self.v4.sin_addr.s_addr).into(),
                    u16::from_be(self.v4.sin_port),
                ))),
                libc::AF_INET6 => {
                    let ip = Ipv6Addr::from(self.v6.sin6_addr.s6_addr);
                    let port = u16::from_be(self.v6.sin6_port);
                    Some(match ip.to_ipv4_mapped() {
                        Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                        None => SocketAddr::V6(SocketAddrV6::new(
                            ip,
                            port,
                            self.v6.sin6_flowinfo,
                            self.v6.sin6_scope_id,
                        )),
                    })
                }
                _ => None,
            }
        }
    }
}

fn sockaddr_in6(ip: Ipv6Addr, port: u16, scope: u32) -> libc::sockaddr_in6 {
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr {
            s6_addr: ip.octets(),
        },
        sin6_scope_id: scope,
    }
}

/// Control-message room per message: one cmsghdr and an int, aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(super) struct Cmsg(pub(super) [u8; 32]);
