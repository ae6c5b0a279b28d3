//! The IPv6 fixed header (RFC 8200 section 3).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Traffic Class |           Flow Label                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                         Source Address                        +
//! |                          (128 bits)                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                      Destination Address                      +
//! |                          (128 bits)                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! The payload length counts what follows the fixed header, extension headers
//! included. DS-Lite (RFC 6333 section 5.2, RFC 2473) carries IPv4 with next
//! header 4. The userspace datapath receives only the payload from its raw socket;
//! this view serves tests, capture checks and fuzzing.

use std::net::Ipv6Addr;

use super::{Error, Result};

mod field {
    use std::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLOW_LABEL_MASK: u32 = 0x000f_ffff;

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view with no checks; accessors may panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// The only constructor for received bytes: the fixed header is complete,
    /// the version is 6 and the payload length lies within the buffer (trailing
    /// bytes are allowed).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if self.payload_len() as usize > len - HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn version(&self) -> u8 {
        (self.ver_tc_flow() >> 28) as u8
    }
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & FLOW_LABEL_MASK
    }
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }
    /// Traffic of the link it was sent on, which no router forwards (RFC 4291
    /// section 2.5.6): to or from fe80::/10, or to an interface- or link-local
    /// multicast group (router solicitations, MLD reports, DAD). The kernel
    /// sends such packets on every IPv6 device, a tunnel's TUN included.
    pub fn is_link_scope(&self) -> bool {
        let (src, dst) = (self.src_addr(), self.dst_addr());
        let link_local = |a: Ipv6Addr| a.segments()[0] & 0xffc0 == 0xfe80;
        let small_multicast = dst.is_multicast() && matches!(dst.octets()[1] & 0x0f, 1 | 2);
        link_local(src) || link_local(dst) || small_multicast
    }
    /// What the payload length covers; trailing bytes are not part of it.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_ver_tc_flow(&mut self, v: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_version(&mut self, v: u8) {
        let w = (self.ver_tc_flow() & 0x0fff_ffff) | ((v as u32 & 0xf) << 28);
        self.set_ver_tc_flow(w)
    }
    pub fn set_traffic_class(&mut self, v: u8) {
        let w = (self.ver_tc_flow() & 0xf00f_ffff) | ((v as u32) << 20);
        self.set_ver_tc_flow(w)
    }
    /// The low 20 bits of `v`.
    pub fn set_flow_label(&mut self, v: u32) {
        let w = (self.ver_tc_flow() & !FLOW_LABEL_MASK) | (v & FLOW_LABEL_MASK);
        self.set_ver_tc_flow(w)
    }
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v
    }
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets())
    }
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets())
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// An IPv6 fixed header's meaning (extension headers are payload here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    pub next_header: u8,
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: p.payload_len() as usize,
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header; the payload is the caller's. `payload_len` must fit
    /// 16 bits (no jumbograms, RFC 2675).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        debug_assert!(self.payload_len <= u16::MAX as usize);
        p.set_ver_tc_flow(0x6000_0000);
        p.set_traffic_class(self.traffic_class);
        p.set_flow_label(self.flow_label);
        p.set_payload_len(self.payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
    }
}

/// Fuzz entry point (fuzz target `wire_ipv6`, replayed by
/// tests/offline/fuzz_regressions.rs): no input panics and a parsed header emits back to
/// the same meaning and bytes.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let repr = Repr::parse(&p).expect("a checked view parses");
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut q = Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut q);
    q.payload_mut().copy_from_slice(p.payload());
    assert_eq!(&buf[..], &data[..repr.buffer_len()]);
    let back = Packet::new_checked(&buf[..]).expect("emitted header checks");
    assert_eq!(Repr::parse(&back), Ok(repr));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_scope_is_fe80_either_way_or_link_local_multicast() {
        let scope = |src: &str, dst: &str| {
            let mut b = [0u8; HEADER_LEN];
            let mut p = Packet::new_unchecked(&mut b[..]);
            p.set_version(6);
            p.set_src_addr(src.parse().unwrap());
            p.set_dst_addr(dst.parse().unwrap());
            Packet::new_unchecked(&b[..]).is_link_scope()
        };
        assert!(scope("fe80::1", "ff02::2"), "router solicitation");
        assert!(scope("fe80::1", "ff02::16"), "MLDv2 report");
        assert!(scope("::", "ff02::1:ff00:1"), "DAD neighbour solicitation");
        assert!(scope("::", "ff01::1"), "interface-local multicast");
        assert!(scope("2001:2::1", "fe80::2"), "to a link-local address");
        assert!(scope("febf::1", "2001:2::2"), "fe80::/10 reaches febf::");
        assert!(!scope("2001:2::1", "2001:2::2"), "global unicast");
        assert!(
            !scope("2001:2::1", "ff05::2"),
            "site-local multicast is routed"
        );
        assert!(!scope("2001:2::1", "ff0e::1"), "global multicast");
        assert!(
            !scope("fec0::1", "2001:2::2"),
            "fec0::/10 is not link-local"
        );
    }
    use crate::wire::ipv4::protocol;

    // A DS-Lite packet from B4 2001:db8:1::2 to AFTR 2001:db8::1 carrying a
    // 28-byte IPv4 ICMP echo request from 192.0.0.2 to 192.0.0.1.
    static GOLDEN: [u8; 68] = [
        0x6b, 0x81, 0x23, 0x45, // version 6, traffic class 0xb8, flow label 0x12345
        0x00, 0x1c, // payload length 28
        0x04, // next header: IPv4
        0x40, // hop limit 64
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00, // source 2001:db8:1::2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // destination 2001:db8::1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        // inner IPv4 header
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x01, 0xba, 0xdd, //
        0xc0, 0x00, 0x00, 0x02, 0xc0, 0x00, 0x00, 0x01, //
        // ICMP echo request, id 0x1234, seq 1
        0x08, 0x00, 0xe5, 0xca, 0x12, 0x34, 0x00, 0x01,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: "2001:db8:1::2".parse().unwrap(),
            dst_addr: "2001:db8::1".parse().unwrap(),
            next_header: protocol::IPV4,
            payload_len: 28,
            hop_limit: 64,
            traffic_class: 0xb8,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 28);
        assert_eq!(p.next_header(), 4);
        assert_eq!(p.payload(), &GOLDEN[40..]);
        assert_eq!(Repr::parse(&p), Ok(repr()));
        let inner = crate::wire::ipv4::Packet::new_checked(p.payload()).unwrap();
        assert!(inner.verify_checksum());
        assert_eq!(inner.src_addr(), std::net::Ipv4Addr::new(192, 0, 0, 2));
    }

    #[test]
    fn emit_golden() {
        let r = repr();
        assert_eq!(r.buffer_len(), 68);
        let mut buf = [0xffu8; 68];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        p.payload_mut().copy_from_slice(&GOLDEN[40..]);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn every_truncation_rejected() {
        for n in 0..GOLDEN.len() {
            assert_eq!(
                Packet::new_checked(&GOLDEN[..n]).err(),
                Some(Error::Truncated),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn wrong_version_and_trailing_bytes() {
        let mut v4 = GOLDEN;
        v4[0] = 0x4b;
        assert_eq!(Packet::new_checked(&v4[..]).err(), Some(Error::Malformed));
        let mut long = GOLDEN.to_vec();
        long.extend_from_slice(&[0; 8]);
        assert_eq!(
            Packet::new_checked(&long[..]).unwrap().payload(),
            &GOLDEN[40..]
        );
    }

    #[test]
    fn setters_keep_neighbouring_bits() {
        let mut b = GOLDEN;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_flow_label(0xfff_ffff);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0xf_ffff);
        p.set_traffic_class(0);
        assert_eq!(p.version(), 6);
        assert_eq!(p.flow_label(), 0xf_ffff);
    }

    #[test]
    fn fuzz_entry_accepts_golden_and_junk() {
        fuzz(&GOLDEN);
        fuzz(&[]);
        fuzz(&[0x60; 40]);
    }
}
