//! The AFTR's NAT44 tables (RFC 6333 section 6.6, RFC 6888): mappings keyed
//! per softwire inside and endpoint-independent outside, paired pool
//! addresses, port allocation, limits per table and per B4, and expiry.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::Aftr;
use crate::codec::DropReason;
use crate::wire::ipv4::protocol;

/// Mapping slots the AFTR examines per `tick`: a 250 ms tick sweeps 64 k
/// mappings a second however large the table.
const EXPIRY_SCAN_PER_TICK: usize = 16_384;
/// Ports tried for a new mapping before giving up: bounds the work a packet can
/// cause when the pool is nearly full.
const MAX_PORT_PROBES: usize = 1024;

/// The inside of a NAT mapping: per softwire, so customers may reuse the same
/// private addresses and ports (RFC 6333 section 6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct InsideKey {
    pub(super) softwire: u32,
    pub(super) addr: Ipv4Addr,
    pub(super) port: u16,
    pub(super) proto: u8,
}

/// The outside of a NAT mapping. Endpoint-independent (RFC 4787 REQ-1, RFC 6888
/// REQ-1): the remote end is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct OutsideKey {
    pub(super) addr: Ipv4Addr,
    pub(super) port: u16,
    pub(super) proto: u8,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Mapping {
    pub(super) inside: InsideKey,
    pub(super) outside: OutsideKey,
    pool_index: u32,
    pub(super) last_seen: Instant,
}

/// Ports in use at one pool address for one protocol, and where the next search
/// starts.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PortUse {
    pub(super) used: u32,
    pub(super) next: u16,
}

fn proto_index(proto: u8) -> usize {
    match proto {
        protocol::TCP => 0,
        protocol::UDP => 1,
        _ => 2,
    }
}

impl Aftr {
    /// The external address and port (or echo identifier) of the mapping for
    /// this B4's inner source, if there is one.
    pub fn external(
        &self,
        b4: Ipv6Addr,
        proto: u8,
        inner_addr: Ipv4Addr,
        inner_port: u16,
    ) -> Option<(Ipv4Addr, u16)> {
        let softwire = *self.softwire_by_b4.get(&b4)?;
        let key = InsideKey {
            softwire,
            addr: inner_addr,
            port: inner_port,
            proto,
        };
        let m = self.slots[*self.inside.get(&key)? as usize].as_ref()?;
        Some((m.outside.addr, m.outside.port))
    }

    fn timeout(&self, proto: u8) -> Duration {
        match proto {
            protocol::TCP => self.config.timeouts.tcp,
            protocol::UDP => self.config.timeouts.udp,
            _ => self.config.timeouts.icmp,
        }
    }

    fn expired_at(&self, m: &Mapping, now: Instant) -> bool {
        now.saturating_duration_since(m.last_seen) > self.timeout(m.inside.proto)
    }

    /// The pool address for an inner host: always the same one for the same
    /// (softwire, inner address), "paired" pooling (RFC 4787 REQ-2, RFC 6888 REQ-2),
    /// spread over the pool by a multiplicative hash.
    fn paired_address(&self, softwire: u32, addr: Ipv4Addr) -> usize {
        let x = ((softwire as u64) << 32) | u32::from(addr) as u64;
        let h = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> 32) % self.config.pool.len() as u64) as usize
    }

    /// A new mapping: the inner port itself when it is in range and free (port
    /// preservation, RFC 4787 section 4.1), else the next free port after the last
    /// one handed out at that address.
    pub(super) fn create(&mut self, inside: InsideKey, now: Instant) -> Result<u32, DropReason> {
        if self.inside.len() >= self.config.max_mappings {
            return Err(DropReason::NatExhausted);
        }
        if self.softwires[inside.softwire as usize].mappings >= self.config.max_mappings_per_b4 {
            self.over_b4_limit += 1;
            return Err(DropReason::MappingLimit);
        }
        let pool_index = self.paired_address(inside.softwire, inside.addr);
        let addr = self.config.pool[pool_index];
        let pi = proto_index(inside.proto);
        let usage = self.ports[pool_index][pi];
        if usage.used >= self.port_count {
            return Err(DropReason::NatExhausted);
        }
        let free = |port: u16| {
            !self.outside.contains_key(&OutsideKey {
                addr,
                port,
                proto: inside.proto,
            })
        };
        let port = if self.config.ports.contains(&inside.port) && free(inside.port) {
            Some(inside.port)
        } else {
            let mut candidate = usage.next;
            let mut found = None;
            for _ in 0..(self.port_count as usize).min(MAX_PORT_PROBES) {
                let port = candidate;
                candidate = if port == *self.config.ports.end() {
                    self.port_lo
                } else {
                    port + 1
                };
                if free(port) {
                    found = Some(port);
                    break;
                }
            }
            self.ports[pool_index][pi].next = candidate;
            found
        };
        let Some(port) = port else {
            return Err(DropReason::NatExhausted);
        };
        let outside = OutsideKey {
            addr,
            port,
            proto: inside.proto,
        };
        let mapping = Mapping {
            inside,
            outside,
            pool_index: pool_index as u32,
            last_seen: now,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(mapping);
                s
            }
            None => {
                self.slots.push(Some(mapping));
                (self.slots.len() - 1) as u32
            }
        };
        self.inside.insert(inside, slot);
        self.outside.insert(outside, slot);
        self.ports[pool_index][pi].used += 1;
        self.softwires[inside.softwire as usize].mappings += 1;
        self.created += 1;
        Ok(slot)
    }

    fn remove(&mut self, slot: u32) {
        if let Some(m) = self.slots[slot as usize].take() {
            self.inside.remove(&m.inside);
            self.outside.remove(&m.outside);
            let usage = &mut self.ports[m.pool_index as usize][proto_index(m.inside.proto)];
            usage.used = usage.used.saturating_sub(1);
            let sw = &mut self.softwires[m.inside.softwire as usize];
            sw.mappings = sw.mappings.saturating_sub(1);
            self.free.push(slot);
            self.expired += 1;
        }
    }

    /// A live mapping for an outside key, refreshed; expired ones are removed here
    /// so replies never use a mapping `tick` has not reached yet.
    pub(super) fn lookup_outside(
        &mut self,
        key: OutsideKey,
        now: Instant,
        refresh: bool,
    ) -> Option<Mapping> {
        let slot = *self.outside.get(&key)?;
        let m = *self.slots[slot as usize].as_ref()?;
        if self.expired_at(&m, now) {
            self.remove(slot);
            return None;
        }
        if refresh {
            if let Some(live) = self.slots[slot as usize].as_mut() {
                live.last_seen = now;
            }
        }
        Some(m)
    }

    /// Expires idle mappings, looking at a bounded number of slots per call.
    pub(super) fn expire_idle(&mut self, now: Instant) {
        let n = self.slots.len();
        for _ in 0..n.min(EXPIRY_SCAN_PER_TICK) {
            if self.scan_at >= self.slots.len() {
                self.scan_at = 0;
            }
            let slot = self.scan_at;
            self.scan_at += 1;
            let expired = match &self.slots[slot] {
                Some(m) => self.expired_at(m, now),
                None => false,
            };
            if expired {
                self.remove(slot as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::codec::dslite::test_support::*;
    use crate::codec::dslite::{
        AftrConfig, AftrConfigError, B4_SOFTWIRE_ADDR, DEFAULT_MAX_MAPPINGS_PER_B4,
    };
    use crate::codec::{Codec, Verdict};
    use crate::wire::icmp_echo;
    use crate::wire::ipv4::l4;

    #[test]
    fn two_b4s_with_the_same_inner_source_get_distinct_mappings() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut out = [Vec::new(), Vec::new()];
        for (i, b4) in [B4_A, B4_B].into_iter().enumerate() {
            let mut p = udp(B4_SOFTWIRE_ADDR, 5000, SERVER, 53, 4);
            assert_eq!(aftr.handle_network(peer(b4), &mut p, now), Verdict::ToTun);
            assert_checksums(&p);
            out[i] = p;
        }
        let (a_addr, a_port, ..) = endpoints(&out[0]);
        let (b_addr, b_port, ..) = endpoints(&out[1]);
        assert_ne!((a_addr, a_port), (b_addr, b_port));
        assert_eq!((a_addr, a_port), (POOL, 5000), "the first keeps its port");
        assert_eq!(aftr.mappings(), 2);
        // The same with a private LAN address both B4s may use.
        let mut c = aftr_config();
        c.softwires[1].prefixes = c.softwires[0].prefixes.clone();
        let mut shared = Aftr::new(c).unwrap();
        let mut pa = LAN_UDP.to_vec();
        let mut pb = LAN_UDP.to_vec();
        shared.handle_network(peer(B4_A), &mut pa, now);
        shared.handle_network(peer(B4_B), &mut pb, now);
        assert_ne!(endpoints(&pa).1, endpoints(&pb).1);

        // Replies go back to the right B4, to 192.0.0.2:5000 in both.
        for (i, b4) in [B4_A, B4_B].into_iter().enumerate() {
            let (addr, port, ..) = endpoints(&out[i]);
            let mut reply = udp(SERVER, 53, addr, port, 4);
            assert_eq!(
                aftr.handle_tun(&mut reply, now),
                Verdict::ToNetwork(peer(b4))
            );
            assert_eq!(endpoints(&reply), (SERVER, 53, B4_SOFTWIRE_ADDR, 5000));
            assert_checksums(&reply);
        }
    }

    #[test]
    fn mapping_is_endpoint_independent_and_per_protocol() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut a = udp(LAN_HOST, 6000, SERVER, 53, 0);
        let mut b = udp(LAN_HOST, 6000, Ipv4Addr::new(192, 0, 2, 77), 123, 0);
        aftr.handle_network(peer(B4_A), &mut a, now);
        aftr.handle_network(peer(B4_A), &mut b, now);
        assert_eq!(endpoints(&a).0, endpoints(&b).0);
        assert_eq!(endpoints(&a).1, endpoints(&b).1);
        assert_eq!(aftr.mappings(), 1);
        // Any remote may answer (endpoint-independent filtering, RFC 4787 REQ-8's
        // most open choice, which a benchmark wants).
        let mut from_other = udp(Ipv4Addr::new(192, 0, 2, 99), 9, POOL, 6000, 0);
        assert_eq!(
            aftr.handle_tun(&mut from_other, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        // TCP port 6000 is a different mapping.
        let mut t = tcp(LAN_HOST, 6000, SERVER, 80, l4::TCP_FLAG_SYN, 1400, false);
        aftr.handle_network(peer(B4_A), &mut t, now);
        assert_eq!(aftr.mappings(), 2);
        assert_eq!(endpoints(&t).1, 6000);
    }

    #[test]
    fn nat_exhaustion() {
        let now = Instant::now();
        let mut c = aftr_config();
        c.max_mappings = 2;
        let mut aftr = Aftr::new(c).unwrap();
        for port in [1, 2] {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        }
        let mut p = udp(LAN_HOST, 3, SERVER, 53, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut p, now),
            Verdict::Drop(DropReason::NatExhausted)
        );
        // Existing mappings still pass.
        let mut p = udp(LAN_HOST, 1, SERVER, 53, 0);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);

        // Out of ports: two ports for three flows.
        let mut c = aftr_config();
        c.ports = 2000..=2001;
        let mut aftr = Aftr::new(c).unwrap();
        let mut got = Vec::new();
        for port in [2000, 7, 8] {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            let v = aftr.handle_network(peer(B4_A), &mut p, now);
            if v == Verdict::ToTun {
                got.push(endpoints(&p).1);
            } else {
                assert_eq!(v, Verdict::Drop(DropReason::NatExhausted));
            }
        }
        assert_eq!(got, [2000, 2001]);
    }

    #[test]
    fn one_b4_cannot_take_the_whole_nat_table() {
        let now = Instant::now();
        let mut c = aftr_config();
        c.max_mappings = 100;
        c.max_mappings_per_b4 = 3;
        c.timeouts.udp = Duration::from_secs(60);
        let mut aftr = Aftr::new(c).unwrap();
        // B4 A floods new flows: three mappings, the rest refused and counted.
        let mut passed = 0;
        for port in 1000..1050 {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            match aftr.handle_network(peer(B4_A), &mut p, now) {
                Verdict::ToTun => passed += 1,
                v => assert_eq!(v, Verdict::Drop(DropReason::MappingLimit)),
            }
        }
        assert_eq!(passed, 3);
        assert_eq!(aftr.stats().mappings_over_b4_limit, 47);
        // Its existing flows still pass, and so do B4 B's new ones.
        let mut p = udp(LAN_HOST, 1000, SERVER, 53, 0);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        for port in [1, 2, 3] {
            let mut p = udp(Ipv4Addr::new(10, 0, 0, 9), port, SERVER, 53, 0);
            assert_eq!(aftr.handle_network(peer(B4_B), &mut p, now), Verdict::ToTun);
        }
        assert_eq!(aftr.mappings(), 6);
        // Once A's mappings expire it may open new flows again.
        let later = now + Duration::from_secs(61);
        for _ in 0..10 {
            aftr.tick(later);
        }
        let mut p = udp(LAN_HOST, 2000, SERVER, 53, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut p, later),
            Verdict::ToTun
        );
        let mut c = aftr_config();
        c.max_mappings_per_b4 = 0;
        assert_eq!(Aftr::new(c).unwrap_err(), AftrConfigError::NoMappingsPerB4);
        assert_eq!(
            AftrConfig::new(AFTR6, vec![POOL]).max_mappings_per_b4,
            DEFAULT_MAX_MAPPINGS_PER_B4
        );
    }

    #[test]
    fn mappings_expire_with_the_clock() {
        let mut c = aftr_config();
        c.timeouts.udp = Duration::from_secs(60);
        let mut aftr = Aftr::new(c).unwrap();
        let t0 = Instant::now();
        let send = |aftr: &mut Aftr, mut p: Vec<u8>, t: Instant| {
            aftr.handle_network(peer(B4_A), &mut p, t)
        };
        send(&mut aftr, udp(LAN_HOST, 5000, SERVER, 53, 0), t0);
        send(
            &mut aftr,
            tcp(LAN_HOST, 5001, SERVER, 80, l4::TCP_FLAG_SYN, 1400, false),
            t0,
        );
        send(
            &mut aftr,
            echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 9),
            t0,
        );
        assert_eq!(aftr.mappings(), 3);

        aftr.tick(t0 + Duration::from_secs(30));
        assert_eq!(aftr.mappings(), 3, "nothing idle long enough yet");
        aftr.tick(t0 + Duration::from_secs(31));
        assert_eq!(aftr.mappings(), 2, "ICMP after 30 s");
        // Traffic keeps the UDP mapping alive.
        send(
            &mut aftr,
            udp(LAN_HOST, 5000, SERVER, 53, 0),
            t0 + Duration::from_secs(50),
        );
        aftr.tick(t0 + Duration::from_secs(100));
        assert_eq!(aftr.mappings(), 2);
        aftr.tick(t0 + Duration::from_secs(111));
        assert_eq!(aftr.mappings(), 1, "UDP after 60 s idle");
        let mut reply = udp(SERVER, 53, POOL, 5000, 0);
        assert_eq!(
            aftr.handle_tun(&mut reply, t0 + Duration::from_secs(111)),
            Verdict::Drop(DropReason::NoRoute)
        );
        // A reply after the timeout but before any tick finds nothing either.
        let mut reply = tcp(SERVER, 80, POOL, 5001, l4::TCP_FLAG_ACK, 1400, false);
        assert_eq!(
            aftr.handle_tun(&mut reply, t0 + Duration::from_secs(301)),
            Verdict::Drop(DropReason::NoRoute)
        );
        assert_eq!(aftr.mappings(), 0);
        assert_eq!(aftr.stats().mappings_expired, 3);
        assert_eq!(aftr.stats().mappings_created, 3);
        // The freed slot and port are used again.
        send(
            &mut aftr,
            udp(LAN_HOST, 5000, SERVER, 53, 0),
            t0 + Duration::from_secs(400),
        );
        assert_eq!(
            aftr.external(B4_A, protocol::UDP, LAN_HOST, 5000),
            Some((POOL, 5000))
        );
    }
}
