//! Route and rule messages as `ip route add` and `ip rule add` make them.

use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::rule::RuleMessage;
use rtnetlink::RouteMessageBuilder;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `ip route add TO [via VIA] [dev OIF] [metric METRIC]`.
pub(super) fn route_message(
    to: ipnetwork::IpNetwork,
    via: Option<IpAddr>,
    oif: Option<u32>,
    metric: Option<u32>,
) -> RouteMessage {
    use netlink_packet_route::route::RouteAttribute;
    let mut m = match (to, via) {
        (ipnetwork::IpNetwork::V4(n), via) => {
            let b =
                RouteMessageBuilder::<Ipv4Addr>::new().destination_prefix(n.network(), n.prefix());
            match via {
                Some(IpAddr::V4(g)) => b.gateway(g),
                _ => b,
            }
            .build()
        }
        (ipnetwork::IpNetwork::V6(n), via) => {
            let b =
                RouteMessageBuilder::<Ipv6Addr>::new().destination_prefix(n.network(), n.prefix());
            match via {
                Some(IpAddr::V6(g)) => b.gateway(g),
                _ => b,
            }
            .build()
        }
    };
    if via.is_none() {
        // On-link, as `ip route add PREFIX dev X` makes it.
        m.header.scope = netlink_packet_route::route::RouteScope::Link;
    }
    if let Some(i) = oif {
        m.attributes.push(RouteAttribute::Oif(i));
    }
    if let Some(p) = metric {
        m.attributes.push(RouteAttribute::Priority(p));
    }
    m
}

/// `ip route add blackhole TO`.
pub(super) fn blackhole_message(to: ipnetwork::IpNetwork) -> RouteMessage {
    let mut m = route_message(to, None, None, None);
    m.header.kind = netlink_packet_route::route::RouteType::BlackHole;
    m.header.scope = netlink_packet_route::route::RouteScope::Universe;
    m
}

/// `ip route add TO via GATE dev OIF onlink table T`.
pub(super) fn onlink_message(
    to: ipnetwork::Ipv4Network,
    gate: Ipv4Addr,
    oif: u32,
    table: u32,
) -> RouteMessage {
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(to.network(), to.prefix())
        .gateway(gate)
        .output_interface(oif)
        .onlink()
        .table_id(table)
        .build()
}

/// `ip route add PREFIX encap seg6 mode encap.red segs SEGMENT dev DEV table T`.
pub(crate) fn seg6_encap_message(
    to: ipnetwork::Ipv4Network,
    segment: Ipv6Addr,
    oif: u32,
    table: u32,
) -> RouteMessage {
    use netlink_packet_route::route::{RouteSeg6IpTunnel, Seg6Header, Seg6Mode};
    // SEG6_IPTUN_MODE_ENCAP_RED: reduced encapsulation, no SRH for one segment.
    const ENCAP_RED: u32 = 3;
    let mut header = Seg6Header::default();
    header.mode = Seg6Mode::Other(ENCAP_RED);
    header.segments = vec![segment];
    RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(to.network(), to.prefix())
        .output_interface(oif)
        .table_id(table)
        .scope(netlink_packet_route::route::RouteScope::Link)
        .encap_seg6(vec![RouteSeg6IpTunnel::Seg6(header)])
        .build()
}

/// `ip -6 route add SID/128 encap seg6local action End.DX4 nh4 0.0.0.0 dev DEV table T`:
/// nh4 0.0.0.0 routes the decapsulated packet by its own destination.
pub(crate) fn seg6local_message(sid: Ipv6Addr, oif: u32, table: u32) -> RouteMessage {
    use netlink_packet_route::route::{RouteSeg6LocalTunnel, Seg6LocalAction};
    RouteMessageBuilder::<Ipv6Addr>::new()
        .destination_prefix(sid, 128)
        .output_interface(oif)
        .table_id(table)
        .encap_seg6local(vec![
            RouteSeg6LocalTunnel::Action(Seg6LocalAction::EndDx4),
            RouteSeg6LocalTunnel::Nh4(Ipv4Addr::UNSPECIFIED),
        ])
        .build()
}

/// `ip [-6] rule add pref PREF [to TO] [ipproto P] [fwmark M] lookup TABLE`.
pub(super) fn rule_message(
    v6: bool,
    pref: u32,
    to: Option<ipnetwork::IpNetwork>,
    ipproto: Option<u8>,
    fwmark: Option<u32>,
    table: u32,
) -> RuleMessage {
    use netlink_packet_route::rule::{RuleAction, RuleAttribute};
    use netlink_packet_route::{AddressFamily, IpProtocol};
    let mut m = RuleMessage::default();
    m.header.family = if v6 {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    m.header.action = RuleAction::ToTable;
    // Tables above 255 go in FRA_TABLE; the header says RT_TABLE_UNSPEC.
    m.header.table = 0;
    m.attributes.push(RuleAttribute::Table(table));
    m.attributes.push(RuleAttribute::Priority(pref));
    if let Some(to) = to {
        m.header.dst_len = to.prefix();
        m.attributes.push(RuleAttribute::Destination(to.ip()));
    }
    if let Some(p) = ipproto {
        m.attributes
            .push(RuleAttribute::IpProtocol(IpProtocol::from(p as i32)));
    }
    if let Some(mark) = fwmark {
        m.attributes.push(RuleAttribute::FwMark(mark));
    }
    m
}
