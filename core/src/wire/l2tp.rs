//! L2TPv2 data messages (RFC 2661 section 3.1) and the PPP frames they carry
//! (RFC 1661, HDLC-like framing of RFC 1662 without flags or FCS).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |T|L|x|x|S|x|O|P|x|x|x|x|  Ver  |          Length (opt)         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Tunnel ID           |           Session ID          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |             Ns (opt)          |             Nr (opt)          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      Offset Size (opt)        |    Offset pad... (opt)
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! T = 0 for data. tunbench sends 6 bytes of header (no L, no S), or 10 with
//! sequence numbers, then FF 03 and a two-byte PPP protocol: 0x0021 IPv4,
//! 0x0057 IPv6. It accepts what a peer may send besides: a length, an
//! offset, and PPP with address/control or protocol field compression.

use super::{Error, Result};

pub const PORT: u16 = 1701;
const T: u16 = 0x8000;
const L: u16 = 0x4000;
const S: u16 = 0x0800;
const O: u16 = 0x0200;
/// Bits that must be zero in a version-2 header.
const RESERVED: u16 = 0x3000 | 0x0400 | 0x00f0;
const VERSION: u16 = 2;

pub const PPP_IPV4: u16 = 0x0021;
pub const PPP_IPV6: u16 = 0x0057;

/// The header fields a data message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub tunnel: u16,
    pub session: u16,
    /// (Ns, Nr) when the S bit is set.
    pub sequence: Option<(u16, u16)>,
}

impl Header {
    pub fn len(&self) -> usize {
        if self.sequence.is_some() { 10 } else { 6 }
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Writes header + PPP framing + `payload` (an IP packet of PPP protocol
/// `proto`) into `out`, cleared first.
pub fn emit(out: &mut Vec<u8>, h: &Header, proto: u16, payload: &[u8]) {
    out.clear();
    out.reserve(h.len() + 4 + payload.len());
    let flags = if h.sequence.is_some() { S } else { 0 } | VERSION;
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&h.tunnel.to_be_bytes());
    out.extend_from_slice(&h.session.to_be_bytes());
    if let Some((ns, nr)) = h.sequence {
        out.extend_from_slice(&ns.to_be_bytes());
        out.extend_from_slice(&nr.to_be_bytes());
    }
    out.extend_from_slice(&[0xff, 0x03]);
    out.extend_from_slice(&proto.to_be_bytes());
    out.extend_from_slice(payload);
}

/// What a received datagram is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A data message: its header, the PPP protocol and where its payload is.
    Data {
        header: Header,
        proto: u16,
        payload: std::ops::Range<usize>,
    },
    /// A control message (T = 1): tunbench has no control channel.
    Control,
}

fn be16(b: &[u8], at: usize) -> Result<u16> {
    b.get(at..at + 2)
        .map(|x| u16::from_be_bytes([x[0], x[1]]))
        .ok_or(Error::Truncated)
}

/// Parses one L2TP datagram (the UDP payload).
pub fn parse(b: &[u8]) -> Result<Message> {
    let flags = be16(b, 0)?;
    if flags & 0x000f != VERSION || flags & RESERVED != 0 {
        return Err(Error::Malformed);
    }
    if flags & T != 0 {
        return Ok(Message::Control);
    }
    let mut at = 2;
    let mut end = b.len();
    if flags & L != 0 {
        let len = be16(b, at)? as usize;
        if len > b.len() || len < 8 {
            return Err(if len > b.len() {
                Error::Truncated
            } else {
                Error::Malformed
            });
        }
        end = len;
        at += 2;
    }
    let tunnel = be16(b, at)?;
    let session = be16(b, at + 2)?;
    at += 4;
    let sequence = if flags & S != 0 {
        let s = (be16(b, at)?, be16(b, at + 2)?);
        at += 4;
        Some(s)
    } else {
        None
    };
    if flags & O != 0 {
        let off = be16(b, at)? as usize;
        at += 2 + off;
    }
    if at > end {
        return Err(Error::Truncated);
    }
    // PPP: address and control may be left out (ACFC), the protocol may be
    // one byte when its value is odd (PFC).
    let ppp = &b[at..end];
    let mut p = 0;
    if ppp.len() >= 2 && ppp[..2] == [0xff, 0x03] {
        p = 2;
    }
    let first = *ppp.get(p).ok_or(Error::Truncated)?;
    let (proto, plen) = if first & 1 == 1 {
        (first as u16, 1)
    } else {
        (be16(ppp, p)?, 2)
    };
    let start = at + p + plen;
    Ok(Message::Data {
        header: Header {
            tunnel,
            session,
            sequence,
        },
        proto,
        payload: start..end,
    })
}

/// The fuzz target's entry point (fuzz/fuzz_targets/wire_l2tp.rs): any bytes
/// parse or are refused, and a data message's payload lies inside them.
pub fn fuzz(data: &[u8]) {
    if let Ok(Message::Data { payload, .. }) = parse(data) {
        assert!(payload.start <= payload.end && payload.end <= data.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_header_without_and_with_sequence() {
        let mut out = Vec::new();
        let h = Header {
            tunnel: 0x1234,
            session: 0x5678,
            sequence: None,
        };
        emit(&mut out, &h, PPP_IPV4, &[0x45]);
        assert_eq!(
            out,
            [
                0x00, 0x02, 0x12, 0x34, 0x56, 0x78, 0xff, 0x03, 0x00, 0x21, 0x45
            ]
        );
        assert_eq!(
            parse(&out).unwrap(),
            Message::Data {
                header: h,
                proto: PPP_IPV4,
                payload: 10..11
            }
        );
        let h = Header {
            sequence: Some((1, 0)),
            ..h
        };
        emit(&mut out, &h, PPP_IPV6, &[0x60]);
        assert_eq!(
            &out[..10],
            &[0x08, 0x02, 0x12, 0x34, 0x56, 0x78, 0, 1, 0, 0]
        );
        assert!(
            matches!(parse(&out).unwrap(), Message::Data { header, proto: PPP_IPV6, .. } if header == h)
        );
    }

    #[test]
    fn length_offset_and_compressed_ppp_are_understood() {
        // L set (length 12), offset 0, PPP without FF 03 and a one-byte protocol.
        let b = [0x42, 0x02, 0, 12, 0, 1, 0, 2, 0, 0, 0x21, 0x45, 0xee];
        let m = parse(&b).unwrap();
        assert_eq!(
            m,
            Message::Data {
                header: Header {
                    tunnel: 1,
                    session: 2,
                    sequence: None
                },
                proto: 0x21,
                payload: 11..12
            }
        );
        assert_eq!(parse(&[0xc8, 0x02, 0, 12]).unwrap(), Message::Control);
    }

    #[test]
    fn bad_headers_are_named() {
        assert_eq!(parse(&[0x00]).unwrap_err(), Error::Truncated);
        assert_eq!(
            parse(&[0x00, 0x03, 0, 1, 0, 2]).unwrap_err(),
            Error::Malformed,
            "version 3"
        );
        assert_eq!(
            parse(&[0x10, 0x02, 0, 1, 0, 2]).unwrap_err(),
            Error::Malformed,
            "reserved bit"
        );
        assert_eq!(parse(&[0x00, 0x02, 0, 1]).unwrap_err(), Error::Truncated);
        // A length that claims more than there is.
        assert_eq!(
            parse(&[0x40, 0x02, 0, 99, 0, 1, 0, 2]).unwrap_err(),
            Error::Truncated
        );
        // An offset past the end.
        assert_eq!(
            parse(&[0x02, 0x02, 0, 1, 0, 2, 0, 50]).unwrap_err(),
            Error::Truncated
        );
        // No PPP protocol at all.
        assert_eq!(
            parse(&[0x00, 0x02, 0, 1, 0, 2, 0xff, 0x03]).unwrap_err(),
            Error::Truncated
        );
    }
}
