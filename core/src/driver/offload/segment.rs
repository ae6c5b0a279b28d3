//! TUN -> network: one TUN read interpreted, a single packet's checksum
//! completed, or a TSO/USO super-packet cut into wire-size packets, each with
//! its own lengths, IPv4 ident, sequence number, flags and checksums, as the
//! kernel's tcp_gso_segment would.

use super::checksum::{
    addrs, complete_checksum, fold, ipv4_header_checksum, nonzero, pseudo_sum, sum,
};
use super::layout::{MAX_IP_LEN, PROTO_TCP, PROTO_UDP, get16, get32, ipv4, ipv6, put16, tcp, udp};
use super::vnet_header::{
    F_NEEDS_CSUM, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP, GSO_UDP_L4, OffloadError,
    VNET_HDR_LEN, VirtioNetHdr,
};

/// What one TUN read holds.
#[derive(Debug)]
pub enum TunRead<'a> {
    /// One IP packet with complete checksums.
    Packet(&'a [u8]),
    /// A super-packet to cut into wire-size packets.
    Gso(Segmenter<'a>),
}

/// Interprets one TUN read (`buf`: the virtio header, then the packet). A packet
/// whose checksum the kernel left to us (NEEDS_CSUM) gets it completed in place.
pub fn split_tun_read(buf: &mut [u8]) -> Result<TunRead<'_>, OffloadError> {
    let hdr = VirtioNetHdr::parse(buf)?;
    let packet = &mut buf[VNET_HDR_LEN..];
    if hdr.gso_type == GSO_NONE {
        if hdr.flags & F_NEEDS_CSUM != 0 {
            complete_checksum(packet, hdr.csum_start as usize, hdr.csum_offset as usize)?;
        }
        return Ok(TunRead::Packet(packet));
    }
    Segmenter::new(&hdr, packet).map(TunRead::Gso)
}

/// Checks one TUN read (`buf`: the virtio header, then the packet) for
/// handing on whole, header kept: a super-packet must be one [`Segmenter`]
/// could cut (so the kernel takes it back, and it can still be cut), a partial
/// checksum's field must lie inside the packet. Returns the wire packets it
/// stands for.
pub fn check_whole_read(buf: &[u8]) -> Result<usize, OffloadError> {
    let hdr = VirtioNetHdr::parse(buf)?;
    let packet = &buf[VNET_HDR_LEN..];
    if hdr.gso_type != GSO_NONE {
        return Segmenter::new(&hdr, packet).map(|s| s.count());
    }
    if hdr.flags & F_NEEDS_CSUM != 0
        && usize::from(hdr.csum_start) + usize::from(hdr.csum_offset) + 2 > packet.len()
    {
        return Err(OffloadError::Malformed("checksum field outside the packet"));
    }
    Ok(1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Tcp,
    Udp,
}

/// A validated TSO/USO super-packet, cut on demand: segment `i` is the headers
/// followed by payload bytes `i * gso_size ..` (the last may be shorter).
#[derive(Debug)]
pub struct Segmenter<'a> {
    packet: &'a [u8],
    transport: Transport,
    v6: bool,
    /// IP header bytes (including IPv6 extension headers): `csum_start`.
    ip_len: usize,
    /// IP plus transport header bytes.
    hdr_len: usize,
    gso_size: usize,
    count: usize,
}

impl<'a> Segmenter<'a> {
    /// Checks `packet` against its virtio header. The kernel's `hdr_len` is not
    /// trusted (on a forwarded packet it can cover the whole first segment); the
    /// transport header's own length is.
    pub fn new(hdr: &VirtioNetHdr, packet: &'a [u8]) -> Result<Segmenter<'a>, OffloadError> {
        let transport = match hdr.gso_type & !GSO_ECN {
            GSO_TCPV4 | GSO_TCPV6 => Transport::Tcp,
            GSO_UDP_L4 => Transport::Udp,
            GSO_UDP => return Err(OffloadError::Unsupported("UFO (IP fragmentation offload)")),
            _ => return Err(OffloadError::Unsupported("unknown GSO type")),
        };
        let first = *packet.first().ok_or(OffloadError::Truncated)?;
        let v6 = match (first >> 4, hdr.gso_type & !GSO_ECN) {
            (4, GSO_TCPV4 | GSO_UDP_L4) => false,
            (6, GSO_TCPV6 | GSO_UDP_L4) => true,
            (4 | 6, _) => {
                return Err(OffloadError::Malformed(
                    "IP version does not match the GSO type",
                ));
            }
            _ => return Err(OffloadError::Malformed("not IPv4 or IPv6")),
        };
        let ip_len = hdr.csum_start as usize;
        let protocol = match transport {
            Transport::Tcp => PROTO_TCP,
            Transport::Udp => PROTO_UDP,
        };
        if v6 {
            if packet.len() < ipv6::HEADER_LEN {
                return Err(OffloadError::Truncated);
            }
            if ip_len < ipv6::HEADER_LEN {
                return Err(OffloadError::Malformed(
                    "checksum start inside the IPv6 header",
                ));
            }
            if ip_len == ipv6::HEADER_LEN && packet[ipv6::NEXT_HEADER] != protocol {
                return Err(OffloadError::Malformed(
                    "next header does not match the GSO type",
                ));
            }
        } else {
            if packet.len() < ipv4::HEADER_LEN {
                return Err(OffloadError::Truncated);
            }
            let ihl = (packet[ipv4::VER_IHL] & 0x0f) as usize * 4;
            if ihl < ipv4::HEADER_LEN || ip_len != ihl {
                return Err(OffloadError::Malformed(
                    "checksum start is not the IPv4 header length",
                ));
            }
            if packet[ipv4::PROTOCOL] != protocol {
                return Err(OffloadError::Malformed(
                    "protocol does not match the GSO type",
                ));
            }
        }
        let (l4_len, csum_offset) = match transport {
            Transport::Tcp => {
                if packet.len() < ip_len + tcp::HEADER_LEN {
                    return Err(OffloadError::Truncated);
                }
                let thl = (packet[ip_len + tcp::DATA_OFF] >> 4) as usize * 4;
                if thl < tcp::HEADER_LEN {
                    return Err(OffloadError::Malformed("TCP data offset under 5"));
                }
                (thl, tcp::CHECKSUM.start)
            }
            Transport::Udp => (udp::HEADER_LEN, udp::CHECKSUM.start),
        };
        if hdr.csum_offset as usize != csum_offset {
            return Err(OffloadError::Malformed(
                "checksum offset is not the transport's",
            ));
        }
        let hdr_len = ip_len + l4_len;
        if packet.len() < hdr_len {
            return Err(OffloadError::Truncated);
        }
        let gso_size = hdr.gso_size as usize;
        if gso_size == 0 {
            return Err(OffloadError::Malformed("GSO size 0"));
        }
        let payload = packet.len() - hdr_len;
        if payload > gso_size && hdr_len + gso_size > MAX_IP_LEN {
            return Err(OffloadError::Malformed(
                "GSO size beyond the largest IP packet",
            ));
        }
        Ok(Segmenter {
            packet,
            transport,
            v6,
            ip_len,
            hdr_len,
            gso_size,
            count: payload.div_ceil(gso_size).max(1),
        })
    }

    /// Packets this super-packet becomes.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Payload bytes per segment.
    pub fn gso_size(&self) -> usize {
        self.gso_size
    }

    /// Bytes of segment `i` (0-based) as the wire carries it: the headers and
    /// its share of the payload; 0 past the last segment.
    pub fn segment_len(&self, i: usize) -> usize {
        let start = self.hdr_len + i * self.gso_size;
        match self.packet.len().checked_sub(start) {
            Some(rest) if i < self.count => self.hdr_len + rest.min(self.gso_size),
            _ => 0,
        }
    }

    /// Bytes of the super-packet.
    pub fn len(&self) -> usize {
        self.packet.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packet.is_empty()
    }

    /// Writes segment `i` (0-based) into `out`, replacing what it held; `out` is
    /// left empty when `i` is past the last segment.
    pub fn segment_into(&self, i: usize, out: &mut Vec<u8>) {
        out.clear();
        if i >= self.count {
            return;
        }
        let p = self.packet;
        let start = self.hdr_len + i * self.gso_size;
        let end = (start + self.gso_size).min(p.len());
        let total = self.hdr_len + (end - start);
        let last = i + 1 == self.count;
        out.reserve(total);
        out.extend_from_slice(&p[..self.hdr_len]);
        out.extend_from_slice(&p[start..end]);

        if self.v6 {
            put16(out, ipv6::PAYLOAD_LEN, (total - ipv6::HEADER_LEN) as u16);
        } else {
            put16(out, ipv4::TOTAL_LEN, total as u16);
            // Each segment its own identification, counting up from the
            // super-packet's (as the kernel's inet_gso_segment does).
            let id = get16(p, ipv4::IDENT).wrapping_add(i as u16);
            put16(out, ipv4::IDENT, id);
            ipv4_header_checksum(&mut out[..self.ip_len]);
        }
        let ip_len = self.ip_len;
        let (protocol, csum) = match self.transport {
            Transport::Tcp => {
                let th = &mut out[ip_len..];
                let seq = get32(p, ip_len + tcp::SEQ.start..ip_len + tcp::SEQ.end)
                    .wrapping_add((i * self.gso_size) as u32);
                th[tcp::SEQ].copy_from_slice(&seq.to_be_bytes());
                // FIN and PSH belong to the last segment, CWR to the first
                // (tcp_gso_segment).
                if !last {
                    th[tcp::FLAGS] &= !(tcp::FIN | tcp::PSH);
                }
                if i > 0 {
                    th[tcp::FLAGS] &= !tcp::CWR;
                }
                (PROTO_TCP, tcp::CHECKSUM)
            }
            Transport::Udp => {
                put16(&mut out[ip_len..], udp::LEN, (total - ip_len) as u16);
                (PROTO_UDP, udp::CHECKSUM)
            }
        };
        let at = ip_len + csum.start..ip_len + csum.end;
        put16(out, at.clone(), 0);
        let s =
            pseudo_sum(addrs(out, self.v6), protocol, total - ip_len) + sum(&out[ip_len..]) as u64;
        put16(out, at, nonzero(!fold(s)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::offload::test_packets::*;

    #[test]
    fn tso_ipv4_is_cut_into_mss_segments() {
        let payload = pattern(10_000);
        let t = Tcp {
            payload: &payload,
            flags: tcp::ACK_FLAG | tcp::PSH | tcp::CWR,
            ..Tcp::default()
        };
        let mut read = tso_read(&t, 1448);
        let segs = segments(&mut read);
        assert_eq!(segs.len(), 7); // 6 x 1448 + 1312
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let last = i == 6;
            let len = if last { 10_000 - 6 * 1448 } else { 1448 };
            assert_eq!(s.len(), 20 + 32 + len);
            assert_eq!(get16(s, ipv4::TOTAL_LEN) as usize, s.len());
            assert_eq!(get16(s, ipv4::IDENT), 0x4000 + i as u16);
            assert!(ip_ok(s), "IPv4 header checksum of segment {i}");
            assert!(l4_ok(s), "TCP checksum of segment {i}");
            assert_eq!(get32(s, 24..28), 0x0102_0304 + (i * 1448) as u32);
            let flags = s[20 + 13];
            assert_eq!(flags & tcp::PSH != 0, last, "PSH on segment {i}");
            assert_eq!(flags & tcp::CWR != 0, i == 0, "CWR on segment {i}");
            assert_eq!(flags & tcp::ACK_FLAG, tcp::ACK_FLAG);
            assert_eq!(&s[40..52], &TS_OPTIONS);
            joined.extend_from_slice(&s[52..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn tso_ipv6_is_cut_into_mss_segments() {
        let payload = pattern(5000);
        let t = Tcp {
            v6: true,
            payload: &payload,
            flags: tcp::ACK_FLAG | tcp::FIN,
            ..Tcp::default()
        };
        let mut read = tso_read(&t, 1000);
        let segs = segments(&mut read);
        assert_eq!(segs.len(), 5);
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(get16(s, ipv6::PAYLOAD_LEN) as usize, s.len() - 40);
            assert_eq!(s.len(), 40 + 32 + 1000);
            assert!(l4_ok(s), "segment {i}");
            assert_eq!(s[40 + 13] & tcp::FIN != 0, i == 4, "FIN on segment {i}");
        }
    }

    #[test]
    fn needs_csum_on_a_single_packet_is_completed() {
        for v6 in [false, true] {
            let pl = pattern(333);
            let t = Tcp {
                v6,
                payload: &pl,
                ..Tcp::default()
            };
            let p = tcp_packet(&t, true);
            let ip_len = if v6 { 40 } else { 20 };
            let hdr = VirtioNetHdr {
                flags: F_NEEDS_CSUM,
                csum_start: ip_len,
                csum_offset: 16,
                ..VirtioNetHdr::default()
            };
            let mut b = hdr.to_bytes().to_vec();
            b.extend_from_slice(&p);
            let TunRead::Packet(out) = split_tun_read(&mut b).unwrap() else {
                panic!("not a single packet");
            };
            assert!(l4_ok(out));
            assert_eq!(out, &tcp_packet(&t, false)[..]);
        }
        // The checksum field must lie inside the packet.
        let mut b = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..VirtioNetHdr::default()
        }
        .to_bytes()
        .to_vec();
        b.extend_from_slice(&[0x45; 37]);
        assert!(matches!(
            split_tun_read(&mut b),
            Err(OffloadError::Malformed(_))
        ));
    }

    /// A UDP super-packet (USO) as the TUN gives it.
    fn uso_read(v6: bool, payload: &[u8], gso_size: u16) -> Vec<u8> {
        let mut p = Vec::new();
        let ulen = 8 + payload.len();
        if v6 {
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&(ulen as u16).to_be_bytes());
            p.extend_from_slice(&[PROTO_UDP, 64]);
            p.extend_from_slice(&SRC6);
            p.extend_from_slice(&DST6);
        } else {
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&((20 + ulen) as u16).to_be_bytes());
            p.extend_from_slice(&[0, 9, 0, 0, 64, PROTO_UDP, 0, 0]);
            p.extend_from_slice(&SRC4);
            p.extend_from_slice(&DST4);
            ipv4_header_checksum(&mut p[..20]);
        }
        let ip_len = p.len();
        p.extend_from_slice(&[0x13, 0x88, 0x14, 0x51]);
        p.extend_from_slice(&(ulen as u16).to_be_bytes());
        let partial = fold(pseudo_sum(addrs(&p, v6), PROTO_UDP, ulen));
        p.extend_from_slice(&partial.to_be_bytes());
        p.extend_from_slice(payload);
        let hdr = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: (ip_len + 8) as u16,
            gso_size,
            csum_start: ip_len as u16,
            csum_offset: 6,
        };
        let mut b = hdr.to_bytes().to_vec();
        b.extend_from_slice(&p);
        b
    }

    #[test]
    fn uso_is_cut_into_datagrams() {
        for v6 in [false, true] {
            let payload = pattern(1400 * 10 + 7);
            let mut read = uso_read(v6, &payload, 1400);
            let lens: Vec<usize> = match split_tun_read(&mut read.clone()) {
                Ok(TunRead::Gso(s)) => (0..=s.count()).map(|i| s.segment_len(i)).collect(),
                other => panic!("not a super-packet: {other:?}"),
            };
            let segs = segments(&mut read);
            assert_eq!(segs.len(), 11);
            let cut: Vec<usize> = segs.iter().map(Vec::len).chain([0]).collect();
            assert_eq!(lens, cut, "segment_len, then 0 past the last");
            let ip_len = if v6 { 40 } else { 20 };
            let mut joined = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let len = if i == 10 { 7 } else { 1400 };
                assert_eq!(s.len(), ip_len + 8 + len);
                assert_eq!(get16(s, ip_len + 4..ip_len + 6) as usize, 8 + len);
                assert!(ip_ok(s) && l4_ok(s), "v6 {v6} datagram {i}");
                if !v6 {
                    assert_eq!(get16(s, ipv4::IDENT), 9 + i as u16);
                }
                joined.extend_from_slice(&s[ip_len + 8..]);
            }
            assert_eq!(joined, payload);
        }
    }

    #[test]
    fn bad_gso_reads_are_errors_not_panics() {
        let pl = pattern(4000);
        let good = tso_read(
            &Tcp {
                payload: &pl,
                ..Tcp::default()
            },
            1448,
        );
        // Every truncation, and every single-byte corruption of the headers.
        for n in 0..good.len() {
            let mut b = good[..n].to_vec();
            if let Ok(TunRead::Gso(s)) = split_tun_read(&mut b) {
                let mut v = Vec::new();
                for i in 0..s.count() + 1 {
                    s.segment_into(i, &mut v);
                }
            }
        }
        for at in 0..(10 + 52) {
            for x in [0x01u8, 0x10, 0x80, 0xff] {
                let mut b = good.clone();
                b[at] ^= x;
                if let Ok(TunRead::Gso(s)) = split_tun_read(&mut b) {
                    let mut v = Vec::new();
                    for i in 0..s.count() {
                        s.segment_into(i, &mut v);
                    }
                }
            }
        }
        let mut ufo = good.clone();
        ufo[1] = GSO_UDP;
        assert!(matches!(
            split_tun_read(&mut ufo),
            Err(OffloadError::Unsupported(_))
        ));
        let mut v6hdr = good.clone();
        v6hdr[1] = GSO_TCPV6;
        assert!(matches!(
            split_tun_read(&mut v6hdr),
            Err(OffloadError::Malformed(_))
        ));
        let mut zero = good.clone();
        zero[4] = 0;
        zero[5] = 0;
        assert!(matches!(
            split_tun_read(&mut zero),
            Err(OffloadError::Malformed(_))
        ));
    }
}
