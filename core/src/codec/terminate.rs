//! A tunnel end on a device that terminates it (`[terminations.KIND]` of a
//! router profile): the device's own CPU or crypto engine caps the inner
//! traffic, so the end's codec is wrapped in one that offers every inner
//! packet to a `DeviceShaper` at the device end of the tunnel, before it is
//! encapsulated (read from the TUN) and after it is decapsulated (on its way
//! into the TUN). Held packets come back through `poll` when their time
//! comes: an outgoing one is encapsulated then, so a sequence number or a
//! counter is taken in the order packets leave.
//!
//! Without a model the wrapper hands every packet straight to the codec it
//! wraps, so every end can be built the same way.

use crate::codec::device_model::DeviceShaper;
use crate::codec::profile::{TerminationModel, Way};
use crate::codec::shape::Offer;
use crate::codec::{Codec, Drain, DropReason, Verdict};
use std::net::SocketAddr;
use std::time::Instant;

/// The two shapers, one per direction through the end (each holds its own
/// queue, so `poll` knows which way a released packet goes).
struct Shapers {
    /// Inner packets from the TUN, to be encapsulated.
    out: DeviceShaper,
    out_way: Way,
    /// Decapsulated inner packets, for the TUN.
    into_tun: DeviceShaper,
    into_tun_way: Way,
}

pub struct Terminated<C> {
    inner: C,
    shapers: Option<Shapers>,
}

impl<C: Codec> Terminated<C> {
    /// `codec` with `model`'s ceilings on its inner packets, or alone.
    pub fn new(codec: C, model: Option<&TerminationModel>, now: Instant) -> Terminated<C> {
        let shapers = model.map(|m| {
            let out_way = m.tun_way();
            Shapers {
                out: DeviceShaper::for_termination(m, now),
                out_way,
                into_tun: DeviceShaper::for_termination(m, now),
                into_tun_way: match out_way {
                    Way::Upload => Way::Download,
                    Way::Download => Way::Upload,
                },
            }
        });
        Terminated {
            inner: codec,
            shapers,
        }
    }

    /// The codec inside (its notes, its status).
    pub fn inner_mut(&mut self) -> &mut C {
        &mut self.inner
    }
}

fn verdict(o: Offer, pass: Verdict) -> Verdict {
    match o {
        Offer::Pass => pass,
        Offer::Queued => Verdict::Queued,
        Offer::Dropped => Verdict::Drop(DropReason::QueueFull),
    }
}

impl<C: Codec> Codec for Terminated<C> {
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        if let Some(s) = self.shapers.as_mut() {
            match s.out.offer_way(now, s.out_way, packet) {
                Offer::Pass => {}
                o => return verdict(o, Verdict::Queued),
            }
        }
        self.inner.handle_tun(packet, now)
    }

    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let v = self.inner.handle_network(peer, packet, now);
        match (v, self.shapers.as_mut()) {
            (Verdict::ToTun, Some(s)) => {
                verdict(s.into_tun.offer_way(now, s.into_tun_way, packet), v)
            }
            _ => v,
        }
    }

    fn poll(&mut self, now: Instant) -> Option<(Verdict, Vec<u8>)> {
        if let Some(x) = self.inner.poll(now) {
            return Some(x);
        }
        let s = self.shapers.as_mut()?;
        if let Some(p) = s.into_tun.poll(now) {
            return Some((Verdict::ToTun, p));
        }
        let mut p = s.out.poll(now)?;
        let v = self.inner.handle_tun(&mut p, now);
        Some((v, p))
    }

    /// Each way's held packets to the thread that writes that way: the
    /// decapsulated ones to the TUN writer, the ones to encapsulate to the
    /// network sender, so a released packet never races a newer passed one
    /// of its flow written by the other thread.
    fn poll_for(&mut self, now: Instant, drain: Drain) -> Option<(Verdict, Vec<u8>)> {
        if let Some(x) = self.inner.poll_for(now, drain) {
            return Some(x);
        }
        let s = self.shapers.as_mut()?;
        match drain {
            Drain::IntoTun => s.into_tun.poll(now).map(|p| (Verdict::ToTun, p)),
            Drain::IntoNetwork => {
                let mut p = s.out.poll(now)?;
                let v = self.inner.handle_tun(&mut p, now);
                Some((v, p))
            }
        }
    }

    fn tick(&mut self, now: Instant) {
        self.inner.tick(now);
        if let Some(s) = self.shapers.as_mut() {
            s.out.expire(now);
            s.into_tun.expire(now);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        let own = self
            .shapers
            .as_ref()
            .map(|s| [s.out.deadline(), s.into_tun.deadline()])
            .into_iter()
            .flatten()
            .flatten();
        self.inner.deadline().into_iter().chain(own).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::profile::Ceiling;
    use std::time::Duration;

    /// A stand-in tunnel: "encapsulates" by prefixing one byte 0xee, and
    /// "decapsulates" by taking it off.
    struct Prefix;

    const PEER: &str = "198.18.11.2:0";

    impl Codec for Prefix {
        fn handle_tun(&mut self, packet: &mut Vec<u8>, _: Instant) -> Verdict {
            packet.insert(0, 0xee);
            Verdict::ToNetwork(PEER.parse().unwrap())
        }
        fn handle_network(&mut self, _: SocketAddr, packet: &mut Vec<u8>, _: Instant) -> Verdict {
            if packet.first() != Some(&0xee) {
                return Verdict::Drop(DropReason::Malformed);
            }
            packet.remove(0);
            Verdict::ToTun
        }
    }

    /// An IPv4 UDP packet with `payload` bytes of payload.
    fn v4_udp(payload: usize) -> Vec<u8> {
        let total = 28 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = 17;
        p[12..16].copy_from_slice(&[198, 18, 94, 2]);
        p[16..20].copy_from_slice(&[198, 18, 1, 10]);
        p
    }

    /// 8000 bit/s upload, 16000 download: a 1000-byte payload takes 1 s
    /// upload, 0.5 s download.
    fn model(kind: &str) -> TerminationModel {
        let c = |direction, bps| Ceiling {
            direction: Some(direction),
            family: None,
            protocol: None,
            aggregate_bps: Some(bps),
            flow_bps: None,
        };
        TerminationModel {
            profile: "t".into(),
            kind: kind.into(),
            description: None,
            ceilings: vec![c(Way::Upload, 8000), c(Way::Download, 16000)],
            queue_packets: 10,
        }
    }

    /// The gap between the first held packet's release and the time it was
    /// offered, for a burst of two packets through `send`.
    fn held_for(
        t: &mut Terminated<Prefix>,
        t0: Instant,
        send: impl Fn(&mut Terminated<Prefix>, &mut Vec<u8>) -> Verdict,
        released: Verdict,
    ) -> Duration {
        let mut first = v4_udp(1000);
        assert_ne!(send(t, &mut first), Verdict::Queued, "the first passes");
        let mut second = v4_udp(1000);
        assert_eq!(send(t, &mut second), Verdict::Queued);
        assert!(second.is_empty(), "the shaper took the packet");
        let at = t.deadline().expect("a held packet has a deadline");
        assert!(t.poll(at - Duration::from_millis(1)).is_none());
        let (v, p) = t.poll(at).expect("released at its deadline");
        assert_eq!(v, released);
        let want = if v == Verdict::ToTun { 1028 } else { 1029 };
        assert_eq!(p.len(), want, "{v:?}");
        at - t0
    }

    #[test]
    fn a_vpn_server_shapes_what_its_clients_send_as_upload() {
        let t0 = Instant::now();
        let mut t = Terminated::new(Prefix, Some(&model("l2tp")), t0);
        let peer: SocketAddr = PEER.parse().unwrap();
        // Decapsulated (from the client): upload, 1 s per packet.
        let up = held_for(
            &mut t,
            t0,
            |t, p| {
                p.insert(0, 0xee);
                t.handle_network(peer, p, t0)
            },
            Verdict::ToTun,
        );
        assert_eq!(up, Duration::from_secs(1));
        // From the TUN (to the client): download, 0.5 s, encapsulated on release.
        let mut t = Terminated::new(Prefix, Some(&model("l2tp")), t0);
        let down = held_for(
            &mut t,
            t0,
            |t, p| t.handle_tun(p, t0),
            Verdict::ToNetwork(peer),
        );
        assert_eq!(down, Duration::from_millis(500));
    }

    /// Each thread drains only its own way's held packets: the decapsulated
    /// ones go to the TUN writer, the ones to encapsulate to the sender.
    /// Drained by the other thread, a released packet raced the newer ones
    /// its flow passed meanwhile and left out of order.
    #[test]
    fn each_thread_drains_only_its_own_ways_held_packets() {
        let t0 = Instant::now();
        let peer: SocketAddr = PEER.parse().unwrap();
        let mut t = Terminated::new(Prefix, Some(&model("l2tp")), t0);
        // Fill both ways past their ceilings, so each holds packets.
        for _ in 0..3 {
            let mut p = v4_udp(1000);
            p.insert(0, 0xee);
            t.handle_network(peer, &mut p, t0);
            let mut q = v4_udp(1000);
            t.handle_tun(&mut q, t0);
        }
        let later = t0 + Duration::from_secs(10);
        let mut into_tun = 0;
        while let Some((v, _)) = t.poll_for(later, Drain::IntoTun) {
            assert_eq!(
                v,
                Verdict::ToTun,
                "the TUN writer gets only TUN-bound packets"
            );
            into_tun += 1;
        }
        let mut into_net = 0;
        while let Some((v, _)) = t.poll_for(later, Drain::IntoNetwork) {
            assert_eq!(
                v,
                Verdict::ToNetwork(peer),
                "the sender gets only network-bound ones"
            );
            into_net += 1;
        }
        assert!(
            into_tun > 0 && into_net > 0,
            "{into_tun} and {into_net} released"
        );
    }

    #[test]
    fn a_b4_shapes_what_it_encapsulates_as_upload() {
        let t0 = Instant::now();
        let peer: SocketAddr = PEER.parse().unwrap();
        let mut t = Terminated::new(Prefix, Some(&model("dslite")), t0);
        let up = held_for(
            &mut t,
            t0,
            |t, p| t.handle_tun(p, t0),
            Verdict::ToNetwork(peer),
        );
        assert_eq!(up, Duration::from_secs(1));
        let mut t = Terminated::new(Prefix, Some(&model("dslite")), t0);
        let down = held_for(
            &mut t,
            t0,
            |t, p| {
                p.insert(0, 0xee);
                t.handle_network(peer, p, t0)
            },
            Verdict::ToTun,
        );
        assert_eq!(down, Duration::from_millis(500));
    }

    #[test]
    fn without_a_model_every_packet_goes_straight_through() {
        let t0 = Instant::now();
        let peer: SocketAddr = PEER.parse().unwrap();
        let mut t = Terminated::new(Prefix, None, t0);
        for _ in 0..100 {
            let mut p = v4_udp(1000);
            assert_eq!(t.handle_tun(&mut p, t0), Verdict::ToNetwork(peer));
            assert_eq!(p.len(), 1029);
            assert_eq!(t.handle_network(peer, &mut p, t0), Verdict::ToTun);
            assert_eq!(p.len(), 1028);
        }
        assert_eq!(t.deadline(), None);
        assert!(t.poll(t0 + Duration::from_secs(10)).is_none());
    }

    #[test]
    fn what_the_codec_drops_is_not_metered() {
        let t0 = Instant::now();
        let peer: SocketAddr = PEER.parse().unwrap();
        let mut t = Terminated::new(Prefix, Some(&model("l2tp")), t0);
        for _ in 0..5 {
            let mut bad = v4_udp(1000);
            assert_eq!(
                t.handle_network(peer, &mut bad, t0),
                Verdict::Drop(DropReason::Malformed)
            );
        }
        let mut good = v4_udp(1000);
        good.insert(0, 0xee);
        assert_eq!(t.handle_network(peer, &mut good, t0), Verdict::ToTun);
    }
}
