//! Entry points for the cargo-fuzz targets `dslite_b4` and `dslite_aftr`, also
//! replayed by tests/offline/fuzz_regressions.rs. An input is a list of records: a flags
//! byte, a big-endian 16-bit length, then that many bytes (fewer at the end).
//! Besides "never panics" they check that whatever a codec forwards or generates
//! is a whole IPv4 packet with right checksums.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::{Aftr, AftrConfig, B4, B4Config, Softwire};
use crate::codec::{Codec, Verdict};
use crate::wire::checksum;
use crate::wire::icmpv4_error;
use crate::wire::ipv4::{self, l4, protocol};

const MAX_RECORDS: usize = 64;
const FLAG_FROM_NETWORK: u8 = 0x01;
const FLAG_FIX_CHECKSUMS: u8 = 0x02;

pub const AFTR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
pub const B4_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
pub const B4_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);
const STRANGER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 9);

fn records(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (&flags, rest) = data.split_first()?;
        let (len, rest) = match rest {
            [h, l, rest @ ..] => (u16::from_be_bytes([*h, *l]) as usize, rest),
            _ => (0, &[][..]),
        };
        let (record, rest) = rest.split_at(len.min(rest.len()));
        data = rest;
        Some((flags, record))
    })
    .take(MAX_RECORDS)
}

/// Makes the header checksum and the upper-layer checksum right (the quoted
/// header's too, for an ICMP error), so inputs get past the checks.
pub fn fix_checksums(pkt: &mut [u8]) {
    let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
        return;
    };
    p.fill_checksum();
    if p.is_fragment() {
        return;
    }
    let (src, dst, proto) = (p.src_addr(), p.dst_addr(), p.protocol());
    let upper = p.payload_mut();
    let at = match proto {
        protocol::TCP if upper.len() >= l4::TCP_HEADER_LEN => l4::TCP_CHECKSUM,
        protocol::UDP if upper.len() >= l4::UDP_HEADER_LEN => l4::UDP_CHECKSUM,
        protocol::ICMP if upper.len() >= l4::ICMP_HEADER_LEN => l4::ICMP_CHECKSUM,
        _ => return,
    };
    upper[at.clone()].copy_from_slice(&[0, 0]);
    let sum = if proto == protocol::ICMP {
        if icmpv4_error::is_error(upper[0]) {
            let mut q = ipv4::Packet::new_unchecked(&mut upper[icmpv4_error::HEADER_LEN..]);
            if q.check_header_len().is_ok() {
                q.fill_checksum();
            }
        }
        checksum(upper)
    } else {
        match ipv4::upper_layer_checksum(src, dst, proto, upper) {
            0 if proto == protocol::UDP => 0xffff,
            s => s,
        }
    };
    upper[at].copy_from_slice(&sum.to_be_bytes());
}

fn upper_ok(pkt: &[u8]) -> Option<bool> {
    let p = ipv4::Packet::new_checked(pkt).ok()?;
    ipv4::verify_upper_checksum(&p)
}

fn check_forwarded(v: Verdict, pkt: &[u8], upper_before: Option<bool>) {
    if let Verdict::Drop(_) = v {
        return;
    }
    let p = ipv4::Packet::new_checked(pkt).expect("a forwarded packet is IPv4");
    assert_eq!(p.total_len() as usize, pkt.len(), "trailing bytes cut");
    assert!(p.verify_checksum(), "header checksum right");
    if upper_before == Some(true) {
        assert_eq!(
            ipv4::verify_upper_checksum(&p),
            Some(true),
            "upper checksum kept"
        );
    }
}

fn check_generated(v: Verdict, pkt: &[u8]) {
    assert_eq!(v, Verdict::ToTun);
    assert!(pkt.len() <= icmpv4_error::MAX_PACKET_LEN);
    let p = ipv4::Packet::new_checked(pkt).expect("a generated packet is IPv4");
    assert!(p.verify_checksum());
    let e = icmpv4_error::Packet::new_checked(p.payload()).expect("ICMP header");
    assert_eq!(
        icmpv4_error::Repr::parse(&e).map(|r| (r.msg_type, r.code)),
        Ok((3, 4))
    );
}

/// B4 fuzzing. Flags: bit 0 from the network (else from the TUN), bit 1 fix
/// checksums first, bit 2 from a stranger instead of the AFTR, bit 3 the B4
/// with inner MTU 576 (else 1460).
pub fn b4(data: &[u8]) {
    let config = B4Config::new(AFTR6);
    let small = B4Config {
        inner_mtu: 576,
        ..config.clone()
    };
    let mut b4s = [B4::new(config), B4::new(small)];
    let t0 = Instant::now();
    for (i, (flags, bytes)) in records(data).enumerate() {
        let now = t0 + Duration::from_millis(i as u64);
        let mut pkt = bytes.to_vec();
        if flags & FLAG_FIX_CHECKSUMS != 0 {
            fix_checksums(&mut pkt);
        }
        let before = upper_ok(&pkt);
        let b4 = &mut b4s[(flags >> 3) as usize & 1];
        let v = if flags & FLAG_FROM_NETWORK != 0 {
            let peer = if flags & 0x04 != 0 { STRANGER } else { AFTR6 };
            b4.handle_network(SocketAddr::new(IpAddr::V6(peer), 0), &mut pkt, now)
        } else {
            b4.handle_tun(&mut pkt, now)
        };
        check_forwarded(v, &pkt, before);
        while let Some((v, icmp)) = b4.poll(now) {
            check_generated(v, &icmp);
        }
    }
}

/// The AFTR of `aftr`: two softwires, a small pool and port range so
/// exhaustion is reachable.
pub fn aftr_config() -> AftrConfig {
    let mut c = AftrConfig::new(
        AFTR6,
        vec![
            Ipv4Addr::new(198, 51, 100, 1),
            Ipv4Addr::new(198, 51, 100, 2),
        ],
    );
    c.softwires = vec![
        Softwire {
            b4: B4_A,
            prefixes: vec!["192.168.0.0/16".parse().expect("prefix")],
        },
        Softwire {
            b4: B4_B,
            prefixes: vec!["10.0.0.0/8".parse().expect("prefix")],
        },
    ];
    c.ports = 1024..=1087;
    c.inner_mtu = 576;
    c.max_mappings = 48;
    c
}

/// Points `pkt` (from the internet) at the mapping `last` (a NATed packet)
/// came from: destination address, protocol and port or echo identifier.
fn aim_at(pkt: &mut [u8], last: &[u8]) {
    let Ok(l) = ipv4::Packet::new_checked(last) else {
        return;
    };
    let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
        return;
    };
    let (lproto, lsrc, lupper) = (l.protocol(), l.src_addr(), l.payload());
    p.set_dst_addr(lsrc);
    p.set_protocol(lproto);
    let upper = p.payload_mut();
    match lproto {
        protocol::TCP | protocol::UDP if upper.len() >= 4 && lupper.len() >= 2 => {
            upper[l4::DST_PORT].copy_from_slice(&lupper[l4::SRC_PORT]);
        }
        protocol::ICMP if upper.len() >= 8 && lupper.len() >= 6 => {
            upper[0] = 0;
            upper[l4::ICMP_IDENT].copy_from_slice(&lupper[l4::ICMP_IDENT]);
        }
        _ => {}
    }
}

/// Turns `pkt` (from a B4) into TCP (1), an ICMP echo request (2) or UDP (3),
/// so every NAT path is reached without the fuzzer guessing protocol numbers.
fn make_protocol(pkt: &mut [u8], steer: u8) {
    let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
        return;
    };
    let proto = [protocol::TCP, protocol::ICMP, protocol::UDP][(steer as usize - 1) % 3];
    p.set_protocol(proto);
    if let (protocol::ICMP, [t, c, ..]) = (proto, p.payload_mut()) {
        (*t, *c) = (8, 0);
    }
}

/// An ICMP error from 203.0.113.9 quoting `last`; `pkt` picks the type, code
/// and how much is quoted.
fn error_about(pkt: &[u8], last: &[u8]) -> Vec<u8> {
    let Ok(l) = ipv4::Packet::new_checked(last) else {
        return pkt.to_vec();
    };
    let b = |i: usize| pkt.get(i).copied().unwrap_or(0);
    let msg_type = [3, 11, 12, 4][b(0) as usize % 4];
    let quoted_len = (l.header_len() + b(2) as usize % 32).min(last.len());
    let repr = icmpv4_error::Repr {
        msg_type,
        code: b(1),
        rest_of_header: 1400,
        quoted_len,
    };
    let mut out = vec![0u8; ipv4::HEADER_LEN + repr.buffer_len()];
    let n = icmpv4_error::emit_packet(
        &repr,
        &l,
        Ipv4Addr::new(203, 0, 113, 9),
        b(3) as u16,
        &mut out,
    );
    out.truncate(n);
    out
}

/// AFTR fuzzing. Flags: bit 0 from a B4 (else from the internet), bit 1 fix
/// checksums first, bits 2-3 the peer (B4 A, B4 B, a stranger, an IPv4 peer),
/// bits 4-5 for packets from a B4: make it TCP, ICMP echo or UDP; for packets
/// from the internet: 1 aim at the last NATed packet's mapping, 2 an ICMP
/// error quoting it; bit 7 advance the clock by the record's first byte in
/// seconds and tick.
pub fn aftr(data: &[u8]) {
    let mut aftr = Aftr::new(aftr_config()).expect("fuzz config is valid");
    let max = aftr.config().max_mappings;
    let mut now = Instant::now();
    let mut last: Vec<u8> = Vec::new();
    for (flags, bytes) in records(data) {
        if flags & 0x80 != 0 {
            now += Duration::from_secs(bytes.first().copied().unwrap_or(0) as u64);
            aftr.tick(now);
        }
        let handle_network = flags & FLAG_FROM_NETWORK != 0;
        let mut pkt = bytes.to_vec();
        match ((flags >> 4) & 3, handle_network) {
            (0, _) => {}
            (1, false) => aim_at(&mut pkt, &last),
            (2, false) => pkt = error_about(&pkt, &last),
            (_, false) => {}
            (steer, true) => make_protocol(&mut pkt, steer),
        }
        if flags & FLAG_FIX_CHECKSUMS != 0 {
            fix_checksums(&mut pkt);
        }
        let before = upper_ok(&pkt);
        let v = if handle_network {
            let peer = match (flags >> 2) & 3 {
                0 => IpAddr::V6(B4_A),
                1 => IpAddr::V6(B4_B),
                2 => IpAddr::V6(STRANGER),
                _ => IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
            };
            aftr.handle_network(SocketAddr::new(peer, 0), &mut pkt, now)
        } else {
            aftr.handle_tun(&mut pkt, now)
        };
        check_forwarded(v, &pkt, before);
        if handle_network && v == Verdict::ToTun {
            last.clone_from(&pkt);
        }
        assert!(aftr.mappings() <= max);
        while let Some((v, icmp)) = aftr.poll(now) {
            check_generated(v, &icmp);
        }
    }
}
