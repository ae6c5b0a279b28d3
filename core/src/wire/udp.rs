//! The UDP header (RFC 768), for datagrams tunbench builds itself: the L2TP
//! datagrams that ESP transport mode protects (RFC 3193).
//!
//! ```text
//!  0      7 8     15 16    23 24    31
//! +--------+--------+--------+--------+
//! |   Source Port   |   Dest. Port    |
//! +--------+--------+--------+--------+
//! |     Length      |    Checksum     |
//! +--------+--------+--------+--------+
//! ```
//! The checksum covers a pseudo-header of the outer addresses (RFC 768 for
//! IPv4, RFC 8200 8.1 for IPv6, where it is mandatory).

use super::{Error, Result, fold, sum};
use std::net::IpAddr;
use std::ops::Range;

pub const HEADER_LEN: usize = 8;
pub const PROTOCOL: u8 = 17;

/// Appends a UDP header and `payload` to `out`, checksummed for a datagram
/// from `src` to `dst`.
pub fn emit(out: &mut Vec<u8>, src: (IpAddr, u16), dst: (IpAddr, u16), payload: &[u8]) {
    out.extend_from_slice(&header(src, dst, payload));
    out.extend_from_slice(payload);
}

/// The UDP header of a datagram from `src` to `dst` carrying `payload`.
pub fn header(src: (IpAddr, u16), dst: (IpAddr, u16), payload: &[u8]) -> [u8; HEADER_LEN] {
    let len = (HEADER_LEN + payload.len()) as u16;
    let mut h = [0u8; HEADER_LEN];
    h[0..2].copy_from_slice(&src.1.to_be_bytes());
    h[2..4].copy_from_slice(&dst.1.to_be_bytes());
    h[4..6].copy_from_slice(&len.to_be_bytes());
    let pseudo = match (src.0, dst.0) {
        (IpAddr::V4(s), IpAddr::V4(d)) => sum(&s.octets()) as u64 + sum(&d.octets()) as u64,
        (s, d) => sum(&v6_bytes(s)) as u64 + sum(&v6_bytes(d)) as u64,
    };
    let total = pseudo + PROTOCOL as u64 + len as u64 + sum(&h) as u64 + sum(payload) as u64;
    // 0 means "no checksum" in IPv4; a computed 0 goes out as all ones.
    let c = match !fold(total) {
        0 => 0xffff,
        c => c,
    };
    h[6..8].copy_from_slice(&c.to_be_bytes());
    h
}

fn v6_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V6(a) => a.octets(),
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
    }
}

/// The ports and the payload's range of one UDP datagram whose length field
/// must match its size. The checksum is not checked: the callers' datagrams
/// come out of ESP, whose ICV already vouches for every byte (RFC 3948 3.1.2).
pub fn parse(b: &[u8]) -> Result<(u16, u16, Range<usize>)> {
    if b.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let len = u16::from_be_bytes([b[4], b[5]]) as usize;
    if len < HEADER_LEN || len > b.len() {
        return Err(Error::Truncated);
    }
    if len != b.len() {
        return Err(Error::Malformed);
    }
    Ok((
        u16::from_be_bytes([b[0], b[1]]),
        u16::from_be_bytes([b[2], b[3]]),
        HEADER_LEN..len,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_ipv4_datagram() {
        // 198.18.0.1:1701 -> 198.18.0.2:1701, payload "abc": checksum worked
        // out by hand: pseudo c612+0001+c612+0002+0011+000b, header
        // 06a5+06a5+000b, payload 6162+6300 -> sum 0x25dfa -> 5dfc -> a203.
        let mut out = Vec::new();
        emit(
            &mut out,
            ("198.18.0.1".parse().unwrap(), 1701),
            ("198.18.0.2".parse().unwrap(), 1701),
            b"abc",
        );
        assert_eq!(
            out,
            [
                0x06, 0xa5, 0x06, 0xa5, 0x00, 0x0b, 0xa2, 0x03, b'a', b'b', b'c'
            ]
        );
        assert_eq!(parse(&out), Ok((1701, 1701, 8..11)));
    }

    #[test]
    fn ipv6_checksum_verifies() {
        let (s, d): (IpAddr, IpAddr) = ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap());
        let mut out = Vec::new();
        let payload: Vec<u8> = (0..=255u8).collect();
        emit(&mut out, (s, 1701), (d, 1701), &payload);
        // The sum over pseudo-header and datagram, checksum included, is all ones.
        let total = sum(&v6_bytes(s)) as u64
            + sum(&v6_bytes(d)) as u64
            + 17
            + out.len() as u64
            + sum(&out) as u64;
        assert_eq!(fold(total), 0xffff);
    }

    #[test]
    fn lying_lengths_are_refused() {
        let mut d = vec![0x06, 0xa5, 0x06, 0xa5, 0x00, 0x0b, 0, 0, 1, 2, 3];
        assert!(parse(&d[..7]).is_err());
        d[5] = 0x20;
        assert_eq!(parse(&d), Err(Error::Truncated));
        d[5] = 0x09;
        assert_eq!(parse(&d), Err(Error::Malformed));
        d[5] = 0x04;
        assert_eq!(parse(&d), Err(Error::Truncated));
    }
}
