//! UDP offloads as the measurement engine and the UDP tunnels' sockets ask
//! for them: the socket options UDP_SEGMENT and UDP_GRO (udp(7)).

use super::Found;
use super::sandbox::in_throwaway_namespace;
use std::io;
use std::os::fd::AsRawFd;

pub(super) fn probe_gso() -> Found {
    // A kernel that knows UDP_SEGMENT takes it as a socket option (size 0:
    // each message says its own).
    socket_option("UDP_SEGMENT", libc::UDP_SEGMENT, 0)
}

pub(super) fn probe_gro() -> Found {
    socket_option("UDP_GRO", libc::UDP_GRO, 1)
}

fn socket_option(what: &str, name: libc::c_int, value: libc::c_int) -> Found {
    in_throwaway_namespace(|| {
        let sock = match std::net::UdpSocket::bind("0.0.0.0:0") {
            Ok(s) => s,
            Err(e) => return Found::Unknown(format!("opening a UDP socket: {e}")),
        };
        // SAFETY: passes a pointer to one int and its size.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_UDP,
                name,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Found::Present;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOPROTOOPT) {
            Found::Absent(format!("the kernel refused {what}: {e}"))
        } else {
            Found::Unknown(format!("{what}: {e}"))
        }
    })
}
