//! The ICMP an AFTR handles itself: echo requests to its softwire address
//! answered, and errors from the internet about a NATed packet translated
//! back to the inner addresses and sent to the B4 (RFC 5508 section 3).

use std::time::Instant;

use super::super::inner_packet::{read_u16, wire_drop};
use super::Aftr;
use super::nat::OutsideKey;
use crate::codec::{DropReason, Verdict};
use crate::wire::checksum;
use crate::wire::icmpv4_error;
use crate::wire::ipv4::{self, ChecksumDelta, l4, protocol};

impl Aftr {
    /// Echo requests to the AFTR's softwire address are answered (RFC 6333
    /// section 5.7 lets a B4 ping it to test the softwire); nothing else there is.
    pub(super) fn answer_echo(&mut self, softwire: u32, packet: &mut [u8]) -> Verdict {
        let p = ipv4::Packet::new_unchecked(&*packet);
        if p.protocol() != protocol::ICMP || p.is_fragment() {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let icmp = p.payload();
        if icmp.len() < l4::ICMP_HEADER_LEN {
            return Verdict::Drop(DropReason::Truncated);
        }
        if icmp[l4::ICMP_TYPE] != 8 || icmp[l4::ICMP_CODE] != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        if checksum(icmp) != 0 {
            return Verdict::Drop(DropReason::Malformed);
        }
        let (src, dst) = (p.src_addr(), p.dst_addr());
        let mut p = ipv4::Packet::new_unchecked(&mut *packet);
        p.set_src_addr(dst);
        p.set_dst_addr(src);
        p.set_ttl(64);
        p.fill_checksum();
        let icmp = p.payload_mut();
        let mut delta = ChecksumDelta::new();
        delta.rewrite(icmp, l4::ICMP_TYPE, &[0]); // echo reply
        let sum = match delta.apply(read_u16(icmp, l4::ICMP_CHECKSUM.start)) {
            // An all-zero reply needs 0xffff, which equation 3 cannot give.
            0 => {
                icmp[l4::ICMP_CHECKSUM].copy_from_slice(&[0, 0]);
                checksum(icmp)
            }
            s => s,
        };
        icmp[l4::ICMP_CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        self.echo_replies += 1;
        Verdict::ToNetwork(self.softwires[softwire as usize].b4)
    }

    /// An ICMP error from the internet about a packet the NAT sent: the quoted
    /// packet's source and port, its header checksum and, when quoted, its
    /// upper-layer checksum go back to the inner values, then the outer
    /// destination; the ICMP checksum follows every change (RFC 5508 section 3.2,
    /// RFC 3022 section 4.3). Errors do not refresh mappings.
    pub(super) fn translate_icmp_error(&mut self, packet: &mut [u8], now: Instant) -> Verdict {
        let p = ipv4::Packet::new_unchecked(&*packet);
        let (hl, outer_dst) = (p.header_len(), p.dst_addr());
        let icmp = p.payload();
        if checksum(icmp) != 0 {
            return Verdict::Drop(DropReason::Malformed);
        }
        let quoted = &icmp[icmpv4_error::HEADER_LEN..];
        let q = ipv4::Packet::new_unchecked(quoted);
        if let Err(e) = q.check_header_len() {
            return Verdict::Drop(wire_drop(e));
        }
        if q.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let (qhl, qproto, qsrc) = (q.header_len(), q.protocol(), q.src_addr());
        let qupper = &quoted[qhl..];
        let port_at = match qproto {
            protocol::TCP | protocol::UDP => l4::SRC_PORT.start,
            protocol::ICMP => {
                if qupper.len() < l4::ICMP_IDENT.end {
                    return Verdict::Drop(DropReason::Truncated);
                }
                if qupper[l4::ICMP_TYPE] != 8 {
                    return Verdict::Drop(DropReason::Unsupported);
                }
                l4::ICMP_IDENT.start
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        if qupper.len() < port_at + 2 {
            return Verdict::Drop(DropReason::Truncated);
        }
        let key = OutsideKey {
            addr: qsrc,
            port: read_u16(qupper, port_at),
            proto: qproto,
        };
        if qsrc != outer_dst {
            return Verdict::Drop(DropReason::NoRoute);
        }
        let Some(m) = self.lookup_outside(key, now, false) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        let (inner_addr, inner_port) = (m.inside.addr, m.inside.port);
        let qsum_at = match qproto {
            protocol::TCP => l4::TCP_CHECKSUM.start,
            protocol::UDP => l4::UDP_CHECKSUM.start,
            _ => l4::ICMP_CHECKSUM.start,
        };
        let qupper_len = qupper.len();

        let icmp = &mut packet[hl..];
        let mut icmp_delta = ChecksumDelta::new();
        // Offsets below are from the start of the ICMP message, which is how its
        // checksum's words are aligned.
        let qbase = icmpv4_error::HEADER_LEN;
        let mut addr_delta = ChecksumDelta::new();
        addr_delta.addr(qsrc, inner_addr);
        let q_header_sum = addr_delta.apply(read_u16(icmp, qbase + 10));
        icmp_delta.rewrite(icmp, qbase + 12, &inner_addr.octets());
        icmp_delta.rewrite(icmp, qbase + 10, &q_header_sum.to_be_bytes());
        let ubase = qbase + qhl;
        if qupper_len >= qsum_at + 2 {
            let mut upper_delta = if qproto == protocol::ICMP {
                ChecksumDelta::new()
            } else {
                addr_delta
            };
            upper_delta.word(key.port, inner_port);
            let old = read_u16(icmp, ubase + qsum_at);
            let new = match qproto {
                protocol::UDP if old == 0 => 0,
                protocol::UDP => match upper_delta.apply(old) {
                    0 => 0xffff,
                    s => s,
                },
                _ => upper_delta.apply(old),
            };
            icmp_delta.rewrite(icmp, ubase + qsum_at, &new.to_be_bytes());
        }
        icmp_delta.rewrite(icmp, ubase + port_at, &inner_port.to_be_bytes());
        let icmp_sum = icmp_delta.apply(read_u16(icmp, l4::ICMP_CHECKSUM.start));
        icmp[l4::ICMP_CHECKSUM].copy_from_slice(&icmp_sum.to_be_bytes());

        let mut outer = ChecksumDelta::new();
        outer.addr(outer_dst, inner_addr);
        let mut p = ipv4::Packet::new_unchecked(&mut *packet);
        let sum = outer.apply(p.checksum());
        p.set_dst_addr(inner_addr);
        p.set_checksum(sum);
        self.translated += 1;
        Verdict::ToNetwork(self.softwires[m.inside.softwire as usize].b4)
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Instant;

    use super::*;
    use crate::codec::Codec;
    use crate::codec::dslite::test_support::*;
    use crate::codec::dslite::{AFTR_SOFTWIRE_ADDR, B4_SOFTWIRE_ADDR};
    use crate::wire::icmp_echo;

    #[test]
    fn aftr_answers_echo_to_its_softwire_address() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = echo(
            B4_SOFTWIRE_ADDR,
            AFTR_SOFTWIRE_ADDR,
            icmp_echo::Kind::Request,
            0x1234,
        );
        assert_eq!(
            aftr.handle_network(peer(B4_B), &mut p, now),
            Verdict::ToNetwork(peer(B4_B))
        );
        assert_checksums(&p);
        let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
        assert_eq!(
            (ip.src_addr(), ip.dst_addr()),
            (AFTR_SOFTWIRE_ADDR, B4_SOFTWIRE_ADDR)
        );
        let e = icmp_echo::Packet::new_checked(ip.payload()).unwrap();
        let r = icmp_echo::Repr::parse(&e, icmp_echo::Family::V4).unwrap();
        assert_eq!(
            (r.kind, r.ident, r.seq),
            (icmp_echo::Kind::Reply, 0x1234, 1)
        );
        assert_eq!(e.data(), b"ping");
        assert_eq!(aftr.mappings(), 0);
        assert_eq!(aftr.stats().echo_replies, 1);
        // A reply that is all zero still gets a checksum that verifies.
        let mut zero = echo(
            B4_SOFTWIRE_ADDR,
            AFTR_SOFTWIRE_ADDR,
            icmp_echo::Kind::Request,
            0,
        );
        zero.truncate(28);
        let mut ip = ipv4::Packet::new_unchecked(&mut zero[..]);
        ip.set_total_len(28);
        ip.payload_mut()[6..8].copy_from_slice(&[0, 0]);
        fix_checksums(&mut zero);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut zero, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(&zero[20..], &[0, 0, 0xff, 0xff, 0, 0, 0, 0]);
        assert_checksums(&zero);
        // Anything else to 192.0.0.1 is not served.
        let mut u = udp(B4_SOFTWIRE_ADDR, 1, AFTR_SOFTWIRE_ADDR, 7, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_B), &mut u, now),
            Verdict::Drop(DropReason::Unsupported)
        );
    }

    #[test]
    fn aftr_translates_icmp_errors_about_mapped_packets() {
        let mut aftr = aftr();
        let now = Instant::now();
        let original = udp(Ipv4Addr::new(192, 168, 7, 7), 33434, SERVER, 33435, 12);
        let mut out = original.clone();
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut out, now),
            Verdict::ToTun
        );
        let router = Ipv4Addr::new(192, 0, 2, 254);
        for (msg_type, code) in [(11, 0), (3, 3), (3, 4)] {
            let o = ipv4::Packet::new_checked(&out[..]).unwrap();
            let repr = icmpv4_error::Repr {
                msg_type,
                code,
                rest_of_header: 1400,
                quoted_len: icmpv4_error::quote_len(&o),
            };
            let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
            let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
            err.truncate(n);
            assert_eq!(
                aftr.handle_tun(&mut err, now),
                Verdict::ToNetwork(peer(B4_A))
            );
            let ip = ipv4::Packet::new_checked(&err[..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(
                (ip.src_addr(), ip.dst_addr()),
                (router, Ipv4Addr::new(192, 168, 7, 7))
            );
            let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
            assert!(e.verify_checksum(), "ICMP checksum follows the quote");
            assert_eq!(e.msg_type(), msg_type);
            // The quote is now what the LAN host sent, checksums and all.
            assert_eq!(e.quoted(), &original[..28]);
        }
        assert_eq!(aftr.stats().icmp_errors_translated, 3);
        // About a packet that has no mapping: dropped.
        let mut stray = out.clone();
        stray[20..22].copy_from_slice(&999u16.to_be_bytes());
        fix_checksums(&mut stray);
        let o = ipv4::Packet::new_checked(&stray[..]).unwrap();
        let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
        let repr = icmpv4_error::Repr::frag_needed(1400, 28);
        let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
        err.truncate(n);
        assert_eq!(
            aftr.handle_tun(&mut err, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        // A broken ICMP checksum is not laundered by the translation.
        let o = ipv4::Packet::new_checked(&out[..]).unwrap();
        let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
        err.truncate(n);
        err[30] ^= 1;
        assert_eq!(
            aftr.handle_tun(&mut err, now),
            Verdict::Drop(DropReason::Malformed)
        );
    }

    #[test]
    fn aftr_translates_icmp_errors_about_tcp_and_echo() {
        let mut aftr = aftr();
        let now = Instant::now();
        let router = Ipv4Addr::new(192, 0, 2, 254);
        for original in [
            tcp(LAN_HOST, 40001, SERVER, 443, l4::TCP_FLAG_SYN, 1400, false),
            echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 4242),
        ] {
            let mut out = original.clone();
            assert_eq!(
                aftr.handle_network(peer(B4_A), &mut out, now),
                Verdict::ToTun
            );
            let o = ipv4::Packet::new_checked(&out[..]).unwrap();
            let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
            let repr = icmpv4_error::Repr {
                msg_type: 11,
                code: 0,
                rest_of_header: 0,
                quoted_len: 28,
            };
            let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
            err.truncate(n);
            assert_eq!(
                aftr.handle_tun(&mut err, now),
                Verdict::ToNetwork(peer(B4_A))
            );
            let ip = ipv4::Packet::new_checked(&err[..]).unwrap();
            let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
            assert!(ip.verify_checksum() && e.verify_checksum());
            assert_eq!(e.quoted(), &original[..28]);
        }
    }
}
