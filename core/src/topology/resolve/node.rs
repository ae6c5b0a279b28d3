//! One `[nodes.NAME]`: its kind and datapath, forwarding and sysctls through
//! the layers (built-in -> `[defaults]` -> `[kinds.K]` -> node), routes,
//! addresses and a switch's bridge.

use crate::topology::raw::{RawNode, RawRoute, RawSettings, SysctlValue};
use crate::topology::resolved::{Node, NodeKind, Route};
use crate::topology::tunnel::{self, Datapath};
use crate::topology::{KeyPath, Problem, valid_name};
use ipnetwork::IpNetwork;
use std::collections::BTreeMap;
use std::net::IpAddr;

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

/// Node `name` as far as the file says it alone (no interfaces, no profile
/// yet). None: its kind is unknown, so nothing else about it means anything.
pub(super) fn node(
    name: &str,
    rn: &RawNode,
    kinds: &BTreeMap<String, RawSettings>,
    defaults: &RawSettings,
    at: KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Node> {
    if !valid_name(name) {
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
        return None;
    };
    let datapath = node_datapath(
        rn.datapath.as_ref(),
        kind,
        rn.profile.is_some(),
        &at.key("datapath"),
        p,
    );
    let kind_layer = kinds.get(kind.as_str()).cloned().unwrap_or_default();
    let forwarding = rn
        .forwarding
        .or(kind_layer.forwarding)
        .or(defaults.forwarding)
        .unwrap_or(kind.forwards_by_default());
    if kind == NodeKind::External && !rn.sysctls.is_empty() {
        p.push(Problem::new(
            &at.key("sysctls"),
            format!(
                "node \"{name}\" is external: tunbench does not configure it; remove its sysctls"
            ),
        ));
    }
    let mut sysctls = sysctls(forwarding, rn, &kind_layer, defaults, &at, p);
    let routes = rn
        .routes
        .iter()
        .enumerate()
        .filter_map(|(i, r)| route(r, &at.key("routes").index(i), p))
        .collect();
    let addresses = rn
        .addresses
        .iter()
        .enumerate()
        .filter_map(|(i, a)| cidr(a, None, &at.key("addresses").index(i), p))
        .collect();
    let bridge = bridge(name, kind, rn, &at, p);
    // Nothing is written to a device tunbench does not build.
    if kind == NodeKind::External {
        sysctls.clear();
    }
    Some(Node {
        name: name.to_string(),
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
    })
}

/// The node's sysctls: the built-in ones and forwarding, then each layer of
/// the file over them.
fn sysctls(
    forwarding: bool,
    rn: &RawNode,
    kind_layer: &RawSettings,
    defaults: &RawSettings,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> BTreeMap<String, String> {
    let mut sysctls: BTreeMap<String, String> = BUILTIN_SYSCTLS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let fwd = if forwarding { "1" } else { "0" };
    sysctls.insert("net.ipv4.ip_forward".into(), fwd.into());
    sysctls.insert("net.ipv6.conf.all.forwarding".into(), fwd.into());
    sysctl_keys(&rn.sysctls, &at.key("sysctls"), p);
    for layer in [&defaults.sysctls, &kind_layer.sysctls, &rn.sysctls] {
        for (k, v) in layer {
            sysctls.insert(k.clone(), v.0.clone());
        }
    }
    sysctls
}

/// A switch's bridge device (named, or the default); no other kind has one.
fn bridge(
    name: &str,
    kind: NodeKind,
    rn: &RawNode,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<String> {
    if kind == NodeKind::Switch {
        return Some(
            rn.bridge
                .clone()
                .unwrap_or_else(|| DEFAULT_BRIDGE.to_string()),
        );
    }
    if rn.bridge.is_some() {
        p.push(Problem::new(
            &at.key("bridge"),
            format!("only a switch has a bridge; node \"{name}\" is a {kind}"),
        ));
    }
    None
}

pub(super) fn sysctl_keys(
    layer: &BTreeMap<String, SysctlValue>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) {
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
pub(super) fn cidr(
    s: &str,
    family: Option<u8>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<IpNetwork> {
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

/// One static route: its destination, gateway, device and metric.
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
    let to = route_destination(&r.to, via, &at.key("to"), p)?;
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

/// A route's `to`: "default" (of the gateway's family), a prefix, or an
/// address (a host route).
fn route_destination(
    to: &str,
    via: Option<IpAddr>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<IpNetwork> {
    if to == "default" {
        return match via {
            Some(IpAddr::V4(_)) => Some(IpNetwork::V4("0.0.0.0/0".parse().expect("literal"))),
            Some(IpAddr::V6(_)) => Some(IpNetwork::V6("::/0".parse().expect("literal"))),
            None => {
                p.push(Problem::new(at, "\"default\" takes its family from via; without a gateway write \"0.0.0.0/0\" or \"::/0\""));
                None
            }
        };
    }
    if to.contains('/') {
        return match to.parse::<IpNetwork>() {
            Ok(n) if n.network() != n.ip() => {
                p.push(Problem::new(
                    at,
                    format!(
                        "route destination \"{to}\" has host bits set; did you mean \"{}/{}\"?",
                        n.network(),
                        n.prefix()
                    ),
                ));
                None
            }
            Ok(n) => Some(n),
            Err(e) => {
                p.push(Problem::new(
                    at,
                    format!("route destination \"{to}\" is not a prefix: {e}"),
                ));
                None
            }
        };
    }
    match to.parse::<IpAddr>() {
        Ok(a) => Some(IpNetwork::from(a)),
        Err(_) => {
            p.push(Problem::new(
                at,
                format!("route destination \"{to}\" is not a prefix, an address or \"default\""),
            ));
            None
        }
    }
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
            let d = tunnel::datapath(Some(s), default, at, p);
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
