//! The resolved topology: defaults applied, names computed, addresses parsed.
//! Everything after `resolve` (validation, planning, routing simulation, graphs)
//! reads only these types.

use ipnetwork::IpNetwork;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use super::KeyPath;

/// The node kinds the topology file knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// An end host: does not forward.
    Host,
    /// A router: forwards IPv4 and IPv6 by default.
    Router,
    /// A Linux bridge in its own namespace (the NVR500 study's gigabit switch).
    Switch,
    /// A device tunbench does not build: a real router, an ISP's AFTR, a remote
    /// server. No namespace; its addresses and routes describe it to validation,
    /// the routing model, `check` and `graph`.
    External,
}

impl NodeKind {
    pub const ALL: [NodeKind; 4] = [
        NodeKind::Host,
        NodeKind::Router,
        NodeKind::Switch,
        NodeKind::External,
    ];

    pub fn parse(s: &str) -> Option<NodeKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Host => "host",
            NodeKind::Router => "router",
            NodeKind::Switch => "switch",
            NodeKind::External => "external",
        }
    }

    /// An external device is assumed to route what its `routes` say; a server
    /// that does not simply has none.
    pub fn forwards_by_default(self) -> bool {
        matches!(self, NodeKind::Router | NodeKind::External)
    }

    /// Whether the lab builds a namespace for it.
    pub fn is_built(self) -> bool {
        self != NodeKind::External
    }

    pub fn known_list() -> String {
        Self::ALL
            .iter()
            .map(|k| format!("\"{}\"", k.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Topology {
    pub name: String,
    pub description: Option<String>,
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    pub measurements: Vec<Measurement>,
    pub tunnels: Vec<super::tunnel::Tunnel>,
    /// `[reference]`: published figures for the paths measured.
    pub reference: Option<crate::topology::reference::Reference>,
    /// `[[assert]]`: what `tunbench test` checks in the running lab.
    pub assertions: Vec<super::assertion::Assertion>,
    /// `[hosts]`: which host builds each node, and the links between hosts;
    /// None for a lab on one machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<super::hosts::Placement>,
}

/// A `[[measure]]` entry, defaults applied (the NVR500 study's method).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measurement {
    pub name: String,
    pub from: String,
    /// A node of the lab, or an iperf3 server outside it.
    pub to: crate::vocab::target::MeasureTarget,
    pub ipv4: Option<IpAddr>,
    pub ipv6: Option<IpAddr>,
    pub families: Vec<crate::vocab::Family>,
    pub protocols: Vec<crate::vocab::Proto>,
    pub directions: Vec<crate::vocab::Direction>,
    pub streams: Vec<u32>,
    pub runs: u32,
    pub duration: f64,
    pub trial_duration: f64,
    pub udp_loss: f64,
    pub udp_len: u32,
    /// Latency probes: `Some(true)` or `Some(false)` as written; `None` is the
    /// default, on toward a node and off toward a server outside the lab.
    pub latency: Option<bool>,
    /// Probes per second.
    pub latency_rate: f64,
    /// Seconds of probes alone per family before the cells.
    pub latency_idle: f64,
    /// Only in these scenarios; None: in every one.
    pub scenarios: Option<Vec<String>>,
    #[serde(skip)]
    pub at: KeyPath,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub description: Option<String>,
    pub forwarding: bool,
    /// Merged sysctls, lowest layer first overridden by higher ones, sorted by key.
    pub sysctls: BTreeMap<String, String>,
    pub routes: Vec<Route>,
    /// Addresses on `lo` (hosts, routers) or on the bridge (switches).
    pub addresses: Vec<IpNetwork>,
    /// The bridge device of a switch.
    pub bridge: Option<String>,
    /// How a router forwards: the kernel, or tunbench's slow-path process.
    pub datapath: super::tunnel::Datapath,
    /// A router's device model, from its profile (applied by the slow path).
    pub model: Option<crate::codec::profile::DeviceModel>,
    /// A host's limits, from its profile (applied in its namespace's kernel).
    pub host_model: Option<crate::codec::profile::HostModel>,
    /// A router's termination ceilings per tunnel kind, from its profile
    /// (applied by its own ends' userspace datapaths).
    pub terminations: BTreeMap<String, crate::codec::profile::TerminationModel>,
    pub interfaces: Vec<Interface>,
    #[serde(skip)]
    pub at: KeyPath,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Interface {
    pub name: String,
    pub link: usize,
    pub mtu: u32,
    pub addresses: Vec<IpNetwork>,
    pub peer_node: usize,
    pub peer_iface: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Endpoint {
    pub node: usize,
    pub iface: String,
    pub addresses: Vec<IpNetwork>,
    #[serde(skip)]
    pub at: KeyPath,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Link {
    /// The link's name, if the file gives one (unique in the topology).
    pub name: Option<String>,
    pub a: Endpoint,
    pub b: Endpoint,
    pub mtu: u32,
    /// Where the mtu was set: the link's own `mtu`, `defaults.mtu`, or the link
    /// itself for the built-in default.
    #[serde(skip)]
    pub mtu_at: KeyPath,
    pub description: Option<String>,
    /// What the link does to traffic, per direction (rate only, for now).
    pub impairments: super::impair::LinkImpairments,
    /// For a link to an external node: the interface of this machine that
    /// reaches it, and how the lab node's end is made from it.
    pub host: Option<HostPort>,
    #[serde(skip)]
    pub at: KeyPath,
}

/// `host = { iface = "enp3s0", ... }` on a link: the lab node's end of the link
/// is made from an interface of the machine tunbench runs on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HostPort {
    pub iface: String,
    pub attach: HostAttach,
    #[serde(skip)]
    pub at: KeyPath,
}

/// How a lab node's device is made from a host interface: the kernel layer's
/// own vocabulary (macvlan, ipvlan, VLAN, moved), which the plan hands on as is.
pub use netns::HostAttach;

impl Link {
    /// The end the lab builds on a host interface, and the external end, for a
    /// link to an external node.
    pub fn host_ends(&self, t: &Topology) -> Option<(&Endpoint, &Endpoint)> {
        self.host.as_ref()?;
        if t.nodes[self.a.node].kind == NodeKind::External {
            Some((&self.b, &self.a))
        } else {
            Some((&self.a, &self.b))
        }
    }

    /// Whether the lab builds nothing for this link (both ends outside it).
    pub fn is_external(&self, t: &Topology) -> bool {
        !t.nodes[self.a.node].kind.is_built() && !t.nodes[self.b.node].kind.is_built()
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Route {
    pub to: IpNetwork,
    pub via: Option<IpAddr>,
    pub dev: Option<String>,
    pub metric: Option<u32>,
    #[serde(skip)]
    pub at: KeyPath,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.to.prefix() == 0 {
            write!(f, "default")?;
        } else {
            write!(f, "{}", self.to)?;
        }
        if let Some(v) = self.via {
            write!(f, " via {v}")?;
        }
        if let Some(d) = &self.dev {
            write!(f, " dev {d}")?;
        }
        if let Some(m) = self.metric {
            write!(f, " metric {m}")?;
        }
        Ok(())
    }
}

impl Topology {
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Every address a node holds, with the interface it is on (`lo` or the bridge
    /// for node-level addresses).
    pub fn node_addresses(&self, node: usize) -> Vec<(String, IpNetwork)> {
        let n = &self.nodes[node];
        let mut out = Vec::new();
        let own = n.bridge.clone().unwrap_or_else(|| "lo".to_string());
        for a in &n.addresses {
            out.push((own.clone(), *a));
        }
        for i in &n.interfaces {
            for a in &i.addresses {
                out.push((i.name.clone(), *a));
            }
        }
        // Inner addresses of overlay peers, on the tunnel's TUN or lo (last, so
        // defaults that take a node's first address take a link's).
        for tun in &self.tunnels {
            if let Some(w) = tun.overlay() {
                for p in w.peers.iter().filter(|p| p.node == node) {
                    out.extend(p.addresses.iter().map(|a| (tun.inner_device(), *a)));
                }
            }
        }
        out
    }

    /// Which node holds this address, if any.
    pub fn owner_of(&self, addr: IpAddr) -> Option<usize> {
        (0..self.nodes.len()).find(|&n| self.node_addresses(n).iter().any(|(_, a)| a.ip() == addr))
    }

    /// L2 segments: sets of (node, device) that share a broadcast domain. A link joins
    /// its two ends; a switch joins all its ports and its bridge into one segment.
    pub fn segments(&self) -> Vec<Vec<(usize, String)>> {
        // Union-find over (node, iface) keys.
        let mut keys: Vec<(usize, String)> = Vec::new();
        let mut parent: Vec<usize> = Vec::new();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let key = |keys: &mut Vec<(usize, String)>, parent: &mut Vec<usize>, k: (usize, String)| {
            if let Some(i) = keys.iter().position(|x| *x == k) {
                i
            } else {
                keys.push(k);
                parent.push(parent.len());
                parent.len() - 1
            }
        };
        for l in &self.links {
            let a = key(&mut keys, &mut parent, (l.a.node, l.a.iface.clone()));
            let b = key(&mut keys, &mut parent, (l.b.node, l.b.iface.clone()));
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            parent[ra] = rb;
        }
        for (ni, n) in self.nodes.iter().enumerate() {
            if let Some(br) = &n.bridge {
                let b = key(&mut keys, &mut parent, (ni, br.clone()));
                for i in &n.interfaces {
                    let p = key(&mut keys, &mut parent, (ni, i.name.clone()));
                    let (ra, rb) = (find(&mut parent, p), find(&mut parent, b));
                    parent[ra] = rb;
                }
            }
        }
        let mut groups: BTreeMap<usize, Vec<(usize, String)>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            let r = find(&mut parent, i);
            groups.entry(r).or_default().push(k.clone());
        }
        groups.into_values().collect()
    }
}
