//! `[tunnels.NAME] kind = "esp"`: an IPsec tunnel-mode ESP tunnel between two
//! nodes, keyed statically (no IKE): AES-GCM-128, in UDP 4500 (RFC 3948) or
//! raw protocol 50. Its two ends are described like WireGuard peers (node,
//! underlay endpoint, inner addresses, networks behind), so the plan, the
//! routing model and the reports treat both alike.

use super::ends::{NodeLookup, RawEnd, two_ends};
use super::keys::{ESP_PORT, Sas, sa_keys, sa_settings, spis};
use super::overlay::{Overlay, point_to_point};
use crate::codec::overhead::Encapsulation;
use crate::topology::{KeyPath, Problem};
use serde::Deserialize;

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

#[derive(Debug, Clone, serde::Serialize)]
pub struct EspTunnel {
    /// The two ends, as peers of an overlay.
    pub overlay: Overlay,
    pub sas: Sas,
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
    node: &NodeLookup<'_>,
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
    let overlay = point_to_point(peers, Encapsulation::Esp { udp }, e.mtu, e.queues, at, p);
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
