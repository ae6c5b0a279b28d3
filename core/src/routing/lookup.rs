//! A node's route lookup as the kernel does it, the source address it picks,
//! and which neighbour on a segment answers for an address.

use super::tunnels::SOFTWIRE;
use super::{NextHop, Router};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

impl Router<'_> {
    /// The kernel's choice for `dst` on `node`: longest prefix, connected before
    /// static at equal length, then the lower metric.
    pub fn lookup(&self, node: usize, dst: IpAddr) -> Option<NextHop> {
        let mut best: Option<(u8, u32, NextHop)> = None;
        let mut offer = |len: u8, metric: u32, nh: NextHop| {
            let better = match &best {
                None => true,
                Some((bl, bm, _)) => len > *bl || (len == *bl && metric < *bm),
            };
            if better {
                best = Some((len, metric, nh));
            }
        };
        let connected = &self.connected[node];
        for (net, dev) in connected {
            if net.contains(dst) {
                offer(
                    net.prefix(),
                    0,
                    NextHop {
                        iface: dev.clone(),
                        gateway: None,
                    },
                );
            }
        }
        for r in &self.topo.nodes[node].routes {
            if !r.to.contains(dst) {
                continue;
            }
            let iface = match (&r.dev, r.via) {
                (Some(d), _) => Some(d.clone()),
                (None, Some(gw)) => connected
                    .iter()
                    .find(|(n, _)| n.contains(gw))
                    .map(|(_, d)| d.clone()),
                (None, None) => None,
            };
            if let Some(iface) = iface {
                offer(
                    r.to.prefix(),
                    r.metric.unwrap_or(1).max(1),
                    NextHop {
                        iface,
                        gateway: r.via,
                    },
                );
            }
        }
        for &(tunnel, w, i) in self.wireguard_peers(node) {
            for r in w.tun_routes(i) {
                if r.contains(dst) {
                    offer(
                        r.prefix(),
                        1,
                        NextHop {
                            iface: tunnel.tun_name(),
                            gateway: None,
                        },
                    );
                }
            }
        }
        for &(tunnel, b4) in self.softwires_from(node) {
            for r in &b4.routes {
                if matches!(dst, IpAddr::V4(v) if r.contains(v)) {
                    offer(
                        r.prefix(),
                        0,
                        NextHop {
                            iface: format!("{SOFTWIRE}{tunnel}"),
                            gateway: None,
                        },
                    );
                }
            }
        }
        best.map(|(_, _, nh)| nh)
    }

    /// The source address `node` uses toward `dst`: an address of the egress
    /// interface, else, into a tunnel, the node's inner address (charon's
    /// routes for IKEv2, whose inner addresses sit on `lo`, carry it as their
    /// `src`), else any address of the family on the node.
    pub fn source_for(&self, node: usize, dst: IpAddr) -> Option<IpAddr> {
        let nh = self.lookup(node, dst)?;
        let addrs = &self.addresses[node];
        let same = |a: &IpNetwork| a.is_ipv4() == dst.is_ipv4();
        let inner = || {
            self.wireguard_peers(node)
                .iter()
                .filter(|(t, _, _)| t.tun_name() == nh.iface)
                .find_map(|(_, w, i)| w.peers[*i].addresses.iter().find(|a| same(a)))
                .map(|a| a.ip())
        };
        addrs
            .iter()
            .find(|(d, a)| *d == nh.iface && same(a))
            .map(|(_, a)| a.ip())
            .or_else(inner)
            .or_else(|| addrs.iter().find(|(_, a)| same(a)).map(|(_, a)| a.ip()))
    }

    pub(super) fn owns(&self, node: usize, addr: IpAddr) -> bool {
        self.addresses[node].iter().any(|(_, a)| a.ip() == addr)
    }

    /// Which node on the segment of (node, iface) answers ARP/ND for `addr`.
    pub(super) fn neighbour(&self, node: usize, iface: &str, addr: IpAddr) -> Option<usize> {
        let seg = &self.segments[*self.segment_of.get(&(node, iface.to_string()))?];
        seg.iter()
            .map(|(n, _)| *n)
            .find(|&n| n != node && self.owns(n, addr))
    }
}
