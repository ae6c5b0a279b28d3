//! The wire limit on a measured cell: what the links' line rates let through
//! of the cell's payload, physics alone. A shaped direction charges every
//! frame its IP packet plus its framing's bytes (`Framing::wire_bytes`), so a
//! link of `rate` carries `rate x payload / wire bytes` of payload per full
//! packet; the tightest link on the cell's way is the wire limit.

use super::device_limit::Limit;
use super::path::data_path;
use super::{MAX_NESTING, TCP_HEADER, UDP_HEADER};
use crate::routing::{Arrival, Hop, Router};
use crate::topology::resolved::{Interface, Topology};
use crate::vocab::framing::Framing;
use crate::vocab::{Cell, Family, Proto};
use std::net::IpAddr;

/// The tightest goodput the shaped links on `cell`'s way allow, measured from
/// node `from` to address `dst` with UDP datagrams of `udp_len` bytes. None:
/// no shaped link on the way, no way, or a datagram that does not fit.
///
/// The way is the one [`model_limit`](super::device_limit::model_limit)
/// follows (the data's own direction); each hop over a link crosses that
/// link, or the links through the switches between the two nodes, each in
/// one direction with its own impairments. Left out, as there: the reverse
/// direction's ACKs and smaller packets.
pub fn wire_limit(
    t: &Topology,
    from: usize,
    dst: IpAddr,
    cell: &Cell,
    udp_len: u32,
) -> Option<Limit> {
    let router = Router::new(t);
    let (hops, receiver) = data_path(t, &router, from, dst, cell.direction)?;
    let mtu = path_mtu(t, &router, &hops, receiver)?;
    let packet = cell_packet(cell, mtu, udp_len)?;
    let mut best = None;
    walk(t, &router, &hops, receiver, &packet, 0, &mut best);
    best
}

/// One packet of the cell as some link carries it.
#[derive(Debug, Clone)]
struct Packet {
    /// The cell's payload in it.
    payload: u32,
    /// The IP packet's length on this link (the outer one in a tunnel).
    ip_len: u32,
    /// The tunnels whose outer packets these are, for the name.
    via: Option<String>,
}

/// The cell's own packet on a path of `mtu`. TCP fills it: its payload is
/// the packet less the IP header and 32 bytes of TCP (with the timestamps
/// Linux sends). UDP sends the measurement's `udp_len`, in a packet of that
/// plus 8 and the IP header; a datagram larger than the path MTU does not
/// cross at all (DF): None.
fn cell_packet(cell: &Cell, mtu: u32, udp_len: u32) -> Option<Packet> {
    let ip = match cell.family {
        Family::Ipv4 => 20,
        Family::Ipv6 => 40,
    };
    let (payload, ip_len) = match cell.protocol {
        Proto::Tcp => (mtu.checked_sub(ip + TCP_HEADER as u32)?, mtu),
        Proto::Udp => (udp_len, udp_len + UDP_HEADER as u32 + ip),
    };
    (payload > 0 && ip_len <= mtu).then_some(Packet {
        payload,
        ip_len,
        via: None,
    })
}

/// The smallest MTU on the way: each link's, a tunnel's inner MTU for the
/// stretch inside it (its underlay's links are the tunnel's business).
fn path_mtu(t: &Topology, router: &Router, hops: &[Hop], dst: IpAddr) -> Option<u32> {
    let mut mtu: Option<u32> = None;
    for (i, hop) in hops.iter().enumerate().skip(1) {
        let here = match hop.by {
            Some(Arrival::Link) => crossed(t, router, hops[i - 1].node, hop.node, dst)
                .iter()
                .map(|&(l, _)| t.links[l].mtu)
                .min(),
            Some(Arrival::Tunnel { tunnel, .. }) => Some(t.tunnels[tunnel].sizes().inner_mtu),
            None => None,
        };
        mtu = match (mtu, here) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    mtu
}

/// Meters `packet` on every shaped link of `hops` (toward `dst`), and on the
/// underlays of the tunnels among them, which carry the outer packet (the
/// inner one plus the tunnel's overhead) with the same payload.
fn walk(
    t: &Topology,
    router: &Router,
    hops: &[Hop],
    dst: IpAddr,
    packet: &Packet,
    depth: usize,
    best: &mut Option<Limit>,
) {
    for (i, hop) in hops.iter().enumerate().skip(1) {
        let prev = hops[i - 1].node;
        match hop.by {
            Some(Arrival::Link) => {
                for (link, a_to_b) in crossed(t, router, prev, hop.node, dst) {
                    consider(t, link, a_to_b, packet, best);
                }
            }
            Some(Arrival::Tunnel {
                tunnel, outer_dst, ..
            }) if depth < MAX_NESTING => {
                let tun = &t.tunnels[tunnel];
                let enc = tun.encapsulation();
                let outer_v6 = outer_dst.is_ipv6();
                let inner = packet.ip_len as usize;
                let here = format!(
                    "tunnel {}'s {}, outer {}",
                    tun.name,
                    enc.name(),
                    if outer_v6 { "IPv6" } else { "IPv4" }
                );
                let outer = Packet {
                    payload: packet.payload,
                    ip_len: (inner + enc.overhead(outer_v6, inner)) as u32,
                    via: Some(match &packet.via {
                        Some(v) => format!("{here}, in {v}"),
                        None => here,
                    }),
                };
                if let Ok(underlay) = router.trace(prev, outer_dst) {
                    walk(t, router, &underlay, outer_dst, &outer, depth + 1, best);
                }
            }
            _ => {}
        }
    }
}

/// The goodput link `link`'s direction (`a_to_b`) allows `packet`, kept in
/// `best` if it is the tightest yet (the first along the way on a tie).
fn consider(t: &Topology, link: usize, a_to_b: bool, packet: &Packet, best: &mut Option<Limit>) {
    let l = &t.links[link];
    let (imp, sender, receiver) = if a_to_b {
        (&l.impairments.a_to_b, &l.a, &l.b)
    } else {
        (&l.impairments.b_to_a, &l.b, &l.a)
    };
    let Some(rate) = imp.rate else { return };
    let framing: Framing = imp.framing.unwrap_or_default();
    let bps = framing.goodput(rate as f64, packet.payload, packet.ip_len);
    if best.as_ref().is_some_and(|b| b.bps <= bps) {
        return;
    }
    let end = |e: &crate::topology::Endpoint| format!("{}:{}", t.nodes[e.node].name, e.iface);
    let mut what = format!(
        "{} {framing} link {} -> {}: {} B of payload per {} B on the wire",
        rate_name(rate),
        end(sender),
        end(receiver),
        packet.payload,
        framing.wire_bytes(packet.ip_len)
    );
    if let Some(v) = &packet.via {
        what += &format!(" ({v})");
    }
    *best = Some(Limit { what, bps });
}

/// The links a packet from node `from` crosses to reach node `to` over one
/// hop, each with its direction (`true`: from the link's `a` to its `b`):
/// one link, or one into each switch and one out of it. Routing does not say
/// which link a hop took, so it is found here: out of the interface `from`'s
/// route toward `dst` leaves by, else the first of `from`'s interfaces that
/// leads to `to` (two nodes sharing several links without such a route: the
/// first of them, as listed).
fn crossed(
    t: &Topology,
    router: &Router,
    from: usize,
    to: usize,
    dst: IpAddr,
) -> Vec<(usize, bool)> {
    let routed = router.lookup(from, dst).map(|nh| nh.iface);
    let ifaces = &t.nodes[from].interfaces;
    let first = ifaces.iter().filter(|i| Some(&i.name) == routed.as_ref());
    let rest = ifaces.iter().filter(|i| Some(&i.name) != routed.as_ref());
    first
        .chain(rest)
        .find_map(|i| reach(t, from, i, to, &mut vec![from]))
        .unwrap_or_default()
}

/// The links from `from` out of `iface` to `to`, through switches only.
fn reach(
    t: &Topology,
    from: usize,
    iface: &Interface,
    to: usize,
    seen: &mut Vec<usize>,
) -> Option<Vec<(usize, bool)>> {
    let link = &t.links[iface.link];
    let step = (
        iface.link,
        link.a.node == from && link.a.iface == iface.name,
    );
    let next = iface.peer_node;
    if next == to {
        return Some(vec![step]);
    }
    if t.nodes[next].bridge.is_none() || seen.contains(&next) {
        return None;
    }
    seen.push(next);
    for port in t.nodes[next]
        .interfaces
        .iter()
        .filter(|p| p.link != iface.link)
    {
        if let Some(mut rest) = reach(t, next, port, to, seen) {
            rest.insert(0, step);
            return Some(rest);
        }
    }
    None
}

/// A line rate as a topology writes it: "1G", "100M", "8K", else bit/s.
fn rate_name(bps: u64) -> String {
    for (unit, scale) in [("G", 1_000_000_000), ("M", 1_000_000), ("K", 1_000)] {
        if bps % scale == 0 {
            return format!("{}{unit}", bps / scale);
        }
    }
    format!("{bps} bit/s")
}

#[cfg(test)]
mod tests {
    use super::super::test_home::home;
    use super::*;
    use crate::topology::parse_str;
    use crate::vocab::Direction::{self, Receiver, Sender};
    use Family::{Ipv4, Ipv6};
    use Proto::{Tcp, Udp};
    use std::path::Path;

    /// Two hosts on one link: 1G up (a to b), 100M down, unless `impairments`
    /// says otherwise; a WireGuard tunnel at inner MTU 1420 over `underlay`.
    fn line(impairments: &str, underlay: Family) -> Topology {
        let (ea, eb) = match underlay {
            Ipv4 => ("198.18.70.1", "198.18.70.2"),
            Ipv6 => ("2001:2:0:70::1", "2001:2:0:70::2"),
        };
        let text = format!(
            r#"
name = "line"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.70.1/24", ipv6 = "2001:2:0:70::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.70.2/24", ipv6 = "2001:2:0:70::2/64" }}
{impairments}
[tunnels.wg]
kind = "wireguard"
mtu = 1420
peers = [
  {{ node = "a", endpoint = "{ea}", address = ["198.18.71.1/24", "2001:2:0:71::1/64"] }},
  {{ node = "b", endpoint = "{eb}", address = ["198.18.71.2/24", "2001:2:0:71::2/64"] }},
]
"#
        );
        parse_str(&text, Path::new("line.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    const UP_1G_DOWN_100M: &str = r#"impairments = { rate = "1G", b_to_a = { rate = "100M" } }"#;

    fn cell(family: Family, protocol: Proto, direction: Direction) -> Cell {
        Cell {
            family,
            protocol,
            direction,
            streams: 1,
        }
    }

    /// The wire limit from node `from` to `to`, in Mbit/s rounded to 0.01,
    /// and its name.
    fn limit(t: &Topology, from: &str, to: &str, c: Cell, udp_len: u32) -> Option<(f64, String)> {
        let from = t.node_index(from).unwrap();
        wire_limit(t, from, to.parse().unwrap(), &c, udp_len)
            .map(|l| ((l.bps / 1e4).round() / 100.0, l.what))
    }

    fn mbit(l: Option<(f64, String)>) -> f64 {
        l.map_or(f64::NAN, |l| l.0)
    }

    /// Physics fixes these: 1448 B of TCP payload (IPv4, timestamps) or 1428
    /// (IPv6) per 1538 B on a 1G Ethernet wire; UDP datagrams filling the MTU,
    /// 1472 and 1452 B, per 1538 B.
    #[test]
    fn a_gigabit_link_carries_what_its_frames_leave_for_payload() {
        let t = line(UP_1G_DOWN_100M, Ipv4);
        let (v4, v6) = ("198.18.70.2", "2001:2:0:70::2");
        assert_eq!(
            limit(&t, "a", v4, cell(Ipv4, Tcp, Sender), 1448),
            Some((
                941.48,
                "1G ethernet link a:eth0 -> b:eth0: 1448 B of payload per 1538 B on the wire"
                    .into()
            ))
        );
        assert_eq!(
            mbit(limit(&t, "a", v6, cell(Ipv6, Tcp, Sender), 1448)),
            928.48
        );
        assert_eq!(
            mbit(limit(&t, "a", v4, cell(Ipv4, Udp, Sender), 1472)),
            957.09
        );
        assert_eq!(
            mbit(limit(&t, "a", v6, cell(Ipv6, Udp, Sender), 1452)),
            944.08
        );
        // The measurement's default datagrams: 1448 B per 1514 (IPv4), 1534 (IPv6).
        assert_eq!(
            mbit(limit(&t, "a", v4, cell(Ipv4, Udp, Sender), 1448)),
            956.41
        );
        assert_eq!(
            mbit(limit(&t, "a", v6, cell(Ipv6, Udp, Sender), 1448)),
            943.94
        );
        // A download crosses the other direction, 100M.
        assert_eq!(
            limit(&t, "a", v4, cell(Ipv4, Tcp, Receiver), 1448),
            Some((
                94.15,
                "100M ethernet link b:eth0 -> a:eth0: 1448 B of payload per 1538 B on the wire"
                    .into()
            ))
        );
        // A datagram larger than the MTU does not cross: no limit to state.
        assert_eq!(limit(&t, "a", v4, cell(Ipv4, Udp, Sender), 1473), None);
    }

    #[test]
    fn framing_and_no_rate_change_the_figure() {
        let v4 = "198.18.70.2";
        let c = cell(Ipv4, Tcp, Sender);
        // PPPoE's 8 bytes more per frame: 1448 B per 1546.
        let t = line(r#"impairments = { rate = "1G", framing = "pppoe" }"#, Ipv4);
        let (bps, what) = limit(&t, "a", v4, c, 1448).unwrap();
        assert_eq!(bps, 936.61);
        assert!(what.starts_with("1G pppoe link a:eth0 -> b:eth0: 1448 B of payload per 1546 B"));
        let t = line(r#"impairments = { a_to_b = { rate = "100M" } }"#, Ipv4);
        assert_eq!(limit(&t, "a", v4, cell(Ipv4, Tcp, Receiver), 1448), None);
        assert_eq!(limit(&line("", Ipv4), "a", v4, c, 1448), None);
    }

    /// WireGuard at inner MTU 1420: 1368 B of TCP/IPv4 payload in a 1420-byte
    /// packet, 1480 bytes outer over IPv4 (1518 on the wire), 1500 over IPv6
    /// (1538).
    #[test]
    fn a_tunnel_pays_its_bytes_on_the_underlays_links() {
        let inner = "198.18.71.2";
        let c = cell(Ipv4, Tcp, Sender);
        let t = line(UP_1G_DOWN_100M, Ipv4);
        assert_eq!(
            limit(&t, "a", inner, c, 1448),
            Some((
                901.19,
                "1G ethernet link a:eth0 -> b:eth0: 1368 B of payload per 1518 B on the wire \
                 (tunnel wg's WireGuard, outer IPv4)"
                    .into()
            ))
        );
        let t6 = line(UP_1G_DOWN_100M, Ipv6);
        assert_eq!(mbit(limit(&t6, "a", inner, c, 1448)), 889.47);
        // UDP that fits the tunnel (1392 B), and UDP that does not.
        assert_eq!(
            mbit(limit(&t, "a", inner, cell(Ipv4, Udp, Sender), 1392)),
            917.0
        );
        assert_eq!(limit(&t, "a", inner, cell(Ipv4, Udp, Sender), 1448), None);
        // The download's outer packets cross the 100M direction.
        assert_eq!(
            mbit(limit(&t, "a", inner, cell(Ipv4, Tcp, Receiver), 1448)),
            90.12
        );
    }

    /// Through a switch, each link in its own direction: the upload meets
    /// the 100M from the switch to the router, the download the 1G beyond.
    #[test]
    fn a_hop_through_a_switch_crosses_both_its_links() {
        let text = r#"
name = "switched"
[nodes.a]
kind = "host"
routes = [{ to = "default", via = "198.18.1.1" }]
[nodes.sw]
kind = "switch"
[nodes.r]
kind = "router"
[nodes.b]
kind = "host"
routes = [{ to = "default", via = "198.18.2.1" }]
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.1.10/24" }
b = "sw:p1"
[[links]]
a = "sw:p2"
b = { port = "r:lan", ipv4 = "198.18.1.1/24" }
impairments.a_to_b = { rate = "100M" }
[[links]]
a = { port = "r:wan", ipv4 = "198.18.2.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.2.10/24" }
impairments = { rate = "1G" }
"#;
        let t = parse_str(text, Path::new("s.toml")).unwrap_or_else(|e| panic!("{e}"));
        let (bps, what) = limit(&t, "a", "198.18.2.10", cell(Ipv4, Tcp, Sender), 1448).unwrap();
        assert_eq!(
            (bps, what.split(':').take(2).collect::<Vec<_>>().join(":")),
            (94.15, "100M ethernet link sw:p2 -> r".into())
        );
        let (bps, what) = limit(&t, "a", "198.18.2.10", cell(Ipv4, Tcp, Receiver), 1448).unwrap();
        assert_eq!(bps, 941.48);
        assert!(
            what.starts_with("1G ethernet link b:eth0 -> r:wan:"),
            "{what}"
        );
    }

    /// The NVR500 study's home: "none" is the gigabit LAN (the NVR500 study's 941 and 928);
    /// DS-Lite carries 1408 B of TCP/IPv4 payload in its 1460-byte inner
    /// packets, 1500 bytes outer on the underlay's gigabit links.
    #[test]
    fn the_study_home_lan_and_its_softwire() {
        let none = home("none");
        let (bps, what) = limit(&none, "pc", "198.18.1.10", cell(Ipv4, Tcp, Sender), 1448).unwrap();
        assert_eq!(bps, 941.48);
        assert!(
            what.starts_with("1G ethernet link pc:eth0 -> sw:p5:"),
            "{what}"
        );
        assert_eq!(
            mbit(limit(
                &none,
                "pc",
                "2001:2:0:1::10",
                cell(Ipv6, Tcp, Receiver),
                1448
            )),
            928.48
        );
        let fast = home("fast");
        let inet = "198.18.20.10";
        assert_eq!(
            limit(&fast, "pc", inet, cell(Ipv4, Tcp, Sender), 1448),
            Some((
                915.47,
                "1G ethernet link openwrt:wan -> sw:p4: 1408 B of payload per 1538 B on the wire \
                 (tunnel transix's DS-Lite (IPv4 in IPv6), outer IPv6)"
                    .into()
            ))
        );
        // Back through the AFTR's NAT44: the first gigabit link into the B4's way.
        let (bps, what) = limit(&fast, "pc", inet, cell(Ipv4, Tcp, Receiver), 1448).unwrap();
        assert_eq!(bps, 915.47);
        assert!(
            what.starts_with("1G ethernet link isp:ngn -> hgw:wan:"),
            "{what}"
        );
    }
}
