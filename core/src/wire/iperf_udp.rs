//! The iperf3 UDP datagram header, as iperf3 3.12 writes and reads it at the
//! head of every datagram of a UDP data stream (`iperf_udp_send` / `iperf_udp_recv`).
//!
//! With 32-bit counters (the default):
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Sent time, seconds                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Sent time, microseconds                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                        Packet counter                         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Filler ...
//! ```
//!
//! With 64-bit counters (the client sent `udp_counters_64bit` in its parameters):
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Sent time, seconds                       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Sent time, microseconds                    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Packet counter, high 32 bits                 |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                  Packet counter, low 32 bits                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Filler ...
//! ```
//!
//! All fields are big-endian. The time is the sender's CLOCK_MONOTONIC, so it means
//! nothing on its own at the receiver; only its changes do (jitter). The counter
//! starts at 1 on each stream. Nothing in the header says which width is in use: both
//! ends learn it from the parameters exchange, so every constructor takes `wide`.

use super::{Error, Result};

mod field {
    use std::ops::Range;
    pub const SEC: Range<usize> = 0..4;
    pub const USEC: Range<usize> = 4..8;
    pub const COUNTER_32: Range<usize> = 8..12;
    pub const COUNTER_64: Range<usize> = 8..16;
}

pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    wide: bool,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view with no length check; accessors panic on a short buffer.
    pub fn new_unchecked(buffer: T, wide: bool) -> Self {
        Packet { buffer, wide }
    }

    /// The only constructor for received bytes: the header for this counter width
    /// must be complete.
    pub fn new_checked(buffer: T, wide: bool) -> Result<Self> {
        let p = Packet::new_unchecked(buffer, wide);
        p.check_len()?;
        Ok(p)
    }

    fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < Repr::header_len(self.wide) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Whether this view reads a 64-bit counter.
    pub fn wide(&self) -> bool {
        self.wide
    }

    pub fn sec(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([
            b[field::SEC.start],
            b[field::SEC.start + 1],
            b[field::SEC.start + 2],
            b[field::SEC.start + 3],
        ])
    }

    pub fn usec(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([
            b[field::USEC.start],
            b[field::USEC.start + 1],
            b[field::USEC.start + 2],
            b[field::USEC.start + 3],
        ])
    }

    /// The packet counter, 32 or 64 bits wide as this view was built.
    pub fn counter(&self) -> u64 {
        let b = self.buffer.as_ref();
        if self.wide {
            let mut c = [0u8; 8];
            c.copy_from_slice(&b[field::COUNTER_64]);
            u64::from_be_bytes(c)
        } else {
            let mut c = [0u8; 4];
            c.copy_from_slice(&b[field::COUNTER_32]);
            u32::from_be_bytes(c) as u64
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_sec(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEC].copy_from_slice(&v.to_be_bytes())
    }

    pub fn set_usec(&mut self, v: u32) {
        self.buffer.as_mut()[field::USEC].copy_from_slice(&v.to_be_bytes())
    }

    /// Writes the counter at this view's width. A 32-bit counter keeps the low 32 bits,
    /// which is what iperf3 does (`htonl` of the count) once a stream passes 2^32
    /// datagrams without 64-bit counters; the receiver then sees it go backwards.
    pub fn set_counter(&mut self, v: u64) {
        if self.wide {
            self.buffer.as_mut()[field::COUNTER_64].copy_from_slice(&v.to_be_bytes())
        } else {
            self.buffer.as_mut()[field::COUNTER_32].copy_from_slice(&(v as u32).to_be_bytes())
        }
    }
}

/// An iperf3 UDP header's meaning. The filler after it is the caller's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Sender's CLOCK_MONOTONIC when the datagram was sent, whole seconds.
    pub sec: u32,
    /// The microseconds part of the same time.
    pub usec: u32,
    /// Starts at 1 on each stream.
    pub counter: u64,
    /// 64-bit counter (`udp_counters_64bit`) rather than 32-bit.
    pub wide: bool,
}

impl Repr {
    /// Header bytes for a counter width: 12, or 16 with 64-bit counters.
    pub fn header_len(wide: bool) -> usize {
        if wide {
            field::COUNTER_64.end
        } else {
            field::COUNTER_32.end
        }
    }

    /// Every value is accepted, as iperf3's receiver accepts them: it does not check
    /// that `usec` is below 10^6, nor that the counter is non-zero. Loss and
    /// reordering are the statistics' business, not the parser's.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            sec: p.sec(),
            usec: p.usec(),
            counter: p.counter(),
            wide: p.wide(),
        })
    }

    /// The header only; a datagram is as long as the test's `len`, filler included.
    pub fn buffer_len(&self) -> usize {
        Repr::header_len(self.wide)
    }

    /// Writes the header at this `Repr`'s width (the view is switched to it, so it
    /// reads back what was written) and leaves the filler alone. With `wide` false a
    /// counter above `u32::MAX` is truncated to its low 32 bits, as iperf3 does.
    /// Panics if the buffer is shorter than `buffer_len()`: sizing it is the caller's.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.wide = self.wide;
        p.set_sec(self.sec);
        p.set_usec(self.usec);
        p.set_counter(self.counter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A 32-bit-counter datagram with 4 bytes of filler, as a 3.12 client sends by
    // default.
    static GOLDEN_32: [u8; 16] = [
        0x00, 0x01, 0xe2, 0x40, // seconds: 123456
        0x00, 0x0b, 0x71, 0xb0, // microseconds: 750000
        0x00, 0x00, 0x00, 0x07, // counter: 7
        b'f', b'i', b'l', b'l', // filler
    ];

    // A 64-bit-counter datagram past 2^32 datagrams, with 4 bytes of filler.
    static GOLDEN_64: [u8; 20] = [
        0x00, 0x01, 0xe2, 0x40, // seconds: 123456
        0x00, 0x0b, 0x71, 0xb0, // microseconds: 750000
        0x00, 0x00, 0x00, 0x01, // counter, high: 1
        0x00, 0x00, 0x00, 0x02, // counter, low: 2
        b'f', b'i', b'l', b'l', // filler
    ];

    fn repr(counter: u64, wide: bool) -> Repr {
        Repr {
            sec: 123456,
            usec: 750000,
            counter,
            wide,
        }
    }

    #[test]
    fn header_lengths() {
        assert_eq!(Repr::header_len(false), 12);
        assert_eq!(Repr::header_len(true), 16);
        assert_eq!(repr(1, false).buffer_len(), 12);
        assert_eq!(repr(1, true).buffer_len(), 16);
    }

    #[test]
    fn parse_golden_32() {
        let p = Packet::new_checked(&GOLDEN_32[..], false).unwrap();
        assert_eq!((p.sec(), p.usec(), p.counter()), (123456, 750000, 7));
        assert_eq!(Repr::parse(&p), Ok(repr(7, false)));
    }

    #[test]
    fn parse_golden_64() {
        let p = Packet::new_checked(&GOLDEN_64[..], true).unwrap();
        assert_eq!(p.counter(), 0x1_0000_0002);
        assert_eq!(Repr::parse(&p), Ok(repr(0x1_0000_0002, true)));
    }

    #[test]
    fn emit_golden_32_leaves_filler() {
        let mut buf = GOLDEN_32;
        buf[..12].fill(0xee);
        repr(7, false).emit(&mut Packet::new_unchecked(&mut buf[..], false));
        assert_eq!(buf, GOLDEN_32);
    }

    #[test]
    fn emit_golden_64_leaves_filler() {
        let mut buf = GOLDEN_64;
        buf[..16].fill(0xee);
        repr(0x1_0000_0002, true).emit(&mut Packet::new_unchecked(&mut buf[..], true));
        assert_eq!(buf, GOLDEN_64);
    }

    #[test]
    fn emit_uses_the_repr_width() {
        let mut buf = [0u8; 16];
        let mut p = Packet::new_unchecked(&mut buf[..], false);
        repr(0x1_0000_0002, true).emit(&mut p);
        assert!(p.wide());
        assert_eq!(p.counter(), 0x1_0000_0002);
        assert_eq!(buf, GOLDEN_64[..16]);
    }

    #[test]
    fn narrow_counter_truncated_at_emit() {
        let mut buf = [0u8; 12];
        repr(0x1_0000_0007, false).emit(&mut Packet::new_unchecked(&mut buf[..], false));
        assert_eq!(buf, GOLDEN_32[..12]);
        let p = Packet::new_checked(&buf[..], false).unwrap();
        assert_eq!(Repr::parse(&p), Ok(repr(7, false)));
    }

    #[test]
    fn every_truncation_rejected() {
        for n in 0..12 {
            assert_eq!(
                Packet::new_checked(&GOLDEN_32[..n], false).err(),
                Some(Error::Truncated),
                "32-bit, {n} bytes"
            );
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&GOLDEN_32[..n], false)),
                Err(Error::Truncated),
                "32-bit parse, {n} bytes"
            );
        }
        for n in 0..16 {
            assert_eq!(
                Packet::new_checked(&GOLDEN_64[..n], true).err(),
                Some(Error::Truncated),
                "64-bit, {n} bytes"
            );
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&GOLDEN_64[..n], true)),
                Err(Error::Truncated),
                "64-bit parse, {n} bytes"
            );
        }
        // Exactly a header, no filler: accepted.
        assert!(Packet::new_checked(&GOLDEN_32[..12], false).is_ok());
        assert!(Packet::new_checked(&GOLDEN_64[..16], true).is_ok());
    }

    #[test]
    fn width_disagreement_reads_the_high_half() {
        // A receiver that missed `udp_counters_64bit` reads the counter's high word:
        // why both ends must agree on the width.
        let p = Packet::new_checked(&GOLDEN_64[..], false).unwrap();
        assert_eq!(p.counter(), 1);
    }
}
