//! The IPv4 header (RFC 791 section 3.1), and the incremental checksum updates
//! (RFC 1624) a NAT44 needs when it rewrites addresses and ports (RFC 3022
//! section 4.2).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |   DSCP    |ECN|          Total Length         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Identification        |0|D|M|     Fragment Offset     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Source Address                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Destination Address                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Options (when IHL > 5)                     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! IHL counts 32-bit words (5..=15), the total length bytes of header and payload,
//! the fragment offset 8-byte units. D = don't fragment, M = more fragments.

use std::net::Ipv4Addr;
use std::ops::Range;

use super::{Error, Result, checksum};

mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// The header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;
/// IHL 15.
pub const MAX_HEADER_LEN: usize = 60;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// Assigned internet protocol numbers (IANA), shared by the IPv4 protocol field
/// and the IPv6 next header field.
pub mod protocol {
    pub const ICMP: u8 = 1;
    pub const IPV4: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6: u8 = 41;
    pub const ICMPV6: u8 = 58;
}

/// Byte offsets inside the upper-layer headers a NAT44 reads and rewrites
/// (TCP RFC 9293 section 3.1, UDP RFC 768, ICMP echo RFC 792).
pub mod l4 {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const TCP_DATA_OFF: usize = 12;
    pub const TCP_FLAGS: usize = 13;
    pub const TCP_CHECKSUM: Range<usize> = 16..18;
    pub const TCP_HEADER_LEN: usize = 20;
    pub const TCP_FLAG_SYN: u8 = 0x02;
    pub const TCP_FLAG_ACK: u8 = 0x10;
    pub const UDP_CHECKSUM: Range<usize> = 6..8;
    pub const UDP_HEADER_LEN: usize = 8;
    pub const ICMP_TYPE: usize = 0;
    pub const ICMP_CODE: usize = 1;
    pub const ICMP_CHECKSUM: Range<usize> = 2..4;
    pub const ICMP_IDENT: Range<usize> = 4..6;
    pub const ICMP_HEADER_LEN: usize = 8;
}

fn read_u16(b: &[u8], r: Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

fn read_addr(b: &[u8], r: Range<usize>) -> Ipv4Addr {
    Ipv4Addr::new(b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3])
}

#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view with no checks; accessors may panic on a short or inconsistent buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// The only constructor for received bytes. After it, every accessor is in
    /// bounds: the header with its options is complete and the total length lies
    /// within the buffer (trailing bytes beyond it are allowed, as after Ethernet
    /// padding).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// The checks `new_checked` makes: too short for what the header says is
    /// `Truncated`, a version, IHL or total length that cannot be is `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        self.check_header_len()?;
        let (len, header_len) = (self.buffer.as_ref().len(), self.header_len());
        let total_len = self.total_len() as usize;
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The header checks alone, for the header an ICMP error quotes (RFC 792: the
    /// header and 8 bytes, so the total length says more than is there). After it
    /// the header accessors are in bounds, `payload` is not.
    pub fn check_header_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < header_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// In bytes (IHL * 4).
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize * 4
    }
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }
    fn flags_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLG_OFF)
    }
    pub fn dont_frag(&self) -> bool {
        self.flags_offset() & FLAG_DF != 0
    }
    pub fn more_frags(&self) -> bool {
        self.flags_offset() & FLAG_MF != 0
    }
    /// In bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_offset() & FRAG_OFFSET_MASK) << 3
    }
    /// Part of a fragmented datagram (first, middle or last piece).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn src_addr(&self) -> Ipv4Addr {
        read_addr(self.buffer.as_ref(), field::SRC_ADDR)
    }
    pub fn dst_addr(&self) -> Ipv4Addr {
        read_addr(self.buffer.as_ref(), field::DST_ADDR)
    }
    /// The header checksum (RFC 791) over the header with its options is right.
    pub fn verify_checksum(&self) -> bool {
        checksum(&self.buffer.as_ref()[..self.header_len()]) == 0
    }
    /// The header (with options).
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// From the end of the header to the total length: trailing bytes are not part
    /// of it.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }
}

/// The whole buffer, trailing bytes included.
impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// Which end of a flow a NAT rewrite changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Source,
    Destination,
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (v << 4);
    }
    /// In bytes, a multiple of 4.
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v
    }
    pub fn set_total_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes())
    }
    fn set_flags_offset(&mut self, v: u16) {
        self.buffer.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes())
    }
    /// Clears DF, MF and the reserved bit.
    pub fn clear_flags(&mut self) {
        let v = self.flags_offset() & FRAG_OFFSET_MASK;
        self.set_flags_offset(v)
    }
    pub fn set_dont_frag(&mut self, on: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if on { v | FLAG_DF } else { v & !FLAG_DF })
    }
    pub fn set_more_frags(&mut self, on: bool) {
        let v = self.flags_offset();
        self.set_flags_offset(if on { v | FLAG_MF } else { v & !FLAG_MF })
    }
    /// In bytes, a multiple of 8.
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = (self.flags_offset() & !FRAG_OFFSET_MASK) | ((bytes >> 3) & FRAG_OFFSET_MASK);
        self.set_flags_offset(v)
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets())
    }
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets())
    }
    /// Computes the header checksum over the header with its options.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum(self.header());
        self.set_checksum(c)
    }
    pub fn header_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[..hl]
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[hl..tl]
    }

    /// The NAT44 rewrite (RFC 3022 section 4.2): set one end's address and its
    /// TCP/UDP port, or for ICMP the echo identifier (RFC 5508 section 3.1), and
    /// update the header checksum and the upper-layer checksum incrementally
    /// (RFC 1624 equation 3), so the cost does not grow with the payload and a
    /// first fragment is handled right. A UDP checksum of 0 (none, RFC 768) stays
    /// 0, and a computed 0 goes out as 0xffff.
    ///
    /// Needs a view that passed `new_checked`. A non-first fragment (no
    /// upper-layer header) or another protocol is `Malformed`, an upper-layer
    /// header shorter than its ports and checksum `Truncated`; then nothing
    /// changes.
    pub fn nat_rewrite(&mut self, end: Endpoint, addr: Ipv4Addr, port: u16) -> Result<()> {
        if self.frag_offset() != 0 {
            return Err(Error::Malformed);
        }
        let proto = self.protocol();
        let (port_at, csum_at, min_len, pseudo_header) = match (proto, end) {
            (protocol::TCP, Endpoint::Source) => (l4::SRC_PORT, l4::TCP_CHECKSUM, 20, true),
            (protocol::TCP, Endpoint::Destination) => (l4::DST_PORT, l4::TCP_CHECKSUM, 20, true),
            (protocol::UDP, Endpoint::Source) => (l4::SRC_PORT, l4::UDP_CHECKSUM, 8, true),
            (protocol::UDP, Endpoint::Destination) => (l4::DST_PORT, l4::UDP_CHECKSUM, 8, true),
            (protocol::ICMP, _) => (l4::ICMP_IDENT, l4::ICMP_CHECKSUM, 8, false),
            _ => return Err(Error::Malformed),
        };
        let (hl, tl) = (self.header_len(), self.total_len() as usize);
        if tl - hl < min_len {
            return Err(Error::Truncated);
        }
        let addr_at = match end {
            Endpoint::Source => field::SRC_ADDR,
            Endpoint::Destination => field::DST_ADDR,
        };
        let old_addr = read_addr(self.buffer.as_ref(), addr_at.clone());

        let mut addr_delta = ChecksumDelta::new();
        addr_delta.addr(old_addr, addr);
        let header_sum = addr_delta.apply(self.checksum());

        let upper = &mut self.buffer.as_mut()[hl..tl];
        let old_port = read_u16(upper, port_at.clone());
        let mut upper_delta = if pseudo_header {
            addr_delta
        } else {
            ChecksumDelta::new()
        };
        upper_delta.word(old_port, port);
        let old_sum = read_u16(upper, csum_at.clone());
        let new_sum = match proto {
            protocol::UDP if old_sum == 0 => 0,
            protocol::UDP => match upper_delta.apply(old_sum) {
                0 => 0xffff,
                s => s,
            },
            _ => upper_delta.apply(old_sum),
        };
        upper[port_at].copy_from_slice(&port.to_be_bytes());
        upper[csum_at.clone()].copy_from_slice(&new_sum.to_be_bytes());
        // Equation 3 yields 0x0000 where the words now sum to zero, but an all-zero
        // ICMP message (an echo reply with identifier, sequence and data 0) needs
        // 0xffff; only a full sum can tell. TCP and UDP never get here: the
        // pseudo-header's protocol is never zero.
        if proto == protocol::ICMP && new_sum == 0 {
            upper[csum_at.clone()].copy_from_slice(&[0, 0]);
            let full = checksum(upper);
            upper[csum_at].copy_from_slice(&full.to_be_bytes());
        }

        self.buffer.as_mut()[addr_at].copy_from_slice(&addr.octets());
        self.set_checksum(header_sum);
        Ok(())
    }
}

/// 32-bit accumulations fold through the wire's 64-bit `fold`.
fn fold(sum: u32) -> u16 {
    super::fold(sum as u64)
}

/// The checksum TCP and UDP use over the IPv4 pseudo-header (RFC 9293 section
/// 3.1, RFC 768) and `upper` (the whole segment with its checksum field): 0 for a
/// right one; with the checksum field zeroed, the value to put there.
pub fn upper_layer_checksum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, upper: &[u8]) -> u16 {
    let (s, d) = (src.octets(), dst.octets());
    let mut sum = super::sum(&s) as u32 + super::sum(&d) as u32;
    sum += protocol as u32;
    sum += (upper.len() as u32) & 0xffff;
    sum += (upper.len() as u32) >> 16;
    sum += super::sum(upper) as u32;
    !fold(sum)
}

/// The change a rewrite makes to a one's complement sum, accumulated over any
/// number of rewritten 16-bit words and applied to every checksum that covers
/// them: RFC 1624 equation 3, HC' = ~(~HC + ~m + m'), which never produces the
/// negative zero the older equation could.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChecksumDelta {
    sum: u32,
}

impl ChecksumDelta {
    pub const fn new() -> Self {
        ChecksumDelta { sum: 0 }
    }

    fn add(&mut self, v: u16) {
        self.sum = fold(self.sum + v as u32) as u32;
    }

    /// One 16-bit word went from `old` to `new`.
    pub fn word(&mut self, old: u16, new: u16) {
        self.add(!old);
        self.add(new);
    }

    /// An address (two words) went from `old` to `new`.
    pub fn addr(&mut self, old: Ipv4Addr, new: Ipv4Addr) {
        let (o, n) = (old.octets(), new.octets());
        self.word(
            u16::from_be_bytes([o[0], o[1]]),
            u16::from_be_bytes([n[0], n[1]]),
        );
        self.word(
            u16::from_be_bytes([o[2], o[3]]),
            u16::from_be_bytes([n[2], n[3]]),
        );
    }

    /// Writes `new` into `buf` at any byte offset `at` and accumulates the change,
    /// for a checksum whose words are aligned to the start of `buf` (a TCP option
    /// may sit at an odd offset). Panics if `at + new.len() > buf.len()`.
    pub fn rewrite(&mut self, buf: &mut [u8], at: usize, new: &[u8]) {
        let start = at & !1;
        let end = ((at + new.len() + 1) & !1).min(buf.len());
        let old = super::sum(&buf[start..end]);
        buf[at..at + new.len()].copy_from_slice(new);
        let new = super::sum(&buf[start..end]);
        self.add(!old);
        self.add(new);
    }

    /// The checksum field's new value.
    pub fn apply(&self, checksum: u16) -> u16 {
        !fold((!checksum) as u32 + self.sum)
    }
}

/// An IPv4 header's meaning. Options are skipped by `parse` and never emitted, so
/// `payload_len` is what follows the header in either case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    pub dscp_ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub more_frags: bool,
    /// In bytes.
    pub frag_offset: u16,
}

impl Repr {
    /// A header whose checksum is wrong is `Malformed` (RFC 1812 section 5.2.2:
    /// such a packet is dropped).
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if !p.verify_checksum() {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.payload().len(),
            ttl: p.ttl(),
            dscp_ecn: p.dscp_ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header (no options) with its checksum; the payload is the
    /// caller's. `buffer_len()` must fit the 16-bit total length.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        debug_assert!(self.buffer_len() <= u16::MAX as usize);
        p.set_version(4);
        p.set_header_len(HEADER_LEN);
        p.set_dscp_ecn(self.dscp_ecn);
        p.set_total_len(self.buffer_len() as u16);
        p.set_ident(self.ident);
        p.set_flags_offset(0);
        p.set_dont_frag(self.dont_frag);
        p.set_more_frags(self.more_frags);
        p.set_frag_offset(self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.fill_checksum();
    }
}

/// Whether the upper-layer checksum of an unfragmented TCP, UDP or ICMP packet is
/// right (a UDP checksum of 0 means none and counts as right); `None` for other
/// protocols, fragments, and payloads too short to hold the checksum.
pub fn verify_upper_checksum<T: AsRef<[u8]>>(p: &Packet<T>) -> Option<bool> {
    if p.is_fragment() {
        return None;
    }
    let upper = p.payload();
    match p.protocol() {
        protocol::TCP if upper.len() >= l4::TCP_HEADER_LEN => {
            Some(upper_layer_checksum(p.src_addr(), p.dst_addr(), protocol::TCP, upper) == 0)
        }
        protocol::UDP if upper.len() >= l4::UDP_HEADER_LEN => {
            if read_u16(upper, l4::UDP_CHECKSUM) == 0 {
                return Some(true);
            }
            Some(upper_layer_checksum(p.src_addr(), p.dst_addr(), protocol::UDP, upper) == 0)
        }
        protocol::ICMP if upper.len() >= l4::ICMP_HEADER_LEN => Some(checksum(upper) == 0),
        _ => None,
    }
}

/// Fuzz entry point (fuzz target `wire_ipv4`, replayed by
/// tests/offline/fuzz_regressions.rs): no input panics; a parsed header emits back to the
/// same meaning; a NAT rewrite keeps right checksums right.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.dscp_ecn(),
        p.ident(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.ttl(),
        p.checksum(),
        p.options().len(),
    );
    if let Ok(repr) = Repr::parse(&p) {
        let mut buf = vec![0u8; repr.buffer_len()];
        let mut q = Packet::new_unchecked(&mut buf[..]);
        repr.emit(&mut q);
        q.payload_mut().copy_from_slice(p.payload());
        let back = Packet::new_checked(&buf[..]).expect("emitted header checks");
        assert_eq!(Repr::parse(&back), Ok(repr));
        assert_eq!(back.payload(), p.payload());
    }
    let header_ok = p.verify_checksum();
    let upper_ok = verify_upper_checksum(&p);
    let mut copy = data.to_vec();
    let mut q = Packet::new_unchecked(&mut copy[..]);
    let new_addr = Ipv4Addr::new(198, 51, 100, data.len() as u8);
    for (end, port) in [(Endpoint::Source, 40000), (Endpoint::Destination, 1)] {
        if q.nat_rewrite(end, new_addr, port).is_ok() {
            assert_eq!(q.verify_checksum(), header_ok);
            if upper_ok == Some(true) {
                assert_eq!(verify_upper_checksum(&q), Some(true));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A UDP datagram from 192.168.1.10:5000 to 203.0.113.5:53 carrying "tunb".
    static GOLDEN: [u8; 32] = [
        0x45, // version 4, IHL 5
        0x00, // DSCP/ECN
        0x00, 0x20, // total length 32
        0x1c, 0x46, // identification
        0x40, 0x00, // DF, offset 0
        0x40, // TTL 64
        0x11, // protocol UDP
        0x20, 0xcf, // header checksum
        0xc0, 0xa8, 0x01, 0x0a, // source 192.168.1.10
        0xcb, 0x00, 0x71, 0x05, // destination 203.0.113.5
        0x13, 0x88, // UDP source port 5000
        0x00, 0x35, // UDP destination port 53
        0x00, 0x0c, // UDP length 12
        0x0b, 0x89, // UDP checksum
        b't', b'u', b'n', b'b',
    ];

    // The same after a NAT44 rewrote the source to 198.51.100.7:40000 (checksums
    // from a full recomputation).
    static GOLDEN_NATED: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, //
        0xb8, 0x46, // header checksum
        0xc6, 0x33, 0x64, 0x07, // source 198.51.100.7
        0xcb, 0x00, 0x71, 0x05, //
        0x9c, 0x40, // source port 40000
        0x00, 0x35, 0x00, 0x0c, //
        0x1a, 0x48, // UDP checksum
        b't', b'u', b'n', b'b',
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(192, 168, 1, 10),
            dst_addr: Ipv4Addr::new(203, 0, 113, 5),
            protocol: protocol::UDP,
            payload_len: 12,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0x1c46,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
    }

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 32);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.checksum(), 0x20cf);
        assert!(p.verify_checksum());
        assert_eq!(p.options(), &[] as &[u8]);
        assert_eq!(p.payload(), &GOLDEN[20..]);
        assert_eq!(Repr::parse(&p), Ok(repr()));
        assert_eq!(verify_upper_checksum(&p), Some(true));
    }

    #[test]
    fn emit_golden() {
        let r = repr();
        assert_eq!(r.buffer_len(), 32);
        let mut buf = [0xffu8; 32];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        r.emit(&mut p);
        p.payload_mut().copy_from_slice(&GOLDEN[20..]);
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
    fn trailing_bytes_are_not_payload() {
        let mut b = GOLDEN.to_vec();
        b.extend_from_slice(&[0, 0, 0, 0]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &GOLDEN[20..]);
    }

    #[test]
    fn malformed_headers_rejected() {
        let mut v6 = GOLDEN;
        v6[0] = 0x65;
        assert_eq!(Packet::new_checked(&v6[..]).err(), Some(Error::Malformed));
        let mut ihl4 = GOLDEN;
        ihl4[0] = 0x44;
        assert_eq!(Packet::new_checked(&ihl4[..]).err(), Some(Error::Malformed));
        let mut short_total = GOLDEN;
        short_total[3] = 19;
        assert_eq!(
            Packet::new_checked(&short_total[..]).err(),
            Some(Error::Malformed)
        );
        // Options the buffer does not hold.
        let mut ihl15 = GOLDEN;
        ihl15[0] = 0x4f;
        assert_eq!(
            Packet::new_checked(&ihl15[..]).err(),
            Some(Error::Truncated)
        );
        // A total length longer than the buffer.
        let mut long_total = GOLDEN;
        long_total[2] = 0xff;
        assert_eq!(
            Packet::new_checked(&long_total[..]).err(),
            Some(Error::Truncated)
        );
        let mut bad_sum = GOLDEN;
        bad_sum[11] ^= 1;
        let p = Packet::new_checked(&bad_sum[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn options_are_header() {
        // IHL 6: one 4-byte option (four NOPs).
        let mut b = [0u8; 24 + 12];
        b[..20].copy_from_slice(&GOLDEN[..20]);
        b[20..24].copy_from_slice(&[1, 1, 1, 1]);
        b[24..].copy_from_slice(&GOLDEN[20..]);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_header_len(24);
        p.set_total_len(36);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[1, 1, 1, 1]);
        assert_eq!(p.payload(), &GOLDEN[20..]);
        assert_eq!(Repr::parse(&p).unwrap().payload_len, 12);
        assert_eq!(verify_upper_checksum(&p), Some(true));
    }

    #[test]
    fn flags_and_fragment_offset() {
        let mut b = GOLDEN;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        assert!(!p.dont_frag() && p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
        assert_eq!(&b[6..8], &[0x20, 0xb9]);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.clear_flags();
        assert!(!p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 1480);
    }

    #[test]
    fn nat_rewrite_matches_full_recomputation() {
        let mut b = GOLDEN;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.nat_rewrite(Endpoint::Source, Ipv4Addr::new(198, 51, 100, 7), 40000)
            .unwrap();
        assert_eq!(b, GOLDEN_NATED);
        // And back again.
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.nat_rewrite(Endpoint::Source, Ipv4Addr::new(192, 168, 1, 10), 5000)
            .unwrap();
        assert_eq!(b, GOLDEN);
    }

    #[test]
    fn nat_rewrite_destination_and_zero_udp_checksum() {
        let mut b = GOLDEN;
        b[26] = 0;
        b[27] = 0;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.nat_rewrite(Endpoint::Destination, Ipv4Addr::new(10, 1, 2, 3), 5353)
            .unwrap();
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(&p.payload()[2..4], &5353u16.to_be_bytes());
        assert_eq!(&p.payload()[6..8], &[0, 0], "no checksum stays none");
        assert!(p.verify_checksum());
    }

    #[test]
    fn nat_rewrite_tcp_and_icmp() {
        // TCP SYN, no options, checksum filled in by full computation.
        let mut b = [0u8; 40];
        let mut r = repr();
        r.protocol = protocol::TCP;
        r.payload_len = 20;
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        b[20..22].copy_from_slice(&5000u16.to_be_bytes());
        b[22..24].copy_from_slice(&443u16.to_be_bytes());
        b[24..28].copy_from_slice(&0x01020304u32.to_be_bytes());
        b[32] = 0x50;
        b[33] = l4::TCP_FLAG_SYN;
        b[34..36].copy_from_slice(&64240u16.to_be_bytes());
        let c = upper_layer_checksum(r.src_addr, r.dst_addr, protocol::TCP, &b[20..]);
        b[36..38].copy_from_slice(&c.to_be_bytes());
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(verify_upper_checksum(&p), Some(true));
        p.nat_rewrite(Endpoint::Source, Ipv4Addr::new(198, 51, 100, 7), 1024)
            .unwrap();
        assert!(p.verify_checksum());
        assert_eq!(verify_upper_checksum(&p), Some(true));
        assert_eq!(&p.payload()[..2], &1024u16.to_be_bytes());

        // ICMP echo request: the identifier moves, no pseudo-header.
        let mut b = [0u8; 28];
        r.protocol = protocol::ICMP;
        r.payload_len = 8;
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        b[20] = 8;
        b[24..26].copy_from_slice(&0x1234u16.to_be_bytes());
        b[27] = 1;
        let c = checksum(&b[20..]);
        b[22..24].copy_from_slice(&c.to_be_bytes());
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.nat_rewrite(Endpoint::Source, Ipv4Addr::new(198, 51, 100, 7), 7)
            .unwrap();
        assert_eq!(verify_upper_checksum(&p), Some(true));
        assert_eq!(&p.payload()[4..6], &[0, 7]);
    }

    #[test]
    fn nat_rewrite_to_an_all_zero_icmp_message() {
        // Echo reply, identifier 7, sequence 0, no data; rewritten to identifier 0
        // it is all zero and its checksum must be 0xffff, not 0x0000.
        let mut b = [0u8; 28];
        let mut r = repr();
        r.protocol = protocol::ICMP;
        r.payload_len = 8;
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        b[25] = 7;
        let c = checksum(&b[20..]);
        b[22..24].copy_from_slice(&c.to_be_bytes());
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.nat_rewrite(Endpoint::Destination, Ipv4Addr::new(10, 0, 0, 1), 0)
            .unwrap();
        assert_eq!(&p.payload()[2..4], &[0xff, 0xff]);
        assert_eq!(verify_upper_checksum(&p), Some(true));
    }

    #[test]
    fn nat_rewrite_refuses_what_it_cannot_do() {
        let mut b = GOLDEN;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_frag_offset(8);
        assert_eq!(
            p.nat_rewrite(Endpoint::Source, Ipv4Addr::LOCALHOST, 1),
            Err(Error::Malformed)
        );
        p.set_frag_offset(0);
        p.set_protocol(47);
        assert_eq!(
            p.nat_rewrite(Endpoint::Source, Ipv4Addr::LOCALHOST, 1),
            Err(Error::Malformed)
        );
        p.set_protocol(protocol::TCP); // 12 bytes cannot hold a TCP header
        assert_eq!(
            p.nat_rewrite(Endpoint::Source, Ipv4Addr::LOCALHOST, 1),
            Err(Error::Truncated)
        );
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 1, 10));
    }

    #[test]
    fn checksum_delta_at_odd_offset() {
        let mut data: Vec<u8> = (0u8..24).collect();
        let before = checksum(&data);
        let mut d = ChecksumDelta::new();
        d.rewrite(&mut data, 7, &[0xab, 0xcd]);
        assert_eq!(d.apply(before), checksum(&data));
        // At the odd last byte.
        let mut data: Vec<u8> = (1u8..20).collect();
        let before = checksum(&data);
        let mut d = ChecksumDelta::new();
        d.rewrite(&mut data, 18, &[0x77]);
        assert_eq!(d.apply(before), checksum(&data));
    }

    #[test]
    fn fuzz_entry_accepts_golden_and_junk() {
        fuzz(&GOLDEN);
        fuzz(&GOLDEN_NATED);
        fuzz(&[]);
        fuzz(&[0x45; 64]);
    }
}
