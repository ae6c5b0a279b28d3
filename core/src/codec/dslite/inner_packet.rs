//! The inner IPv4 packet as both codecs get it, from the TUN or from the raw
//! socket: the whole-packet checks every packet passes first, and the field
//! reads the codecs share.

use crate::codec::DropReason;
use crate::wire;
use crate::wire::ipv4::{self, l4, protocol};

/// Checks a whole IPv4 packet as the TUN device or the raw socket hands it, and
/// cuts bytes beyond its total length. Both deliver whole packets, so a total
/// length beyond the buffer lies (`Malformed`), while a buffer too short for the
/// header is `Truncated`. A bad header checksum is `Malformed` (RFC 1812 section
/// 5.2.2). `ipv6` is the reason for an IPv6 packet where IPv4 belongs.
pub(super) fn check_ipv4(packet: &mut Vec<u8>, ipv6: DropReason) -> Result<(), DropReason> {
    let Some(&first) = packet.first() else {
        return Err(DropReason::Truncated);
    };
    match first >> 4 {
        4 => {}
        6 => return Err(ipv6),
        _ => return Err(DropReason::Malformed),
    }
    let p = ipv4::Packet::new_unchecked(&packet[..]);
    p.check_header_len().map_err(wire_drop)?;
    let total = p.total_len() as usize;
    if total < p.header_len() || total > packet.len() {
        return Err(DropReason::Malformed);
    }
    if !p.verify_checksum() {
        return Err(DropReason::Malformed);
    }
    packet.truncate(total);
    Ok(())
}

pub(super) fn wire_drop(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::Malformed => DropReason::Malformed,
    }
}

pub(super) fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The TCP or UDP port at `at` (source or destination), if the transport header
/// is all there.
pub(super) fn transport_port(proto: u8, upper: &[u8], at: usize) -> Option<u16> {
    let need = if proto == protocol::TCP {
        l4::TCP_HEADER_LEN
    } else {
        l4::UDP_HEADER_LEN
    };
    (upper.len() >= need).then(|| read_u16(upper, at))
}
