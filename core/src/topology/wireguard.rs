//! `[tunnels.NAME] kind = "wireguard"`: WireGuard between lab nodes, as written
//! (raw), resolved and checked.
//!
//! Every peer is a node with an underlay endpoint (one of its addresses and a
//! UDP port) and inner addresses on the tunnel's TUN. Without `hub` every peer
//! peers with every other (two peers: point to point); with `hub = "node"` the
//! spokes peer only with the hub, which forwards between them.

use super::resolved::{NodeKind, Topology};
use super::{KeyPath, Problem, int_in};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use std::net::IpAddr;

/// The inner MTU `wg-quick` picks: 1500 minus the IPv6 worst case (80).
pub const DEFAULT_MTU: u32 = 1420;
pub const DEFAULT_PORT: u16 = 51820;
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWireguard {
    #[serde(default)]
    pub description: Option<String>,
    /// Inner MTU (default 1420).
    #[serde(default)]
    pub mtu: Option<i64>,
    /// Persistent keepalive in seconds (default off).
    #[serde(default)]
    pub keepalive: Option<i64>,
    /// `true`: one generated per lab; or a key in base64.
    #[serde(default)]
    pub preshared_key: Option<toml::Value>,
    /// Who runs every peer that does not say: "tunbench" (default),
    /// "wireguard-go" or "boringtun".
    #[serde(default)]
    pub implementation: Option<String>,
    /// TUN queues (threads per direction) of tunbench's datapath (default 1).
    #[serde(default)]
    pub queues: Option<i64>,
    /// The node every other peer connects to.
    #[serde(default)]
    pub hub: Option<String>,
    #[serde(default)]
    pub peers: Vec<RawPeer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPeer {
    pub node: String,
    /// The underlay address the peer listens on: one of the node's addresses.
    pub endpoint: String,
    #[serde(default)]
    pub port: Option<i64>,
    /// Inner addresses with prefix length, on the tunnel's TUN.
    pub address: super::raw::OneOrMany,
    /// Networks behind this peer, routed to it by the others (its own inner
    /// addresses always are).
    #[serde(default)]
    pub allowed_ips: Vec<String>,
    /// base64, as `wg genkey` prints it; default: generated per lab.
    #[serde(default)]
    pub private_key: Option<String>,
    /// A peer on an external node: the device's public key (base64, as `wg
    /// pubkey` prints it). tunbench never holds its private key.
    #[serde(default)]
    pub public_key: Option<String>,
    #[serde(default)]
    pub implementation: Option<String>,
}

/// Who runs a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Implementation {
    /// boringtun's protocol core on tunbench's shared driver.
    Tunbench,
    /// Debian's wireguard-go, configured through its UAPI socket.
    WireguardGo,
    /// boringtun-cli, boringtun's own device loop.
    Boringtun,
}

impl Implementation {
    pub fn as_str(self) -> &'static str {
        match self {
            Implementation::Tunbench => "tunbench",
            Implementation::WireguardGo => "wireguard-go",
            Implementation::Boringtun => "boringtun",
        }
    }

    /// The program an external implementation runs, and where it comes from.
    pub fn program(self) -> Option<(&'static str, &'static str)> {
        match self {
            Implementation::Tunbench => None,
            Implementation::WireguardGo => Some((
                "wireguard-go",
                "Debian's package wireguard-go (apt-get install wireguard-go)",
            )),
            Implementation::Boringtun => Some((
                "boringtun-cli",
                "crates.io (cargo install --locked boringtun-cli --version 0.7.1)",
            )),
        }
    }
}

fn implementation(
    s: Option<&str>,
    default: Implementation,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Implementation {
    match s {
        None => default,
        Some("tunbench") => Implementation::Tunbench,
        Some("wireguard-go") => Implementation::WireguardGo,
        Some("boringtun") | Some("boringtun-cli") => Implementation::Boringtun,
        Some(o) => {
            p.push(Problem::new(
                at,
                format!("implementation \"{o}\" is not one of \"tunbench\", \"wireguard-go\", \"boringtun\""),
            ));
            default
        }
    }
}

/// A preshared key: none, one made per lab, or given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preshared {
    None,
    Generate,
    Given([u8; 32]),
}

impl serde::Serialize for Preshared {
    // Never the key itself: resolved topologies are printed.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Preshared::None => "none",
            Preshared::Generate => "generated",
            Preshared::Given(_) => "given",
        })
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Wireguard {
    pub mtu: u32,
    pub keepalive: Option<u16>,
    pub preshared: Preshared,
    pub queues: u32,
    /// Index into `peers` of the hub.
    pub hub: Option<usize>,
    pub peers: Vec<Peer>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Peer {
    pub node: usize,
    pub endpoint: IpAddr,
    pub port: u16,
    pub addresses: Vec<IpNetwork>,
    /// Networks behind the peer besides its own addresses.
    pub allowed_ips: Vec<IpNetwork>,
    #[serde(skip)]
    pub private_key: Option<[u8; 32]>,
    /// The device's own public key, for a peer on an external node.
    #[serde(serialize_with = "public_key_text")]
    pub public_key: Option<[u8; 32]>,
    /// On a node tunbench does not build: no TUN, no process, no key made;
    /// the lab's peers list it with `public_key`.
    pub external: bool,
    pub implementation: Implementation,
    #[serde(skip)]
    pub at: KeyPath,
}

fn public_key_text<S: serde::Serializer>(k: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
    match k {
        Some(k) => s.serialize_some(&crate::vocab::keys::to_base64(k)),
        None => s.serialize_none(),
    }
}

impl Peer {
    /// Who runs the peer, as reports and graphs say it: the implementation,
    /// or "external" for a device tunbench does not run.
    pub fn runs(&self) -> &'static str {
        if self.external {
            "external"
        } else {
            self.implementation.as_str()
        }
    }
}

impl Wireguard {
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

/// The fields a WireGuard peer and an ESP end share: the underlay endpoint,
/// inner addresses (with prefix length) and the networks behind it (`what`
/// names it in messages: "peer", "end").
pub(crate) fn end_fields(
    endpoint: &str,
    address: &super::raw::OneOrMany,
    allowed: &[String],
    what: &str,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> (Option<IpAddr>, Vec<IpNetwork>, Vec<IpNetwork>) {
    let ep = match endpoint.parse::<IpAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            p.push(Problem::new(
                &at.key("endpoint"),
                format!("\"{endpoint}\" is not an IP address (the underlay address this {what} listens on, no prefix length)"),
            ));
            None
        }
    };
    let mut addresses = Vec::new();
    if address.0.is_empty() {
        p.push(Problem::new(
            &at.key("address"),
            format!("a {what} needs at least one inner address, with its prefix length"),
        ));
    }
    for (k, s) in address.0.iter().enumerate() {
        match s.parse::<IpNetwork>() {
            Ok(a) if s.contains('/') => addresses.push(a),
            _ => p.push(Problem::new(
                &at.key("address").index(k),
                format!("\"{s}\" is not an address with prefix length (like 198.19.0.1/24)"),
            )),
        }
    }
    let mut allowed_ips = Vec::new();
    for (k, s) in allowed.iter().enumerate() {
        match s.parse::<IpNetwork>() {
            Ok(a) if a.ip() == a.network() => allowed_ips.push(a),
            Ok(a) => p.push(Problem::new(
                &at.key("allowed_ips").index(k),
                format!(
                    "{s} has host bits set; did you mean {}/{}?",
                    a.network(),
                    a.prefix()
                ),
            )),
            Err(_) => p.push(Problem::new(
                &at.key("allowed_ips").index(k),
                format!("\"{s}\" is not a prefix (like 198.18.60.0/24)"),
            )),
        }
    }
    (ep, addresses, allowed_ips)
}

/// Finds a node by name, or records a problem at the key path.
pub type NodeLookup<'a> = dyn Fn(&str, &KeyPath, &mut Vec<Problem>) -> Option<usize> + 'a;

pub fn resolve(
    name: &str,
    w: &RawWireguard,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    external: &dyn Fn(usize) -> bool,
    p: &mut Vec<Problem>,
) -> Option<Wireguard> {
    let before = p.len();
    let mut wg = settings(w, at, p);
    let default_impl = implementation(
        w.implementation.as_deref(),
        Implementation::Tunbench,
        &at.key("implementation"),
        p,
    );
    if w.peers.len() < 2 {
        p.push(Problem::new(
            &at.key("peers"),
            format!(
                "tunnel \"{name}\" has {} peer(s); WireGuard needs at least two",
                w.peers.len()
            ),
        ));
    }
    wg.peers = w
        .peers
        .iter()
        .enumerate()
        .filter_map(|(i, rp)| {
            let pat = at.key("peers").index(i);
            peer(rp, pat, default_impl, node, external, p)
        })
        .collect();
    if !wg.peers.is_empty() && wg.peers.iter().all(|x| x.external) {
        p.push(Problem::new(
            &at.key("peers"),
            format!(
                "every peer of tunnel \"{name}\" is on an external node; at least one must be a host or router of the lab"
            ),
        ));
    }
    if let Some(h) = &w.hub {
        let hn = node(h, &at.key("hub"), p);
        wg.hub = hn.and_then(|hn| wg.peers.iter().position(|x| x.node == hn));
        if hn.is_some() && wg.hub.is_none() {
            p.push(Problem::new(
                &at.key("hub"),
                format!("the hub \"{h}\" is not one of the tunnel's peers"),
            ));
        }
    }
    (p.len() == before).then_some(wg)
}

/// The tunnel's own settings (MTU, keepalive, preshared key, queues), with
/// no peers yet.
fn settings(w: &RawWireguard, at: &KeyPath, p: &mut Vec<Problem>) -> Wireguard {
    let mtu = int_in(
        w.mtu,
        1280..=9000,
        DEFAULT_MTU as i64,
        &at.key("mtu"),
        p,
        |m| format!("inner MTU {m}; use 1280..=9000 (default {DEFAULT_MTU})"),
    ) as u32;
    let keepalive = match w.keepalive {
        None | Some(0) => None,
        Some(k) if (1..=65535).contains(&k) => Some(k as u16),
        Some(k) => {
            p.push(Problem::new(
                &at.key("keepalive"),
                format!("keepalive {k} s; use 1..=65535, or 0 for off"),
            ));
            None
        }
    };
    let preshared = match &w.preshared_key {
        None | Some(toml::Value::Boolean(false)) => Preshared::None,
        Some(toml::Value::Boolean(true)) => Preshared::Generate,
        Some(toml::Value::String(s)) => match crate::vocab::keys::parse(s) {
            Ok(k) => Preshared::Given(k),
            Err(e) => {
                p.push(Problem::new(&at.key("preshared_key"), e));
                Preshared::None
            }
        },
        Some(_) => {
            p.push(Problem::new(
                &at.key("preshared_key"),
                "preshared_key is true (one per lab) or a base64 key",
            ));
            Preshared::None
        }
    };
    let queues = int_in(w.queues, 1..=16, 1, &at.key("queues"), p, |q| {
        format!("{q} queues; use 1..=16")
    }) as u32;
    Wireguard {
        mtu,
        keepalive,
        preshared,
        queues,
        hub: None,
        peers: Vec::new(),
    }
}

/// One peer: its node, underlay endpoint and port, inner addresses, keys and
/// who runs it. None: its node or endpoint is unusable.
fn peer(
    rp: &RawPeer,
    at: KeyPath,
    default_impl: Implementation,
    node: &NodeLookup<'_>,
    external: &dyn Fn(usize) -> bool,
    p: &mut Vec<Problem>,
) -> Option<Peer> {
    let n = node(&rp.node, &at.key("node"), p);
    let port = int_in(
        rp.port,
        1..=65535,
        DEFAULT_PORT as i64,
        &at.key("port"),
        p,
        |x| format!("port {x}; use 1..=65535 (default {DEFAULT_PORT})"),
    ) as u16;
    let (endpoint, addresses, allowed_ips) =
        end_fields(&rp.endpoint, &rp.address, &rp.allowed_ips, "peer", &at, p);
    let private_key = key(&rp.private_key, &at.key("private_key"), p);
    let implementation = implementation(
        rp.implementation.as_deref(),
        default_impl,
        &at.key("implementation"),
        p,
    );
    let public_key = key(&rp.public_key, &at.key("public_key"), p);
    let is_external = n.is_some_and(external);
    if is_external {
        external_peer_keys(rp, &at, p);
    } else if n.is_some() && rp.public_key.is_some() {
        p.push(Problem::new(
            &at.key("public_key"),
            format!(
                "\"{}\" is a node tunbench builds, so it holds its own key (private_key, or one made per lab); public_key is for a peer on a kind = \"external\" node",
                rp.node
            ),
        ));
    }
    Some(Peer {
        node: n?,
        endpoint: endpoint?,
        port,
        addresses,
        allowed_ips,
        private_key,
        public_key,
        external: is_external,
        implementation,
        at,
    })
}

/// A key in base64, as `wg` prints it.
fn key(s: &Option<String>, at: &KeyPath, p: &mut Vec<Problem>) -> Option<[u8; 32]> {
    match crate::vocab::keys::parse(s.as_ref()?) {
        Ok(k) => Some(k),
        Err(e) => {
            p.push(Problem::new(at, e));
            None
        }
    }
}

/// A peer on a device tunbench does not run: it is given by its public key,
/// and runs its own WireGuard.
fn external_peer_keys(rp: &RawPeer, at: &KeyPath, p: &mut Vec<Problem>) {
    let node = &rp.node;
    if rp.public_key.is_none() {
        p.push(Problem::new(
            at,
            format!(
                "\"{node}\" is external: give the device's public key, public_key = \"...\" (base64, as `wg pubkey` prints it)"
            ),
        ));
    }
    if rp.private_key.is_some() {
        p.push(Problem::new(
            &at.key("private_key"),
            format!(
                "\"{node}\" is external: its private key stays on the device; give its public_key instead"
            ),
        ));
    }
    if let Some(i) = &rp.implementation {
        p.push(Problem::new(
            &at.key("implementation"),
            format!(
                "\"{node}\" is external and runs its own WireGuard; implementation = \"{i}\" is for peers tunbench runs"
            ),
        ));
    }
}

/// Checks that need the whole topology. `inner_dev` is where the peers'
/// inner addresses live: the tunnel's TUN, or `lo` (IKEv2).
pub fn validate(t: &Topology, tunnel: &str, w: &Wireguard, inner_dev: &str, p: &mut Vec<Problem>) {
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
