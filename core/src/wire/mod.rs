//! Packet formats, one file each, in the smoltcp style: a `Packet` view over a
//! buffer with checked construction for received bytes, and a `Repr` that parses
//! and emits without allocating.

pub mod esp;
pub mod icmp_echo;
pub mod icmpv4_error;
pub mod iperf_udp;
pub mod ipv4;
pub mod ipv6;
pub mod l2tp;
pub mod probe;
pub mod udp;

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
    !sum(data)
}

/// The ones'-complement sum (RFC 1071) of `data` as big-endian 16-bit words, an
/// odd last byte padded with zero, folded to 16 bits but not complemented. Sums of
/// parts add up (then [`fold`]) to the sum of the whole when every part but the
/// last has an even length.
pub fn sum(data: &[u8]) -> u16 {
    // Native-endian 32-bit words into a 64-bit accumulator: no carries to track
    // below 2^32 words, and LLVM turns the loop into vector adds. The ones'-
    // complement sum does not depend on byte order (RFC 1071 section 2(B)), so the
    // native-order result only needs its two bytes swapped on a little-endian host.
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc += u32::from_ne_bytes(tail) as u64;
    u16::from_be(fold(acc))
}

/// Folds a sum of 16-bit words to 16 bits with end-around carry.
pub fn fold(mut s: u64) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}
