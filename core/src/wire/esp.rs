//! ESP (RFC 4303) with an 8-byte explicit IV and a 16-byte ICV, as AES-GCM
//! (RFC 4106) uses it.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               Security Parameters Index (SPI)                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Sequence Number                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                     IV (8 bytes, sent)                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |   payload (encrypted) ...     |  Padding 1,2,3..| Pad | Next  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 ICV (16 bytes, the GCM tag)                   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! The padding makes payload + padding + 2 a multiple of 4 (GCM needs no
//! block alignment). In UDP encapsulation (RFC 3948) the same bytes follow a
//! UDP header on port 4500; a datagram that starts with four zero bytes is IKE
//! (non-ESP marker) and a single 0xFF byte is a NAT keepalive.

use super::{Error, Result};

pub const SPI: std::ops::Range<usize> = 0..4;
pub const SEQ: std::ops::Range<usize> = 4..8;
pub const IV: std::ops::Range<usize> = 8..16;
/// SPI, sequence number and IV.
pub const HEADER_LEN: usize = 16;
pub const ICV_LEN: usize = 16;
/// Pad length and next header.
pub const TRAILER_LEN: usize = 2;
/// The shortest valid packet: a header, an empty payload padded to 4 with
/// its trailer, and the ICV.
pub const MIN_LEN: usize = HEADER_LEN + 4 + ICV_LEN;

/// Next header values an ESP tunnel carries.
pub const NEXT_IPV4: u8 = 4;
pub const NEXT_IPV6: u8 = 41;
pub const NEXT_UDP: u8 = 17;
/// A dummy packet (RFC 4303 2.6): dropped by the receiver.
pub const NEXT_NONE: u8 = 59;

/// What RFC 3948 says a UDP-encapsulated datagram on port 4500 is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encapsulated {
    Esp,
    /// Starts with the four-byte non-ESP marker: an IKE message.
    Ike,
    /// One 0xFF byte.
    NatKeepalive,
}

pub fn classify_udp(payload: &[u8]) -> Encapsulated {
    if payload == [0xff] {
        Encapsulated::NatKeepalive
    } else if payload.len() >= 4 && payload[..4] == [0, 0, 0, 0] {
        Encapsulated::Ike
    } else {
        Encapsulated::Esp
    }
}

/// A received ESP packet, checked for length and a nonzero SPI.
#[derive(Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        if b.len() < MIN_LEN {
            return Err(Error::Truncated);
        }
        // The encrypted part (payload, padding, trailer) is a whole number of
        // 4-byte words (RFC 4303 2.4).
        if (b.len() - HEADER_LEN - ICV_LEN) % 4 != 0 {
            return Err(Error::Malformed);
        }
        if b[SPI] == [0, 0, 0, 0] {
            return Err(Error::Malformed);
        }
        Ok(Packet { buffer })
    }

    pub fn spi(&self) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[SPI].try_into().expect("4 bytes"))
    }

    pub fn sequence(&self) -> u32 {
        u32::from_be_bytes(self.buffer.as_ref()[SEQ].try_into().expect("4 bytes"))
    }

    pub fn iv(&self) -> [u8; 8] {
        self.buffer.as_ref()[IV].try_into().expect("8 bytes")
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// Padding bytes for a payload of `len` bytes.
pub fn pad_len(len: usize) -> usize {
    (4 - (len + TRAILER_LEN) % 4) % 4
}

/// Writes the header, the payload, padding and trailer into `out` (cleared
/// first), leaving room for the ICV at the end (zeroed). The caller encrypts
/// `out[HEADER_LEN..len - ICV_LEN]` and writes the tag.
pub fn emit(out: &mut Vec<u8>, spi: u32, seq: u32, iv: [u8; 8], payload: &[u8], next: u8) {
    emit_parts(out, spi, seq, iv, &[payload], next)
}

/// `emit` with the payload in parts (a header made apart from its body),
/// written one after the other.
pub fn emit_parts(out: &mut Vec<u8>, spi: u32, seq: u32, iv: [u8; 8], parts: &[&[u8]], next: u8) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let pad = pad_len(len);
    out.clear();
    out.reserve(HEADER_LEN + len + pad + TRAILER_LEN + ICV_LEN);
    out.extend_from_slice(&spi.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&iv);
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend(1..=pad as u8);
    out.push(pad as u8);
    out.push(next);
    out.extend_from_slice(&[0; ICV_LEN]);
}

/// The decrypted part (payload, padding, trailer) -> (payload length, next
/// header). Padding must be 1, 2, 3, ... (RFC 4303 2.4): a packet padded
/// otherwise is dropped as malformed.
pub fn parse_trailer(plain: &[u8]) -> Result<(usize, u8)> {
    if plain.len() < TRAILER_LEN {
        return Err(Error::Truncated);
    }
    let next = plain[plain.len() - 1];
    let pad = plain[plain.len() - 2] as usize;
    if pad + TRAILER_LEN > plain.len() {
        return Err(Error::Malformed);
    }
    let len = plain.len() - TRAILER_LEN - pad;
    if plain[len..len + pad]
        .iter()
        .enumerate()
        .any(|(i, &b)| b as usize != i + 1)
    {
        return Err(Error::Malformed);
    }
    Ok((len, next))
}

/// The fuzz target's entry point (fuzz/fuzz_targets/wire_esp.rs): any bytes,
/// as a UDP payload and as ESP; a checked view's fields and trailer parse
/// without panicking, and a trailer's payload lies inside it.
pub fn fuzz(data: &[u8]) {
    let _ = classify_udp(data);
    if let Ok(p) = Packet::new_checked(data) {
        let _ = (p.spi(), p.sequence(), p.iv());
        let enc = &data[HEADER_LEN..data.len() - ICV_LEN];
        if let Ok((len, _)) = parse_trailer(enc) {
            assert!(len + TRAILER_LEN <= enc.len());
        }
    }
    if let Ok((len, _)) = parse_trailer(data) {
        assert!(len + TRAILER_LEN <= data.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_pads_to_four_and_parses_back() {
        for len in 0..9 {
            let payload: Vec<u8> = (0..len as u8).collect();
            let mut out = Vec::new();
            emit(&mut out, 0x1000, 7, [9; 8], &payload, NEXT_IPV4);
            let enc = out.len() - HEADER_LEN - ICV_LEN;
            assert_eq!(enc % 4, 0, "len {len}");
            let p = Packet::new_checked(&out[..]).unwrap();
            assert_eq!((p.spi(), p.sequence(), p.iv()), (0x1000, 7, [9; 8]));
            let (n, next) = parse_trailer(&out[HEADER_LEN..out.len() - ICV_LEN]).unwrap();
            assert_eq!((n, next), (len, NEXT_IPV4));
            assert_eq!(&out[HEADER_LEN..HEADER_LEN + n], &payload[..]);
        }
    }

    #[test]
    fn golden_layout() {
        let mut out = Vec::new();
        emit(&mut out, 0x01020304, 1, [0xaa; 8], &[0x45], NEXT_IPV4);
        assert_eq!(
            out[..HEADER_LEN + 4],
            [
                1, 2, 3, 4, 0, 0, 0, 1, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0x45, 1, 1,
                4
            ]
        );
    }

    #[test]
    fn bad_packets_are_named() {
        assert_eq!(
            Packet::new_checked(&[1u8; 35][..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&[1u8; 37][..]).unwrap_err(),
            Error::Malformed
        );
        let mut zero_spi = [1u8; 36];
        zero_spi[..4].copy_from_slice(&[0; 4]);
        assert_eq!(
            Packet::new_checked(&zero_spi[..]).unwrap_err(),
            Error::Malformed
        );
        // Padding 1, 2, 9: wrong.
        assert_eq!(
            parse_trailer(&[0x45, 1, 2, 9, 3, 4]).unwrap_err(),
            Error::Malformed
        );
        // A pad length longer than what there is.
        assert_eq!(parse_trailer(&[9, 4]).unwrap_err(), Error::Malformed);
        assert_eq!(parse_trailer(&[4]).unwrap_err(), Error::Truncated);
        assert_eq!(classify_udp(&[0xff]), Encapsulated::NatKeepalive);
        assert_eq!(classify_udp(&[0, 0, 0, 0, 1]), Encapsulated::Ike);
        assert_eq!(classify_udp(&[0, 0, 16, 0, 1]), Encapsulated::Esp);
    }
}
