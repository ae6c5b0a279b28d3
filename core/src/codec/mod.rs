//! Codecs: the sans-IO packet logic of every userspace datapath (bytes in, a
//! verdict out, the way boringtun's `TunnResult` works): one per tunnel kind,
//! the router's slow path with its device model, and the link shapers. This
//! module is the contract between them and the shared driver (core/src/driver/),
//! which never looks inside a packet; a codec never does IO.

pub mod device_model;
pub mod dslite;
pub mod esp;
pub mod esp_transport;
pub mod l2tp;
pub mod overhead;
pub mod profile;
pub mod shape;
pub mod slowpath;
pub mod terminate;
pub mod vnet_header;
pub mod wireguard;

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// Why a codec dropped a packet. The driver counts drops per reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Shorter than a fixed header, or than a length field says.
    Truncated,
    /// A field holds a value the format does not allow (version, header length,
    /// a length field that lies).
    Malformed,
    /// The outer packet carries a protocol this tunnel does not (IPv6 next header
    /// other than 4 for DS-Lite).
    WrongProtocol,
    /// From an address that is no peer of this tunnel endpoint.
    UnknownPeer,
    /// The inner source is not one the sending peer may use.
    Spoofed,
    /// Nothing to send it to: no softwire, no NAT mapping, no route.
    NoRoute,
    /// IPv6 link-scope traffic (to or from fe80::/10, to a link-local multicast
    /// group) that the tunnel has no route or policy for: mostly what the
    /// kernel itself sends on the TUN (router solicitations, MLD reports).
    /// Counted apart so that `no_route` and `spoofed` keep meaning a fault.
    LinkScope,
    /// Larger than the tunnel MTU with DF set; the codec answered with an ICMP
    /// error through `poll`.
    TooBig,
    /// A device model's or link's queue was full (tail drop).
    QueueFull,
    /// Lost on purpose: a link's `loss` setting.
    Lost,
    /// No free external address/port left for a new NAT mapping.
    NatExhausted,
    /// A new NAT mapping over its subscriber's (B4's) limit (RFC 6888 REQ-4).
    MappingLimit,
    /// Well formed but not handled (IPv4 fragments after the first at a NAT, an
    /// ICMP type the NAT cannot translate).
    Unsupported,
    /// Failed its cryptographic check: a MAC, an AEAD tag, a handshake from
    /// a key this endpoint does not know.
    Unauthentic,
    /// A counter or sequence number seen before, or too old for the window.
    Replayed,
    /// No session to encrypt or decrypt with (yet, or any more).
    NoSession,
    /// Turned away by a rate limiter (handshakes under load).
    RateLimited,
    /// The codec panicked on it: a bug, not the sender's fault alone; the
    /// driver dropped this packet and carried on with the rest.
    Panicked,
}

impl DropReason {
    pub const ALL: [DropReason; 18] = [
        DropReason::Truncated,
        DropReason::Malformed,
        DropReason::WrongProtocol,
        DropReason::UnknownPeer,
        DropReason::Spoofed,
        DropReason::NoRoute,
        DropReason::LinkScope,
        DropReason::TooBig,
        DropReason::QueueFull,
        DropReason::Lost,
        DropReason::NatExhausted,
        DropReason::MappingLimit,
        DropReason::Unsupported,
        DropReason::Unauthentic,
        DropReason::Replayed,
        DropReason::NoSession,
        DropReason::RateLimited,
        DropReason::Panicked,
    ];

    /// A short snake_case name for stats files and reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::WrongProtocol => "wrong_protocol",
            DropReason::UnknownPeer => "unknown_peer",
            DropReason::Spoofed => "spoofed",
            DropReason::NoRoute => "no_route",
            DropReason::LinkScope => "link_scope",
            DropReason::TooBig => "too_big",
            DropReason::QueueFull => "queue_full",
            DropReason::Lost => "lost",
            DropReason::NatExhausted => "nat_exhausted",
            DropReason::MappingLimit => "mapping_limit",
            DropReason::Unsupported => "unsupported",
            DropReason::Unauthentic => "unauthentic",
            DropReason::Replayed => "replayed",
            DropReason::NoSession => "no_session",
            DropReason::RateLimited => "rate_limited",
            DropReason::Panicked => "panicked",
        }
    }
}

impl From<crate::wire::Error> for DropReason {
    fn from(e: crate::wire::Error) -> Self {
        match e {
            crate::wire::Error::Truncated => DropReason::Truncated,
            crate::wire::Error::Malformed => DropReason::Malformed,
        }
    }
}

/// The source address of an inner IPv4 or IPv6 packet, if it is long enough.
pub fn inner_source(p: &[u8]) -> Option<IpAddr> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 => Some(IpAddr::from(<[u8; 4]>::try_from(&p[12..16]).ok()?)),
        6 if p.len() >= 40 => Some(IpAddr::from(<[u8; 16]>::try_from(&p[8..24]).ok()?)),
        _ => None,
    }
}

/// Whether `p` is an IPv6 packet of link scope (see `ipv6::Packet::is_link_scope`).
pub fn is_link_scope(p: &[u8]) -> bool {
    p.len() >= crate::wire::ipv6::HEADER_LEN
        && p[0] >> 4 == 6
        && crate::wire::ipv6::Packet::new_unchecked(p).is_link_scope()
}

/// The reason to drop an inner packet from a peer whose source the peer may
/// not use: the kernel's link-scope chatter, or spoofing.
pub fn outside_allowed(p: &[u8]) -> DropReason {
    if is_link_scope(p) {
        DropReason::LinkScope
    } else {
        DropReason::Spoofed
    }
}

/// Which of the driver's threads drains a codec (`Codec::poll_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// The network -> TUN thread, which writes the TUN.
    IntoTun,
    /// The TUN -> network thread, which sends to the network.
    IntoNetwork,
}

/// What to do with the packet buffer a codec was handed (and may have rewritten
/// or replaced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send the buffer on the tunnel socket to this peer. For a raw IP socket the
    /// buffer is the payload (the kernel adds the outer IP header) and the port
    /// is 0; for UDP it is the datagram payload.
    ToNetwork(SocketAddr),
    /// Write the buffer (one IP packet; from a codec that takes super-packets
    /// whole, its virtio-net header and the packet) into the TUN device.
    ToTun,
    /// Dropped; the driver counts it under this reason.
    Drop(DropReason),
    /// The codec kept the packet (it took the buffer's contents): a queue of its
    /// own hands it back through `poll` when its time comes.
    Queued,
    /// The packet was for the codec itself (a handshake, a keepalive) and is
    /// used up: nothing to write, nothing dropped.
    Consumed,
    /// Only from a codec that takes super-packets whole, for one it cannot
    /// (a device model would drop part of it): the driver cuts it into wire
    /// packets and hands each to `handle_tun` in its place.
    Split,
}

/// One tunnel kind's packet logic, with no IO and time passed in.
///
/// The driver hands every packet as a `Vec<u8>` holding exactly one IP packet
/// (TUN side, already segmented to the MTU and with complete checksums) or one
/// datagram payload (network side). The codec may rewrite it in place, grow it,
/// or replace its contents, then says where it goes. A codec that
/// [takes super-packets whole](Codec::takes_super_packets) gets TUN-side
/// buffers as read instead.
pub trait Codec: Send {
    /// Whether every buffer `handle_tun` gets starts with the virtio-net
    /// header it was read with ([`vnet_header`]), a TSO/USO super-packet of up
    /// to 64 KiB behind it whole and a partial checksum left partial. Such a
    /// codec's `ToTun` buffers (from `poll` too) start with a header as well,
    /// and the driver writes each as it is, in one write: the kernel forwards
    /// a super-packet as one and finishes its checksums. The codec may answer
    /// `Split` for a super-packet it can only take as wire packets. Read once,
    /// when the driver starts; by default false: plain packets.
    fn takes_super_packets(&self) -> bool {
        false
    }

    /// One IP packet read from the TUN device.
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict;

    /// One datagram (raw IP payload or UDP payload) received from `peer`.
    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict;

    /// Packets the codec wants to send on its own (ICMP errors it generated,
    /// handshakes, queued data). The driver calls this after every batch and on
    /// every tick until it returns `None`.
    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        None
    }

    /// `poll` as one of the driver's two threads asks it: a codec that holds
    /// packets of both ways gives each way's to the thread that writes that
    /// way (`Drain::IntoTun`: the network -> TUN thread), so a released
    /// packet is written by the thread that writes its flow's passed ones and
    /// never races a newer one. By default, `poll`, whichever thread asks.
    fn poll_for(&mut self, now: Instant, _drain: Drain) -> Option<(Verdict, Vec<u8>)> {
        self.poll(now)
    }

    /// Called about every 250 ms: expire state, run timers.
    fn tick(&mut self, _now: Instant) {}

    /// When `poll` next has something to give (a held packet's time): the
    /// driver wakes then, not only on the next tick.
    fn deadline(&self) -> Option<Instant> {
        None
    }
}

/// IPv6 packets for codec tests.
#[cfg(test)]
pub(crate) mod test_packets {
    use std::net::Ipv6Addr;

    /// An IPv6 packet from `src` to `dst` with 8 bytes of ICMPv6 (`icmp_type`).
    pub fn ipv6(src: &str, dst: &str, icmp_type: u8) -> Vec<u8> {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[6] = 58;
        p[7] = 255;
        p[8..24].copy_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
        p[24..40].copy_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
        p[40] = icmp_type;
        p
    }

    /// What the kernel sends on a fresh TUN with IPv6: a router solicitation.
    pub fn router_solicitation() -> Vec<u8> {
        ipv6("fe80::1", "ff02::2", 133)
    }
}
