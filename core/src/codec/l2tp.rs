//! L2TPv2 data messages carrying PPP frames over UDP 1701, as a codec for
//! the shared driver: static tunnel and session ids, optional sequence
//! numbers. There is no control channel and no PPP negotiation (LCP, IPCP):
//! both ends are configured from the topology, which is what an established
//! L2TP session looks like on the wire.

use crate::codec::{Codec, DropReason, Verdict, inner_source, outside_allowed};
use crate::wire::l2tp::{self as wire, Header, Message};
use ipnetwork::IpNetwork;
use std::net::SocketAddr;
use std::time::Instant;

pub struct L2tpConfig {
    pub peer: SocketAddr,
    /// The ids the peer expects in what we send (its own).
    pub peer_tunnel: u16,
    pub peer_session: u16,
    /// Our ids: what the peer puts in what it sends.
    pub tunnel: u16,
    pub session: u16,
    /// Send Ns/Nr (the S bit).
    pub sequence: bool,
    /// Inner sources the peer may use.
    pub allowed: Vec<IpNetwork>,
}

pub struct L2tp {
    c: L2tpConfig,
    ns: u16,
    /// The next Ns expected from the peer (for Nr).
    nr: u16,
    scratch: Vec<u8>,
}

impl L2tp {
    pub fn new(c: L2tpConfig) -> L2tp {
        L2tp {
            c,
            ns: 0,
            nr: 0,
            scratch: Vec::with_capacity(2048),
        }
    }
}

impl Codec for L2tp {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        let proto = match packet.first().map(|b| b >> 4) {
            Some(4) => wire::PPP_IPV4,
            Some(6) => wire::PPP_IPV6,
            _ => return Verdict::Drop(DropReason::Malformed),
        };
        let sequence = self.c.sequence.then(|| {
            let s = (self.ns, self.nr);
            self.ns = self.ns.wrapping_add(1);
            s
        });
        let h = Header {
            tunnel: self.c.peer_tunnel,
            session: self.c.peer_session,
            sequence,
        };
        wire::emit(&mut self.scratch, &h, proto, packet);
        std::mem::swap(packet, &mut self.scratch);
        Verdict::ToNetwork(self.c.peer)
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        if peer.ip() != self.c.peer.ip() {
            return Verdict::Drop(DropReason::UnknownPeer);
        }
        let (header, proto, range) = match wire::parse(packet) {
            Ok(Message::Data {
                header,
                proto,
                payload,
            }) => (header, proto, payload),
            Ok(Message::Control) => return Verdict::Drop(DropReason::Unsupported),
            Err(e) => return Verdict::Drop(e.into()),
        };
        if header.tunnel != self.c.tunnel || header.session != self.c.session {
            return Verdict::Drop(DropReason::NoSession);
        }
        let inner = &packet[range.clone()];
        let ok = match proto {
            wire::PPP_IPV4 => {
                inner.len() >= 20
                    && inner[0] >> 4 == 4
                    && u16::from_be_bytes([inner[2], inner[3]]) as usize == inner.len()
            }
            wire::PPP_IPV6 => {
                inner.len() >= 40
                    && inner[0] >> 4 == 6
                    && u16::from_be_bytes([inner[4], inner[5]]) as usize + 40 == inner.len()
            }
            // LCP, IPCP and the rest: no PPP negotiation here.
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        if !ok {
            return Verdict::Drop(DropReason::Malformed);
        }
        match inner_source(inner) {
            Some(s) if self.c.allowed.iter().any(|n| n.contains(s)) => {}
            _ => return Verdict::Drop(outside_allowed(inner)),
        }
        if let Some((ns, _)) = header.sequence {
            self.nr = ns.wrapping_add(1);
        }
        packet.copy_within(range.clone(), 0);
        packet.truncate(range.len());
        Verdict::ToTun
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/l2tp_codec.rs): any bytes from the
/// network through an L2TP endpoint.
pub fn fuzz(data: &[u8]) {
    let mut c = L2tp::new(L2tpConfig {
        peer: "198.18.0.2:1701".parse().expect("address"),
        peer_tunnel: 1,
        peer_session: 2,
        tunnel: 0,
        session: 0,
        sequence: true,
        allowed: vec![
            "0.0.0.0/0".parse().expect("prefix"),
            "::/0".parse().expect("prefix"),
        ],
    });
    let mut p = data.to_vec();
    let _ = c.handle_network(
        "198.18.0.2:1701".parse().expect("address"),
        &mut p,
        Instant::now(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&40u16.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p
    }

    fn pair(sequence: bool) -> (L2tp, L2tp) {
        let a = L2tp::new(L2tpConfig {
            peer: "198.18.0.2:1701".parse().unwrap(),
            peer_tunnel: 20,
            peer_session: 21,
            tunnel: 10,
            session: 11,
            sequence,
            allowed: vec!["198.19.0.2/32".parse().unwrap()],
        });
        let b = L2tp::new(L2tpConfig {
            peer: "198.18.0.1:1701".parse().unwrap(),
            peer_tunnel: 10,
            peer_session: 11,
            tunnel: 20,
            session: 21,
            sequence,
            allowed: vec!["198.19.0.1/32".parse().unwrap()],
        });
        (a, b)
    }

    #[test]
    fn packets_cross_both_ways_with_and_without_sequence_numbers() {
        let now = Instant::now();
        let a_addr: SocketAddr = "198.18.0.1:1701".parse().unwrap();
        for seq in [false, true] {
            let (mut a, mut b) = pair(seq);
            let sent = ipv4([198, 19, 0, 1], [198, 19, 0, 2]);
            let mut p = sent.clone();
            assert_eq!(
                a.handle_tun(&mut p, now),
                Verdict::ToNetwork("198.18.0.2:1701".parse().unwrap())
            );
            // 6 (or 10) bytes of L2TP, 4 of PPP: the 38 of RFC 2661 with UDP and IPv4.
            assert_eq!(p.len(), sent.len() + if seq { 14 } else { 10 });
            assert_eq!(b.handle_network(a_addr, &mut p, now), Verdict::ToTun);
            assert_eq!(p, sent);
        }
    }

    #[test]
    fn the_kernels_link_scope_chatter_is_told_apart_from_spoofing() {
        use crate::codec::test_packets::{ipv6, router_solicitation};
        let now = Instant::now();
        let a_addr: SocketAddr = "198.18.0.1:1701".parse().unwrap();
        let (mut a, mut b) = pair(false);
        for (mut p, want) in [
            (router_solicitation(), DropReason::LinkScope),
            (ipv6("2001:2::9", "2001:2::2", 128), DropReason::Spoofed),
        ] {
            assert!(matches!(a.handle_tun(&mut p, now), Verdict::ToNetwork(_)));
            assert_eq!(b.handle_network(a_addr, &mut p, now), Verdict::Drop(want));
        }
    }

    #[test]
    fn wrong_ids_control_lying_lengths_and_foreign_sources_are_dropped() {
        let now = Instant::now();
        let a_addr: SocketAddr = "198.18.0.1:1701".parse().unwrap();
        let (mut a, mut b) = pair(false);
        let mut p = ipv4([198, 19, 0, 1], [198, 19, 0, 2]);
        a.handle_tun(&mut p, now);
        let good = p.clone();
        let mut wrong = good.clone();
        wrong[5] = 99;
        assert_eq!(
            b.handle_network(a_addr, &mut wrong, now),
            Verdict::Drop(DropReason::NoSession)
        );
        let mut control = vec![0xc8, 0x02, 0, 12, 0, 20, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            b.handle_network(a_addr, &mut control, now),
            Verdict::Drop(DropReason::Unsupported)
        );
        let mut lying = good.clone();
        lying[10 + 3] = 200; // the inner IPv4 total length
        assert_eq!(
            b.handle_network(a_addr, &mut lying, now),
            Verdict::Drop(DropReason::Malformed)
        );
        let mut cut = good[..8].to_vec();
        assert_eq!(
            b.handle_network(a_addr, &mut cut, now),
            Verdict::Drop(DropReason::Truncated)
        );
        let mut spoofed = ipv4([198, 19, 0, 9], [198, 19, 0, 2]);
        a.handle_tun(&mut spoofed, now);
        assert_eq!(
            b.handle_network(a_addr, &mut spoofed, now),
            Verdict::Drop(DropReason::Spoofed)
        );
        let mut stranger = good.clone();
        assert_eq!(
            b.handle_network("198.18.0.9:1701".parse().unwrap(), &mut stranger, now),
            Verdict::Drop(DropReason::UnknownPeer)
        );
    }
}
