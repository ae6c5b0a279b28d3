//! `[tunnels.NAME]`: tunnels between lab nodes, as written, resolved, checked.
//! One file per kind (dslite, wireguard, esp, l2tp, ikev2), using no other
//! kind: what kinds share is in `ends`, `overlay`, `keys`, `implementation`.

pub mod dslite;
pub mod ends;
pub mod esp;
pub mod ikev2;
pub mod implementation;
pub mod keys;
pub mod l2tp;
pub mod overlay;
pub mod termination;
pub mod wireguard;

use super::kernel::KernelFacts;
use super::resolved::Topology;
use super::{KeyPath, Problem, valid_name};
use dslite::{Dslite, RawDslite};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RawTunnel {
    Dslite(RawDslite),
    Wireguard(wireguard::RawWireguard),
    Esp(esp::RawEsp),
    L2tp(l2tp::RawL2tp),
    Ikev2(ikev2::RawIkev2),
}

pub const KNOWN_KINDS: &str = "\"dslite\", \"wireguard\", \"esp\", \"l2tp\", \"ikev2\"";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Datapath {
    /// The kernel forwards (DS-Lite: seg6 encap.red + seg6local End.DX4, nftables;
    /// a router: Linux forwarding).
    Kernel,
    /// tunbench's own process with a TUN in the endpoint's (router's) namespace.
    Userspace,
}

impl Datapath {
    pub fn as_str(self) -> &'static str {
        match self {
            Datapath::Kernel => "kernel",
            Datapath::Userspace => "userspace",
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Tunnel {
    pub name: String,
    pub description: Option<String>,
    pub kind: TunnelKind,
    #[serde(skip)]
    pub at: KeyPath,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum TunnelKind {
    Dslite(Dslite),
    Wireguard(overlay::Overlay),
    Esp(esp::EspTunnel),
    L2tp(l2tp::L2tpTunnel),
    Ikev2(ikev2::Ikev2Tunnel),
}

/// A tunnel's per-packet cost and what fits through it, for status and
/// reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sizes {
    pub encapsulation: &'static str,
    /// The underlay family: "IPv4" or "IPv6".
    pub outer: &'static str,
    pub overhead_min: usize,
    pub overhead_max: usize,
    /// "60" or "62-65".
    pub overhead: String,
    /// The same over the other underlay family, where the kind has one.
    pub other_outer: Option<String>,
    pub breakdown: String,
    pub inner_mtu: u32,
    pub mss_ipv4: usize,
    pub mss_ipv6: usize,
}

impl Sizes {
    /// One line: "84-87 bytes per packet over IPv4 (outer IP 20 + ...; 104-107
    /// over IPv6); inner MTU 1416, TCP MSS 1376 (IPv4) / 1356 (IPv6)".
    pub fn describe(&self) -> String {
        let other = if self.outer == "IPv4" { "IPv6" } else { "IPv4" };
        let other = match &self.other_outer {
            Some(o) => format!("; {o} over {other}"),
            None => String::new(),
        };
        format!(
            "{} bytes per packet over {} ({}{other}); inner MTU {}, TCP MSS {} (IPv4) / {} (IPv6)",
            self.overhead, self.outer, self.breakdown, self.inner_mtu, self.mss_ipv4, self.mss_ipv6
        )
    }
}

/// One end of a tunnel as the plan and the datapath process see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Aftr,
    /// The B4 at this index of `Dslite::b4s`.
    B4(usize),
    /// The WireGuard peer at this index of `Overlay::peers`.
    Peer(usize),
}

impl Tunnel {
    /// A softwire's endpoints that took tunbench's own datapath because
    /// `datapath = "auto"` found no kernel one: what to tell the user, once.
    pub fn auto_fallback(&self) -> Option<String> {
        let TunnelKind::Dslite(d) = &self.kind else {
            return None;
        };
        let fell = (!d.aftr.external && d.aftr.auto && d.aftr.datapath == Datapath::Userspace)
            || d.b4s
                .iter()
                .any(|b| b.auto && b.datapath == Datapath::Userspace);
        fell.then(|| {
            format!(
                "DS-Lite tunnel {} runs in tunbench's userspace datapath: its datapath is \"auto\", and {}, which the kernel's softwire is made of; {}",
                self.name,
                super::kernel::SEG6.lacking(),
                netns::features::SEE_DOCTOR
            )
        })
    }

    /// The TUN device a userspace endpoint of this tunnel uses (15 bytes at most).
    pub fn tun_name(&self) -> String {
        let prefix = match self.kind {
            TunnelKind::Dslite(_) => "tun",
            TunnelKind::Wireguard(_) => "wg",
            TunnelKind::Esp(_) => "esp",
            TunnelKind::L2tp(_) => "l2tp",
            // charon's kernel-libipsec makes and names it.
            TunnelKind::Ikev2(_) => return ikev2::LIBIPSEC_TUN.to_string(),
        };
        let mut s = format!("{prefix}-{}", self.name);
        s.truncate(15);
        s
    }

    /// The peers of a point-to-point kind (WireGuard, ESP): their nodes,
    /// underlay endpoints, inner addresses and the networks behind them.
    pub fn overlay(&self) -> Option<&overlay::Overlay> {
        match &self.kind {
            TunnelKind::Wireguard(w) => Some(w),
            TunnelKind::Esp(e) => Some(&e.overlay),
            TunnelKind::L2tp(l) => Some(&l.overlay),
            TunnelKind::Ikev2(e) => Some(&e.overlay),
            TunnelKind::Dslite(_) => None,
        }
    }

    /// The device the overlay's inner addresses go on: the tunnel's TUN, or
    /// `lo` where the TUN is not ours to address (IKEv2: libipsec's).
    pub fn inner_device(&self) -> String {
        match self.kind {
            TunnelKind::Ikev2(_) => "lo".to_string(),
            _ => self.tun_name(),
        }
    }

    /// What the tunnel adds to each packet, as far as its size goes.
    pub fn encapsulation(&self) -> crate::codec::overhead::Encapsulation {
        use crate::codec::overhead::Encapsulation;
        match &self.kind {
            TunnelKind::Dslite(_) => Encapsulation::Dslite,
            TunnelKind::Wireguard(_) => Encapsulation::Wireguard,
            TunnelKind::Esp(e) => e.encapsulation(),
            TunnelKind::L2tp(l) => l.encapsulation(),
            TunnelKind::Ikev2(e) => e.encapsulation(),
        }
    }

    /// What a packet through this tunnel costs in bytes, and what fits.
    pub fn sizes(&self) -> Sizes {
        let enc = self.encapsulation();
        let (outer_v6, inner_mtu) = match &self.kind {
            TunnelKind::Dslite(d) => (true, d.mtu),
            _ => {
                let o = self.overlay().expect("an overlay");
                (o.outer_v6(), o.mtu)
            }
        };
        let (min, max) = enc.overhead_range(outer_v6);
        Sizes {
            encapsulation: enc.name(),
            outer: if outer_v6 { "IPv6" } else { "IPv4" },
            overhead_min: min,
            overhead_max: max,
            overhead: enc.overhead_text(outer_v6),
            // A softwire's underlay is IPv6 by definition.
            other_outer: (!matches!(self.kind, TunnelKind::Dslite(_)))
                .then(|| enc.overhead_text(!outer_v6)),
            breakdown: enc.breakdown(outer_v6),
            inner_mtu,
            mss_ipv4: crate::codec::overhead::mss(inner_mtu as usize, false),
            mss_ipv6: crate::codec::overhead::mss(inner_mtu as usize, true),
        }
    }

    /// Every endpoint the lab builds: (role, node index, datapath). An
    /// endpoint on an external node (a WireGuard peer, an AFTR) is the
    /// device's own, so it is not one of them.
    pub fn endpoints(&self) -> Vec<(Role, usize, Datapath)> {
        match &self.kind {
            TunnelKind::Dslite(d) => {
                let mut v = Vec::new();
                if !d.aftr.external {
                    v.push((Role::Aftr, d.aftr.node, d.aftr.datapath));
                }
                v.extend(
                    d.b4s
                        .iter()
                        .enumerate()
                        .map(|(i, b)| (Role::B4(i), b.node, b.datapath)),
                );
                v
            }
            // Every lab peer is a process: tunbench's datapath, or the one
            // that runs and configures an external implementation (a peer on
            // an external node is the device's own).
            TunnelKind::Wireguard(_)
            | TunnelKind::Esp(_)
            | TunnelKind::L2tp(_)
            | TunnelKind::Ikev2(_) => self
                .overlay()
                .expect("an overlay")
                .peers
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.external)
                .map(|(i, p)| (Role::Peer(i), p.node, Datapath::Userspace))
                .collect(),
        }
    }
}

/// `external(node)`: whether tunbench builds nothing for the node (its
/// endpoints are the device's own).
pub fn resolve(
    raw: &BTreeMap<String, RawTunnel>,
    node_index: impl Fn(&str) -> Option<usize>,
    external: impl Fn(usize) -> bool,
    known_nodes: &str,
    kernel: KernelFacts,
    p: &mut Vec<Problem>,
) -> Vec<Tunnel> {
    let mut out = Vec::new();
    for (name, rt) in raw {
        let at = KeyPath::root().key("tunnels").key(name);
        if !valid_name(name) {
            p.push(Problem::new(&at, format!("tunnel name \"{name}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit")));
        }
        let node = |n: &str, at: &KeyPath, p: &mut Vec<Problem>| {
            let i = node_index(n);
            if i.is_none() {
                p.push(Problem::new(
                    at,
                    format!("node \"{n}\" is not defined; defined nodes: {known_nodes}"),
                ));
            }
            i
        };
        let kind = match rt {
            RawTunnel::Esp(e) => esp::resolve(name, e, &at, &node, p).map(TunnelKind::Esp),
            RawTunnel::L2tp(l) => l2tp::resolve(name, l, &at, &node, p).map(TunnelKind::L2tp),
            RawTunnel::Ikev2(e) => {
                ikev2::resolve(name, e, &at, &node, kernel, p).map(TunnelKind::Ikev2)
            }
            RawTunnel::Wireguard(w) => {
                wireguard::resolve(name, w, &at, &node, &external, kernel, p)
                    .map(TunnelKind::Wireguard)
            }
            RawTunnel::Dslite(d) => {
                dslite::resolve(d, &at, &node, &external, kernel, p).map(TunnelKind::Dslite)
            }
        };
        if let Some(kind) = kind {
            out.push(Tunnel {
                name: name.clone(),
                description: description(rt),
                kind,
                at,
            });
        }
    }
    out
}

fn description(rt: &RawTunnel) -> Option<String> {
    match rt {
        RawTunnel::Dslite(d) => d.description.clone(),
        RawTunnel::Wireguard(w) => w.description.clone(),
        RawTunnel::Esp(e) => e.description.clone(),
        RawTunnel::L2tp(l) => l.description.clone(),
        RawTunnel::Ikev2(e) => e.description.clone(),
    }
}

pub(crate) fn datapath(
    s: Option<&str>,
    default: Datapath,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Datapath {
    match s {
        None => default,
        Some("kernel") => Datapath::Kernel,
        Some("userspace") => Datapath::Userspace,
        Some(o) => {
            p.push(Problem::new(
                at,
                format!("datapath \"{o}\" is not one of \"kernel\", \"userspace\""),
            ));
            default
        }
    }
}

/// Checks that need the whole topology, each kind's own.
pub fn validate(t: &Topology, p: &mut Vec<Problem>) {
    let mut softwires = dslite::Softwires::default();
    for tun in &t.tunnels {
        match &tun.kind {
            TunnelKind::Dslite(d) => softwires.validate(t, tun, d, p),
            TunnelKind::Wireguard(w) => overlay::validate(t, &tun.name, w, &tun.tun_name(), p),
            TunnelKind::Esp(_) | TunnelKind::L2tp(_) => {
                let o = tun.overlay().expect("an overlay");
                overlay::validate(t, &tun.name, o, &tun.tun_name(), p);
            }
            TunnelKind::Ikev2(e) => ikev2::validate(t, tun, e, p),
        }
    }
}
