//! `struct virtio_net_hdr`, which starts every TUN read and write with
//! IFF_VNET_HDR (virtio 1.x section 5.1.6; include/uapi/linux/virtio_net.h):
//! its layout, its flags and GSO types, how many wire packets a super-packet
//! carries, and the error a read that makes no sense gives. The driver's
//! offloads read and write it; a codec that takes super-packets whole
//! (`Codec::takes_super_packets`) finds it at the start of every buffer.
//!
//! ```text
//!  0               1               2               3
//!  0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//! +---------------+---------------+-------------------------------+
//! |     flags     |   gso_type    |            hdr_len            |
//! +---------------+---------------+-------------------------------+
//! |            gso_size           |           csum_start          |
//! +-------------------------------+-------------------------------+
//! |          csum_offset          |
//! +-------------------------------+
//! ```
//! The 16-bit fields are in the device's byte order, which for a TUN left in its
//! legacy mode (no TUNSETVNETLE/BE) is the host's.

use std::ops::Range;

/// Bytes of `struct virtio_net_hdr`.
pub const VNET_HDR_LEN: usize = 10;

mod field {
    use std::ops::Range;
    pub const FLAGS: usize = 0;
    pub const GSO_TYPE: usize = 1;
    pub const HDR_LEN: Range<usize> = 2..4;
    pub const GSO_SIZE: Range<usize> = 4..6;
    pub const CSUM_START: Range<usize> = 6..8;
    pub const CSUM_OFFSET: Range<usize> = 8..10;
}

/// `flags`: the checksum from `csum_start` on is still to be computed (the
/// field holds the pseudo-header sum; the sum over `csum_start..` goes at
/// `csum_start + csum_offset`). On a packet written into the TUN the kernel
/// takes it as CHECKSUM_PARTIAL: checked locally, never again.
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksum has been verified (only meaningful towards the kernel).
pub const F_DATA_VALID: u8 = 2;

pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
/// Added to a TCP `gso_type` when the super-packet carries ECN CWR (TUN_F_TSO_ECN).
pub const GSO_ECN: u8 = 0x80;

/// Why a read from the TUN could not be turned into packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// Shorter than the virtio header, an IP header, or what the header promises.
    Truncated,
    /// A field that contradicts another (IP version vs GSO type, checksum offset
    /// outside the packet, TCP data offset under 20).
    Malformed(&'static str),
    /// A GSO type this code does not segment (UFO).
    Unsupported(&'static str),
}

impl std::fmt::Display for OffloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            OffloadError::Truncated => f.write_str("truncated TUN packet"),
            OffloadError::Malformed(what) => write!(f, "malformed TUN packet: {what}"),
            OffloadError::Unsupported(what) => write!(f, "unsupported TUN offload: {what}"),
        }
    }
}

impl std::error::Error for OffloadError {}

fn ne16(b: &[u8], r: Range<usize>) -> u16 {
    u16::from_ne_bytes([b[r.start], b[r.start + 1]])
}

/// `struct virtio_net_hdr`, as meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VirtioNetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Bytes of headers (IP + transport) before the payload that `gso_size` cuts.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the checksummed area starts: the transport header.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`: 16 for TCP, 6 for UDP.
    pub csum_offset: u16,
}

impl VirtioNetHdr {
    pub fn parse(buf: &[u8]) -> Result<VirtioNetHdr, OffloadError> {
        if buf.len() < VNET_HDR_LEN {
            return Err(OffloadError::Truncated);
        }
        Ok(VirtioNetHdr {
            flags: buf[field::FLAGS],
            gso_type: buf[field::GSO_TYPE],
            hdr_len: ne16(buf, field::HDR_LEN),
            gso_size: ne16(buf, field::GSO_SIZE),
            csum_start: ne16(buf, field::CSUM_START),
            csum_offset: ne16(buf, field::CSUM_OFFSET),
        })
    }

    /// Writes the 10 bytes at the start of `buf`, which must hold them.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::FLAGS] = self.flags;
        buf[field::GSO_TYPE] = self.gso_type;
        buf[field::HDR_LEN].copy_from_slice(&self.hdr_len.to_ne_bytes());
        buf[field::GSO_SIZE].copy_from_slice(&self.gso_size.to_ne_bytes());
        buf[field::CSUM_START].copy_from_slice(&self.csum_start.to_ne_bytes());
        buf[field::CSUM_OFFSET].copy_from_slice(&self.csum_offset.to_ne_bytes());
    }

    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0; VNET_HDR_LEN];
        self.emit(&mut b);
        b
    }

    /// Whether the packet behind it is a TSO/USO super-packet.
    pub fn is_gso(&self) -> bool {
        self.gso_type != GSO_NONE
    }

    /// The wire packets (frames) `packet`, the IP packet behind this header,
    /// stands for: 1 for a plain packet; for a super-packet, its payload past
    /// the transport header in `gso_size` pieces, the last one shorter. None
    /// when the header does not fit the packet.
    pub fn frames(&self, packet: &[u8]) -> Option<usize> {
        if !self.is_gso() {
            return Some(1);
        }
        let l4 = usize::from(self.csum_start);
        let l4_header = match self.gso_type & !GSO_ECN {
            GSO_TCPV4 | GSO_TCPV6 => usize::from(packet.get(l4 + 12)? >> 4) * 4,
            GSO_UDP_L4 => 8,
            _ => return None,
        };
        let payload = packet.len().checked_sub(l4 + l4_header)?;
        match usize::from(self.gso_size) {
            0 => None,
            size => Some(payload.div_ceil(size).max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtio_header_golden() {
        // A TSO IPv4 super-packet's header as the kernel writes it on x86-64.
        #[rustfmt::skip]
        let golden: [u8; 10] = [
            0x01,       // flags: NEEDS_CSUM
            0x01,       // gso_type: TCPV4
            0x42, 0x00, // hdr_len 66 (20 IP + 32 TCP... as given, not trusted)
            0xa8, 0x05, // gso_size 1448
            0x14, 0x00, // csum_start 20
            0x10, 0x00, // csum_offset 16
        ];
        let hdr = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        if cfg!(target_endian = "little") {
            assert_eq!(VirtioNetHdr::parse(&golden), Ok(hdr));
            assert_eq!(hdr.to_bytes(), golden);
        }
        assert_eq!(VirtioNetHdr::parse(&hdr.to_bytes()), Ok(hdr));
        for n in 0..VNET_HDR_LEN {
            assert_eq!(
                VirtioNetHdr::parse(&golden[..n]),
                Err(OffloadError::Truncated)
            );
        }
    }

    #[test]
    fn a_super_packet_stands_for_its_payload_in_gso_size_pieces() {
        // IPv4 (20) + TCP with options (32) + 3000 bytes of payload.
        let mut p = vec![0u8; 20 + 32 + 3000];
        p[20 + 12] = 8 << 4;
        let tso = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        assert_eq!(tso.frames(&p), Some(3), "1448 + 1448 + 104");
        let uso = VirtioNetHdr {
            gso_type: GSO_UDP_L4,
            gso_size: 1000,
            csum_offset: 6,
            ..tso
        };
        assert_eq!(uso.frames(&p), Some(4), "3024 bytes past the UDP header");
        assert_eq!(VirtioNetHdr::default().frames(&p), Some(1));
        assert_eq!(VirtioNetHdr { gso_size: 0, ..tso }.frames(&p), None);
        assert_eq!(tso.frames(&p[..40]), None, "no room for the TCP header");
        let ufo = VirtioNetHdr {
            gso_type: GSO_UDP,
            ..tso
        };
        assert_eq!(ufo.frames(&p), None);
    }
}
