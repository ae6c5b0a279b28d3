//! `[tunnels.NAME] kind = "esp"`: an IPsec tunnel-mode ESP tunnel between two
//! nodes, keyed statically (no IKE): AES-GCM-128, in UDP 4500 (RFC 3948) or
//! raw protocol 50. Its two ends are described like WireGuard peers (node,
//! underlay endpoint, inner addresses, networks behind), so the plan, the
//! routing model and the reports treat both alike.

use super::wireguard::{Implementation, Peer, Preshared, Wireguard};
use super::{KeyPath, Problem, int_in};
use crate::codec::overhead::Encapsulation;
use serde::Deserialize;

pub const ESP_PORT: u16 = 4500;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEsp {
    #[serde(default)]
    pub description: Option<String>,
    /// "udp" (default, RFC 3948 on port 4500) or "raw" (IP protocol 50).
    #[serde(default)]
    pub encap: Option<String>,
    /// Inner MTU; default: the most that fits a 1500-byte underlay.
    #[serde(default)]
    pub mtu: Option<i64>,
    /// Anti-replay window in packets (default 64).
    #[serde(default)]
    pub window: Option<i64>,
    #[serde(default)]
    pub queues: Option<i64>,
    #[serde(default)]
    pub ends: Vec<RawEnd>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnd {
    pub node: String,
    pub endpoint: String,
    pub address: super::raw::OneOrMany,
    #[serde(default)]
    pub allowed_ips: Vec<String>,
    /// The SPI this end receives on (default 0x1000 + its index).
    #[serde(default)]
    pub spi: Option<i64>,
    /// The key material of the SA into this end: AES-GCM-128's 16-byte key
    /// and 4-byte salt, 40 hex digits (default: made per lab; needed when the
    /// two ends are on different hosts).
    #[serde(default)]
    pub sa_key: Option<String>,
    /// L2TP only: the tunnel and session ids this end receives with.
    #[serde(default)]
    pub tunnel_id: Option<i64>,
    #[serde(default)]
    pub session_id: Option<i64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct EspTunnel {
    /// The two ends, as peers of an overlay.
    pub overlay: Wireguard,
    pub sas: Sas,
}

/// The SAs between two ends, as the topology gives them (keys are the lab's).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sas {
    /// In UDP 4500 (RFC 3948), else raw protocol 50.
    pub udp: bool,
    pub window: u32,
    /// The SPI each end receives on.
    pub spis: Vec<u32>,
    /// The key material of the SA into each end, where the file gives it.
    #[serde(skip)]
    pub keys: Vec<Option<[u8; 20]>>,
}

impl EspTunnel {
    pub fn encapsulation(&self) -> Encapsulation {
        Encapsulation::Esp { udp: self.sas.udp }
    }
}

pub fn resolve(
    name: &str,
    e: &RawEsp,
    at: &KeyPath,
    node: &super::wireguard::NodeLookup<'_>,
    p: &mut Vec<Problem>,
) -> Option<EspTunnel> {
    let before = p.len();
    let (udp, window) = sa_settings(e.encap.as_deref(), e.window, at, p);
    let peers = two_ends(
        name,
        "an ESP tunnel",
        &e.ends,
        if udp { ESP_PORT } else { 0 },
        at,
        node,
        p,
    );
    let spis = spis(&e.ends, at, p);
    let keys = sa_keys(&e.ends, at, p);
    for (i, re) in e.ends.iter().enumerate() {
        if re.tunnel_id.is_some() || re.session_id.is_some() {
            p.push(Problem::new(
                &at.key("ends").index(i),
                "tunnel_id and session_id are L2TP's; an ESP end has only an spi",
            ));
        }
    }
    let overlay = overlay(peers, Encapsulation::Esp { udp }, e.mtu, e.queues, at, p);
    if p.len() > before {
        return None;
    }
    Some(EspTunnel {
        overlay,
        sas: Sas {
            udp,
            window,
            spis,
            keys,
        },
    })
}

/// How ESP travels and its anti-replay window: (UDP 4500?, window).
pub fn sa_settings(
    encap: Option<&str>,
    window: Option<i64>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> (bool, u32) {
    let udp = match encap {
        None | Some("udp") => true,
        Some("raw") => false,
        Some(o) => {
            p.push(Problem::new(&at.key("encap"), format!("encap \"{o}\" is not one of \"udp\" (RFC 3948, port 4500), \"raw\" (protocol 50)")));
            true
        }
    };
    let window = int_in(window, 32..=4096, 64, &at.key("window"), p, |w| {
        format!("window {w}; use 32..=4096 packets (default 64)")
    }) as u32;
    (udp, window)
}

/// The overlay of a point-to-point tunnel: its two ends, its inner MTU (by
/// default the most that `enc` fits into a 1500-byte underlay) and queues.
pub fn overlay(
    peers: Vec<Peer>,
    enc: Encapsulation,
    mtu: Option<i64>,
    queues: Option<i64>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Wireguard {
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
    Wireguard {
        mtu,
        keepalive: None,
        preshared: Preshared::None,
        queues,
        hub: None,
        peers,
    }
}

/// The two ends of a point-to-point tunnel (`kind` names it in errors) as
/// overlay peers whose sockets use `port` (0: a raw IP socket).
pub fn two_ends(
    name: &str,
    kind: &str,
    ends: &[RawEnd],
    port: u16,
    at: &KeyPath,
    node: &super::wireguard::NodeLookup<'_>,
    p: &mut Vec<Problem>,
) -> Vec<Peer> {
    if ends.len() != 2 {
        p.push(Problem::new(
            &at.key("ends"),
            format!(
                "tunnel \"{name}\" has {} end(s); {kind} has exactly two",
                ends.len()
            ),
        ));
    }
    let mut peers = Vec::new();
    for (i, re) in ends.iter().enumerate() {
        let eat = at.key("ends").index(i);
        let n = node(&re.node, &eat.key("node"), p);
        let (endpoint, addresses, allowed_ips) = super::wireguard::end_fields(
            &re.endpoint,
            &re.address,
            &re.allowed_ips,
            "end",
            &eat,
            p,
        );
        if let (Some(node), Some(endpoint)) = (n, endpoint) {
            peers.push(Peer {
                node,
                endpoint,
                port,
                addresses,
                allowed_ips,
                private_key: None,
                public_key: None,
                // Validation refuses ESP, L2TP and IKEv2 ends at external nodes.
                external: false,
                implementation: Implementation::Tunbench,
                at: eat,
            });
        }
    }
    peers
}

/// The SPI each end receives on: given, or 0x1000 + its index; never both
/// the same.
pub fn spis(ends: &[RawEnd], at: &KeyPath, p: &mut Vec<Problem>) -> Vec<u32> {
    let spis: Vec<u32> = ends
        .iter()
        .enumerate()
        .map(|(i, re)| {
            int_in(
                re.spi,
                256..=u32::MAX as i64,
                0x1000 + i as i64,
                &at.key("ends").index(i).key("spi"),
                p,
                |s| {
                    format!(
                        "SPI {s}; use 256..=4294967295 (0 and 1-255 are reserved, RFC 4303 2.1)"
                    )
                },
            ) as u32
        })
        .collect();
    if spis.len() == 2 && spis[0] == spis[1] {
        p.push(Problem::new(
            &at.key("ends").index(1).key("spi"),
            "both ends receive on the same SPI; give each its own",
        ));
    }
    spis
}

/// The SA keys the file gives, per end: 40 hex digits each, the two ends'
/// different (an SA's key is its own).
pub fn sa_keys(ends: &[RawEnd], at: &KeyPath, p: &mut Vec<Problem>) -> Vec<Option<[u8; 20]>> {
    let keys: Vec<Option<[u8; 20]>> = ends
        .iter()
        .enumerate()
        .map(|(i, re)| {
            let text = re.sa_key.as_deref()?;
            let key = parse_sa_key(text);
            if key.is_none() {
                p.push(Problem::new(
                    &at.key("ends").index(i).key("sa_key"),
                    "sa_key must be 40 hex digits: AES-GCM-128's 16-byte key and 4-byte salt (`openssl rand -hex 20` makes one)",
                ));
            }
            key
        })
        .collect();
    if keys.len() == 2 && keys[0].is_some() && keys[0] == keys[1] {
        p.push(Problem::new(
            &at.key("ends").index(1).key("sa_key"),
            "both ends have the same sa_key; give each SA its own",
        ));
    }
    keys
}

fn parse_sa_key(text: &str) -> Option<[u8; 20]> {
    if text.len() != 40 || !text.is_ascii() {
        return None;
    }
    let mut k = [0u8; 20];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}
