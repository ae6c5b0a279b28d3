//! A packet capture on one interface of a node: the sizes of what arrived,
//! for the `overhead` assertion.

use std::io;

/// A packet socket on one interface (`AF_PACKET`, `SOCK_DGRAM`: each packet
/// from its network header on, as the wire carries it), made in the calling
/// thread's namespace and readable from any thread.
pub struct Capture {
    fd: std::os::fd::OwnedFd,
}

impl Capture {
    pub fn on(iface: &str) -> io::Result<Capture> {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(iface).map_err(io::Error::other)?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        let all = (libc::ETH_P_ALL as u16).to_be() as i32;
        // SAFETY: plain socket(2); the fd is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                all,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a new fd no one else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: zeroed sockaddr_ll is valid; the fields set are its own.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = all as u16;
        sll.sll_ifindex = index as i32;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid fd and a sockaddr_ll of its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Capture { fd })
    }

    /// The lengths of the packets that arrived for this host since the last
    /// call (outgoing ones left out).
    pub fn arrived(&self) -> Vec<usize> {
        use std::os::fd::AsRawFd;
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: zeroed sockaddr_ll is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // MSG_TRUNC: the packet's real length, whatever the buffer.
            // SAFETY: valid fd, buffer and address of the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                return out;
            }
            if sll.sll_pkttype != libc::PACKET_OUTGOING {
                out.push(n as usize);
            }
        }
    }
}
