//! `[tunnels.NAME] kind = "dslite"`: an RFC 6333 softwire, IPv4 in IPv6
//! from each B4 to one AFTR with its NAT44 pool, as written (raw), resolved
//! and checked.

use super::ends::NodeLookup;
use super::{Datapath, Tunnel};
use crate::topology::kernel::{KernelFacts, SEG6};
use crate::topology::resolved::{NodeKind, Topology};
use crate::topology::{KeyPath, Problem, int_in};
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
    pub pool: Option<crate::topology::raw::OneOrMany>,
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

/// A softwire's settings: its endpoints (each AFTR and B4 on a node of the
/// lab, the AFTR possibly external), the inner MTU and the NAT44 pool.
pub(super) fn resolve(
    d: &RawDslite,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    external: &dyn Fn(usize) -> bool,
    kernel: KernelFacts,
    p: &mut Vec<Problem>,
) -> Option<Dslite> {
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
    let ends = EndLookup {
        default_dp,
        node,
        external,
        kernel,
    };
    let aftr = aftr(&d.aftr, &ends, &at.key("aftr"), p);
    let b4s = b4s(&d.b4, &ends, &at.key("b4"), p);
    if p.len() > before {
        return None;
    }
    let mss = if d.mss_clamp.unwrap_or(true) {
        Some((mtu - 40) as u16)
    } else {
        None
    };
    Some(Dslite {
        mtu,
        mss,
        queues,
        aftr: aftr?,
        b4s,
    })
}

/// What both kinds of softwire end are resolved against: the tunnel's
/// datapath, the lab's nodes and the kernel.
struct EndLookup<'a> {
    /// The tunnel's own `datapath`, which an end may override.
    default_dp: SoftwireChoice,
    node: &'a NodeLookup<'a>,
    external: &'a dyn Fn(usize) -> bool,
    kernel: KernelFacts,
}

/// The AFTR: its node and IPv6 endpoint, NAT44 pool, datapath and NAT
/// limits. None: its node or address is unusable.
fn aftr(a: &RawAftr, ends: &EndLookup<'_>, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Aftr> {
    let anode = (ends.node)(&a.node, &at.key("node"), p);
    let address = ipv6(&a.address, &at.key("address"), p);
    let is_external = anode.is_some_and(ends.external);
    if is_external {
        external_aftr_keys(a, at, p);
    }
    let pool = pool(a, anode.is_some() && !is_external, at, p);
    let (datapath, auto) = SoftwireChoice::read(
        a.datapath.as_deref(),
        ends.default_dp.clone(),
        &at.key("datapath"),
        p,
    )
    // An external AFTR is the device's own: nothing of this
    // kernel's is asked of it.
    .settle(
        if is_external {
            KernelFacts::FULL
        } else {
            ends.kernel
        },
        p,
    );
    use crate::codec::dslite::{DEFAULT_MAX_MAPPINGS, DEFAULT_MAX_MAPPINGS_PER_B4};
    let per_b4_default = DEFAULT_MAX_MAPPINGS_PER_B4 as i64;
    // No more than the whole table.
    let per_b4_max = DEFAULT_MAX_MAPPINGS as i64;
    let max_mappings_per_b4 = int_in(
        a.max_mappings_per_b4,
        1..=per_b4_max,
        per_b4_default,
        &at.key("max_mappings_per_b4"),
        p,
        |m| format!("{m} NAT mappings per B4; use 1..={per_b4_max} (default {per_b4_default})"),
    ) as u32;
    Some(Aftr {
        node: anode?,
        address: address?,
        pool,
        external: is_external,
        datapath,
        auto,
        max_mappings_per_b4,
        at: at.clone(),
    })
}

/// The AFTR's NAT44 pool; `required` for an AFTR tunbench builds.
fn pool(a: &RawAftr, required: bool, at: &KeyPath, p: &mut Vec<Problem>) -> Vec<Ipv4Network> {
    match &a.pool {
        None if required => {
            p.push(Problem::new(
                at,
                "an AFTR tunbench builds needs its NAT44 pool: pool = [\"198.18.21.1\"] (addresses or prefixes the rest of the lab routes to it)",
            ));
            Vec::new()
        }
        None => Vec::new(),
        Some(list) if list.0.is_empty() => {
            p.push(Problem::new(
                &at.key("pool"),
                "the NAT44 pool is empty; give at least one IPv4 address or prefix",
            ));
            Vec::new()
        }
        Some(list) => list
            .0
            .iter()
            .enumerate()
            .filter_map(|(i, s)| ipv4_prefix(s, &at.key("pool").index(i), p))
            .collect(),
    }
}

/// Every B4 (`b4 = { ... }` or `[[tunnels.X.b4]]`); one whose node or
/// address is unusable is left out.
fn b4s(raw: &RawB4s, ends: &EndLookup<'_>, at: &KeyPath, p: &mut Vec<Problem>) -> Vec<B4> {
    let list = raw.list();
    if list.is_empty() {
        p.push(Problem::new(at, "a softwire needs at least one B4"));
    }
    let mut b4s = Vec::new();
    for (i, b) in list.iter().enumerate() {
        let bat = match raw {
            RawB4s::One(_) => at.clone(),
            RawB4s::Many(_) => at.index(i),
        };
        let bnode = (ends.node)(&b.node, &bat.key("node"), p);
        if bnode.is_some_and(ends.external) {
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
            ends.default_dp.clone(),
            &bat.key("datapath"),
            p,
        );
        let kernel_at = match &choice {
            SoftwireChoice::Kernel(at) => Some(at.clone()),
            _ => None,
        };
        let (datapath, auto) = choice.settle(ends.kernel, p);
        if let (Some(node), Some(address)) = (bnode, baddr) {
            b4s.push(B4 {
                node,
                address,
                prefixes,
                routes,
                datapath,
                auto,
                kernel_at,
                at: bat,
            });
        }
    }
    b4s
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
                            "datapath = \"kernel\" needs the kernel's softwire, and {}",
                            SEG6.refusal(
                                "use \"userspace\" (tunbench's own softwire) or \"auto\" (the kernel's where it can)"
                            )
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

/// What the lab's softwires have used so far: one endpoint per node, each
/// B4 address once.
#[derive(Default)]
pub(super) struct Softwires<'t> {
    /// Node index -> the tunnel and key path of its endpoint.
    endpoints: BTreeMap<usize, (&'t str, &'t KeyPath)>,
    b4_addresses: BTreeMap<Ipv6Addr, &'t KeyPath>,
}

impl<'t> Softwires<'t> {
    /// Checks of softwire `tun` that need the whole topology.
    pub(super) fn validate(
        &mut self,
        t: &'t Topology,
        tun: &'t Tunnel,
        d: &'t Dslite,
        p: &mut Vec<Problem>,
    ) {
        let mut ends = vec![End {
            node: d.aftr.node,
            address: d.aftr.address,
            at: &d.aftr.at,
            role: "AFTR",
            // Several softwires may end at one AFTR outside the lab (an ISP's
            // serves many customers): nothing is built there to collide with.
            built: !d.aftr.external,
        }];
        for b in &d.b4s {
            ends.push(End {
                node: b.node,
                address: b.address,
                at: &b.at,
                role: "B4",
                built: true,
            });
            if let Some(prev) = self.b4_addresses.insert(b.address, &b.at) {
                p.push(Problem::new(
                    &b.at.key("address"),
                    format!("{} is already the address of the B4 at {prev}", b.address),
                ));
            }
        }
        for end in ends {
            self.endpoint(t, &tun.name, end, p);
        }
        pool_not_own(t, d, p);
        if d.aftr.datapath == Datapath::Kernel {
            // The kernel AFTR marks each softwire's packets with its index + 1.
            if d.b4s.len() > 1000 {
                p.push(Problem::new(&tun.at.key("b4"), "at most 1000 B4s per AFTR"));
            }
        }
    }

    /// One end: on a host or router, the only endpoint tunbench builds
    /// there, and holding its address.
    fn endpoint(&mut self, t: &Topology, tunnel: &'t str, end: End<'t>, p: &mut Vec<Problem>) {
        let End {
            node,
            address: addr,
            at,
            role,
            built,
        } = end;
        let n = &t.nodes[node];
        if n.kind == NodeKind::Switch {
            p.push(Problem::new(
                &at.key("node"),
                format!(
                    "\"{}\" is a switch; a softwire {role} is a router or host",
                    n.name
                ),
            ));
            return;
        }
        // tunbench builds one endpoint per node.
        if built {
            if let Some((other, _)) = self.endpoints.insert(node, (tunnel, at)) {
                p.push(Problem::new(
                    &at.key("node"),
                    format!(
                        "node \"{}\" is already an endpoint of tunnel \"{other}\"; one softwire endpoint per node",
                        n.name
                    ),
                ));
            }
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
}

/// One end of a softwire as the whole-topology checks see it.
struct End<'t> {
    node: usize,
    address: Ipv6Addr,
    at: &'t KeyPath,
    /// "AFTR" or "B4".
    role: &'static str,
    /// Whether tunbench builds it (not an external AFTR).
    built: bool,
}

/// A userspace AFTR's pool is routed to it, so it cannot hold the AFTR's
/// own addresses.
fn pool_not_own(t: &Topology, d: &Dslite, p: &mut Vec<Problem>) {
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
}
