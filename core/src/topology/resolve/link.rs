//! One `[[links]]` entry: its MTU (its own or inherited), impairments, name,
//! two `node:interface` ends with their addresses, and the host interface of
//! a link to an external node.

use super::node::cidr;
use crate::topology::raw::{RawEndpoint, RawHostPort, RawLink};
use crate::topology::resolved::{Endpoint, HostAttach, HostPort, Link, Node};
use crate::topology::{KeyPath, Problem, impair, interface_name_problem, valid_name};

/// Link `rl` between `nodes` (resolved up to their own keys). `default_mtu`
/// comes from `[defaults]` when `defaults_mtu_at` says where it does; `kernel`
/// settles the impairments' `shaper`. None: an end or the MTU is unusable.
pub(super) fn link(
    rl: &RawLink,
    nodes: &[Node],
    default_mtu: u32,
    defaults_mtu_at: Option<&KeyPath>,
    kernel: crate::topology::kernel::KernelFacts,
    at: KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Link> {
    let (mtu_v, mtu_at) = match (rl.mtu, defaults_mtu_at) {
        (None, Some(d)) => (Some(default_mtu), d.clone()),
        (None, None) => (Some(default_mtu), at.clone()),
        (Some(m), _) => (mtu(m, &at.key("mtu"), p), at.key("mtu")),
    };
    let impairments = match &rl.impairments {
        Some(v) => impair::resolve(v, &at.key("impairments"), kernel, p),
        None => Default::default(),
    };
    if let Some(name) = &rl.name {
        if !valid_name(name) {
            p.push(Problem::new(
                &at.key("name"),
                format!("link name \"{name}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit"),
            ));
        }
    }
    let a = endpoint(&rl.a, nodes, &at.key("a"), p);
    let b = endpoint(&rl.b, nodes, &at.key("b"), p);
    let host = rl
        .host
        .as_ref()
        .and_then(|h| host_port(h, &at.key("host"), p));
    Some(Link {
        name: rl.name.clone(),
        a: a?,
        b: b?,
        impairments,
        host,
        mtu: mtu_v?,
        mtu_at,
        description: rl.description.clone(),
        at,
    })
}

pub(super) fn mtu(v: i64, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u32> {
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

/// `port = "node:interface"` and the end's addresses.
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
    Some(Endpoint {
        node: ni,
        iface: iface.to_string(),
        addresses,
        at: at.clone(),
    })
}

/// A link's `host`: the interface name and one way to attach to it.
fn host_port(h: &RawHostPort, at: &KeyPath, p: &mut Vec<Problem>) -> Option<HostPort> {
    if let Some(why) = interface_name_problem(&h.iface) {
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
