//! The topology file exactly as written: serde structs that mirror the TOML, with
//! `deny_unknown_fields` so a typo is an error instead of a silently ignored key.
//! Nothing here applies defaults or checks meaning; `resolve` and `validate` do.

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTopology {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub defaults: Option<RawSettings>,
    /// Per-kind defaults: `[kinds.router]`.
    #[serde(default)]
    pub kinds: BTreeMap<String, RawSettings>,
    #[serde(default)]
    pub nodes: BTreeMap<String, RawNode>,
    #[serde(default)]
    pub links: Vec<RawLink>,
    #[serde(default)]
    pub tunnels: BTreeMap<String, super::tunnel::RawTunnel>,
    #[serde(default)]
    pub measure: Vec<RawMeasure>,
    /// Published figures that reports compare the measurement with.
    #[serde(default)]
    pub reference: Option<RawReference>,
    /// `[[assert]]`: what `tunbench test` checks in the running lab.
    #[serde(default)]
    pub assert: Vec<super::assertion::RawAssert>,
    /// A top-level `[impairments]`: accepted by the parser only so that
    /// resolve can refuse it where it is written (impairments are per link).
    #[serde(default)]
    pub impairments: Option<toml::Value>,
    /// `[scenarios.NAME]`: `scenario` reads them from the text; here only
    /// which ones the file declares counts.
    #[serde(default)]
    pub scenarios: Option<toml::Value>,
    /// `[hosts.NAME]`: the machines the lab is placed on; none: one machine.
    #[serde(default)]
    pub hosts: BTreeMap<String, RawHost>,
    /// The UDP port of the VXLAN links between hosts (default 4789).
    #[serde(default)]
    pub vxlan_port: Option<i64>,
}

/// `[hosts.NAME]`: one machine of a lab placed on several.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    /// The address this host's VXLAN packets leave from (IPv4 or IPv6).
    pub underlay: String,
    /// The underlay interface.
    #[serde(default)]
    pub interface: Option<String>,
    /// The underlay's MTU (default 1500).
    #[serde(default)]
    pub mtu: Option<i64>,
    /// The host's clock is synchronised with the other hosts' (PTP, or NTP
    /// well under the delays measured): one-way delays between two such
    /// hosts are reported.
    #[serde(default)]
    pub synchronised_clock: bool,
}

/// Settings that layer: built-in defaults -> `[defaults]` -> `[kinds.K]` -> node.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawSettings {
    /// Default MTU of links touching a node of this layer (`[defaults]` and kinds only).
    #[serde(default)]
    pub mtu: Option<i64>,
    #[serde(default)]
    pub sysctls: BTreeMap<String, SysctlValue>,
    /// Whether the node forwards IPv4 and IPv6 (routers do by default).
    #[serde(default)]
    pub forwarding: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub kind: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub forwarding: Option<bool>,
    #[serde(default)]
    pub sysctls: BTreeMap<String, SysctlValue>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
    /// Extra addresses on `lo` (for a switch: addresses on its bridge).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Name of the bridge device of a switch (default `br0`).
    #[serde(default)]
    pub bridge: Option<String>,
    /// A router's datapath: "kernel" or "userspace".
    #[serde(default)]
    pub datapath: Option<toml::Value>,
    /// A device profile: a built-in name or a path relative to the file.
    #[serde(default)]
    pub profile: Option<String>,
    /// The router profile's mode.
    #[serde(default)]
    pub mode: Option<String>,
    /// The router's interface toward its LAN (for its profile's directions).
    #[serde(default)]
    pub lan: Option<String>,
    /// The `[hosts.NAME]` the node is built on.
    #[serde(default)]
    pub host: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRoute {
    /// A prefix in CIDR, a bare address, or `default` (family taken from `via`).
    pub to: String,
    #[serde(default)]
    pub via: Option<String>,
    #[serde(default)]
    pub dev: Option<String>,
    #[serde(default)]
    pub metric: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLink {
    /// A name scenarios can change the link by (`[scenarios.S.links.NAME]`).
    #[serde(default)]
    pub name: Option<String>,
    pub a: RawEndpoint,
    pub b: RawEndpoint,
    #[serde(default)]
    pub mtu: Option<i64>,
    #[serde(default)]
    pub description: Option<String>,
    /// Per-direction rate, delay, loss...: `impair::resolve` reads them, so
    /// each problem is located at its own key.
    #[serde(default)]
    pub impairments: Option<toml::Value>,
    /// For a link to an external node: the host interface that reaches it.
    #[serde(default)]
    pub host: Option<RawHostPort>,
    /// The VXLAN network identifier of a link between two hosts.
    #[serde(default)]
    pub vni: Option<i64>,
}

/// `host = "enp3s0"` (a macvlan) or
/// `host = { iface = "enp3s0", mode = "ipvlan" | vlan = 11 | move = true }`.
#[derive(Debug, Default)]
pub struct RawHostPort {
    pub iface: String,
    pub mode: Option<String>,
    pub vlan: Option<i64>,
    pub moved: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostPortTable {
    iface: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    vlan: Option<i64>,
    #[serde(default, rename = "move")]
    moved: Option<bool>,
}

impl<'de> Deserialize<'de> for RawHostPort {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawHostPort;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    r#""enp3s0" or { iface = "enp3s0", mode = "macvlan" | "ipvlan", vlan = 11, move = true }"#,
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawHostPort, E> {
                Ok(RawHostPort {
                    iface: s.to_string(),
                    ..Default::default()
                })
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawHostPort, M::Error> {
                let t = RawHostPortTable::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(RawHostPort {
                    iface: t.iface,
                    mode: t.mode,
                    vlan: t.vlan,
                    moved: t.moved,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `"node:iface"`, or `{ port = "node:iface", ipv4 = ..., ipv6 = ... }`.
#[derive(Debug, Default)]
pub struct RawEndpoint {
    pub port: String,
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpointTable {
    port: String,
    #[serde(default)]
    ipv4: OneOrMany,
    #[serde(default)]
    ipv6: OneOrMany,
}

impl<'de> Deserialize<'de> for RawEndpoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawEndpoint;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    r#""node:iface" or { port = "node:iface", ipv4 = "...", ipv6 = "..." }"#,
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawEndpoint, E> {
                Ok(RawEndpoint {
                    port: s.to_string(),
                    ..Default::default()
                })
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawEndpoint, M::Error> {
                let t = RawEndpointTable::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(RawEndpoint {
                    port: t.port,
                    ipv4: t.ipv4.0,
                    ipv6: t.ipv6.0,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A string or an array of strings.
#[derive(Debug, Default)]
pub struct OneOrMany(pub Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address in CIDR notation or an array of them")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany(vec![s.to_string()]))
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut s: S) -> Result<OneOrMany, S::Error> {
                let mut v = Vec::new();
                while let Some(x) = s.next_element::<String>()? {
                    v.push(x);
                }
                Ok(OneOrMany(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// A sysctl value as written: `1`, `"cubic"`, `true`.
#[derive(Debug, Clone, PartialEq)]
pub struct SysctlValue(pub String);

impl<'de> Deserialize<'de> for SysctlValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SysctlValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sysctl value: an integer, a string or a boolean")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SysctlValue, E> {
                Ok(SysctlValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SysctlValue, E> {
                Ok(SysctlValue(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<SysctlValue, E> {
                Ok(SysctlValue(if v { "1" } else { "0" }.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SysctlValue, E> {
                Ok(SysctlValue(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[[measure]]`: what `tunbench run` measures, between which nodes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeasure {
    /// The path's name in reports (default "raw").
    #[serde(default)]
    pub name: Option<String>,
    pub from: String,
    pub to: RawTarget,
    /// Target addresses; default: the first of each family routing says works.
    #[serde(default)]
    pub ipv4: Option<String>,
    #[serde(default)]
    pub ipv6: Option<String>,
    #[serde(default)]
    pub families: Option<Vec<String>>,
    #[serde(default)]
    pub protocols: Option<Vec<String>>,
    #[serde(default)]
    pub directions: Option<Vec<String>>,
    #[serde(default)]
    pub streams: Option<Vec<i64>>,
    #[serde(default)]
    pub runs: Option<i64>,
    /// Seconds per run.
    #[serde(default)]
    pub duration: Option<f64>,
    /// Seconds per UDP search trial.
    #[serde(default)]
    pub trial_duration: Option<f64>,
    /// Highest UDP loss in percent that a rate may have.
    #[serde(default)]
    pub udp_loss: Option<f64>,
    /// UDP datagram size in bytes.
    #[serde(default)]
    pub udp_len: Option<i64>,
    /// Latency probes idle and under load (default: on toward a node, off
    /// toward a server outside the lab).
    #[serde(default)]
    pub latency: Option<bool>,
    /// Latency probes per second.
    #[serde(default)]
    pub latency_rate: Option<f64>,
    /// Seconds of probes alone per family before the cells.
    #[serde(default)]
    pub latency_idle: Option<f64>,
    /// Only in these scenarios (default: every one).
    #[serde(default)]
    pub scenarios: Option<Vec<String>>,
}

/// `[[measure]] to`: a node's name, or `{ address = "198.18.200.2", port = 5201 }`
/// for an iperf3 server outside any lab.
#[derive(Debug, Clone)]
pub enum RawTarget {
    Node(String),
    Address { address: String, port: Option<i64> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTargetTable {
    address: String,
    #[serde(default)]
    port: Option<i64>,
}

impl<'de> Deserialize<'de> for RawTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTarget;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a node name, or { address = "198.18.200.2", port = 5201 }"#)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawTarget, E> {
                Ok(RawTarget::Node(s.to_string()))
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawTarget, M::Error> {
                let t = RawTargetTable::deserialize(de::value::MapAccessDeserializer::new(m))?;
                Ok(RawTarget::Address {
                    address: t.address,
                    port: t.port,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `[reference]`: figures published for the paths this file measures.
///
/// ```toml
/// [reference]
/// source = "the NVR500 study: a Yamaha NVR500 home router, Jan/Feb 2020, best of 5 iperf3 runs"
/// tolerance = { tcp = 15, udp = 25 }      # percent either way; these are the defaults
/// # The published cells the lab's device models were calibrated from
/// # ("PATH:CELL", PATH as in [reference.figures]); every other published
/// # figure is a prediction. Optional: without it, reports mark neither.
/// calibrated = ["none/raw:ipv4.tcp.sender"]
/// [reference.figures."none/raw"]           # a path as reports name it: SCENARIO/PATH or PATH
/// "ipv4.tcp.sender" = "941M"               # a cell as --expect names it; a rate in bit/s
/// "ipv4.udp.sender" = "347M"
///
/// # Published figures the lab does not predict: printed with the reason,
/// # never compared.
/// [[reference.unpredicted]]
/// what = "RBBS multi-session speed test (FLET'S), with or without the NVR500"
/// figure = "300M"                          # a rate, as in [reference.figures]
/// why = "its limit is the NGN's test server, which the lab does not model"
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReference {
    #[serde(default)]
    pub source: Option<String>,
    /// Percent either way, per protocol.
    #[serde(default)]
    pub tolerance: Option<RawTolerance>,
    /// Path label -> cell key -> published rate, in the file's order.
    #[serde(default)]
    pub figures: InOrder<InOrder<toml::Value>>,
    /// The published cells the lab's device models were calibrated from, as
    /// "PATH:CELL", each a cell with a figure in `figures`, once; absent
    /// means the file does not say.
    #[serde(default)]
    pub calibrated: Option<Vec<toml::Value>>,
    /// `[[reference.unpredicted]]`: published figures the lab does not predict.
    #[serde(default)]
    pub unpredicted: Vec<RawUnpredicted>,
}

/// One `[[reference.unpredicted]]`: what was published, its figure, and why
/// the lab cannot predict it. Every key is optional here so that a missing
/// one is reported where it is missing, with what to write.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnpredicted {
    #[serde(default)]
    pub what: Option<String>,
    #[serde(default)]
    pub figure: Option<toml::Value>,
    #[serde(default)]
    pub why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTolerance {
    #[serde(default)]
    pub tcp: Option<f64>,
    #[serde(default)]
    pub udp: Option<f64>,
}

/// A table whose keys keep the order the file writes them in (the published
/// table's order, which reports keep). The parser hands tables over sorted by
/// key; each key's place in the text puts them back.
#[derive(Debug)]
pub struct InOrder<V>(pub Vec<(String, V)>);

impl<V> Default for InOrder<V> {
    fn default() -> Self {
        InOrder(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for InOrder<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = InOrder<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a table, e.g. [reference.figures."raw"] "ipv4.tcp.sender" = "941M""#)
            }
            fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<InOrder<V>, M::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = m.next_entry::<toml::Spanned<String>, V>()? {
                    v.push((k.span().start, k.into_inner(), x));
                }
                v.sort_by_key(|(at, _, _)| *at);
                Ok(InOrder(v.into_iter().map(|(_, k, x)| (k, x)).collect()))
            }
        }
        d.deserialize_map(Entries(std::marker::PhantomData))
    }
}
