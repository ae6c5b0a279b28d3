//! ESP tunnel mode (RFC 4303) with AES-GCM-128 (RFC 4106), keyed statically:
//! security associations, the anti-replay window, and the codec for the
//! shared driver (UDP encapsulation on port 4500, RFC 3948, or raw protocol 50).
//!
//! One SA each way per peer. Outbound: sequence numbers from 1, never wrapping
//! (at 2^32 - 1 the SA stops sending and says so: no rekeying without IKE);
//! the 8-byte IV is the sequence number, unique per key as RFC 4106 requires.
//! Inbound: the window is checked before decryption and updated only after
//! the ICV verified (RFC 4303 3.4.3).

use crate::codec::{Codec, DropReason, Verdict, inner_source, outside_allowed};
use crate::wire::esp as wire;
use ipnetwork::IpNetwork;
use ring::aead::{AES_128_GCM, Aad, LessSafeKey, Nonce, Tag, UnboundKey};
use std::net::SocketAddr;
use std::time::Instant;

/// Key material for AES-GCM-128 in ESP: a 16-byte key and a 4-byte salt
/// (RFC 4106 8.1), as tshark and `ip xfrm` take it (20 bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyMaterial(pub [u8; 20]);

impl std::fmt::Debug for KeyMaterial {
    // Never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("KeyMaterial(..)")
    }
}

fn aead(k: &KeyMaterial) -> (LessSafeKey, [u8; 4]) {
    let key = UnboundKey::new(&AES_128_GCM, &k.0[..16]).expect("16-byte AES key");
    (
        LessSafeKey::new(key),
        k.0[16..].try_into().expect("4-byte salt"),
    )
}

fn nonce(salt: &[u8; 4], iv: &[u8; 8]) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(salt);
    n[4..].copy_from_slice(iv);
    Nonce::assume_unique_for_key(n)
}

/// Why an inbound packet was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    Truncated,
    Malformed,
    /// Seen before, or older than the window.
    Replayed,
    /// The ICV did not verify.
    Unauthentic,
}

impl From<crate::wire::Error> for OpenError {
    fn from(e: crate::wire::Error) -> Self {
        match e {
            crate::wire::Error::Truncated => OpenError::Truncated,
            crate::wire::Error::Malformed => OpenError::Malformed,
        }
    }
}

impl From<OpenError> for DropReason {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Truncated => DropReason::Truncated,
            OpenError::Malformed => DropReason::Malformed,
            OpenError::Replayed => DropReason::Replayed,
            OpenError::Unauthentic => DropReason::Unauthentic,
        }
    }
}

/// The anti-replay window of RFC 4303 3.4.3, as a bitmap of 64-bit blocks
/// that is never shifted (RFC 6479): bit `seq % size` says whether `seq` was
/// seen, for the `size` numbers up to the highest one seen.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    size: u64,
    top: u64,
    bits: Vec<u64>,
}

impl ReplayWindow {
    /// A window of `size` packets (rounded up to a multiple of 64, at least 64).
    pub fn new(size: u32) -> ReplayWindow {
        let blocks = (size.max(64) as usize).div_ceil(64);
        ReplayWindow {
            size: blocks as u64 * 64,
            top: 0,
            bits: vec![0; blocks],
        }
    }

    fn bit(&self, seq: u64) -> (usize, u64) {
        let i = seq % self.size;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    /// Whether `seq` may be new: not zero, not older than the window, not seen.
    pub fn check(&self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.top {
            return true;
        }
        if self.top - seq >= self.size {
            return false;
        }
        let (b, m) = self.bit(seq);
        self.bits[b] & m == 0
    }

    /// Records `seq` (after its ICV verified and `check` said yes).
    pub fn mark(&mut self, seq: u64) {
        if seq > self.top {
            // Clear the bits of the numbers the window slides past.
            let gap = seq - self.top;
            if gap >= self.size {
                self.bits.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in self.top + 1..seq {
                    let (b, m) = self.bit(s);
                    self.bits[b] &= !m;
                }
            }
            self.top = seq;
        }
        let (b, m) = self.bit(seq);
        self.bits[b] |= m;
    }
}

/// Sending side of an SA.
pub struct Outbound {
    pub spi: u32,
    key: LessSafeKey,
    salt: [u8; 4],
    /// The next sequence number to send.
    next: u64,
}

impl Outbound {
    pub fn new(spi: u32, k: &KeyMaterial) -> Outbound {
        let (key, salt) = aead(k);
        Outbound {
            spi,
            key,
            salt,
            next: 1,
        }
    }

    /// Starts at sequence number `next` (tests of the end of the space).
    pub fn with_next(mut self, next: u64) -> Outbound {
        self.next = next;
        self
    }

    /// Seals `payload` (next header `next`) into `out` as one ESP packet.
    /// None when the sequence numbers are used up.
    pub fn seal(&mut self, payload: &[u8], next: u8, out: &mut Vec<u8>) -> Option<()> {
        self.seal_parts(&[payload], next, out)
    }

    /// `seal` with the payload in parts, sealed as if they were one.
    pub fn seal_parts(&mut self, parts: &[&[u8]], next: u8, out: &mut Vec<u8>) -> Option<()> {
        if self.next > u32::MAX as u64 {
            return None;
        }
        let seq = self.next as u32;
        self.next += 1;
        // The IV is the 64-bit sequence number: never repeats under one key.
        let iv = (seq as u64).to_be_bytes();
        wire::emit_parts(out, self.spi, seq, iv, parts, next);
        let end = out.len() - wire::ICV_LEN;
        let mut aad = [0u8; 8];
        aad.copy_from_slice(&out[..8]);
        let tag: Tag = self
            .key
            .seal_in_place_separate_tag(
                nonce(&self.salt, &iv),
                Aad::from(aad),
                &mut out[wire::HEADER_LEN..end],
            )
            .expect("GCM seals any length an IP packet has");
        out[end..].copy_from_slice(tag.as_ref());
        Some(())
    }

    pub fn sent(&self) -> u64 {
        self.next - 1
    }
}

/// Receiving side of an SA.
pub struct Inbound {
    pub spi: u32,
    key: LessSafeKey,
    salt: [u8; 4],
    window: ReplayWindow,
}

impl Inbound {
    pub fn new(spi: u32, k: &KeyMaterial, window: u32) -> Inbound {
        let (key, salt) = aead(k);
        Inbound {
            spi,
            key,
            salt,
            window: ReplayWindow::new(window),
        }
    }

    /// Decrypts `packet` in place: Ok((payload range, next header)).
    pub fn open(&mut self, packet: &mut [u8]) -> Result<(std::ops::Range<usize>, u8), OpenError> {
        let p = wire::Packet::new_checked(&*packet)?;
        let seq = p.sequence() as u64;
        let iv = p.iv();
        // Cheap check first: a replay costs no decryption.
        if !self.window.check(seq) {
            return Err(OpenError::Replayed);
        }
        let mut aad = [0u8; 8];
        aad.copy_from_slice(&packet[..8]);
        let plain = self
            .key
            .open_in_place(
                nonce(&self.salt, &iv),
                Aad::from(aad),
                &mut packet[wire::HEADER_LEN..],
            )
            .map_err(|_| OpenError::Unauthentic)?;
        let (len, next) = wire::parse_trailer(plain)?;
        self.window.mark(seq);
        Ok((wire::HEADER_LEN..wire::HEADER_LEN + len, next))
    }
}

/// How ESP travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encap {
    /// ESP in UDP, port 4500 (RFC 3948).
    Udp,
    /// IP protocol 50.
    Raw,
}

/// One end of an ESP tunnel to one peer.
pub struct EspConfig {
    pub peer: SocketAddr,
    pub encap: Encap,
    pub out_spi: u32,
    pub out_key: KeyMaterial,
    pub in_spi: u32,
    pub in_key: KeyMaterial,
    pub window: u32,
    /// Inner sources the peer may use (the prefixes behind it).
    pub allowed: Vec<IpNetwork>,
}

/// The two SAs between this end and its peer, and what sealing and opening
/// need around them: tunnel mode (`Esp`) and transport mode (`Transport`)
/// differ only in what they put inside.
pub struct SaPair {
    peer: SocketAddr,
    encap: Encap,
    outbound: Outbound,
    inbound: Inbound,
    scratch: Vec<u8>,
    /// Said once when the sequence numbers ran out.
    pub exhausted: bool,
    notes: Vec<String>,
}

impl SaPair {
    pub fn new(c: &EspConfig) -> SaPair {
        SaPair {
            peer: c.peer,
            encap: c.encap,
            outbound: Outbound::new(c.out_spi, &c.out_key),
            inbound: Inbound::new(c.in_spi, &c.in_key, c.window),
            scratch: Vec::with_capacity(2048),
            exhausted: false,
            notes: Vec::new(),
        }
    }

    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Replaces `packet` with it sealed under next header `next`, bound for
    /// the peer.
    pub fn seal(&mut self, packet: &mut Vec<u8>, next: u8) -> Verdict {
        self.seal_behind(&[], packet, next)
    }

    /// `seal` with `header` in front of the packet inside the encryption
    /// (transport mode's UDP header), without copying the packet twice.
    pub fn seal_behind(&mut self, header: &[u8], packet: &mut Vec<u8>, next: u8) -> Verdict {
        if self
            .outbound
            .seal_parts(&[header, packet], next, &mut self.scratch)
            .is_none()
        {
            if !self.exhausted {
                self.exhausted = true;
                self.notes.push(format!(
                    "SA {:#010x}: sequence numbers used up ({} packets); it sends no more (no rekeying without IKE)",
                    self.outbound.spi,
                    self.outbound.sent()
                ));
            }
            return Verdict::Drop(DropReason::NoSession);
        }
        std::mem::swap(packet, &mut self.scratch);
        Verdict::ToNetwork(self.peer)
    }

    /// Opens a datagram from `peer` in place: Ok((payload range, next
    /// header)), or what to do with it instead (NAT-T keepalives and ESP's
    /// own dummy packets are used up, the rest dropped with the reason).
    pub fn open(
        &mut self,
        peer: SocketAddr,
        packet: &mut [u8],
    ) -> Result<(std::ops::Range<usize>, u8), Verdict> {
        if self.encap == Encap::Udp {
            match wire::classify_udp(packet) {
                wire::Encapsulated::Esp => {}
                wire::Encapsulated::NatKeepalive => return Err(Verdict::Consumed),
                wire::Encapsulated::Ike => return Err(Verdict::Drop(DropReason::Unsupported)),
            }
        }
        if peer.ip() != self.peer.ip() {
            return Err(Verdict::Drop(DropReason::UnknownPeer));
        }
        if packet.len() >= 4 && packet[..4] != self.inbound.spi.to_be_bytes() {
            return Err(Verdict::Drop(if packet.len() < wire::MIN_LEN {
                DropReason::Truncated
            } else {
                DropReason::UnknownPeer
            }));
        }
        match self.inbound.open(packet) {
            Ok((_, wire::NEXT_NONE)) => Err(Verdict::Consumed),
            Ok(x) => Ok(x),
            Err(e) => Err(Verdict::Drop(e.into())),
        }
    }
}

/// Tunnel mode: whole IP packets inside.
pub struct Esp {
    sa: SaPair,
    allowed: Vec<IpNetwork>,
}

impl Esp {
    pub fn new(c: EspConfig) -> Esp {
        Esp {
            sa: SaPair::new(&c),
            allowed: c.allowed,
        }
    }

    pub fn take_notes(&mut self) -> Vec<String> {
        self.sa.take_notes()
    }
}

/// Whether `p` is one whole IPv4 or IPv6 packet whose length fields agree
/// with its size, and which next header names it.
fn inner_ok(p: &[u8], next: u8) -> bool {
    match (p.first().map(|b| b >> 4), next) {
        (Some(4), wire::NEXT_IPV4) => {
            p.len() >= 20
                && u16::from_be_bytes([p[2], p[3]]) as usize == p.len()
                && (p[0] & 0x0f) >= 5
        }
        (Some(6), wire::NEXT_IPV6) => {
            p.len() >= 40 && u16::from_be_bytes([p[4], p[5]]) as usize + 40 == p.len()
        }
        _ => false,
    }
}

impl Codec for Esp {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        let next = match packet.first().map(|b| b >> 4) {
            Some(4) => wire::NEXT_IPV4,
            Some(6) => wire::NEXT_IPV6,
            _ => return Verdict::Drop(DropReason::Malformed),
        };
        self.sa.seal(packet, next)
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        let (range, next) = match self.sa.open(peer, packet) {
            Ok(x) => x,
            Err(v) => return v,
        };
        let inner = &packet[range.clone()];
        if !inner_ok(inner, next) {
            return Verdict::Drop(DropReason::Malformed);
        }
        match inner_source(inner) {
            Some(src) if self.allowed.iter().any(|n| n.contains(src)) => {}
            _ => return Verdict::Drop(outside_allowed(inner)),
        }
        packet.copy_within(range.clone(), 0);
        packet.truncate(range.len());
        Verdict::ToTun
    }
}

/// Fuzz entry points (fuzz/fuzz_targets/esp_codec.rs): any bytes from the
/// network, and any bytes from the TUN, through an ESP endpoint.
pub mod fuzz {
    use super::*;

    fn endpoint() -> Esp {
        Esp::new(EspConfig {
            peer: "198.18.0.2:4500".parse().expect("address"),
            encap: Encap::Udp,
            out_spi: 0x1000,
            out_key: KeyMaterial([1; 20]),
            in_spi: 0x1001,
            in_key: KeyMaterial([2; 20]),
            window: 64,
            allowed: vec!["0.0.0.0/0".parse().expect("prefix")],
        })
    }

    pub fn codec(data: &[u8]) {
        let now = Instant::now();
        let mut e = endpoint();
        let mut p = data.to_vec();
        let _ = e.handle_network("198.18.0.2:4500".parse().expect("address"), &mut p, now);
        // The same bytes sealed by the peer's SA, then opened: a well-formed
        // ESP packet around arbitrary content.
        let mut peer = Outbound::new(0x1001, &KeyMaterial([2; 20]));
        let mut sealed = Vec::new();
        if peer.seal(data, wire::NEXT_IPV4, &mut sealed).is_some() {
            let _ = e.handle_network(
                "198.18.0.2:4500".parse().expect("address"),
                &mut sealed,
                now,
            );
        }
        let mut t = data.to_vec();
        let _ = e.handle_tun(&mut t, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn km(b: u8) -> KeyMaterial {
        KeyMaterial([b; 20])
    }

    /// Tunnel-mode ends a (inner 198.19.0.1, 2001:2:0:1::/64) and b.
    fn esp_pair() -> (Esp, Esp) {
        let end = |peer: &str, out: u32, inn: u32, allowed: [&str; 2]| {
            Esp::new(EspConfig {
                peer: peer.parse().unwrap(),
                encap: Encap::Udp,
                out_spi: out,
                out_key: km(out as u8),
                in_spi: inn,
                in_key: km(inn as u8),
                window: 64,
                allowed: allowed.iter().map(|a| a.parse().unwrap()).collect(),
            })
        };
        (
            end(
                "198.18.0.2:4500",
                1,
                2,
                ["198.19.0.2/32", "2001:2:0:2::/64"],
            ),
            end(
                "198.18.0.1:4500",
                2,
                1,
                ["198.19.0.1/32", "2001:2:0:1::/64"],
            ),
        )
    }

    #[test]
    fn the_kernels_link_scope_chatter_is_told_apart_from_spoofing() {
        use crate::codec::test_packets::{ipv6, router_solicitation};
        let now = Instant::now();
        let from_a: SocketAddr = "198.18.0.1:4500".parse().unwrap();
        let (mut a, mut b) = esp_pair();
        for (mut p, want) in [
            (ipv6("2001:2:0:1::1", "2001:2:0:2::1", 128), Verdict::ToTun),
            (router_solicitation(), Verdict::Drop(DropReason::LinkScope)),
            (
                ipv6("::", "ff02::1:ff00:1", 135),
                Verdict::Drop(DropReason::LinkScope),
            ),
            (
                ipv6("2001:2:0:9::1", "2001:2:0:2::1", 128),
                Verdict::Drop(DropReason::Spoofed),
            ),
        ] {
            assert!(matches!(a.handle_tun(&mut p, now), Verdict::ToNetwork(_)));
            assert_eq!(b.handle_network(from_a, &mut p, now), want);
        }
    }

    #[test]
    fn window_accepts_new_and_late_and_refuses_seen_and_old() {
        let mut w = ReplayWindow::new(64);
        assert!(!w.check(0), "0 is never valid");
        for s in [1, 2, 5, 3] {
            assert!(w.check(s));
            w.mark(s);
        }
        assert!(!w.check(2) && !w.check(5));
        assert!(w.check(4), "late but inside the window");
        w.mark(200);
        assert!(!w.check(200 - 64), "just outside");
        assert!(w.check(200 - 63), "just inside");
        assert!(!w.check(5));
        // A jump larger than the window forgets everything older.
        w.mark(10_000);
        assert!(w.check(9_999) && !w.check(10_000) && !w.check(200));
        let mut big = ReplayWindow::new(1000);
        big.mark(5000);
        assert!(big.check(5000 - 1000 + 1) || big.check(5000 - 1000 + 24));
    }

    #[test]
    fn seal_then_open_round_trips_and_tampering_fails() {
        let mut o = Outbound::new(0x1000, &km(1));
        let mut i = Inbound::new(0x1000, &km(1), 64);
        let mut out = Vec::new();
        let inner: Vec<u8> = (0..100u8).collect();
        o.seal(&inner, wire::NEXT_IPV4, &mut out).unwrap();
        assert_eq!(out.len(), 16 + 100 + 2 + 2 + 16);
        assert_eq!(&out[4..8], &[0, 0, 0, 1], "sequence numbers start at 1");
        let mut a = out.clone();
        let (r, next) = i.open(&mut a).unwrap();
        assert_eq!((&a[r], next), (&inner[..], wire::NEXT_IPV4));
        // The same packet again: replayed, before any decryption.
        let mut b = out.clone();
        assert_eq!(i.open(&mut b), Err(OpenError::Replayed));
        // A flipped bit anywhere after the header: the ICV fails, and the
        // window is not moved by it.
        o.seal(&inner, wire::NEXT_IPV4, &mut out).unwrap();
        let mut c = out.clone();
        c[40] ^= 1;
        assert_eq!(i.open(&mut c), Err(OpenError::Unauthentic));
        let mut d = out.clone();
        assert!(i.open(&mut d).is_ok(), "the untouched packet still opens");
        // Another key: unauthentic.
        let mut other = Inbound::new(0x1000, &km(2), 64);
        o.seal(&inner, wire::NEXT_IPV4, &mut out).unwrap();
        assert_eq!(other.open(&mut out), Err(OpenError::Unauthentic));
    }

    #[test]
    fn sequence_numbers_never_wrap() {
        let mut o = Outbound::new(7, &km(1)).with_next(u32::MAX as u64);
        let mut out = Vec::new();
        assert!(o.seal(&[0x45; 20], wire::NEXT_IPV4, &mut out).is_some());
        assert_eq!(&out[4..8], &[0xff; 4]);
        assert!(o.seal(&[0x45; 20], wire::NEXT_IPV4, &mut out).is_none());
    }
}
