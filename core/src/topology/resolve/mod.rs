//! Raw file -> resolved model: layered defaults (built-in -> `[defaults]` ->
//! `[kinds.K]` -> node), endpoints split into node and interface, addresses and
//! routes parsed. Problems that make a value meaningless are reported here; checks
//! that need the whole model are in `validate`.

mod link;
mod measurement;
mod node;

use super::raw::{RawSettings, RawTopology};
use super::resolved::*;
use super::tunnel::Datapath;
use super::{KeyPath, Problem};
use std::path::Path;

pub const DEFAULT_MTU: u32 = 1500;

/// `dir`: the topology file's directory, where profile paths start.
/// `kernel`: what the kernel that builds the lab can do (a DS-Lite endpoint's
/// `datapath = "auto"` and a link's `shaper` depend on it).
pub fn resolve(
    raw: &RawTopology,
    dir: &Path,
    kernel: super::kernel::KernelFacts,
) -> (Topology, Vec<Problem>) {
    let mut p = Vec::new();
    let root = KeyPath::root();
    if raw.impairments.is_some() {
        p.push(Problem::new(
            &root.key("impairments"),
            "[impairments] is not supported yet by this version of tunbench; remove the section",
        ));
    }
    let defaults = raw.defaults.clone().unwrap_or_default();
    let default_mtu = shared_layers(raw, &defaults, &root, &mut p);
    let mut nodes: Vec<Node> = raw
        .nodes
        .iter()
        .filter_map(|(name, rn)| {
            let at = root.key("nodes").key(name);
            node::node(name, rn, &raw.kinds, &defaults, at, &mut p)
        })
        .collect();
    let defaults_mtu_at = defaults.mtu.map(|_| root.key("defaults").key("mtu"));
    let links: Vec<Link> = raw
        .links
        .iter()
        .enumerate()
        .filter_map(|(i, rl)| {
            let at = root.key("links").index(i);
            link::link(
                rl,
                &nodes,
                default_mtu,
                defaults_mtu_at.as_ref(),
                kernel,
                at,
                &mut p,
            )
        })
        .collect();
    add_interfaces(&mut nodes, &links);
    // Placement reads each link's own keys by its place in the file, so only
    // when every node and link resolved (otherwise their problems stop the file).
    let placement = if nodes.len() == raw.nodes.len() && links.len() == raw.links.len() {
        super::hosts::resolve(raw, &nodes, &links, &mut p)
    } else {
        None
    };
    // Profiles look at a node's interfaces and routes, so they come last.
    profiles(raw, &mut nodes, dir, &mut p);
    let measurements = raw
        .measure
        .iter()
        .enumerate()
        .filter_map(|(i, m)| measurement::measurement(m, &root.key("measure").index(i), &mut p))
        .collect();
    let known: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let mut tunnels = super::tunnel::resolve(
        &raw.tunnels,
        |n| nodes.iter().position(|x| x.name == n),
        |i| !nodes[i].kind.is_built(),
        &known.join(", "),
        kernel,
        &mut p,
    );
    hubs_forward(raw, &mut nodes, &tunnels, &root, &mut p);
    super::tunnel::termination::settle(&mut nodes, &mut tunnels, &mut p);
    let reference = raw.reference.as_ref().map(|r| {
        super::reference::resolve(
            r,
            &super::reference::path_labels(raw),
            &root.key("reference"),
            &mut p,
        )
    });
    let assertions = super::assertion::resolve(&raw.assert, &root.key("assert"), &mut p);
    (
        Topology {
            name: raw.name.clone(),
            description: raw.description.clone(),
            nodes,
            links,
            measurements,
            tunnels,
            reference,
            assertions,
            placement,
        },
        p,
    )
}

/// `[defaults]` and `[kinds.K]`, layers shared by many nodes, checked once
/// here rather than once per node; the default link MTU.
fn shared_layers(
    raw: &RawTopology,
    defaults: &RawSettings,
    root: &KeyPath,
    p: &mut Vec<Problem>,
) -> u32 {
    let default_mtu = match defaults.mtu {
        None => DEFAULT_MTU,
        Some(m) => link::mtu(m, &root.key("defaults").key("mtu"), p).unwrap_or(DEFAULT_MTU),
    };
    node::sysctl_keys(&defaults.sysctls, &root.key("defaults").key("sysctls"), p);
    for (k, s) in &raw.kinds {
        let at = root.key("kinds").key(k);
        node::sysctl_keys(&s.sysctls, &at.key("sysctls"), p);
        if NodeKind::parse(k).is_none() {
            p.push(Problem::new(
                &at,
                format!(
                    "unknown node kind \"{k}\"; known kinds: {}",
                    NodeKind::known_list()
                ),
            ));
        }
        if s.mtu.is_some() {
            p.push(Problem::new(
                &at.key("mtu"),
                "mtu is set per link or in [defaults], not per kind",
            ));
        }
    }
    default_mtu
}

/// Each link's two ends become interfaces of their nodes, in link order.
fn add_interfaces(nodes: &mut [Node], links: &[Link]) {
    for (li, l) in links.iter().enumerate() {
        for (me, peer) in [(&l.a, &l.b), (&l.b, &l.a)] {
            nodes[me.node].interfaces.push(Interface {
                name: me.iface.clone(),
                link: li,
                mtu: l.mtu,
                addresses: me.addresses.clone(),
                peer_node: peer.node,
                peer_iface: peer.iface.clone(),
            });
        }
    }
}

/// Each node's device profile: a router's model and termination ceilings,
/// or a host's limits, and the datapath they imply.
fn profiles(raw: &RawTopology, nodes: &mut [Node], dir: &Path, p: &mut Vec<Problem>) {
    for n in nodes {
        let Some(rn) = raw.nodes.get(&n.name) else {
            continue;
        };
        let (model, host_model, terminations) = super::device::resolve(n, rn, dir, p);
        // A profile with only termination ceilings leaves forwarding to
        // the kernel, unless the file says otherwise.
        if n.kind == NodeKind::Router
            && model.is_none()
            && !terminations.is_empty()
            && rn.datapath.is_none()
        {
            n.datapath = Datapath::Kernel;
        }
        n.model = model;
        n.terminations = terminations;
        // A host's limits run in its own slow path.
        if let Some(h) = &host_model {
            n.model = Some(h.device_model());
            n.datapath = Datapath::Userspace;
        }
        n.host_model = host_model;
    }
}

/// A tunnel's hub forwards between its spokes (that is what `hub` means), so
/// tunbench turns forwarding on for a hub node that would not forward by its
/// kind (a host), and the routing model sees it. A node that says
/// `forwarding = false` itself cannot be a hub: that is refused where it says so.
fn hubs_forward(
    raw: &RawTopology,
    nodes: &mut [Node],
    tunnels: &[super::tunnel::Tunnel],
    root: &KeyPath,
    p: &mut Vec<Problem>,
) {
    for t in tunnels {
        let Some(w) = t.overlay() else { continue };
        let Some(hub) = w.hub.map(|h| w.peers[h].node) else {
            continue;
        };
        let n = &mut nodes[hub];
        if n.forwarding || n.kind == NodeKind::External {
            continue;
        }
        if raw.nodes.get(&n.name).and_then(|r| r.forwarding) == Some(false) {
            p.push(Problem::new(
                &root.key("nodes").key(&n.name).key("forwarding"),
                format!(
                    "node \"{}\" is the hub of tunnel \"{}\", which forwards between its spokes; \
                     remove `forwarding = false` or make another peer the hub",
                    n.name, t.name
                ),
            ));
            continue;
        }
        n.forwarding = true;
        for k in ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"] {
            n.sysctls.insert(k.into(), "1".into());
        }
    }
}
