//! The Internet checksums the offloads compute and check: the pseudo-header
//! sum, the IPv4 header checksum, completing a partial checksum the kernel left
//! to us, and leaving one for the kernel to complete on a packet going into the
//! TUN.

use super::layout::{ipv4, ipv6, put16};
use super::vnet_header::{F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6, OffloadError, VirtioNetHdr};

pub use crate::wire::{fold, sum};

/// The sum of the TCP/UDP pseudo-header (RFC 793 / RFC 8200 section 8.1): both
/// addresses, the protocol and the transport length.
pub(super) fn pseudo_sum(addrs: &[u8], protocol: u8, len: usize) -> u64 {
    sum(addrs) as u64 + protocol as u64 + (len as u64 >> 16) + (len as u64 & 0xffff)
}

/// The address bytes (source then destination) of an IPv4 or IPv6 packet whose
/// header is known to be there.
pub(super) fn addrs(packet: &[u8], v6: bool) -> &[u8] {
    if v6 {
        &packet[ipv6::ADDRS]
    } else {
        &packet[ipv4::ADDRS]
    }
}

pub(super) fn ipv4_header_checksum(header: &mut [u8]) {
    put16(header, ipv4::CHECKSUM, 0);
    let c = !fold(sum(header) as u64);
    put16(header, ipv4::CHECKSUM, c);
}

/// Whether the transport checksum of `packet` (IP header of `ip_len` bytes, then
/// the TCP or UDP segment) verifies.
pub(super) fn transport_checksum_ok(packet: &[u8], ip_len: usize, v6: bool, protocol: u8) -> bool {
    let l4 = &packet[ip_len..];
    fold(pseudo_sum(addrs(packet, v6), protocol, l4.len()) + sum(l4) as u64) == 0xffff
}

/// A computed checksum of 0 goes on the wire as 0xffff (the same number in
/// ones' complement; for UDP, 0 would mean "no checksum").
pub(super) fn nonzero(c: u16) -> u16 {
    if c == 0 { 0xffff } else { c }
}

/// Completes a partial checksum: the field at `start + offset` holds the
/// pseudo-header sum, and the final checksum covers `start..` (the field included).
pub fn complete_checksum(
    packet: &mut [u8],
    start: usize,
    offset: usize,
) -> Result<(), OffloadError> {
    let at = start
        .checked_add(offset)
        .ok_or(OffloadError::Malformed("checksum offset"))?;
    if at + 2 > packet.len() {
        return Err(OffloadError::Malformed("checksum field beyond the packet"));
    }
    let c = !fold(sum(&packet[start..]) as u64);
    put16(packet, at..at + 2, nonzero(c));
    Ok(())
}

/// A TCP or UDP packet that came in from the tunnel socket and goes into the
/// TUN: rewrite its checksum field to the pseudo-header sum and return a header
/// asking the kernel to complete it (NEEDS_CSUM). A packet a kernel sent with
/// CHECKSUM_PARTIAL and decapsulated from a raw socket still holds that partial
/// sum (veths pass partial checksums on), so the field cannot be trusted either
/// way; this makes both cases right for the cost of summing 40 bytes. The price:
/// the kernel no longer verifies such a packet's checksum, so corruption inside
/// the tunnel goes unnoticed -- the trust the kernel's own decapsulation gives a
/// CHECKSUM_PARTIAL packet from a veth, and the codec has already checked the
/// IPv4 header checksum. (Telling partial from complete would need the NAT
/// rewrite to carry that knowledge; it cannot be read off the field.) Anything
/// else (ICMP, fragments, IPv6 extension headers, an IPv4 UDP checksum of 0)
/// gets None: write it with a zero header.
pub fn partial_checksum_for_tun(packet: &mut [u8]) -> Option<VirtioNetHdr> {
    let v6 = match packet.first()? >> 4 {
        4 => false,
        6 => true,
        _ => return None,
    };
    let (l4, proto, l4_len) = if v6 {
        if packet.len() < 40 {
            return None;
        }
        let plen = u16::from_be_bytes([packet[4], packet[5]]) as usize;
        (40usize, packet[6], plen.min(packet.len() - 40))
    } else {
        let ihl = ((packet[0] & 0x0f) as usize) * 4;
        if ihl < 20 || packet.len() < ihl {
            return None;
        }
        // A fragment's checksum covers the whole datagram: leave it alone.
        let frag = u16::from_be_bytes([packet[6], packet[7]]);
        if frag & 0x3fff != 0 {
            return None;
        }
        let total = u16::from_be_bytes([packet[2], packet[3]]) as usize;
        (ihl, packet[9], total.min(packet.len()).saturating_sub(ihl))
    };
    let csum_offset = match proto {
        6 if l4_len >= 20 => 16,
        17 if l4_len >= 8 => {
            // IPv4 UDP without a checksum stays without one.
            if !v6 && packet[l4 + 6] == 0 && packet[l4 + 7] == 0 {
                return None;
            }
            6
        }
        _ => return None,
    };
    let s = pseudo_sum(addrs(packet, v6), proto, l4_len);
    let at = l4 + csum_offset;
    put16(packet, at..at + 2, fold(s));
    Some(VirtioNetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: 0,
        hdr_len: 0,
        gso_size: 0,
        csum_start: l4 as u16,
        csum_offset: csum_offset as u16,
    })
}

/// A TCP packet from the network longer than `max_len`: a super-packet that a
/// kernel peer sent with GSO, or that GRO coalesced, which a raw socket hands
/// over whole (IPv4-in-IPv6 from a kernel AFTR or B4). Its header from
/// [`partial_checksum_for_tun`] becomes a TSO one that has the kernel cut it
/// into packets of at most `max_len` bytes, as they were on the wire, instead
/// of forwarding one that fits no link. Anything else is left as it is.
pub fn cut_for_tun(packet: &[u8], hdr: &mut VirtioNetHdr, max_len: usize) {
    if packet.len() <= max_len || hdr.flags != F_NEEDS_CSUM || hdr.csum_offset != 16 {
        return;
    }
    let l4 = hdr.csum_start as usize;
    let v6 = packet[0] >> 4 == 6;
    let Some(&off) = packet.get(l4 + 12) else {
        return;
    };
    let headers = l4 + (off >> 4) as usize * 4;
    if headers < l4 + 20 || headers >= max_len || packet.len() <= headers {
        return;
    }
    hdr.gso_type = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
    hdr.hdr_len = headers as u16;
    hdr.gso_size = (max_len - headers) as u16;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::offload::test_packets::pattern;

    /// RFC 1071's reference algorithm, 16 bits at a time.
    fn slow_sum(data: &[u8]) -> u16 {
        let mut s: u64 = 0;
        for c in data.chunks(2) {
            s += (c[0] as u64) << 8 | c.get(1).copied().unwrap_or(0) as u64;
        }
        fold(s)
    }

    #[test]
    fn checksum_matches_rfc1071() {
        // RFC 1071 section 3's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        let data = pattern(3000);
        for start in 0..8 {
            for len in (0..200).chain([1499, 1500, 2999 - start]) {
                let d = &data[start..start + len];
                assert_eq!(sum(d), slow_sum(d), "start {start} len {len}");
            }
        }
        // All ones: the largest sums still fold right.
        let ones = vec![0xffu8; 65535];
        assert_eq!(sum(&ones), slow_sum(&ones));
    }

    #[test]
    fn a_udp_packet_gets_the_pseudo_header_sum_and_needs_csum() {
        // IPv4 198.18.0.1 -> 198.18.0.2, UDP 1000 -> 2000, 4 bytes of payload.
        let mut p = vec![
            0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2, //
            0x03, 0xe8, 0x07, 0xd0, 0, 12, 0xde, 0xad, 1, 2, 3, 4,
        ];
        let h = partial_checksum_for_tun(&mut p).unwrap();
        assert_eq!((h.csum_start, h.csum_offset), (20, 6));
        // Completing it as the kernel would gives a checksum that verifies.
        complete_checksum(&mut p, 20, 6).unwrap();
        let s = pseudo_sum(&p[12..20], 17, 12) + sum(&p[20..]) as u64;
        assert_eq!(fold(s), 0xffff);
    }

    #[test]
    fn icmp_and_fragments_are_left_alone() {
        let mut icmp = vec![
            0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 8, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert!(partial_checksum_for_tun(&mut icmp).is_none());
        let mut frag = vec![
            0x45, 0, 0, 28, 0, 0, 0x20, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 2, 0, 8,
            1, 1,
        ];
        assert!(partial_checksum_for_tun(&mut frag).is_none());
        assert!(partial_checksum_for_tun(&mut []).is_none());
    }

    /// A super-packet off a raw socket (a kernel peer's GSO, whole) goes into
    /// the TUN with a TSO header whose segments fit `max_len`, and they are the
    /// packets the kernel would make of it; a packet that fits, and UDP, stay
    /// as they are.
    #[test]
    fn a_tcp_super_packet_is_cut_to_the_softwire_size() {
        use crate::driver::offload::test_packets::{Tcp, l4_ok, pattern, segments, tcp_packet};
        for v6 in [false, true] {
            let payload = pattern(5000);
            let t = Tcp {
                v6,
                payload: &payload,
                ..Tcp::default()
            };
            let mut p = tcp_packet(&t, false);
            let mut hdr = partial_checksum_for_tun(&mut p).unwrap();
            cut_for_tun(&p, &mut hdr, 1460);
            let ip = if v6 { 40 } else { 20 };
            assert_eq!(hdr.gso_type, if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
            assert_eq!(hdr.hdr_len as usize, ip + 32);
            assert_eq!(hdr.gso_size as usize, 1460 - ip - 32);
            let mut read = hdr.to_bytes().to_vec();
            read.extend_from_slice(&p);
            let segs = segments(&mut read);
            assert_eq!(segs.len(), 5000usize.div_ceil(1460 - ip - 32));
            for s in &segs {
                assert!(s.len() <= 1460 && l4_ok(s), "{} bytes", s.len());
            }
            let small = Tcp {
                v6,
                payload: &payload[..1000],
                ..Tcp::default()
            };
            let mut q = tcp_packet(&small, false);
            let mut h = partial_checksum_for_tun(&mut q).unwrap();
            cut_for_tun(&q, &mut h, 1460);
            assert_eq!((h.gso_type, h.gso_size), (0, 0));
        }
        let mut udp = vec![
            0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2, //
            0x03, 0xe8, 0x07, 0xd0, 0, 12, 0xde, 0xad, 1, 2, 3, 4,
        ];
        let mut h = partial_checksum_for_tun(&mut udp).unwrap();
        cut_for_tun(&udp, &mut h, 28);
        assert_eq!((h.gso_type, h.gso_size), (0, 0));
    }
}
