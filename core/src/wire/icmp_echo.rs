//! ICMP and ICMPv6 echo request / reply (RFC 792, RFC 4443 section 4).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Identifier          |        Sequence Number        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Data ...
//! ```
//! Types: IPv4 request 8, reply 0; IPv6 request 128, reply 129. The ICMPv6
//! checksum covers a pseudo-header the kernel fills in for raw ICMPv6 sockets, so
//! `emit` computes the checksum for IPv4 only.

use super::{Error, Result, checksum};

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const SEQ: Range<usize> = 6..8;
    pub const DATA: usize = 8;
}

pub const HEADER_LEN: usize = field::DATA;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Reply,
}

impl Kind {
    fn code(self, f: Family) -> u8 {
        match (f, self) {
            (Family::V4, Kind::Request) => 8,
            (Family::V4, Kind::Reply) => 0,
            (Family::V6, Kind::Request) => 128,
            (Family::V6, Kind::Reply) => 129,
        }
    }
}

pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// The only constructor for received bytes: the header must be complete.
    pub fn new_checked(buffer: T) -> Result<Self> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::CHECKSUM.start], b[field::CHECKSUM.start + 1]])
    }
    pub fn ident(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::IDENT.start], b[field::IDENT.start + 1]])
    }
    pub fn seq(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::SEQ.start], b[field::SEQ.start + 1]])
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA..]
    }
    /// IPv4 only: the checksum over the whole message is right.
    pub fn verify_checksum(&self) -> bool {
        checksum(self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v
    }
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v
    }
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes())
    }
    pub fn set_seq(&mut self, v: u16) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes())
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA..]
    }
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// An echo message's meaning. The payload is the caller's, copied by `emit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub family: Family,
    pub kind: Kind,
    pub ident: u16,
    pub seq: u16,
    pub data_len: usize,
}

impl Repr {
    /// Echo messages only; anything else (unreachables, NDP) is `Malformed` here.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>, family: Family) -> Result<Repr> {
        let kind = match (family, p.msg_type()) {
            (Family::V4, 8) | (Family::V6, 128) => Kind::Request,
            (Family::V4, 0) | (Family::V6, 129) => Kind::Reply,
            _ => return Err(Error::Malformed),
        };
        if p.code() != 0 || (family == Family::V4 && !p.verify_checksum()) {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            family,
            kind,
            ident: p.ident(),
            seq: p.seq(),
            data_len: p.data().len(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data_len
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>, data: &[u8]) {
        p.set_msg_type(self.kind.code(self.family));
        p.set_code(0);
        p.set_ident(self.ident);
        p.set_seq(self.seq);
        p.data_mut()[..self.data_len].copy_from_slice(&data[..self.data_len]);
        match self.family {
            Family::V4 => p.fill_checksum(),
            Family::V6 => p.set_checksum(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // An IPv4 echo request as ping(8) would send it, with a 4-byte payload.
    static GOLDEN_V4: [u8; 12] = [
        0x08, // type: echo request
        0x00, // code
        0x02, 0xf3, // checksum
        0x12, 0x34, // identifier
        0x00, 0x01, // sequence
        b't', b'u', b'n', b'b', // data
    ];

    fn repr() -> Repr {
        Repr {
            family: Family::V4,
            kind: Kind::Request,
            ident: 0x1234,
            seq: 1,
            data_len: 4,
        }
    }

    #[test]
    fn parse_golden() {
        let p = Packet::new_checked(&GOLDEN_V4[..]).unwrap();
        assert_eq!(Repr::parse(&p, Family::V4), Ok(repr()));
        assert_eq!(p.data(), b"tunb");
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0u8; 12];
        let r = repr();
        assert_eq!(r.buffer_len(), 12);
        r.emit(&mut Packet::new_unchecked(&mut buf[..]), b"tunb");
        assert_eq!(buf, GOLDEN_V4);
    }

    #[test]
    fn every_truncation_rejected() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&GOLDEN_V4[..n]).err(),
                Some(Error::Truncated)
            );
        }
    }

    #[test]
    fn bad_checksum_and_other_types_rejected() {
        let mut b = GOLDEN_V4;
        b[11] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap(), Family::V4),
            Err(Error::Malformed)
        );
        let mut u = GOLDEN_V4;
        u[0] = 3; // destination unreachable
        assert_eq!(
            Repr::parse(&Packet::new_checked(&u[..]).unwrap(), Family::V4),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn v6_reply_type() {
        let mut buf = [0u8; 8];
        let r = Repr {
            family: Family::V6,
            kind: Kind::Reply,
            ident: 7,
            seq: 9,
            data_len: 0,
        };
        r.emit(&mut Packet::new_unchecked(&mut buf[..]), &[]);
        assert_eq!(buf, [129, 0, 0, 0, 0, 7, 0, 9]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap(), Family::V6),
            Ok(r)
        );
    }
}
