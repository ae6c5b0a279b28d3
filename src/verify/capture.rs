//! A packet capture on one interface of a node: the lengths of the IP packets
//! that arrived, as a wire carries them, for the `overhead` assertion.
//!
//! A sender may hand the kernel several datagrams as one super-packet (UDP
//! GSO, as tunbench's own datapaths send), and a veth passes it on whole: a
//! plain packet socket sees one long packet where a wire carries several.
//! This socket asks for each packet's virtio-net header (PACKET_VNET_HDR) and
//! counts a super-packet as the segments it stands for.

use crate::driver::offload::Segmenter;
use crate::driver::offload::vnet_header::{F_NEEDS_CSUM, VNET_HDR_LEN, VirtioNetHdr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Room for one read: the virtio-net header, a link header and the largest
/// super-packet a veth passes (64 KiB; BIG TCP up to 256 KiB).
const READ_LEN: usize = VNET_HDR_LEN + 256 * 1024;

/// A packet socket on one interface (`AF_PACKET`, `SOCK_RAW`, with each
/// packet's virtio-net header and its network header's offset), made in the
/// calling thread's namespace and readable from any thread.
pub struct Capture {
    fd: OwnedFd,
    read: Vec<u8>,
}

/// What arrived since the last look.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Arrived {
    /// IP packet lengths, a super-packet's segments one by one.
    pub lengths: Vec<usize>,
    /// Super-packets whose segments could not be told: the kernel could not
    /// describe one (before Linux 6.2 a packet socket fails to read a UDP
    /// super-packet), or its header did not fit the packet.
    pub undescribed: usize,
}

impl Capture {
    pub fn on(iface: &str) -> io::Result<Capture> {
        let name = std::ffi::CString::new(iface).map_err(io::Error::other)?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); the fd is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(all),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a new fd no one else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        for opt in [libc::PACKET_VNET_HDR, libc::PACKET_AUXDATA] {
            set_packet_option(&fd, opt)?;
        }
        // SAFETY: zeroed sockaddr_ll is valid; the fields set are its own.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = all;
        sll.sll_ifindex = index as i32;
        // SAFETY: a valid fd and a sockaddr_ll of its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const sll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Capture {
            fd,
            read: vec![0; READ_LEN],
        })
    }

    /// The packets that arrived for this host since the last call (outgoing
    /// ones left out).
    pub fn arrived(&mut self) -> Arrived {
        let mut out = Arrived::default();
        loop {
            match self.read_one() {
                Ok(None) => {}
                Ok(Some((len, net))) => match wire_lengths(&self.read[..len], net) {
                    Some(l) => out.lengths.extend(l),
                    None => out.undescribed += 1,
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The kernel dequeued a packet it could not describe.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => out.undescribed += 1,
                Err(_) => return out,
            }
        }
    }

    /// One packet: the bytes read (virtio-net header first) and where its
    /// network header starts after that header; None for an outgoing packet.
    /// A packet longer than the buffer reads as an undescribable one.
    fn read_one(&mut self) -> io::Result<Option<(usize, usize)>> {
        // SAFETY: zeroed sockaddr_ll and msghdr are valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: self.read.as_mut_ptr().cast(),
            iov_len: self.read.len(),
        };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&raw mut sll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: every pointer in msg is to a buffer of the length given,
        // alive for the call.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if sll.sll_pkttype == libc::PACKET_OUTGOING {
            return Ok(None);
        }
        if msg.msg_flags & libc::MSG_TRUNC != 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let net = network_offset(&msg).ok_or(io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(Some((n as usize, net)))
    }
}

fn set_packet_option(fd: &OwnedFd, opt: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid fd and an int option of its size.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The network header's offset from the link header, from the packet's
/// PACKET_AUXDATA message.
fn network_offset(msg: &libc::msghdr) -> Option<usize> {
    // SAFETY: msg was filled by recvmsg; the CMSG_* walk stays inside its
    // control buffer, and the aux data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                let aux: libc::tpacket_auxdata =
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Some(usize::from(aux.tp_net));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// The IP packet lengths a wire carries for one read: `read` is the
/// virtio-net header and then the packet from its link header on, `net`
/// bytes of which come before the network header. A super-packet becomes its
/// segments; None if its header does not fit it.
fn wire_lengths(read: &[u8], net: usize) -> Option<Vec<usize>> {
    let mut hdr = VirtioNetHdr::parse(read).ok()?;
    let ip = read.get(VNET_HDR_LEN + net..)?;
    if !hdr.is_gso() {
        return Some(vec![ip.len()]);
    }
    // The kernel counts the transport header's start from the link header.
    if hdr.flags & F_NEEDS_CSUM == 0 {
        return None;
    }
    hdr.csum_start = hdr.csum_start.checked_sub(u16::try_from(net).ok()?)?;
    let s = Segmenter::new(&hdr, ip).ok()?;
    Some((0..s.count()).map(|i| s.segment_len(i)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::offload::vnet_header::{GSO_NONE, GSO_UDP_L4};
    use crate::wire::ipv4;

    const ETHERNET: usize = 14;

    /// A read as the kernel gives it: the virtio-net header, an Ethernet
    /// header, an IPv4 header and a UDP header, then `payload` bytes.
    fn read(hdr: VirtioNetHdr, payload: usize) -> Vec<u8> {
        let mut b = hdr.to_bytes().to_vec();
        b.extend_from_slice(&[0; ETHERNET]);
        let repr = ipv4::Repr {
            src_addr: "198.18.0.1".parse().unwrap(),
            dst_addr: "198.18.0.2".parse().unwrap(),
            protocol: 17,
            payload_len: 8 + payload,
            ttl: 64,
            dscp_ecn: 0,
            ident: 1,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        let at = b.len();
        b.resize(at + repr.buffer_len(), 0);
        repr.emit(&mut ipv4::Packet::new_unchecked(&mut b[at..]));
        b
    }

    fn uso(gso_size: u16, flags: u8) -> VirtioNetHdr {
        VirtioNetHdr {
            flags,
            gso_type: GSO_UDP_L4,
            hdr_len: (ETHERNET + 28) as u16,
            gso_size,
            // From the link header, as a packet socket says it.
            csum_start: (ETHERNET + 20) as u16,
            csum_offset: 6,
        }
    }

    #[test]
    fn a_plain_packet_is_its_own_length() {
        let plain = VirtioNetHdr {
            gso_type: GSO_NONE,
            ..VirtioNetHdr::default()
        };
        assert_eq!(wire_lengths(&read(plain, 1055), ETHERNET), Some(vec![1083]));
    }

    #[test]
    fn a_udp_super_packet_is_its_datagrams_on_the_wire() {
        // Two 1000-byte datagrams and a 500-byte one, sent as one: 2528 bytes
        // of IPv4 that a wire carries as 1028 + 1028 + 528.
        let r = read(uso(1000, F_NEEDS_CSUM), 2500);
        assert_eq!(r.len(), VNET_HDR_LEN + ETHERNET + 2528);
        assert_eq!(wire_lengths(&r, ETHERNET), Some(vec![1028, 1028, 528]));
    }

    #[test]
    fn a_super_packet_whose_header_does_not_fit_is_undescribed() {
        // No transport offset to count from, a GSO size of 0, a truncated
        // read, a network header past the end.
        assert_eq!(wire_lengths(&read(uso(1000, 0), 2500), ETHERNET), None);
        assert_eq!(
            wire_lengths(&read(uso(0, F_NEEDS_CSUM), 2500), ETHERNET),
            None
        );
        let r = read(uso(1000, F_NEEDS_CSUM), 2500);
        assert_eq!(wire_lengths(&r[..VNET_HDR_LEN + 30], ETHERNET), None);
        assert_eq!(wire_lengths(&r, r.len()), None);
    }
}
