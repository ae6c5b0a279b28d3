//! The overlay of a point-to-point kind (WireGuard, ESP, L2TP, IKEv2): its
//! peers, who has a session with whom (everyone, or the spokes with a hub),
//! what each routes to the others; checked against the whole topology.

use super::ends::Peer;
use super::keys::Preshared;
use crate::codec::overhead::Encapsulation;
use crate::topology::resolved::{NodeKind, Topology};
use crate::topology::{KeyPath, Problem, int_in};
use ipnetwork::IpNetwork;
use std::net::IpAddr;

/// The peers of a point-to-point tunnel and what they share (keepalive and
/// a preshared key are WireGuard's).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Overlay {
    pub mtu: u32,
    pub keepalive: Option<u16>,
    pub preshared: Preshared,
    pub queues: u32,
    /// Index into `peers` of the hub.
    pub hub: Option<usize>,
    pub peers: Vec<Peer>,
}

impl Overlay {
    /// The peers peer `i` has a session with.
    pub fn neighbours(&self, i: usize) -> Vec<usize> {
        (0..self.peers.len())
            .filter(|&j| {
                j != i && (self.hub.is_none() || self.hub == Some(i) || self.hub == Some(j))
            })
            .collect()
    }

    /// What peer `j` may send from and is sent to: its addresses as host
    /// prefixes and its networks.
    fn own_allowed(&self, j: usize) -> Vec<IpNetwork> {
        let p = &self.peers[j];
        let mut v: Vec<IpNetwork> = p
            .addresses
            .iter()
            .map(|a| {
                IpNetwork::new(a.ip(), if a.is_ipv4() { 32 } else { 128 }).expect("host prefix")
            })
            .collect();
        v.extend(p.allowed_ips.iter().copied());
        v
    }

    /// The allowed IPs peer `i` configures for neighbour `j`: through a hub,
    /// a spoke reaches the other spokes too.
    pub fn allowed_for(&self, i: usize, j: usize) -> Vec<IpNetwork> {
        let mut v = self.own_allowed(j);
        if self.hub == Some(j) {
            for k in 0..self.peers.len() {
                if k != i && k != j {
                    v.extend(self.own_allowed(k));
                }
            }
        }
        v
    }

    /// Routes peer `i` adds into its TUN: every allowed prefix of every
    /// neighbour that its own connected subnets do not already cover.
    pub fn tun_routes(&self, i: usize) -> Vec<IpNetwork> {
        let connected: Vec<IpNetwork> = self.peers[i]
            .addresses
            .iter()
            .filter_map(|a| IpNetwork::new(a.network(), a.prefix()).ok())
            .collect();
        let mut out: Vec<IpNetwork> = Vec::new();
        for j in self.neighbours(i) {
            for n in self.allowed_for(i, j) {
                let covered = connected
                    .iter()
                    .any(|c| c.prefix() <= n.prefix() && c.contains(n.ip()));
                if !covered && !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// The neighbour of peer `i` whose allowed IPs hold `dst` (longest
    /// prefix), as cryptokey routing picks it.
    pub fn peer_for(&self, i: usize, dst: IpAddr) -> Option<usize> {
        self.neighbours(i)
            .into_iter()
            .flat_map(|j| self.allowed_for(i, j).into_iter().map(move |n| (n, j)))
            .filter(|(n, _)| n.contains(dst))
            .max_by_key(|(n, _)| n.prefix())
            .map(|(_, j)| j)
    }

    /// The endpoint `i` sends to for `j`.
    pub fn endpoint_of(&self, j: usize) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.peers[j].endpoint, self.peers[j].port)
    }

    /// Whether the underlay is IPv6 (for the overhead figures).
    pub fn outer_v6(&self) -> bool {
        self.peers.first().is_some_and(|p| p.endpoint.is_ipv6())
    }
}

/// The overlay of a point-to-point tunnel: its two ends, its inner MTU (by
/// default the most that `enc` fits into a 1500-byte underlay) and queues.
pub fn point_to_point(
    peers: Vec<Peer>,
    enc: Encapsulation,
    mtu: Option<i64>,
    queues: Option<i64>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Overlay {
    let queues = int_in(queues, 1..=16, 1, &at.key("queues"), p, |q| {
        format!("{q} queues; use 1..=16")
    }) as u32;
    let outer_v6 = peers.first().is_some_and(|x: &Peer| x.endpoint.is_ipv6());
    let default_mtu = enc.max_inner(outer_v6, 1500) as i64;
    let mtu = int_in(mtu, 1280..=9000, default_mtu, &at.key("mtu"), p, |m| {
        format!(
            "inner MTU {m}; use 1280..=9000 (default {default_mtu}, what fits a 1500-byte underlay)"
        )
    }) as u32;
    Overlay {
        mtu,
        keepalive: None,
        preshared: Preshared::None,
        queues,
        hub: None,
        peers,
    }
}

/// Checks that need the whole topology. `inner_dev` is where the peers'
/// inner addresses live: the tunnel's TUN, or `lo` (IKEv2).
pub fn validate(t: &Topology, tunnel: &str, w: &Overlay, inner_dev: &str, p: &mut Vec<Problem>) {
    let mut nodes = std::collections::BTreeMap::new();
    let mut keys = std::collections::BTreeMap::new();
    // Given public keys, and those of given private keys.
    let mut public = std::collections::BTreeMap::new();
    for (i, peer) in w.peers.iter().enumerate() {
        if let Some(k) = peer.private_key {
            public.insert(crate::vocab::keys::public_of(&k), i);
        }
    }
    for (i, peer) in w.peers.iter().enumerate() {
        let n = &t.nodes[peer.node];
        if n.kind == NodeKind::Switch {
            p.push(Problem::new(
                &peer.at.key("node"),
                format!(
                    "\"{}\" is a switch; a WireGuard peer is a router or host",
                    n.name
                ),
            ));
            continue;
        }
        if let Some(prev) = nodes.insert(peer.node, i) {
            p.push(Problem::new(
                &peer.at.key("node"),
                format!(
                    "node \"{}\" is already peer {prev} of tunnel \"{tunnel}\"",
                    n.name
                ),
            ));
        }
        if let Some(k) = peer.private_key {
            if let Some(prev) = keys.insert(k, i) {
                p.push(Problem::new(
                    &peer.at.key("private_key"),
                    format!("the same private key as peer {prev}; every peer needs its own"),
                ));
            }
        }
        if let Some(k) = peer.public_key {
            if let Some(prev) = public.insert(k, i) {
                p.push(Problem::new(
                    &peer.at.key("public_key"),
                    format!("the same public key as peer {prev}; every peer needs its own"),
                ));
            }
        }
        // The node's addresses besides this peer's inner ones.
        let own: Vec<(String, IpNetwork)> = t
            .node_addresses(peer.node)
            .into_iter()
            .filter(|(d, a)| !(d == inner_dev && peer.addresses.contains(a)))
            .collect();
        if !own.iter().any(|(_, a)| a.ip() == peer.endpoint) {
            p.push(Problem::new(&peer.at.key("endpoint"), format!("{} is not an address of node \"{}\"; the endpoint is the underlay address the peer listens on", peer.endpoint, n.name)));
        }
        if w.peers
            .iter()
            .any(|o| o.endpoint.is_ipv6() != peer.endpoint.is_ipv6())
        {
            p.push(Problem::new(
                &peer.at.key("endpoint"),
                "all peers of a tunnel use the same underlay family",
            ));
        }
        for a in &peer.addresses {
            if own.iter().any(|(_, b)| {
                IpNetwork::new(b.network(), b.prefix())
                    .is_ok_and(|net| net.contains(a.ip()) && b.prefix() > 0)
            }) {
                p.push(Problem::new(&peer.at.key("address"), format!("{a} lies in a subnet of the node's own links; inner addresses need a subnet of their own")));
            }
        }
    }
    // Another tunbench TUN of the same name on one node would be one device.
    for other in &t.tunnels {
        if other.name != tunnel && other.tun_name() == inner_dev {
            p.push(Problem::new(&other.at, format!("tunnels \"{tunnel}\" and \"{}\" both need a device named {inner_dev}; rename one", other.name)));
        }
    }
}
