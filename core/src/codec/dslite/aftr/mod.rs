//! The AFTR, DS-Lite's concentrator (RFC 6333 section 6): softwires in from
//! the B4s are checked and NATed out to the IPv4 internet, replies NATed back
//! into their B4's softwire. The NAT44 tables and the ICMP the AFTR answers or
//! translates are its submodules; this one holds the state and the two
//! directions of the datapath.

mod config;
mod icmp;
mod nat;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use ipnetwork::Ipv4Network;

pub use config::{
    AftrConfig, AftrConfigError, DEFAULT_MAX_MAPPINGS, DEFAULT_MAX_MAPPINGS_PER_B4, NatTimeouts,
    Softwire,
};
use nat::{InsideKey, Mapping, OutsideKey, PortUse};

use super::icmp_errors::IcmpErrors;
use super::inner_packet::{check_ipv4, read_u16, transport_port, wire_drop};
use super::{AFTR_SOFTWIRE_ADDR, B4_SOFTWIRE_ADDR, in_softwire_block};
use crate::codec::{Codec, DropReason, Verdict};
use crate::wire::icmpv4_error;
use crate::wire::ipv4::{self, Endpoint, l4, protocol};

/// IPv4's minimum MTU (RFC 791).
const MIN_MTU: u16 = 68;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AftrStats {
    /// Live mappings (some may have expired and wait for `tick`).
    pub mappings: usize,
    pub mappings_created: u64,
    pub mappings_expired: u64,
    /// New flows refused because their B4 held `max_mappings_per_b4`.
    pub mappings_over_b4_limit: u64,
    /// Echo requests to 192.0.0.1 answered.
    pub echo_replies: u64,
    /// ICMP errors from the internet translated and sent to a B4.
    pub icmp_errors_translated: u64,
    /// "Fragmentation needed" sent to internet senders.
    pub icmp_errors_sent: u64,
    pub icmp_errors_suppressed: u64,
}

/// One softwire as the AFTR keeps it: its B4, the inner sources it may use,
/// and how much of the NAT table it holds.
#[derive(Debug)]
struct SoftwireState {
    b4: SocketAddr,
    prefixes: Vec<Ipv4Network>,
    /// Live mappings of this B4, against `max_mappings_per_b4`.
    mappings: usize,
}

impl SoftwireState {
    fn allows(&self, src: Ipv4Addr) -> bool {
        src == B4_SOFTWIRE_ADDR || self.prefixes.iter().any(|n| n.contains(src))
    }
}

/// The tunnel concentrator with its NAT44 (RFC 6333 section 6). Softwires in from
/// the network are decapsulated, checked and NATed out to the TUN; packets from
/// the TUN (the internet) are NATed back and sent to their B4.
///
/// Handled: TCP, UDP, ICMP echo (by identifier), and ICMP destination
/// unreachable, time exceeded and parameter problem from the internet that quote
/// a mapped packet (RFC 5508 section 3). Not handled, dropped as `Unsupported`:
/// IPv4 fragments after the first (they carry no ports; following them needs
/// reassembly or per-datagram state, and DS-Lite hosts behind an MSS clamp and PMTUD
/// rarely fragment), other protocols, and ICMP errors from the LAN side.
#[derive(Debug)]
pub struct Aftr {
    config: AftrConfig,
    softwire_by_b4: HashMap<Ipv6Addr, u32>,
    softwires: Vec<SoftwireState>,
    inside: HashMap<InsideKey, u32>,
    outside: HashMap<OutsideKey, u32>,
    slots: Vec<Option<Mapping>>,
    free: Vec<u32>,
    ports: Vec<[PortUse; 3]>,
    port_lo: u16,
    port_count: u32,
    scan_at: usize,
    icmp: IcmpErrors,
    created: u64,
    expired: u64,
    over_b4_limit: u64,
    echo_replies: u64,
    translated: u64,
}

impl Aftr {
    pub fn new(config: AftrConfig) -> Result<Self, AftrConfigError> {
        if config.pool.is_empty() {
            return Err(AftrConfigError::EmptyPool);
        }
        for (i, a) in config.pool.iter().enumerate() {
            if config.pool[..i].contains(a) {
                return Err(AftrConfigError::DuplicatePoolAddress(*a));
            }
        }
        let (lo, hi) = (*config.ports.start(), *config.ports.end());
        if lo > hi {
            return Err(AftrConfigError::EmptyPortRange(lo, hi));
        }
        if config.max_mappings == 0 {
            return Err(AftrConfigError::NoMappings);
        }
        if config.max_mappings_per_b4 == 0 {
            return Err(AftrConfigError::NoMappingsPerB4);
        }
        if config.inner_mtu < MIN_MTU {
            return Err(AftrConfigError::MtuTooSmall(config.inner_mtu));
        }
        let mut softwire_by_b4 = HashMap::new();
        let mut softwires = Vec::new();
        for (i, sw) in config.softwires.iter().enumerate() {
            if softwire_by_b4.insert(sw.b4, i as u32).is_some() {
                return Err(AftrConfigError::DuplicateSoftwire(sw.b4));
            }
            softwires.push(SoftwireState {
                b4: SocketAddr::new(IpAddr::V6(sw.b4), 0),
                prefixes: sw.prefixes.clone(),
                mappings: 0,
            });
        }
        let capacity = config.max_mappings.min(4096);
        let start = PortUse { used: 0, next: lo };
        Ok(Aftr {
            softwire_by_b4,
            softwires,
            inside: HashMap::with_capacity(capacity),
            outside: HashMap::with_capacity(capacity),
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            ports: vec![[start; 3]; config.pool.len()],
            port_lo: lo,
            port_count: (hi - lo) as u32 + 1,
            scan_at: 0,
            icmp: IcmpErrors::new(),
            created: 0,
            expired: 0,
            over_b4_limit: 0,
            echo_replies: 0,
            translated: 0,
            config,
        })
    }

    pub fn config(&self) -> &AftrConfig {
        &self.config
    }

    /// Live mappings.
    pub fn mappings(&self) -> usize {
        self.inside.len()
    }

    pub fn stats(&self) -> AftrStats {
        AftrStats {
            mappings: self.inside.len(),
            mappings_created: self.created,
            mappings_expired: self.expired,
            mappings_over_b4_limit: self.over_b4_limit,
            echo_replies: self.echo_replies,
            icmp_errors_translated: self.translated,
            icmp_errors_sent: self.icmp.sent,
            icmp_errors_suppressed: self.icmp.suppressed,
        }
    }
}

impl Codec for Aftr {
    /// From the internet, to a pool address: NAT back and into the B4's
    /// softwire. An IPv6 packet is `WrongProtocol`.
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        if let Err(r) = check_ipv4(packet, DropReason::WrongProtocol) {
            return Verdict::Drop(r);
        }
        let p = ipv4::Packet::new_unchecked(&packet[..]);
        if p.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let upper = p.payload();
        let proto = p.protocol();
        let port = match proto {
            protocol::TCP | protocol::UDP => match transport_port(proto, upper, l4::DST_PORT.start)
            {
                Some(port) => port,
                None => return Verdict::Drop(DropReason::Truncated),
            },
            protocol::ICMP => {
                if upper.len() < l4::ICMP_HEADER_LEN {
                    return Verdict::Drop(DropReason::Truncated);
                }
                match upper[l4::ICMP_TYPE] {
                    0 => read_u16(upper, l4::ICMP_IDENT.start),
                    icmpv4_error::TYPE_DEST_UNREACHABLE
                    | icmpv4_error::TYPE_TIME_EXCEEDED
                    | icmpv4_error::TYPE_PARAM_PROBLEM => {
                        return self.translate_icmp_error(packet, now);
                    }
                    // An echo request to a pool address has no mapping: hosts
                    // behind the NAT cannot be pinged from outside.
                    8 => return Verdict::Drop(DropReason::NoRoute),
                    _ => return Verdict::Drop(DropReason::Unsupported),
                }
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        let key = OutsideKey {
            addr: p.dst_addr(),
            port,
            proto,
        };
        let Some(m) = self.lookup_outside(key, now, true) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        // Before the rewrite, so the error quotes what the sender sent.
        if packet.len() > self.config.inner_mtu as usize && p.dont_frag() {
            let (mtu, src) = (self.config.inner_mtu, key.addr);
            self.icmp.frag_needed(packet, mtu, src, now);
            return Verdict::Drop(DropReason::TooBig);
        }
        let mut p = ipv4::Packet::new_unchecked(&mut packet[..]);
        if let Err(e) = p.nat_rewrite(Endpoint::Destination, m.inside.addr, m.inside.port) {
            return Verdict::Drop(wire_drop(e));
        }
        Verdict::ToNetwork(self.softwires[m.inside.softwire as usize].b4)
    }

    /// From a B4: check the inner source, then NAT out to the TUN.
    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let softwire = match peer.ip() {
            IpAddr::V6(b4) => self.softwire_by_b4.get(&b4).copied(),
            IpAddr::V4(_) => None,
        };
        let Some(softwire) = softwire else {
            return Verdict::Drop(DropReason::UnknownPeer);
        };
        if let Err(r) = check_ipv4(packet, DropReason::Malformed) {
            return Verdict::Drop(r);
        }
        let p = ipv4::Packet::new_unchecked(&packet[..]);
        let src = p.src_addr();
        if !self.softwires[softwire as usize].allows(src) {
            return Verdict::Drop(DropReason::Spoofed);
        }
        let dst = p.dst_addr();
        if dst == AFTR_SOFTWIRE_ADDR {
            return self.answer_echo(softwire, packet);
        }
        if in_softwire_block(dst) {
            return Verdict::Drop(DropReason::NoRoute);
        }
        if p.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let upper = p.payload();
        let proto = p.protocol();
        let port = match proto {
            protocol::TCP | protocol::UDP => match transport_port(proto, upper, l4::SRC_PORT.start)
            {
                Some(port) => port,
                None => return Verdict::Drop(DropReason::Truncated),
            },
            protocol::ICMP => {
                if upper.len() < l4::ICMP_HEADER_LEN {
                    return Verdict::Drop(DropReason::Truncated);
                }
                if upper[l4::ICMP_TYPE] != 8 {
                    return Verdict::Drop(DropReason::Unsupported);
                }
                read_u16(upper, l4::ICMP_IDENT.start)
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        let inside = InsideKey {
            softwire,
            addr: src,
            port,
            proto,
        };
        let slot = match self.inside.get(&inside) {
            Some(&s) => s,
            None => match self.create(inside, now) {
                Ok(s) => s,
                Err(r) => return Verdict::Drop(r),
            },
        };
        let Some(m) = self.slots[slot as usize].as_mut() else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        m.last_seen = now;
        let (addr, port) = (m.outside.addr, m.outside.port);
        let mut p = ipv4::Packet::new_unchecked(&mut packet[..]);
        if let Err(e) = p.nat_rewrite(Endpoint::Source, addr, port) {
            return Verdict::Drop(wire_drop(e));
        }
        Verdict::ToTun
    }

    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.icmp.pop()
    }

    /// Expires idle mappings, looking at a bounded number of slots per call.
    fn tick(&mut self, now: Instant) {
        self.expire_idle(now);
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Instant;

    use super::*;
    use crate::codec::dslite::test_support::*;
    use crate::wire::icmp_echo;
    use crate::wire::ipv4::ChecksumDelta;

    #[test]
    fn aftr_golden_out_and_back() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        assert_eq!(p, NATED_UDP);
        assert_eq!(aftr.mappings(), 1);
        assert_eq!(
            aftr.external(B4_A, protocol::UDP, LAN_HOST, 5000),
            Some((POOL, 5000))
        );

        let mut reply = udp(SERVER, 53, POOL, 5000, 4);
        assert_eq!(
            aftr.handle_tun(&mut reply, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(endpoints(&reply), (SERVER, 53, LAN_HOST, 5000));
        assert_checksums(&reply);
    }

    #[test]
    fn aftr_drops_what_it_decapsulates() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut net =
            |from: Ipv6Addr, p: &[u8]| aftr.handle_network(peer(from), &mut p.to_vec(), now);
        assert_eq!(
            net(B4_A, &LAN_UDP[..12]),
            Verdict::Drop(DropReason::Truncated)
        );
        assert_eq!(
            net(B4_A, &LAN_UDP[..31]),
            Verdict::Drop(DropReason::Malformed)
        );
        let stranger = "2001:db8:9::9".parse().unwrap();
        assert_eq!(
            net(stranger, &LAN_UDP),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        assert_eq!(net(AFTR6, &LAN_UDP), Verdict::Drop(DropReason::UnknownPeer));
        // 192.168.1.10 belongs to B4 A's prefix, not B4 B's.
        assert_eq!(net(B4_B, &LAN_UDP), Verdict::Drop(DropReason::Spoofed));
        let from_ten = udp(Ipv4Addr::new(10, 0, 0, 1), 1, SERVER, 2, 0);
        assert_eq!(net(B4_A, &from_ten), Verdict::Drop(DropReason::Spoofed));
        // Other softwire-block destinations are not routed.
        let to_b4 = udp(LAN_HOST, 1, B4_SOFTWIRE_ADDR, 2, 0);
        assert_eq!(net(B4_A, &to_b4), Verdict::Drop(DropReason::NoRoute));
        // Other protocols, ICMP other than echo, later fragments.
        let gre = packet(LAN_HOST, SERVER, 47, &[0; 8], true);
        assert_eq!(net(B4_A, &gre), Verdict::Drop(DropReason::Unsupported));
        let mut unreach = echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 1);
        unreach[20] = 3;
        fix_checksums(&mut unreach);
        assert_eq!(net(B4_A, &unreach), Verdict::Drop(DropReason::Unsupported));
        let mut frag = LAN_UDP;
        ipv4::Packet::new_unchecked(&mut frag[..]).set_frag_offset(1480);
        fix_checksums(&mut frag);
        assert_eq!(net(B4_A, &frag), Verdict::Drop(DropReason::Unsupported));
        let short_tcp = packet(LAN_HOST, SERVER, protocol::TCP, &[0; 12], true);
        assert_eq!(net(B4_A, &short_tcp), Verdict::Drop(DropReason::Truncated));
        assert_eq!(aftr.mappings(), 0);

        // From the internet: no mapping.
        let mut p = udp(SERVER, 53, POOL, 5000, 4);
        assert_eq!(
            aftr.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut ping = echo(SERVER, POOL, icmp_echo::Kind::Request, 9);
        assert_eq!(
            aftr.handle_tun(&mut ping, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut v6 = LAN_UDP.to_vec();
        v6[0] = 0x60;
        assert_eq!(
            aftr.handle_tun(&mut v6, now),
            Verdict::Drop(DropReason::WrongProtocol)
        );
    }

    #[test]
    fn aftr_first_fragment_is_nated() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = udp(LAN_HOST, 5000, SERVER, 53, 64);
        ipv4::Packet::new_unchecked(&mut p[..]).set_more_frags(true);
        fix_checksums(&mut p);
        let sum_before = read_u16(&p, 26);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        assert_eq!(endpoints(&p).0, POOL);
        assert!(ipv4::Packet::new_checked(&p[..]).unwrap().verify_checksum());
        // The port is preserved, so only the address changed the UDP checksum.
        let mut d = ChecksumDelta::new();
        d.addr(LAN_HOST, POOL);
        assert_eq!(read_u16(&p, 26), d.apply(sum_before));
    }

    #[test]
    fn aftr_too_big_toward_a_b4() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        aftr.handle_network(peer(B4_A), &mut p, now);
        let big = udp(SERVER, 53, POOL, 5000, 1500 - 28);
        let mut p = big.clone();
        assert_eq!(
            aftr.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        let (v, icmp) = aftr.poll(now).unwrap();
        assert_eq!(v, Verdict::ToTun);
        let ip = ipv4::Packet::new_checked(&icmp[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (POOL, SERVER));
        let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
        assert!(e.verify_checksum());
        assert_eq!((e.msg_type(), e.code(), e.next_hop_mtu()), (3, 4, 1460));
        assert_eq!(
            e.quoted(),
            &big[..28],
            "quotes the packet as the sender sent it"
        );
        assert_eq!(aftr.stats().icmp_errors_sent, 1);

        let mut no_df = big;
        ipv4::Packet::new_unchecked(&mut no_df[..]).set_dont_frag(false);
        fix_checksums(&mut no_df);
        assert_eq!(
            aftr.handle_tun(&mut no_df, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(aftr.poll(now), None);
    }
}
