//! Topology -> the list of kernel operations that builds it. Pure: the same
//! topology and lab name always give the same plan, printable as a dry run.

use crate::topology::hosts::HostPart;
use crate::topology::impair::{Shaping, shaping_lines};
use crate::topology::{Node, NodeKind, Topology};
use netns::{Op, Plan};

pub mod datapath;
pub mod dslite;
pub mod host;
pub mod link;
pub mod router;
pub mod wireguard;

/// How a lab's namespaces are named: `<lab>-<node>` unless a prefix is given.
#[derive(Debug, Clone)]
pub struct Naming {
    pub lab: String,
    pub prefix: String,
}

impl Naming {
    pub fn new(lab: &str, prefix: Option<&str>) -> Self {
        Naming {
            lab: lab.to_string(),
            prefix: prefix
                .map(String::from)
                .unwrap_or_else(|| format!("{lab}-")),
        }
    }
    pub fn namespace(&self, node: &str) -> String {
        format!("{}{node}", self.prefix)
    }
}

/// A sysctl names a device when it is `net.ipv{4,6}.{conf,neigh}.DEV.*` with DEV not
/// `all` or `default`; those can only be written once the device exists.
fn names_device(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    parts.len() >= 5
        && parts[0] == "net"
        && (parts[1] == "ipv4" || parts[1] == "ipv6")
        && (parts[2] == "conf" || parts[2] == "neigh")
        && parts[3] != "all"
        && parts[3] != "default"
}

/// The kernel operations that build `t` as the lab `naming` names, in the
/// order of their phases: the whole lab, on one machine.
pub fn plan(t: &Topology, naming: &Naming) -> Plan {
    plan_part(t, naming, None)
}

/// The kernel operations that build `part` of `t` (one host's nodes, the links
/// within it, and its VXLAN end of each link to another host), or the whole
/// lab when `part` is None.
pub fn plan_part(t: &Topology, naming: &Naming, part: Option<&HostPart>) -> Plan {
    let ns = |n: usize| naming.namespace(&t.nodes[n].name);
    let mut ops = namespaces(t, naming);
    ops.extend(bridges(t, &ns));
    ops.extend(links(t, naming, &ns, part));
    ops.extend(device_sysctls(t, &ns));
    ops.extend(link_ups(t, &ns, part));
    ops.extend(switch_ports(t, &ns));
    ops.extend(addresses_and_routes(t, &ns));
    for tun in &t.tunnels {
        ops.extend(dslite::ops(t, tun, &ns));
        ops.extend(wireguard::ops(t, tun, &ns));
    }
    for (i, _) in built(t) {
        ops.extend(router::ops(t, i, &ns(i)));
    }
    for (i, l) in link::relayed(t) {
        ops.extend(link::ops(l, &naming.namespace(&link::relay_node(i))));
    }
    ops.extend(shaping(t, naming, &ns));
    // Tunnel ops join the phases of the rest (a stable sort keeps their order).
    ops.sort_by_key(|o| o.phase());
    let mut nodes: Vec<(String, String, String)> = built(t)
        .map(|(i, n)| (n.name.clone(), ns(i), n.kind.to_string()))
        .collect();
    if let Some(part) = part {
        // Every op names the namespace it acts in: a host keeps its own.
        let mine = host::namespaces(t, naming, part);
        ops.retain(|o| mine.contains(o.ns()));
        nodes.retain(|(_, n, _)| mine.contains(n));
    }
    Plan {
        lab: naming.lab.clone(),
        host: part.map(|p| p.host.clone()),
        nodes,
        ops,
    }
}

/// The nodes tunbench builds, with their indices. External nodes are real
/// devices: nothing is built or written for them.
fn built(t: &Topology) -> impl Iterator<Item = (usize, &Node)> {
    t.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind.is_built())
}

/// A namespace per built node (with the sysctls that name no device) and per
/// link relay.
fn namespaces(t: &Topology, naming: &Naming) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, n) in built(t) {
        let mut early: Vec<(String, String)> = n
            .sysctls
            .iter()
            .filter(|(k, _)| !names_device(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        early.extend(dslite::sysctls(t, i));
        ops.push(Op::Namespace {
            ns: naming.namespace(&n.name),
            marker: netns::apply::marker(&naming.lab),
            sysctls: early,
        });
    }
    for (i, _) in link::relayed(t) {
        ops.push(link::namespace_op(
            &naming.namespace(&link::relay_node(i)),
            &netns::apply::marker(&naming.lab),
        ));
    }
    ops
}

/// The bridge of each node that has one.
fn bridges(t: &Topology, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if let Some(br) = &n.bridge {
            // A bridge takes the smallest MTU of its ports anyway; say so up front.
            let mtu = n.interfaces.iter().map(|x| x.mtu).min().unwrap_or(1500);
            ops.push(Op::Bridge {
                ns: ns(i),
                name: br.clone(),
                mtu,
            });
        }
    }
    ops
}

/// Each link inside the lab: a host interface taken, a veth pair through a
/// relay, or a plain veth pair; building one host's `part`, a link to another
/// host is this host's VXLAN end of it.
fn links(
    t: &Topology,
    naming: &Naming,
    ns: &dyn Fn(usize) -> String,
    part: Option<&HostPart>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, l) in t.links.iter().enumerate() {
        if l.is_external(t) {
            continue;
        }
        if let Some(part) = part.filter(|_| host::crosses(t, i)) {
            ops.extend(host::vxlan_ends(t, part, i, ns));
            continue;
        }
        if let (Some(h), Some((lab, _))) = (&l.host, l.host_ends(t)) {
            ops.push(Op::HostLink {
                ns: ns(lab.node),
                name: lab.iface.clone(),
                host: h.iface.clone(),
                attach: h.attach,
                mtu: l.mtu,
            });
            continue;
        }
        if l.impairments.needs_relay() {
            let relay = naming.namespace(&link::relay_node(i));
            ops.extend(link::veth_ops(l, &ns(l.a.node), &ns(l.b.node), &relay));
            continue;
        }
        ops.push(Op::Veth {
            ns: ns(l.a.node),
            name: l.a.iface.clone(),
            peer_ns: ns(l.b.node),
            peer_name: l.b.iface.clone(),
            mtu: l.mtu,
        });
    }
    ops
}

/// The sysctls that name a device, once the devices exist.
fn device_sysctls(t: &Topology, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, n) in built(t) {
        for (k, v) in n.sysctls.iter().filter(|(k, _)| names_device(k)) {
            ops.push(Op::Sysctl {
                ns: ns(i),
                key: k.clone(),
                value: v.clone(),
            });
        }
    }
    ops
}

/// A veth's second end set up (its first end is made up; a host link's
/// device too, and a VXLAN end).
fn link_ups(t: &Topology, ns: &dyn Fn(usize) -> String, part: Option<&HostPart>) -> Vec<Op> {
    t.links
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            l.host.is_none() && !l.is_external(t) && !(part.is_some() && host::crosses(t, *i))
        })
        .map(|(_, l)| Op::Up {
            ns: ns(l.b.node),
            iface: l.b.iface.clone(),
        })
        .collect()
}

/// A switch's interfaces, ports of its bridge.
fn switch_ports(t: &Topology, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, n) in t.nodes.iter().enumerate() {
        if n.kind == NodeKind::Switch {
            let br = n.bridge.clone().unwrap_or_default();
            for x in &n.interfaces {
                ops.push(Op::Port {
                    ns: ns(i),
                    iface: x.name.clone(),
                    bridge: br.clone(),
                });
            }
        }
    }
    ops
}

/// Every built node's addresses, then its static routes.
fn addresses_and_routes(t: &Topology, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, _) in built(t) {
        for (dev, addr) in t.node_addresses(i) {
            ops.push(Op::Address {
                ns: ns(i),
                iface: dev,
                addr,
            });
        }
    }
    for (i, n) in built(t) {
        for r in &n.routes {
            ops.push(Op::Route {
                ns: ns(i),
                to: r.to,
                via: r.via,
                dev: r.dev.clone(),
                metric: r.metric,
            });
        }
    }
    ops
}

/// Each link direction's rate, shaped at the sending end of the veth, and
/// the device that receives from it steering by flow (netns::steer): behind a
/// TBF one flow would otherwise reach two CPUs' backlogs and arrive out of
/// order.
fn shaping(t: &Topology, naming: &Naming, ns: &dyn Fn(usize) -> String) -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, l) in t.links.iter().enumerate() {
        let relay = l
            .impairments
            .needs_relay()
            .then(|| naming.namespace(&link::relay_node(i)));
        for (end, other, imp, relay_side) in [
            (&l.a, &l.b, l.impairments.a_to_b, link::RELAY_A),
            (&l.b, &l.a, l.impairments.b_to_a, link::RELAY_B),
        ] {
            if let Some(shaping) = Shaping::of(&end.iface, &imp, l.mtu) {
                ops.push(Op::Tc {
                    ns: ns(end.node),
                    batch: shaping_lines(&shaping, "add"),
                });
                let (rx_ns, rx_iface) = match &relay {
                    Some(r) => (r.clone(), relay_side.to_string()),
                    None => (ns(other.node), other.iface.clone()),
                };
                ops.push(Op::SteerByFlow {
                    ns: rx_ns,
                    iface: rx_iface,
                });
            }
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::kernel::KernelFacts;
    use crate::topology::load;
    use std::path::Path;

    #[test]
    fn device_sysctls_wait_for_their_device() {
        assert!(names_device("net.ipv6.conf.eth0.accept_ra"));
        assert!(names_device("net.ipv4.neigh.lan1.gc_stale_time"));
        assert!(!names_device("net.ipv6.conf.all.forwarding"));
        assert!(!names_device("net.ipv4.ip_forward"));
        assert!(!names_device("net.core.rmem_max"));
    }

    #[test]
    fn router_plan_reads_like_ip_commands() {
        let t = load(
            Path::new(repo_file!("topologies/router.toml")),
            KernelFacts::FULL,
        )
        .unwrap();
        let p = plan(&t, &Naming::new("x", None));
        let text: Vec<String> = p.ops.iter().map(|o| o.to_string()).collect();
        assert!(
            text[0].starts_with("ip netns add x-left; ip -n x-left link set lo up; ip -n x-left link property add dev lo altname tunbench.x;"),
            "{}",
            text[0]
        );
        assert!(text.contains(&"ip -n x-left link add eth0 mtu 1500 up type veth peer name eth0 netns x-r1 mtu 1500".to_string()));
        assert!(text.contains(&"ip -n x-r1 addr add 2001:2:0:2::1/64 dev eth1 nodad".to_string()));
        assert!(
            !text.contains(
                &"ip -n x-left route add 0.0.0.0/0 via 198.18.1.2 proto static".to_string()
            )
        );
        assert!(
            text.contains(
                &"ip -n x-left route add 0.0.0.0/0 via 198.18.1.1 proto static".to_string()
            )
        );
        // Routers forward, hosts do not.
        assert!(
            text.iter()
                .any(|s| s.contains("x-r1 sysctl -qw net.ipv4.ip_forward=1"))
        );
        assert!(
            text.iter()
                .any(|s| s.contains("x-left sysctl -qw net.ipv4.ip_forward=0"))
        );
        // Ops come phase by phase.
        let phases: Vec<_> = p.ops.iter().map(|o| o.phase()).collect();
        assert!(phases.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn external_nodes_get_nothing_and_host_links_take_the_host_interface() {
        let t = load(
            Path::new(repo_file!("topologies/nvr500-real.toml")),
            KernelFacts::FULL,
        )
        .unwrap();
        let p = plan(&t, &Naming::new("x", None));
        let text: Vec<String> = p.ops.iter().map(|o| o.to_string()).collect();
        assert_eq!(
            p.nodes.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
            ["pc", "server"],
            "no namespace for the external router"
        );
        assert!(text.iter().all(|o| !o.contains("x-nvr500")), "{text:#?}");
        assert!(
            text.contains(
                &"ip link set enp1s0 netns x-pc; ip -n x-pc link set enp1s0 name eth0 mtu 1500 up"
                    .to_string()
            ),
            "{text:#?}"
        );
        assert!(!text.iter().any(|o| o.contains("type veth")), "{text:#?}");
        assert!(
            !text
                .iter()
                .any(|o| o.starts_with("ip -n x-pc link set eth0 up"))
        );
        // The routing model sees the path through the device it does not build.
        let r = crate::routing::Router::new(&t);
        let pc = t.node_index("pc").unwrap();
        let server = t.node_index("server").unwrap();
        assert_eq!(r.echo_works(pc, "2001:2:0:1::10".parse().unwrap()), Ok(()));
        assert_eq!(r.echo_works(server, "198.18.11.2".parse().unwrap()), Ok(()));
        assert_eq!(r.echo_works(pc, "198.18.1.2".parse().unwrap()), Ok(()));
    }

    #[test]
    fn each_form_of_host_prints_its_ip_command() {
        let t = crate::topology::parse_str(
            r#"
name = "f"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[nodes.c]
kind = "host"
[nodes.ext]
kind = "external"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.1.2/24" }
b = { port = "ext:p", ipv4 = "198.18.1.1/24" }
host = "enp1s0"
[[links]]
a = { port = "ext:p" }
b = { port = "b:eth0", ipv4 = "198.18.1.3/24" }
host = { iface = "enp2s0", mode = "ipvlan" }
[[links]]
a = { port = "c:eth0", ipv4 = "198.18.2.2/24" }
b = { port = "ext:q", ipv4 = "198.18.2.1/24" }
host = { iface = "enp1s0", vlan = 12 }
mtu = 1400
"#,
            Path::new("f.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let text: Vec<String> = plan(&t, &Naming::new("f", None))
            .ops
            .iter()
            .map(|o| o.to_string())
            .collect();
        for want in [
            "ip link add link enp1s0 name eth0 netns f-a mtu 1500 type macvlan mode bridge; ip -n f-a link set eth0 up",
            "ip link add link enp2s0 name eth0 netns f-b mtu 1500 type ipvlan mode l2; ip -n f-b link set eth0 up",
            "ip link add link enp1s0 name eth0 netns f-c mtu 1400 type vlan id 12; ip -n f-c link set eth0 up",
        ] {
            assert!(text.contains(&want.to_string()), "{want}\n{text:#?}");
        }
    }

    #[test]
    fn prefix_replaces_lab_name_in_namespaces() {
        let t = load(
            Path::new(repo_file!("topologies/two-hosts.toml")),
            KernelFacts::FULL,
        )
        .unwrap();
        let p = plan(&t, &Naming::new("lab", Some("ci7-")));
        assert_eq!(
            p.nodes.iter().map(|n| n.1.as_str()).collect::<Vec<_>>(),
            ["ci7-h1", "ci7-h2"]
        );
    }

    /// A kernel WireGuard peer gets the kernel's device where tunbench's own
    /// gets its TUN, with the same name, MTU, addresses and routes.
    #[test]
    fn a_kernel_wireguard_peer_gets_a_wireguard_device_in_the_tun_place() {
        let text = std::fs::read_to_string(repo_file!("topologies/wireguard.toml")).unwrap();
        let both = |imp: &str| {
            let t = crate::topology::parse_str_for(
                &text.replace(
                    "[tunnels.wg]",
                    &format!("[tunnels.wg]\nimplementation = \"{imp}\""),
                ),
                Path::new("wg.toml"),
                KernelFacts::FULL,
            )
            .unwrap();
            plan(&t, &Naming::new("x", None))
                .ops
                .iter()
                .map(|o| o.to_string())
                .collect::<Vec<String>>()
        };
        let (own, kernel) = (both("tunbench"), both("kernel"));
        let tun = |ops: &[String]| ops.iter().filter(|o| o.contains("tuntap add")).count();
        let wg = |ops: &[String]| ops.iter().filter(|o| o.ends_with("type wireguard")).count();
        assert_eq!((tun(&own), wg(&own)), (2, 0), "{own:#?}");
        assert_eq!((tun(&kernel), wg(&kernel)), (0, 2), "{kernel:#?}");
        // Everything else is the same, in the same order.
        let rest = |ops: &[String]| -> Vec<String> {
            ops.iter()
                .filter(|o| !o.contains("tuntap add") && !o.ends_with("type wireguard"))
                .cloned()
                .collect()
        };
        assert_eq!(rest(&own), rest(&kernel));
        assert!(
            kernel
                .iter()
                .any(|o| o.contains("link set wg-wg mtu 1420 up")),
            "{kernel:#?}"
        );
    }
}
