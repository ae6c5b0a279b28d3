//! Packet formats, one file each, in the smoltcp style: a `Packet` view over a
//! buffer with checked construction for received bytes, and a `Repr` that parses
//! and emits without allocating.

pub mod icmp_echo;
pub mod icmpv4_error;
pub mod iperf_udp;
pub mod ipv4;
pub mod ipv6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Shorter than the header or than a length field says.
    Truncated,
    /// A field holds a value this format does not allow here.
    Malformed,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
        })
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The Internet checksum (RFC 1071) over `data`, folded and complemented.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
