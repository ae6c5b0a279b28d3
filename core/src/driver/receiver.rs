//! Receiving a batch from the tunnel socket: one recvmmsg without waiting;
//! with UDP_GRO a message is a train of datagrams, split again by the segment
//! size the kernel reports; IPv4 raw sockets' outer header is stripped.

use super::mmsg::{Cmsg, RawAddr};
use super::shared::{PACKET_BUF, Shared, SockKind};
use super::stats::{Ctr, Local};
use crate::codec::Codec;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// Room per received datagram without GRO (a reassembled one may reach 64 KiB).
const DATAGRAM_BUF: usize = 65536;
/// Room per received message with GRO: a whole train of datagrams.
const GRO_BUF: usize = 65536;

/// Receives batches from the tunnel socket.
pub(super) struct Receiver {
    hdrs: Vec<libc::mmsghdr>,
    /// Per message: the packet buffer's room, then the overflow area's.
    iov: Vec<[libc::iovec; 2]>,
    names: Vec<RawAddr>,
    cmsgs: Vec<Cmsg>,
    /// With GRO: the receive area, one GRO_BUF per message. Without: where
    /// the rest of a datagram longer than a packet buffer lands, DATAGRAM_BUF
    /// per message (the pages are touched only if a datagram needs them).
    area: Vec<u8>,
    pub(super) messages: usize,
}

impl Receiver {
    pub(super) fn new<C: Codec>(sh: &Shared<C>) -> Receiver {
        // With GRO each message can be a train of up to 64 datagrams: a few
        // messages make a batch.
        let messages = if sh.gro {
            (sh.batch / 16).max(2)
        } else {
            sh.batch
        };
        Receiver {
            // SAFETY: zeroed mmsghdr is valid (null pointers).
            hdrs: vec![unsafe { std::mem::zeroed() }; messages],
            iov: vec![
                [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                }; 2];
                messages
            ],
            names: vec![RawAddr::zeroed(); messages],
            cmsgs: vec![Cmsg([0; 32]); messages],
            area: vec![0; messages * if sh.gro { GRO_BUF } else { DATAGRAM_BUF }],
            messages,
        }
    }

    /// One recvmmsg without waiting: fills `pkts[..k]` and `peers[..k]` and
    /// returns k (0 when nothing was queued).
    pub(super) fn recv<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        pkts: &mut Vec<Vec<u8>>,
        peers: &mut Vec<Option<SocketAddr>>,
        local: &mut Local,
    ) -> usize {
        let gro = sh.gro;
        while pkts.len() < self.messages {
            pkts.push(Vec::with_capacity(PACKET_BUF));
        }
        self.prepare(gro, pkts);
        let Some(r) = self.recvmmsg(sh, local) else {
            return 0;
        };
        peers.clear();
        let mut k = 0;
        for m in 0..r {
            let h = &self.hdrs[m];
            let room = if gro {
                GRO_BUF
            } else {
                self.iov[m][0].iov_len + DATAGRAM_BUF
            };
            let len = (h.msg_len as usize).min(room);
            let peer = self.names[m].to_socket_addr();
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || peer.is_none() {
                local.add(Ctr::NetRecvErr, 1);
                if !gro {
                    // Keep the slot (k == m without GRO); no peer: skipped.
                    pkts[k].clear();
                    peers.push(None);
                    k += 1;
                }
                continue;
            }
            if gro {
                k = self.split_train(m, len, peer, pkts, peers, local, k);
            } else {
                // k == m here: the datagram is in its own packet buffer.
                let whole =
                    self.take_datagram(sh.kind == SockKind::Raw4, m, len, &mut pkts[k], local);
                peers.push(if whole { peer } else { None });
                k += 1;
            }
        }
        k
    }

    /// Points every message's header at its buffers: with GRO, its slice of
    /// the receive area; without, its packet buffer, then its overflow area.
    #[inline]
    #[allow(clippy::needless_range_loop)] // m indexes five arrays alike
    fn prepare(&mut self, gro: bool, pkts: &mut [Vec<u8>]) {
        for m in 0..self.messages {
            // Packets land in their own small buffers, not in 64 KiB ones at a
            // 64 KiB stride, whose first bytes all fall in the same cache sets.
            let step = if gro { GRO_BUF } else { DATAGRAM_BUF };
            // SAFETY: m < messages and the area holds messages * step bytes.
            let area = unsafe { self.area.as_mut_ptr().add(m * step) };
            let parts = if gro {
                self.iov[m][0] = libc::iovec {
                    iov_base: area as *mut libc::c_void,
                    iov_len: GRO_BUF,
                };
                1
            } else {
                let b = &mut pkts[m];
                b.clear();
                b.reserve(PACKET_BUF);
                self.iov[m] = [
                    libc::iovec {
                        iov_base: b.as_mut_ptr() as *mut libc::c_void,
                        iov_len: b.capacity(),
                    },
                    libc::iovec {
                        iov_base: area as *mut libc::c_void,
                        iov_len: DATAGRAM_BUF,
                    },
                ];
                2
            };
            let h = &mut self.hdrs[m].msg_hdr;
            h.msg_name = &mut self.names[m] as *mut RawAddr as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<RawAddr>() as _;
            h.msg_iov = self.iov[m].as_mut_ptr();
            h.msg_iovlen = parts;
            h.msg_flags = 0;
            if gro {
                h.msg_control = self.cmsgs[m].0.as_mut_ptr() as *mut libc::c_void;
                h.msg_controllen = std::mem::size_of::<Cmsg>() as _;
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            self.hdrs[m].msg_len = 0;
        }
    }

    /// The recvmmsg itself, retried when interrupted: how many messages came,
    /// or `None` for none queued (or an error, counted).
    #[inline]
    fn recvmmsg<C: Codec>(&mut self, sh: &Shared<C>, local: &mut Local) -> Option<usize> {
        loop {
            // SAFETY: hdrs point at iov, names and cmsgs of this struct and at
            // buffers (the area, pkts' spare capacity) that outlive the call.
            let r = unsafe {
                libc::recvmmsg(
                    sh.sock
                        .as_ref()
                        .expect("only run with a socket")
                        .as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    self.messages as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                return Some(r as usize);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return None,
                _ => {
                    // ICMP errors reported on the socket (ECONNREFUSED, ...)
                    // are not the receiver's concern.
                    local.add(Ctr::NetRecvErr, 1);
                    return None;
                }
            }
        }
    }

    /// GRO message `m`, `len` bytes, cut into its datagrams from `pkts[k]` on;
    /// the next free k.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn split_train(
        &self,
        m: usize,
        len: usize,
        peer: Option<SocketAddr>,
        pkts: &mut Vec<Vec<u8>>,
        peers: &mut Vec<Option<SocketAddr>>,
        local: &mut Local,
        mut k: usize,
    ) -> usize {
        let seg = gro_segment(&self.hdrs[m].msg_hdr);
        let data = &self.area[m * GRO_BUF..m * GRO_BUF + len];
        let step = if seg == 0 { data.len().max(1) } else { seg };
        for d in data.chunks(step) {
            if k == pkts.len() {
                pkts.push(Vec::with_capacity(PACKET_BUF));
            }
            let b = &mut pkts[k];
            b.clear();
            b.extend_from_slice(d);
            peers.push(peer);
            local.packet(Ctr::NetRxPackets, Ctr::NetRxBytes, d.len());
            k += 1;
        }
        k
    }

    /// Message `m` without GRO, `len` bytes, in `b`, its own packet buffer
    /// (the part past the buffer's room copied from the overflow area), with
    /// a raw IPv4 socket's outer header stripped. False for a packet whose
    /// outer header makes no sense: `b` is then left empty.
    #[inline]
    fn take_datagram(
        &self,
        raw4: bool,
        m: usize,
        len: usize,
        b: &mut Vec<u8>,
        local: &mut Local,
    ) -> bool {
        // SAFETY: the kernel wrote the first `first` bytes into the spare
        // capacity of pkts[m], which is `b`, and the rest into the overflow
        // area.
        let first = len.min(self.iov[m][0].iov_len);
        unsafe { b.set_len(first) };
        if len > first {
            let rest = &self.area[m * DATAGRAM_BUF..m * DATAGRAM_BUF + len - first];
            b.extend_from_slice(rest);
        }
        if raw4 {
            // IPv4 raw sockets deliver the outer header too.
            let ihl = b.first().map_or(0, |x| (x & 0x0f) as usize * 4);
            if ihl < 20 || ihl > b.len() {
                local.add(Ctr::NetRecvErr, 1);
                b.clear();
                return false;
            }
            b.drain(..ihl);
        }
        local.packet(Ctr::NetRxPackets, Ctr::NetRxBytes, b.len());
        true
    }
}

/// The segment size from a message's UDP_GRO control message, 0 if none.
fn gro_segment(h: &libc::msghdr) -> usize {
    if h.msg_control.is_null() || h.msg_controllen < std::mem::size_of::<libc::cmsghdr>() {
        return 0;
    }
    // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_* stay
    // within it, and the data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let data = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c);
                return if data >= 4 {
                    (p as *const i32).read_unaligned().max(0) as usize
                } else if data >= 2 {
                    (p as *const u16).read_unaligned() as usize
                } else {
                    0
                };
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}
