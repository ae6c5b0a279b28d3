//! The ends of a tunnel as the kinds share them: finding an end's node, its
//! underlay endpoint, inner addresses and the networks behind it; as written
//! (`RawEnd`: ESP, L2TP, IKEv2) and resolved (`Peer`: every overlay's).

use super::implementation::Implementation;
use crate::topology::{KeyPath, Problem};
use ipnetwork::IpNetwork;
use serde::Deserialize;
use std::net::IpAddr;

/// Finds a node by name, or records a problem at the key path.
pub type NodeLookup<'a> = dyn Fn(&str, &KeyPath, &mut Vec<Problem>) -> Option<usize> + 'a;

/// An end of an ESP, L2TP or IKEv2 tunnel, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnd {
    pub node: String,
    pub endpoint: String,
    pub address: crate::topology::raw::OneOrMany,
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

/// One end of an overlay, resolved: a WireGuard peer, or an ESP, L2TP or
/// IKEv2 end.
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

/// The fields a WireGuard peer and an ESP end share: the underlay endpoint,
/// inner addresses (with prefix length) and the networks behind it (`what`
/// names it in messages: "peer", "end").
pub(crate) fn end_fields(
    endpoint: &str,
    address: &crate::topology::raw::OneOrMany,
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

/// The two ends of a point-to-point tunnel (`kind` names it in errors) as
/// overlay peers whose sockets use `port` (0: a raw IP socket).
pub fn two_ends(
    name: &str,
    kind: &str,
    ends: &[RawEnd],
    port: u16,
    at: &KeyPath,
    node: &NodeLookup<'_>,
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
        let (endpoint, addresses, allowed_ips) =
            end_fields(&re.endpoint, &re.address, &re.allowed_ips, "end", &eat, p);
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
