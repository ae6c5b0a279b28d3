//! The host namespace's links, addresses and routes over netlink, and the
//! fields of them that the checks, the snapshot and the return read.

use crate::netlink::reason;
use crate::state::SavedRoute;
use futures::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::AddressFamily;
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use rtnetlink::Handle;
use std::net::{IpAddr, Ipv4Addr};

pub(super) const RT_TABLE_MAIN: u32 = 254;
pub(super) const RT_TABLE_LOCAL: u32 = 255;

pub(super) async fn dump_links(h: &Handle) -> Result<Vec<LinkMessage>, String> {
    h.link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| format!("listing interfaces: {}", reason(e)))
}

pub(super) async fn dump_addresses(h: &Handle) -> Result<Vec<AddressMessage>, String> {
    h.address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(|e| format!("listing addresses: {}", reason(e)))
}

/// Every route of both families, in every table.
pub(super) async fn dump_routes(h: &Handle) -> Result<Vec<RouteMessage>, String> {
    let mut all = Vec::new();
    for v6 in [false, true] {
        let mut m = RouteMessage::default();
        m.header.address_family = if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        let v: Vec<RouteMessage> = h
            .route()
            .get(m)
            .execute()
            .try_collect()
            .await
            .map_err(|e| format!("listing routes: {}", reason(e)))?;
        all.extend(v);
    }
    Ok(all)
}

pub(super) fn link_kind(l: &LinkMessage) -> Option<String> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos.iter().find_map(|i| match i {
            LinkInfo::Kind(k) => Some(k.to_string()),
            _ => None,
        }),
        _ => None,
    })
}

fn mac_text(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

pub(super) fn link_mac(l: &LinkMessage) -> String {
    l.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Address(m) => Some(mac_text(m)),
            _ => None,
        })
        .unwrap_or_default()
}

pub(super) fn link_perm_mac(l: &LinkMessage) -> Option<String> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::PermAddress(m) if m.iter().any(|b| *b != 0) => Some(mac_text(m)),
        _ => None,
    })
}

pub(super) fn link_mtu(l: &LinkMessage) -> Option<u32> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Mtu(m) => Some(*m),
        _ => None,
    })
}

pub(super) fn table_of(r: &RouteMessage) -> u32 {
    r.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(r.header.table as u32)
}

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(x) => Some(IpAddr::V4(*x)),
        RouteAddress::Inet6(x) => Some(IpAddr::V6(*x)),
        _ => None,
    }
}

/// Output interfaces of a route (every next hop of a multipath one).
pub(super) fn route_oifs(r: &RouteMessage) -> Vec<u32> {
    let mut v = Vec::new();
    for a in &r.attributes {
        match a {
            RouteAttribute::Oif(i) => v.push(*i),
            RouteAttribute::MultiPath(hops) => v.extend(hops.iter().map(|h| h.interface_index)),
            _ => {}
        }
    }
    v
}

fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

pub(super) fn saved_route(r: &RouteMessage) -> Option<SavedRoute> {
    let v6 = r.header.address_family == AddressFamily::Inet6;
    let mut to = None;
    let mut s = SavedRoute {
        to: IpNetwork::new(unspecified(v6), 0).ok()?,
        via: None,
        src: None,
        metric: None,
        protocol: r.header.protocol.into(),
        scope: r.header.scope.into(),
        kind: r.header.kind.into(),
        tos: r.header.tos,
        flags: r.header.flags.bits(),
        pref: None,
    };
    for a in &r.attributes {
        match a {
            RouteAttribute::Destination(d) => to = route_ip(d),
            RouteAttribute::Gateway(g) => s.via = route_ip(g),
            RouteAttribute::PrefSource(p) => s.src = route_ip(p),
            RouteAttribute::Priority(m) => s.metric = Some(*m),
            RouteAttribute::Preference(p) => s.pref = Some((*p).into()),
            _ => {}
        }
    }
    s.to = IpNetwork::new(
        to.unwrap_or(unspecified(v6)),
        r.header.destination_prefix_length,
    )
    .ok()?;
    Some(s)
}

pub(super) fn address_flags(a: &AddressMessage) -> u32 {
    a.attributes
        .iter()
        .find_map(|at| match at {
            AddressAttribute::Flags(f) => Some(f.bits()),
            _ => None,
        })
        .unwrap_or(a.header.flags.bits() as u32)
}
