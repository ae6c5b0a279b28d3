use super::*;

fn key(seed: u8) -> StaticSecret {
    StaticSecret::from([seed; 32])
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Two endpoints that know each other: a at 198.18.0.1 (inner .1), b at
/// 198.18.0.2 (inner .2).
fn pair() -> (WireGuard, WireGuard) {
    pair_with(&["198.19.0.2/32"], &["198.19.0.1/32"])
}

/// The same two with other allowed IPs: b's (on a) and a's (on b).
fn pair_with(b_ips: &[&str], a_ips: &[&str]) -> (WireGuard, WireGuard) {
    let (ka, kb) = (key(1), key(2));
    let peer = |name: &str, k: &StaticSecret, ep: &str, ips: &[&str]| PeerConfig {
        name: name.into(),
        public: PublicKey::from(k),
        preshared: Some([7; 32]),
        endpoint: Some(addr(ep)),
        allowed_ips: ips.iter().map(|n| n.parse().unwrap()).collect(),
        keepalive: None,
    };
    let a = WireGuard::new(WireGuardConfig {
        private: ka.clone(),
        peers: vec![peer("b", &kb, "198.18.0.2:51820", b_ips)],
    });
    let b = WireGuard::new(WireGuardConfig {
        private: kb,
        peers: vec![peer("a", &ka, "198.18.0.1:51820", a_ips)],
    });
    (a, b)
}

/// An IPv4 UDP packet from src to dst with `n` payload bytes.
fn ipv4(src: [u8; 4], dst: [u8; 4], n: usize) -> Vec<u8> {
    let mut p = vec![0u8; 28 + n];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((28 + n) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    for (i, b) in p[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    p
}

const A: &str = "198.18.0.1:51820";
const B: &str = "198.18.0.2:51820";

/// Runs the handshake that `first` (a's packet to b) starts; returns the
/// data packet a queued meanwhile, as it came out of b's TUN.
fn handshake(a: &mut WireGuard, b: &mut WireGuard, first: &[u8]) -> Vec<u8> {
    let now = Instant::now();
    let mut p = first.to_vec();
    assert_eq!(a.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    assert_eq!(p.len(), 148, "a handshake initiation goes first");
    assert_eq!(
        b.handle_network(addr(A), &mut p, now),
        Verdict::ToNetwork(addr(A))
    );
    assert_eq!(p.len(), 92, "the response");
    assert_eq!(
        a.handle_network(addr(B), &mut p, now),
        Verdict::ToNetwork(addr(B))
    );
    assert_eq!(p.len(), 32, "a keepalive confirms the session");
    assert_eq!(b.handle_network(addr(A), &mut p, now), Verdict::Consumed);
    let (v, mut queued) = a.poll(now).expect("the packet that waited");
    assert_eq!(v, Verdict::ToNetwork(addr(B)));
    assert_eq!(b.handle_network(addr(A), &mut queued, now), Verdict::ToTun);
    queued
}

#[test]
fn packets_queued_during_the_handshake_arrive_and_data_flows_both_ways() {
    let (mut a, mut b) = pair();
    let now = Instant::now();
    let first = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 100);
    assert_eq!(handshake(&mut a, &mut b, &first), first);
    for n in [0, 1, 1000, 1392] {
        let sent = ipv4([198, 19, 0, 2], [198, 19, 0, 1], n);
        let mut p = sent.clone();
        assert_eq!(b.handle_tun(&mut p, now), Verdict::ToNetwork(addr(A)));
        // boringtun 0.7 does not pad to 16 bytes: exactly 32 more.
        assert_eq!(p.len(), sent.len() + DATA_OVERHEAD);
        assert_eq!(a.handle_network(addr(B), &mut p, now), Verdict::ToTun);
        assert_eq!(p, sent);
    }
    let s = a.status();
    assert_eq!(s[0].name, "b");
    assert!(s[0].rx_bytes > 0 && s[0].tx_bytes > 0);
    assert!(s[0].latest_handshake_secs.is_some());
}

/// A rekey must not grow the buffers the codec hands back: the driver
/// keeps them in its batch for good, so one 64 KiB buffer per handshake
/// is memory that grows for hours (the soak saw 128 KiB per rekey).
#[test]
fn rekeys_leave_the_driver_packet_sized_buffers() {
    let (mut a, mut b) = pair();
    let now = Instant::now();
    handshake(&mut a, &mut b, &ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10));
    // Full-size packets in driver-sized (2 KiB) buffers, one way.
    let one_way = |from: &mut WireGuard, to: &mut WireGuard, src: u8, dst: u8, via: &str| {
        for _ in 0..4 {
            let mut p = Vec::with_capacity(2048);
            p.extend(ipv4([198, 19, 0, src], [198, 19, 0, dst], 1392));
            assert!(matches!(
                from.handle_tun(&mut p, now),
                Verdict::ToNetwork(_)
            ));
            assert!(p.capacity() <= 4096, "sealed into {} B", p.capacity());
            assert_eq!(to.handle_network(addr(via), &mut p, now), Verdict::ToTun);
            assert!(p.capacity() <= 4096, "opened into {} B", p.capacity());
        }
    };
    let exchange = |a: &mut WireGuard, b: &mut WireGuard| {
        one_way(a, b, 1, 2, A);
        one_way(b, a, 2, 1, B);
    };
    exchange(&mut a, &mut b);
    for _ in 0..5 {
        // What a rekey does: a fresh initiation from a, answered by b.
        let mut init = vec![0u8; 2048];
        let n = match a.peers[0].tunn.format_handshake_initiation(&mut init, true) {
            TunnResult::WriteToNetwork(d) => d.len(),
            r => panic!("no initiation: {r:?}"),
        };
        init.truncate(n);
        assert!(matches!(
            b.handle_network(addr(A), &mut init, now),
            Verdict::ToNetwork(_)
        ));
        assert!(init.capacity() <= 4096, "response in {} B", init.capacity());
        let v = a.handle_network(addr(B), &mut init, now);
        assert!(
            matches!(v, Verdict::ToNetwork(_) | Verdict::Consumed),
            "{v:?}"
        );
        while let Some((_, q)) = a.poll(now).or_else(|| b.poll(now)) {
            assert!(q.capacity() <= 4096, "queued packet in {} B", q.capacity());
        }
        exchange(&mut a, &mut b);
    }
}

#[test]
fn a_replayed_data_packet_is_dropped() {
    let (mut a, mut b) = pair();
    let now = Instant::now();
    handshake(&mut a, &mut b, &ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10));
    let mut p = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 500);
    assert_eq!(a.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    let mut again = p.clone();
    assert_eq!(b.handle_network(addr(A), &mut p, now), Verdict::ToTun);
    assert_eq!(
        b.handle_network(addr(A), &mut again, now),
        Verdict::Drop(DropReason::Replayed)
    );
}

#[test]
fn garbage_truncated_and_spoofed_packets_are_dropped_and_named() {
    let (mut a, mut b) = pair();
    let now = Instant::now();
    for (junk, want) in [
        (vec![], DropReason::Truncated),
        (vec![1, 0, 0], DropReason::Truncated),
        (vec![0xff; 200], DropReason::Malformed),
        (
            vec![
                9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
            ],
            DropReason::Malformed,
        ),
    ] {
        let mut p = junk;
        assert_eq!(b.handle_network(addr(A), &mut p, now), Verdict::Drop(want));
    }
    // A handshake initiation cut short.
    let mut p = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10);
    assert_eq!(a.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    let mut cut = p[..100].to_vec();
    assert_eq!(
        b.handle_network(addr(A), &mut cut, now),
        Verdict::Drop(DropReason::Malformed)
    );
    // Data for a session that does not exist.
    let mut data = vec![4, 0, 0, 0, 1, 0, 0, 0];
    data.extend([0u8; 40]);
    assert_eq!(
        b.handle_network(addr(A), &mut data, now),
        Verdict::Drop(DropReason::NoSession)
    );
    // After a real handshake, an inner source outside a's allowed IPs.
    let (mut a, mut b) = pair();
    handshake(&mut a, &mut b, &ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10));
    let mut p = ipv4([198, 19, 0, 9], [198, 19, 0, 2], 10);
    assert_eq!(a.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    assert_eq!(
        b.handle_network(addr(A), &mut p, now),
        Verdict::Drop(DropReason::Spoofed)
    );
    // The kernel's router solicitation on a's TUN: no route, and said so.
    let mut rs = crate::codec::test_packets::router_solicitation();
    assert_eq!(
        a.handle_tun(&mut rs, now),
        Verdict::Drop(DropReason::LinkScope)
    );
    // a routes all IPv6 to b, but b allows a only 2001:2:0:1::/64: a
    // link-local source is link-scope chatter, another one spoofing.
    let (mut a, mut b) = pair_with(
        &["198.19.0.2/32", "::/0"],
        &["198.19.0.1/32", "2001:2:0:1::/64"],
    );
    handshake(&mut a, &mut b, &ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10));
    use crate::codec::test_packets::ipv6;
    for (mut p, want) in [
        (ipv6("fe80::1", "ff02::2", 133), DropReason::LinkScope),
        (
            ipv6("2001:2:0:9::1", "2001:2:0:2::1", 128),
            DropReason::Spoofed,
        ),
    ] {
        assert_eq!(a.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
        assert_eq!(b.handle_network(addr(A), &mut p, now), Verdict::Drop(want));
    }
    // Nothing routes to 203.0.113.1 on a.
    let mut p = ipv4([198, 19, 0, 1], [203, 0, 113, 1], 10);
    assert_eq!(
        a.handle_tun(&mut p, now),
        Verdict::Drop(DropReason::NoRoute)
    );
}

#[test]
fn a_peer_with_the_wrong_public_key_gets_nothing_through_and_is_logged() {
    let (_, mut b) = pair();
    let now = Instant::now();
    // c has a's address but its own key, which b does not know; c thinks
    // b's key is b's (so its MAC is right).
    let mut c = WireGuard::new(WireGuardConfig {
        private: key(3),
        peers: vec![PeerConfig {
            name: "b".into(),
            public: PublicKey::from(&key(2)),
            preshared: Some([7; 32]),
            endpoint: Some(addr(B)),
            allowed_ips: vec!["198.19.0.2/32".parse().unwrap()],
            keepalive: None,
        }],
    });
    let mut p = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10);
    assert_eq!(c.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    assert_eq!(
        b.handle_network(addr(A), &mut p, now),
        Verdict::Drop(DropReason::Unauthentic)
    );
    // d got b's public key wrong: its MAC fails at b.
    let mut d = WireGuard::new(WireGuardConfig {
        private: key(1),
        peers: vec![PeerConfig {
            name: "b".into(),
            public: PublicKey::from(&key(9)),
            preshared: None,
            endpoint: Some(addr(B)),
            allowed_ips: vec!["198.19.0.2/32".parse().unwrap()],
            keepalive: None,
        }],
    });
    let mut p = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10);
    assert_eq!(d.handle_tun(&mut p, now), Verdict::ToNetwork(addr(B)));
    assert_eq!(
        b.handle_network(addr(A), &mut p, now),
        Verdict::Drop(DropReason::Unauthentic)
    );
    let notes = b.take_notes().join("\n");
    assert!(notes.contains("MAC"), "{notes}");
    assert!(b.poll(now).is_none(), "nothing is answered");
}

#[test]
fn a_flood_of_handshake_initiations_is_limited_and_the_codec_keeps_working() {
    let (mut a, mut b) = pair();
    let now = Instant::now();
    let mut init = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10);
    assert_eq!(a.handle_tun(&mut init, now), Verdict::ToNetwork(addr(B)));
    let mut answered = 0;
    let mut limited = 0;
    for _ in 0..1000 {
        let mut p = init.clone();
        match b.handle_network(addr(A), &mut p, now) {
            Verdict::ToNetwork(_) if p.len() == 92 => answered += 1,
            // Under load, a cookie reply (64 bytes) instead.
            Verdict::ToNetwork(_) if p.len() == 64 => limited += 1,
            Verdict::Drop(DropReason::RateLimited | DropReason::Replayed) => limited += 1,
            v => panic!("unexpected {v:?}"),
        }
    }
    assert!(
        answered <= HANDSHAKE_RATE_LIMIT as usize + 1,
        "{answered} answered"
    );
    assert!(
        limited >= 1000 - HANDSHAKE_RATE_LIMIT as usize - 1,
        "{limited} limited"
    );
    // A second later the limiter has reset and a fresh pair still works.
    b.tick(now + Duration::from_secs(2));
    let (mut a2, mut b2) = pair();
    let first = ipv4([198, 19, 0, 1], [198, 19, 0, 2], 10);
    assert_eq!(handshake(&mut a2, &mut b2, &first), first);
}
