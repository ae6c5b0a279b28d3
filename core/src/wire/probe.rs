//! tunbench's latency probe: a small UDP datagram the measuring node sends at a
//! steady rate and the target's echo responder sends back, stamped on the way
//! (the idea of irtt's and TWAMP's test packets, RFC 5357 section 4.2, reduced
//! to what a lab with one shared clock needs).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Magic "tbLP" (0x74 0x62 0x4c 0x50)            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |  Kind (1 probe, 2 echo)   |      Reserved     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                      Sequence number                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                Client send time, ns (64 bits)                 |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               Server receive time, ns (64 bits)               |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                Server send time, ns (64 bits)                 |
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Padding (zero) to [`PACKET_LEN`] ...
//! ```
//!
//! All fields are big-endian. The times are nanoseconds of CLOCK_MONOTONIC,
//! which every network namespace of a host shares (time namespaces are not
//! used), so the server's stamps minus the client's are one-way delays. A probe
//! has zero server times; the echo is the probe with its kind set to 2 and the
//! two server times filled in.

use super::{Error, Result};

/// "tbLP": tunbench latency probe.
pub const MAGIC: [u8; 4] = *b"tbLP";
pub const VERSION: u8 = 1;
/// Bytes of every probe and echo: the header and zero padding, 64 bytes, the
/// size of a default ping, so a probe costs the path what a ping does.
pub const PACKET_LEN: usize = 64;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const KIND: usize = 5;
    pub const RESERVED: Range<usize> = 6..8;
    pub const SEQ: Range<usize> = 8..12;
    pub const CLIENT_SEND: Range<usize> = 12..20;
    pub const SERVER_RECEIVE: Range<usize> = 20..28;
    pub const SERVER_SEND: Range<usize> = 28..36;
    pub const HEADER_END: usize = SERVER_SEND.end;
}

/// Which way the datagram goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client to server.
    Probe,
    /// Server back to client.
    Echo,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Probe => 1,
            Kind::Echo => 2,
        }
    }
}

pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn u64_at(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[r]);
    u64::from_be_bytes(v)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view with no checks; accessors panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// The only constructor for received bytes: the header must be complete,
    /// with the magic and a version this code reads.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Packet::new_unchecked(buffer);
        let b = p.buffer.as_ref();
        if b.len() < field::HEADER_END {
            return Err(Error::Truncated);
        }
        if b[field::MAGIC] != MAGIC || b[field::VERSION] != VERSION {
            return Err(Error::Malformed);
        }
        Ok(p)
    }

    pub fn kind(&self) -> Option<Kind> {
        match self.buffer.as_ref()[field::KIND] {
            1 => Some(Kind::Probe),
            2 => Some(Kind::Echo),
            _ => None,
        }
    }

    pub fn seq(&self) -> u32 {
        let b = self.buffer.as_ref();
        let mut v = [0u8; 4];
        v.copy_from_slice(&b[field::SEQ]);
        u32::from_be_bytes(v)
    }

    pub fn client_send_ns(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::CLIENT_SEND)
    }

    pub fn server_receive_ns(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SERVER_RECEIVE)
    }

    pub fn server_send_ns(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SERVER_SEND)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Magic, version, reserved bytes zero.
    pub fn set_header(&mut self) {
        let b = self.buffer.as_mut();
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        b[field::RESERVED].fill(0);
    }

    pub fn set_kind(&mut self, k: Kind) {
        self.buffer.as_mut()[field::KIND] = k.byte();
    }

    pub fn set_seq(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes())
    }

    pub fn set_client_send_ns(&mut self, v: u64) {
        self.buffer.as_mut()[field::CLIENT_SEND].copy_from_slice(&v.to_be_bytes())
    }

    pub fn set_server_receive_ns(&mut self, v: u64) {
        self.buffer.as_mut()[field::SERVER_RECEIVE].copy_from_slice(&v.to_be_bytes())
    }

    pub fn set_server_send_ns(&mut self, v: u64) {
        self.buffer.as_mut()[field::SERVER_SEND].copy_from_slice(&v.to_be_bytes())
    }

    /// Zero from the end of the header to the end of the buffer.
    pub fn clear_padding(&mut self) {
        self.buffer.as_mut()[field::HEADER_END..].fill(0);
    }
}

/// A probe's or echo's meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub kind: Kind,
    pub seq: u32,
    pub client_send_ns: u64,
    /// Zero in a probe.
    pub server_receive_ns: u64,
    pub server_send_ns: u64,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        Ok(Repr {
            kind: p.kind().ok_or(Error::Malformed)?,
            seq: p.seq(),
            client_send_ns: p.client_send_ns(),
            server_receive_ns: p.server_receive_ns(),
            server_send_ns: p.server_send_ns(),
        })
    }

    /// What [`emit`](Self::emit) writes: the header and its padding.
    pub fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the whole datagram (padding zeroed) into the first
    /// [`PACKET_LEN`] bytes of the packet's buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_header();
        p.set_kind(self.kind);
        p.set_seq(self.seq);
        p.set_client_send_ns(self.client_send_ns);
        p.set_server_receive_ns(self.server_receive_ns);
        p.set_server_send_ns(self.server_send_ns);
        p.clear_padding();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const ECHO: [u8; PACKET_LEN] = [
        0x74, 0x62, 0x4c, 0x50,                         // magic "tbLP"
        0x01,                                           // version 1
        0x02,                                           // kind: echo
        0x00, 0x00,                                     // reserved
        0x00, 0x00, 0x01, 0x02,                         // sequence 258
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x10, // client send 2^32 + 16 ns
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x03, 0xe8, // server receive 2^32 + 1000
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x03, 0xf2, // server send 2^32 + 1010
        // padding
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn repr() -> Repr {
        Repr {
            kind: Kind::Echo,
            seq: 258,
            client_send_ns: (1 << 32) + 16,
            server_receive_ns: (1 << 32) + 1000,
            server_send_ns: (1 << 32) + 1010,
        }
    }

    #[test]
    fn parses_the_golden_echo() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn emits_the_golden_echo_over_a_dirty_buffer() {
        let mut buf = [0xaau8; PACKET_LEN];
        let r = repr();
        assert_eq!(r.buffer_len(), PACKET_LEN);
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, ECHO);
    }

    #[test]
    fn every_truncation_of_the_header_is_rejected() {
        for len in 0..field::HEADER_END {
            assert!(
                matches!(Packet::new_checked(&ECHO[..len]), Err(Error::Truncated)),
                "{len} bytes"
            );
        }
        // Padding is not needed to read it.
        assert!(Packet::new_checked(&ECHO[..field::HEADER_END]).is_ok());
    }

    #[test]
    fn other_datagrams_are_malformed() {
        let mut b = ECHO;
        b[0] = b'x';
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Malformed));
        let mut b = ECHO;
        b[field::VERSION] = 2;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(Error::Malformed));
        let mut b = ECHO;
        b[field::KIND] = 7;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }
}
