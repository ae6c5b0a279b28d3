//! `[tunnels.NAME] kind = "l2tp"`: an L2TPv2 session (RFC 2661) between two
//! nodes carrying PPP frames over UDP 1701, with static tunnel and session
//! ids and no control channel or PPP negotiation; with `ipsec = true` the
//! L2TP datagrams travel in ESP transport mode (RFC 3193, L2TP/IPsec) in UDP
//! 4500 or raw. Its ends are described like ESP's.

use super::ends::{NodeLookup, RawEnd, two_ends};
use super::keys::{ESP_PORT, Sas, sa_keys, sa_settings, spis};
use super::overlay::{Overlay, point_to_point};
use crate::codec::overhead::Encapsulation;
use crate::topology::{KeyPath, Problem, int_in};
use crate::wire::l2tp::PORT as L2TP_PORT;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawL2tp {
    #[serde(default)]
    pub description: Option<String>,
    /// Ns/Nr in every data message (default false, as most clients send).
    #[serde(default)]
    pub sequence: Option<bool>,
    /// Protect the L2TP datagrams with ESP transport mode (default false).
    #[serde(default)]
    pub ipsec: Option<bool>,
    /// With ipsec: "udp" (default, port 4500) or "raw" (protocol 50).
    #[serde(default)]
    pub encap: Option<String>,
    /// With ipsec: the anti-replay window (default 64).
    #[serde(default)]
    pub window: Option<i64>,
    #[serde(default)]
    pub mtu: Option<i64>,
    #[serde(default)]
    pub queues: Option<i64>,
    #[serde(default)]
    pub ends: Vec<RawEnd>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct L2tpTunnel {
    pub overlay: Overlay,
    pub sequence: bool,
    /// The (tunnel id, session id) each end receives with.
    pub ids: Vec<(u16, u16)>,
    /// The ESP transport-mode SAs, with ipsec = true.
    pub ipsec: Option<Sas>,
}

impl L2tpTunnel {
    pub fn encapsulation(&self) -> Encapsulation {
        match &self.ipsec {
            None => Encapsulation::L2tp {
                sequence: self.sequence,
            },
            Some(sas) => Encapsulation::L2tpIpsec {
                sequence: self.sequence,
                udp: sas.udp,
            },
        }
    }
}

pub fn resolve(
    name: &str,
    l: &RawL2tp,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    p: &mut Vec<Problem>,
) -> Option<L2tpTunnel> {
    let before = p.len();
    let ipsec = l.ipsec.unwrap_or(false);
    let sequence = l.sequence.unwrap_or(false);
    if !ipsec {
        for (key, given) in [("encap", l.encap.is_some()), ("window", l.window.is_some())] {
            if given {
                p.push(Problem::new(
                    &at.key(key),
                    format!("{key} applies to ESP; set ipsec = true to protect this L2TP tunnel"),
                ));
            }
        }
        for (i, re) in l.ends.iter().enumerate() {
            if re.spi.is_some() {
                p.push(Problem::new(
                    &at.key("ends").index(i).key("spi"),
                    "an SPI applies to ESP; set ipsec = true to protect this L2TP tunnel",
                ));
            }
            if re.sa_key.is_some() {
                p.push(Problem::new(
                    &at.key("ends").index(i).key("sa_key"),
                    "an sa_key applies to ESP; set ipsec = true to protect this L2TP tunnel",
                ));
            }
        }
    }
    let (udp, window) = sa_settings(l.encap.as_deref(), l.window, at, p);
    let port = match (ipsec, udp) {
        (false, _) => L2TP_PORT,
        (true, true) => ESP_PORT,
        (true, false) => 0,
    };
    let peers = two_ends(name, "an L2TP tunnel", &l.ends, port, at, node, p);
    let ids: Vec<(u16, u16)> = l
        .ends
        .iter()
        .enumerate()
        .map(|(i, re)| {
            let eat = at.key("ends").index(i);
            let id = |v: Option<i64>, key: &str, p: &mut Vec<Problem>| {
                int_in(v, 1..=65535, 1 + i as i64, &eat.key(key), p, |x| {
                    format!("{key} {x}; use 1..=65535 (0 is reserved, RFC 2661 3.1)")
                }) as u16
            };
            (
                id(re.tunnel_id, "tunnel_id", p),
                id(re.session_id, "session_id", p),
            )
        })
        .collect();
    let spis = if ipsec {
        spis(&l.ends, at, p)
    } else {
        Vec::new()
    };
    let enc = if ipsec {
        Encapsulation::L2tpIpsec { sequence, udp }
    } else {
        Encapsulation::L2tp { sequence }
    };
    let overlay = point_to_point(peers, enc, l.mtu, l.queues, at, p);
    if p.len() > before {
        return None;
    }
    let keys = if ipsec {
        sa_keys(&l.ends, at, p)
    } else {
        Vec::new()
    };
    let ipsec = ipsec.then_some(Sas {
        udp,
        window,
        spis,
        keys,
    });
    Some(L2tpTunnel {
        overlay,
        sequence,
        ids,
        ipsec,
    })
}
