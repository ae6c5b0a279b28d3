//! A node's device profile: the `profile`, `mode` and `lan` keys of a node,
//! resolved into its router model (`DeviceModel`) or host limits (`HostModel`).
//!
//! ```toml
//! [nodes.nvr500]
//! kind = "router"
//! profile = "nvr500"      # built in; "./my-router.toml" names a file
//! mode = "fast"           # one of the profile's modes (optional if it has one)
//! lan = "lan1"            # the router's interface toward its LAN
//! ```

use super::profile_file::{self, LoadError, Profile};
use super::raw::RawNode;
use super::resolved::{Node, NodeKind};
use super::{KeyPath, Problem};
use crate::codec::profile::{DeviceModel, HostModel, TerminationModel};
use ipnetwork::IpNetwork;
use std::collections::BTreeMap;
use std::path::Path;

/// A router's termination ceilings per tunnel kind.
pub type Terminations = BTreeMap<String, TerminationModel>;

/// What a node's profile makes of it: a router's forwarding model, a host's
/// limits, and a router's termination ceilings per tunnel kind.
type Models = (Option<DeviceModel>, Option<HostModel>, Terminations);

/// The models of `node` (resolved up to its interfaces) from what `raw` says;
/// `dir` is the topology file's directory, where profile paths start.
pub fn resolve(node: &Node, raw: &RawNode, dir: &Path, p: &mut Vec<Problem>) -> Models {
    let none = || (None, None, Terminations::new());
    let at = &node.at;
    let Some(value) = &raw.profile else {
        stray_keys(raw, at, p, |key| {
            format!(
                "{key} belongs to a router's device profile; add profile = \"NAME\" or remove {key}"
            )
        });
        return none();
    };
    let pat = at.key("profile");
    if matches!(node.kind, NodeKind::Switch | NodeKind::External) {
        p.push(Problem::new(
            &pat,
            format!(
                "device profiles are for routers and hosts tunbench builds; node \"{}\" is {}",
                node.name,
                if node.kind == NodeKind::Switch {
                    "a switch"
                } else {
                    "external: it is the real device"
                }
            ),
        ));
        return none();
    }
    let profile = match profile_file::load(value, dir) {
        Ok(profile) => profile,
        Err(e) => {
            report_load_error(value, e, &pat, p);
            return none();
        }
    };
    match (profile, node.kind) {
        (Profile::Router(r), NodeKind::Router) => router(&r, node, raw, p),
        (Profile::Host(h), NodeKind::Host) => {
            stray_keys(raw, at, p, |key| {
                format!("{key} applies to router profiles; \"{value}\" is a host profile")
            });
            (None, Some(h), Terminations::new())
        }
        (Profile::Router(_), kind) => {
            p.push(Problem::new(
                &pat,
                format!(
                    "\"{value}\" is a router profile; node \"{}\" is a {kind} (use it on a kind = \"router\" node)",
                    node.name
                ),
            ));
            none()
        }
        (Profile::Host(_), kind) => {
            p.push(Problem::new(
                &pat,
                format!(
                    "\"{value}\" is a host profile; node \"{}\" is a {kind} (use it on a kind = \"host\" node)",
                    node.name
                ),
            ));
            none()
        }
    }
}

/// A router profile on a router: its termination ceilings, and the
/// forwarding model of the mode chosen with the node's `lan`.
fn router(
    r: &profile_file::RouterProfile,
    node: &Node,
    raw: &RawNode,
    p: &mut Vec<Problem>,
) -> Models {
    let at = &node.at;
    let terminations: Terminations = r
        .terminations
        .iter()
        .map(|(kind, t)| {
            (
                kind.clone(),
                TerminationModel {
                    profile: r.name.clone(),
                    kind: kind.clone(),
                    description: t.description.clone(),
                    ceilings: t.ceilings.clone(),
                    queue_packets: r.queue_packets,
                },
            )
        })
        .collect();
    if r.modes.is_empty() {
        // Termination ceilings only: nothing the forwarding path limits.
        stray_keys(raw, at, p, |key| {
            format!(
                "{key} belongs to forwarding ceilings; profile \"{}\" has none (no [modes.NAME], only [terminations.KIND]): remove {key}",
                r.name
            )
        });
        return (None, None, terminations);
    }
    let mode = mode(r, raw.mode.as_deref(), at, p);
    let lan = lan(node, raw.lan.as_deref(), at, p);
    let (Some((name, m)), Some(lan)) = (mode, lan) else {
        return (None, None, terminations);
    };
    let model = DeviceModel {
        profile: r.name.clone(),
        mode: name,
        description: m.description.clone().or(r.description.clone()),
        lan,
        ceilings: m.ceilings.clone(),
        queue_packets: r.queue_packets,
        bypass: Vec::new(),
    };
    (Some(model), None, terminations)
}

/// `mode` and `lan` where the profile (or its absence) gives them no use:
/// one problem each, worded by `why`.
fn stray_keys(raw: &RawNode, at: &KeyPath, p: &mut Vec<Problem>, why: impl Fn(&str) -> String) {
    for (key, given) in [("mode", &raw.mode), ("lan", &raw.lan)] {
        if given.is_some() {
            p.push(Problem::new(&at.key(key), why(key)));
        }
    }
}

fn report_load_error(value: &str, e: LoadError, at: &KeyPath, p: &mut Vec<Problem>) {
    match e {
        LoadError::Unknown => p.push(Problem::new(
            at,
            format!(
                "unknown profile \"{value}\"; built-in profiles: {}; a file is named by a path relative to this topology (\"./NAME.toml\")",
                profile_file::built_in_names()
            ),
        )),
        LoadError::Read { path, error } => p.push(Problem::new(
            at,
            format!("reading profile file {}: {error}", path.display()),
        )),
        LoadError::Invalid(ds) => {
            for d in ds {
                p.push(Problem::new(at, format!("in profile \"{value}\": {d}")));
            }
        }
    }
}

/// The mode named, or the only one there is.
fn mode<'r>(
    r: &'r profile_file::RouterProfile,
    given: Option<&str>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<(String, &'r profile_file::Mode)> {
    let names = || {
        r.modes
            .keys()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match given {
        Some(m) => match r.modes.get(m) {
            Some(mode) => Some((m.to_string(), mode)),
            None => {
                p.push(Problem::new(
                    &at.key("mode"),
                    format!(
                        "profile \"{}\" has no mode \"{m}\"; its modes: {}",
                        r.name,
                        names()
                    ),
                ));
                None
            }
        },
        None if r.modes.len() == 1 => r.modes.iter().next().map(|(k, m)| (k.clone(), m)),
        None => {
            p.push(Problem::new(
                &at.key("profile"),
                format!(
                    "profile \"{}\" has several modes; choose one with mode = one of {}",
                    r.name,
                    names()
                ),
            ));
            None
        }
    }
}

/// The destinations on the router's LAN side: the subnets of the `lan`
/// interface, and what the node routes through a gateway in them (or out of
/// that interface).
fn lan(
    node: &Node,
    given: Option<&str>,
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Option<Vec<IpNetwork>> {
    let names = node
        .interfaces
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let Some(lan) = given else {
        p.push(Problem::new(
            &at.key("profile"),
            format!(
                "a router profile needs lan = \"IFACE\", the interface toward the router's LAN (download is toward it); interfaces of \"{}\": {names}",
                node.name
            ),
        ));
        return None;
    };
    let Some(iface) = node.interfaces.iter().find(|i| i.name == lan) else {
        p.push(Problem::new(
            &at.key("lan"),
            format!(
                "node \"{}\" has no interface \"{lan}\"; its interfaces: {}",
                node.name,
                if names.is_empty() { "none" } else { &names }
            ),
        ));
        return None;
    };
    let subnets: Vec<IpNetwork> = iface
        .addresses
        .iter()
        .filter_map(|a| IpNetwork::new(a.network(), a.prefix()).ok())
        .collect();
    if subnets.is_empty() {
        p.push(Problem::new(
            &at.key("lan"),
            format!(
                "{}:{lan} has no address, so no destination would be on the LAN side; give the link end an address",
                node.name
            ),
        ));
        return None;
    }
    let mut out = subnets.clone();
    for r in &node.routes {
        let through_lan = match r.via {
            Some(gw) => subnets.iter().any(|s| s.contains(gw)),
            None => r.dev.as_deref() == Some(lan),
        };
        if through_lan && !out.contains(&r.to) {
            out.push(r.to);
        }
    }
    Some(out)
}

/// The topology text with each profile that is a relative path made absolute
/// (against `dir`, the topology's directory): a lab keeps its copy elsewhere,
/// and the copy must name the same files. Node tables and scenarios' node
/// tables are rewritten; everything else stays as written.
pub fn absolute_profile_paths(text: &str, dir: &Path) -> String {
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else {
        return text.to_string();
    };
    fn nodes(t: &mut dyn toml_edit::TableLike, dir: &Path) {
        let Some(nodes) = t.get_mut("nodes").and_then(|n| n.as_table_like_mut()) else {
            return;
        };
        for (_, node) in nodes.iter_mut() {
            let Some(node) = node.as_table_like_mut() else {
                continue;
            };
            let Some(item) = node.get_mut("profile") else {
                continue;
            };
            let Some(v) = item.as_str() else { continue };
            if profile_file::is_path(v) && Path::new(v).is_relative() {
                let abs = std::path::absolute(dir.join(v)).unwrap_or_else(|_| dir.join(v));
                let decor = item.as_value().map(|x| x.decor().clone());
                let mut new = toml_edit::Value::from(abs.to_string_lossy().as_ref());
                if let Some(d) = decor {
                    *new.decor_mut() = d;
                }
                *item = toml_edit::Item::Value(new);
            }
        }
    }
    nodes(doc.as_table_mut(), dir);
    if let Some(scenarios) = doc.get_mut("scenarios").and_then(|s| s.as_table_like_mut()) {
        for (_, s) in scenarios.iter_mut() {
            if let Some(s) = s.as_table_like_mut() {
                nodes(s, dir);
            }
        }
    }
    doc.to_string()
}
