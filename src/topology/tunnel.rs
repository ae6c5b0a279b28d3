//! `[tunnels.NAME]`: tunnels between lab nodes, as written (raw), resolved, and
//! checked: `dslite` (RFC 6333 softwires), `wireguard`, `esp` and `ikev2`;
//! each kind is one variant of `RawTunnel` and of `TunnelKind`.

use super::kernel::KernelFacts;
use super::resolved::{NodeKind, Topology};
use super::{KeyPath, Problem, int_in, valid_name};
use ipnetwork::{IpNetwork, Ipv4Network};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The inner MTU of a softwire when the file does not say: the Japanese IPoE
/// DS-Lite practice (1500-byte underlay minus the 40-byte IPv6 header).
pub const DSLITE_DEFAULT_MTU: u32 = 1460;
/// RFC 6333 5.7 / RFC 7335: the well-known softwire addresses.
pub const AFTR_SOFTWIRE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 1);
pub const B4_SOFTWIRE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 2);
/// Bytes a softwire adds to each packet: the outer IPv6 header.
pub const DSLITE_OVERHEAD: u32 = 40;

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RawTunnel {
    Dslite(RawDslite),
    Wireguard(super::wireguard::RawWireguard),
    Esp(super::esp::RawEsp),
    L2tp(super::l2tp::RawL2tp),
    Ikev2(super::ikev2::RawIkev2),
}

pub const KNOWN_KINDS: &str = "\"dslite\", \"wireguard\", \"esp\", \"l2tp\", \"ikev2\"";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDslite {
    #[serde(default)]
    pub description: Option<String>,
    /// "auto" (the default: the kernel's softwire where the kernel has SRv6
    /// lightweight tunnels, tunbench's own otherwise), "kernel" or "userspace",
    /// for every endpoint that does not say.
    #[serde(default)]
    pub datapath: Option<String>,
    /// The inner (IPv4) MTU of the softwire.
    #[serde(default)]
    pub mtu: Option<i64>,
    /// Clamp the TCP MSS of SYNs through the B4 to mtu - 40 (default true).
    #[serde(default)]
    pub mss_clamp: Option<bool>,
    /// Worker queues of a userspace endpoint (default 1).
    #[serde(default)]
    pub queues: Option<i64>,
    pub aftr: RawAftr,
    pub b4: RawB4s,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAftr {
    pub node: String,
    /// The AFTR's IPv6 tunnel endpoint: an address of the node.
    pub address: String,
    /// The NAT44 pool: addresses or prefixes routed to the AFTR (required for
    /// an AFTR tunbench builds; optional for an external one, whose NAT is its
    /// own business).
    #[serde(default)]
    pub pool: Option<super::raw::OneOrMany>,
    #[serde(default)]
    pub datapath: Option<String>,
    /// NAT mappings one B4 may hold at once in the userspace AFTR (RFC 6888
    /// REQ-4), default 4096.
    #[serde(default)]
    pub max_mappings_per_b4: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawB4 {
    pub node: String,
    /// The B4's IPv6 tunnel endpoint: an address of the node.
    pub address: String,
    /// IPv4 prefixes behind the B4 that the AFTR accepts as inner sources
    /// (192.0.0.2 always).
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// IPv4 destinations the B4 sends into the softwire (default: 0.0.0.0/0).
    #[serde(default)]
    pub routes: Option<Vec<String>>,
    #[serde(default)]
    pub datapath: Option<String>,
}

/// `b4 = { ... }` or `[[tunnels.X.b4]]`.
#[derive(Debug)]
pub enum RawB4s {
    One(RawB4),
    Many(Vec<RawB4>),
}

// By hand rather than `untagged`: a typo inside a B4 then gets serde's own
// message ("unknown field `prefix`") instead of "did not match any variant".
impl<'de> Deserialize<'de> for RawB4s {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawB4s;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a B4 table { node = ..., address = ... } or an array of them")
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawB4s, M::Error> {
                RawB4::deserialize(de::value::MapAccessDeserializer::new(m)).map(RawB4s::One)
            }
            fn visit_seq<S: SeqAccess<'de>>(self, s: S) -> Result<RawB4s, S::Error> {
                Vec::<RawB4>::deserialize(de::value::SeqAccessDeserializer::new(s))
                    .map(RawB4s::Many)
            }
        }
        d.deserialize_any(V)
    }
}

impl RawB4s {
    fn list(&self) -> Vec<&RawB4> {
        match self {
            RawB4s::One(b) => vec![b],
            RawB4s::Many(v) => v.iter().collect(),
        }
    }
}

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
    Wireguard(super::wireguard::Wireguard),
    Esp(super::esp::EspTunnel),
    L2tp(super::l2tp::L2tpTunnel),
    Ikev2(super::ikev2::Ikev2Tunnel),
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Dslite {
    /// Inner IPv4 MTU.
    pub mtu: u32,
    /// The MSS that SYNs through the B4 are clamped to, if any.
    pub mss: Option<u16>,
    pub queues: u32,
    pub aftr: Aftr,
    pub b4s: Vec<B4>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Aftr {
    pub node: usize,
    pub address: Ipv6Addr,
    /// Empty only for an external AFTR whose pool the file does not give.
    pub pool: Vec<Ipv4Network>,
    /// On a node tunbench does not build (an ISP's AFTR): nothing is made for
    /// it; the B4s encapsulate to `address`.
    pub external: bool,
    pub datapath: Datapath,
    /// `datapath` was "auto" (said or by default) and this is what it took.
    pub auto: bool,
    /// NAT mappings one B4 may hold at once (userspace AFTR).
    pub max_mappings_per_b4: u32,
    #[serde(skip)]
    pub at: KeyPath,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct B4 {
    pub node: usize,
    pub address: Ipv6Addr,
    pub prefixes: Vec<Ipv4Network>,
    pub routes: Vec<Ipv4Network>,
    pub datapath: Datapath,
    /// `datapath` was "auto" (said or by default) and this is what it took.
    pub auto: bool,
    /// Where the file says datapath = "kernel" for this B4, if it does.
    #[serde(skip)]
    pub kernel_at: Option<KeyPath>,
    #[serde(skip)]
    pub at: KeyPath,
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
    /// The WireGuard peer at this index of `Wireguard::peers`.
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
                "DS-Lite tunnel {} runs in tunbench's userspace datapath: its datapath is \"auto\", and this kernel lacks {} for the kernel's",
                self.name,
                super::kernel::SEG6_NEEDS
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
            TunnelKind::Ikev2(_) => return super::ikev2::LIBIPSEC_TUN.to_string(),
        };
        let mut s = format!("{prefix}-{}", self.name);
        s.truncate(15);
        s
    }

    /// The peers of a point-to-point kind (WireGuard, ESP): their nodes,
    /// underlay endpoints, inner addresses and the networks behind them.
    pub fn overlay(&self) -> Option<&super::wireguard::Wireguard> {
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
        match rt {
            RawTunnel::Esp(e) => {
                if let Some(e) = super::esp::resolve(name, e, &at, &node, p) {
                    out.push(Tunnel {
                        name: name.clone(),
                        description: description(rt),
                        kind: TunnelKind::Esp(e),
                        at,
                    });
                }
            }
            RawTunnel::L2tp(l) => {
                if let Some(l) = super::l2tp::resolve(name, l, &at, &node, p) {
                    out.push(Tunnel {
                        name: name.clone(),
                        description: description(rt),
                        kind: TunnelKind::L2tp(l),
                        at,
                    });
                }
            }
            RawTunnel::Ikev2(e) => {
                if let Some(e) = super::ikev2::resolve(name, e, &at, &node, p) {
                    out.push(Tunnel {
                        name: name.clone(),
                        description: description(rt),
                        kind: TunnelKind::Ikev2(e),
                        at,
                    });
                }
            }
            RawTunnel::Wireguard(w) => {
                if let Some(w) = super::wireguard::resolve(name, w, &at, &node, &external, p) {
                    out.push(Tunnel {
                        name: name.clone(),
                        description: description(rt),
                        kind: TunnelKind::Wireguard(w),
                        at,
                    });
                }
            }
            RawTunnel::Dslite(d) => {
                let before = p.len();
                let default_dp = SoftwireChoice::read(
                    d.datapath.as_deref(),
                    SoftwireChoice::Auto,
                    &at.key("datapath"),
                    p,
                );
                let mtu = int_in(
                    d.mtu,
                    576..=9000,
                    DSLITE_DEFAULT_MTU as i64,
                    &at.key("mtu"),
                    p,
                    |m| format!("inner MTU {m}; use 576..=9000 (default {DSLITE_DEFAULT_MTU})"),
                ) as u32;
                let queues = int_in(d.queues, 1..=16, 1, &at.key("queues"), p, |q| {
                    format!("{q} queues; use 1..=16")
                }) as u32;
                let aat = at.key("aftr");
                let anode = node(&d.aftr.node, &aat.key("node"), p);
                let aaddr = ipv6(&d.aftr.address, &aat.key("address"), p);
                let aftr_external = anode.is_some_and(&external);
                if aftr_external {
                    external_aftr_keys(&d.aftr, &aat, p);
                }
                let mut pool = Vec::new();
                match &d.aftr.pool {
                    None if anode.is_some() && !aftr_external => p.push(Problem::new(
                        &aat,
                        "an AFTR tunbench builds needs its NAT44 pool: pool = [\"198.18.21.1\"] (addresses or prefixes the rest of the lab routes to it)",
                    )),
                    None => {}
                    Some(list) if list.0.is_empty() => p.push(Problem::new(
                        &aat.key("pool"),
                        "the NAT44 pool is empty; give at least one IPv4 address or prefix",
                    )),
                    Some(list) => {
                        for (i, s) in list.0.iter().enumerate() {
                            if let Some(n) = ipv4_prefix(s, &aat.key("pool").index(i), p) {
                                pool.push(n);
                            }
                        }
                    }
                }
                let (adp, aauto) = SoftwireChoice::read(
                    d.aftr.datapath.as_deref(),
                    default_dp.clone(),
                    &aat.key("datapath"),
                    p,
                )
                // An external AFTR is the device's own: nothing of this
                // kernel's is asked of it.
                .settle(
                    if aftr_external {
                        KernelFacts::FULL
                    } else {
                        kernel
                    },
                    p,
                );
                use crate::codec::dslite::{DEFAULT_MAX_MAPPINGS, DEFAULT_MAX_MAPPINGS_PER_B4};
                let per_b4_default = DEFAULT_MAX_MAPPINGS_PER_B4 as i64;
                // No more than the whole table.
                let per_b4_max = DEFAULT_MAX_MAPPINGS as i64;
                let max_mappings_per_b4 = int_in(
                    d.aftr.max_mappings_per_b4,
                    1..=per_b4_max,
                    per_b4_default,
                    &aat.key("max_mappings_per_b4"),
                    p,
                    |m| {
                        format!(
                            "{m} NAT mappings per B4; use 1..={per_b4_max} (default {per_b4_default})"
                        )
                    },
                ) as u32;
                let mut b4s = Vec::new();
                let list = d.b4.list();
                if list.is_empty() {
                    p.push(Problem::new(
                        &at.key("b4"),
                        "a softwire needs at least one B4",
                    ));
                }
                for (i, b) in list.iter().enumerate() {
                    let bat = match &d.b4 {
                        RawB4s::One(_) => at.key("b4"),
                        RawB4s::Many(_) => at.key("b4").index(i),
                    };
                    let bnode = node(&b.node, &bat.key("node"), p);
                    if bnode.is_some_and(&external) {
                        p.push(Problem::new(
                            &bat.key("node"),
                            format!(
                                "\"{}\" is external: a B4 tunbench does not build is not supported; the B4 is a host or router of the lab (the AFTR may be external)",
                                b.node
                            ),
                        ));
                    }
                    let baddr = ipv6(&b.address, &bat.key("address"), p);
                    let prefixes: Vec<Ipv4Network> = b
                        .prefixes
                        .iter()
                        .enumerate()
                        .filter_map(|(k, s)| ipv4_prefix(s, &bat.key("prefixes").index(k), p))
                        .collect();
                    let routes: Vec<Ipv4Network> = match &b.routes {
                        None => vec![Ipv4Network::new(Ipv4Addr::UNSPECIFIED, 0).expect("/0")],
                        Some(r) => r
                            .iter()
                            .enumerate()
                            .filter_map(|(k, s)| ipv4_prefix(s, &bat.key("routes").index(k), p))
                            .collect(),
                    };
                    let choice = SoftwireChoice::read(
                        b.datapath.as_deref(),
                        default_dp.clone(),
                        &bat.key("datapath"),
                        p,
                    );
                    let kernel_at = match &choice {
                        SoftwireChoice::Kernel(at) => Some(at.clone()),
                        _ => None,
                    };
                    let (bdp, bauto) = choice.settle(kernel, p);
                    if let (Some(node), Some(address)) = (bnode, baddr) {
                        b4s.push(B4 {
                            node,
                            address,
                            prefixes,
                            routes,
                            datapath: bdp,
                            auto: bauto,
                            kernel_at,
                            at: bat,
                        });
                    }
                }
                if p.len() > before {
                    continue;
                }
                let (Some(anode), Some(aaddr)) = (anode, aaddr) else {
                    continue;
                };
                let mss = if d.mss_clamp.unwrap_or(true) {
                    Some((mtu - 40) as u16)
                } else {
                    None
                };
                out.push(Tunnel {
                    name: name.clone(),
                    description: d.description.clone(),
                    kind: TunnelKind::Dslite(Dslite {
                        mtu,
                        mss,
                        queues,
                        aftr: Aftr {
                            node: anode,
                            address: aaddr,
                            pool,
                            external: aftr_external,
                            datapath: adp,
                            auto: aauto,
                            max_mappings_per_b4,
                            at: aat,
                        },
                        b4s,
                    }),
                    at,
                });
            }
        }
    }
    out
}

/// An AFTR on a device tunbench does not build (an ISP's): its datapath and
/// NAT limits are the device's own.
fn external_aftr_keys(a: &RawAftr, at: &KeyPath, p: &mut Vec<Problem>) {
    let node = &a.node;
    if let Some(d) = &a.datapath {
        p.push(Problem::new(
            &at.key("datapath"),
            format!(
                "\"{node}\" is external and runs its own AFTR; datapath = \"{d}\" is for endpoints tunbench builds (set it on the B4)"
            ),
        ));
    }
    if a.max_mappings_per_b4.is_some() {
        p.push(Problem::new(
            &at.key("max_mappings_per_b4"),
            format!(
                "\"{node}\" is external: its NAT44 limits are the device's own; max_mappings_per_b4 is for a userspace AFTR tunbench builds"
            ),
        ));
    }
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

/// A DS-Lite endpoint's `datapath` as the file gives it, with where it says so
/// (an endpoint's own key, or the tunnel's it inherits).
#[derive(Debug, Clone)]
enum SoftwireChoice {
    Kernel(KeyPath),
    Userspace,
    /// The kernel's where the kernel can, tunbench's own otherwise (the default).
    Auto,
}

impl SoftwireChoice {
    fn read(s: Option<&str>, inherited: Self, at: &KeyPath, p: &mut Vec<Problem>) -> Self {
        match s {
            None => inherited,
            Some("kernel") => SoftwireChoice::Kernel(at.clone()),
            Some("userspace") => SoftwireChoice::Userspace,
            Some("auto") => SoftwireChoice::Auto,
            Some(o) => {
                p.push(Problem::new(
                    at,
                    format!("datapath \"{o}\" is not one of \"auto\", \"kernel\", \"userspace\""),
                ));
                inherited
            }
        }
    }

    /// The datapath on this kernel, and whether "auto" chose it. A kernel
    /// datapath the kernel cannot make is refused where the file asks for it.
    fn settle(self, k: KernelFacts, p: &mut Vec<Problem>) -> (Datapath, bool) {
        match self {
            SoftwireChoice::Userspace => (Datapath::Userspace, false),
            SoftwireChoice::Auto if k.seg6_lwtunnel => (Datapath::Kernel, true),
            SoftwireChoice::Auto => (Datapath::Userspace, true),
            SoftwireChoice::Kernel(at) => {
                if !k.seg6_lwtunnel {
                    p.push(Problem::new(
                        &at,
                        format!(
                            "datapath = \"kernel\" needs {}, which this kernel lacks; use \"userspace\" (tunbench's own softwire) or \"auto\" (the kernel's where it can)",
                            super::kernel::SEG6_NEEDS
                        ),
                    ));
                }
                (Datapath::Kernel, false)
            }
        }
    }
}

fn ipv6(s: &str, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Ipv6Addr> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V6(a)) => Some(a),
        Ok(IpAddr::V4(_)) => {
            p.push(Problem::new(
                at,
                format!("{s} is IPv4; a softwire endpoint is an IPv6 address"),
            ));
            None
        }
        Err(_) => {
            p.push(Problem::new(
                at,
                format!(
                    "\"{s}\" is not an IPv6 address (no prefix length: the endpoint address itself)"
                ),
            ));
            None
        }
    }
}

/// An IPv4 prefix, or a bare address as a /32.
fn ipv4_prefix(s: &str, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Ipv4Network> {
    let parsed = if s.contains('/') {
        s.parse::<IpNetwork>().ok()
    } else {
        s.parse::<IpAddr>()
            .ok()
            .and_then(|a| IpNetwork::new(a, if a.is_ipv4() { 32 } else { 128 }).ok())
    };
    match parsed {
        Some(IpNetwork::V4(n)) if n.network() == n.ip() => Some(n),
        Some(IpNetwork::V4(n)) => {
            p.push(Problem::new(
                at,
                format!(
                    "{s} has host bits set; did you mean {}/{}?",
                    n.network(),
                    n.prefix()
                ),
            ));
            None
        }
        Some(IpNetwork::V6(_)) => {
            p.push(Problem::new(
                at,
                format!("{s} is IPv6; an IPv4 prefix is needed here"),
            ));
            None
        }
        None => {
            p.push(Problem::new(
                at,
                format!("\"{s}\" is not an IPv4 address or prefix"),
            ));
            None
        }
    }
}

/// Checks that need the whole topology.
pub fn validate(t: &Topology, p: &mut Vec<Problem>) {
    // node index -> (tunnel, role) of every endpoint, for one-per-node checks.
    let mut seen: BTreeMap<usize, (&str, &KeyPath)> = BTreeMap::new();
    let mut b4_addresses: BTreeMap<Ipv6Addr, &KeyPath> = BTreeMap::new();
    for tun in &t.tunnels {
        let d = match &tun.kind {
            TunnelKind::Dslite(d) => d,
            TunnelKind::Wireguard(w) => {
                super::wireguard::validate(t, &tun.name, w, &tun.tun_name(), p);
                continue;
            }
            TunnelKind::Esp(_) | TunnelKind::L2tp(_) => {
                let o = tun.overlay().expect("an overlay");
                super::wireguard::validate(t, &tun.name, o, &tun.tun_name(), p);
                continue;
            }
            TunnelKind::Ikev2(e) => {
                super::ikev2::validate(t, tun, e, p);
                continue;
            }
        };
        let mut ends: Vec<(usize, Ipv6Addr, &KeyPath, &str)> =
            vec![(d.aftr.node, d.aftr.address, &d.aftr.at, "AFTR")];
        for b in &d.b4s {
            ends.push((b.node, b.address, &b.at, "B4"));
            if let Some(prev) = b4_addresses.insert(b.address, &b.at) {
                p.push(Problem::new(
                    &b.at.key("address"),
                    format!("{} is already the address of the B4 at {prev}", b.address),
                ));
            }
        }
        for (node, addr, at, role) in ends {
            let n = &t.nodes[node];
            if n.kind == NodeKind::Switch {
                p.push(Problem::new(
                    &at.key("node"),
                    format!(
                        "\"{}\" is a switch; a softwire {role} is a router or host",
                        n.name
                    ),
                ));
                continue;
            }
            // Several softwires may end at one AFTR outside the lab (an ISP's
            // serves many customers); tunbench builds one endpoint per node.
            let outside = role == "AFTR" && d.aftr.external;
            if outside {
                // Nothing to build, so nothing to collide with.
            } else if let Some((other, _)) = seen.insert(node, (&tun.name, at)) {
                p.push(Problem::new(
                    &at.key("node"),
                    format!(
                        "node \"{}\" is already an endpoint of tunnel \"{other}\"; one softwire endpoint per node",
                        n.name
                    ),
                ));
            }
            if !t
                .node_addresses(node)
                .iter()
                .any(|(_, a)| a.ip() == IpAddr::V6(addr))
            {
                p.push(Problem::new(
                    &at.key("address"),
                    format!(
                        "{addr} is not an address of node \"{}\"; the {role}'s endpoint must be one of its IPv6 addresses{}",
                        n.name,
                        if n.kind == NodeKind::External {
                            format!(" (for a device outside the lab, give it in nodes.{}.addresses, e.g. \"{addr}/128\")", n.name)
                        } else {
                            String::new()
                        }
                    ),
                ));
            }
        }
        let an = d.aftr.node;
        for (i, pool) in d.aftr.pool.iter().enumerate() {
            if let Some((_, a)) = t
                .node_addresses(an)
                .iter()
                .find(|(_, a)| matches!(a.ip(), IpAddr::V4(v) if pool.contains(v)))
            {
                if d.aftr.datapath == Datapath::Userspace {
                    p.push(Problem::new(
                        &d.aftr.at.key("pool").index(i),
                        format!("{pool} holds {}, an address of the AFTR itself; a userspace AFTR needs a pool routed to it, not one of its own addresses", a.ip()),
                    ));
                }
            }
        }
        if d.aftr.datapath == Datapath::Kernel {
            // The kernel AFTR marks each softwire's packets with its index + 1.
            if d.b4s.len() > 1000 {
                p.push(Problem::new(&tun.at.key("b4"), "at most 1000 B4s per AFTR"));
            }
        }
    }
}
