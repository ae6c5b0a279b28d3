//! The slow path's codec: plain packets and super-packets through it, with and
//! without a device model, a super-packet metered as the frames it carries.

use super::*;
use crate::codec::profile::{Ceiling, Way};
use crate::codec::vnet_header::{F_NEEDS_CSUM, GSO_TCPV4};
use crate::vocab::{Family, Proto};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const ZERO_HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

fn framed(hdr: &[u8], ip: &[u8]) -> Vec<u8> {
    [hdr, ip].concat()
}

/// IPv4 TCP from the LAN (198.18.11.2) out (198.18.1.10), a 32-byte TCP
/// header, `payload` bytes.
fn v4_tcp(payload: usize) -> Vec<u8> {
    let total = 20 + 32 + payload;
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[9] = 6;
    p[12..16].copy_from_slice(&[198, 18, 11, 2]);
    p[16..20].copy_from_slice(&[198, 18, 1, 10]);
    p[20..22].copy_from_slice(&40000u16.to_be_bytes());
    p[22..24].copy_from_slice(&5201u16.to_be_bytes());
    p[32] = 8 << 4;
    p
}

fn tso_header(gso_size: u16) -> [u8; VNET_HDR_LEN] {
    VirtioNetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4,
        hdr_len: 52,
        gso_size,
        csum_start: 20,
        csum_offset: 16,
    }
    .to_bytes()
}

/// A TSO super-packet of `n` frames of `size` payload bytes.
fn tso(n: usize, size: usize) -> Vec<u8> {
    framed(&tso_header(size as u16), &v4_tcp(n * size))
}

/// The same `n` frames, each on its own.
fn frames_of(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| framed(&ZERO_HDR, &v4_tcp(size))).collect()
}

/// IPv4 TCP upload limited to `bps` of payload, queues of `queue_packets`.
fn model(bps: u64, queue_packets: u32) -> DeviceModel {
    DeviceModel {
        profile: "t".into(),
        mode: "m".into(),
        description: None,
        lan: vec!["198.18.11.0/24".parse().unwrap()],
        ceilings: vec![Ceiling {
            direction: Some(Way::Upload),
            family: Some(Family::Ipv4),
            protocol: Some(Proto::Tcp),
            aggregate_bps: Some(bps),
            flow_bps: None,
        }],
        queue_packets,
        bypass: vec![],
    }
}

#[test]
fn ip_packets_go_back_unchanged_and_are_counted_per_family() {
    let mut s = SlowPath::new();
    let now = Instant::now();
    let mut a = framed(&ZERO_HDR, &v4_tcp(8));
    let want = a.clone();
    assert!(s.takes_super_packets());
    assert_eq!(s.handle_tun(&mut a, now), Verdict::ToTun);
    assert_eq!(a, want, "the slow path does not rewrite packets");
    let mut v6 = vec![0u8; 48];
    v6[0] = 0x60;
    let mut b = framed(&ZERO_HDR, &v6);
    assert_eq!(s.handle_tun(&mut b, now), Verdict::ToTun);
    assert_eq!(s.counts(), Counts { ipv4: 1, ipv6: 1 });
}

#[test]
fn non_ip_short_and_malformed_packets_are_dropped() {
    let mut s = SlowPath::new();
    let now = Instant::now();
    let mut ufo = tso(3, 1000);
    ufo[1] = 3; // GSO_UDP: UFO, which carries no frame count we can read
    let mut no_size = tso(3, 1000);
    no_size[4..6].copy_from_slice(&[0, 0]);
    for (mut p, why) in [
        (vec![], DropReason::Truncated),
        (vec![0; 9], DropReason::Truncated),
        (framed(&ZERO_HDR, &[]), DropReason::Truncated),
        (framed(&ZERO_HDR, &[0x45; 10]), DropReason::Truncated),
        (framed(&ZERO_HDR, &[0x60; 39]), DropReason::Truncated),
        (framed(&ZERO_HDR, &[0x20; 60]), DropReason::Malformed),
        (ufo, DropReason::Malformed),
        (no_size, DropReason::Malformed),
    ] {
        assert_eq!(s.handle_tun(&mut p, now), Verdict::Drop(why), "{p:?}");
    }
    assert_eq!(s.counts(), Counts::default());
    // And it goes on with the next packet.
    assert_eq!(s.handle_tun(&mut tso(3, 1000), now), Verdict::ToTun);
}

#[test]
fn a_super_packet_goes_back_whole_with_its_header_byte_for_byte() {
    // A TSO IPv4 super-packet's header as the kernel writes it on x86-64:
    // NEEDS_CSUM, TCPV4, hdr_len 66, gso_size 1448, csum_start 20, offset 16.
    #[rustfmt::skip]
    let golden: [u8; VNET_HDR_LEN] = [
        0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x14, 0x00, 0x10, 0x00,
    ];
    let mut p = framed(&golden, &v4_tcp(3000));
    let want = p.clone();
    let mut s = SlowPath::new();
    assert_eq!(s.handle_tun(&mut p, Instant::now()), Verdict::ToTun);
    assert_eq!(p, want);
    assert_eq!(p[..VNET_HDR_LEN], golden);
    if cfg!(target_endian = "little") {
        assert_eq!(s.counts().ipv4, 3, "1448 + 1448 + 104 bytes: 3 frames");
    }
}

#[test]
fn a_super_packet_under_a_model_leaves_whole_when_its_last_frame_would() {
    // 8 Mbit/s: a 1000-byte payload takes 1 ms. Four frames one at a time
    // leave at 0, 1, 2 and 3 ms; whole, they all leave at 3 ms: never ahead
    // of what a serial link of the ceiling's rate could carry.
    let m = model(8_000_000, 64);
    let t0 = Instant::now();
    let mut whole = SlowPath::with_model(&m, t0);
    let mut apart = SlowPath::with_model(&m, t0);
    assert_eq!(whole.handle_tun(&mut tso(4, 1000), t0), Verdict::Queued);
    let v: Vec<Verdict> = frames_of(4, 1000)
        .iter_mut()
        .map(|f| apart.handle_tun(f, t0))
        .collect();
    assert_eq!(v[0], Verdict::ToTun);
    assert!(v[1..].iter().all(|v| *v == Verdict::Queued), "{v:?}");
    assert_eq!(whole.counts(), apart.counts());
    assert_eq!(whole.deadline(), Some(t0 + 3 * MS));
    assert!(whole.poll(t0 + 3 * MS - Duration::from_micros(1)).is_none());
    let out = whole.poll(t0 + 3 * MS).map(|(_, p)| frames(&p));
    assert_eq!(out, Some(Ok(4)), "the four frames, at 3 ms");
    // A packet behind them leaves at 4 ms either way, not before.
    for s in [&mut whole, &mut apart] {
        let mut next = framed(&ZERO_HDR, &v4_tcp(1000));
        assert_eq!(s.handle_tun(&mut next, t0), Verdict::Queued);
        let mut out = 0;
        let mut t = t0;
        while t < t0 + 4 * MS {
            while s.poll(t).is_some() {
                out += 1;
            }
            t += Duration::from_micros(100);
        }
        let last = s.poll(t0 + 4 * MS).map(|(_, p)| p.len());
        assert_eq!(last, Some(VNET_HDR_LEN + 52 + 1000), "after {out} before");
        assert_eq!(s.poll(t0 + 10 * MS), None);
    }
}

#[test]
fn a_super_packet_the_model_would_drop_in_part_comes_back_to_be_split() {
    // 1 ms a frame; queues of 2 frames, or up to 20 ms of waiting.
    let m = model(8_000_000, 2);
    let t0 = Instant::now();
    let mut s = SlowPath::with_model(&m, t0);
    // 19 frames at once: the first leaves, 18 wait, the class is busy to 19 ms.
    for f in frames_of(19, 1000).iter_mut() {
        assert_ne!(s.handle_tun(f, t0), Verdict::Drop(DropReason::QueueFull));
    }
    let counts = s.counts();
    // Four more would start at 19, 20, 21 and 22 ms: the last two over 20 ms.
    let mut p = tso(4, 1000);
    let want = p.clone();
    assert_eq!(s.handle_tun(&mut p, t0), Verdict::Split);
    assert_eq!(p, want, "not taken");
    assert_eq!(s.counts(), counts, "not counted");
    // Cut, its frames meet what they would have met.
    let v: Vec<Verdict> = frames_of(4, 1000)
        .iter_mut()
        .map(|f| s.handle_tun(f, t0))
        .collect();
    let full = Verdict::Drop(DropReason::QueueFull);
    assert_eq!(v, [Verdict::Queued, Verdict::Queued, full, full]);
    // Wholly over: dropped whole, as each of its frames would be.
    assert_eq!(s.handle_tun(&mut tso(4, 1000), t0), full);
}

/// What a simulated second of TCP upload made of the model.
#[derive(Debug, Default)]
struct Run {
    delivered: usize,
    dropped: usize,
    /// Super-packets taken whole.
    whole: usize,
}

/// Offers TCP upload at `load` times a `bps` ceiling for a simulated second,
/// as super-packets of `n` 1000-byte frames (cut where the model asks, as
/// the driver would) or as the frames themselves.
fn simulate(n: usize, whole: bool, bps: u64, load: f64) -> Run {
    let t0 = Instant::now();
    let mut s = SlowPath::with_model(&model(bps, 8), t0);
    let mut run = Run::default();
    let payload = |p: &[u8]| p.len() - VNET_HDR_LEN - 52;
    let every = Duration::from_secs_f64((n * 8000) as f64 / (bps as f64 * load));
    let step = Duration::from_micros(20);
    let mut t = t0;
    let mut next = t0;
    while t < t0 + Duration::from_secs(1) {
        if t >= next {
            next += every;
            let batch = if whole {
                vec![tso(n, 1000)]
            } else {
                frames_of(n, 1000)
            };
            for mut p in batch {
                match s.handle_tun(&mut p, t) {
                    Verdict::ToTun => {
                        run.delivered += payload(&p);
                        run.whole += usize::from(whole);
                    }
                    Verdict::Queued => run.whole += usize::from(whole),
                    Verdict::Drop(_) => run.dropped += frames(&p).unwrap(),
                    Verdict::Split => {
                        for mut f in frames_of(n, 1000) {
                            match s.handle_tun(&mut f, t) {
                                Verdict::ToTun => run.delivered += payload(&f),
                                Verdict::Drop(_) => run.dropped += 1,
                                _ => {}
                            }
                        }
                    }
                    v => panic!("{v:?}"),
                }
            }
        }
        while let Some((_, p)) = s.poll(t) {
            run.delivered += payload(&p);
        }
        t += step;
    }
    run
}

#[test]
fn super_packets_are_metered_as_the_frames_they_carry() {
    // Overloaded 2x at 8 Mbit/s, where the queue (8 frames or 20 ms) is full
    // and a super-packet of 44 frames (44 ms) is cut; 1.5x at 80 Mbit/s,
    // where one of 44 is 4.4 ms; under the ceiling at 800 Mbit/s.
    for (bps, load, n) in [
        (8_000_000, 2.0, 4),
        (8_000_000, 2.0, 44),
        (80_000_000, 1.5, 10),
        (80_000_000, 1.5, 44),
        (800_000_000, 0.8, 44),
    ] {
        let w = simulate(n, true, bps, load);
        let a = simulate(n, false, bps, load);
        let what = format!("{bps} bit/s x {load}, {n} frames: {w:?} vs {a:?}");
        // The same payload through within one super-packet's, as many frames
        // dropped within one super-packet's.
        let second = bps as f64 / 8.0 * load.min(1.0);
        assert!((a.delivered as f64) > second * 0.9, "{what}");
        assert!(w.delivered.abs_diff(a.delivered) <= n * 1000, "{what}");
        assert!(w.dropped.abs_diff(a.dropped) <= n, "{what}");
        if bps > 8_000_000 {
            assert!(w.whole > 0, "{what}");
        }
    }
}
