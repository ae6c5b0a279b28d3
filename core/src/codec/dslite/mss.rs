//! TCP MSS clamping (RFC 6333 section 5.3): SYNs through the softwire get
//! their MSS lowered to fit the inner MTU, so most flows never need ICMP
//! "fragmentation needed" or outer fragmentation.

use super::inner_packet::read_u16;
use crate::wire::ipv4::{self, ChecksumDelta, l4, protocol};

/// How a codec rewrites the MSS option of TCP SYNs (RFC 9293 section 3.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MssClamp {
    Off,
    /// The inner MTU minus 40 (IPv4 and TCP headers without options).
    FromMtu,
    Fixed(u16),
}

impl MssClamp {
    pub(super) fn value(self, inner_mtu: u16) -> Option<u16> {
        match self {
            MssClamp::Off => None,
            MssClamp::FromMtu => Some(inner_mtu.saturating_sub(40)),
            MssClamp::Fixed(v) => Some(v),
        }
    }
}

/// Lowers the MSS option of a TCP SYN or SYN-ACK to `clamp` and fixes the
/// checksum incrementally; true if it did. `packet` passed `check_ipv4`. Clamping
/// is what keeps TCP working when PMTUD through the tunnel does not (RFC 4459
/// section 3.2). A malformed option list is left alone: a forwarder does not
/// police TCP.
pub(super) fn clamp_mss(packet: &mut [u8], clamp: u16) -> bool {
    let p = ipv4::Packet::new_unchecked(&*packet);
    if p.protocol() != protocol::TCP || p.frag_offset() != 0 {
        return false;
    }
    let (hl, tl) = (p.header_len(), p.total_len() as usize);
    let tcp = &mut packet[hl..tl];
    if tcp.len() < l4::TCP_HEADER_LEN || tcp[l4::TCP_FLAGS] & l4::TCP_FLAG_SYN == 0 {
        return false;
    }
    let doff = (tcp[l4::TCP_DATA_OFF] >> 4) as usize * 4;
    if doff < l4::TCP_HEADER_LEN || doff > tcp.len() {
        return false;
    }
    const EOL: u8 = 0;
    const NOP: u8 = 1;
    const MSS: u8 = 2;
    let mut i = l4::TCP_HEADER_LEN;
    while i < doff {
        match tcp[i] {
            EOL => break,
            NOP => i += 1,
            kind => {
                if i + 1 >= doff {
                    break;
                }
                let len = tcp[i + 1] as usize;
                if len < 2 || i + len > doff {
                    break;
                }
                if kind == MSS && len == 4 {
                    if read_u16(tcp, i + 2) <= clamp {
                        return false;
                    }
                    let mut delta = ChecksumDelta::new();
                    delta.rewrite(&mut tcp[..doff], i + 2, &clamp.to_be_bytes());
                    let sum = delta.apply(read_u16(tcp, l4::TCP_CHECKSUM.start));
                    tcp[l4::TCP_CHECKSUM].copy_from_slice(&sum.to_be_bytes());
                    return true;
                }
                i += len;
            }
        }
    }
    false
}
