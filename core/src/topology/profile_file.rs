//! Profile files: the built-in ones (`profiles/NAME.toml`, compiled in) and
//! files a topology names by path. Their schema is documented at the top of
//! each built-in file and in docs/routers.md. Parsing and checking here are pure;
//! every problem is located in the profile file itself (line, column, key
//! path), so the topology can report it at the node's `profile` key.

use super::{Diagnostic, KeyPath, Problem, locate, valid_name};
use crate::codec::profile::{Ceiling, HostModel, Way};
use crate::vocab::{Family, Proto};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Profiles looked up by bare name (`profile = "nvr500"`).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("nvr500", include_str!("../../../profiles/nvr500.toml")),
    (
        "nvr500-study-server",
        include_str!("../../../profiles/nvr500-study-server.toml"),
    ),
    (
        "openwrt-b4",
        include_str!("../../../profiles/openwrt-b4.toml"),
    ),
];

/// The tunnel kinds a router profile may give termination ceilings for: those
/// whose end runs in tunbench's own datapath, where the ceilings are applied.
/// (An IKEv2 end is strongSwan's, which tunbench cannot shape.)
pub const TERMINATION_KINDS: &[&str] = &["l2tp", "esp", "wireguard", "dslite"];

pub const DEFAULT_QUEUE_PACKETS: u32 = 1000;
const MAX_QUEUE_PACKETS: i64 = 1_000_000;
/// The fastest a ceiling or limit may be: beyond that no lab link carries it.
const MAX_RATE: u64 = 100_000_000_000;

/// A profile file, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Profile {
    Router(RouterProfile),
    Host(HostModel),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouterProfile {
    pub name: String,
    pub description: Option<String>,
    pub queue_packets: u32,
    pub modes: BTreeMap<String, Mode>,
    /// `[terminations.KIND]`: what the device's own end of a tunnel of that
    /// kind gets through, whichever mode it forwards in.
    pub terminations: BTreeMap<String, Termination>,
}

/// The ceilings of the tunnels of one kind the device itself terminates.
#[derive(Debug, Clone, PartialEq)]
pub struct Termination {
    pub description: Option<String>,
    pub ceilings: Vec<Ceiling>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Mode {
    pub description: Option<String>,
    pub ceilings: Vec<Ceiling>,
}

/// A `profile` value is a path (relative to the topology file) when it holds a
/// `/` or ends in `.toml`; otherwise the name of a built-in profile.
pub fn is_path(value: &str) -> bool {
    value.contains('/') || value.ends_with(".toml")
}

pub fn built_in_names() -> String {
    BUILT_IN
        .iter()
        .map(|(n, _)| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a profile could not be had.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// A bare name that is no built-in profile.
    Unknown,
    /// The file named by path could not be read.
    Read { path: PathBuf, error: String },
    /// The file's own problems, each located in it.
    Invalid(Vec<Diagnostic>),
}

/// The profile `value` names; `dir` is the topology file's directory.
pub fn load(value: &str, dir: &Path) -> Result<Profile, LoadError> {
    if is_path(value) {
        // Components drop an inner `./`, so messages name the file plainly.
        let path: PathBuf = dir.join(value).components().collect();
        let text = std::fs::read_to_string(&path).map_err(|e| LoadError::Read {
            path: path.clone(),
            error: e.to_string(),
        })?;
        return parse(&text, &path).map_err(LoadError::Invalid);
    }
    let (name, text) = BUILT_IN
        .iter()
        .find(|(n, _)| *n == value)
        .ok_or(LoadError::Unknown)?;
    let shown = PathBuf::from(format!("profiles/{name}.toml (built in)"));
    parse(text, &shown).map_err(LoadError::Invalid)
}

/// Only `kind`, read first: it says which schema the rest follows.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    #[allow(dead_code)]
    kind: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    queue_packets: Option<i64>,
    #[serde(default)]
    modes: BTreeMap<String, RawMode>,
    #[serde(default)]
    terminations: BTreeMap<String, RawMode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMode {
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    ceilings: Vec<RawCeiling>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCeiling {
    #[serde(default)]
    direction: Option<String>,
    #[serde(default)]
    family: Option<String>,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default)]
    aggregate: Option<toml::Value>,
    #[serde(default)]
    flow: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    #[allow(dead_code)]
    kind: String,
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    udp_receive: Option<RawUdpReceive>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdpReceive {
    #[serde(default)]
    ipv4: Option<toml::Value>,
    #[serde(default)]
    ipv6: Option<toml::Value>,
}

/// Parse and check a profile's text; `file` names it in the problems.
pub fn parse(text: &str, file: &Path) -> Result<Profile, Vec<Diagnostic>> {
    let head: Head = toml::from_str(text).map_err(|e| vec![serde_problem(text, file, &e)])?;
    let root = KeyPath::root();
    let mut p = Vec::new();
    let profile = match head.kind.as_deref() {
        Some("router") => {
            let raw: RawRouter =
                toml::from_str(text).map_err(|e| vec![serde_problem(text, file, &e)])?;
            router(&raw, &mut p).map(Profile::Router)
        }
        Some("host") => {
            let raw: RawHost =
                toml::from_str(text).map_err(|e| vec![serde_problem(text, file, &e)])?;
            Some(Profile::Host(host(&raw, &mut p)))
        }
        Some(other) => {
            p.push(Problem::new(
                &root.key("kind"),
                format!("unknown profile kind \"{other}\"; known kinds: \"router\", \"host\""),
            ));
            None
        }
        None => {
            p.push(Problem::new(
                &root,
                "a profile needs kind = \"router\" or kind = \"host\"",
            ));
            None
        }
    };
    match profile {
        Some(profile) if p.is_empty() => Ok(profile),
        _ => {
            let loc = locate::Locator::new(text);
            Err(p
                .into_iter()
                .map(|p| {
                    let (line, column) = loc.find(&p.at);
                    Diagnostic {
                        file: file.to_path_buf(),
                        line,
                        column,
                        at: p.at.to_string(),
                        message: p.message,
                    }
                })
                .collect())
        }
    }
}

fn serde_problem(text: &str, file: &Path, e: &toml::de::Error) -> Diagnostic {
    let (line, column, at) = match e.span() {
        Some(s) => {
            let (line, column) = locate::line_col(text, s.start);
            let at = locate::Locator::new(text).path_at(s.start).to_string();
            (line, column, at)
        }
        None => (1, 1, String::new()),
    };
    let message = e.message().trim().replace('\n', " ");
    let message = if message.starts_with("unknown field") {
        format!("{message}; remove it or fix its spelling")
    } else {
        message
    };
    Diagnostic {
        file: file.to_path_buf(),
        line,
        column,
        at,
        message,
    }
}

fn check_name(name: &str, p: &mut Vec<Problem>) {
    if !valid_name(name) {
        p.push(Problem::new(
            &KeyPath::root().key("name"),
            format!("profile name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
        ));
    }
}

fn router(raw: &RawRouter, p: &mut Vec<Problem>) -> Option<RouterProfile> {
    let root = KeyPath::root();
    check_name(&raw.name, p);
    let queue_packets = match raw.queue_packets {
        None => DEFAULT_QUEUE_PACKETS,
        Some(q) if (1..=MAX_QUEUE_PACKETS).contains(&q) => q as u32,
        Some(q) => {
            p.push(Problem::new(
                &root.key("queue_packets"),
                format!("queue_packets = {q}; use 1..={MAX_QUEUE_PACKETS}"),
            ));
            DEFAULT_QUEUE_PACKETS
        }
    };
    if raw.modes.is_empty() && raw.terminations.is_empty() {
        p.push(Problem::new(
            &root,
            "a router profile needs at least one [modes.NAME] table (forwarding ceilings) or [terminations.KIND] table (tunnels it terminates)",
        ));
    }
    let modes = modes(raw, &root, p);
    let terminations = terminations(raw, &root, p);
    Some(RouterProfile {
        name: raw.name.clone(),
        description: raw.description.clone(),
        queue_packets,
        modes,
        terminations,
    })
}

/// The profile's forwarding modes, each with its ceilings.
fn modes(raw: &RawRouter, root: &KeyPath, p: &mut Vec<Problem>) -> BTreeMap<String, Mode> {
    let mut modes = BTreeMap::new();
    for (name, m) in &raw.modes {
        let at = root.key("modes").key(name);
        if !valid_name(name) {
            p.push(Problem::new(
                &at,
                format!("mode name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
            ));
        }
        let ceilings = m
            .ceilings
            .iter()
            .enumerate()
            .filter_map(|(i, c)| ceiling(c, &at.key("ceilings").index(i), p))
            .collect();
        modes.insert(
            name.clone(),
            Mode {
                description: m.description.clone(),
                ceilings,
            },
        );
    }
    modes
}

/// The profile's termination ceilings per tunnel kind it can terminate.
fn terminations(
    raw: &RawRouter,
    root: &KeyPath,
    p: &mut Vec<Problem>,
) -> BTreeMap<String, Termination> {
    let mut terminations = BTreeMap::new();
    for (kind, t) in &raw.terminations {
        let at = root.key("terminations").key(kind);
        if !TERMINATION_KINDS.contains(&kind.as_str()) {
            let known: Vec<String> = TERMINATION_KINDS
                .iter()
                .map(|k| format!("\"{k}\""))
                .collect();
            let why = if kind == "ikev2" {
                "an IKEv2 end runs in strongSwan, where tunbench cannot apply ceilings; "
            } else {
                ""
            };
            p.push(Problem::new(
                &at,
                format!(
                    "\"{kind}\" is no tunnel kind a device's termination ceilings apply to; {why}known kinds: {}",
                    known.join(", ")
                ),
            ));
            continue;
        }
        let cat = at.key("ceilings");
        if t.ceilings.is_empty() {
            p.push(Problem::new(
                &at,
                "a termination needs ceilings = [ ... ]: without them it would limit nothing; remove the table or give its ceilings",
            ));
        }
        let ceilings = t
            .ceilings
            .iter()
            .enumerate()
            .filter_map(|(i, c)| ceiling(c, &cat.index(i), p))
            .collect();
        terminations.insert(
            kind.clone(),
            Termination {
                description: t.description.clone(),
                ceilings,
            },
        );
    }
    terminations
}

fn ceiling(c: &RawCeiling, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Ceiling> {
    let before = p.len();
    let direction = word(
        &c.direction,
        &[("upload", Way::Upload), ("download", Way::Download)],
        &at.key("direction"),
        p,
    );
    let family = word(
        &c.family,
        &[("ipv4", Family::Ipv4), ("ipv6", Family::Ipv6)],
        &at.key("family"),
        p,
    );
    let protocol = word(
        &c.protocol,
        &[("tcp", Proto::Tcp), ("udp", Proto::Udp)],
        &at.key("protocol"),
        p,
    );
    let aggregate_bps = c
        .aggregate
        .as_ref()
        .and_then(|v| rate(v, &at.key("aggregate"), p));
    let flow_bps = c.flow.as_ref().and_then(|v| rate(v, &at.key("flow"), p));
    if c.aggregate.is_none() && c.flow.is_none() {
        p.push(Problem::new(
            at,
            "a ceiling needs aggregate (all flows of its class together), flow (each flow on its own), or both",
        ));
    }
    if let (Some(a), Some(f)) = (aggregate_bps, flow_bps) {
        if f > a {
            p.push(Problem::new(
                &at.key("flow"),
                format!(
                    "flow {} is above this entry's aggregate {}: one flow cannot have more than all of them together",
                    show_rate(f),
                    show_rate(a)
                ),
            ));
        }
    }
    if p.len() > before {
        return None;
    }
    Some(Ceiling {
        direction: direction.flatten(),
        family: family.flatten(),
        protocol: protocol.flatten(),
        aggregate_bps,
        flow_bps,
    })
}

/// One of `known` or nothing (None inside: the key was left out; outer None: a
/// problem was reported).
fn word<T: Copy>(
    given: &Option<String>,
    known: &[(&str, T)],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Option<T>> {
    let Some(w) = given else { return Some(None) };
    match known.iter().find(|(k, _)| k == w) {
        Some((_, v)) => Some(Some(*v)),
        None => {
            let names: Vec<String> = known.iter().map(|(k, _)| format!("\"{k}\"")).collect();
            p.push(Problem::new(
                at,
                format!(
                    "\"{w}\" is not one of {}; leave the key out to match every one",
                    names.join(", ")
                ),
            ));
            None
        }
    }
}

fn host(raw: &RawHost, p: &mut Vec<Problem>) -> HostModel {
    check_name(&raw.name, p);
    let at = KeyPath::root().key("udp_receive");
    let (mut v4, mut v6) = (None, None);
    if let Some(u) = &raw.udp_receive {
        v4 = u.ipv4.as_ref().and_then(|v| rate(v, &at.key("ipv4"), p));
        v6 = u.ipv6.as_ref().and_then(|v| rate(v, &at.key("ipv6"), p));
    }
    HostModel {
        profile: raw.name.clone(),
        description: raw.description.clone(),
        udp_receive_ipv4_bps: v4,
        udp_receive_ipv6_bps: v6,
    }
}

/// A rate in the topology's syntax (`"824M"`, `29.43M`, an integer of bit/s),
/// above zero: a ceiling of zero would be a blackhole, not a device model.
fn rate(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u64> {
    let r = match v {
        toml::Value::String(s) => {
            crate::vocab::units::parse_rate(s).map_err(|e| format!("rate {e}"))
        }
        toml::Value::Integer(i) if *i < 0 => Err(format!("rate {i} must not be negative")),
        toml::Value::Integer(i) => Ok(*i as u64),
        _ => Err("a rate is a string such as \"100M\" or a number of bit/s".into()),
    };
    match r {
        Ok(0) => {
            p.push(Problem::new(
                at,
                "a rate of 0 would drop everything; give a rate above zero or leave the key out",
            ));
            None
        }
        Ok(r) if r > MAX_RATE => {
            p.push(Problem::new(
                at,
                format!("rate {} is above 100G", show_rate(r)),
            ));
            None
        }
        Ok(r) => Some(r),
        Err(e) => {
            p.push(Problem::new(at, e));
            None
        }
    }
}

/// bit/s the way the file writes them, e.g. `249M`, `29.43M`.
fn show_rate(bps: u64) -> String {
    for (div, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "K")] {
        let v = bps as f64 / div;
        if v >= 1.0 {
            return format!("{}{suffix}", (v * 1000.0).round() / 1000.0);
        }
    }
    bps.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        parse(text, Path::new("p.toml"))
            .unwrap_err()
            .into_iter()
            .map(|d| d.to_string())
            .collect()
    }

    const HEAD: &str = "kind = \"router\"\nname = \"r\"\n[modes.fast]\n";

    #[test]
    fn built_in_profiles_parse_and_carry_their_own_names() {
        for (name, text) in BUILT_IN {
            let p = parse(text, Path::new(name)).unwrap_or_else(|e| {
                panic!(
                    "{name}: {}",
                    e.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            });
            let got = match &p {
                Profile::Router(r) => &r.name,
                Profile::Host(h) => &h.profile,
            };
            assert_eq!(got, name);
        }
    }

    #[test]
    fn nvr500_fast_mode_has_the_study_figures() {
        let Ok(Profile::Router(r)) = load("nvr500", Path::new("")) else {
            panic!("nvr500 is a router profile")
        };
        assert_eq!(r.queue_packets, 64);
        let fast = &r.modes["fast"];
        let find = |d, f, p| {
            fast.ceilings
                .iter()
                .find(|c| c.direction == Some(d) && c.family == Some(f) && c.protocol == Some(p))
                .cloned()
        };
        let v6_down = find(Way::Download, Family::Ipv6, Proto::Tcp).unwrap();
        assert_eq!(v6_down.flow_bps, Some(249_000_000));
        assert_eq!(v6_down.aggregate_bps, Some(656_690_000));
        assert!(find(Way::Download, Family::Ipv4, Proto::Tcp).is_none());
        let v4_up_udp = find(Way::Upload, Family::Ipv4, Proto::Udp).unwrap();
        assert_eq!(v4_up_udp.aggregate_bps, Some(29_430_000));
        assert_eq!(r.modes["normal"].ceilings.len(), 8);
    }

    #[test]
    fn study_server_limits_count_ip_bytes() {
        let Ok(Profile::Host(h)) = load("nvr500-study-server", Path::new("")) else {
            panic!("nvr500-study-server is a host profile")
        };
        assert_eq!(h.udp_receive_ipv4_bps, Some(312_300_000));
        assert_eq!(h.udp_receive_ipv6_bps, Some(292_500_000));
    }

    #[test]
    fn a_path_is_read_relative_to_the_topology() {
        assert!(is_path("./x.toml") && is_path("x.toml") && is_path("a/b"));
        assert!(!is_path("nvr500"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("h.toml"),
            "kind = \"host\"\nname = \"h\"\nudp_receive = { ipv6 = \"30M\" }\n",
        )
        .unwrap();
        let Ok(Profile::Host(h)) = load("h.toml", dir.path()) else {
            panic!("h.toml is a host profile")
        };
        assert_eq!(
            (h.udp_receive_ipv4_bps, h.udp_receive_ipv6_bps),
            (None, Some(30_000_000))
        );
        assert!(matches!(
            load("nope.toml", dir.path()),
            Err(LoadError::Read { .. })
        ));
        assert!(matches!(
            load("nvr5000", dir.path()),
            Err(LoadError::Unknown)
        ));
    }

    #[test]
    fn ceiling_problems_are_located_in_the_profile() {
        let e = errors(&format!(
            "{HEAD}ceilings = [\n  {{ direction = \"up\", aggregate = \"1M\" }},\n  {{ family = \"ipv4\" }},\n  {{ aggregate = \"0\" }},\n  {{ aggregate = \"100M\", flow = \"200M\" }},\n  {{ flow = \"fast\" }},\n  {{ aggregate = -3 }},\n]\n"
        ));
        let want = [
            "p.toml:5:17: modes.fast.ceilings[0].direction: \"up\" is not one of \"upload\", \"download\"",
            "p.toml:6:3: modes.fast.ceilings[1]: a ceiling needs aggregate",
            "p.toml:7:17: modes.fast.ceilings[2].aggregate: a rate of 0",
            "p.toml:8:32: modes.fast.ceilings[3].flow: flow 200M is above this entry's aggregate 100M",
            "p.toml:9:12: modes.fast.ceilings[4].flow: rate \"fast\" is not a number",
            "p.toml:10:17: modes.fast.ceilings[5].aggregate: rate -3 must not be negative",
        ];
        assert_eq!(e.len(), want.len(), "{e:#?}");
        for (got, want) in e.iter().zip(want) {
            assert!(
                got.starts_with(want),
                "{got}\n  does not start with\n{want}"
            );
        }
    }

    #[test]
    fn terminations_parse_with_their_ceilings() {
        let text = "kind = \"router\"\nname = \"vpn\"\n[terminations.l2tp]\ndescription = \"server\"\nceilings = [\n  { direction = \"upload\", aggregate = \"40M\" },\n  { direction = \"download\", family = \"ipv6\", protocol = \"tcp\", aggregate = \"20M\", flow = \"10M\" },\n]\n";
        let Ok(Profile::Router(r)) = parse(text, Path::new("p.toml")) else {
            panic!("a router profile with only a termination")
        };
        assert!(r.modes.is_empty());
        let t = &r.terminations["l2tp"];
        assert_eq!(t.description.as_deref(), Some("server"));
        assert_eq!(
            t.ceilings,
            vec![
                Ceiling {
                    direction: Some(Way::Upload),
                    family: None,
                    protocol: None,
                    aggregate_bps: Some(40_000_000),
                    flow_bps: None,
                },
                Ceiling {
                    direction: Some(Way::Download),
                    family: Some(Family::Ipv6),
                    protocol: Some(Proto::Tcp),
                    aggregate_bps: Some(20_000_000),
                    flow_bps: Some(10_000_000),
                },
            ]
        );
    }

    #[test]
    fn built_in_terminations_have_the_study_figures() {
        let agg = |r: &RouterProfile, kind: &str, way| {
            r.terminations[kind]
                .ceilings
                .iter()
                .find(|c| c.direction == Some(way))
                .and_then(|c| c.aggregate_bps)
        };
        let Ok(Profile::Router(r)) = load("nvr500", Path::new("")) else {
            panic!("nvr500 is a router profile")
        };
        assert_eq!(agg(&r, "l2tp", Way::Upload), Some(150_000_000));
        assert_eq!(agg(&r, "l2tp", Way::Download), Some(100_000_000));
        let Ok(Profile::Router(r)) = load("openwrt-b4", Path::new("")) else {
            panic!("openwrt-b4 is a router profile")
        };
        assert!(r.modes.is_empty(), "the B4 forwards without ceilings");
        assert_eq!(agg(&r, "dslite", Way::Download), Some(350_000_000));
        assert_eq!(agg(&r, "dslite", Way::Upload), Some(350_000_000));
    }

    #[test]
    fn termination_problems_are_located_in_the_profile() {
        let e = errors(
            "kind = \"router\"\nname = \"r\"\n[terminations.gre]\nceilings = [{ aggregate = \"1M\" }]\n[terminations.ikev2]\nceilings = [{ aggregate = \"1M\" }]\n[terminations.l2tp]\nceilings = [\n  { direction = \"in\", aggregate = \"1M\" },\n  { family = \"ipv4\" },\n]\n[terminations.dslite]\ndescription = \"nothing\"\n",
        );
        let want = [
            "p.toml:12:15: terminations.dslite: a termination needs ceilings",
            "p.toml:3:15: terminations.gre: \"gre\" is no tunnel kind a device's termination ceilings apply to; known kinds: \"l2tp\", \"esp\", \"wireguard\", \"dslite\"",
            "p.toml:5:15: terminations.ikev2: \"ikev2\" is no tunnel kind a device's termination ceilings apply to; an IKEv2 end runs in strongSwan",
            "p.toml:9:17: terminations.l2tp.ceilings[0].direction: \"in\" is not one of \"upload\", \"download\"",
            "p.toml:10:3: terminations.l2tp.ceilings[1]: a ceiling needs aggregate",
        ];
        assert_eq!(e.len(), want.len(), "{e:#?}");
        for (got, want) in e.iter().zip(want) {
            assert!(
                got.starts_with(want),
                "{got}\n  does not start with\n{want}"
            );
        }
        let e = errors(
            "kind = \"router\"\nname = \"r\"\n[terminations.l2tp]\nceilings = [{ aggregate = \"1M\", burst = 1 }]\n",
        );
        assert!(
            e[0].contains("terminations.l2tp.ceilings[0].burst: unknown field `burst`"),
            "{e:?}"
        );
    }

    #[test]
    fn unknown_keys_and_kinds_are_refused() {
        let e = errors(&format!(
            "{HEAD}ceilings = [{{ aggregate = \"1M\", burst = 3 }}]\n"
        ));
        assert!(
            e[0].starts_with("p.toml:4:33: modes.fast.ceilings[0].burst: unknown field `burst`"),
            "{e:?}"
        );
        let e = errors("kind = \"switch\"\nname = \"s\"\n");
        assert!(
            e[0].contains("1:8: kind: unknown profile kind \"switch\""),
            "{e:?}"
        );
        let e = errors("kind = \"host\"\nname = \"h\"\nmodes = {}\n");
        assert!(e[0].contains("unknown field `modes`"), "{e:?}");
        let e = errors("kind = \"router\"\nname = \"r\"\n");
        assert!(e[0].contains("at least one [modes.NAME]"), "{e:?}");
    }
}
