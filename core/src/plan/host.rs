//! One host's part of a lab placed on several hosts (`[hosts]` in the
//! topology): the namespaces it builds, and its end of each link to another
//! host, a point-to-point VXLAN device in the local node's namespace under
//! the port's name, with the link's MTU. The end's addresses and routes are
//! the ones a veth end would get, so the rest of the plan is unchanged.

use super::Naming;
use crate::topology::Topology;
use crate::topology::hosts::HostPart;
use netns::Op;
use std::collections::BTreeSet;

/// Whether link `link` joins nodes on two hosts.
pub fn crosses(t: &Topology, link: usize) -> bool {
    t.placement
        .as_ref()
        .is_some_and(|pl| pl.crossing(link).is_some())
}

/// The VXLAN device of each of `part`'s ends of link `link` (none when
/// neither end is on `part`'s host).
pub fn vxlan_ends(
    t: &Topology,
    part: &HostPart,
    link: usize,
    ns: &dyn Fn(usize) -> String,
) -> Vec<Op> {
    part.ends
        .iter()
        .filter(|e| e.link == link)
        .map(|e| Op::Vxlan {
            ns: ns(e.node),
            name: e.iface.clone(),
            vni: e.vni,
            local: e.local,
            remote: e.remote,
            port: e.port,
            underlay: e.underlay_interface.clone(),
            mtu: t.links[link].mtu,
        })
        .collect()
}

/// The namespaces `part`'s host builds: its built nodes', and the relay of
/// each of its links with userspace impairments.
pub fn namespaces(t: &Topology, naming: &Naming, part: &HostPart) -> BTreeSet<String> {
    let nodes = part
        .nodes
        .iter()
        .filter(|&&n| t.nodes[n].kind.is_built())
        .map(|&n| naming.namespace(&t.nodes[n].name));
    let relays = part
        .local_links
        .iter()
        .filter(|&&l| t.links[l].impairments.needs_relay())
        .map(|&l| naming.namespace(&super::link::relay_node(l)));
    nodes.chain(relays).collect()
}

/// Whether the datapath process of `node` (a node's name, or a link relay's
/// `link.N`) runs on `part`'s host; on one machine (`part` None) every one does.
pub fn runs_here(t: &Topology, part: Option<&HostPart>, node: &str) -> bool {
    let Some(part) = part else { return true };
    if let Some(i) = t.node_index(node) {
        return part.nodes.contains(&i);
    }
    part.local_links
        .iter()
        .any(|&l| super::link::relay_node(l) == node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{plan, plan_part};
    use crate::topology::kernel::KernelFacts;
    use std::path::Path;

    fn home_split() -> Topology {
        crate::topology::load(
            Path::new(repo_file!("topologies/home-split.toml")),
            KernelFacts::FULL,
        )
        .unwrap()
    }

    fn part_text(t: &Topology, host: &str) -> (Vec<String>, Vec<String>) {
        let part = t.host_part(host).unwrap();
        let p = plan_part(t, &Naming::new("x", None), Some(&part));
        assert_eq!(p.host.as_deref(), Some(host));
        let nodes = p.nodes.iter().map(|n| n.0.clone()).collect();
        (nodes, p.ops.iter().map(|o| o.to_string()).collect())
    }

    /// Each host gets its node, a VXLAN end per link to another host under
    /// the port's name, and the same addresses, routes and tunnel devices a
    /// veth end gets in the whole lab's plan; together, the whole plan's ops
    /// but the veths.
    #[test]
    fn each_host_of_home_split_builds_its_node_and_vxlan_ends() {
        let t = home_split();
        let whole: Vec<String> = plan(&t, &Naming::new("x", None))
            .ops
            .iter()
            .map(|o| o.to_string())
            .collect();
        let (pc_nodes, pc) = part_text(&t, "pc");
        let (r_nodes, r) = part_text(&t, "router");
        let (s_nodes, s) = part_text(&t, "server");
        assert_eq!(
            (pc_nodes, r_nodes, s_nodes),
            (
                vec!["pc".to_string()],
                vec!["nvr".to_string()],
                vec!["server".to_string()]
            )
        );
        for (ops, ns) in [(&pc, "x-pc"), (&r, "x-nvr"), (&s, "x-server")] {
            assert!(ops.iter().all(|o| o.contains(ns)), "{ns}: {ops:#?}");
            assert!(!ops.iter().any(|o| o.contains("type veth")), "{ops:#?}");
        }
        let vxlans = |ops: &[String]| -> Vec<String> {
            ops.iter()
                .filter(|o| o.contains("type vxlan"))
                .cloned()
                .collect()
        };
        assert_eq!(vxlans(&pc).len(), 1, "{pc:#?}");
        assert_eq!(vxlans(&r).len(), 2, "{r:#?}");
        assert_eq!(vxlans(&s).len(), 1, "{s:#?}");
        let lan1 = t.placement.as_ref().unwrap().crossings[0].vni;
        assert!(
            vxlans(&pc)[0].contains(&format!("eth0 netns x-pc mtu 1500 type vxlan id {lan1} local 198.18.230.1 remote 198.18.230.2 dstport 4789")),
            "{pc:#?}"
        );
        assert!(
            vxlans(&r).iter().any(|o| o.contains(&format!("lan1 netns x-nvr mtu 1500 type vxlan id {lan1} local 198.18.230.2 remote 198.18.230.1"))),
            "{r:#?}"
        );
        // Apart from the links, the parts add up to the whole lab.
        let mut parts: Vec<String> = [pc, r, s]
            .concat()
            .into_iter()
            .filter(|o| !o.contains("type vxlan"))
            .collect();
        let mut rest: Vec<String> = whole
            .into_iter()
            .filter(|o| {
                !o.contains("type veth")
                    && !o.starts_with("ip -n x-nvr link set lan1 up")
                    && !o.starts_with("ip -n x-server link set eth0 up")
            })
            .collect();
        parts.sort();
        rest.sort();
        assert_eq!(parts, rest);
    }

    #[test]
    fn datapaths_run_on_the_host_of_their_node() {
        let t = home_split();
        let on = |h: &str| -> Vec<String> {
            crate::plan::datapath::jobs_on(&t, t.host_part(h).as_ref())
                .into_iter()
                .map(|(_, n)| n)
                .collect()
        };
        assert_eq!(on("pc"), ["pc"]);
        assert!(on("router").is_empty());
        assert_eq!(on("server"), ["server"]);
        assert_eq!(crate::plan::datapath::jobs_on(&t, None).len(), 2);
    }
}
