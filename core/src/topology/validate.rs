//! Checks on the resolved model that need the whole topology. Pure: reports
//! problems, changes nothing.

use super::resolved::HostAttach;
use super::resolved::*;
use super::{KeyPath, Problem, interface_name_problem, valid_name};
use ipnetwork::IpNetwork;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

pub fn validate(t: &Topology) -> Vec<Problem> {
    let mut p = Vec::new();
    let root = KeyPath::root();
    if !valid_name(&t.name) {
        p.push(Problem::new(&root.key("name"), format!("lab name \"{}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit (it names namespaces)", t.name)));
    }
    if t.nodes.is_empty() {
        p.push(Problem::new(
            &root,
            "the topology has no nodes; add at least one [nodes.NAME] table",
        ));
    }
    interfaces(t, &mut p);
    links(t, &mut p);
    external(t, &mut p);
    addresses(t, &mut p);
    subnets(t, &mut p);
    routes(t, &mut p);
    measurements(t, &mut p);
    super::assertion::validate(t, &mut p);
    super::tunnel::validate(t, &mut p);
    external_tunnel_ends(t, &mut p);
    super::hosts::validate(t, &mut p);
    p
}

/// WireGuard peers and DS-Lite AFTRs may be devices outside the lab (their
/// checks are the kinds' own); the other kinds' ends are processes tunbench
/// runs, so they must be on nodes it builds.
fn external_tunnel_ends(t: &Topology, p: &mut Vec<Problem>) {
    use super::tunnel::TunnelKind;
    for tun in &t.tunnels {
        let kind = match &tun.kind {
            TunnelKind::Wireguard(_) | TunnelKind::Dslite(_) => continue,
            TunnelKind::Esp(_) => "ESP",
            TunnelKind::L2tp(_) => "L2TP",
            TunnelKind::Ikev2(_) => "IKEv2",
        };
        let Some(o) = tun.overlay() else { continue };
        for peer in &o.peers {
            let n = &t.nodes[peer.node];
            if n.kind == NodeKind::External {
                p.push(Problem::new(
                    &peer.at.key("node"),
                    format!(
                        "\"{}\" is external; an {kind} tunnel to a device outside the lab is not supported (tunbench terminates WireGuard peers and DS-Lite AFTRs there); both ends of tunnel \"{}\" must be hosts or routers of the lab",
                        n.name, tun.name
                    ),
                ));
            }
        }
    }
}

fn measurements(t: &Topology, p: &mut Vec<Problem>) {
    for m in &t.measurements {
        let ok = measured_nodes(t, m, p);
        let Some(to_name) = m.to.node() else {
            continue;
        };
        if ok && m.from == to_name {
            p.push(Problem::new(
                &m.at.key("to"),
                format!("from and to are both \"{to_name}\"; measure between two nodes"),
            ));
            continue;
        }
        let Some(to) = t.node_index(to_name) else {
            continue;
        };
        for (key, a) in [("ipv4", m.ipv4), ("ipv6", m.ipv6)] {
            if let Some(a) = a {
                if !t.node_addresses(to).iter().any(|(_, n)| n.ip() == a) {
                    p.push(Problem::new(
                        &m.at.key(key),
                        format!("{a} is not an address of node \"{}\"", m.to),
                    ));
                }
            }
        }
    }
    let mut names: Vec<&str> = t.measurements.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    for w in names.windows(2) {
        if w[0] == w[1] {
            if let Some(m) = t.measurements.iter().filter(|m| m.name == w[0]).nth(1) {
                p.push(Problem::new(
                    &m.at.key("name"),
                    format!(
                        "two [[measure]] entries are named \"{}\"; name each path once",
                        w[0]
                    ),
                ));
            }
        }
    }
}

/// A measurement's `from` and node `to` are hosts or routers tunbench builds
/// (an address target is outside the lab: resolve checked it whole). False
/// when one is not.
fn measured_nodes(t: &Topology, m: &Measurement, p: &mut Vec<Problem>) -> bool {
    let mut ok = true;
    let ends = [("from", Some(m.from.as_str())), ("to", m.to.node())];
    for (key, name) in ends.into_iter().filter_map(|(k, n)| Some((k, n?))) {
        match t.node_index(name) {
            None => {
                let known: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
                p.push(Problem::new(
                    &m.at.key(key),
                    format!(
                        "node \"{name}\" is not defined; defined nodes: {}",
                        known.join(", ")
                    ),
                ));
                ok = false;
            }
            Some(i) if t.nodes[i].kind == NodeKind::External && key == "from" => {
                p.push(Problem::new(
                    &m.at.key(key),
                    format!("\"{name}\" is external: tunbench runs its client only on nodes it builds; measure from a host or router of the lab"),
                ));
                ok = false;
            }
            Some(i) if t.nodes[i].kind == NodeKind::External => {
                // tunbench starts no server there: the address form says
                // which server, on which port, and (one per entry) family.
                let addrs: Vec<String> = t
                    .node_addresses(i)
                    .iter()
                    .map(|(_, a)| format!("{}", a.ip()))
                    .collect();
                p.push(Problem::new(
                    &m.at.key(key),
                    format!(
                        "\"{name}\" is external, so tunbench cannot start a server on it; to measure to an iperf3 server running there, write to = {{ address = \"{}\", port = 5201 }} (one [[measure]] per family)",
                        addrs.first().map(String::as_str).unwrap_or("ADDRESS")
                    ),
                ));
                ok = false;
            }
            Some(i) if t.nodes[i].kind == NodeKind::Switch => {
                p.push(Problem::new(
                    &m.at.key(key),
                    format!("\"{name}\" is a switch; measure between hosts or routers"),
                ));
                ok = false;
            }
            _ => {}
        }
    }
    ok
}

fn interfaces(t: &Topology, p: &mut Vec<Problem>) {
    for n in &t.nodes {
        let mut seen: BTreeMap<&str, &KeyPath> = BTreeMap::new();
        if let Some(br) = &n.bridge {
            if let Some(why) = interface_name_problem(br) {
                p.push(Problem::new(&n.at.key("bridge"), why));
            }
            seen.insert(br, &n.at);
        }
        for i in &n.interfaces {
            let l = &t.links[i.link];
            let at =
                if l.a.node == t.node_index(&n.name).unwrap_or(usize::MAX) && l.a.iface == i.name {
                    &l.a.at
                } else {
                    &l.b.at
                };
            if let Some(why) = interface_name_problem(&i.name) {
                p.push(Problem::new(at, why));
            } else if i.name == "lo" {
                p.push(Problem::new(at, "\"lo\" is the loopback device of every node; name the interface something else"));
            } else if n.bridge.as_ref() == Some(&i.name) {
                p.push(Problem::new(
                    at,
                    format!(
                        "{}:{} has the name of the switch's bridge device; name the port something else or set bridge on nodes.{}",
                        n.name, i.name, n.name
                    ),
                ));
            } else if seen.contains_key(i.name.as_str()) && n.kind != NodeKind::External {
                // An external device's port may face several lab nodes: they
                // share its segment through one host interface each.
                p.push(Problem::new(
                    at,
                    format!(
                        "interface {}:{} is used twice; each link needs its own interface",
                        n.name, i.name
                    ),
                ));
            }
            seen.insert(&i.name, at);
        }
    }
}

fn links(t: &Topology, p: &mut Vec<Problem>) {
    // Scenarios change a link by its name, so a name means one link.
    let mut named: BTreeMap<&str, &KeyPath> = BTreeMap::new();
    for l in &t.links {
        let Some(name) = &l.name else { continue };
        match named.get(name.as_str()) {
            Some(first) => p.push(Problem::new(
                &l.at.key("name"),
                format!("link name \"{name}\" is already used by {first}; each link's name must be unique"),
            )),
            None => {
                named.insert(name, &l.at);
            }
        }
    }
    for l in &t.links {
        if l.a.node == l.b.node {
            p.push(Problem::new(
                &l.b.at,
                format!(
                    "both ends of the link are on node \"{}\"; a link joins two different nodes",
                    t.nodes[l.a.node].name
                ),
            ));
        }
        for e in [&l.a, &l.b] {
            let n = &t.nodes[e.node];
            if n.kind == NodeKind::Switch && !e.addresses.is_empty() {
                p.push(Problem::new(&e.at, format!("{}:{} is a port of switch \"{}\" and carries no address; put the switch's own addresses in nodes.{}.addresses", n.name, e.iface, n.name, n.name)));
            }
        }
        let v6 =
            l.a.addresses
                .iter()
                .chain(&l.b.addresses)
                .any(|a| a.is_ipv6());
        if v6 && l.mtu < 1280 {
            let message = if l.mtu_at == l.at.key("mtu") {
                format!(
                    "mtu {} is below 1280, the IPv6 minimum, and the link carries IPv6 addresses",
                    l.mtu
                )
            } else {
                // Inherited: say which link, since the line is not the link's.
                format!(
                    "mtu {} is below 1280, the IPv6 minimum, and {} ({}:{} - {}:{}) carries IPv6 addresses; raise it or set mtu on that link",
                    l.mtu,
                    l.at,
                    t.nodes[l.a.node].name,
                    l.a.iface,
                    t.nodes[l.b.node].name,
                    l.b.iface
                )
            };
            p.push(Problem::new(&l.mtu_at, message));
        }
    }
}

/// Links to external nodes and what an external node may say. The lab reaches
/// an external device only through an interface of this machine (`host`), and
/// builds nothing between two external devices.
fn external(t: &Topology, p: &mut Vec<Problem>) {
    let moved = links_to_external(t, p);
    shared_host_interfaces(t, &moved, p);
    for n in t.nodes.iter().filter(|n| n.kind == NodeKind::External) {
        if n.interfaces.is_empty() {
            p.push(Problem::new(
                &n.at,
                format!(
                    "external node \"{}\" has no link: add a [[links]] entry to it with host = {{ iface = \"...\" }}",
                    n.name
                ),
            ));
        }
    }
}

/// Each link's `host`: given exactly where one end is external, with no
/// impairments there, and an interface moved into the lab once. Returns the
/// moved interfaces, each with the `host` that moves it.
fn links_to_external<'t>(t: &'t Topology, p: &mut Vec<Problem>) -> BTreeMap<&'t str, &'t KeyPath> {
    let name = |e: &Endpoint| format!("{}:{}", t.nodes[e.node].name, e.iface);
    let outside = |e: &Endpoint| t.nodes[e.node].kind == NodeKind::External;
    let mut moved: BTreeMap<&str, &KeyPath> = BTreeMap::new();
    for l in &t.links {
        match (outside(&l.a), outside(&l.b), &l.host) {
            (false, false, Some(h)) => p.push(Problem::new(
                &h.at,
                format!(
                    "{} - {} joins two nodes tunbench builds; host = {{ ... }} is for a link to a kind = \"external\" node",
                    name(&l.a),
                    name(&l.b)
                ),
            )),
            (true, true, Some(h)) => p.push(Problem::new(
                &h.at,
                format!(
                    "{} - {} joins two external nodes, a cable tunbench does not touch; remove host",
                    name(&l.a),
                    name(&l.b)
                ),
            )),
            (true, false, None) | (false, true, None) => {
                let (lab, ext) = if outside(&l.a) { (&l.b, &l.a) } else { (&l.a, &l.b) };
                p.push(Problem::new(
                    &l.at,
                    format!(
                        "{} is external: say which interface of this machine reaches {}, e.g. host = {{ iface = \"enp1s0\" }} (a macvlan), or with mode = \"ipvlan\", vlan = ID or move = true",
                        t.nodes[ext.node].name,
                        name(lab)
                    ),
                ))
            }
            _ => {}
        }
        let impaired = !(l.impairments.a_to_b.is_none() && l.impairments.b_to_a.is_none());
        if impaired && (outside(&l.a) || outside(&l.b)) {
            p.push(Problem::new(
                &l.at.key("impairments"),
                "impairments on a link to an external node are not supported: the far end is a real network; impair a link inside the lab",
            ));
        }
        if outside(&l.a) == outside(&l.b) {
            continue;
        }
        let Some(h) = l.host.as_ref().filter(|h| h.attach == HostAttach::Move) else {
            continue;
        };
        if let Some(first) = moved.insert(&h.iface, &h.at) {
            p.push(Problem::new(
                &h.at.key("move"),
                format!(
                    "host interface {} is already moved into the lab by {first}; an interface can be moved once (use a macvlan, ipvlan or VLAN to share it)",
                    h.iface
                ),
            ));
        }
    }
    moved
}

/// Host interfaces several links share: macvlans or ipvlans on one, not both
/// (the kernel gives a device one receive handler), and none on an
/// interface moved into the lab.
fn shared_host_interfaces(t: &Topology, moved: &BTreeMap<&str, &KeyPath>, p: &mut Vec<Problem>) {
    let mut kind_on: BTreeMap<&str, (HostAttach, &KeyPath)> = BTreeMap::new();
    for l in &t.links {
        let Some(h) = &l.host else { continue };
        if matches!(h.attach, HostAttach::Macvlan | HostAttach::Ipvlan) {
            match kind_on.get(h.iface.as_str()) {
                Some((first, at)) if *first != h.attach => p.push(Problem::new(
                    &h.at,
                    format!(
                        "host interface {} already carries a {first} for {at}; Linux cannot put macvlans and ipvlans on one interface",
                        h.iface
                    ),
                )),
                Some(_) => {}
                None => {
                    kind_on.insert(&h.iface, (h.attach, &h.at));
                }
            }
        }
        if h.attach != HostAttach::Move {
            if let Some(first) = moved.get(h.iface.as_str()) {
                p.push(Problem::new(
                    &h.at,
                    format!(
                        "host interface {} is moved into the lab by {first}, so it cannot also carry a {}",
                        h.iface, h.attach
                    ),
                ));
            }
        }
    }
}

/// Every address once in the lab; no network or broadcast address as a host's.
fn addresses(t: &Topology, p: &mut Vec<Problem>) {
    let mut seen: BTreeMap<IpAddr, String> = BTreeMap::new();
    // Behind a DS-Lite B4, IPv4 is a private realm: customers may repeat each
    // other's addresses (RFC 6333 keys NAT44 by softwire for exactly this).
    let private: Vec<ipnetwork::Ipv4Network> = t
        .tunnels
        .iter()
        .flat_map(|tun| {
            let super::tunnel::TunnelKind::Dslite(d) = &tun.kind else {
                return Vec::new();
            };
            d.b4s
                .iter()
                .flat_map(|b| b.prefixes.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut check = |a: &IpNetwork, owner: String, at: &KeyPath, p: &mut Vec<Problem>| {
        let in_private_realm =
            matches!(a.ip(), IpAddr::V4(v) if private.iter().any(|n| n.contains(v)));
        if in_private_realm {
            // May repeat across realms; each realm's own links are still checked
            // by the subnet rules.
        } else if let Some(first) = seen.get(&a.ip()) {
            p.push(Problem::new(
                at,
                format!(
                    "address {} is used twice: by {first} and by {owner}",
                    a.ip()
                ),
            ));
        } else {
            seen.insert(a.ip(), owner);
        }
        if let IpNetwork::V4(n) = a {
            if n.prefix() < 31 && (n.ip() == n.network() || n.ip() == n.broadcast()) {
                p.push(Problem::new(
                    at,
                    format!(
                        "{a} is the {} address of its subnet; pick a host address",
                        if n.ip() == n.network() {
                            "network"
                        } else {
                            "broadcast"
                        }
                    ),
                ));
            }
        }
        if a.ip().is_multicast() || a.ip().is_unspecified() {
            p.push(Problem::new(
                at,
                format!("{a} cannot be an interface address"),
            ));
        }
    };
    for n in &t.nodes {
        for (i, a) in n.addresses.iter().enumerate() {
            check(
                a,
                format!("{} ({})", n.name, n.bridge.as_deref().unwrap_or("lo")),
                &n.at.key("addresses").index(i),
                p,
            );
        }
    }
    for l in &t.links {
        for e in [&l.a, &l.b] {
            for fam4 in [true, false] {
                let key = if fam4 { "ipv4" } else { "ipv6" };
                let list: Vec<_> = e.addresses.iter().filter(|a| a.is_ipv4() == fam4).collect();
                for (i, a) in list.iter().enumerate() {
                    // The same path resolve gives: indexed only when the key holds several.
                    let at = if list.len() == 1 {
                        e.at.key(key)
                    } else {
                        e.at.key(key).index(i)
                    };
                    check(a, format!("{}:{}", t.nodes[e.node].name, e.iface), &at, p);
                }
            }
        }
    }
}

/// On each L2 segment, every address must share its subnet with an address of
/// another node there, or nothing on the segment can talk to it.
fn subnets(t: &Topology, p: &mut Vec<Problem>) {
    for seg in t.segments() {
        let mut on_seg: Vec<(usize, String, IpNetwork)> = Vec::new();
        for (n, dev) in &seg {
            for (d, a) in t.node_addresses(*n) {
                if d == *dev {
                    on_seg.push((*n, d, a));
                }
            }
        }
        for fam4 in [true, false] {
            let fam: Vec<_> = on_seg
                .iter()
                .filter(|(_, _, a)| a.is_ipv4() == fam4)
                .collect();
            let nodes: BTreeSet<usize> = fam.iter().map(|(n, _, _)| *n).collect();
            if nodes.len() < 2 {
                continue;
            }
            for (n, dev, a) in &fam {
                let shares = fam
                    .iter()
                    .any(|(m, _, b)| m != n && a.contains(b.ip()) && b.contains(a.ip()));
                if !shares {
                    let others: Vec<String> = fam
                        .iter()
                        .filter(|(m, _, _)| m != n)
                        .map(|(m, d, b)| format!("{}:{} {b}", t.nodes[*m].name, d))
                        .collect();
                    let at = endpoint_at(t, *n, dev).unwrap_or_else(|| t.nodes[*n].at.clone());
                    p.push(Problem::new(
                        &at,
                        format!("{}:{} {a} is in a different subnet from the other end of its link ({}); both ends of a link need addresses in one subnet", t.nodes[*n].name, dev, others.join(", ")),
                    ));
                }
            }
        }
    }
}

fn endpoint_at(t: &Topology, node: usize, iface: &str) -> Option<KeyPath> {
    t.links
        .iter()
        .flat_map(|l| [&l.a, &l.b])
        .find(|e| e.node == node && e.iface == iface)
        .map(|e| e.at.clone())
}

fn routes(t: &Topology, p: &mut Vec<Problem>) {
    // Who holds each address, gathered once (a lookup per route over every
    // node would be n^2 on generated labs of thousands of nodes). The first
    // holder, as `Topology::owner_of` has it.
    let mut owners: HashMap<IpAddr, usize> = HashMap::new();
    for i in 0..t.nodes.len() {
        for (_, a) in t.node_addresses(i) {
            owners.entry(a.ip()).or_insert(i);
        }
    }
    for (ni, n) in t.nodes.iter().enumerate() {
        let addrs = t.node_addresses(ni);
        let mut seen: Vec<(IpNetwork, Option<u32>)> = Vec::new();
        for r in &n.routes {
            if seen.contains(&(r.to, r.metric)) {
                p.push(Problem::new(
                    &r.at.key("to"),
                    format!("route to {} is given twice on node \"{}\"", r.to, n.name),
                ));
            }
            seen.push((r.to, r.metric));
            if !route_dev_exists(n, r, p) {
                continue;
            }
            if let Some(gw) = r.via {
                gateway(t, n, r, gw, &addrs, &owners, p);
            }
        }
    }
}

/// A route's `dev`, if it names one, is an interface of its node.
fn route_dev_exists(n: &Node, r: &Route, p: &mut Vec<Problem>) -> bool {
    let Some(dev) = &r.dev else {
        return true;
    };
    let known = n.interfaces.iter().any(|i| &i.name == dev)
        || n.bridge.as_ref() == Some(dev)
        || dev == "lo";
    if !known {
        let names: Vec<&str> = n
            .bridge
            .iter()
            .chain(n.interfaces.iter().map(|i| &i.name))
            .map(|s| s.as_str())
            .chain(["lo"])
            .collect();
        p.push(Problem::new(
            &r.at.key("dev"),
            format!(
                "node \"{}\" has no interface \"{dev}\"; its interfaces: {}",
                n.name,
                names.join(", ")
            ),
        ));
    }
    known
}

/// A route's gateway `gw`: a neighbour's address on a subnet of node `n`
/// (`addrs` with their devices), held by a node that forwards.
fn gateway(
    t: &Topology,
    n: &Node,
    r: &Route,
    gw: IpAddr,
    addrs: &[(String, IpNetwork)],
    owners: &HashMap<IpAddr, usize>,
    p: &mut Vec<Problem>,
) {
    if addrs.iter().any(|(_, a)| a.ip() == gw) {
        p.push(Problem::new(
            &r.at.key("via"),
            format!("gateway {gw} is an address of node \"{}\" itself", n.name),
        ));
        return;
    }
    let on_link = addrs
        .iter()
        .any(|(d, a)| d != "lo" && a.contains(gw) && r.dev.as_ref().is_none_or(|x| x == d));
    if !on_link {
        let subnets: Vec<String> = addrs
            .iter()
            .filter(|(d, a)| d != "lo" && a.is_ipv4() == gw.is_ipv4())
            .map(|(d, a)| format!("{d} {a}"))
            .collect();
        p.push(Problem::new(
            &r.at.key("via"),
            format!(
                "gateway {gw} is on no subnet connected to node \"{}\" ({}); a gateway must be a neighbour's address",
                n.name,
                if subnets.is_empty() { "it has no address of that family".to_string() } else { format!("its subnets: {}", subnets.join(", ")) }
            ),
        ));
        return;
    }
    match owners.get(&gw).copied() {
        None => p.push(Problem::new(
            &r.at.key("via"),
            format!("no node in the lab holds gateway address {gw}"),
        )),
        Some(g)
            if !t.nodes[g].forwarding && r.to.prefix() < if gw.is_ipv4() { 32 } else { 128 } =>
        {
            let g = &t.nodes[g];
            p.push(Problem::new(
                &r.at.key("via"),
                format!(
                    "route to {} goes through {} \"{}\", which does not forward, so this path can never work; make it kind = \"router\" or set forwarding = true on it",
                    r.to, g.kind, g.name
                ),
            ));
        }
        _ => {}
    }
}
