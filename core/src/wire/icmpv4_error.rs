//! ICMPv4 error messages (RFC 792): destination unreachable (type 3) with the
//! next-hop MTU of "fragmentation needed and DF set" (code 4, RFC 1191 section 4),
//! source quench (4), redirect (5), time exceeded (11), parameter problem (12).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Unused              |         Next-Hop MTU          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Internet Header + 64 bits of Original Data Datagram      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! The second word is the next-hop MTU only for type 3 code 4; other errors use
//! it differently (the gateway of a redirect, the pointer of a parameter problem)
//! or leave it zero. The checksum covers the whole ICMP message.

use std::net::Ipv4Addr;

use super::ipv4::{self, protocol};
use super::{Error, Result, checksum};

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const REST: Range<usize> = 4..8;
    pub const NEXT_HOP_MTU: Range<usize> = 6..8;
    pub const DATA: usize = 8;
}

pub const HEADER_LEN: usize = field::DATA;

/// What RFC 792 asks an error to quote of the packet it reports: the IP header
/// and the first 64 bits of its payload (enough for the ports).
pub const QUOTED_PAYLOAD_LEN: usize = 8;

/// The longest packet `emit_packet` builds: an IPv4 header, the ICMP header, and a
/// quoted header of 60 bytes with its 8 bytes.
pub const MAX_PACKET_LEN: usize =
    ipv4::HEADER_LEN + HEADER_LEN + ipv4::MAX_HEADER_LEN + QUOTED_PAYLOAD_LEN;

pub const TYPE_DEST_UNREACHABLE: u8 = 3;
pub const TYPE_SOURCE_QUENCH: u8 = 4;
pub const TYPE_REDIRECT: u8 = 5;
pub const TYPE_TIME_EXCEEDED: u8 = 11;
pub const TYPE_PARAM_PROBLEM: u8 = 12;
pub const CODE_FRAG_NEEDED: u8 = 4;

/// ICMPv4 types that report an error about another packet (RFC 792, RFC 1122
/// section 3.2.2): these quote it.
pub fn is_error(msg_type: u8) -> bool {
    matches!(
        msg_type,
        TYPE_DEST_UNREACHABLE
            | TYPE_SOURCE_QUENCH
            | TYPE_REDIRECT
            | TYPE_TIME_EXCEEDED
            | TYPE_PARAM_PROBLEM
    )
}

/// ICMPv4 query types (echo, router advertisement and solicitation, timestamp,
/// information, address mask); anything else is an error or unknown.
fn is_query(msg_type: u8) -> bool {
    matches!(msg_type, 0 | 8 | 9 | 10 | 13..=18)
}

pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// The only constructor for received bytes: the 8-byte header is complete.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM.start], b[field::CHECKSUM.start + 1]])
    }
    /// The second word as a whole (unused, gateway, pointer, or unused + MTU).
    pub fn rest_of_header(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::REST];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Meaningful for type 3 code 4 only; 0 from a router older than RFC 1191.
    pub fn next_hop_mtu(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([
            b[field::NEXT_HOP_MTU.start],
            b[field::NEXT_HOP_MTU.start + 1],
        ])
    }
    /// The quoted part of the reported packet.
    pub fn quoted(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }
    pub fn verify_checksum(&self) -> bool {
        checksum(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v
    }
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_rest_of_header(&mut self, v: u32) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        self.buffer.as_mut()[field::NEXT_HOP_MTU].copy_from_slice(&v.to_be_bytes())
    }
    pub fn quoted_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum(self.buffer.as_ref());
        self.set_checksum(c)
    }
}

/// An ICMPv4 error's meaning. The quoted bytes are the caller's, copied by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub msg_type: u8,
    pub code: u8,
    /// The second word (see `Packet::rest_of_header`).
    pub rest_of_header: u32,
    pub quoted_len: usize,
}

impl Repr {
    /// "Fragmentation needed and DF set" with the MTU of the next hop (RFC 1191
    /// section 4).
    pub fn frag_needed(next_hop_mtu: u16, quoted_len: usize) -> Repr {
        Repr {
            msg_type: TYPE_DEST_UNREACHABLE,
            code: CODE_FRAG_NEEDED,
            rest_of_header: next_hop_mtu as u32,
            quoted_len,
        }
    }

    /// Error types only, with a right checksum; anything else is `Malformed`.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        if !is_error(p.msg_type()) || !p.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            msg_type: p.msg_type(),
            code: p.code(),
            rest_of_header: p.rest_of_header(),
            quoted_len: p.quoted().len(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.quoted_len
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>, quoted: &[u8]) {
        p.set_msg_type(self.msg_type);
        p.set_code(self.code);
        p.set_rest_of_header(self.rest_of_header);
        p.quoted_mut()[..self.quoted_len].copy_from_slice(&quoted[..self.quoted_len]);
        p.fill_checksum();
    }
}

/// How much of `original` (a view that passed `new_checked`) an error quotes: its
/// header with options and 8 bytes of payload, or less if the payload is shorter.
pub fn quote_len<T: AsRef<[u8]>>(original: &ipv4::Packet<T>) -> usize {
    original.header_len() + original.payload().len().min(QUOTED_PAYLOAD_LEN)
}

/// Whether a node may answer `original` (a view that passed `new_checked`) with an
/// ICMP error: never about an ICMP error (RFC 1122 section 3.2.2), a fragment
/// after the first, a broadcast or multicast destination, or a source that names
/// no single host (RFC 1812 section 4.3.2.7), so errors never answer errors and
/// never storm.
pub fn may_report<T: AsRef<[u8]>>(original: &ipv4::Packet<T>) -> bool {
    if original.frag_offset() != 0 {
        return false;
    }
    if original.protocol() == protocol::ICMP {
        match original.payload().first() {
            Some(&t) if is_query(t) => {}
            _ => return false,
        }
    }
    let (src, dst) = (original.src_addr(), original.dst_addr());
    let single_host = |a: Ipv4Addr| {
        !(a.is_unspecified() || a.is_broadcast() || a.is_multicast() || a.octets()[0] >= 240)
    };
    single_host(src) && !src.is_loopback() && !dst.is_broadcast() && !dst.is_multicast()
}

/// Builds in `buf` the whole IPv4 packet that reports `original` (a view that
/// passed `new_checked`) to its sender: from `src`, TTL 64, precedence
/// "internetwork control" (RFC 1812 section 4.3.2.5), DF clear, quoting the first
/// `repr.quoted_len` bytes of `original` (`quote_len` gives RFC 792's amount).
/// Returns its length, `ipv4::HEADER_LEN + repr.buffer_len()`. Panics if `buf` is
/// shorter or `original` holds fewer bytes than asked to quote.
pub fn emit_packet<T: AsRef<[u8]>>(
    repr: &Repr,
    original: &ipv4::Packet<T>,
    src: Ipv4Addr,
    ident: u16,
    buf: &mut [u8],
) -> usize {
    let ip = ipv4::Repr {
        src_addr: src,
        dst_addr: original.src_addr(),
        protocol: protocol::ICMP,
        payload_len: repr.buffer_len(),
        ttl: 64,
        dscp_ecn: 0xc0,
        ident,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    };
    let total = ip.buffer_len();
    let buf = &mut buf[..total];
    ip.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
    let quoted = &original.as_ref()[..repr.quoted_len];
    repr.emit(
        &mut Packet::new_unchecked(&mut buf[ipv4::HEADER_LEN..]),
        quoted,
    );
    total
}

/// The "fragmentation needed" packet about `original` (RFC 1191 section 4), as
/// `emit_packet` builds it; `buf` needs `MAX_PACKET_LEN` bytes at most.
pub fn emit_frag_needed<T: AsRef<[u8]>>(
    original: &ipv4::Packet<T>,
    next_hop_mtu: u16,
    src: Ipv4Addr,
    ident: u16,
    buf: &mut [u8],
) -> usize {
    let repr = Repr::frag_needed(next_hop_mtu, quote_len(original));
    emit_packet(&repr, original, src, ident, buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The first 28 bytes of a 1496-byte UDP datagram with DF set, from
    // 192.168.1.10:5000 to 203.0.113.5:53: what an error quotes of it.
    static ORIGINAL_HEAD: [u8; 28] = [
        0x45, 0x00, 0x05, 0xd8, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x1b, 0x17, //
        0xc0, 0xa8, 0x01, 0x0a, 0xcb, 0x00, 0x71, 0x05, //
        0x13, 0x88, 0x00, 0x35, 0x05, 0xc4, 0x00, 0x19,
    ];

    // The B4 (192.0.0.2) tells 192.168.1.10 that the tunnel takes 1460 bytes.
    static GOLDEN: [u8; 56] = [
        0x45, // version 4, IHL 5
        0xc0, // precedence 6 (internetwork control)
        0x00, 0x38, // total length 56
        0x00, 0x00, // identification
        0x00, 0x00, // DF clear
        0x40, // TTL 64
        0x01, // ICMP
        0xf8, 0x50, // header checksum
        0xc0, 0x00, 0x00, 0x02, // source 192.0.0.2
        0xc0, 0xa8, 0x01, 0x0a, // destination 192.168.1.10
        0x03, // type 3: destination unreachable
        0x04, // code 4: fragmentation needed and DF set
        0xdd, 0xad, // checksum
        0x00, 0x00, // unused
        0x05, 0xb4, // next-hop MTU 1460
        // the quoted header and 8 bytes
        0x45, 0x00, 0x05, 0xd8, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x1b, 0x17, //
        0xc0, 0xa8, 0x01, 0x0a, 0xcb, 0x00, 0x71, 0x05, //
        0x13, 0x88, 0x00, 0x35, 0x05, 0xc4, 0x00, 0x19,
    ];

    fn original() -> Vec<u8> {
        let mut o = vec![0u8; 1496];
        o[..28].copy_from_slice(&ORIGINAL_HEAD);
        o[28..32].copy_from_slice(b"tunb");
        o
    }

    #[test]
    fn emit_golden() {
        let o = original();
        let orig = ipv4::Packet::new_checked(&o[..]).unwrap();
        assert!(may_report(&orig));
        assert_eq!(quote_len(&orig), 28);
        let mut buf = [0u8; MAX_PACKET_LEN];
        let n = emit_frag_needed(&orig, 1460, Ipv4Addr::new(192, 0, 0, 2), 0, &mut buf);
        assert_eq!(&buf[..n], &GOLDEN[..]);
    }

    #[test]
    fn parse_golden() {
        let ip = ipv4::Packet::new_checked(&GOLDEN[..]).unwrap();
        assert!(ip.verify_checksum());
        let p = Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.msg_type(), 3);
        assert_eq!(p.code(), 4);
        assert_eq!(p.next_hop_mtu(), 1460);
        assert_eq!(p.quoted(), &ORIGINAL_HEAD[..]);
        assert_eq!(Repr::parse(&p), Ok(Repr::frag_needed(1460, 28)));
        // The quoted header still reads as a header.
        let q = ipv4::Packet::new_unchecked(p.quoted());
        assert_eq!(q.check_header_len(), Ok(()));
        assert_eq!(q.check_len(), Err(Error::Truncated));
        assert_eq!(q.dst_addr(), Ipv4Addr::new(203, 0, 113, 5));
    }

    #[test]
    fn every_truncation_rejected() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&GOLDEN[20..20 + n]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn parse_rejects_queries_and_bad_checksums() {
        let mut b = GOLDEN;
        b[40] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[20..]).unwrap()),
            Err(Error::Malformed)
        );
        let echo = [8u8, 0, 0xf7, 0xff, 0, 0, 0, 0];
        assert_eq!(
            Repr::parse(&Packet::new_checked(&echo[..]).unwrap()),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn short_payload_is_quoted_whole() {
        let mut o = ORIGINAL_HEAD[..24].to_vec();
        let mut p = ipv4::Packet::new_unchecked(&mut o[..]);
        p.set_total_len(24);
        p.fill_checksum();
        let orig = ipv4::Packet::new_checked(&o[..]).unwrap();
        assert_eq!(quote_len(&orig), 24);
        let mut buf = [0u8; MAX_PACKET_LEN];
        let n = emit_frag_needed(&orig, 1280, Ipv4Addr::new(192, 0, 0, 2), 7, &mut buf);
        assert_eq!(n, 20 + 8 + 24);
        let ip = ipv4::Packet::new_checked(&buf[..n]).unwrap();
        assert!(Packet::new_checked(ip.payload()).unwrap().verify_checksum());
    }

    #[test]
    fn no_error_about_errors_fragments_or_broadcast() {
        let mut err = GOLDEN;
        assert!(!may_report(&ipv4::Packet::new_checked(&err[..]).unwrap()));
        // An echo request may be reported.
        err[20] = 8;
        assert!(may_report(&ipv4::Packet::new_checked(&err[..]).unwrap()));
        let o = original();
        let mut frag = o.clone();
        ipv4::Packet::new_unchecked(&mut frag[..]).set_frag_offset(1480);
        assert!(!may_report(&ipv4::Packet::new_checked(&frag[..]).unwrap()));
        let mut bcast = o.clone();
        ipv4::Packet::new_unchecked(&mut bcast[..]).set_dst_addr(Ipv4Addr::BROADCAST);
        assert!(!may_report(&ipv4::Packet::new_checked(&bcast[..]).unwrap()));
        let mut mcast_src = o;
        ipv4::Packet::new_unchecked(&mut mcast_src[..]).set_src_addr(Ipv4Addr::new(224, 0, 0, 1));
        assert!(!may_report(
            &ipv4::Packet::new_checked(&mcast_src[..]).unwrap()
        ));
    }
}
