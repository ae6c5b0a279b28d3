//! A pure model of how the lab's kernels will route: connected subnets, static
//! routes, longest prefix match, forwarding on or off, L2 segments through switches.
//! `check` uses it to know which probes must succeed; `validate` uses it to find
//! configurations that can never work.
//!
//! The routes a node looks up are in `lookup`, the tunnels a packet may enter
//! in `tunnels`, and a packet's walk from node to node in `walk`.

mod hosts;
mod lookup;
mod tunnels;
mod walk;

#[cfg(test)]
mod tests;

use crate::topology::resolved::Topology;
use crate::topology::tunnel::dslite::B4;
use crate::topology::tunnel::overlay::Overlay;
use crate::topology::tunnel::{Tunnel, TunnelKind};
use ipnetwork::IpNetwork;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// Where a node sends a packet for some destination.
#[derive(Debug, Clone, PartialEq)]
pub struct NextHop {
    pub iface: String,
    /// None: the destination is on the link itself.
    pub gateway: Option<IpAddr>,
}

/// One node on the way a packet takes, and how it got there.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub node: usize,
    /// None at the source; otherwise the link or tunnel it arrived by.
    pub by: Option<Arrival>,
}

/// How a packet reached a node on its way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Over a link (through switches on the way, if any): it arrives on one of
    /// the node's interfaces.
    Link,
    /// Out of a tunnel entered at the hop before: the underlay carried it,
    /// encapsulated, from `outer_src` to `outer_dst` (endpoint addresses).
    Tunnel {
        /// The tunnel's index in the topology's tunnels.
        tunnel: usize,
        outer_src: IpAddr,
        outer_dst: IpAddr,
    },
}

/// The hop limit Linux puts on IPv6 packets a node sends out of `dev`: the
/// device's own `net.ipv6.conf.<dev>.hop_limit`. A device copies it from
/// `conf.default` when it is made (or moved into the namespace), and tunbench
/// writes a namespace's sysctls before it makes any device there, so a lab's
/// devices start with `conf.default`'s value; only `lo` is older. Linux reads
/// `conf.all.hop_limit` only for a device without IPv6 state (none in a lab)
/// and never copies it to existing devices.
pub fn ipv6_hop_limit(sysctls: &BTreeMap<String, String>, dev: &str) -> u32 {
    let value = |k: &str| sysctls.get(k).and_then(|v| v.parse().ok());
    value(&format!("net.ipv6.conf.{dev}.hop_limit"))
        .or_else(|| {
            if dev == "lo" {
                None
            } else {
                value("net.ipv6.conf.default.hop_limit")
            }
        })
        .unwrap_or(KERNEL_DEFAULT_TTL)
}

/// Linux's default IPv4 TTL and IPv6 hop limit.
const KERNEL_DEFAULT_TTL: u32 = 64;

pub struct Router<'t> {
    topo: &'t Topology,
    segments: Vec<Vec<(usize, String)>>,
    /// (node, device) -> its segment in `segments`.
    segment_of: HashMap<(usize, String), usize>,
    /// Every address of every node, with its device (`Topology::node_addresses`).
    addresses: Vec<Vec<(String, IpNetwork)>>,
    /// Connected prefixes of each node: (prefix, device). Addresses on lo are local only.
    connected: Vec<Vec<(IpNetwork, String)>>,
    /// The WireGuard tunnels each node is a peer of: (tunnel, its kind, peer index).
    wireguard: Vec<Vec<(&'t Tunnel, &'t Overlay, usize)>>,
    /// The softwires whose B4 each node is: (tunnel name, B4).
    softwires: Vec<Vec<(&'t str, &'t B4)>>,
}

impl<'t> Router<'t> {
    /// Everything a lookup needs is gathered here once, so that a probe costs
    /// the hops it crosses and not the size of the lab (check asks for n^2 probes).
    pub fn new(topo: &'t Topology) -> Self {
        let segments = topo.segments();
        let mut segment_of = HashMap::new();
        for (i, seg) in segments.iter().enumerate() {
            for k in seg {
                segment_of.insert(k.clone(), i);
            }
        }
        let n = topo.nodes.len();
        let addresses: Vec<_> = (0..n).map(|i| topo.node_addresses(i)).collect();
        let connected = addresses
            .iter()
            .map(|addrs| {
                addrs
                    .iter()
                    .filter(|(dev, _)| dev != "lo")
                    .filter_map(|(dev, a)| {
                        IpNetwork::new(a.network(), a.prefix())
                            .ok()
                            .map(|net| (net, dev.clone()))
                    })
                    .collect()
            })
            .collect();
        let mut wireguard = vec![Vec::new(); n];
        let mut softwires = vec![Vec::new(); n];
        for t in &topo.tunnels {
            if let Some(w) = t.overlay() {
                for (i, p) in w.peers.iter().enumerate() {
                    if let Some(v) = wireguard.get_mut(p.node) {
                        v.push((t, w, i));
                    }
                }
            }
            if let TunnelKind::Dslite(d) = &t.kind {
                for b in &d.b4s {
                    if let Some(v) = softwires.get_mut(b.node) {
                        v.push((t.name.as_str(), b));
                    }
                }
            }
        }
        Router {
            topo,
            segments,
            segment_of,
            addresses,
            connected,
            wireguard,
            softwires,
        }
    }
}
