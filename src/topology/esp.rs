//! `[tunnels.NAME] kind = "esp"`: an IPsec tunnel-mode ESP tunnel between two
//! nodes, keyed statically (no IKE): AES-GCM-128, in UDP 4500 (RFC 3948) or
//! raw protocol 50. Its two ends are described like WireGuard peers (node,
//! underlay endpoint, inner addresses, networks behind), so the plan, the
//! routing model and the reports treat both alike.

use super::wireguard::{Implementation, Peer, Preshared, Wireguard};
use super::{KeyPath, Problem, int_in};
use crate::tunnel::overhead::Encapsulation;
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
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct EspTunnel {
    /// The two ends, as peers of an overlay.
    pub overlay: Wireguard,
    pub udp: bool,
    pub window: u32,
    /// The SPI each end receives on.
    pub spis: Vec<u32>,
}

impl EspTunnel {
    pub fn encapsulation(&self) -> Encapsulation {
        Encapsulation::Esp { udp: self.udp }
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
    let udp = match e.encap.as_deref() {
        None | Some("udp") => true,
        Some("raw") => false,
        Some(o) => {
            p.push(Problem::new(&at.key("encap"), format!("encap \"{o}\" is not one of \"udp\" (RFC 3948, port 4500), \"raw\" (protocol 50)")));
            true
        }
    };
    let window = int_in(e.window, 32..=4096, 64, &at.key("window"), p, |w| {
        format!("window {w}; use 32..=4096 packets (default 64)")
    }) as u32;
    let queues = int_in(e.queues, 1..=16, 1, &at.key("queues"), p, |q| {
        format!("{q} queues; use 1..=16")
    }) as u32;
    if e.ends.len() != 2 {
        p.push(Problem::new(
            &at.key("ends"),
            format!(
                "tunnel \"{name}\" has {} end(s); an ESP tunnel has exactly two",
                e.ends.len()
            ),
        ));
    }
    let mut peers = Vec::new();
    let mut spis = Vec::new();
    for (i, re) in e.ends.iter().enumerate() {
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
        let spi = int_in(
            re.spi,
            256..=u32::MAX as i64,
            0x1000 + i as i64,
            &eat.key("spi"),
            p,
            |s| format!("SPI {s}; use 256..=4294967295 (0 and 1-255 are reserved, RFC 4303 2.1)"),
        ) as u32;
        spis.push(spi);
        if let (Some(node), Some(endpoint)) = (n, endpoint) {
            peers.push(Peer {
                node,
                endpoint,
                port: if udp { ESP_PORT } else { 0 },
                addresses,
                allowed_ips,
                private_key: None,
                implementation: Implementation::Tunbench,
                at: eat,
            });
        }
    }
    if spis.len() == 2 && spis[0] == spis[1] {
        p.push(Problem::new(
            &at.key("ends").index(1).key("spi"),
            "both ends receive on the same SPI; give each its own",
        ));
    }
    if p.len() > before {
        return None;
    }
    let outer_v6 = peers.first().is_some_and(|x: &Peer| x.endpoint.is_ipv6());
    let enc = Encapsulation::Esp { udp };
    let default_mtu = enc.max_inner(outer_v6, 1500) as i64;
    let mtu = int_in(e.mtu, 1280..=9000, default_mtu, &at.key("mtu"), p, |m| {
        format!(
            "inner MTU {m}; use 1280..=9000 (default {default_mtu}, what fits a 1500-byte underlay)"
        )
    }) as u32;
    Some(EspTunnel {
        overlay: Wireguard {
            mtu,
            keepalive: None,
            preshared: Preshared::None,
            queues,
            hub: None,
            peers,
        },
        udp,
        window,
        spis,
    })
}
