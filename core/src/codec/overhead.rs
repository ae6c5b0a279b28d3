//! What each tunnel kind adds to a packet, computed from the wire formats,
//! and the largest inner packet that fits an outer MTU. The tests check the
//! figures against what the codecs really emit.

use crate::wire::esp;

/// A tunnel's encapsulation, as far as its size goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encapsulation {
    /// IPv4 in IPv6 (RFC 2473): the outer IPv6 header only.
    Dslite,
    /// WireGuard data message in UDP: 16 bytes of header, 16 of tag
    /// (boringtun does not pad).
    Wireguard,
    /// ESP tunnel mode, AES-GCM-128, in UDP 4500 (`udp`) or raw.
    Esp { udp: bool },
    /// L2TPv2 (6 bytes, or 10 with sequence numbers) + PPP (4) in UDP 1701.
    L2tp { sequence: bool },
    /// That L2TP datagram (its UDP header included) in ESP transport mode,
    /// in UDP 4500 or raw.
    L2tpIpsec { sequence: bool, udp: bool },
}

const UDP: usize = 8;

fn ip(v6: bool) -> usize {
    if v6 { 40 } else { 20 }
}

fn esp_added(payload: usize) -> usize {
    esp::HEADER_LEN + esp::pad_len(payload) + esp::TRAILER_LEN + esp::ICV_LEN
}

fn l2tp_header(sequence: bool) -> usize {
    (if sequence { 10 } else { 6 }) + 4
}

impl Encapsulation {
    /// Bytes on the wire beyond an inner packet of `inner` bytes, outer IP
    /// header included (`outer_v6`: over IPv6).
    pub fn overhead(self, outer_v6: bool, inner: usize) -> usize {
        let outer = ip(outer_v6);
        match self {
            Encapsulation::Dslite => 40,
            Encapsulation::Wireguard => 32 + UDP + outer,
            Encapsulation::Esp { udp } => esp_added(inner) + if udp { UDP } else { 0 } + outer,
            Encapsulation::L2tp { sequence } => l2tp_header(sequence) + UDP + outer,
            Encapsulation::L2tpIpsec { sequence, udp } => {
                let protected = UDP + l2tp_header(sequence) + inner;
                protected - inner + esp_added(protected) + if udp { UDP } else { 0 } + outer
            }
        }
    }

    /// The least and the most it adds over all inner sizes (padding varies).
    pub fn overhead_range(self, outer_v6: bool) -> (usize, usize) {
        let all = (0..4).map(|k| self.overhead(outer_v6, 1000 + k));
        (all.clone().min().unwrap_or(0), all.max().unwrap_or(0))
    }

    /// The largest inner packet whose encapsulation fits `outer_mtu`.
    pub fn max_inner(self, outer_v6: bool, outer_mtu: usize) -> usize {
        (0..=outer_mtu)
            .rev()
            .find(|&n| n + self.overhead(outer_v6, n) <= outer_mtu)
            .unwrap_or(0)
    }
}

impl Encapsulation {
    /// How reports and graphs name it.
    pub fn name(self) -> &'static str {
        match self {
            Encapsulation::Dslite => "DS-Lite (IPv4 in IPv6)",
            Encapsulation::Wireguard => "WireGuard",
            Encapsulation::Esp { udp: true } => "ESP in UDP 4500",
            Encapsulation::Esp { udp: false } => "ESP (protocol 50)",
            Encapsulation::L2tp { .. } => "L2TP/PPP in UDP 1701",
            Encapsulation::L2tpIpsec { udp: true, .. } => "L2TP/IPsec in UDP 4500",
            Encapsulation::L2tpIpsec { udp: false, .. } => "L2TP/IPsec (protocol 50)",
        }
    }

    /// The headers that make up the overhead, in wire order.
    pub fn breakdown(self, outer_v6: bool) -> String {
        let outer = format!("outer IP {}", ip(outer_v6));
        let nat_t = |udp: bool| if udp { " + UDP 8" } else { "" };
        let esp = "ESP 8 + IV 8";
        let esp_tail = "pad 0-3 + pad length/next header 2 + ICV 16";
        let l2tp = |sequence: bool| {
            if sequence {
                "L2TP 10 (with Ns/Nr) + PPP 4"
            } else {
                "L2TP 6 + PPP 4"
            }
        };
        match self {
            Encapsulation::Dslite => "outer IPv6 40".to_string(),
            Encapsulation::Wireguard => format!("{outer} + UDP 8 + WireGuard 32"),
            Encapsulation::Esp { udp } => format!("{outer}{} + {esp} + {esp_tail}", nat_t(udp)),
            Encapsulation::L2tp { sequence } => format!("{outer} + UDP 8 + {}", l2tp(sequence)),
            Encapsulation::L2tpIpsec { sequence, udp } => format!(
                "{outer}{} + {esp} + UDP 8 + {} + {esp_tail}",
                nat_t(udp),
                l2tp(sequence)
            ),
        }
    }

    /// "60" or "62-65": what it adds per packet, as a range where padding
    /// varies.
    pub fn overhead_text(self, outer_v6: bool) -> String {
        match self.overhead_range(outer_v6) {
            (lo, hi) if lo == hi => lo.to_string(),
            (lo, hi) => format!("{lo}-{hi}"),
        }
    }
}

/// The TCP MSS for an inner MTU: minus the IP and TCP headers.
pub fn mss(inner_mtu: usize, inner_v6: bool) -> usize {
    inner_mtu.saturating_sub(ip(inner_v6) + 20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Codec;
    use crate::codec::esp::{KeyMaterial, Outbound};
    use crate::codec::l2tp::{L2tp, L2tpConfig};

    fn inner(n: usize) -> Vec<u8> {
        let mut p = vec![0u8; n];
        p[0] = 0x45;
        p
    }

    #[test]
    fn esp_overhead_is_what_the_codec_emits() {
        let mut o = Outbound::new(1, &KeyMaterial([1; 20]));
        let mut out = Vec::new();
        for n in 20..=1500 {
            o.seal(&inner(n), esp::NEXT_IPV4, &mut out).unwrap();
            for udp in [false, true] {
                for v6 in [false, true] {
                    let wire = out.len() + if udp { 8 } else { 0 } + ip(v6);
                    assert_eq!(wire - n, Encapsulation::Esp { udp }.overhead(v6, n), "{n}");
                }
            }
        }
        // RFC 3948 with AES-GCM-128 (RFC 4106): IPv4 in ESP-in-UDP over IPv4
        // adds 62..65 bytes, and 1438 is the largest inner packet in 1500.
        assert_eq!(
            Encapsulation::Esp { udp: true }.overhead_range(false),
            (62, 65)
        );
        assert_eq!(
            Encapsulation::Esp { udp: true }.max_inner(false, 1500),
            1438
        );
        assert_eq!(
            Encapsulation::Esp { udp: false }.overhead_range(false),
            (54, 57)
        );
        assert_eq!(
            Encapsulation::Esp { udp: true }.overhead_range(true),
            (82, 85)
        );
    }

    #[test]
    fn l2tp_overheads_are_what_the_codecs_emit() {
        for sequence in [false, true] {
            let mut c = L2tp::new(L2tpConfig {
                peer: "198.18.0.2:1701".parse().unwrap(),
                peer_tunnel: 1,
                peer_session: 2,
                tunnel: 3,
                session: 4,
                sequence,
                allowed: Vec::new(),
            });
            let mut esp_sa = Outbound::new(1, &KeyMaterial([1; 20]));
            let mut sealed = Vec::new();
            for n in [20, 21, 22, 23, 576, 1400] {
                let mut p = inner(n);
                c.handle_tun(&mut p, std::time::Instant::now());
                let wire = p.len() + 8 + 20;
                assert_eq!(
                    wire - n,
                    Encapsulation::L2tp { sequence }.overhead(false, n)
                );
                // Transport mode: ESP protects the UDP datagram (header + L2TP).
                let mut datagram = vec![0u8; 8];
                datagram.extend_from_slice(&p);
                esp_sa.seal(&datagram, esp::NEXT_UDP, &mut sealed).unwrap();
                let wire = sealed.len() + 8 + 20;
                assert_eq!(
                    wire - n,
                    Encapsulation::L2tpIpsec {
                        sequence,
                        udp: true
                    }
                    .overhead(false, n)
                );
            }
        }
        // RFC 2661 over UDP and IPv4: 38 bytes; with IPsec in UDP 4500, 80..83.
        assert_eq!(
            Encapsulation::L2tp { sequence: false }.overhead(false, 1000),
            38
        );
        assert_eq!(
            Encapsulation::L2tpIpsec {
                sequence: false,
                udp: true
            }
            .overhead_range(false),
            (80, 83)
        );
    }

    #[test]
    fn fixed_overheads_and_mss() {
        assert_eq!(Encapsulation::Dslite.max_inner(true, 1500), 1460);
        assert_eq!(Encapsulation::Wireguard.overhead(false, 1000), 60);
        assert_eq!(Encapsulation::Wireguard.overhead(true, 1000), 80);
        assert_eq!(Encapsulation::Wireguard.max_inner(true, 1500), 1420);
        assert_eq!(mss(1420, false), 1380);
        assert_eq!(mss(1420, true), 1360);
        assert_eq!(mss(1460, false), 1420);
    }
}
