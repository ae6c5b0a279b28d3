//! A cheaper way out for the raw IPv6 transport: whole Ethernet frames on an
//! AF_PACKET socket instead of payloads on the raw IPv6 socket, which costs the
//! kernel, per packet, a copy with a checksum nobody reads, a route lookup, the
//! OUTPUT and POSTROUTING hooks and a neighbour lookup. A frame is one copy and
//! the device's queue; the route, the MTU and the next hop's MAC are looked up
//! here instead, over rtnetlink, once per peer and again every [`REFRESH`].
//! Frames skip the sending namespace's netfilter OUTPUT/POSTROUTING hooks and
//! its IPv6 counters, not the egress device's qdisc or packet taps; their flow
//! label and traffic class are 0.
//!
//! The raw socket stays the path of what a frame cannot stand for: packets over
//! the path MTU, which the kernel must fragment after encapsulation (RFC 2473
//! section 7.2); peers whose next hop has no usable MAC yet, and routes out of a
//! non-Ethernet device ([`Lookup`]); and one packet per peer at each refresh, so
//! the kernel's neighbour entry sees traffic and is re-confirmed or fails
//! (frames go on to a STALE/DELAY/PROBE entry's MAC, as the kernel does).
//! [`PacketTx::open`] opens the sockets in the datapath's namespace; each
//! sending thread keeps its own [`FrameSender`] with its own next-hop cache.

use crate::wire::ipv6;
use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
use netlink_packet_route::link::{LinkAttribute, LinkLayerType, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::collections::HashMap;
use std::io;
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a resolved next hop is used before it is looked up again.
pub const REFRESH: Duration = Duration::from_secs(1);
/// How soon a peer whose next hop has no usable MAC yet is looked up again
/// (its packets take the raw socket meanwhile, which makes the kernel resolve
/// the neighbour; at 3 Gbit/s 10 ms is some 2500 packets).
pub const RETRY: Duration = Duration::from_millis(10);
/// Peers a sender remembers; past this the cache starts over.
const MAX_PEERS: usize = 4096;

const ETH_HEADER_LEN: usize = 14;
const ETH_P_IPV6: u16 = 0x86dd;
/// An Ethernet header, then the IPv6 fixed header.
pub const FRAME_HEADER_LEN: usize = ETH_HEADER_LEN + ipv6::HEADER_LEN;
/// Where the IPv6 payload length lies in a frame header.
const PAYLOAD_LEN_AT: usize = ETH_HEADER_LEN + 4;

pub type Mac = [u8; 6];

/// How frames to one peer go out: which device, and the headers every frame
/// to it starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub ifindex: u32,
    /// The largest IPv6 packet (fixed header included) that leaves whole: the
    /// device MTU, or the route's (a learnt path MTU) when lower.
    pub mtu: u32,
    /// Ethernet and IPv6 headers, IPv6 payload length 0.
    pub header: [u8; FRAME_HEADER_LEN],
}

impl NextHop {
    pub fn new(ifindex: u32, mtu: u32, dst_mac: Mac, src_mac: Mac, ip: &ipv6::Repr) -> NextHop {
        NextHop {
            ifindex,
            mtu,
            header: frame_header(dst_mac, src_mac, ip),
        }
    }

    /// Whether a payload of `len` bytes leaves in one frame (else the kernel
    /// fragments it, through the raw socket).
    pub fn fits(&self, len: usize) -> bool {
        ipv6::HEADER_LEN + len <= self.mtu as usize
    }
}

/// An Ethernet header to `dst` from `src` carrying IPv6, then `ip`'s fixed
/// header (whose payload length [`set_payload_len`] fills in per packet).
pub fn frame_header(dst: Mac, src: Mac, ip: &ipv6::Repr) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
    ip.emit(&mut ipv6::Packet::new_unchecked(&mut h[ETH_HEADER_LEN..]));
    h
}

pub fn set_payload_len(h: &mut [u8; FRAME_HEADER_LEN], len: u16) {
    h[PAYLOAD_LEN_AT..PAYLOAD_LEN_AT + 2].copy_from_slice(&len.to_be_bytes());
}

/// What the kernel's tables say about sending to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Frames can go.
    Frame(NextHop),
    /// The next hop has no usable MAC yet: look again soon.
    Unresolved,
    /// A frame cannot stand for what the kernel does here (no unicast route,
    /// a device that is not Ethernet): the raw socket sends everything.
    RawOnly,
}

impl Lookup {
    /// How long the answer holds.
    pub fn lasts(&self) -> Duration {
        match self {
            Lookup::Unresolved => RETRY,
            Lookup::Frame(_) | Lookup::RawOnly => REFRESH,
        }
    }
}

/// Whether a neighbour entry in `state` has a MAC the kernel itself would send
/// to. INCOMPLETE and FAILED have none to trust; STALE, DELAY and PROBE still
/// carry traffic while the kernel re-confirms them.
pub fn neighbour_usable(state: NeighbourState) -> bool {
    matches!(
        state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp
    )
}

// ------------------------------------------------------------------ rtnetlink

/// Route, link and neighbour lookups on one rtnetlink socket, one request at a
/// time.
struct Resolver {
    sock: netlink_sys::Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Resolver {
    fn new() -> io::Result<Resolver> {
        let mut sock = netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?;
        sock.bind_auto()?;
        // A request never waits on a kernel that does not answer.
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        // SAFETY: a timeval on this stack frame, its size given.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Resolver {
            sock,
            seq: 0,
            buf: vec![0; 16 << 10],
        })
    }

    /// One request, its one answer: Ok(None) when the kernel answers ENOENT.
    fn ask(&mut self, m: RouteNetlinkMessage) -> io::Result<Option<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(m));
        req.finalize();
        let mut out = vec![0; req.buffer_len()];
        req.serialize(&mut out);
        self.sock.send(&out, 0)?;
        loop {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            let mut at = 0;
            while at < n {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[at..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = msg.header.length as usize;
                if len == 0 {
                    break;
                }
                at += (len + 3) & !3;
                if msg.header.sequence_number != self.seq {
                    // The answer to an earlier request that timed out.
                    continue;
                }
                return match msg.payload {
                    NetlinkPayload::InnerMessage(m) => Ok(Some(m)),
                    NetlinkPayload::Error(e) if e.raw_code() == -libc::ENOENT => Ok(None),
                    NetlinkPayload::Error(e) if e.code.is_some() => Err(e.to_io()),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "rtnetlink answered with no message",
                    )),
                };
            }
        }
    }

    /// How the kernel would send from `local` to `peer`.
    fn next_hop(
        &mut self,
        local: Ipv6Addr,
        peer: Ipv6Addr,
        protocol: u8,
        hop_limit: u8,
    ) -> io::Result<Lookup> {
        let Some(route) = self.route(local, peer)? else {
            return Ok(Lookup::RawOnly);
        };
        let Some((dev_mtu, src_mac)) = self.ethernet_link(route.oif)? else {
            return Ok(Lookup::RawOnly);
        };
        let Some(dst_mac) = self.neighbour_mac(route.oif, route.gateway.unwrap_or(peer))? else {
            return Ok(Lookup::Unresolved);
        };
        let ip = ipv6::Repr {
            src_addr: local,
            dst_addr: peer,
            next_header: protocol,
            payload_len: 0,
            hop_limit: route.hops.map_or(hop_limit, |h| h.min(255) as u8),
            traffic_class: 0,
            flow_label: 0,
        };
        let mtu = route.mtu.map_or(dev_mtu, |m| m.min(dev_mtu));
        Ok(Lookup::Frame(NextHop::new(
            route.oif, mtu, dst_mac, src_mac, &ip,
        )))
    }

    /// The unicast route from `local` to `peer`, as `ip -6 route get <peer>
    /// from <local>` shows it, with a learnt path MTU among its metrics;
    /// `None` for no unicast route out of an interface.
    fn route(&mut self, local: Ipv6Addr, peer: Ipv6Addr) -> io::Result<Option<Route>> {
        let mut rq = RouteMessage::default();
        rq.header.address_family = AddressFamily::Inet6;
        rq.header.destination_prefix_length = 128;
        rq.header.source_prefix_length = 128;
        rq.attributes
            .push(RouteAttribute::Destination(RouteAddress::Inet6(peer)));
        rq.attributes
            .push(RouteAttribute::Source(RouteAddress::Inet6(local)));
        let Some(RouteNetlinkMessage::NewRoute(route)) =
            self.ask(RouteNetlinkMessage::GetRoute(rq))?
        else {
            return Ok(None);
        };
        if route.header.kind != RouteType::Unicast {
            return Ok(None);
        }
        let (mut oif, mut gateway, mut route_mtu, mut route_hops) = (None, None, None, None);
        for a in &route.attributes {
            match a {
                RouteAttribute::Oif(i) => oif = Some(*i),
                RouteAttribute::Gateway(RouteAddress::Inet6(g)) => gateway = Some(*g),
                RouteAttribute::Metrics(ms) => {
                    for m in ms {
                        match m {
                            RouteMetric::Mtu(v) if *v > 0 => route_mtu = Some(*v),
                            RouteMetric::Hoplimit(v) if *v > 0 => route_hops = Some(*v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(oif.map(|oif| Route {
            oif,
            gateway,
            mtu: route_mtu,
            hops: route_hops,
        }))
    }

    /// Device `ifindex`'s MTU and MAC address, if it is an Ethernet device.
    fn ethernet_link(&mut self, ifindex: u32) -> io::Result<Option<(u32, Mac)>> {
        let mut lq = LinkMessage::default();
        lq.header.index = ifindex;
        let Some(RouteNetlinkMessage::NewLink(link)) =
            self.ask(RouteNetlinkMessage::GetLink(lq))?
        else {
            return Ok(None);
        };
        if link.header.link_layer_type != LinkLayerType::Ether {
            return Ok(None);
        }
        let (mut dev_mtu, mut src_mac) = (None, None);
        for a in &link.attributes {
            match a {
                LinkAttribute::Mtu(v) => dev_mtu = Some(*v),
                LinkAttribute::Address(m) => src_mac = mac(m),
                _ => {}
            }
        }
        Ok(dev_mtu.zip(src_mac))
    }

    /// The MAC address of neighbour `addr` on device `ifindex`, if it is
    /// known and usable.
    fn neighbour_mac(&mut self, ifindex: u32, addr: Ipv6Addr) -> io::Result<Option<Mac>> {
        let mut nq = NeighbourMessage::default();
        nq.header.family = AddressFamily::Inet6;
        nq.header.ifindex = ifindex;
        nq.attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::Inet6(
                addr,
            )));
        let Some(RouteNetlinkMessage::NewNeighbour(n)) =
            self.ask(RouteNetlinkMessage::GetNeighbour(nq))?
        else {
            return Ok(None);
        };
        if !neighbour_usable(n.header.state) {
            return Ok(None);
        }
        Ok(n.attributes.iter().find_map(|a| match a {
            NeighbourAttribute::LinkLayerAddress(m) => mac(m),
            _ => None,
        }))
    }
}

/// What a route lookup keeps: the device out, the gateway if any, and the
/// route's own MTU and hop limit if it sets them.
struct Route {
    oif: u32,
    gateway: Option<Ipv6Addr>,
    mtu: Option<u32>,
    hops: Option<u32>,
}

fn mac(b: &[u8]) -> Option<Mac> {
    let m: Mac = b.try_into().ok()?;
    (m != [0; 6]).then_some(m)
}

// ------------------------------------------------------------------ sending

/// The packet socket and the resolver, shared by a driver's threads.
pub struct PacketTx {
    sock: OwnedFd,
    resolver: Mutex<Resolver>,
    local: Ipv6Addr,
    protocol: u8,
    /// The hop limit of a route with none of its own (what the raw socket
    /// would use: IPV6_UNICAST_HOPS).
    hop_limit: u8,
}

impl PacketTx {
    /// Opens a send-only packet socket (protocol 0: no packet is ever queued
    /// to it) and an rtnetlink socket, in the calling thread's namespace.
    pub fn open(
        local: Ipv6Addr,
        protocol: u8,
        hop_limit: u8,
        sndbuf: usize,
    ) -> io::Result<PacketTx> {
        // SAFETY: socket returns a new descriptor or -1.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we own from here on.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // No PACKET_QDISC_BYPASS: a veth has no queue to skip, and without it
        // the egress device's qdisc and packet taps (tcpdump in the sending
        // namespace) still see every frame.
        // Like the tunnel socket's SO_SNDBUFFORCE; the default is enough if refused.
        let _ = setsockopt_int(
            &sock,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            sndbuf.min(i32::MAX as usize) as i32,
        );
        Ok(PacketTx {
            sock,
            resolver: Mutex::new(Resolver::new()?),
            local,
            protocol,
            hop_limit,
        })
    }

    /// The next hop towards `peer` now, from the kernel's tables. An error
    /// (no route: the raw socket will say so too) counts as unresolved.
    pub fn resolve(&self, peer: Ipv6Addr) -> Lookup {
        self.resolver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_hop(self.local, peer, self.protocol, self.hop_limit)
            .unwrap_or(Lookup::Unresolved)
    }
}

fn setsockopt_int(fd: &OwnedFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: an int on this stack frame, its size given.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &v as *const i32 as *const libc::c_void,
            4,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

struct Entry {
    hop: Option<NextHop>,
    /// When to look the peer up again.
    due: Instant,
}

/// What one `send` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub packets: u64,
    /// IPv6 payload bytes (what the raw socket would have counted).
    pub bytes: u64,
    /// Frames the packet socket refused.
    pub failed: u64,
}

/// One sending thread's next hops and sendmmsg arrays.
pub struct FrameSender {
    hops: Vec<Entry>,
    index: HashMap<Ipv6Addr, usize>,
    /// The last peer looked up, and its slot: a batch mostly goes to one peer.
    last: Option<(Ipv6Addr, usize)>,
    headers: Vec<[u8; FRAME_HEADER_LEN]>,
    addrs: Vec<libc::sockaddr_ll>,
    iov: Vec<[libc::iovec; 2]>,
    msgs: Vec<libc::mmsghdr>,
    /// Next-hop lookups made (each a few rtnetlink round trips).
    pub lookups: u64,
}

impl FrameSender {
    pub fn new(batch: usize) -> FrameSender {
        FrameSender {
            hops: Vec::new(),
            index: HashMap::new(),
            last: None,
            headers: Vec::with_capacity(batch),
            addrs: Vec::with_capacity(batch),
            iov: Vec::with_capacity(batch),
            msgs: Vec::with_capacity(batch),
            lookups: 0,
        }
    }

    /// Which slot a payload of `len` bytes to `peer` goes out with as a frame,
    /// or None: through the raw socket. Looks the peer up when due; the packet
    /// that finds its peer due goes through the raw socket (see the module
    /// comment). Slots stay valid until the next `begin`.
    pub fn route(
        &mut self,
        tx: &PacketTx,
        peer: Ipv6Addr,
        len: usize,
        now: Instant,
    ) -> Option<usize> {
        let slot = match self.last {
            Some((p, s)) if p == peer => s,
            _ => {
                let s = match self.index.get(&peer) {
                    Some(&s) => s,
                    None => {
                        self.hops.push(Entry {
                            hop: None,
                            due: now,
                        });
                        self.index.insert(peer, self.hops.len() - 1);
                        self.hops.len() - 1
                    }
                };
                self.last = Some((peer, s));
                s
            }
        };
        let e = &mut self.hops[slot];
        if now >= e.due {
            self.lookups += 1;
            let l = tx.resolve(peer);
            e.due = now + l.lasts();
            e.hop = match l {
                Lookup::Frame(h) => Some(h),
                Lookup::Unresolved | Lookup::RawOnly => None,
            };
            return None;
        }
        match &e.hop {
            Some(h) if h.fits(len) => Some(slot),
            _ => None,
        }
    }

    /// Forgets every peer once there are too many; call between batches.
    pub fn begin(&mut self) {
        if self.hops.len() > MAX_PEERS {
            self.hops.clear();
            self.index.clear();
            self.last = None;
        }
    }

    /// Sends each `(slot, payload)` (slots from `route` since the last
    /// `begin`) as one frame, in order, with one sendmmsg for them all.
    pub fn send<'a>(
        &mut self,
        tx: &PacketTx,
        items: impl Iterator<Item = (usize, &'a [u8])>,
    ) -> Sent {
        self.headers.clear();
        self.addrs.clear();
        self.iov.clear();
        let mut sent = Sent::default();
        for (slot, payload) in items {
            let Some(hop) = self.hops.get(slot).and_then(|e| e.hop.as_ref()) else {
                // Not a slot `route` gave out since `begin`.
                sent.failed += 1;
                continue;
            };
            let mut h = hop.header;
            set_payload_len(&mut h, payload.len().min(u16::MAX as usize) as u16);
            self.headers.push(h);
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            a.sll_family = libc::AF_PACKET as u16;
            a.sll_protocol = ETH_P_IPV6.to_be();
            a.sll_ifindex = hop.ifindex as i32;
            self.addrs.push(a);
            self.iov.push([
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: FRAME_HEADER_LEN,
                },
                libc::iovec {
                    iov_base: payload.as_ptr() as *mut libc::c_void,
                    iov_len: payload.len(),
                },
            ]);
        }
        let n = self.headers.len();
        // SAFETY: a zeroed mmsghdr is valid (null pointers, zero lengths).
        self.msgs.resize(n, unsafe { std::mem::zeroed() });
        for i in 0..n {
            // The arrays are complete now: their addresses no longer move.
            self.iov[i][0].iov_base = self.headers[i].as_mut_ptr() as *mut libc::c_void;
            let h = &mut self.msgs[i];
            h.msg_hdr.msg_name = &mut self.addrs[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            h.msg_hdr.msg_iov = self.iov[i].as_mut_ptr();
            h.msg_hdr.msg_iovlen = 2;
            h.msg_len = 0;
        }
        let mut m = 0;
        while m < n {
            // SAFETY: msgs[m..n] point into headers, addrs and iov, which live
            // until the call returns, and at the payloads, borrowed by `items`'
            // caller for as long.
            let r = unsafe {
                libc::sendmmsg(
                    tx.sock.as_raw_fd(),
                    self.msgs[m..].as_mut_ptr(),
                    (n - m) as u32,
                    0,
                )
            };
            if r > 0 {
                for iov in &self.iov[m..m + r as usize] {
                    sent.packets += 1;
                    sent.bytes += iov[1].iov_len as u64;
                }
                m += r as usize;
                continue;
            }
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            // This frame failed (ENOBUFS from a full device queue, the device
            // gone): skip it, as the raw socket path does.
            sent.failed += 1;
            m += 1;
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B4: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0x51, 0, 0, 0, 2);
    const AFTR: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0x51, 0, 0, 0, 1);
    const DST_MAC: Mac = [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01];
    const SRC_MAC: Mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x02];

    fn repr() -> ipv6::Repr {
        ipv6::Repr {
            src_addr: B4,
            dst_addr: AFTR,
            next_header: 4,
            payload_len: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    #[rustfmt::skip]
    const GOLDEN: [u8; FRAME_HEADER_LEN] = [
        // Ethernet: destination, source, EtherType IPv6
        0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01,
        0x02, 0x11, 0x22, 0x33, 0x44, 0x02,
        0x86, 0xdd,
        // IPv6: version 6, traffic class 0, flow label 0
        0x60, 0x00, 0x00, 0x00,
        // payload length 1460, next header 4 (IPv4), hop limit 64
        0x05, 0xb4, 0x04, 0x40,
        // source 2001:2:0:51::2
        0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x51,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
        // destination 2001:2:0:51::1
        0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x51,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn frame_header_is_ethernet_then_ipv6() {
        let mut h = frame_header(DST_MAC, SRC_MAC, &repr());
        set_payload_len(&mut h, 1460);
        assert_eq!(h, GOLDEN);
        // The IPv6 view of the whole frame agrees, field by field.
        let mut frame = h.to_vec();
        frame.resize(FRAME_HEADER_LEN + 1460, 0);
        let p = ipv6::Packet::new_checked(&frame[ETH_HEADER_LEN..]).unwrap();
        let r = ipv6::Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            ipv6::Repr {
                payload_len: 1460,
                ..repr()
            }
        );
    }

    #[test]
    fn payload_length_is_the_only_field_set_per_packet() {
        let template = frame_header(DST_MAC, SRC_MAC, &repr());
        let mut h = template;
        set_payload_len(&mut h, 0x1234);
        let changed: Vec<usize> = (0..FRAME_HEADER_LEN)
            .filter(|&i| h[i] != template[i])
            .collect();
        assert_eq!(changed, [PAYLOAD_LEN_AT, PAYLOAD_LEN_AT + 1]);
        assert_eq!(&h[PAYLOAD_LEN_AT..PAYLOAD_LEN_AT + 2], &[0x12, 0x34]);
    }

    #[test]
    fn a_payload_fits_when_the_ipv6_packet_fits_the_mtu() {
        let hop = NextHop::new(3, 1500, DST_MAC, SRC_MAC, &repr());
        assert!(hop.fits(1460));
        assert!(hop.fits(1460 + 40 - 40));
        assert!(hop.fits(1500 - 40));
        // One byte more and the kernel has to fragment: the raw socket's job.
        assert!(!hop.fits(1500 - 40 + 1));
        assert!(!hop.fits(65000));
    }

    #[test]
    fn only_entries_with_a_mac_the_kernel_sends_to_are_usable() {
        for s in [
            NeighbourState::Reachable,
            NeighbourState::Stale,
            NeighbourState::Delay,
            NeighbourState::Probe,
            NeighbourState::Permanent,
            NeighbourState::Noarp,
        ] {
            assert!(neighbour_usable(s), "{s:?}");
        }
        for s in [
            NeighbourState::Incomplete,
            NeighbourState::Failed,
            NeighbourState::None,
            NeighbourState::Other(0x4000),
        ] {
            assert!(!neighbour_usable(s), "{s:?}");
        }
    }

    #[test]
    fn macs_are_six_bytes_and_not_all_zero() {
        assert_eq!(mac(&DST_MAC), Some(DST_MAC));
        assert_eq!(mac(&[0; 6]), None);
        assert_eq!(mac(&DST_MAC[..5]), None);
        assert_eq!(mac(&[1; 8]), None);
    }
}
