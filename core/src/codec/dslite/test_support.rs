//! Packets and codecs the unit tests of the B4, the AFTR and its NAT share:
//! golden bytes, packet builders, and readers for what came out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub(super) use super::fuzz::{AFTR6, B4_A, B4_B, fix_checksums};
use super::inner_packet::read_u16;
use super::{Aftr, AftrConfig, B4, B4Config, Softwire};
use crate::wire::icmp_echo;
use crate::wire::ipv4::{self, protocol};

// UDP from the LAN host 192.168.1.10:5000 to 203.0.113.5:53, DF set, "tunb".
pub(super) static LAN_UDP: [u8; 32] = [
    0x45, 0x00, 0x00, 0x20, // version, IHL, DSCP, total length 32
    0x1c, 0x46, 0x40, 0x00, // identification, DF
    0x40, 0x11, 0x20, 0xcf, // TTL 64, UDP, header checksum
    0xc0, 0xa8, 0x01, 0x0a, // 192.168.1.10
    0xcb, 0x00, 0x71, 0x05, // 203.0.113.5
    0x13, 0x88, 0x00, 0x35, // ports 5000 -> 53
    0x00, 0x0c, 0x0b, 0x89, // UDP length 12, checksum
    b't', b'u', b'n', b'b',
];

// The same after the AFTR's NAT44 to 198.51.100.1:5000 (port preserved);
// checksums from a full recomputation.
pub(super) static NATED_UDP: [u8; 32] = [
    0x45, 0x00, 0x00, 0x20, //
    0x1c, 0x46, 0x40, 0x00, //
    0x40, 0x11, 0xb8, 0x4c, // header checksum
    0xc6, 0x33, 0x64, 0x01, // 198.51.100.1
    0xcb, 0x00, 0x71, 0x05, //
    0x13, 0x88, 0x00, 0x35, //
    0x00, 0x0c, 0xa3, 0x06, // UDP checksum
    b't', b'u', b'n', b'b',
];

pub(super) const LAN_HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
pub(super) const SERVER: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
pub(super) const POOL: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

pub(super) fn peer(a: Ipv6Addr) -> SocketAddr {
    SocketAddr::new(IpAddr::V6(a), 0)
}

pub(super) fn packet(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, upper: &[u8], df: bool) -> Vec<u8> {
    let repr = ipv4::Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len: upper.len(),
        ttl: 64,
        dscp_ecn: 0,
        ident: 0x4242,
        dont_frag: df,
        more_frags: false,
        frag_offset: 0,
    };
    let mut b = vec![0u8; repr.buffer_len()];
    let mut p = ipv4::Packet::new_unchecked(&mut b[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(upper);
    fix_checksums(&mut b);
    b
}

pub(super) fn udp(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, len: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + len];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    packet(src, dst, protocol::UDP, &u, true)
}

/// A TCP segment with `flags` and an MSS option (after a NOP when `odd`, so the
/// value sits at an odd offset).
pub(super) fn tcp(
    src: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    flags: u8,
    mss: u16,
    odd: bool,
) -> Vec<u8> {
    let mut t = vec![0u8; 28];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 7 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    let opts: [u8; 8] = if odd {
        let m = mss.to_be_bytes();
        [1, 2, 4, m[0], m[1], 1, 1, 0]
    } else {
        let m = mss.to_be_bytes();
        [2, 4, m[0], m[1], 1, 1, 1, 0]
    };
    t[20..28].copy_from_slice(&opts);
    packet(src, dst, protocol::TCP, &t, true)
}

pub(super) fn echo(src: Ipv4Addr, dst: Ipv4Addr, kind: icmp_echo::Kind, ident: u16) -> Vec<u8> {
    let r = icmp_echo::Repr {
        family: icmp_echo::Family::V4,
        kind,
        ident,
        seq: 1,
        data_len: 4,
    };
    let mut m = vec![0u8; r.buffer_len()];
    r.emit(&mut icmp_echo::Packet::new_unchecked(&mut m[..]), b"ping");
    packet(src, dst, protocol::ICMP, &m, false)
}

/// (source, source port, destination, destination port); ports are the echo
/// identifier for ICMP.
pub(super) fn endpoints(pkt: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let p = ipv4::Packet::new_checked(pkt).unwrap();
    let u = p.payload();
    let (s, d) = if p.protocol() == protocol::ICMP {
        (read_u16(u, 4), read_u16(u, 4))
    } else {
        (read_u16(u, 0), read_u16(u, 2))
    };
    (p.src_addr(), s, p.dst_addr(), d)
}

pub(super) fn assert_checksums(pkt: &[u8]) {
    let p = ipv4::Packet::new_checked(pkt).unwrap();
    assert_eq!(p.total_len() as usize, pkt.len());
    assert!(p.verify_checksum(), "IPv4 header checksum");
    assert_eq!(
        ipv4::verify_upper_checksum(&p),
        Some(true),
        "upper-layer checksum"
    );
}

pub(super) fn mss_of(pkt: &[u8]) -> u16 {
    let p = ipv4::Packet::new_checked(pkt).unwrap();
    let t = p.payload();
    let at = if t[20] == 1 { 23 } else { 22 };
    read_u16(t, at)
}

pub(super) fn aftr_config() -> AftrConfig {
    let mut c = AftrConfig::new(AFTR6, vec![POOL]);
    c.softwires = vec![
        Softwire {
            b4: B4_A,
            prefixes: vec!["192.168.0.0/16".parse().unwrap()],
        },
        Softwire {
            b4: B4_B,
            prefixes: vec!["10.0.0.0/8".parse().unwrap()],
        },
    ];
    c
}

pub(super) fn aftr() -> Aftr {
    Aftr::new(aftr_config()).unwrap()
}

pub(super) fn b4() -> B4 {
    B4::new(B4Config::new(AFTR6))
}
