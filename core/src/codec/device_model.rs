//! A router's device model in the slow path: each forwarded packet is sorted
//! into a class (direction x family x protocol) and a flow (5-tuple), and the
//! class's ceilings from the profile hold it back or drop it.
//!
//! Ceilings meter transport payload (TCP or UDP payload, the IP payload for
//! anything else): the profile's figures are what iperf3 counted through the
//! real device, so the model counts the same thing.

use crate::codec::profile::{Ceiling, DeviceModel, TerminationModel, Way, way_to};
use crate::codec::shape::{Limits, Offer, Shaper};
use crate::vocab::{Family, Proto};
use ipnetwork::IpNetwork;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

/// A packet's 5-tuple (ports 0 where there are none to read).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowKey {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    sport: u16,
    dport: u16,
}

/// What the model reads from a packet.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub family: Family,
    /// None: neither TCP nor UDP.
    pub protocol: Option<Proto>,
    pub flow: FlowKey,
    pub payload_bytes: usize,
}

const TCP: u8 = 6;
const UDP: u8 = 17;

/// Reads family, protocol, 5-tuple and payload length; None for a packet too
/// short or not IP (the slow path has already dropped those).
pub fn classify(p: &[u8]) -> Option<Classified> {
    let (family, src, dst, protocol, l4, ip_end, first_fragment) = match p.first()? >> 4 {
        4 if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([p[2], p[3]])).min(p.len());
            let offset = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
            let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            (
                Family::Ipv4,
                IpAddr::V4(src),
                IpAddr::V4(dst),
                p[9],
                ihl.min(total),
                total,
                offset == 0,
            )
        }
        6 if p.len() >= 40 => {
            let plen = usize::from(u16::from_be_bytes([p[4], p[5]]));
            let src: [u8; 16] = p[8..24].try_into().ok()?;
            let dst: [u8; 16] = p[24..40].try_into().ok()?;
            (
                Family::Ipv6,
                IpAddr::V6(Ipv6Addr::from(src)),
                IpAddr::V6(Ipv6Addr::from(dst)),
                p[6],
                40,
                (40 + plen).min(p.len()),
                true,
            )
        }
        _ => return None,
    };
    let l4_bytes = &p[l4..ip_end];
    let ports = |b: &[u8]| {
        (b.len() >= 4 && first_fragment).then(|| {
            (
                u16::from_be_bytes([b[0], b[1]]),
                u16::from_be_bytes([b[2], b[3]]),
            )
        })
    };
    let (proto, (sport, dport), payload) = match protocol {
        TCP if first_fragment && l4_bytes.len() >= 20 => {
            let header = (usize::from(l4_bytes[12] >> 4) * 4).min(l4_bytes.len());
            (
                Some(Proto::Tcp),
                ports(l4_bytes).unwrap_or((0, 0)),
                l4_bytes.len() - header,
            )
        }
        UDP if first_fragment && l4_bytes.len() >= 8 => (
            Some(Proto::Udp),
            ports(l4_bytes).unwrap_or((0, 0)),
            l4_bytes.len() - 8,
        ),
        // Later fragments carry payload of their protocol but no ports.
        TCP => (Some(Proto::Tcp), (0, 0), l4_bytes.len()),
        UDP => (Some(Proto::Udp), (0, 0), l4_bytes.len()),
        _ => (None, (0, 0), l4_bytes.len()),
    };
    Some(Classified {
        family,
        protocol: proto,
        flow: FlowKey {
            src,
            dst,
            protocol,
            sport,
            dport,
        },
        payload_bytes: payload,
    })
}

const WAYS: [Way; 2] = [Way::Upload, Way::Download];
const FAMILIES: [Family; 2] = [Family::Ipv4, Family::Ipv6];
const PROTOCOLS: [Option<Proto>; 3] = [Some(Proto::Tcp), Some(Proto::Udp), None];

fn class_index(way: Way, family: Family, protocol: Option<Proto>) -> usize {
    let w = WAYS.iter().position(|x| *x == way).unwrap_or(0);
    let f = FAMILIES.iter().position(|x| *x == family).unwrap_or(0);
    let p = PROTOCOLS.iter().position(|x| *x == protocol).unwrap_or(2);
    (w * FAMILIES.len() + f) * PROTOCOLS.len() + p
}

/// The limits of every class: the tightest of the ceilings that match it.
fn class_limits(ceilings: &[Ceiling]) -> Vec<Limits> {
    let mut out = vec![Limits::default(); WAYS.len() * FAMILIES.len() * PROTOCOLS.len()];
    let tighter = |a: Option<f64>, b: Option<u64>| match (a, b.map(|b| b as f64)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    for way in WAYS {
        for family in FAMILIES {
            for protocol in PROTOCOLS {
                let l = &mut out[class_index(way, family, protocol)];
                for c in ceilings {
                    if c.matches(way, family, protocol) {
                        l.aggregate_bps = tighter(l.aggregate_bps, c.aggregate_bps);
                        l.flow_bps = tighter(l.flow_bps, c.flow_bps);
                    }
                }
            }
        }
    }
    out
}

/// How long a packet may wait in a model's queue beyond its `queue_packets`:
/// a queue sized in time, as a router's buffer in front of a slower stage is.
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

pub struct DeviceShaper {
    lan: Vec<IpNetwork>,
    bypass: Vec<IpNetwork>,
    shaper: Shaper<FlowKey>,
}

impl DeviceShaper {
    pub fn new(model: &DeviceModel, now: Instant) -> DeviceShaper {
        DeviceShaper {
            lan: model.lan.clone(),
            bypass: model.bypass.clone(),
            shaper: Shaper::new(
                class_limits(&model.ceilings),
                model.queue_packets,
                MAX_WAIT,
                now,
            ),
        }
    }

    /// The shaper of a tunnel end's termination ceilings: its caller says
    /// which way each packet goes (`offer_way`).
    pub fn for_termination(model: &TerminationModel, now: Instant) -> DeviceShaper {
        DeviceShaper {
            lan: Vec::new(),
            bypass: Vec::new(),
            shaper: Shaper::new(
                class_limits(&model.ceilings),
                model.queue_packets,
                MAX_WAIT,
                now,
            ),
        }
    }

    /// Offers one packet going `way`; on `Queued` the model has taken it.
    pub fn offer_way(&mut self, now: Instant, way: Way, packet: &mut Vec<u8>) -> Offer {
        let Some(c) = classify(packet) else {
            return Offer::Pass;
        };
        let class = class_index(way, c.family, c.protocol);
        let bits = c.payload_bytes as f64 * 8.0;
        self.shaper.offer(now, class, c.flow, bits, packet)
    }

    fn way(&self, dst: IpAddr) -> Way {
        way_to(&self.lan, dst)
    }

    /// Offers one forwarded packet; on `Queued` the model has taken it.
    pub fn offer(&mut self, now: Instant, packet: &mut Vec<u8>) -> Offer {
        self.offer_frames(now, packet, 0, 1)
            .unwrap_or(Offer::Dropped)
    }

    /// Offers a forwarded packet that starts `at` bytes into `packet` (after
    /// its virtio-net header) and carries `frames` wire packets: a
    /// super-packet's payload is its frames' together, and its queues count
    /// its frames. On `Queued` the model has taken the whole buffer. None when
    /// the model would drop part of it: nothing has changed, and its frames
    /// are to be offered one by one.
    pub fn offer_frames(
        &mut self,
        now: Instant,
        packet: &mut Vec<u8>,
        at: usize,
        frames: u32,
    ) -> Option<Offer> {
        let Some(c) = packet.get(at..).and_then(classify) else {
            return Some(Offer::Pass);
        };
        if self
            .bypass
            .iter()
            .any(|n| n.contains(c.flow.src) || n.contains(c.flow.dst))
        {
            return Some(Offer::Pass);
        }
        let class = class_index(self.way(c.flow.dst), c.family, c.protocol);
        let bits = c.payload_bytes as f64 * 8.0;
        self.shaper
            .offer_frames(now, class, c.flow, frames, bits, packet)
    }

    pub fn poll(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.shaper.poll(now)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.shaper.deadline()
    }

    pub fn expire(&mut self, now: Instant) {
        self.shaper.expire(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::profile::Ceiling;

    fn v4_tcp(payload: usize) -> Vec<u8> {
        let total = 20 + 32 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = TCP;
        p[12..16].copy_from_slice(&[198, 18, 11, 2]);
        p[16..20].copy_from_slice(&[198, 18, 1, 10]);
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5201u16.to_be_bytes());
        p[32] = 8 << 4; // data offset: 32 bytes with options
        p
    }

    fn v6_udp(payload: usize, dst_last: u8) -> Vec<u8> {
        let mut p = vec![0u8; 48 + payload];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        p[6] = UDP;
        p[8..10].copy_from_slice(&[0x20, 0x01]);
        p[24..26].copy_from_slice(&[0x20, 0x01]);
        p[39] = dst_last;
        p[40..42].copy_from_slice(&5201u16.to_be_bytes());
        p[42..44].copy_from_slice(&40001u16.to_be_bytes());
        p
    }

    #[test]
    fn payload_and_five_tuple_are_read_per_protocol() {
        let c = classify(&v4_tcp(1448)).unwrap();
        assert_eq!(
            (c.family, c.protocol, c.payload_bytes),
            (Family::Ipv4, Some(Proto::Tcp), 1448)
        );
        assert_eq!((c.flow.sport, c.flow.dport), (40000, 5201));
        let c = classify(&v6_udp(1440, 1)).unwrap();
        assert_eq!(
            (c.family, c.protocol, c.payload_bytes),
            (Family::Ipv6, Some(Proto::Udp), 1440)
        );
        // A later IPv4 fragment: its protocol's payload, no ports.
        let mut frag = v4_tcp(100);
        frag[6..8].copy_from_slice(&100u16.to_be_bytes());
        let c = classify(&frag).unwrap();
        assert_eq!((c.flow.sport, c.payload_bytes), (0, 32 + 100));
        assert_eq!(classify(&[0x45; 10]), None);
        assert_eq!(classify(&[0x20; 60]), None);
    }

    fn model(ceilings: Vec<Ceiling>) -> DeviceModel {
        DeviceModel {
            profile: "t".into(),
            mode: "m".into(),
            description: None,
            lan: vec![
                "2001::1/128".parse().unwrap(),
                "198.18.11.0/24".parse().unwrap(),
            ],
            ceilings,
            queue_packets: 10,
            bypass: vec!["198.18.94.0/24".parse().unwrap()],
        }
    }

    #[test]
    fn the_tightest_matching_ceiling_applies_to_each_class() {
        let m = model(vec![
            Ceiling {
                direction: None,
                family: None,
                protocol: None,
                aggregate_bps: Some(900),
                flow_bps: None,
            },
            Ceiling {
                direction: Some(Way::Download),
                family: Some(Family::Ipv6),
                protocol: Some(Proto::Tcp),
                aggregate_bps: Some(600),
                flow_bps: Some(250),
            },
        ]);
        let l = class_limits(&m.ceilings);
        let at = |w, f, p| l[class_index(w, f, p)];
        assert_eq!(
            at(Way::Download, Family::Ipv6, Some(Proto::Tcp)),
            Limits {
                aggregate_bps: Some(600.0),
                flow_bps: Some(250.0)
            }
        );
        for (w, f, p) in [
            (Way::Upload, Family::Ipv6, Some(Proto::Tcp)),
            (Way::Download, Family::Ipv4, Some(Proto::Tcp)),
            (Way::Download, Family::Ipv6, Some(Proto::Udp)),
            (Way::Download, Family::Ipv6, None),
        ] {
            assert_eq!(
                at(w, f, p),
                Limits {
                    aggregate_bps: Some(900.0),
                    flow_bps: None
                },
                "{w:?} {f:?} {p:?}"
            );
        }
    }

    #[test]
    fn direction_follows_the_lan_side_and_payload_is_what_is_metered() {
        // 8000 bit/s of payload for IPv6 UDP upload only: a 1000-byte payload
        // takes one second.
        let m = model(vec![Ceiling {
            direction: Some(Way::Upload),
            family: Some(Family::Ipv6),
            protocol: Some(Proto::Udp),
            aggregate_bps: Some(8000),
            flow_bps: None,
        }]);
        let t0 = Instant::now();
        let mut d = DeviceShaper::new(&m, t0);
        // To the LAN (download): not limited.
        for _ in 0..3 {
            assert_eq!(d.offer(t0, &mut v6_udp(1000, 1)), Offer::Pass);
        }
        // Away from the LAN (upload): the first passes, the next waits 1 s.
        assert_eq!(d.offer(t0, &mut v6_udp(1000, 2)), Offer::Pass);
        let mut p = v6_udp(1000, 2);
        assert_eq!(d.offer(t0, &mut p), Offer::Queued);
        assert!(p.is_empty(), "the model took the packet");
        assert_eq!(d.deadline(), Some(t0 + std::time::Duration::from_secs(1)));
        assert_eq!(
            d.poll(t0 + std::time::Duration::from_secs(1))
                .map(|p| p.len()),
            Some(1048)
        );
        // IPv4 TCP upload has no ceiling here.
        assert_eq!(d.offer(t0, &mut v4_tcp(1448)), Offer::Pass);
    }

    #[test]
    fn bypassed_traffic_is_not_metered() {
        // Every IPv4 TCP packet limited to 8000 bit/s, but those to or from
        // 198.18.94.0/24 (a terminated tunnel's inner traffic) pass.
        let m = model(vec![Ceiling {
            direction: None,
            family: Some(Family::Ipv4),
            protocol: Some(Proto::Tcp),
            aggregate_bps: Some(8000),
            flow_bps: None,
        }]);
        let t0 = Instant::now();
        let mut d = DeviceShaper::new(&m, t0);
        let inner = |to: bool| {
            let mut p = v4_tcp(1000);
            let at = if to { 16 } else { 12 };
            p[at..at + 4].copy_from_slice(&[198, 18, 94, 2]);
            p
        };
        for _ in 0..3 {
            assert_eq!(d.offer(t0, &mut inner(true)), Offer::Pass);
            assert_eq!(d.offer(t0, &mut inner(false)), Offer::Pass);
        }
        assert_eq!(d.offer(t0, &mut v4_tcp(1000)), Offer::Pass);
        assert_eq!(d.offer(t0, &mut v4_tcp(1000)), Offer::Queued);
    }
}
