//! The model's limit on a measured cell: the tightest ceiling the lab's device
//! models (router profiles, a host profile's UDP receive limit) put on the
//! traffic one cell sends, named for a reader. A report prints it beside a
//! figure nobody published, with what makes it.

use super::path::data_path;
use super::{MAX_NESTING, TCP_HEADER, UDP_HEADER};
use crate::codec::overhead::Encapsulation;
use crate::codec::profile::{Ceiling, DeviceModel, TerminationModel, Way, way_to};
use crate::routing::{Arrival, Hop, Router};
use crate::topology::resolved::{Node, Topology};
use crate::topology::tunnel::{Tunnel, TunnelKind};
use crate::vocab::{Cell, Family, Proto};
use std::net::IpAddr;

/// The tightest model ceiling on a cell's traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// "nvr500 fast: ipv4 udp upload ceiling".
    pub what: String,
    /// bit/s of the cell's own payload (what iperf3 counts).
    pub bps: f64,
}

/// A mode's description goes into the name only when it is this short.
const SHORT_DESCRIPTION: usize = 32;

/// The tightest ceiling the device models of `t` put on `cell` measured from
/// node `from` to address `dst` (an upload sends from `from` to `dst`, a
/// download the other way). None: no model meters that traffic, or the
/// routing model finds no way. Left out: the reverse direction's ACKs,
/// smaller packets, and the links' own rates ([`super::wire_limit`] has them).
pub fn model_limit(t: &Topology, from: usize, dst: IpAddr, cell: &Cell) -> Option<Limit> {
    let router = Router::new(t);
    let (hops, receiver) = data_path(t, &router, from, dst, cell.direction)?;
    let traffic = Traffic {
        family: cell.family,
        protocol: Some(cell.protocol),
        dst: receiver,
        flows: cell.streams.max(1),
        scale: 1.0,
        via: None,
    };
    let mut best = None;
    meter(t, &router, &hops, &traffic, 0, &mut best);
    best
}

/// What a device model sees of the cell's packets at some point of the way.
#[derive(Debug, Clone)]
struct Traffic {
    family: Family,
    /// None: neither TCP nor UDP.
    protocol: Option<Proto>,
    /// The packets' destination: which way they cross a router.
    dst: IpAddr,
    /// 5-tuples the streams make here.
    flows: u32,
    /// The cell's payload bits per bit a ceiling meters here.
    scale: f64,
    /// The tunnel whose packets these are, for the name.
    via: Option<String>,
}

/// Meters `traffic` along `hops` (the data's own direction), keeping the
/// tightest limit in `best`. Every node the traffic *arrives at* with a device
/// model meters it, as the lab's slow paths do: the source's own packets leave
/// without passing its model, and what comes out of a tunnel's TUN passes
/// none. Through a tunnel, its ends' termination ceilings meter the inner
/// packets and the underlay's devices the outer ones (`outer_traffic`).
fn meter(
    t: &Topology,
    router: &Router,
    hops: &[Hop],
    traffic: &Traffic,
    depth: usize,
    best: &mut Option<Limit>,
) {
    for (i, hop) in hops.iter().enumerate().skip(1) {
        match hop.by {
            Some(Arrival::Link) => {
                let node = &t.nodes[hop.node];
                // The slow path leaves alone what it bypasses: the router's
                // own traffic and that of the tunnels it terminates.
                if let Some(m) = node.model.as_ref().filter(|m| !bypassed(m, traffic.dst)) {
                    for c in &m.ceilings {
                        consider(node, m, c, traffic, best);
                    }
                }
            }
            Some(Arrival::Tunnel {
                tunnel,
                outer_src: _,
                outer_dst,
            }) if depth < MAX_NESTING => {
                let tun = &t.tunnels[tunnel];
                // The ends' own termination ceilings meter the inner packets:
                // the sending end's as it encapsulates them, the receiving
                // end's as it decapsulates them.
                for (node, encapsulates) in [(hops[i - 1].node, true), (hop.node, false)] {
                    if let Some(tm) = termination_at(tun, node, &t.nodes[node]) {
                        let way = match (tm.tun_way(), encapsulates) {
                            (w, true) => w,
                            (Way::Upload, false) => Way::Download,
                            (Way::Download, false) => Way::Upload,
                        };
                        for c in &tm.ceilings {
                            consider_termination(&t.nodes[node], tm, c, way, traffic, best);
                        }
                    }
                }
                let Some(outer) = outer_traffic(tun, traffic, outer_dst) else {
                    continue;
                };
                if let Ok(underlay) = router.trace(hops[i - 1].node, outer_dst) {
                    meter(t, router, &underlay, &outer, depth + 1, best);
                }
            }
            _ => {}
        }
    }
}

/// What ceiling `c` holds `flows` 5-tuples to together: min(aggregate,
/// flow x flows), and whether the per-flow part is the tighter.
fn effective(c: &Ceiling, flows: u32) -> Option<(f64, bool)> {
    let aggregate = c.aggregate_bps.map(|b| b as f64);
    let per_flow = c.flow_bps.map(|b| b as f64 * f64::from(flows));
    match (aggregate, per_flow) {
        (Some(a), Some(f)) if f < a => Some((f, true)),
        (Some(a), _) => Some((a, false)),
        (None, Some(f)) => Some((f, true)),
        (None, None) => None,
    }
}

/// Whether the slow path of model `m` lets packets to `dst` by unmetered.
fn bypassed(m: &DeviceModel, dst: IpAddr) -> bool {
    m.bypass.iter().any(|n| n.contains(dst))
}

/// The termination ceilings `node` applies to `tun`'s inner packets, if it
/// is an end that has them (a softwire's B4, not its AFTR).
fn termination_at<'n>(tun: &Tunnel, index: usize, node: &'n Node) -> Option<&'n TerminationModel> {
    if let TunnelKind::Dslite(d) = &tun.kind {
        if !d.b4s.iter().any(|b| b.node == index) {
            return None;
        }
    }
    node.terminations
        .get(crate::topology::tunnel::termination::kind_name(tun))
}

/// A termination ceiling `c` of `node` on `traffic` going `way`, kept in
/// `best` if it is the tightest yet: "nvr500 l2tp termination: upload
/// ceiling".
fn consider_termination(
    node: &Node,
    tm: &TerminationModel,
    c: &Ceiling,
    way: Way,
    traffic: &Traffic,
    best: &mut Option<Limit>,
) {
    if !c.matches(way, traffic.family, traffic.protocol) {
        return;
    }
    let Some((bps, per_flow)) = effective(c, traffic.flows) else {
        return;
    };
    let bps = bps * traffic.scale;
    if best.as_ref().is_some_and(|b| b.bps <= bps) {
        return;
    }
    let mut who = format!("{} {} termination", tm.profile, tm.kind);
    if node.name != tm.profile {
        who += &format!(" on {}", node.name);
    }
    let mut class: Vec<&str> = Vec::new();
    class.extend(c.family.map(Family::word));
    class.extend(c.protocol.map(Proto::word));
    class.push(match way {
        Way::Upload => "upload",
        Way::Download => "download",
    });
    let mut what = format!("{who}: {} ceiling", class.join(" "));
    if per_flow {
        what += " per flow";
    }
    *best = Some(Limit { what, bps });
}

/// The ceiling `c` of `node`'s model `m` on `traffic`, if it matches, kept
/// in `best` if it is the tightest yet (the first one along the way on a tie).
fn consider(
    node: &Node,
    m: &DeviceModel,
    c: &Ceiling,
    traffic: &Traffic,
    best: &mut Option<Limit>,
) {
    // The slow path's own sorting (crate::codec::device_model).
    if !c.matches(
        way_to(&m.lan, traffic.dst),
        traffic.family,
        traffic.protocol,
    ) {
        return;
    }
    let Some((metered, per_flow)) = effective(c, traffic.flows) else {
        return;
    };
    let bps = metered * traffic.scale;
    if best.as_ref().is_some_and(|b| b.bps <= bps) {
        return;
    }
    *best = Some(Limit {
        what: name(node, m, c, per_flow, traffic, metered),
        bps,
    });
}

/// "nvr500 fast: ipv6 tcp download ceiling per flow x 2 streams"; through a
/// tunnel, with the ceiling's own rate and whose packets meet it: "nvr500
/// fast: ipv4 udp upload ceiling 29.43 Mbit/s on tunnel vpn's WireGuard
/// packets (outer IPv4 UDP)".
fn name(
    node: &Node,
    m: &DeviceModel,
    c: &Ceiling,
    per_flow: bool,
    traffic: &Traffic,
    metered: f64,
) -> String {
    let host = node.host_model.is_some();
    let mut who = if host {
        m.profile.clone()
    } else {
        format!("{} {}", m.profile, m.mode)
    };
    if let Some(d) = m
        .description
        .as_deref()
        .filter(|d| !host && d.len() <= SHORT_DESCRIPTION)
    {
        who += &format!(" ({d})");
    }
    if node.name != m.profile {
        who += &format!(" on {}", node.name);
    }
    let mut class: Vec<&str> = Vec::new();
    class.extend(c.family.map(Family::word));
    class.extend(c.protocol.map(Proto::word));
    if host {
        class.push("receive");
    } else {
        class.extend(c.direction.map(|d| match d {
            Way::Upload => "upload",
            Way::Download => "download",
        }));
    }
    let mut what = if class.is_empty() {
        format!("{who}: ceiling on all traffic")
    } else {
        format!(
            "{who}: {} {}",
            class.join(" "),
            if host { "limit" } else { "ceiling" }
        )
    };
    if per_flow {
        what += " per flow";
        if traffic.flows > 1 {
            what += &format!(" x {} streams", traffic.flows);
        }
    }
    if let Some(via) = &traffic.via {
        what += &format!(" {} Mbit/s on {via}", (metered / 1e4).round() / 100.0);
    }
    what
}

/// What the underlay's devices see of `inner` carried by `tun` toward
/// `outer_dst`: the underlay family; UDP for WireGuard, L2TP and ESP in UDP
/// (IKEv2 too: libipsec always sends ESP in UDP 4500), neither TCP nor UDP
/// for raw ESP (protocol 50) and DS-Lite (protocol 4), so only protocol-less
/// ceilings match those; all streams one outer flow. A ceiling meters the
/// outer transport payload (the IP payload for neither), so its rate is
/// turned into the cell's payload per full-size packet: the inner MTU less
/// the inner IP and transport headers, against that packet plus the
/// tunnel's overhead less the outer IP and transport headers.
fn outer_traffic(tun: &Tunnel, inner: &Traffic, outer_dst: IpAddr) -> Option<Traffic> {
    let enc = tun.encapsulation();
    let protocol = match enc {
        Encapsulation::Wireguard
        | Encapsulation::L2tp { .. }
        | Encapsulation::Esp { udp: true }
        | Encapsulation::L2tpIpsec { udp: true, .. } => Some(Proto::Udp),
        Encapsulation::Esp { udp: false }
        | Encapsulation::L2tpIpsec { udp: false, .. }
        | Encapsulation::Dslite => None,
    };
    let family = Family::of(outer_dst);
    let outer_v6 = family == Family::Ipv6;
    let packet = tun.sizes().inner_mtu as usize;
    let payload = |family: Family, protocol: Option<Proto>, packet: usize| {
        let ip = if family == Family::Ipv6 { 40 } else { 20 };
        let transport = match protocol {
            Some(Proto::Tcp) => TCP_HEADER,
            Some(Proto::Udp) => UDP_HEADER,
            None => 0,
        };
        packet.checked_sub(ip + transport).filter(|&n| n > 0)
    };
    let inner_payload = payload(inner.family, inner.protocol, packet)?;
    let outer_payload = payload(family, protocol, packet + enc.overhead(outer_v6, packet))?;
    Some(Traffic {
        family,
        protocol,
        dst: outer_dst,
        flows: 1,
        scale: inner.scale * inner_payload as f64 / outer_payload as f64,
        via: Some(format!(
            "tunnel {}'s {} packets (outer {}{})",
            tun.name,
            enc.name(),
            family.title(),
            match protocol {
                Some(Proto::Udp) => " UDP",
                Some(Proto::Tcp) => " TCP",
                None => ", neither TCP nor UDP",
            }
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_home::home;
    use super::*;
    use crate::vocab::Direction;

    fn cell(family: Family, protocol: Proto, direction: Direction, streams: u32) -> Cell {
        Cell {
            family,
            protocol,
            direction,
            streams,
        }
    }

    fn limit(t: &Topology, to: &str, c: Cell) -> Option<Limit> {
        let pc = t.node_index("pc").unwrap();
        model_limit(t, pc, to.parse().unwrap(), &c)
    }

    use Direction::{Receiver, Sender};
    use Family::{Ipv4, Ipv6};
    use Proto::{Tcp, Udp};

    fn bps(l: &Option<Limit>) -> f64 {
        l.as_ref().map_or(f64::NAN, |l| l.bps)
    }

    fn what(l: &Option<Limit>) -> &str {
        l.as_ref().map_or("(none)", |l| l.what.as_str())
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() < 1.0
    }

    /// The raw path through the NVR500 model: each direction, family and
    /// protocol meets its own ceiling, in each mode; where the profile has
    /// none (fast IPv4 TCP download) the model limits nothing.
    #[test]
    fn the_raw_path_meets_the_routers_ceiling_per_class_and_mode() {
        let fast = home("fast");
        let normal = home("normal");
        let v4 = "198.18.1.10";
        let v6 = "2001:2:0:1::10";
        for (t, to, c, want, name) in [
            (
                &fast,
                v4,
                cell(Ipv4, Tcp, Sender, 1),
                824e6,
                "nvr500 fast: ipv4 tcp upload ceiling",
            ),
            (
                &fast,
                v4,
                cell(Ipv4, Udp, Sender, 1),
                29.43e6,
                "nvr500 fast: ipv4 udp upload ceiling",
            ),
            (
                &fast,
                v4,
                cell(Ipv4, Udp, Receiver, 1),
                472.5e6,
                "nvr500 fast: ipv4 udp download ceiling",
            ),
            (
                &fast,
                v6,
                cell(Ipv6, Tcp, Sender, 1),
                777e6,
                "nvr500 fast: ipv6 tcp upload ceiling",
            ),
            (
                &fast,
                v6,
                cell(Ipv6, Udp, Sender, 1),
                20.61e6,
                "nvr500 fast: ipv6 udp upload ceiling",
            ),
            (
                &fast,
                v6,
                cell(Ipv6, Udp, Receiver, 1),
                180e6,
                "nvr500 fast: ipv6 udp download ceiling",
            ),
            (
                &normal,
                v4,
                cell(Ipv4, Tcp, Sender, 1),
                384e6,
                "nvr500 normal: ipv4 tcp upload ceiling",
            ),
            (
                &normal,
                v4,
                cell(Ipv4, Tcp, Receiver, 1),
                491e6,
                "nvr500 normal: ipv4 tcp download ceiling",
            ),
            (
                &normal,
                v4,
                cell(Ipv4, Udp, Sender, 6),
                29.43e6,
                "nvr500 normal: ipv4 udp upload ceiling",
            ),
            (
                &normal,
                v6,
                cell(Ipv6, Tcp, Receiver, 1),
                234e6,
                "nvr500 normal: ipv6 tcp download ceiling",
            ),
            (
                &normal,
                v6,
                cell(Ipv6, Udp, Receiver, 1),
                180e6,
                "nvr500 normal: ipv6 udp download ceiling",
            ),
        ] {
            let l = limit(t, to, c);
            assert!(close(bps(&l), want), "{}: {l:?}, want {want}", c.key());
            assert_eq!(what(&l), name, "{}", c.key());
        }
        assert_eq!(limit(&fast, v4, cell(Ipv4, Tcp, Receiver, 1)), None);
        assert_eq!(limit(&fast, v4, cell(Ipv4, Tcp, Receiver, 6)), None);
    }

    /// Fast IPv6 TCP download: 249M per flow, 656.69M for all flows. One
    /// stream meets the flow's, two streams twice it, six the aggregate; the
    /// speed test's path to the internet server crosses the same router.
    #[test]
    fn streams_multiply_the_flow_ceiling_up_to_the_aggregate() {
        let t = home("fast");
        for to in ["2001:2:0:1::10", "2001:2:0:20::10"] {
            let at = |streams| limit(&t, to, cell(Ipv6, Tcp, Receiver, streams));
            let one = at(1);
            assert!(close(bps(&one), 249e6), "{one:?}");
            assert_eq!(
                what(&one),
                "nvr500 fast: ipv6 tcp download ceiling per flow"
            );
            let two = at(2);
            assert!(close(bps(&two), 2.0 * 249e6), "{two:?}");
            assert_eq!(
                what(&two),
                "nvr500 fast: ipv6 tcp download ceiling per flow x 2 streams"
            );
            let six = at(6);
            assert!(close(bps(&six), 656.69e6), "{six:?}");
            assert_eq!(what(&six), "nvr500 fast: ipv6 tcp download ceiling");
        }
    }

    /// With no router on the way (scenario none) the server's own UDP receive
    /// limit is what is left, for UDP only, and only arriving there.
    #[test]
    fn the_servers_udp_receive_limit_applies_to_udp_arriving_there() {
        let t = home("none");
        let l = limit(&t, "198.18.1.10", cell(Ipv4, Udp, Sender, 1));
        assert!(close(bps(&l), 312.3e6), "{l:?}");
        assert_eq!(
            what(&l),
            "nvr500-study-server on server: ipv4 udp receive limit"
        );
        let l = limit(&t, "2001:2:0:1::10", cell(Ipv6, Udp, Sender, 6));
        assert!(close(bps(&l), 292.5e6), "{l:?}");
        assert_eq!(limit(&t, "198.18.1.10", cell(Ipv4, Tcp, Sender, 1)), None);
        // Downloads arrive at the PC, which has no profile.
        assert_eq!(limit(&t, "198.18.1.10", cell(Ipv4, Udp, Receiver, 1)), None);
        // Through the router the router's tighter ceiling wins.
        let l = limit(&home("fast"), "198.18.1.10", cell(Ipv4, Udp, Sender, 1));
        assert!(what(&l).starts_with("nvr500"), "{l:?}");
    }

    /// WireGuard through the fast path: the router sees the tunnel's UDP over
    /// IPv4 whatever the cell's protocol and family, so a TCP upload meets the
    /// UDP upload ceiling, turned into inner payload per full packet: inner MTU
    /// 1420 less IPv4 20 (IPv6 40) and TCP 32 (UDP 8), against the 1420-byte
    /// packet + WireGuard 32 in UDP's payload.
    #[test]
    fn wireguard_meets_the_udp_ceilings_as_its_outer_packets() {
        let t = home("fast");
        let outer = (1420 + 32) as f64;
        for (to, c, ceiling, inner) in [
            (
                "198.18.90.10",
                cell(Ipv4, Tcp, Sender, 1),
                29.43e6,
                1420 - 20 - 32,
            ),
            (
                "198.18.90.10",
                cell(Ipv4, Tcp, Sender, 6),
                29.43e6,
                1420 - 20 - 32,
            ),
            (
                "198.18.90.10",
                cell(Ipv4, Udp, Sender, 1),
                29.43e6,
                1420 - 20 - 8,
            ),
            (
                "2001:2:0:90::10",
                cell(Ipv6, Tcp, Sender, 1),
                29.43e6,
                1420 - 40 - 32,
            ),
            (
                "198.18.90.10",
                cell(Ipv4, Tcp, Receiver, 1),
                472.5e6,
                1420 - 20 - 32,
            ),
            (
                "2001:2:0:90::10",
                cell(Ipv6, Udp, Receiver, 1),
                472.5e6,
                1420 - 40 - 8,
            ),
        ] {
            let l = limit(&t, to, c);
            let want = ceiling * inner as f64 / outer;
            assert!(close(bps(&l), want), "{}: {l:?}, want {want}", c.key());
            let way = if c.direction == Sender {
                "upload"
            } else {
                "download"
            };
            assert_eq!(
                what(&l),
                format!(
                    "nvr500 fast: ipv4 udp {way} ceiling {} Mbit/s on tunnel vpn's WireGuard packets (outer IPv4 UDP)",
                    ceiling / 1e6
                ),
                "{}",
                c.key()
            );
        }
        // With no router, the server's UDP receive limit meets the tunnel.
        let l = limit(&home("none"), "198.18.90.10", cell(Ipv4, Tcp, Sender, 1));
        let want = 312.3e6 * (1420 - 20 - 32) as f64 / outer;
        assert!(close(bps(&l), want), "{l:?}, want {want}");
        assert!(
            what(&l).starts_with(
                "nvr500-study-server on server: ipv4 udp receive limit 312.3 Mbit/s on tunnel vpn's"
            ),
            "{l:?}"
        );
    }

    /// IKEv2: libipsec's ESP always in UDP 4500, both ways (the download's
    /// data comes back through the tunnel, from the server's inner address),
    /// over IPv6 as the home topology's ends are.
    #[test]
    fn ikev2_is_esp_in_udp_both_ways() {
        let t = home("fast");
        for (c, way) in [
            (cell(Ipv4, Tcp, Sender, 1), "upload"),
            (cell(Ipv4, Tcp, Receiver, 1), "download"),
        ] {
            let l = limit(&t, "198.18.93.10", c);
            assert!(
                what(&l).starts_with(&format!("nvr500 fast: ipv6 udp {way} ceiling"))
                    && what(&l)
                        .ends_with("on tunnel ikev2's ESP in UDP 4500 packets (outer IPv6 UDP)"),
                "{}: {l:?}",
                c.key()
            );
        }
    }

    /// L2TP/IPsec with raw ESP (protocol 50): neither TCP nor UDP, so no
    /// ceiling of the NVR500 profile (each names its protocol) nor the
    /// server's UDP limit applies; a protocol-less ceiling does, on the IP
    /// payload: 1428-byte inner packets (what fits 1500) + 72 bytes (ESP 8,
    /// IV 8, UDP 8, L2TP 6, PPP 4, no padding at this size, pad length and
    /// next header 2, ICV 16, outer IPv4 20) less the outer IPv4 header.
    #[test]
    fn raw_esp_meets_only_ceilings_without_a_protocol() {
        let mut t = home("fast");
        let l2tp = "198.18.92.10";
        for c in [cell(Ipv4, Tcp, Sender, 1), cell(Ipv4, Udp, Receiver, 1)] {
            assert_eq!(limit(&t, l2tp, c), None, "{}", c.key());
        }
        let tun = t.tunnels.iter().find(|x| x.name == "l2tp").unwrap();
        assert_eq!(tun.sizes().inner_mtu, 1428);
        let r = t.node_index("nvr500").unwrap();
        t.nodes[r].model.as_mut().unwrap().ceilings.push(Ceiling {
            direction: Some(Way::Upload),
            family: Some(Ipv4),
            protocol: None,
            aggregate_bps: Some(100_000_000),
            flow_bps: None,
        });
        let l = limit(&t, l2tp, cell(Ipv4, Tcp, Sender, 1));
        let want = 100e6 * (1428 - 20 - 32) as f64 / (1428 + 72 - 20) as f64;
        assert!(close(bps(&l), want), "{l:?}, want {want}");
        assert_eq!(
            what(&l),
            "nvr500 fast: ipv4 upload ceiling 100 Mbit/s on tunnel l2tp's L2TP/IPsec (protocol 50) packets (outer IPv4, neither TCP nor UDP)"
        );
        // It holds TCP and UDP on the raw path too, where it is tighter.
        let l = limit(&t, "198.18.1.10", cell(Ipv4, Tcp, Sender, 1));
        assert!(close(bps(&l), 100e6), "{l:?}");
        assert_eq!(what(&l), "nvr500 fast: ipv4 upload ceiling");
        // Not the other way.
        assert_eq!(limit(&t, l2tp, cell(Ipv4, Tcp, Receiver, 1)), None);
    }

    /// DS-Lite: the NVR500 sees the IPv4 before the B4 (the download through
    /// the AFTR's NAT44 too), and a router on the softwire's underlay sees
    /// IPv4-in-IPv6, protocol 4, whose IP payload is the inner packet.
    #[test]
    fn a_softwire_carries_ipv4_in_ipv6_past_its_underlay() {
        let mut t = home("fast");
        // Without the B4's own ceilings (a_routers_own_tunnel_end_... has them).
        let b4 = t.node_index("openwrt").unwrap();
        t.nodes[b4].terminations.clear();
        let inet = "198.18.20.10";
        let l = limit(&t, inet, cell(Ipv4, Udp, Receiver, 1));
        assert!(close(bps(&l), 472.5e6), "{l:?}");
        let l = limit(&t, inet, cell(Ipv4, Tcp, Sender, 1));
        assert!(close(bps(&l), 824e6), "{l:?}");
        let hgw = t.node_index("hgw").unwrap();
        t.nodes[hgw].model = Some(DeviceModel {
            profile: "gw".into(),
            mode: "m".into(),
            // Short enough to name.
            description: Some("lab gateway".into()),
            lan: vec!["2001:2:0:1::/64".parse().unwrap()],
            ceilings: vec![Ceiling {
                direction: Some(Way::Upload),
                family: Some(Ipv6),
                protocol: None,
                aggregate_bps: Some(50_000_000),
                flow_bps: Some(40_000_000),
            }],
            queue_packets: 10,
            bypass: Vec::new(),
        });
        // Six streams are one flow of the softwire's.
        let l = limit(&t, inet, cell(Ipv4, Tcp, Sender, 6));
        let want = 40e6 * (1460 - 20 - 32) as f64 / 1460.0;
        assert!(close(bps(&l), want), "{l:?}, want {want}");
        assert_eq!(
            what(&l),
            "gw m (lab gateway) on hgw: ipv6 upload ceiling per flow 40 Mbit/s on tunnel transix's DS-Lite (IPv4 in IPv6) packets (outer IPv6, neither TCP nor UDP)"
        );
        // The download's softwire packets go toward the B4, on hgw's LAN side.
        let l = limit(&t, inet, cell(Ipv4, Udp, Receiver, 1));
        assert!(close(bps(&l), 472.5e6), "{l:?}");
    }

    /// A tunnel a router terminates itself: the NVR500's L2TP/IPsec server
    /// meters its clients' upload as it decapsulates it and their download
    /// as it encapsulates it; the B4's softwire meters IPv4 to the internet
    /// both ways. The forwarding ceilings leave that traffic alone.
    #[test]
    fn a_routers_own_tunnel_end_meets_its_termination_ceilings() {
        let t = home("fast");
        for (c, want, way) in [
            (cell(Ipv4, Tcp, Sender, 1), 150e6, "upload"),
            (cell(Ipv4, Tcp, Receiver, 1), 100e6, "download"),
            (cell(Ipv6, Tcp, Receiver, 6), 100e6, "download"),
        ] {
            let l = limit(&t, "198.18.94.10", c);
            assert!(close(bps(&l), want), "{}: {l:?}, want {want}", c.key());
            assert_eq!(
                what(&l),
                format!("nvr500 l2tp termination: {way} ceiling"),
                "{}",
                c.key()
            );
        }
        for (c, way) in [
            (cell(Ipv4, Tcp, Receiver, 1), "download"),
            (cell(Ipv4, Tcp, Sender, 1), "upload"),
        ] {
            let l = limit(&t, "198.18.22.10", c);
            assert!(close(bps(&l), 350e6), "{}: {l:?}", c.key());
            assert_eq!(
                what(&l),
                format!("openwrt-b4 dslite termination on openwrt: ipv4 {way} ceiling"),
                "{}",
                c.key()
            );
        }
    }

    /// Nothing to say where no model is on the way, or no way at all.
    #[test]
    fn no_model_or_no_way_is_none() {
        let mut t = home("none");
        // No router on the way to the internet but the B4: without its model.
        let b4 = t.node_index("openwrt").unwrap();
        t.nodes[b4].terminations.clear();
        let pc = t.node_index("pc").unwrap();
        assert_eq!(
            model_limit(
                &t,
                pc,
                "198.18.20.10".parse().unwrap(),
                &cell(Ipv4, Tcp, Sender, 1)
            ),
            None
        );
        assert_eq!(
            model_limit(
                &t,
                pc,
                "198.18.250.1".parse().unwrap(),
                &cell(Ipv4, Udp, Sender, 1)
            ),
            None
        );
    }
}
