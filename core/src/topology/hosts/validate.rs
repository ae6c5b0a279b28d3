//! Checks on a placed lab: every host used, underlay addresses distinct and
//! of one family across each link between hosts, room for VXLAN's overhead
//! in the underlay's MTU, each switch whole on one host, each VNI once.

use super::{Placement, link_label, vxlan_overhead};
use crate::topology::Problem;
use crate::topology::resolved::{NodeKind, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

pub fn validate(t: &Topology, p: &mut Vec<Problem>) {
    let Some(pl) = &t.placement else { return };
    unused_hosts(pl, p);
    distinct_underlays(pl, p);
    crossing_links(t, pl, p);
    whole_switches(t, pl, p);
    distinct_vnis(t, pl, p);
}

/// A declared host that holds no node is refused: it is a typo in some
/// node's `host`, or a machine an orchestrator would run tunbench on for
/// nothing.
fn unused_hosts(pl: &Placement, p: &mut Vec<Problem>) {
    for (i, h) in pl.hosts.iter().enumerate() {
        if !pl.node_host.contains(&Some(i)) {
            p.push(Problem::new(
                &h.at,
                format!(
                    "host \"{}\" holds no node; place nodes on it with host = \"{}\" or remove [hosts.{}]",
                    h.name, h.name, h.name
                ),
            ));
        }
    }
}

fn distinct_underlays(pl: &Placement, p: &mut Vec<Problem>) {
    let mut seen: BTreeMap<IpAddr, &str> = BTreeMap::new();
    for h in &pl.hosts {
        if let Some(first) = seen.insert(h.underlay, &h.name) {
            seen.insert(h.underlay, first);
            p.push(Problem::new(
                &h.at.key("underlay"),
                format!(
                    "underlay {} is also host \"{first}\"'s; each host needs its own underlay address",
                    h.underlay
                ),
            ));
        }
    }
}

fn family(a: IpAddr) -> &'static str {
    if a.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Each link between hosts: one underlay family at both ends, and its MTU
/// plus VXLAN's overhead within the smaller underlay MTU of the two.
fn crossing_links(t: &Topology, pl: &Placement, p: &mut Vec<Problem>) {
    for c in &pl.crossings {
        let l = &t.links[c.link];
        let (Some(ha), Some(hb)) = (pl.node_host[l.a.node], pl.node_host[l.b.node]) else {
            continue;
        };
        let (a, b) = (&pl.hosts[ha], &pl.hosts[hb]);
        if l.impairments.needs_relay() {
            p.push(Problem::new(
                &l.at,
                format!(
                    "{} crosses from host \"{}\" to host \"{}\" and has userspace impairments (delay, jitter, loss, duplication, reordering or a queue limit), whose relay sits between the two ends on one machine; impair a link within one host instead",
                    link_label(t, l), a.name, b.name
                ),
            ));
        }
        if a.underlay.is_ipv4() != b.underlay.is_ipv4() {
            p.push(Problem::new(
                &l.at,
                format!(
                    "{} joins host \"{}\" (underlay {}, {}) and host \"{}\" (underlay {}, {}); a VXLAN link needs one underlay family at both ends: give both hosts IPv4 or both IPv6 underlay addresses",
                    link_label(t, l), a.name, a.underlay, family(a.underlay), b.name, b.underlay, family(b.underlay)
                ),
            ));
            continue;
        }
        let overhead = vxlan_overhead(a.underlay);
        let narrow = if a.mtu <= b.mtu { a } else { b };
        if l.mtu + overhead > narrow.mtu {
            p.push(Problem::new(
                &l.at,
                format!(
                    "{} crosses from host \"{}\" to host \"{}\": its MTU {} plus VXLAN's {overhead} bytes over {} is {}, more than host \"{}\"'s underlay MTU {}; set mtu = {} in [hosts.{}] and [hosts.{}] if the underlay carries it, or give the link mtu = {} at most",
                    link_label(t, l), a.name, b.name, l.mtu, family(a.underlay), l.mtu + overhead,
                    narrow.name, narrow.mtu, l.mtu + overhead, a.name, b.name, narrow.mtu - overhead
                ),
            ));
        }
    }
}

/// A switch is one bridge in one namespace: its ports' far ends must be on
/// its own host.
fn whole_switches(t: &Topology, pl: &Placement, p: &mut Vec<Problem>) {
    for (si, s) in t.nodes.iter().enumerate() {
        let Some(home) = pl.node_host[si].filter(|_| s.kind == NodeKind::Switch) else {
            continue;
        };
        let mut away: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for i in &s.interfaces {
            match pl.node_host[i.peer_node] {
                Some(h) if h != home => {
                    away.entry(&pl.hosts[h].name)
                        .or_default()
                        .insert(&t.nodes[i.peer_node].name);
                }
                _ => {}
            }
        }
        if away.is_empty() {
            continue;
        }
        let list: Vec<String> = away
            .iter()
            .map(|(h, ns)| {
                format!(
                    "host \"{h}\" ({})",
                    ns.iter().copied().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        p.push(Problem::new(
            &s.at,
            format!(
                "switch \"{}\" is one bridge on host \"{}\", but nodes on its ports are on {}; a switch across hosts is not supported: place the switch and every node on its ports on one host",
                s.name, pl.hosts[home].name, list.join(" and ")
            ),
        ));
    }
}

/// The file's VNIs, each once (derived ones never collide).
fn distinct_vnis(t: &Topology, pl: &Placement, p: &mut Vec<Problem>) {
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    for c in &pl.crossings {
        let Some(at) = &c.vni_at else { continue };
        match seen.get(&c.vni) {
            Some(&first) => p.push(Problem::new(
                at,
                format!(
                    "vni {} is also {}'s; each link between hosts needs its own VNI",
                    c.vni,
                    link_label(t, &t.links[first])
                ),
            )),
            None => {
                seen.insert(c.vni, c.link);
            }
        }
    }
}
