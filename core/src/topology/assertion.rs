//! `[[assert]]`: what a lab must do, stated in its topology file and checked
//! by `tunbench test` in the running lab.
//!
//! ```toml
//! [[assert]]
//! name = "softwire-mtu"
//! kind = "path_mtu"            # reach | path_mtu | throughput | overhead | command
//! from = "client"
//! to = "server"                # a node, or an address
//! family = "ipv4"
//! equals = 1460
//! ```
//!
//! Each kind has its own keys; a key of another kind is an error, so a typo
//! or a misplaced key cannot pass silently. A throughput's expectation is
//! read a layer above (`verify`, with the `--expect` parser).

use super::resolved::{NodeKind, Topology};
use super::{KeyPath, Problem, valid_name};
use crate::vocab::Family;
use serde::Deserialize;
use std::net::IpAddr;

/// `[[assert]]` exactly as written: every key of every kind, each optional
/// here; `resolve` says which ones a kind takes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAssert {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Only in these scenarios (default: every one).
    #[serde(default)]
    pub scenarios: Option<Vec<String>>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub family: Option<String>,
    /// reach: "ok" | "unreachable"; throughput: an `--expect` expression.
    #[serde(default)]
    pub expect: Option<String>,
    #[serde(default)]
    pub equals: Option<i64>,
    #[serde(default)]
    pub tunnel: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub run: Option<Vec<String>>,
    #[serde(default)]
    pub runs: Option<i64>,
    #[serde(default)]
    pub duration: Option<f64>,
}

/// One resolved `[[assert]]`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Assertion {
    pub name: String,
    pub description: Option<String>,
    pub check: Check,
    /// Only in these scenarios; None: in every one.
    pub scenarios: Option<Vec<String>>,
    #[serde(skip)]
    pub at: KeyPath,
}

/// What an assertion checks.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// An ICMP echo from `from` to `to` gets a reply (`expect_ok`) or does not.
    Reach {
        from: String,
        to: AssertTarget,
        family: Family,
        expect_ok: bool,
    },
    /// The largest IP packet that crosses from `from` to `to` and back with
    /// DF set, found by probing, is `equals` bytes.
    PathMtu {
        from: String,
        to: AssertTarget,
        family: Family,
        equals: u32,
    },
    /// An `--expect` expression on one cell of the file's `[[measure]]`
    /// paths, measured with `runs` runs of `duration` s (default: the
    /// `[[measure]]`'s own method).
    Throughput {
        expect: String,
        runs: Option<u32>,
        duration: Option<f64>,
    },
    /// The bytes a point-to-point tunnel adds to each packet, as captured
    /// on its underlay, are what tunbench states (`tunbench status`), and
    /// `equals` when given.
    Overhead { tunnel: String, equals: Option<u32> },
    /// A command in a node's namespace exits 0.
    Command { node: String, run: Vec<String> },
}

impl Check {
    pub fn kind(&self) -> &'static str {
        match self {
            Check::Reach { .. } => "reach",
            Check::PathMtu { .. } => "path_mtu",
            Check::Throughput { .. } => "throughput",
            Check::Overhead { .. } => "overhead",
            Check::Command { .. } => "command",
        }
    }
}

/// An assertion's far end: a node (one of its addresses of the family) or an
/// address.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AssertTarget {
    Node(String),
    Address(IpAddr),
}

impl std::fmt::Display for AssertTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            AssertTarget::Node(n) => f.write_str(n),
            AssertTarget::Address(a) => write!(f, "{a}"),
        }
    }
}

/// The kinds, each with the keys it takes (required first, then optional);
/// `name`, `kind`, `description` and `scenarios` belong to every kind.
const KINDS: &[(&str, &[&str], &[&str])] = &[
    ("reach", &["from", "to"], &["family", "expect"]),
    ("path_mtu", &["from", "to", "equals"], &["family"]),
    ("throughput", &["expect"], &["runs", "duration"]),
    ("overhead", &["tunnel"], &["equals"]),
    ("command", &["node", "run"], &[]),
];

/// The per-kind keys an entry gives, in the order `RawAssert` declares them.
fn given(r: &RawAssert) -> Vec<&'static str> {
    let mut v = Vec::new();
    for (k, set) in [
        ("from", r.from.is_some()),
        ("to", r.to.is_some()),
        ("family", r.family.is_some()),
        ("expect", r.expect.is_some()),
        ("equals", r.equals.is_some()),
        ("tunnel", r.tunnel.is_some()),
        ("node", r.node.is_some()),
        ("run", r.run.is_some()),
        ("runs", r.runs.is_some()),
        ("duration", r.duration.is_some()),
    ] {
        if set {
            v.push(k);
        }
    }
    v
}

/// Read every `[[assert]]`: names, kinds and their keys, values' forms.
/// Whether nodes exist and families fit is `validate`'s.
pub fn resolve(raw: &[RawAssert], root: &KeyPath, p: &mut Vec<Problem>) -> Vec<Assertion> {
    let mut out: Vec<Assertion> = Vec::new();
    let mut names: Vec<(String, usize)> = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let at = root.index(i);
        let before = p.len();
        let name = name(r, i, &at, &mut names, p);
        let Some(kind) = kind(r, &name, &at, p) else {
            continue;
        };
        if let Some(s) = &r.scenarios {
            if s.is_empty() {
                p.push(Problem::new(
                    &at.key("scenarios"),
                    "an empty list runs the assertion nowhere; leave the key out for every scenario",
                ));
            }
        }
        if p.len() > before {
            continue;
        }
        let Some(check) = check(kind, r, &at, p) else {
            continue;
        };
        out.push(Assertion {
            name,
            description: r.description.clone(),
            check,
            scenarios: r.scenarios.clone(),
            at,
        });
    }
    out
}

/// Entry `i`'s name: given, well formed and not used before (`names` holds
/// those seen so far with their entries).
fn name(
    r: &RawAssert,
    i: usize,
    at: &KeyPath,
    names: &mut Vec<(String, usize)>,
    p: &mut Vec<Problem>,
) -> String {
    match &r.name {
        None => {
            p.push(Problem::new(
                at,
                "an [[assert]] needs a name = \"...\" (it names the test case in reports)",
            ));
            String::new()
        }
        Some(n) if !valid_name(n) => {
            p.push(Problem::new(
                &at.key("name"),
                format!("assertion name \"{n}\" must be 1-32 letters, digits, '-' or '_', starting with a letter or digit"),
            ));
            n.clone()
        }
        Some(n) => {
            if let Some((_, first)) = names.iter().find(|(x, _)| x == n) {
                p.push(Problem::new(
                    &at.key("name"),
                    format!("assertion name \"{n}\" is already used by assert[{first}]; names are unique"),
                ));
            }
            names.push((n.clone(), i));
            n.clone()
        }
    }
}

/// The entry's kind, if it is a known one; its keys must be that kind's.
fn kind(r: &RawAssert, name: &str, at: &KeyPath, p: &mut Vec<Problem>) -> Option<&'static str> {
    let known = KINDS
        .iter()
        .map(|(k, _, _)| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let Some(kind) = &r.kind else {
        p.push(Problem::new(
            at,
            format!("assertion \"{name}\" needs a kind: {known}"),
        ));
        return None;
    };
    let Some((kind, required, optional)) = KINDS.iter().find(|(k, _, _)| k == kind) else {
        p.push(Problem::new(
            &at.key("kind"),
            format!("unknown assertion kind \"{kind}\"; known: {known}"),
        ));
        return None;
    };
    let keys = given(r);
    let takes = required
        .iter()
        .chain(optional.iter())
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    for k in &keys {
        if !required.contains(k) && !optional.contains(k) {
            p.push(Problem::new(
                &at.key(k),
                format!("a {kind} assertion has no key \"{k}\"; its keys: {takes}"),
            ));
        }
    }
    for k in *required {
        if !keys.contains(k) {
            p.push(Problem::new(
                at,
                format!("assertion \"{name}\" ({kind}) needs \"{k}\"; its keys: {takes}"),
            ));
        }
    }
    Some(kind)
}

/// What an entry of `kind` (known, with its keys) checks. None: a value is
/// out of range or of the wrong form.
fn check(kind: &str, r: &RawAssert, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Check> {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    match kind {
        "reach" => {
            let to = target(&s(&r.to));
            let family = family(r, &to, at, p)?;
            let expect_ok = match r.expect.as_deref() {
                None | Some("ok") => true,
                Some("unreachable") => false,
                Some(other) => {
                    p.push(Problem::new(
                        &at.key("expect"),
                        format!("expect = \"{other}\"; a reach assertion expects \"ok\" or \"unreachable\""),
                    ));
                    return None;
                }
            };
            Some(Check::Reach {
                from: s(&r.from),
                to,
                family,
                expect_ok,
            })
        }
        "overhead" => {
            let equals = super::int_in(r.equals, 1..=1000, 0, &at.key("equals"), p, |x| {
                format!("equals = {x}; bytes per packet are 1 to 1000")
            });
            Some(Check::Overhead {
                tunnel: s(&r.tunnel),
                equals: (equals > 0).then_some(equals as u32),
            })
        }
        "path_mtu" => path_mtu(r, at, p),
        "throughput" => {
            let runs = super::int_in(r.runs, 1..=100, 0, &at.key("runs"), p, |x| {
                format!("runs = {x}; use 1 to 100")
            });
            if let Some(d) = r.duration {
                if !(1.0..=3600.0).contains(&d) {
                    p.push(Problem::new(
                        &at.key("duration"),
                        format!("duration = {d} s; use 1 to 3600"),
                    ));
                }
            }
            Some(Check::Throughput {
                expect: s(&r.expect),
                runs: (runs > 0).then_some(runs as u32),
                duration: r.duration,
            })
        }
        _ => {
            let run = r.run.clone().unwrap_or_default();
            if run.is_empty() || run[0].is_empty() {
                p.push(Problem::new(
                    &at.key("run"),
                    "run names a program and its arguments, e.g. [\"ip\", \"route\", \"get\", \"198.18.0.2\"]",
                ));
                return None;
            }
            Some(Check::Command {
                node: s(&r.node),
                run,
            })
        }
    }
}

/// A path MTU check: `equals` in the family's range of MTUs.
fn path_mtu(r: &RawAssert, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Check> {
    let to = target(&r.to.clone().unwrap_or_default());
    let family = family(r, &to, at, p)?;
    let min = match family {
        Family::Ipv4 => 68,
        Family::Ipv6 => 1280,
    };
    let equals = super::int_in(r.equals, min..=65535, 0, &at.key("equals"), p, |x| {
        format!(
            "equals = {x}; an {} path MTU is {min} to 65535 bytes",
            family.title()
        )
    });
    if equals == 0 {
        return None;
    }
    Some(Check::PathMtu {
        from: r.from.clone().unwrap_or_default(),
        to,
        family,
        equals: equals as u32,
    })
}

fn target(s: &str) -> AssertTarget {
    match s.parse::<IpAddr>() {
        Ok(a) => AssertTarget::Address(a),
        Err(_) => AssertTarget::Node(s.to_string()),
    }
}

/// The family an entry names, or its address's; a node target needs one.
fn family(r: &RawAssert, to: &AssertTarget, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Family> {
    let given = match r.family.as_deref() {
        None => None,
        Some("ipv4") => Some(Family::Ipv4),
        Some("ipv6") => Some(Family::Ipv6),
        Some(other) => {
            p.push(Problem::new(
                &at.key("family"),
                format!("family = \"{other}\"; use \"ipv4\" or \"ipv6\""),
            ));
            return None;
        }
    };
    match (to, given) {
        (AssertTarget::Address(a), g) => {
            let own = Family::of(*a);
            if g.is_some_and(|g| g != own) {
                p.push(Problem::new(
                    &at.key("family"),
                    format!(
                        "family = \"{}\" but to = \"{a}\" is an {} address; leave family out or make them agree",
                        g.map(|g| g.word()).unwrap_or_default(),
                        own.title()
                    ),
                ));
                return None;
            }
            Some(own)
        }
        (AssertTarget::Node(n), None) => {
            p.push(Problem::new(
                at,
                format!("to = \"{n}\" is a node: say which family, family = \"ipv4\" or \"ipv6\""),
            ));
            None
        }
        (AssertTarget::Node(_), Some(g)) => Some(g),
    }
}

/// Checks that need the whole lab: the nodes exist and run in it, and the
/// family is one both ends have.
pub fn validate(t: &Topology, p: &mut Vec<Problem>) {
    for a in &t.assertions {
        match &a.check {
            Check::Reach {
                from, to, family, ..
            }
            | Check::PathMtu {
                from, to, family, ..
            } => probe_ends(t, a, from, to, *family, p),
            Check::Command { node, .. } => {
                lab_node(t, a, "node", node, p);
            }
            Check::Overhead { tunnel, .. } => point_to_point(t, a, tunnel, p),
            Check::Throughput { .. } => {}
        }
    }
}

fn known_nodes(t: &Topology) -> String {
    t.nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn has_family(t: &Topology, node: usize, f: Family) -> bool {
    t.node_addresses(node)
        .iter()
        .any(|(_, a)| Family::of(a.ip()) == f)
}

/// The node `name` that `key` of assertion `a` names, if it is one the lab
/// runs things on (a probe's `from` not a switch).
fn lab_node(
    t: &Topology,
    a: &Assertion,
    key: &str,
    name: &str,
    p: &mut Vec<Problem>,
) -> Option<usize> {
    match t.node_index(name) {
        None => {
            p.push(Problem::new(
                &a.at.key(key),
                format!(
                    "node \"{name}\" is not defined; defined nodes: {}",
                    known_nodes(t)
                ),
            ));
            None
        }
        Some(i) if t.nodes[i].kind == NodeKind::External => {
            p.push(Problem::new(
                &a.at.key(key),
                format!(
                    "\"{name}\" is an external device: tunbench runs nothing on it; run the assertion from a lab node"
                ),
            ));
            None
        }
        Some(i) if t.nodes[i].kind == NodeKind::Switch && key == "from" => {
            p.push(Problem::new(
                &a.at.key(key),
                format!("\"{name}\" is a switch; probes start at a host or router"),
            ));
            None
        }
        Some(i) => Some(i),
    }
}

/// A probe's two ends: `from` a lab node with an address of the family, `to`
/// an address or another node that has one.
fn probe_ends(
    t: &Topology,
    a: &Assertion,
    from: &str,
    to: &AssertTarget,
    family: Family,
    p: &mut Vec<Problem>,
) {
    let src = lab_node(t, a, "from", from, p);
    if let Some(s) = src {
        if !has_family(t, s, family) {
            p.push(Problem::new(
                &a.at.key("from"),
                format!(
                    "node \"{from}\" has no {} address, so it cannot send {} probes",
                    family.title(),
                    family.title()
                ),
            ));
        }
    }
    let AssertTarget::Node(n) = to else {
        return;
    };
    match t.node_index(n) {
        None => p.push(Problem::new(
            &a.at.key("to"),
            format!(
                "\"{n}\" is neither an address nor a defined node; defined nodes: {}",
                known_nodes(t)
            ),
        )),
        Some(d) if Some(d) == src => p.push(Problem::new(
            &a.at.key("to"),
            "from and to are the same node; name another node or an address",
        )),
        Some(d) if !has_family(t, d, family) => p.push(Problem::new(
            &a.at.key("to"),
            format!(
                "node \"{n}\" has no {} address; use family = \"{}\" or give an address",
                family.title(),
                match family {
                    Family::Ipv4 => "ipv6",
                    Family::Ipv6 => "ipv4",
                }
            ),
        )),
        Some(_) => {}
    }
}

/// An overhead check's tunnel: one of the file's, with two peers or more.
fn point_to_point(t: &Topology, a: &Assertion, tunnel: &str, p: &mut Vec<Problem>) {
    match t.tunnels.iter().find(|x| x.name == tunnel) {
        None => {
            let names: Vec<&str> = t.tunnels.iter().map(|x| x.name.as_str()).collect();
            p.push(Problem::new(
                &a.at.key("tunnel"),
                if names.is_empty() {
                    format!("no tunnel \"{tunnel}\": the file has no [tunnels.NAME]")
                } else {
                    format!("no tunnel \"{tunnel}\"; tunnels: {}", names.join(", "))
                },
            ));
        }
        Some(x) if x.overlay().is_none_or(|w| w.peers.len() < 2) => {
            p.push(Problem::new(
                &a.at.key("tunnel"),
                format!(
                    "tunnel \"{tunnel}\" is not point to point; overhead is captured between two peers of a WireGuard, ESP, L2TP or IKEv2 tunnel"
                ),
            ));
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"name = "t"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.0.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.0.2/24" }
[scenarios.one]
[scenarios.two]
[[assert]]
name = "everywhere"
kind = "reach"
from = "a"
to = "198.18.0.2"
[[assert]]
name = "only-two"
kind = "path_mtu"
from = "a"
to = "b"
family = "ipv4"
equals = 1500
scenarios = ["two"]
"#;

    #[test]
    fn each_scenario_keeps_the_assertions_meant_for_it() {
        let path = std::path::Path::new("t.toml");
        let t = crate::topology::parse_str(BASE, path).unwrap();
        assert_eq!(t.assertions.len(), 2);
        match &t.assertions[0].check {
            Check::Reach {
                to,
                family,
                expect_ok,
                ..
            } => {
                assert_eq!(*to, AssertTarget::Address("198.18.0.2".parse().unwrap()));
                assert_eq!(*family, Family::Ipv4);
                assert!(*expect_ok);
            }
            other => panic!("{other:?}"),
        }
        let s = crate::topology::scenario::scenarios_str(
            BASE,
            path,
            crate::topology::kernel::KernelFacts::FULL,
        )
        .unwrap();
        let names = |i: usize| -> Vec<&str> {
            s[i].topology
                .assertions
                .iter()
                .map(|a| a.name.as_str())
                .collect()
        };
        assert_eq!(s[0].name, "one");
        assert_eq!(names(0), ["everywhere"]);
        assert_eq!(names(1), ["everywhere", "only-two"]);
        assert!(
            s[1].topology
                .assertions
                .iter()
                .all(|a| a.scenarios.is_none())
        );
    }

    #[test]
    fn a_scenario_cannot_change_the_assertions() {
        let text = format!("{BASE}\n[scenarios.three]\nassert = []\n");
        let e = crate::topology::parse_str(&text, std::path::Path::new("t.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("every scenario checks the file's assertions"),
            "{e}"
        );
    }
}
