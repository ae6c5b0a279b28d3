//! Before anything is recorded or made: read the host's interfaces, addresses
//! and routes and the other labs' records, and refuse the plan's host links
//! that are unsafe or impossible.

use super::check::{HostIf, HostView, OtherLab, check, lacking_drivers};
use super::dump::{
    RT_TABLE_LOCAL, RT_TABLE_MAIN, dump_addresses, dump_links, dump_routes, route_oifs,
    saved_route, table_of,
};
use crate::netlink::{address_of, link_name};
use crate::ops::Plan;
use crate::socket::handle_in_file;
use crate::state::{HostNetns, LabState, host_links};
use netlink_packet_route::address::AddressScope;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{RouteMessage, RouteType};
use std::collections::HashMap;
use std::fs::File;
use std::io;

/// Why a plan's host interfaces are refused: every problem, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("host interfaces refused (nothing was recorded or made):\n{}", lines(.problems))]
pub struct Refused {
    pub problems: Vec<String>,
}

fn lines(v: &[String]) -> String {
    v.iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Refuse a plan's host links that are unsafe or impossible, before anything is
/// recorded or made. Reads only: the host's interfaces, addresses and routes and
/// the other labs' records. With `force`, an interface that carries the default
/// route or global addresses is taken anyway; one another lab has moved (or
/// that another lab uses, for a move) never is.
pub async fn preflight(plan: &Plan, force: bool) -> Result<(), Refused> {
    let links = host_links(plan);
    if links.is_empty() {
        return Ok(());
    }
    let refused = |why: String| Refused {
        problems: vec![why],
    };
    let (me, file) =
        HostNetns::current().map_err(|e| refused(format!("reading the host's namespace: {e}")))?;
    let view = read_view(&file)
        .await
        .map_err(|e| refused(format!("reading the host's interfaces: {e}")))?;
    let others = other_labs(&plan.lab);
    let mut problems = check(&links, &view, &others, &me, force);
    // Probed once per process, each on a thread of its own (no runtime of
    // this one's is entered); a probe that cannot tell refuses nothing.
    problems.extend(lacking_drivers(&links, &|f| f.known_absent()));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Refused { problems })
    }
}

/// The host links recorded by every lab but `lab`.
pub fn other_labs(lab: &str) -> Vec<OtherLab> {
    let mut v = Vec::new();
    for other in LabState::lab_names() {
        if other == lab {
            continue;
        }
        let Ok(Some(s)) = LabState::load(&other) else {
            continue;
        };
        for link in s.host_links {
            v.push(OtherLab {
                lab: other.clone(),
                host_netns: s.host_netns.clone(),
                link,
            });
        }
    }
    v
}

/// The host's interfaces, global addresses and default routes.
pub async fn read_view(host: &File) -> io::Result<HostView> {
    let h = handle_in_file(host)?;
    let links = dump_links(&h).await.map_err(io::Error::other)?;
    let addrs = dump_addresses(&h).await.map_err(io::Error::other)?;
    let routes = dump_routes(&h).await.map_err(io::Error::other)?;
    let names: HashMap<u32, String> = links
        .iter()
        .filter_map(|l| Some((l.header.index, link_name(l)?.to_string())))
        .collect();
    let mut v = HostView {
        interfaces: links.iter().filter_map(|l| host_if(l, &names)).collect(),
        ..HostView::default()
    };
    for a in &addrs {
        if a.header.scope == AddressScope::Universe {
            if let Some(ip) = address_of(a) {
                v.global.push((a.header.index, ip));
            }
        }
    }
    v.defaults = routes
        .iter()
        .filter_map(|r| default_route(r, &names))
        .collect();
    Ok(v)
}

fn host_if(l: &LinkMessage, names: &HashMap<u32, String>) -> Option<HostIf> {
    let n = link_name(l)?;
    let immutable = l
        .attributes
        .iter()
        .any(|a| matches!(a, LinkAttribute::NetnsImmutable(true)))
        || l.header.flags.contains(LinkFlags::Loopback);
    let master = l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Controller(i) => names.get(i).cloned(),
        _ => None,
    });
    Some(HostIf {
        index: l.header.index,
        name: n.to_string(),
        movable: !immutable,
        master,
    })
}

/// A unicast default route of any table but local, with its output interfaces
/// and its description: "default via 198.18.3.1 dev enp2s0 (IPv4, table main)".
fn default_route(r: &RouteMessage, names: &HashMap<u32, String>) -> Option<(Vec<u32>, String)> {
    let table = table_of(r);
    if r.header.destination_prefix_length != 0
        || table == RT_TABLE_LOCAL
        || r.header.kind != RouteType::Unicast
    {
        return None;
    }
    let oifs = route_oifs(r);
    let s = saved_route(r)?;
    let devs: Vec<&str> = oifs
        .iter()
        .filter_map(|i| names.get(i).map(String::as_str))
        .collect();
    let family = if s.to.is_ipv6() { "IPv6" } else { "IPv4" };
    let table = match table {
        RT_TABLE_MAIN => "main".to_string(),
        t => t.to_string(),
    };
    let text = format!("{s} dev {} ({family}, table {table})", devs.join(","));
    Some((oifs, text))
}
