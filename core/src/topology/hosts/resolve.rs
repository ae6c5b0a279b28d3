//! `[hosts]`, `host` on nodes, `vni` on links and `vxlan_port` read into a
//! `Placement`, and the VNIs the file leaves out derived.

use super::{Crossing, DEFAULT_UNDERLAY_MTU, DEFAULT_VXLAN_PORT, Host, Placement, VNI_MAX};
use crate::topology::raw::RawTopology;
use crate::topology::resolved::{Link, Node, NodeKind};
use crate::topology::{KeyPath, Problem, int_in, interface_name_problem, valid_name};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The placement of `nodes` and `links` (resolved from `raw`, every one of
/// them, in the file's order). None: the file declares no `[hosts]` (any key
/// that needs them is a problem), or a host or a node's placement is unusable.
pub fn resolve(
    raw: &RawTopology,
    nodes: &[Node],
    links: &[Link],
    p: &mut Vec<Problem>,
) -> Option<Placement> {
    let root = KeyPath::root();
    if raw.hosts.is_empty() {
        unplaced_keys(raw, nodes, links, p);
        return None;
    }
    let before = p.len();
    let hosts: Vec<Host> = raw
        .hosts
        .iter()
        .filter_map(|(name, rh)| {
            let at = root.key("hosts").key(name);
            host(name, &rh.underlay, rh.interface.as_deref(), rh.mtu, at, p).map(|h| Host {
                synchronised_clock: rh.synchronised_clock,
                ..h
            })
        })
        .collect();
    let node_host = node_hosts(raw, nodes, &hosts, p);
    let vxlan_port = int_in(
        raw.vxlan_port,
        1..=65535,
        DEFAULT_VXLAN_PORT as i64,
        &root.key("vxlan_port"),
        p,
        |v| format!("vxlan_port {v} is not a UDP port; use 1..=65535 (VXLAN's is 4789)"),
    ) as u16;
    if p.len() > before {
        return None;
    }
    let node_host: Vec<Option<usize>> = node_host.into_iter().map(|h| h.flatten()).collect();
    let crossings = crossings(raw, nodes, links, &node_host, &hosts, p)?;
    Some(Placement {
        hosts,
        node_host,
        vxlan_port,
        crossings,
    })
}

/// Without `[hosts]`, `host` on a node, `vni` on a link and `vxlan_port`
/// have nothing to refer to.
fn unplaced_keys(raw: &RawTopology, nodes: &[Node], links: &[Link], p: &mut Vec<Problem>) {
    for n in nodes {
        if let Some(h) = raw.nodes.get(&n.name).and_then(|r| r.host.as_ref()) {
            p.push(Problem::new(
                &n.at.key("host"),
                format!(
                    "node \"{}\" is placed on host \"{h}\", but the file declares no [hosts]; add [hosts.{h}] with its underlay address, or remove host",
                    n.name
                ),
            ));
        }
    }
    for (l, rl) in links.iter().zip(&raw.links) {
        if rl.vni.is_some() {
            p.push(Problem::new(
                &l.at.key("vni"),
                "vni is for a link between two hosts, and the file declares no [hosts]; remove vni",
            ));
        }
    }
    if raw.vxlan_port.is_some() {
        p.push(Problem::new(
            &KeyPath::root().key("vxlan_port"),
            "vxlan_port is for links between hosts, and the file declares no [hosts]; remove it",
        ));
    }
}

/// One `[hosts.NAME]`.
fn host(
    name: &str,
    underlay: &str,
    interface: Option<&str>,
    mtu: Option<i64>,
    at: KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Host> {
    let before = p.len();
    if !valid_name(name) {
        p.push(Problem::new(
            &at,
            format!("host name \"{name}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit"),
        ));
    }
    let address = underlay.parse::<IpAddr>();
    if address.is_err() {
        p.push(Problem::new(
            &at.key("underlay"),
            format!("underlay \"{underlay}\" is not an IPv4 or IPv6 address (write the address alone, without a prefix length)"),
        ));
    }
    if let Some(why) = interface.and_then(interface_name_problem) {
        p.push(Problem::new(&at.key("interface"), why));
    }
    let v6 = matches!(address, Ok(IpAddr::V6(_)));
    let least = if v6 { 1280 } else { 576 };
    let mtu = int_in(
        mtu,
        least..=65535,
        DEFAULT_UNDERLAY_MTU as i64,
        &at.key("mtu"),
        p,
        |v| {
            format!(
                "mtu {v} is out of range for an {} underlay; use {least}..=65535",
                if v6 { "IPv6" } else { "IPv4" }
            )
        },
    ) as u32;
    if p.len() > before {
        return None;
    }
    Some(Host {
        name: name.to_string(),
        underlay: address.ok()?,
        interface: interface.map(str::to_string),
        mtu,
        synchronised_clock: false,
        at,
    })
}

/// Each node's host: Some(Some(i)) placed, Some(None) external (placed
/// nowhere), None unusable (a problem said why).
fn node_hosts(
    raw: &RawTopology,
    nodes: &[Node],
    hosts: &[Host],
    p: &mut Vec<Problem>,
) -> Vec<Option<Option<usize>>> {
    let declared = || {
        raw.hosts
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    nodes
        .iter()
        .map(|n| {
            let given = raw.nodes.get(&n.name).and_then(|r| r.host.as_ref());
            match (n.kind, given) {
                (NodeKind::External, None) => Some(None),
                (NodeKind::External, Some(_)) => {
                    p.push(Problem::new(
                        &n.at.key("host"),
                        format!("node \"{}\" is external: no host builds it; remove host (the host of the lab node it is linked to reaches it)", n.name),
                    ));
                    None
                }
                (_, None) => {
                    p.push(Problem::new(
                        &n.at,
                        format!(
                            "node \"{}\" is placed on no host; the file declares [hosts] ({}), so add host = \"NAME\"",
                            n.name,
                            declared()
                        ),
                    ));
                    None
                }
                (_, Some(h)) => match hosts.iter().position(|x| &x.name == h) {
                    Some(i) => Some(Some(i)),
                    None => {
                        // A host whose own table was refused is reported there.
                        if !raw.hosts.contains_key(h) {
                            p.push(Problem::new(
                                &n.at.key("host"),
                                format!("host \"{h}\" is not declared; declared hosts: {}", declared()),
                            ));
                        }
                        None
                    }
                },
            }
        })
        .collect()
}

/// The links between hosts with their VNIs: the file's, checked, and the
/// rest derived. None when a `vni` is unusable.
fn crossings(
    raw: &RawTopology,
    nodes: &[Node],
    links: &[Link],
    node_host: &[Option<usize>],
    hosts: &[Host],
    p: &mut Vec<Problem>,
) -> Option<Vec<Crossing>> {
    let before = p.len();
    let mut out = Vec::new();
    for (li, (l, rl)) in links.iter().zip(&raw.links).enumerate() {
        let ends = (node_host[l.a.node], node_host[l.b.node]);
        let vni_at = l.at.key("vni");
        let given = rl.vni.map(|v| {
            int_in(Some(v), 1..=VNI_MAX as i64, 0, &vni_at, p, |v| {
                format!("vni {v} is out of range; use 1..={VNI_MAX}")
            }) as u32
        });
        match ends {
            (Some(a), Some(b)) if a != b => out.push(Crossing {
                link: li,
                vni: given.unwrap_or(0),
                vni_at: given.map(|_| vni_at),
            }),
            _ if given.is_some() => p.push(Problem::new(
                &vni_at,
                format!(
                    "this link does not cross hosts{}; only a link between two hosts is a VXLAN with a VNI; remove vni",
                    match ends {
                        (Some(a), Some(_)) => format!(" (both ends are on host \"{}\")", hosts[a].name),
                        _ => String::new(),
                    }
                ),
            )),
            _ => {}
        }
    }
    if p.len() > before {
        return None;
    }
    derive_vnis(&mut out, |li| end_key(nodes, &links[li]), hashed_vni);
    Some(out)
}

/// A link's ends as `node:iface node:iface`, the lower first: the same
/// wherever the link is written and whatever else the file holds.
pub(super) fn end_key(nodes: &[Node], l: &Link) -> String {
    let mut ends = [
        format!("{}:{}", nodes[l.a.node].name, l.a.iface),
        format!("{}:{}", nodes[l.b.node].name, l.b.iface),
    ];
    ends.sort();
    ends.join(" ")
}

/// Gives each crossing without a VNI (vni 0) the `hash` of its link's `key`,
/// stepping to the next free VNI on a collision with a VNI the file gives or
/// one already derived. Crossings are taken in key order, so the result
/// depends only on the set of links, not on the order they are written in.
pub(super) fn derive_vnis(
    crossings: &mut [Crossing],
    key: impl Fn(usize) -> String,
    hash: impl Fn(&str) -> u32,
) {
    let mut taken: BTreeSet<u32> = crossings
        .iter()
        .map(|c| c.vni)
        .filter(|&v| v != 0)
        .collect();
    let mut open: Vec<(String, usize)> = crossings
        .iter()
        .enumerate()
        .filter(|(_, c)| c.vni == 0)
        .map(|(i, c)| (key(c.link), i))
        .collect();
    open.sort();
    for (k, i) in open {
        let mut v = hash(&k);
        while taken.contains(&v) {
            v = v % VNI_MAX + 1;
        }
        taken.insert(v);
        crossings[i].vni = v;
    }
}

/// 1..=VNI_MAX from the first bytes of `key`'s SHA-256: the same on every
/// host and with every build, which each host's own derivation relies on.
pub(super) fn hashed_vni(key: &str) -> u32 {
    let d = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let b = d.as_ref();
    let x = u32::from_be_bytes([0, b[0], b[1], b[2]]);
    x % VNI_MAX + 1
}
