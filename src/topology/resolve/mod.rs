//! Raw file -> resolved model: layered defaults (built-in -> `[defaults]` ->
//! `[kinds.K]` -> node), endpoints split into node and interface, addresses and
//! routes parsed. Problems that make a value meaningless are reported here; checks
//! that need the whole model are in `validate`.

use super::raw::*;
use super::resolved::*;
use super::tunnel::Datapath;
use super::{KeyPath, Problem};
use crate::vocab::target::MeasureTarget;
use ipnetwork::IpNetwork;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

pub const DEFAULT_MTU: u32 = 1500;
pub const DEFAULT_BRIDGE: &str = "br0";

/// Sysctls every node gets before any layer of the file: labs behave the same
/// whatever the host's own settings are (IPv4 conf is inherited from the host's
/// namespace otherwise), and IPv6 addresses are usable at once.
const BUILTIN_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
    ("net.ipv6.conf.all.accept_dad", "0"),
    ("net.ipv6.conf.default.accept_dad", "0"),
];

/// `dir`: the topology file's directory, where profile paths start.
/// `kernel`: what the kernel that builds the lab can do (a DS-Lite endpoint's
/// `datapath = "auto"` depends on it).
pub fn resolve(
    raw: &RawTopology,
    dir: &Path,
    kernel: super::kernel::KernelFacts,
) -> (Topology, Vec<Problem>) {
    let mut p = Vec::new();
    let root = KeyPath::root();

    for (section, v) in [("impairments", &raw.impairments)] {
        if v.is_some() {
            p.push(Problem::new(&root.key(section), format!("[{section}] is not supported yet by this version of tunbench; remove the section")));
        }
    }

    let defaults = raw.defaults.clone().unwrap_or_default();
    let default_mtu = match defaults.mtu {
        None => DEFAULT_MTU,
        Some(m) => mtu(m, &root.key("defaults").key("mtu"), &mut p).unwrap_or(DEFAULT_MTU),
    };
    // Layers shared by many nodes are checked once here, not once per node.
    sysctl_keys(
        &defaults.sysctls,
        &root.key("defaults").key("sysctls"),
        &mut p,
    );
    for (k, s) in &raw.kinds {
        let at = root.key("kinds").key(k);
        sysctl_keys(&s.sysctls, &at.key("sysctls"), &mut p);
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

    let mut nodes = Vec::new();
    for (name, rn) in &raw.nodes {
        let at = root.key("nodes").key(name);
        if !super::valid_name(name) {
            p.push(Problem::new(&at, format!("node name \"{name}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit")));
        }
        let Some(kind) = NodeKind::parse(&rn.kind) else {
            p.push(Problem::new(
                &at.key("kind"),
                format!(
                    "unknown node kind \"{}\"; known kinds: {}",
                    rn.kind,
                    NodeKind::known_list()
                ),
            ));
            continue;
        };
        let datapath = node_datapath(
            rn.datapath.as_ref(),
            kind,
            rn.profile.is_some(),
            &at.key("datapath"),
            &mut p,
        );
        let kind_layer = raw.kinds.get(kind.as_str()).cloned().unwrap_or_default();
        let forwarding = rn
            .forwarding
            .or(kind_layer.forwarding)
            .or(defaults.forwarding)
            .unwrap_or(kind.forwards_by_default());

        if kind == NodeKind::External && !rn.sysctls.is_empty() {
            p.push(Problem::new(
                &at.key("sysctls"),
                format!("node \"{name}\" is external: tunbench does not configure it; remove its sysctls"),
            ));
        }
        let mut sysctls: BTreeMap<String, String> = BUILTIN_SYSCTLS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let fwd = if forwarding { "1" } else { "0" };
        sysctls.insert("net.ipv4.ip_forward".into(), fwd.into());
        sysctls.insert("net.ipv6.conf.all.forwarding".into(), fwd.into());
        sysctl_keys(&rn.sysctls, &at.key("sysctls"), &mut p);
        for layer in [&defaults.sysctls, &kind_layer.sysctls, &rn.sysctls] {
            for (k, v) in layer {
                sysctls.insert(k.clone(), v.0.clone());
            }
        }

        let mut routes = Vec::new();
        for (i, r) in rn.routes.iter().enumerate() {
            if let Some(r) = route(r, &at.key("routes").index(i), &mut p) {
                routes.push(r);
            }
        }
        let mut addresses = Vec::new();
        for (i, a) in rn.addresses.iter().enumerate() {
            if let Some(a) = cidr(a, None, &at.key("addresses").index(i), &mut p) {
                addresses.push(a);
            }
        }
        let bridge = match kind {
            NodeKind::Switch => Some(
                rn.bridge
                    .clone()
                    .unwrap_or_else(|| DEFAULT_BRIDGE.to_string()),
            ),
            _ => {
                if rn.bridge.is_some() {
                    p.push(Problem::new(
                        &at.key("bridge"),
                        format!("only a switch has a bridge; node \"{name}\" is a {kind}"),
                    ));
                }
                None
            }
        };
        // Nothing is written to a device tunbench does not build.
        if kind == NodeKind::External {
            sysctls.clear();
        }
        nodes.push(Node {
            name: name.clone(),
            kind,
            description: rn.description.clone(),
            forwarding,
            sysctls,
            routes,
            addresses,
            bridge,
            datapath,
            model: None,
            host_model: None,
            terminations: Default::default(),
            interfaces: Vec::new(),
            at,
        });
    }

    let mut links = Vec::new();
    for (i, rl) in raw.links.iter().enumerate() {
        let at = root.key("links").index(i);
        let (mtu_v, mtu_at) = match rl.mtu {
            None if defaults.mtu.is_some() => (Some(default_mtu), root.key("defaults").key("mtu")),
            None => (Some(default_mtu), at.clone()),
            Some(m) => (mtu(m, &at.key("mtu"), &mut p), at.key("mtu")),
        };
        let impairments = match &rl.impairments {
            Some(v) => super::impair::resolve(v, &at.key("impairments"), &mut p),
            None => Default::default(),
        };
        if let Some(name) = &rl.name {
            if !super::valid_name(name) {
                p.push(Problem::new(
                    &at.key("name"),
                    format!("link name \"{name}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit"),
                ));
            }
        }
        let a = endpoint(&rl.a, &nodes, &at.key("a"), &mut p);
        let b = endpoint(&rl.b, &nodes, &at.key("b"), &mut p);
        let host = rl
            .host
            .as_ref()
            .and_then(|h| host_port(h, &at.key("host"), &mut p));
        if let (Some(a), Some(b), Some(m)) = (a, b, mtu_v) {
            links.push(Link {
                name: rl.name.clone(),
                a,
                b,
                impairments,
                host,
                mtu: m,
                mtu_at,
                description: rl.description.clone(),
                at,
            });
        }
    }

    // Interfaces per node, in link order.
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

    // Profiles look at a node's interfaces and routes, so they come last.
    for n in &mut nodes {
        if let Some(rn) = raw.nodes.get(&n.name) {
            let (model, host_model, terminations) = super::device::resolve(n, rn, dir, &mut p);
            // A profile with only termination ceilings leaves forwarding to
            // the kernel, unless the file says otherwise.
            if n.kind == NodeKind::Router
                && model.is_none()
                && !terminations.is_empty()
                && rn.datapath.is_none()
            {
                n.datapath = super::tunnel::Datapath::Kernel;
            }
            n.model = model;
            n.terminations = terminations;
            // A host's limits run in its own slow path.
            if let Some(h) = &host_model {
                n.model = Some(h.device_model());
                n.datapath = super::tunnel::Datapath::Userspace;
            }
            n.host_model = host_model;
        }
    }

    let measurements = raw
        .measure
        .iter()
        .enumerate()
        .filter_map(|(i, m)| measurement(m, &root.key("measure").index(i), &mut p))
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
    super::termination::settle(&mut nodes, &mut tunnels, &mut p);

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
        },
        p,
    )
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

fn words<T: Copy>(
    given: &Option<Vec<String>>,
    all: &[(&str, T)],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Vec<T>> {
    let Some(list) = given else {
        return Some(all.iter().map(|(_, v)| *v).collect());
    };
    if list.is_empty() {
        p.push(Problem::new(
            at,
            "an empty list measures nothing; leave the key out for all",
        ));
        return None;
    }
    let mut out = Vec::new();
    for (i, w) in list.iter().enumerate() {
        match all.iter().find(|(k, _)| k == w) {
            Some((_, v)) => out.push(*v),
            None => {
                let known: Vec<String> = all.iter().map(|(k, _)| format!("\"{k}\"")).collect();
                p.push(Problem::new(
                    &at.index(i),
                    format!("\"{w}\" is not one of {}", known.join(", ")),
                ));
                return None;
            }
        }
    }
    Some(out)
}

fn measurement(m: &RawMeasure, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Measurement> {
    use crate::vocab::{Direction, Family, Proto};
    let before = p.len();
    let families = words(
        &m.families,
        &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)],
        &at.key("families"),
        p,
    );
    let protocols = words(
        &m.protocols,
        &[("tcp", Proto::Tcp), ("udp", Proto::Udp)],
        &at.key("protocols"),
        p,
    );
    let directions = words(
        &m.directions,
        &[
            ("sender", Direction::Sender),
            ("receiver", Direction::Receiver),
        ],
        &at.key("directions"),
        p,
    );
    let mut streams = Vec::new();
    for (i, s) in m
        .streams
        .clone()
        .unwrap_or_else(|| vec![1])
        .iter()
        .enumerate()
    {
        if (1..=128).contains(s) {
            streams.push(*s as u32);
        } else {
            p.push(Problem::new(
                &at.key("streams").index(i),
                format!("{s} streams; use 1..=128"),
            ));
        }
    }
    let runs = m.runs.unwrap_or(5);
    if !(1..=100).contains(&runs) {
        p.push(Problem::new(
            &at.key("runs"),
            format!("runs = {runs}; use 1..=100"),
        ));
    }
    let secs = |v: Option<f64>, d: f64, key: &str, p: &mut Vec<Problem>| {
        let v = v.unwrap_or(d);
        if !(1.0..=3600.0).contains(&v) {
            p.push(Problem::new(
                &at.key(key),
                format!("{key} = {v} s; use 1 to 3600 seconds"),
            ));
        }
        v
    };
    let duration = secs(m.duration, 10.0, "duration", p);
    let trial_duration = secs(m.trial_duration, 2.0, "trial_duration", p);
    let udp_loss = m.udp_loss.unwrap_or(10.0);
    if !(0.0..=100.0).contains(&udp_loss) {
        p.push(Problem::new(
            &at.key("udp_loss"),
            format!("udp_loss = {udp_loss} %; use 0 to 100"),
        ));
    }
    let udp_len = m.udp_len.unwrap_or(1448);
    if !(16..=65507).contains(&udp_len) {
        p.push(Problem::new(
            &at.key("udp_len"),
            format!("udp_len = {udp_len} bytes; use 16..=65507"),
        ));
    }
    let latency_rate = m.latency_rate.unwrap_or(crate::vocab::LATENCY_RATE);
    if !(1.0..=1000.0).contains(&latency_rate) {
        p.push(Problem::new(
            &at.key("latency_rate"),
            format!("latency_rate = {latency_rate} probes per second; use 1 to 1000"),
        ));
    }
    let latency_idle = m.latency_idle.unwrap_or(crate::vocab::LATENCY_IDLE_SECONDS);
    if !(0.5..=60.0).contains(&latency_idle) {
        p.push(Problem::new(
            &at.key("latency_idle"),
            format!("latency_idle = {latency_idle} s; use 0.5 to 60 seconds"),
        ));
    }
    let addr = |v: &Option<String>, v4: bool, key: &str, p: &mut Vec<Problem>| -> Option<IpAddr> {
        let s = v.as_ref()?;
        match s.parse::<IpAddr>() {
            Ok(a) if a.is_ipv4() == v4 => Some(a),
            _ => {
                p.push(Problem::new(
                    &at.key(key),
                    format!(
                        "\"{s}\" is not an {} address (no prefix length here)",
                        if v4 { "IPv4" } else { "IPv6" }
                    ),
                ));
                None
            }
        }
    };
    let ipv4 = addr(&m.ipv4, true, "ipv4", p);
    let ipv6 = addr(&m.ipv6, false, "ipv6", p);
    let given = m.families.as_ref().and(families.as_deref());
    let to = target(m, given, at, p);
    // An address target has one family, its own: the default list is that one.
    let families = match (to.as_ref().and_then(MeasureTarget::family), &m.families) {
        (Some(own), None) => Some(vec![own]),
        _ => families,
    };
    let name = m.name.clone().unwrap_or_else(|| "raw".into());
    if !super::valid_name(&name) {
        p.push(Problem::new(
            &at.key("name"),
            format!("path name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
        ));
    }
    if p.len() > before {
        return None;
    }
    Some(Measurement {
        name,
        from: m.from.clone(),
        to: to?,
        ipv4,
        ipv6,
        families: families?,
        protocols: protocols?,
        directions: directions?,
        streams,
        runs: runs as u32,
        duration,
        trial_duration,
        udp_loss,
        udp_len: udp_len as u32,
        latency: m.latency,
        latency_rate,
        latency_idle,
        scenarios: m.scenarios.clone(),
        at: at.clone(),
    })
}

/// `to`: a node's name as written (validate checks the node), or an address
/// outside the lab, whose family is then the only one measured and which
/// `ipv4` and `ipv6` cannot redirect.
fn target(
    m: &RawMeasure,
    families: Option<&[crate::vocab::Family]>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<MeasureTarget> {
    use crate::vocab::Family;
    let (address, port) = match &m.to {
        RawTarget::Node(n) => return Some(MeasureTarget::Node(n.clone())),
        RawTarget::Address { address, port } => (address, port),
    };
    let before = p.len();
    let tat = at.key("to");
    let address = match address.parse::<IpAddr>() {
        Ok(a) => match crate::vocab::target::address_problem(a) {
            Some(why) => {
                p.push(Problem::new(&tat.key("address"), why));
                None
            }
            None => Some(a),
        },
        Err(_) => {
            p.push(Problem::new(
                &tat.key("address"),
                format!(
                    "\"{address}\" is not an IPv4 or IPv6 address (no prefix length, no port: give the port as port = 5201)"
                ),
            ));
            None
        }
    };
    let port = match port {
        None => crate::vocab::target::DEFAULT_PORT,
        Some(n) if (1..=65535).contains(n) => *n as u16,
        Some(n) => {
            p.push(Problem::new(
                &tat.key("port"),
                format!("port {n}; give the server's port, 1 to 65535 (iperf3's is 5201)"),
            ));
            0
        }
    };
    let address = address?;
    let own = Family::of(address);
    for (key, given) in [("ipv4", &m.ipv4), ("ipv6", &m.ipv6)] {
        if given.is_some() {
            p.push(Problem::new(
                &at.key(key),
                format!(
                    "{key} chooses among a node's addresses; the target is the address {address} itself (leave {key} out)"
                ),
            ));
        }
    }
    for (i, f) in families.unwrap_or_default().iter().enumerate() {
        if *f != own {
            p.push(Problem::new(
                &at.key("families").index(i),
                format!(
                    "\"{}\" cannot be measured to {address}, an {} address; list only \"{}\" (or leave families out)",
                    f.word(),
                    own.title(),
                    own.word()
                ),
            ));
        }
    }
    (p.len() == before).then_some(MeasureTarget::Address { address, port })
}

fn mtu(v: i64, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u32> {
    if (68..=65535).contains(&v) {
        Some(v as u32)
    } else {
        p.push(Problem::new(
            at,
            format!("mtu {v} is out of range; use 68..=65535 (1280 or more where IPv6 is used)"),
        ));
        None
    }
}

fn sysctl_keys(layer: &BTreeMap<String, SysctlValue>, at: &KeyPath, p: &mut Vec<Problem>) {
    for k in layer.keys() {
        if let Some(why) = sysctl_key_problem(k) {
            p.push(Problem::new(&at.key(k), why));
        }
    }
}

fn sysctl_key_problem(k: &str) -> Option<String> {
    if !k.starts_with("net.") {
        return Some(format!(
            "sysctl \"{k}\" is not per network namespace; only net.* sysctls can be set on a node"
        ));
    }
    if k.split('.').any(|s| s.is_empty() || s == "..")
        || !k
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
    {
        return Some(format!(
            "sysctl \"{k}\" is not a valid sysctl name (dotted, e.g. net.ipv4.ip_forward)"
        ));
    }
    // Linux reads conf.all.hop_limit only for devices without IPv6 state and
    // never copies it to a device (see routing::ipv6_hop_limit): in a lab it
    // would change nothing.
    if k == "net.ipv6.conf.all.hop_limit" {
        return Some(
            "Linux does not apply \"net.ipv6.conf.all.hop_limit\" to interfaces: each keeps the \
             value conf.default had when it was made; set \"net.ipv6.conf.default.hop_limit\" \
             (every interface of the node) or \"net.ipv6.conf.<interface>.hop_limit\""
                .to_string(),
        );
    }
    None
}

/// Parse `addr/len`. `family` restricts to 4 or 6 when the key says which.
fn cidr(s: &str, family: Option<u8>, at: &KeyPath, p: &mut Vec<Problem>) -> Option<IpNetwork> {
    if !s.contains('/') {
        let example = match s.parse::<IpAddr>() {
            Ok(IpAddr::V4(_)) => format!("\"{s}/24\""),
            Ok(IpAddr::V6(_)) => format!("\"{s}/64\""),
            Err(_) => format!("\"{s}/24\" or \"{s}/64\""),
        };
        p.push(Problem::new(
            at,
            format!("address \"{s}\" needs a prefix length, e.g. {example}"),
        ));
        return None;
    }
    let n: IpNetwork = match s.parse() {
        Ok(n) => n,
        Err(e) => {
            p.push(Problem::new(
                at,
                format!("\"{s}\" is not an address in CIDR notation: {e}"),
            ));
            return None;
        }
    };
    match (family, n) {
        (Some(4), IpNetwork::V6(_)) => {
            p.push(Problem::new(
                at,
                format!("\"{s}\" is an IPv6 address under ipv4; move it to ipv6"),
            ));
            None
        }
        (Some(6), IpNetwork::V4(_)) => {
            p.push(Problem::new(
                at,
                format!("\"{s}\" is an IPv4 address under ipv6; move it to ipv4"),
            ));
            None
        }
        _ => Some(n),
    }
}

fn endpoint(
    re: &RawEndpoint,
    nodes: &[Node],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Endpoint> {
    let Some((node, iface)) = re
        .port
        .split_once(':')
        .filter(|(n, i)| !n.is_empty() && !i.is_empty())
    else {
        p.push(Problem::new(
            at,
            format!(
                "endpoint \"{}\" must be written \"node:interface\", e.g. \"pc:eth0\"",
                re.port
            ),
        ));
        return None;
    };
    let Some(ni) = nodes.iter().position(|n| n.name == node) else {
        let known: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
        p.push(Problem::new(
            at,
            format!(
                "endpoint \"{}\" names node \"{node}\", which is not defined; defined nodes: {}",
                re.port,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
        return None;
    };
    let mut addresses = Vec::new();
    let table = !re.ipv4.is_empty() || !re.ipv6.is_empty();
    for (fam, key, list) in [(4u8, "ipv4", &re.ipv4), (6u8, "ipv6", &re.ipv6)] {
        for (i, s) in list.iter().enumerate() {
            let a_at = if list.len() == 1 {
                at.key(key)
            } else {
                at.key(key).index(i)
            };
            if let Some(a) = cidr(s, Some(fam), &a_at, p) {
                addresses.push(a);
            }
        }
    }
    let _ = table;
    Some(Endpoint {
        node: ni,
        iface: iface.to_string(),
        addresses,
        at: at.clone(),
    })
}

/// A link's `host`: the interface name and one way to attach to it.
fn host_port(h: &RawHostPort, at: &KeyPath, p: &mut Vec<Problem>) -> Option<HostPort> {
    if let Some(why) = super::interface_name_problem(&h.iface) {
        p.push(Problem::new(&at.key("iface"), why));
        return None;
    }
    let given: Vec<&str> = [
        h.mode.as_ref().map(|_| "mode"),
        h.vlan.map(|_| "vlan"),
        h.moved.map(|_| "move"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if given.len() > 1 {
        p.push(Problem::new(
            &at.key(given[1]),
            format!(
                "{} and {} cannot both be set: a host interface is taken one way (mode = \"macvlan\" or \"ipvlan\", vlan = ID, or move = true)",
                given[0], given[1]
            ),
        ));
        return None;
    }
    let attach = match (&h.mode, h.vlan, h.moved) {
        (Some(m), _, _) => match m.as_str() {
            "macvlan" => HostAttach::Macvlan,
            "ipvlan" => HostAttach::Ipvlan,
            other => {
                p.push(Problem::new(
                    &at.key("mode"),
                    format!("mode \"{other}\" is not one of \"macvlan\", \"ipvlan\" (for a VLAN write vlan = ID, to move the interface move = true)"),
                ));
                return None;
            }
        },
        (_, Some(id), _) => match u16::try_from(id) {
            Ok(id @ 1..=4094) => HostAttach::Vlan(id),
            _ => {
                p.push(Problem::new(
                    &at.key("vlan"),
                    format!("VLAN id {id} is outside 1-4094"),
                ));
                return None;
            }
        },
        (_, _, Some(true)) => HostAttach::Move,
        (_, _, Some(false)) | (None, None, None) => HostAttach::Macvlan,
    };
    Some(HostPort {
        iface: h.iface.clone(),
        attach,
        at: at.clone(),
    })
}

fn route(r: &RawRoute, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Route> {
    let via: Option<IpAddr> = match &r.via {
        None => None,
        Some(v) => match v.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                p.push(Problem::new(
                    &at.key("via"),
                    format!("gateway \"{v}\" is not an IPv4 or IPv6 address"),
                ));
                return None;
            }
        },
    };
    let to = if r.to == "default" {
        match via {
            Some(IpAddr::V4(_)) => IpNetwork::V4("0.0.0.0/0".parse().expect("literal")),
            Some(IpAddr::V6(_)) => IpNetwork::V6("::/0".parse().expect("literal")),
            None => {
                p.push(Problem::new(&at.key("to"), "\"default\" takes its family from via; without a gateway write \"0.0.0.0/0\" or \"::/0\""));
                return None;
            }
        }
    } else if r.to.contains('/') {
        match r.to.parse::<IpNetwork>() {
            Ok(n) => {
                if n.network() != n.ip() {
                    p.push(Problem::new(
                        &at.key("to"),
                        format!(
                            "route destination \"{}\" has host bits set; did you mean \"{}/{}\"?",
                            r.to,
                            n.network(),
                            n.prefix()
                        ),
                    ));
                    return None;
                }
                n
            }
            Err(e) => {
                p.push(Problem::new(
                    &at.key("to"),
                    format!("route destination \"{}\" is not a prefix: {e}", r.to),
                ));
                return None;
            }
        }
    } else {
        match r.to.parse::<IpAddr>() {
            Ok(a) => IpNetwork::from(a),
            Err(_) => {
                p.push(Problem::new(
                    &at.key("to"),
                    format!(
                        "route destination \"{}\" is not a prefix, an address or \"default\"",
                        r.to
                    ),
                ));
                return None;
            }
        }
    };
    if let Some(v) = via {
        if v.is_ipv4() != to.is_ipv4() {
            p.push(Problem::new(
                &at.key("via"),
                format!("gateway {v} and destination {to} are of different address families"),
            ));
            return None;
        }
    }
    if via.is_none() && r.dev.is_none() {
        p.push(Problem::new(
            at,
            "a route needs via (a gateway), dev (an interface), or both",
        ));
        return None;
    }
    let metric = match r.metric {
        None => None,
        Some(m) if (0..=u32::MAX as i64).contains(&m) => Some(m as u32),
        Some(m) => {
            p.push(Problem::new(
                &at.key("metric"),
                format!("metric {m} is out of range 0..=4294967295"),
            ));
            return None;
        }
    };
    Some(Route {
        to,
        via,
        dev: r.dev.clone(),
        metric,
        at: at.clone(),
    })
}

/// A router forwards in the kernel (`kernel`, the default) or through
/// tunbench's own process (`userspace`, the slow path); other kinds have no
/// datapath to choose. A router with a device profile defaults to the slow
/// path, where its model's ceilings are applied, and cannot take the kernel.
fn node_datapath(
    v: Option<&toml::Value>,
    kind: NodeKind,
    profiled: bool,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Datapath {
    let profiled = profiled && kind == NodeKind::Router;
    let default = if profiled {
        Datapath::Userspace
    } else {
        Datapath::Kernel
    };
    let Some(v) = v else {
        return default;
    };
    if kind != NodeKind::Router {
        p.push(Problem::new(
            at,
            format!(
                "datapath applies to routers only; this node is a {}",
                kind.as_str()
            ),
        ));
        return Datapath::Kernel;
    }
    match v.as_str() {
        Some(s) => {
            let d = super::tunnel::datapath(Some(s), default, at, p);
            if profiled && d == Datapath::Kernel {
                p.push(Problem::new(
                    at,
                    "a device profile's ceilings are applied by the userspace slow path, which datapath = \"kernel\" would bypass; remove datapath (a router with a profile forwards in userspace) or the profile",
                ));
            }
            d
        }
        None => {
            p.push(Problem::new(
                at,
                "datapath must be a string: \"kernel\" or \"userspace\"",
            ));
            default
        }
    }
}
