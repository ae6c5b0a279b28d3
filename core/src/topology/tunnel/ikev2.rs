//! `[tunnels.NAME] kind = "ikev2"`: a real IKEv2 negotiation by strongSwan's
//! charon at both ends, with ESP on one of strongSwan's two datapaths:
//! `libipsec` (the default: userspace ESP by kernel-libipsec, always in UDP
//! 4500, on any kernel) or `kernel` (the kernel's xfrm states and policies,
//! installed by kernel-netlink, plain ESP: strongSwan as it is deployed).
//! Its two ends are described like ESP ends (node, underlay endpoint, inner
//! addresses, networks behind), so the plan, the routing model and the reports
//! treat it like the other point-to-point tunnels.
//!
//! The ends authenticate with a pre-shared key or with certificates from a
//! CA made when the lab comes up (`auth = "cert"`).
//!
//! libipsec makes its own TUN (`ipsec0`, MTU 1400) and routes into it from
//! table 220; on the kernel datapath charon routes the remote traffic
//! selectors from table 220 over the underlay, where xfrm policies take them.
//! Either way `up` makes no device: the inner addresses go on the node's `lo`
//! as host addresses (the development kernel has no dummy interfaces).

use super::ends::{NodeLookup, Peer, RawEnd, two_ends};
use super::keys::{ESP_PORT, Preshared};
use super::overlay::{self, Overlay};
use super::{Tunnel, TunnelKind};
use crate::codec::overhead::Encapsulation;
use crate::topology::kernel::{KernelFacts, XFRM};
use crate::topology::resolved::{NodeKind, Topology};
use crate::topology::{KeyPath, Problem, int_in};
use ipnetwork::IpNetwork;
use serde::Deserialize;

pub const DEFAULT_PROPOSALS: &str = "aes128gcm16-prfsha256-ecp256";
pub const DEFAULT_ESP_PROPOSALS: &str = "aes128gcm16";
/// Seconds `up` gives both child SAs to be INSTALLED.
pub const DEFAULT_TIMEOUT: i64 = 20;
/// The MTU kernel-libipsec gives its TUN in strongSwan 5.9.8.
pub const LIBIPSEC_MTU: u32 = 1400;
/// The device kernel-libipsec makes.
pub const LIBIPSEC_TUN: &str = "ipsec0";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIkev2 {
    #[serde(default)]
    pub description: Option<String>,
    /// "psk" (default) or "cert": certificates from a CA made per lab.
    #[serde(default)]
    pub auth: Option<String>,
    /// The pre-shared key; default: one made per lab.
    #[serde(default)]
    pub psk: Option<String>,
    /// IKE proposals, as swanctl.conf writes them.
    #[serde(default)]
    pub proposals: Option<String>,
    /// ESP proposals of the child SA.
    #[serde(default)]
    pub esp_proposals: Option<String>,
    /// Seconds to wait for the child SA (default 20).
    #[serde(default)]
    pub timeout: Option<i64>,
    /// "libipsec" (default) or "kernel".
    #[serde(default)]
    pub datapath: Option<String>,
    #[serde(default)]
    pub ends: Vec<RawEnd>,
}

/// Where ESP happens: which of charon's kernel interfaces it loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwanDatapath {
    /// kernel-libipsec: ESP in charon, through its TUN, always in UDP 4500.
    Libipsec,
    /// kernel-netlink alone: the kernel's xfrm ESP, in UDP only behind NAT.
    Kernel,
}

impl SwanDatapath {
    pub fn as_str(self) -> &'static str {
        match self {
            SwanDatapath::Libipsec => "libipsec",
            SwanDatapath::Kernel => "kernel",
        }
    }

    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            SwanDatapath::Libipsec => "strongSwan, kernel-libipsec: ESP always in UDP 4500",
            SwanDatapath::Kernel => "strongSwan, kernel ESP (xfrm): protocol 50",
        }
    }
}

/// Where the pre-shared key comes from. Never serialized as the key itself:
/// resolved topologies are printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Psk {
    Generate,
    Given(String),
}

impl serde::Serialize for Psk {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Psk::Generate => "generated",
            Psk::Given(_) => "given",
        })
    }
}

/// How the ends authenticate each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Auth {
    /// One pre-shared key.
    Psk,
    /// ECDSA certificates issued by a CA made when the lab comes up (whose
    /// private key is dropped once both are issued), the node names as their
    /// subjectAltNames.
    Cert,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Ikev2Tunnel {
    /// The two ends, as peers of an overlay; inner addresses as host prefixes.
    pub overlay: Overlay,
    pub auth: Auth,
    /// The pre-shared key (`auth = "psk"`).
    pub psk: Psk,
    pub proposals: String,
    pub esp_proposals: String,
    pub timeout_secs: u32,
    pub datapath: SwanDatapath,
}

impl Ikev2Tunnel {
    /// libipsec in 5.9.8 always encapsulates ESP in UDP 4500, as if behind
    /// NAT; the kernel sends plain ESP where no NAT is between the ends (a lab
    /// with one costs 8 bytes more, UDP's).
    pub fn encapsulation(&self) -> Encapsulation {
        Encapsulation::Esp {
            udp: self.datapath == SwanDatapath::Libipsec,
        }
    }
}

/// The datapath the file asks for; "kernel" is refused where the kernel has
/// no ESP of its own.
fn datapath(r: &RawIkev2, at: &KeyPath, kernel: KernelFacts, p: &mut Vec<Problem>) -> SwanDatapath {
    let at = at.key("datapath");
    match r.datapath.as_deref() {
        None | Some("libipsec") => SwanDatapath::Libipsec,
        Some("kernel") => {
            if !kernel.xfrm_esp {
                p.push(Problem::new(
                    &at,
                    format!(
                        "datapath = \"kernel\" needs the kernel's ESP, and {}",
                        XFRM.refusal("use \"libipsec\" (the default: ESP in charon, in userspace)")
                    ),
                ));
            }
            SwanDatapath::Kernel
        }
        Some(o) => {
            p.push(Problem::new(
                &at,
                format!("datapath \"{o}\" is not one of \"libipsec\" (ESP in charon, the default), \"kernel\" (the kernel's xfrm ESP)"),
            ));
            SwanDatapath::Libipsec
        }
    }
}

/// A proposal list goes into swanctl.conf as it is: only what proposals are
/// made of (algorithm names, '-' and ',').
fn proposal(v: Option<&str>, default: &str, at: &KeyPath, p: &mut Vec<Problem>) -> String {
    let Some(s) = v else {
        return default.to_string();
    };
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ',' || c == '_');
    if !ok {
        p.push(Problem::new(
            at,
            format!("\"{s}\" is not a strongSwan proposal list (like \"{default}\": algorithms joined by '-', proposals by ',')"),
        ));
    }
    s.to_string()
}

pub fn resolve(
    name: &str,
    r: &RawIkev2,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    kernel: KernelFacts,
    p: &mut Vec<Problem>,
) -> Option<Ikev2Tunnel> {
    let before = p.len();
    let datapath = datapath(r, at, kernel, p);
    let (auth, psk) = auth(r, at, p);
    let proposals = proposal(
        r.proposals.as_deref(),
        DEFAULT_PROPOSALS,
        &at.key("proposals"),
        p,
    );
    let esp_proposals = proposal(
        r.esp_proposals.as_deref(),
        DEFAULT_ESP_PROPOSALS,
        &at.key("esp_proposals"),
        p,
    );
    let timeout_secs = int_in(
        r.timeout,
        2..=600,
        DEFAULT_TIMEOUT,
        &at.key("timeout"),
        p,
        |t| format!("timeout {t} s; use 2..=600 (default {DEFAULT_TIMEOUT})"),
    ) as u32;
    let peers = ends(name, r, at, node, p);
    if p.len() > before {
        return None;
    }
    // The kernel's xfrm takes the overhead off a 1500-byte underlay's MTU,
    // as tunbench's own raw ESP does.
    let outer_v6 = peers.first().is_some_and(|x| x.endpoint.is_ipv6());
    let mtu = match datapath {
        SwanDatapath::Libipsec => LIBIPSEC_MTU,
        SwanDatapath::Kernel => Encapsulation::Esp { udp: false }.max_inner(outer_v6, 1500) as u32,
    };
    Some(Ikev2Tunnel {
        overlay: Overlay {
            mtu,
            keepalive: None,
            preshared: Preshared::None,
            queues: 1,
            hub: None,
            peers,
        },
        auth,
        psk,
        proposals,
        esp_proposals,
        timeout_secs,
        datapath,
    })
}

/// How the ends authenticate, and the pre-shared key if they use one.
fn auth(r: &RawIkev2, at: &KeyPath, p: &mut Vec<Problem>) -> (Auth, Psk) {
    let auth = match r.auth.as_deref() {
        None | Some("psk") => Auth::Psk,
        Some("cert") => Auth::Cert,
        Some(o) => {
            p.push(Problem::new(
                &at.key("auth"),
                format!("auth \"{o}\" is not one of \"psk\" (a pre-shared key), \"cert\" (certificates from a CA made per lab)"),
            ));
            Auth::Psk
        }
    };
    if auth == Auth::Cert && r.psk.is_some() {
        p.push(Problem::new(
            &at.key("psk"),
            "a pre-shared key with auth = \"cert\"; give one or the other",
        ));
    }
    let psk = match r.psk.as_deref() {
        None => Psk::Generate,
        Some("") => {
            p.push(Problem::new(
                &at.key("psk"),
                "the pre-shared key is empty; give one, or leave psk out for one made per lab",
            ));
            Psk::Generate
        }
        Some(s) => Psk::Given(s.to_string()),
    };
    (auth, psk)
}

/// The two ends, their inner addresses host addresses on `lo`.
fn ends(
    name: &str,
    r: &RawIkev2,
    at: &KeyPath,
    node: &NodeLookup<'_>,
    p: &mut Vec<Problem>,
) -> Vec<Peer> {
    let mut peers = two_ends(name, "an IKEv2 tunnel", &r.ends, ESP_PORT, at, node, p);
    for (i, re) in r.ends.iter().enumerate() {
        if re.spi.is_some() || re.tunnel_id.is_some() || re.session_id.is_some() {
            p.push(Problem::new(
                &at.key("ends").index(i),
                "spi, tunnel_id and session_id are for tunbench's static ESP and L2TP; IKEv2 negotiates its SAs",
            ));
        }
    }
    // On lo, an address is the host's own and no more: the traffic
    // selectors, not a connected subnet, decide what goes through.
    for peer in &mut peers {
        for a in &mut peer.addresses {
            *a = IpNetwork::new(a.ip(), if a.is_ipv4() { 32 } else { 128 }).expect("host prefix");
        }
    }
    peers
}

/// Checks that need the whole topology, and strongSwan's presence: a lab with
/// an IKEv2 tunnel cannot come up without it.
pub fn validate(t: &Topology, tunnel: &Tunnel, e: &Ikev2Tunnel, p: &mut Vec<Problem>) {
    overlay::validate(t, &tunnel.name, &e.overlay, "lo", p);
    if let Err(missing) = crate::vocab::programs::Install::find(e.auth == Auth::Cert) {
        p.push(Problem::new(&tunnel.at.key("kind"), missing));
    }
    for peer in &e.overlay.peers {
        let n = &t.nodes[peer.node];
        if n.kind == NodeKind::Switch {
            continue;
        }
        // One charon per namespace: it binds UDP 500 and 4500 on every address.
        for other in &t.tunnels {
            if other.name == tunnel.name {
                continue;
            }
            let clash = match &other.kind {
                TunnelKind::Ikev2(o) => o.overlay.peers.iter().any(|q| q.node == peer.node),
                // ESP or L2TP/IPsec over UDP, or anything else on 4500 or 500.
                _ => other.overlay().is_some_and(|o| {
                    o.peers
                        .iter()
                        .any(|q| q.node == peer.node && [ESP_PORT, 500].contains(&q.port))
                }),
            };
            // Between two IKEv2 tunnels, said once.
            let once = !matches!(other.kind, TunnelKind::Ikev2(_)) || tunnel.name < other.name;
            if clash && once {
                p.push(Problem::new(
                    &peer.at.key("node"),
                    format!(
                        "node \"{}\" is also an end of tunnel \"{}\"; charon needs UDP 500 and 4500 of the node to itself, so a node is an end of one IKEv2 tunnel and of no other tunnel on those ports (ESP or L2TP/IPsec over UDP)",
                        n.name, other.name
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Resolved without `validate`, which also asks whether strongSwan is installed.
    fn resolved(tunnel: &str) -> Topology {
        resolved_for(tunnel, crate::topology::kernel::KernelFacts::FULL).unwrap()
    }

    /// The topology with `tunnel`'s keys, or the problems, on a kernel like `k`.
    fn resolved_for(
        tunnel: &str,
        k: crate::topology::kernel::KernelFacts,
    ) -> Result<Topology, Vec<Problem>> {
        let text = format!(
            r#"name = "ikr"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.86.1/24" }}
b = {{ port = "b:eth0", ipv4 = "198.18.86.2/24" }}
[tunnels.vpn]
kind = "ikev2"
{tunnel}
ends = [
  {{ node = "a", endpoint = "198.18.86.1", address = ["198.18.87.1/24", "2001:2:0:87::1/64"] }},
  {{ node = "b", endpoint = "198.18.86.2", address = "198.18.87.2/24", allowed_ips = ["198.18.88.0/24"] }},
]
"#
        );
        let raw: crate::topology::raw::RawTopology = toml::from_str(&text).unwrap();
        let (t, problems) = crate::topology::resolve::resolve(&raw, Path::new(""), k);
        if problems.is_empty() {
            Ok(t)
        } else {
            Err(problems)
        }
    }

    fn ikev2(t: &Topology) -> &Ikev2Tunnel {
        match &t.tunnels[0].kind {
            TunnelKind::Ikev2(e) => e,
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn defaults_and_inner_addresses_on_lo() {
        let t = resolved("");
        let e = ikev2(&t);
        assert_eq!(e.proposals, DEFAULT_PROPOSALS);
        assert_eq!(e.esp_proposals, DEFAULT_ESP_PROPOSALS);
        assert_eq!(e.timeout_secs, 20);
        assert_eq!(e.psk, Psk::Generate);
        assert_eq!(e.auth, Auth::Psk);
        assert_eq!(e.overlay.mtu, LIBIPSEC_MTU);
        assert_eq!(e.datapath, SwanDatapath::Libipsec);
        assert_eq!(e.encapsulation(), Encapsulation::Esp { udp: true });
        assert_eq!(t.tunnels[0].tun_name(), "ipsec0");
        let a = t.node_addresses(0);
        assert!(
            a.contains(&("lo".to_string(), "198.18.87.1/32".parse().unwrap())),
            "{a:?}"
        );
        assert!(
            a.contains(&("lo".to_string(), "2001:2:0:87::1/128".parse().unwrap())),
            "{a:?}"
        );
        // b's traffic selectors: its address and the network behind it.
        let ts: Vec<String> = e
            .overlay
            .allowed_for(0, 1)
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(ts, ["198.18.87.2/32", "198.18.88.0/24"]);
    }

    #[test]
    fn up_makes_no_device_and_the_key_stays_unprinted() {
        let t = resolved(r#"psk = "not for printing""#);
        let p = crate::plan::plan(&t, &crate::plan::Naming::new("ikr", None));
        let text: Vec<String> = p.ops.iter().map(|o| o.to_string()).collect();
        assert!(
            !text
                .iter()
                .any(|o| o.contains("tuntap") || o.contains("ipsec0")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|o| o.contains("addr add 198.18.87.1/32 dev lo")),
            "{text:?}"
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("not for printing"));
        assert!(json.contains("\"psk\":\"given\""), "{json}");
        let keys = crate::keys::LabKeys::make(&t).unwrap();
        assert_eq!(
            keys.psk_hex("vpn").unwrap(),
            "6e6f7420666f72207072696e74696e67"
        );
        let made = crate::keys::LabKeys::make(&resolved("")).unwrap();
        assert_eq!(made.psk_hex("vpn").unwrap().len(), 64);
    }

    #[test]
    fn the_kernel_datapath_is_plain_esp_and_its_mtu_what_fits_1500() {
        let t = resolved(r#"datapath = "kernel""#);
        let e = ikev2(&t);
        assert_eq!(e.datapath, SwanDatapath::Kernel);
        assert_eq!(e.encapsulation(), Encapsulation::Esp { udp: false });
        // Over IPv4: IP 20 + ESP 8 + IV 8 + ICV 16 + trailer 2, payload and
        // trailer padded to 4 bytes: (1500 - 20 - 16 - 16) & !3, less 2;
        // what Linux's xfrm_state_mtu gives a 1500-byte route.
        assert_eq!(e.overlay.mtu, 1446);
        let sizes = t.tunnels[0].sizes();
        assert_eq!(sizes.encapsulation, "ESP (protocol 50)");
    }

    #[test]
    fn a_kernel_datapath_without_xfrm_is_refused_naming_the_key() {
        let without = crate::topology::kernel::KernelFacts {
            xfrm_esp: false,
            ..crate::topology::kernel::KernelFacts::FULL
        };
        let p = resolved_for(r#"datapath = "kernel""#, without).unwrap_err();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].at.to_string(), "tunnels.vpn.datapath");
        let m = &p[0].message;
        assert!(
            m.starts_with(
                "datapath = \"kernel\" needs the kernel's ESP, and the kernel lacks `xfrm`"
            ),
            "{m}"
        );
        assert!(m.contains("use \"libipsec\""), "{m}");
        // The default needs nothing of the kernel.
        assert!(resolved_for("", without).is_ok());
        let odd = resolved_for(
            r#"datapath = "xfrm""#,
            crate::topology::kernel::KernelFacts::FULL,
        )
        .unwrap_err();
        assert!(format!("{odd:?}").contains("is not one of"), "{odd:?}");
    }
}
