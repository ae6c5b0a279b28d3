//! Where the fields lie in the IPv4, IPv6, TCP and UDP headers that
//! segmentation and coalescing rewrite, and big-endian reads and writes of them.

use std::ops::Range;

/// Largest IP packet (IPv4 total length; also our limit for IPv6).
pub(super) const MAX_IP_LEN: usize = 65535;

pub(super) mod ipv4 {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const ADDRS: Range<usize> = 12..20;
    pub const HEADER_LEN: usize = 20;
    /// More fragments, in the first byte of FLAGS_FRAG.
    pub const MF: u8 = 0x20;
    /// DF and the reserved bit.
    pub const DF_RESERVED: u8 = 0xc0;
}

pub(super) mod ipv6 {
    use std::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const ADDRS: Range<usize> = 8..40;
    pub const HEADER_LEN: usize = 40;
}

pub(super) mod tcp {
    use std::ops::Range;
    pub const PORTS: Range<usize> = 0..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high nibble) and the AE/reserved bits (low nibble).
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const HEADER_LEN: usize = 20;
    pub const FIN: u8 = 0x01;
    #[cfg(test)]
    pub const SYN: u8 = 0x02;
    pub const PSH: u8 = 0x08;
    pub const ACK_FLAG: u8 = 0x10;
    pub const CWR: u8 = 0x80;
}

pub(super) mod udp {
    use std::ops::Range;
    pub const LEN: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const HEADER_LEN: usize = 8;
}

pub(super) const PROTO_TCP: u8 = 6;
pub(super) const PROTO_UDP: u8 = 17;

pub(super) fn get16(b: &[u8], r: Range<usize>) -> u16 {
    u16::from_be_bytes([b[r.start], b[r.start + 1]])
}

pub(super) fn put16(b: &mut [u8], r: Range<usize>, v: u16) {
    b[r].copy_from_slice(&v.to_be_bytes());
}

pub(super) fn get32(b: &[u8], r: Range<usize>) -> u32 {
    u32::from_be_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}
