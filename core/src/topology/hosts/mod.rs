//! Placement on several hosts: `[hosts.NAME]` (each machine's underlay
//! address, interface and MTU), `host = "NAME"` on nodes, and the links
//! between hosts, each carried by a point-to-point VXLAN with its own VNI.
//! A file without `[hosts]` is one machine and has no placement. Pure: the
//! part one host builds, and which host a machine is, are computed here from
//! the model and the addresses passed in.

mod resolve;
mod validate;

#[cfg(test)]
mod tests;

pub(super) use resolve::resolve;
pub(super) use validate::validate;

use super::KeyPath;
use super::resolved::{Link, Topology};
use std::fmt;
use std::net::IpAddr;

/// VXLAN's UDP port (IANA), unless the file sets `vxlan_port`.
pub const DEFAULT_VXLAN_PORT: u16 = 4789;
/// An underlay's MTU unless `[hosts.NAME] mtu` says otherwise.
pub const DEFAULT_UNDERLAY_MTU: u32 = 1500;
/// The largest VNI: 24 bits.
pub const VNI_MAX: u32 = 16_777_215;

/// Bytes VXLAN adds to a link's packet on the underlay: the outer IP header
/// (20 for IPv4, 40 for IPv6), UDP 8, VXLAN 8 and the inner Ethernet header 14.
pub fn vxlan_overhead(underlay: IpAddr) -> u32 {
    match underlay {
        IpAddr::V4(_) => 20 + 8 + 8 + 14,
        IpAddr::V6(_) => 40 + 8 + 8 + 14,
    }
}

/// Where each node of the lab is built and how the links between hosts go.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Placement {
    /// The declared hosts, sorted by name.
    pub hosts: Vec<Host>,
    /// Each node's host (an index into `hosts`); None for an external node,
    /// which no host builds.
    pub node_host: Vec<Option<usize>>,
    /// The UDP port of every VXLAN link.
    pub vxlan_port: u16,
    /// The links whose ends are on different hosts, in link order.
    pub crossings: Vec<Crossing>,
}

/// One `[hosts.NAME]`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Host {
    pub name: String,
    /// The address its VXLAN packets leave from.
    pub underlay: IpAddr,
    /// The underlay interface, if the file names it.
    pub interface: Option<String>,
    /// The underlay's MTU.
    pub mtu: u32,
    /// Its clock is synchronised with the other hosts' (`synchronised_clock`).
    pub synchronised_clock: bool,
    #[serde(skip)]
    pub at: KeyPath,
}

/// A link whose two ends are on different hosts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Crossing {
    /// The link's index in `Topology::links`.
    pub link: usize,
    pub vni: u32,
    /// Where the file sets the VNI; None: derived.
    #[serde(skip)]
    pub vni_at: Option<KeyPath>,
}

/// What one host builds: its nodes, the links with both ends on it (or one
/// end on an external device it reaches), and its end of each link to
/// another host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostPart {
    pub host: String,
    /// Node indices, in node order.
    pub nodes: Vec<usize>,
    /// Link indices, in link order.
    pub local_links: Vec<usize>,
    pub ends: Vec<CrossEnd>,
}

/// This host's end of a link to another host: the VXLAN device to make.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossEnd {
    pub link: usize,
    /// The local node and its interface, which the VXLAN device becomes.
    pub node: usize,
    pub iface: String,
    pub remote_host: String,
    pub vni: u32,
    /// This host's underlay address and the far host's.
    pub local: IpAddr,
    pub remote: IpAddr,
    pub port: u16,
    /// The underlay interface of this host, if the file names it.
    pub underlay_interface: Option<String>,
}

/// Why a machine's local addresses name no single declared host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostLookup {
    /// The file has no `[hosts]`.
    Unplaced,
    /// No declared underlay address is local; the declared ones.
    NoneLocal(Vec<(String, IpAddr)>),
    /// Several declared hosts' underlays are local.
    Several(Vec<String>),
}

impl fmt::Display for HostLookup {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            HostLookup::Unplaced => f.write_str("the file declares no [hosts]; it is one machine"),
            HostLookup::NoneLocal(declared) => {
                let list: Vec<String> =
                    declared.iter().map(|(n, a)| format!("{n} ({a})")).collect();
                write!(
                    f,
                    "no declared host's underlay address is an address of this machine; declared: {}; name the host",
                    list.join(", ")
                )
            }
            HostLookup::Several(names) => write!(
                f,
                "the underlay addresses of hosts {} are all on this machine; name the host",
                names.join(", ")
            ),
        }
    }
}

impl Placement {
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// The crossing of link `link`, if it crosses hosts.
    pub fn crossing(&self, link: usize) -> Option<&Crossing> {
        self.crossings.iter().find(|c| c.link == link)
    }

    /// The host whose underlay address is among `local` (this machine's
    /// addresses): exactly one, or why not.
    pub fn host_for_addresses(&self, local: &[IpAddr]) -> Result<&str, HostLookup> {
        let found: Vec<&Host> = self
            .hosts
            .iter()
            .filter(|h| local.contains(&h.underlay))
            .collect();
        match found.as_slice() {
            [one] => Ok(&one.name),
            [] => Err(HostLookup::NoneLocal(
                self.hosts
                    .iter()
                    .map(|h| (h.name.clone(), h.underlay))
                    .collect(),
            )),
            many => Err(HostLookup::Several(
                many.iter().map(|h| h.name.clone()).collect(),
            )),
        }
    }
}

impl Topology {
    /// The host that builds link `l`: None for a link between two external
    /// nodes, which nothing builds, and for a link between hosts.
    fn link_host(&self, pl: &Placement, l: &Link) -> Option<usize> {
        match (pl.node_host[l.a.node], pl.node_host[l.b.node]) {
            (Some(a), Some(b)) if a == b => Some(a),
            (Some(a), None) | (None, Some(a)) => Some(a),
            _ => None,
        }
    }

    /// Which declared host a machine with these local addresses is.
    pub fn host_for_addresses(&self, local: &[IpAddr]) -> Result<&str, HostLookup> {
        match &self.placement {
            None => Err(HostLookup::Unplaced),
            Some(pl) => pl.host_for_addresses(local),
        }
    }

    /// What host `name` builds; None when the file declares no such host.
    pub fn host_part(&self, name: &str) -> Option<HostPart> {
        let pl = self.placement.as_ref()?;
        let h = pl.host_index(name)?;
        let nodes = (0..self.nodes.len())
            .filter(|&n| pl.node_host[n] == Some(h))
            .collect();
        let local_links = (0..self.links.len())
            .filter(|&li| self.link_host(pl, &self.links[li]) == Some(h))
            .collect();
        let mut ends = Vec::new();
        for c in &pl.crossings {
            let l = &self.links[c.link];
            for (me, far) in [(&l.a, &l.b), (&l.b, &l.a)] {
                let Some(far_host) = pl.node_host[far.node] else {
                    continue;
                };
                if pl.node_host[me.node] != Some(h) {
                    continue;
                }
                let remote = &pl.hosts[far_host];
                ends.push(CrossEnd {
                    link: c.link,
                    node: me.node,
                    iface: me.iface.clone(),
                    remote_host: remote.name.clone(),
                    vni: c.vni,
                    local: pl.hosts[h].underlay,
                    remote: remote.underlay,
                    port: pl.vxlan_port,
                    underlay_interface: pl.hosts[h].interface.clone(),
                });
            }
        }
        Some(HostPart {
            host: name.to_string(),
            nodes,
            local_links,
            ends,
        })
    }

    /// One line per host for `validate`: its underlay, its nodes and its
    /// links to other hosts. Empty for a file without `[hosts]`.
    pub fn placement_lines(&self) -> Vec<String> {
        let Some(pl) = &self.placement else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for h in &pl.hosts {
            let Some(part) = self.host_part(&h.name) else {
                continue;
            };
            let nodes: Vec<&str> = part
                .nodes
                .iter()
                .map(|&n| self.nodes[n].name.as_str())
                .collect();
            let ends: Vec<String> = part
                .ends
                .iter()
                .map(|e| {
                    format!(
                        "{}:{} to {} (VNI {})",
                        self.nodes[e.node].name, e.iface, e.remote_host, e.vni
                    )
                })
                .collect();
            out.push(format!(
                "host {} ({}, mtu {}): nodes {}; links to other hosts: {}",
                h.name,
                h.underlay,
                h.mtu,
                nodes.join(", "),
                if ends.is_empty() {
                    "none".to_string()
                } else {
                    ends.join(", ")
                }
            ));
        }
        out
    }
}

/// `node:iface - node:iface`, or the link's name with its ends.
pub(super) fn link_label(t: &Topology, l: &Link) -> String {
    let ends = format!(
        "{}:{} - {}:{}",
        t.nodes[l.a.node].name, l.a.iface, t.nodes[l.b.node].name, l.b.iface
    );
    match &l.name {
        Some(n) => format!("link \"{n}\" ({ends})"),
        None => format!("link {ends}"),
    }
}
