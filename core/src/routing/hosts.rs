//! The hosts a packet crosses in a lab placed on several machines: its walk
//! mapped to each node's host, a tunnel's stretch replaced by the way its
//! outer packets take (they are what the underlay between hosts carries).

use super::{Arrival, Router};
use std::net::IpAddr;

/// How deep tunnels may nest before the walk stops expanding them.
const NESTING: u32 = 4;

impl Router<'_> {
    /// The hosts a packet from `from` to `dst` crosses, in order, each once
    /// per stay (`["pc", "router", "server"]`); empty for a lab on one
    /// machine or a packet routing drops. External nodes, which no host
    /// builds, are left out.
    pub fn hosts_on_the_way(&self, from: usize, dst: IpAddr) -> Vec<String> {
        let Some(pl) = &self.topo.placement else {
            return Vec::new();
        };
        let mut nodes = Vec::new();
        self.walk_nodes(from, dst, NESTING, &mut nodes);
        let mut hosts: Vec<String> = Vec::new();
        for n in nodes {
            if let Some(h) = pl.node_host.get(n).copied().flatten() {
                let name = &pl.hosts[h].name;
                if hosts.last() != Some(name) {
                    hosts.push(name.clone());
                }
            }
        }
        hosts
    }

    /// The nodes a packet visits, a tunnel's stretch replaced by its outer
    /// packets' walk (from the node that entered it to its far endpoint).
    fn walk_nodes(&self, from: usize, dst: IpAddr, depth: u32, out: &mut Vec<usize>) {
        let Ok(hops) = self.trace(from, dst) else {
            return;
        };
        let mut prev = from;
        for hop in hops {
            if let (Some(Arrival::Tunnel { outer_dst, .. }), true) = (hop.by, depth > 0) {
                let mut outer = Vec::new();
                self.walk_nodes(prev, outer_dst, depth - 1, &mut outer);
                out.extend(outer.into_iter().skip(1));
            }
            if out.last() != Some(&hop.node) {
                out.push(hop.node);
            }
            prev = hop.node;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::routing::Router;
    use crate::topology::kernel::KernelFacts;
    use std::path::Path;

    fn load(file: &str) -> crate::topology::Topology {
        let path = format!("{}{file}", repo_file!("topologies/"));
        crate::topology::load(Path::new(&path), KernelFacts::FULL).unwrap()
    }

    /// The raw path and the WireGuard tunnel inside it both cross the
    /// router's host; an unplaced lab crosses none.
    #[test]
    fn a_path_and_a_tunnel_over_it_cross_the_same_hosts() {
        let t = load("home-split.toml");
        let r = Router::new(&t);
        let pc = t.node_index("pc").unwrap();
        let server = t.node_index("server").unwrap();
        let hosts = |dst: &str| r.hosts_on_the_way(pc, dst.parse().unwrap());
        assert_eq!(hosts("198.18.1.10"), ["pc", "router", "server"]);
        assert_eq!(hosts("2001:2:0:1::10"), ["pc", "router", "server"]);
        assert_eq!(hosts("198.18.96.2"), ["pc", "router", "server"]);
        assert_eq!(
            r.hosts_on_the_way(server, "198.18.11.250".parse().unwrap()),
            ["server", "router"]
        );
        assert!(hosts("198.18.200.1").is_empty(), "no route: no hosts");
        let one = load("two-hosts.toml");
        let r = Router::new(&one);
        let a = 0;
        let dst = one.node_addresses(1)[0].1.ip();
        assert!(r.hosts_on_the_way(a, dst).is_empty());
    }
}
