//! ESP transport mode around another codec's UDP datagrams: L2TP/IPsec as
//! RFC 3193 has it. The inner codec (L2TP) speaks UDP payloads on port 1701;
//! this one gives each its UDP header and seals it with next header 17, so on
//! the wire it is outer IP, (UDP 4500,) ESP, then UDP 1701 -> 1701 and L2TP
//! inside the encryption.

use crate::codec::esp::{EspConfig, SaPair};
use crate::codec::{Codec, DropReason, Verdict};
use crate::wire::{esp as esp_wire, udp};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

pub struct Transport<C: Codec> {
    sa: SaPair,
    inner: C,
    /// The outer addresses, for the protected UDP header's checksum.
    local: IpAddr,
    peer: IpAddr,
    /// The protected datagrams' port at both ends (1701 for L2TP).
    port: u16,
}

impl<C: Codec> Transport<C> {
    pub fn new(c: &EspConfig, local: IpAddr, port: u16, inner: C) -> Transport<C> {
        Transport {
            sa: SaPair::new(c),
            inner,
            local,
            peer: c.peer.ip(),
            port,
        }
    }

    pub fn take_notes(&mut self) -> Vec<String> {
        self.sa.take_notes()
    }

    /// The inner codec's verdict, with a datagram bound for the network
    /// protected on its way.
    fn protect(&mut self, v: Verdict, packet: &mut Vec<u8>) -> Verdict {
        let Verdict::ToNetwork(_) = v else {
            return v;
        };
        let h = udp::header((self.local, self.port), (self.peer, self.port), packet);
        self.sa.seal_behind(&h, packet, esp_wire::NEXT_UDP)
    }
}

impl<C: Codec> Codec for Transport<C> {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let v = self.inner.handle_tun(packet, now);
        self.protect(v, packet)
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let (range, next) = match self.sa.open(peer, packet) {
            Ok(x) => x,
            Err(v) => return v,
        };
        if next != esp_wire::NEXT_UDP {
            return Verdict::Drop(DropReason::WrongProtocol);
        }
        let payload = match udp::parse(&packet[range.clone()]) {
            Ok((s, d, p)) if s == self.port && d == self.port => p,
            Ok(_) => return Verdict::Drop(DropReason::Unsupported),
            Err(e) => return Verdict::Drop(e.into()),
        };
        let (start, end) = (range.start + payload.start, range.start + payload.end);
        packet.copy_within(start..end, 0);
        packet.truncate(end - start);
        let v = self
            .inner
            .handle_network(SocketAddr::new(peer.ip(), self.port), packet, now);
        self.protect(v, packet)
    }

    fn poll(&mut self, now: Instant) -> Option<(Verdict, Vec<u8>)> {
        let (v, mut p) = self.inner.poll(now)?;
        let v = self.protect(v, &mut p);
        Some((v, p))
    }

    fn tick(&mut self, now: Instant) {
        self.inner.tick(now)
    }

    fn deadline(&self) -> Option<Instant> {
        self.inner.deadline()
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/l2tp_ipsec_codec.rs): an L2TP/IPsec
/// endpoint given any bytes from the network, the same bytes sealed by its
/// peer as a UDP datagram's payload (a well-formed ESP packet around
/// arbitrary L2TP), and as a whole sealed datagram (arbitrary UDP inside).
pub mod fuzz {
    use super::*;
    use crate::codec::esp::{Encap, KeyMaterial, Outbound};
    use crate::codec::l2tp::{L2tp, L2tpConfig};

    const PEER: &str = "198.18.0.2:4500";

    pub fn codec(data: &[u8]) {
        let now = Instant::now();
        let peer: SocketAddr = PEER.parse().expect("address");
        let l2tp = L2tp::new(L2tpConfig {
            peer: SocketAddr::new(peer.ip(), crate::wire::l2tp::PORT),
            peer_tunnel: 1,
            peer_session: 1,
            tunnel: 2,
            session: 2,
            sequence: true,
            allowed: vec!["0.0.0.0/0".parse().expect("prefix")],
        });
        let config = EspConfig {
            peer,
            encap: Encap::Udp,
            out_spi: 0x1000,
            out_key: KeyMaterial([1; 20]),
            in_spi: 0x1001,
            in_key: KeyMaterial([2; 20]),
            window: 64,
            allowed: Vec::new(),
        };
        let mut end = Transport::new(&config, "198.18.0.1".parse().expect("address"), 1701, l2tp);
        let mut p = data.to_vec();
        let _ = end.handle_network(peer, &mut p, now);
        let mut sealer = Outbound::new(0x1001, &KeyMaterial([2; 20]));
        let mut datagram = Vec::new();
        udp::emit(
            &mut datagram,
            (peer.ip(), 1701),
            ("198.18.0.1".parse().expect("address"), 1701),
            data,
        );
        for (payload, next) in [
            (&datagram[..], esp_wire::NEXT_UDP),
            (data, esp_wire::NEXT_UDP),
        ] {
            let mut sealed = Vec::new();
            if sealer.seal(payload, next, &mut sealed).is_some() {
                let _ = end.handle_network(peer, &mut sealed, now);
            }
        }
        let mut t = data.to_vec();
        let _ = end.handle_tun(&mut t, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::esp::{Encap, KeyMaterial};
    use crate::codec::l2tp::{L2tp, L2tpConfig};

    fn end(i: u8) -> Transport<L2tp> {
        let j = 1 - i;
        let addr = |k: u8| -> IpAddr { format!("198.18.0.{}", k + 1).parse().unwrap() };
        let l2tp = L2tp::new(L2tpConfig {
            peer: SocketAddr::new(addr(j), 1701),
            peer_tunnel: 10 + j as u16,
            peer_session: 20 + j as u16,
            tunnel: 10 + i as u16,
            session: 20 + i as u16,
            sequence: false,
            allowed: vec!["0.0.0.0/0".parse().unwrap()],
        });
        let c = EspConfig {
            peer: SocketAddr::new(addr(j), 4500),
            encap: Encap::Udp,
            out_spi: 0x1000 + j as u32,
            out_key: KeyMaterial([j; 20]),
            in_spi: 0x1000 + i as u32,
            in_key: KeyMaterial([i; 20]),
            window: 64,
            allowed: Vec::new(),
        };
        Transport::new(&c, addr(i), 1701, l2tp)
    }

    fn ipv4(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 1, 1]);
        p[16..20].copy_from_slice(&[198, 18, 2, 1]);
        p
    }

    #[test]
    fn an_inner_packet_crosses_as_esp_around_udp_1701_and_comes_out_whole() {
        let (mut a, mut b) = (end(0), end(1));
        let now = Instant::now();
        let inner = ipv4(100);
        let mut p = inner.clone();
        let v = a.handle_tun(&mut p, now);
        assert_eq!(v, Verdict::ToNetwork("198.18.0.2:4500".parse().unwrap()));
        // ESP header 16 + UDP 8 + L2TP 6 + PPP 4 + 100, padded to 4 with the
        // 2-byte trailer, + ICV 16: the figure overhead.rs states.
        let (lo, hi) = crate::codec::overhead::Encapsulation::L2tpIpsec {
            sequence: false,
            udp: true,
        }
        .overhead_range(false);
        let added = p.len() + 8 + 20 - inner.len();
        assert!((lo..=hi).contains(&added), "{added} not in {lo}..={hi}");
        assert_eq!(&p[..4], &0x1001u32.to_be_bytes(), "the SPI b receives on");
        let v = b.handle_network("198.18.0.1:4500".parse().unwrap(), &mut p, now);
        assert_eq!(v, Verdict::ToTun);
        assert_eq!(p, inner);
    }

    #[test]
    fn wrong_next_header_and_foreign_ports_are_dropped() {
        let mut b = end(1);
        let now = Instant::now();
        let from: SocketAddr = "198.18.0.1:4500".parse().unwrap();
        let mut sealer = crate::codec::esp::Outbound::new(0x1001, &KeyMaterial([1; 20]));
        // Tunnel mode (next header 4) where transport mode is expected.
        let mut p = Vec::new();
        sealer.seal(&ipv4(60), esp_wire::NEXT_IPV4, &mut p).unwrap();
        let v = b.handle_network(from, &mut p, now);
        assert_eq!(v, Verdict::Drop(DropReason::WrongProtocol));
        // UDP inside, but not 1701 -> 1701.
        let mut d = Vec::new();
        udp::emit(
            &mut d,
            ("198.18.0.1".parse().unwrap(), 500),
            ("198.18.0.2".parse().unwrap(), 1701),
            &[0; 20],
        );
        sealer.seal(&d, esp_wire::NEXT_UDP, &mut p).unwrap();
        let v = b.handle_network(from, &mut p, now);
        assert_eq!(v, Verdict::Drop(DropReason::Unsupported));
        // A UDP length that lies.
        d[4..6].copy_from_slice(&200u16.to_be_bytes());
        sealer.seal(&d, esp_wire::NEXT_UDP, &mut p).unwrap();
        let v = b.handle_network(from, &mut p, now);
        assert_eq!(v, Verdict::Drop(DropReason::Truncated));
    }
}
