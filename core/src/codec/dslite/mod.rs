//! DS-Lite (RFC 6333): IPv4 carried in IPv6 (RFC 2473) between a B4 at the
//! customer and an AFTR that NATs it to the IPv4 internet, as two sans-IO codecs.
//!
//! ```text
//!  LAN host ─ TUN ─ B4 ══ IPv6, next header 4 ══ AFTR ─ TUN ─ kernel ─ IPv4 internet
//!   192.168.1.10      2001:db8:1::2      2001:db8::1     NAT44 to the pool
//! ```
//!
//! The driver's tunnel socket is a raw IPv6 socket for next header 4. On receive
//! the kernel has removed the outer header and reassembled IPv6 fragments; on send
//! it adds the outer header, and fragments the IPv6 packet when it exceeds the link
//! MTU (RFC 2473 section 7.2: the inner IPv4 packet is never fragmented, erratum
//! 5847). So both codecs see, and emit, nothing but IPv4 packets.
//!
//! The inner MTU (1460 by default, the Japanese IPoE practice) bounds what goes
//! into the softwire: larger packets with DF set are answered with an ICMP
//! "fragmentation needed" (RFC 1191) through `poll`, larger ones without DF are
//! sent and fragmented outside. TCP SYNs get their MSS clamped so most flows never
//! need either (RFC 6333 section 5.3).
//!
//! The codecs are split by what they do: `b4` and `aftr` are the two ends
//! (the AFTR with its NAT44 tables and the ICMP it handles itself in
//! submodules), `inner_packet` the checks both run on the inner IPv4 packet,
//! `mss` the TCP MSS clamp, `icmp_errors` the rate-limited "fragmentation
//! needed" both generate, and `fuzz` the entry points of the cargo-fuzz
//! targets.

mod aftr;
mod b4;
#[doc(hidden)]
pub mod fuzz;
mod icmp_errors;
mod inner_packet;
mod mss;

use std::net::Ipv4Addr;

pub use aftr::{
    Aftr, AftrConfig, AftrConfigError, AftrStats, DEFAULT_MAX_MAPPINGS,
    DEFAULT_MAX_MAPPINGS_PER_B4, NatTimeouts, Softwire,
};
pub use b4::{B4, B4Config, B4Stats};
pub use mss::MssClamp;

/// The AFTR's end of every softwire (RFC 6333 section 5.7).
pub const AFTR_SOFTWIRE_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 1);
/// The B4's end of its softwire (RFC 6333 section 5.7); a B4 may source packets
/// from it, so every softwire allows it.
pub const B4_SOFTWIRE_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 2);
/// 1500 minus the 40-byte IPv6 header.
pub const DEFAULT_INNER_MTU: u16 = 1460;

/// 192.0.0.0/29, reserved for softwire ends (RFC 6333 section 5.7, RFC 7335):
/// never NATed to the internet.
fn in_softwire_block(a: Ipv4Addr) -> bool {
    u32::from(a) & 0xffff_fff8 == 0xc000_0000
}

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::test_support::*;
    use super::*;
    use crate::codec::{Codec, Verdict};
    use crate::wire::icmp_echo;
    use crate::wire::ipv4::l4;

    #[test]
    fn b4_and_aftr_in_memory_pair() {
        let mut b4 = b4();
        let mut aftr = aftr();
        let t0 = Instant::now();

        // LAN host -> B4 -> AFTR -> internet.
        let mut syn = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1460, false);
        let Verdict::ToNetwork(to) = b4.handle_tun(&mut syn, t0) else {
            panic!("B4 did not send the SYN");
        };
        assert_eq!(to, peer(AFTR6));
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut syn, t0),
            Verdict::ToTun
        );
        let (ext_addr, ext_port, dst, dport) = endpoints(&syn);
        assert_eq!((ext_addr, dst, dport), (POOL, SERVER, 443));
        assert_eq!(mss_of(&syn), 1420);
        assert_checksums(&syn);

        // The server answers with a SYN-ACK and its own MSS.
        let t1 = t0 + Duration::from_millis(30);
        let flags = l4::TCP_FLAG_SYN | l4::TCP_FLAG_ACK;
        let mut syn_ack = tcp(SERVER, 443, ext_addr, ext_port, flags, 1460, false);
        let Verdict::ToNetwork(to) = aftr.handle_tun(&mut syn_ack, t1) else {
            panic!("AFTR did not send the SYN-ACK");
        };
        assert_eq!(to, peer(B4_A));
        assert_eq!(
            b4.handle_network(peer(AFTR6), &mut syn_ack, t1),
            Verdict::ToTun
        );
        assert_eq!(endpoints(&syn_ack), (SERVER, 443, LAN_HOST, 40000));
        assert_eq!(mss_of(&syn_ack), 1420);
        assert_checksums(&syn_ack);

        // A ping goes out and its reply comes back by identifier.
        let mut ping = echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 77);
        assert!(matches!(
            b4.handle_tun(&mut ping, t1),
            Verdict::ToNetwork(_)
        ));
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut ping, t1),
            Verdict::ToTun
        );
        assert_checksums(&ping);
        let (src, id, ..) = endpoints(&ping);
        let mut pong = echo(SERVER, src, icmp_echo::Kind::Reply, id);
        assert_eq!(
            aftr.handle_tun(&mut pong, t1),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(
            b4.handle_network(peer(AFTR6), &mut pong, t1),
            Verdict::ToTun
        );
        assert_eq!(endpoints(&pong).2, LAN_HOST);
        assert_eq!(endpoints(&pong).3, 77);
        assert_checksums(&pong);
    }

    #[test]
    fn codecs_are_send() {
        fn send<T: Send>() {}
        send::<B4>();
        send::<Aftr>();
    }

    #[test]
    fn fuzz_entries_take_records() {
        fuzz::b4(&[0, 0, 32]);
        let mut rec = vec![0x02, 0, 32];
        rec.extend_from_slice(&LAN_UDP);
        fuzz::b4(&rec);
        let mut rec = vec![0x03, 0, 32];
        rec.extend_from_slice(&LAN_UDP);
        rec.extend_from_slice(&[0x10, 0, 32]);
        rec.extend_from_slice(&NATED_UDP);
        fuzz::aftr(&rec);
    }
}
