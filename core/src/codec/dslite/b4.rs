//! The B4, DS-Lite's customer end (RFC 6333 section 5): it forwards IPv4
//! between the LAN and the AFTR without NAT, clamping the MSS of TCP SYNs
//! and answering packets over the inner MTU with DF set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use super::icmp_errors::IcmpErrors;
use super::inner_packet::check_ipv4;
use super::mss::{MssClamp, clamp_mss};
use super::{B4_SOFTWIRE_ADDR, DEFAULT_INNER_MTU};
use crate::codec::{Codec, DropReason, Verdict};
use crate::wire::ipv4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct B4Config {
    /// The AFTR's IPv6 address (learned through DHCPv6 option 64, RFC 6334).
    pub aftr: Ipv6Addr,
    /// The largest IPv4 packet sent into the softwire with DF set.
    pub inner_mtu: u16,
    pub mss_clamp: MssClamp,
    /// The source of the ICMP errors the B4 generates.
    pub softwire_addr: Ipv4Addr,
}

impl B4Config {
    /// Inner MTU 1460, MSS clamped to 1420, softwire address 192.0.0.2.
    pub fn new(aftr: Ipv6Addr) -> Self {
        B4Config {
            aftr,
            inner_mtu: DEFAULT_INNER_MTU,
            mss_clamp: MssClamp::FromMtu,
            softwire_addr: B4_SOFTWIRE_ADDR,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct B4Stats {
    pub mss_clamped: u64,
    pub icmp_errors_sent: u64,
    /// Not built: about an error or a fragment, rate limited, or the queue full.
    pub icmp_errors_suppressed: u64,
}

/// The customer end: IPv4 from the LAN goes to the AFTR unchanged (no NAT here,
/// RFC 6333 section 5.5), IPv4 from the AFTR goes to the LAN.
#[derive(Debug)]
pub struct B4 {
    config: B4Config,
    aftr: SocketAddr,
    mss: Option<u16>,
    icmp: IcmpErrors,
    mss_clamped: u64,
}

impl B4 {
    pub fn new(config: B4Config) -> Self {
        B4 {
            aftr: SocketAddr::new(IpAddr::V6(config.aftr), 0),
            mss: config.mss_clamp.value(config.inner_mtu),
            config,
            icmp: IcmpErrors::new(),
            mss_clamped: 0,
        }
    }

    pub fn config(&self) -> &B4Config {
        &self.config
    }

    pub fn stats(&self) -> B4Stats {
        B4Stats {
            mss_clamped: self.mss_clamped,
            icmp_errors_sent: self.icmp.sent,
            icmp_errors_suppressed: self.icmp.suppressed,
        }
    }

    fn clamp(&mut self, packet: &mut [u8]) {
        if let Some(mss) = self.mss {
            if clamp_mss(packet, mss) {
                self.mss_clamped += 1;
            }
        }
    }
}

impl Codec for B4 {
    /// An IPv6 packet on the TUN is `WrongProtocol`: DS-Lite carries IPv4 only.
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        if let Err(r) = check_ipv4(packet, DropReason::WrongProtocol) {
            return Verdict::Drop(r);
        }
        if packet.len() > self.config.inner_mtu as usize
            && ipv4::Packet::new_unchecked(&packet[..]).dont_frag()
        {
            let (mtu, src) = (self.config.inner_mtu, self.config.softwire_addr);
            self.icmp.frag_needed(packet, mtu, src, now);
            return Verdict::Drop(DropReason::TooBig);
        }
        self.clamp(packet);
        Verdict::ToNetwork(self.aftr)
    }

    /// `packet` is the inner IPv4 packet: the kernel stripped the outer header.
    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        if peer.ip() != self.aftr.ip() {
            return Verdict::Drop(DropReason::UnknownPeer);
        }
        if let Err(r) = check_ipv4(packet, DropReason::Malformed) {
            return Verdict::Drop(r);
        }
        self.clamp(packet);
        Verdict::ToTun
    }

    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.icmp.pop()
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;
    use crate::codec::dslite::icmp_errors::ICMP_BURST;
    use crate::codec::dslite::test_support::*;
    use crate::wire::icmpv4_error;
    use crate::wire::ipv4::{l4, protocol};

    #[test]
    fn b4_golden_both_ways() {
        let mut b4 = b4();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        assert_eq!(b4.handle_tun(&mut p, now), Verdict::ToNetwork(peer(AFTR6)));
        assert_eq!(p, LAN_UDP, "the B4 does not rewrite");
        // Trailing bytes beyond the total length are cut on the way in.
        let mut p = LAN_UDP.to_vec();
        p.extend_from_slice(&[0xee; 6]);
        assert_eq!(b4.handle_network(peer(AFTR6), &mut p, now), Verdict::ToTun);
        assert_eq!(p, LAN_UDP);
        assert_eq!(b4.poll(now), None);
    }

    #[test]
    fn b4_drops() {
        let mut b4 = b4();
        let now = Instant::now();
        let net = |b4: &mut B4, p: &[u8]| b4.handle_network(peer(AFTR6), &mut p.to_vec(), now);
        assert_eq!(net(&mut b4, &[]), Verdict::Drop(DropReason::Truncated));
        assert_eq!(
            net(&mut b4, &LAN_UDP[..1]),
            Verdict::Drop(DropReason::Truncated)
        );
        assert_eq!(
            net(&mut b4, &LAN_UDP[..19]),
            Verdict::Drop(DropReason::Truncated)
        );
        // A total length longer than what arrived lies.
        assert_eq!(
            net(&mut b4, &LAN_UDP[..30]),
            Verdict::Drop(DropReason::Malformed)
        );
        let mut ihl = LAN_UDP;
        ihl[0] = 0x44;
        assert_eq!(net(&mut b4, &ihl), Verdict::Drop(DropReason::Malformed));
        let mut sum = LAN_UDP;
        sum[10] ^= 0x80;
        assert_eq!(net(&mut b4, &sum), Verdict::Drop(DropReason::Malformed));
        let mut v6 = LAN_UDP;
        v6[0] = 0x60;
        assert_eq!(net(&mut b4, &v6), Verdict::Drop(DropReason::Malformed));
        assert_eq!(
            b4.handle_network(peer(B4_B), &mut LAN_UDP.to_vec(), now),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        let v4_peer = SocketAddr::new(IpAddr::V4(SERVER), 0);
        assert_eq!(
            b4.handle_network(v4_peer, &mut LAN_UDP.to_vec(), now),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        // From the TUN: an IPv6 packet is not for a DS-Lite softwire.
        assert_eq!(
            b4.handle_tun(&mut v6.to_vec(), now),
            Verdict::Drop(DropReason::WrongProtocol)
        );
        assert_eq!(
            b4.handle_tun(&mut vec![0x45; 12], now),
            Verdict::Drop(DropReason::Truncated)
        );
    }

    #[test]
    fn b4_clamps_mss_both_ways() {
        let mut b4 = b4();
        let now = Instant::now();
        for odd in [false, true] {
            let mut syn = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1460, odd);
            assert_eq!(
                b4.handle_tun(&mut syn, now),
                Verdict::ToNetwork(peer(AFTR6))
            );
            assert_eq!(mss_of(&syn), 1420);
            assert_checksums(&syn);
            // Incremental equals a full recomputation.
            let mut full = syn.clone();
            fix_checksums(&mut full);
            assert_eq!(syn, full);

            let flags = l4::TCP_FLAG_SYN | l4::TCP_FLAG_ACK;
            let mut syn_ack = tcp(SERVER, 443, LAN_HOST, 40000, flags, 1460, odd);
            assert_eq!(
                b4.handle_network(peer(AFTR6), &mut syn_ack, now),
                Verdict::ToTun
            );
            assert_eq!(mss_of(&syn_ack), 1420);
            assert_checksums(&syn_ack);
        }
        assert_eq!(b4.stats().mss_clamped, 4);
        // Smaller MSS and non-SYN segments are left alone.
        let small = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1380, false);
        let mut p = small.clone();
        b4.handle_tun(&mut p, now);
        assert_eq!(p, small);
        let ack = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_ACK, 1460, false);
        let mut p = ack.clone();
        b4.handle_tun(&mut p, now);
        assert_eq!(p, ack);
        // Clamping off, or a fixed value.
        let mut off = B4Config::new(AFTR6);
        off.mss_clamp = MssClamp::Off;
        let mut p = tcp(LAN_HOST, 1, SERVER, 2, l4::TCP_FLAG_SYN, 1460, false);
        B4::new(off.clone()).handle_tun(&mut p, now);
        assert_eq!(mss_of(&p), 1460);
        off.mss_clamp = MssClamp::Fixed(1200);
        B4::new(off).handle_tun(&mut p, now);
        assert_eq!(mss_of(&p), 1200);
        assert_checksums(&p);
    }

    #[test]
    fn b4_too_big_with_df_answers_frag_needed() {
        let mut b4 = b4();
        let now = Instant::now();
        let big = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
        assert_eq!(big.len(), 1500);
        let mut p = big.clone();
        assert_eq!(
            b4.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        let (v, icmp) = b4.poll(now).expect("an ICMP error");
        assert_eq!(v, Verdict::ToTun);
        assert_eq!(b4.poll(now), None);
        let ip = ipv4::Packet::new_checked(&icmp[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.src_addr(), B4_SOFTWIRE_ADDR);
        assert_eq!(ip.dst_addr(), LAN_HOST);
        assert_eq!(ip.protocol(), protocol::ICMP);
        let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(
            icmpv4_error::Repr::parse(&e),
            Ok(icmpv4_error::Repr::frag_needed(1460, 28))
        );
        assert_eq!(e.next_hop_mtu(), 1460);
        assert_eq!(e.quoted(), &big[..28]);
        assert_eq!(b4.stats().icmp_errors_sent, 1);

        // Exactly the MTU passes.
        let mut fits = udp(LAN_HOST, 5000, SERVER, 53, 1460 - 28);
        assert_eq!(
            b4.handle_tun(&mut fits, now),
            Verdict::ToNetwork(peer(AFTR6))
        );
    }

    #[test]
    fn b4_too_big_without_df_is_sent_for_outer_fragmentation() {
        let mut b4 = b4();
        let now = Instant::now();
        let mut p = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
        ipv4::Packet::new_unchecked(&mut p[..]).set_dont_frag(false);
        fix_checksums(&mut p);
        let before = p.clone();
        assert_eq!(b4.handle_tun(&mut p, now), Verdict::ToNetwork(peer(AFTR6)));
        assert_eq!(p, before, "the inner packet is never fragmented");
        assert_eq!(b4.poll(now), None);
    }

    #[test]
    fn b4_never_answers_errors_and_rate_limits() {
        let mut b4 = b4();
        let now = Instant::now();
        // An ICMP error that is too big: dropped, not answered.
        let mut m = vec![0u8; 1500 - 20];
        m[0] = 3;
        let mut p = packet(LAN_HOST, SERVER, protocol::ICMP, &m, true);
        assert_eq!(
            b4.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        assert_eq!(b4.poll(now), None);
        // A flood gets at most the burst.
        for _ in 0..200 {
            let mut p = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
            b4.handle_tun(&mut p, now);
        }
        let mut n = 0;
        while b4.poll(now).is_some() {
            n += 1;
        }
        assert_eq!(n, ICMP_BURST as usize);
        assert_eq!(b4.stats().icmp_errors_suppressed, 1 + 200 - ICMP_BURST);
    }
}
