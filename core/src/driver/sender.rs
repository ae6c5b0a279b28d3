//! Sending a batch on the tunnel socket: one sendmmsg, with runs of equal-size
//! UDP datagrams to one peer as one UDP_SEGMENT message (GSO off for good once
//! the kernel refuses it), or, over raw IPv6, as Ethernet frames on the packet
//! socket where a next hop is known.

use super::mmsg::{Cmsg, RawAddr};
use super::packet_tx::{FrameSender, PacketTx};
use super::shared::Shared;
use super::stats::{Ctr, Local};
use crate::codec::{Codec, DropReason};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The kernel's UDP_MAX_SEGMENTS.
const UDP_MAX_SEGMENTS: usize = 64;
/// A UDP GSO message's payload at most (IPv4's 65507, rounded down for headroom).
const UDP_GSO_MAX_BYTES: usize = 65000;

fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EMSGSIZE) | Some(libc::ENOPROTOOPT)
    )
}

/// One sendmmsg message being built: which packets, to whom.
#[derive(Clone, Copy)]
struct Msg {
    /// Index in the caller's items of the first datagram.
    first_item: usize,
    /// First entry in `Sender::iov`, and how many.
    iov: usize,
    count: usize,
    bytes: usize,
    /// The UDP_SEGMENT size when it carries several datagrams, else 0.
    segment: usize,
    addr: RawAddr,
    addr_len: libc::socklen_t,
}

/// Sends batches on the tunnel socket, reusing its arrays.
pub(super) struct Sender {
    msgs: Vec<Msg>,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    cmsgs: Vec<Cmsg>,
    /// With a packet socket: this thread's next hops, and per item the next
    /// hop's slot it goes out with as a frame (None: the raw socket).
    frames: Option<FrameSender>,
    ways: Vec<Option<usize>>,
}

impl Sender {
    pub(super) fn new<C: Codec>(sh: &Shared<C>) -> Sender {
        let batch = sh.batch;
        Sender {
            msgs: Vec::with_capacity(batch),
            iov: Vec::with_capacity(batch),
            hdrs: Vec::with_capacity(batch),
            cmsgs: Vec::with_capacity(batch),
            frames: sh.packet_tx.as_ref().map(|_| FrameSender::new(batch)),
            ways: Vec::with_capacity(batch),
        }
    }

    /// Sends `bufs[i]` to `peer` for each `(i, peer)` of `items`, in order.
    pub(super) fn send<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        local: &mut Local,
    ) {
        if sh.sock.is_none() {
            // TunOnly: there is no network to send to.
            for _ in items {
                local.dropped(DropReason::NoRoute);
            }
            return;
        }
        if let Some(tx) = &sh.packet_tx {
            self.send_framed(sh, tx, bufs, items, local);
            return;
        }
        let mut from = 0;
        while from < items.len() {
            let gso = sh.kind.is_udp() && sh.gso.load(Ordering::Relaxed);
            match self.send_from(sh, bufs, &items[from..], gso, local) {
                None => return,
                // GSO refused: the rest goes again without it.
                Some(done) => from += done,
            }
        }
    }

    /// Raw IPv6 with a packet socket: what can go as frames does, the rest
    /// through the raw socket, each run of either in order.
    fn send_framed<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        tx: &PacketTx,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        local: &mut Local,
    ) {
        let Some(frames) = self.frames.as_mut() else {
            let _ = self.send_from(sh, bufs, items, false, local);
            return;
        };
        frames.begin();
        let now = Instant::now();
        self.ways.clear();
        for &(b, peer) in items {
            self.ways.push(match peer {
                SocketAddr::V6(p) => frames.route(tx, *p.ip(), bufs[b].len(), now),
                SocketAddr::V4(_) => None,
            });
        }
        local.add(Ctr::FrameLookups, std::mem::take(&mut frames.lookups));
        let mut i = 0;
        while i < items.len() {
            let framed = self.ways[i].is_some();
            let end = (i..items.len())
                .find(|&k| self.ways[k].is_some() != framed)
                .unwrap_or(items.len());
            if let (true, Some(frames)) = (framed, self.frames.as_mut()) {
                let ways = &self.ways;
                let s = frames.send(
                    tx,
                    (i..end).filter_map(|k| Some((ways[k]?, bufs[items[k].0].as_slice()))),
                );
                local.add(Ctr::FramePackets, s.packets);
                local.add(Ctr::NetTxPackets, s.packets);
                local.add(Ctr::NetTxBytes, s.bytes);
                local.add(Ctr::NetSendErr, s.failed);
            } else {
                local.add(Ctr::FrameFallbacks, (end - i) as u64);
                // No GSO on a raw socket: one pass sends them all.
                let _ = self.send_from(sh, bufs, &items[i..end], false, local);
            }
            i = end;
        }
    }

    /// Sends items until done (None), or until a GSO message is refused: then
    /// GSO is off and the number of items dealt with is returned.
    fn send_from<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        gso: bool,
        local: &mut Local,
    ) -> Option<usize> {
        self.build_messages(sh, bufs, items, gso, local);
        self.fill_headers();
        self.transmit(sh, local)
    }

    /// The messages of `items`: runs of datagrams to one peer, all of one size
    /// but a shorter last one, become one UDP_SEGMENT message (with `gso`).
    #[inline]
    fn build_messages<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        gso: bool,
        local: &mut Local,
    ) {
        self.msgs.clear();
        self.iov.clear();
        let mut i = 0;
        while i < items.len() {
            let (b, peer) = items[i];
            let Some((addr, addr_len)) = RawAddr::from(peer, sh.kind) else {
                local.add(Ctr::NetSendErr, 1);
                i += 1;
                continue;
            };
            let size = bufs[b].len();
            let first_item = i;
            let iov_at = self.iov.len();
            self.iov.push(libc::iovec {
                iov_base: bufs[b].as_ptr() as *mut libc::c_void,
                iov_len: size,
            });
            let mut count = 1;
            let mut bytes = size;
            i += 1;
            if gso && size > 0 {
                while i < items.len()
                    && count < UDP_MAX_SEGMENTS
                    && items[i].1 == peer
                    && bufs[items[i].0].len() <= size
                    && !bufs[items[i].0].is_empty()
                    && bytes + bufs[items[i].0].len() <= UDP_GSO_MAX_BYTES
                {
                    let len = bufs[items[i].0].len();
                    self.iov.push(libc::iovec {
                        iov_base: bufs[items[i].0].as_ptr() as *mut libc::c_void,
                        iov_len: len,
                    });
                    count += 1;
                    bytes += len;
                    i += 1;
                    if len < size {
                        break;
                    }
                }
            }
            self.msgs.push(Msg {
                first_item,
                iov: iov_at,
                count,
                bytes,
                segment: if count > 1 { size } else { 0 },
                addr,
                addr_len,
            });
        }
    }

    /// A sendmmsg header for each message, with its UDP_SEGMENT control
    /// message when it carries several datagrams.
    #[inline]
    fn fill_headers(&mut self) {
        let n = self.msgs.len();
        // SAFETY: zeroed mmsghdr and Cmsg are valid (null pointers, zero lengths).
        self.hdrs.resize(n, unsafe { std::mem::zeroed() });
        self.cmsgs.resize(n, Cmsg([0; 32]));
        for m in 0..n {
            let msg = &mut self.msgs[m];
            let h = &mut self.hdrs[m];
            // SAFETY: as above.
            *h = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = &mut msg.addr as *mut RawAddr as *mut libc::c_void;
            h.msg_hdr.msg_namelen = msg.addr_len;
            h.msg_hdr.msg_iov = self.iov[msg.iov..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = msg.count as _;
            if msg.segment > 0 {
                let c = &mut self.cmsgs[m];
                h.msg_hdr.msg_control = c.0.as_mut_ptr() as *mut libc::c_void;
                // SAFETY: CMSG_* on a control buffer of 32 bytes, which holds
                // CMSG_SPACE(2) = 24; the data is written unaligned.
                unsafe {
                    h.msg_hdr.msg_controllen = libc::CMSG_SPACE(2) as _;
                    let cm = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                    (*cm).cmsg_level = libc::SOL_UDP;
                    (*cm).cmsg_type = libc::UDP_SEGMENT;
                    (*cm).cmsg_len = libc::CMSG_LEN(2) as _;
                    (libc::CMSG_DATA(cm) as *mut u16).write_unaligned(msg.segment as u16);
                }
            }
        }
    }

    /// The sendmmsg calls over the headers; as [`Sender::send_from`] returns.
    /// Only `send_from` calls it, right after `build_messages` over its `bufs`.
    #[inline]
    fn transmit<C: Codec>(&mut self, sh: &Shared<C>, local: &mut Local) -> Option<usize> {
        let n = self.msgs.len();
        let fd = (sh.sock.as_ref())
            .expect("send() keeps TunOnly away")
            .as_raw_fd();
        let mut m = 0;
        while m < n {
            let left = (n - m).min(1024);
            // SAFETY: hdrs[m..m+left] point into iov, msgs (addresses) and cmsgs,
            // which live until the call returns, and into the `bufs` that
            // `send_from` holds borrowed from `build_messages` to here.
            let r = unsafe { libc::sendmmsg(fd, self.hdrs[m..].as_mut_ptr(), left as u32, 0) };
            if r > 0 {
                for msg in &self.msgs[m..m + r as usize] {
                    local.add(Ctr::NetTxPackets, msg.count as u64);
                    local.add(Ctr::NetTxBytes, msg.bytes as u64);
                }
                m += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            let msg = self.msgs[m];
            if msg.segment > 0 && gso_refused(&e) {
                // The path cannot segment (no checksum offload, a segment over the
                // MTU): plain datagrams from now on, for this socket.
                sh.gso.store(false, Ordering::Relaxed);
                local.add(Ctr::GsoRefused, 1);
                return Some(msg.first_item);
            }
            local.add(Ctr::NetSendErr, msg.count as u64);
            m += 1;
        }
        None
    }
}
