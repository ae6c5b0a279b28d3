//! `[tunnels.NAME] kind = "wireguard"`: WireGuard between lab nodes, as written
//! (raw) and resolved into an overlay, which `overlay::validate` checks.
//!
//! Every peer is a node with an underlay endpoint (one of its addresses and a
//! UDP port) and inner addresses on the tunnel's TUN. Without `hub` every peer
//! peers with every other (two peers: point to point); with `hub = "node"` the
//! spokes peer only with the hub, which forwards between them.

use super::ends::{NodeLookup, Peer, end_fields};
use super::implementation::{self, Implementation};
use super::keys::Preshared;
use super::overlay::Overlay;
use crate::topology::kernel::{KernelFacts, WIREGUARD};
use crate::topology::{KeyPath, Problem, int_in};
use serde::Deserialize;

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
    /// "wireguard-go", "boringtun" or "kernel".
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
    pub address: crate::topology::raw::OneOrMany,
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

pub fn resolve(
    name: &str,
    w: &RawWireguard,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    external: &dyn Fn(usize) -> bool,
    kernel: KernelFacts,
    p: &mut Vec<Problem>,
) -> Option<Overlay> {
    let before = p.len();
    let mut wg = settings(w, at, p);
    let default_impl = implementation::parse(
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
    kernel_peers(w, at, kernel, p);
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
fn settings(w: &RawWireguard, at: &KeyPath, p: &mut Vec<Problem>) -> Overlay {
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
    Overlay {
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
    let implementation = implementation::parse(
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

/// Peers the kernel is to run, on a kernel without WireGuard: refused where
/// the file says "kernel" (the peer's own key, else the tunnel's), once each.
fn kernel_peers(w: &RawWireguard, at: &KeyPath, kernel: KernelFacts, p: &mut Vec<Problem>) {
    if kernel.wireguard {
        return;
    }
    let mut said: Vec<KeyPath> = Vec::new();
    for (i, rp) in w.peers.iter().enumerate() {
        let key = match (&rp.implementation, &w.implementation) {
            (Some(own), _) if own == "kernel" => at.key("peers").index(i).key("implementation"),
            (None, Some(all)) if all == "kernel" => at.key("implementation"),
            _ => continue,
        };
        if !said.contains(&key) {
            said.push(key);
        }
    }
    for key in said {
        p.push(Problem::new(
            &key,
            format!(
                "implementation = \"kernel\" needs the kernel's WireGuard, and {}",
                WIREGUARD.refusal(
                    "use \"tunbench\" (tunbench's own, the default), \"wireguard-go\" or \"boringtun\""
                )
            ),
        ));
    }
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
