//! ESP transport mode around another codec's UDP datagrams: L2TP/IPsec as
//! RFC 3193 has it. The inner codec (L2TP) speaks UDP payloads on port 1701;
//! this one gives each its UDP header and seals it with next header 17, so on
//! the wire it is outer IP, (UDP 4500,) ESP, then UDP 1701 -> 1701 and L2TP
//! inside the encryption.

use super::codec::{Codec, DropReason, Verdict};
use super::esp::{EspConfig, SaPair};
use crate::wire::{esp as esp_wire, udp};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

pub struct Transport<C: Codec> {
    sa: SaPair,
    inner: C,
    /// The outer addresses, for the protected UDP header's checksum.
    local: IpAddr,
    peer: IpAddr,
    /// The protected datagrams' port at both ends (1701 for L2TP).
    port: u16,
    scratch: Vec<u8>,
}

impl<C: Codec> Transport<C> {
    pub fn new(c: &EspConfig, local: IpAddr, port: u16, inner: C) -> Transport<C> {
        Transport {
            sa: SaPair::new(c),
            inner,
            local,
            peer: c.peer.ip(),
            port,
            scratch: Vec::with_capacity(2048),
        }
    }

    pub fn take_notes(&mut self) -> Vec<String> {
        self.sa.take_notes()
    }

    /// The inner codec's verdict, with a datagram bound for the network
    /// protected on its way.
    fn protect(&mut self, v: Verdict, packet: &mut Vec<u8>) -> Verdict {
        let Verdict::ToNetwork(_) = v else {
            return v;
        };
        self.scratch.clear();
        udp::emit(
            &mut self.scratch,
            (self.local, self.port),
            (self.peer, self.port),
            packet,
        );
        std::mem::swap(packet, &mut self.scratch);
        self.sa.seal(packet, esp_wire::NEXT_UDP)
    }
}

impl<C: Codec> Codec for Transport<C> {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let v = self.inner.handle_tun(packet, now);
        self.protect(v, packet)
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let (range, next) = match self.sa.open(peer, packet) {
            Ok(x) => x,
            Err(v) => return v,
        };
        if next != esp_wire::NEXT_UDP {
            return Verdict::Drop(DropReason::WrongProtocol);
        }
        let payload = match udp::parse(&packet[range.clone()]) {
            Ok((s, d, p)) if s == self.port && d == self.port => p,
            Ok(_) => return Verdict::Drop(DropReason::Unsupported),
            Err(e) => return Verdict::Drop(e.into()),
        };
        let (start, end) = (range.start + payload.start, range.start + payload.end);
        packet.copy_within(start..end, 0);
        packet.truncate(end - start);
        let v = self
            .inner
            .handle_network(SocketAddr::new(peer.ip(), self.port), packet, now);
        self.protect(v, packet)
    }

    fn poll(&mut self, now: Instant) -> Option<(Verdict, Vec<u8>)> {
        let (v, mut p) = self.inner.poll(now)?;
        let v = self.protect(v, &mut p);
        Some((v, p))
    }

    fn tick(&mut self, now: Instant) {
        self.inner.tick(now)
    }

    fn deadline(&self) -> Option<Instant> {
        self.inner.deadline()
    }
}
