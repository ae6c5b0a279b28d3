//! `[scenarios.NAME]`: variants of one topology. A scenario is a partial topology
//! merged over the file (tables merge key by key, anything else replaces), so
//! `[scenarios.userspace.tunnels.transix] datapath = "userspace"` changes one
//! setting and keeps the rest. `tunbench run` measures every scenario.
//! Links are an array, so a scenario names the ones it changes:
//! `[scenarios.S.links.lan1]` merges into the `[[links]]` entry with
//! `name = "lan1"` (an array of links would replace them all).
//! `manual = "..."` is a step someone takes by hand before the scenario is
//! measured (the NVR500 study's `ip routing process fast` on the router's console):
//! `tunbench run` prints it and waits; it changes nothing in the lab.

use super::kernel::KernelFacts;
use super::{Diagnostic, InvalidTopology, KeyPath, Seg, Topology, locate, parse_with};
use std::path::Path;

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    /// What to do by hand before this scenario is measured.
    pub manual: Option<String>,
    pub topology: Topology,
    /// The merged file, as the lab built from this scenario keeps it.
    pub text: String,
}

/// The scenarios of a topology file, each resolved and validated for a kernel
/// of the given abilities; empty when the file declares none.
pub fn scenarios_str(
    text: &str,
    path: &Path,
    kernel: KernelFacts,
) -> Result<Vec<Scenario>, InvalidTopology> {
    let mut doc: toml::Table = match text.parse() {
        Ok(d) => d,
        // The base parse reports syntax errors with their location.
        Err(_) => return Ok(Vec::new()),
    };
    let Some(scenarios) = doc.remove("scenarios") else {
        return Ok(Vec::new());
    };
    // The published figures belong to the file, whose results get them once;
    // each scenario's lab is built without them.
    doc.remove("reference");
    let root = KeyPath::root().key("scenarios");
    let mut base = Base {
        doc,
        names: Vec::new(),
        loc: locate::Locator::new(text),
        path,
        kernel,
    };
    let toml::Value::Table(scenarios) = scenarios else {
        return Err(InvalidTopology(vec![base.problem(
            &root,
            "scenarios is a table of [scenarios.NAME] tables".into(),
        )]));
    };
    base.names = scenarios.keys().cloned().collect();
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for (name, v) in scenarios {
        if let Some(s) = base.scenario(name, v, &root, &mut diags) {
            out.push(s);
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(InvalidTopology(diags))
    }
}

/// Keys a scenario cannot change, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    (
        "name",
        "every scenario measures the same paths in the same lab",
    ),
    (
        "measure",
        "every scenario measures the same paths in the same lab",
    ),
    (
        "scenarios",
        "every scenario measures the same paths in the same lab",
    ),
    (
        "assert",
        "every scenario checks the file's assertions; limit one to some scenarios with scenarios = [...] in its [[assert]]",
    ),
    (
        "reference",
        "it belongs to the whole file; give figures for this scenario under [reference.figures.\"SCENARIO/PATH\"]",
    ),
];

/// The file every scenario changes, and what reading one needs.
struct Base<'a> {
    /// The file without its scenarios and published figures.
    doc: toml::Table,
    /// Every scenario the file declares.
    names: Vec<String>,
    loc: locate::Locator<'a>,
    path: &'a Path,
    kernel: KernelFacts,
}

impl Base<'_> {
    fn diagnostic(
        &self,
        (line, column): (usize, usize),
        at: String,
        message: String,
    ) -> Diagnostic {
        Diagnostic {
            file: self.path.to_path_buf(),
            line,
            column,
            at,
            message,
        }
    }

    /// A problem at `at` in the file.
    fn problem(&self, at: &KeyPath, message: String) -> Diagnostic {
        self.diagnostic(self.loc.find(at), at.to_string(), message)
    }

    /// Scenario `name`, resolved and validated; None when it has problems,
    /// which go to `diags`.
    fn scenario(
        &self,
        name: String,
        v: toml::Value,
        root: &KeyPath,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<Scenario> {
        let sat = root.key(&name);
        let toml::Value::Table(mut overrides) = v else {
            diags.push(self.problem(
                &sat,
                format!("scenario \"{name}\" must be a table of settings to change"),
            ));
            return None;
        };
        if !super::valid_name(&name) {
            diags.push(self.problem(
                &sat,
                format!("scenario name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
            ));
            return None;
        }
        let description = match overrides.remove("description") {
            Some(toml::Value::String(s)) => Some(s),
            _ => None,
        };
        let manual = match overrides.remove("manual") {
            None => None,
            Some(toml::Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(_) => {
                diags.push(self.problem(
                    &sat.key("manual"),
                    format!(
                        "manual is the step to take by hand before scenario {name} runs, as a non-empty string, e.g. manual = \"On the router's console: ip routing process fast\""
                    ),
                ));
                return None;
            }
        };
        for (forbidden, why) in FORBIDDEN {
            if overrides.contains_key(*forbidden) {
                diags.push(self.problem(
                    &sat.key(forbidden),
                    format!("a scenario cannot change {forbidden}; {why}"),
                ));
            }
        }
        // Said once above; merged, it would be checked against this lab alone.
        overrides.remove("reference");
        let (merged, by_name) = self.merged(&name, &sat, &overrides, diags)?;
        let text = toml::to_string(&merged).unwrap_or_default();
        match parse_with(&text, self.path, Some(&self.names), self.kernel) {
            Ok(topology) => Some(Scenario {
                name,
                description,
                manual,
                topology,
                text,
            }),
            Err(InvalidTopology(ds)) => {
                for d in ds {
                    let place = self.place(&sat, &merged, &by_name, &overrides, &d.at);
                    diags.push(self.diagnostic(
                        place,
                        d.at,
                        format!("in scenario {name}: {}", d.message),
                    ));
                }
                None
            }
        }
    }

    /// The file with scenario `name`'s `overrides` merged in, its links
    /// changed by name, and only the `[[measure]]` and `[[assert]]` entries
    /// meant for it; with the links' changes by name. None: a link name
    /// matches no link.
    fn merged(
        &self,
        name: &str,
        sat: &KeyPath,
        overrides: &toml::Table,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<(toml::Table, toml::Table)> {
        let mut merged = self.doc.clone();
        let by_name = match overrides.get("links") {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => toml::Table::new(),
        };
        let mut rest = overrides.clone();
        if matches!(rest.get("links"), Some(toml::Value::Table(_))) {
            rest.remove("links");
        }
        let unmatched = merge_links(&mut merged, &by_name);
        for (link, why) in &unmatched {
            diags.push(self.problem(
                &sat.key("links").key(link),
                format!("in scenario {name}: {why}"),
            ));
        }
        if !unmatched.is_empty() {
            return None;
        }
        merge(&mut merged, &rest);
        keep_entries_of(&mut merged, "measure", name);
        keep_entries_of(&mut merged, "assert", name);
        Some((merged, by_name))
    }

    /// Where a problem at `at` (a path in the merged file) is written: at the
    /// scenario's own setting where it has one, else at the base file's.
    fn place(
        &self,
        sat: &KeyPath,
        merged: &toml::Table,
        by_name: &toml::Table,
        overrides: &toml::Table,
        at: &str,
    ) -> (usize, usize) {
        let path_in = parse_path(at);
        if let Some(p) = by_link_name(merged, by_name, &path_in) {
            let mut full = sat.clone();
            full.0.extend(p.0);
            self.loc.find(&full)
        } else if has_path(overrides, &path_in) {
            let mut p = sat.clone();
            p.0.extend(path_in.0.clone());
            self.loc.find(&p)
        } else {
            self.loc.find(&path_in)
        }
    }
}

/// A scenario's lab measures the `[[measure]]` entries meant for it (no
/// `scenarios` key, or one that names it), and checks such `[[assert]]`
/// entries; the key itself goes, since the merged file is one concrete lab
/// with no scenarios of its own.
fn keep_entries_of(doc: &mut toml::Table, key: &str, scenario: &str) {
    let Some(toml::Value::Array(ms)) = doc.get_mut(key) else {
        return;
    };
    ms.retain(|m| match m.get("scenarios") {
        Some(toml::Value::Array(names)) => names.iter().any(|n| n.as_str() == Some(scenario)),
        _ => true,
    });
    for m in ms.iter_mut() {
        if let toml::Value::Table(t) = m {
            t.remove("scenarios");
        }
    }
}

/// Merges each table of `by_name` into the link of that name; the names that
/// match no link (or whose value is no table), with why.
fn merge_links(doc: &mut toml::Table, by_name: &toml::Table) -> Vec<(String, String)> {
    let mut unmatched = Vec::new();
    let mut links = match doc.get_mut("links") {
        Some(toml::Value::Array(a)) => Some(a),
        _ => None,
    };
    let names: Vec<String> = links
        .iter()
        .flat_map(|a| a.iter())
        .filter_map(|l| l.get("name").and_then(|n| n.as_str()).map(String::from))
        .collect();
    for (link, over) in by_name {
        let toml::Value::Table(over) = over else {
            unmatched.push((
                link.clone(),
                format!("links.{link} must be a table of the link's settings to change, e.g. b = \"sw:p5\""),
            ));
            continue;
        };
        let target = links.as_mut().and_then(|a| {
            a.iter_mut()
                .find(|l| l.get("name").and_then(|n| n.as_str()) == Some(link.as_str()))
        });
        match target {
            Some(toml::Value::Table(t)) => merge(t, over),
            _ => unmatched.push((
                link.clone(),
                if names.is_empty() {
                    format!("no link is named \"{link}\"; the file names no link (give one name = \"{link}\" in its [[links]] entry)")
                } else {
                    format!(
                        "no link is named \"{link}\"; named links: {}",
                        names.join(", ")
                    )
                },
            )),
        }
    }
    unmatched
}

/// A problem at `links[i].…` of the merged file, when link i is one the
/// scenario changed by name and the setting is the scenario's: the same path
/// inside the scenario (`links.NAME.…`).
fn by_link_name(merged: &toml::Table, by_name: &toml::Table, path: &KeyPath) -> Option<KeyPath> {
    let [Seg::Key(k), Seg::Index(i), rest @ ..] = path.0.as_slice() else {
        return None;
    };
    if k != "links" {
        return None;
    }
    let name = merged.get("links")?.get(*i)?.get("name")?.as_str()?;
    let over = by_name.get(name)?.as_table()?;
    let rest = KeyPath(rest.to_vec());
    if !rest.0.is_empty() && !has_path(over, &rest) {
        return None;
    }
    let mut p = KeyPath::root().key("links").key(name);
    p.0.extend(rest.0);
    Some(p)
}

/// Tables merge key by key; any other value replaces.
fn merge(base: &mut toml::Table, over: &toml::Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// `tunnels.transix.b4[0].datapath` back into segments.
fn parse_path(s: &str) -> KeyPath {
    let mut p = KeyPath::root();
    for part in s.split('.') {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            p = p.key(key.trim_matches('"'));
        }
        for idx in rest.split(['[', ']']).filter(|x| !x.is_empty()) {
            if let Ok(n) = idx.parse() {
                p = p.index(n);
            }
        }
    }
    p
}

fn has_path(t: &toml::Table, p: &KeyPath) -> bool {
    let mut cur = toml::Value::Table(t.clone());
    for seg in &p.0 {
        cur = match (seg, &cur) {
            (Seg::Key(k), toml::Value::Table(t)) => match t.get(k) {
                Some(v) => v.clone(),
                None => return false,
            },
            (Seg::Index(i), toml::Value::Array(a)) => match a.get(*i) {
                Some(v) => v.clone(),
                None => return false,
            },
            _ => return false,
        };
    }
    !p.0.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "sc"
[nodes.a]
kind = "host"
[nodes.b]
kind = "router"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.0.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.0.2/24" }
"#;

    #[test]
    fn a_scenario_changes_one_setting_and_keeps_the_rest() {
        let text = format!(
            "{BASE}\n[scenarios.plain]\ndescription = \"as written\"\n[scenarios.hostb.nodes.b]\nkind = \"host\"\n"
        );
        let s = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap();
        assert_eq!(s.len(), 2);
        let hostb = s.iter().find(|x| x.name == "hostb").unwrap();
        assert!(!hostb.topology.nodes[1].forwarding);
        let plain = s.iter().find(|x| x.name == "plain").unwrap();
        assert!(plain.topology.nodes[1].forwarding);
        assert_eq!(plain.description.as_deref(), Some("as written"));
        assert_eq!(plain.topology.links.len(), 1);
    }

    #[test]
    fn a_bad_override_is_located_in_the_scenario() {
        let text = format!("{BASE}\n[scenarios.bad.nodes.b]\nkind = \"toaster\"\n");
        let e = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap_err();
        let d = &e.0[0];
        assert!(d.message.starts_with("in scenario bad: "), "{}", d.message);
        assert_eq!(d.line, 12, "{d}");
    }

    #[test]
    fn a_measurement_for_one_scenario_runs_only_there() {
        let text = format!(
            "{BASE}\n[[measure]]\nfrom = \"a\"\nto = \"b\"\nscenarios = [\"one\"]\n\n[scenarios.one]\n[scenarios.two]\n"
        );
        let s = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap();
        let count = |n: &str| {
            s.iter()
                .find(|x| x.name == n)
                .unwrap()
                .topology
                .measurements
                .len()
        };
        assert_eq!((count("one"), count("two")), (1, 0));
        // The merged file is a lab of its own and parses without the scenarios.
        let one = s.iter().find(|x| x.name == "one").unwrap();
        crate::topology::parse_str(&one.text, Path::new("x.toml")).unwrap();
    }

    const NAMED: &str = r#"
name = "sc"
[nodes.a]
kind = "host"
[nodes.b]
kind = "router"
[nodes.c]
kind = "router"
[[links]]
name = "l1"
a = { port = "a:eth0", ipv4 = "198.18.0.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.0.2/24" }
[[links]]
a = { port = "b:eth1", ipv4 = "198.18.1.1/24" }
b = { port = "c:eth1", ipv4 = "198.18.1.2/24" }
"#;

    #[test]
    fn a_scenario_changes_a_link_by_its_name() {
        let text = format!(
            "{NAMED}\n[scenarios.toc.links.l1]\nb = {{ port = \"c:eth0\", ipv4 = \"198.18.0.2/24\" }}\nmtu = 1400\n"
        );
        let s = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap();
        let t = &s[0].topology;
        let c = t.node_index("c").unwrap();
        let l = &t.links[0];
        assert_eq!((l.b.node, l.b.iface.as_str(), l.mtu), (c, "eth0", 1400));
        assert_eq!(l.a.iface, "eth0", "the other end stays");
        assert_eq!(l.name.as_deref(), Some("l1"));
        assert_eq!(t.links.len(), 2);
        assert_eq!(t.links[1].mtu, 1500, "other links stay");
    }

    #[test]
    fn a_link_name_no_link_has_is_an_error_in_the_scenario() {
        let text = format!("{NAMED}\n[scenarios.wan.links.l9]\nmtu = 1400\n");
        let e = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap_err();
        let d = &e.0[0];
        assert_eq!(d.at, "scenarios.wan.links.l9");
        assert_eq!(
            d.message,
            "in scenario wan: no link is named \"l9\"; named links: l1"
        );
        assert_eq!((d.line, d.column), (17, 22), "{d}");
        // The whole file fails the same way.
        assert!(crate::topology::parse_str(&text, Path::new("x.toml")).is_err());
    }

    #[test]
    fn a_bad_change_to_a_named_link_is_located_in_the_scenario() {
        let text = format!("{NAMED}\n[scenarios.loop.links.l1]\nb = \"a:eth1\"\n");
        let e = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap_err();
        let d = &e.0[0];
        assert!(
            d.message
                .contains("both ends of the link are on node \"a\""),
            "{d}"
        );
        assert_eq!((d.line, d.column), (18, 5), "{d}");
    }

    #[test]
    fn link_names_are_unique() {
        let text = NAMED.replace(
            "[[links]]\na = { port = \"b:eth1\"",
            "[[links]]\nname = \"l1\"\na = { port = \"b:eth1\"",
        );
        let e = crate::topology::parse_str(&text, Path::new("x.toml")).unwrap_err();
        assert_eq!(e.0.len(), 1, "{e}");
        assert_eq!(e.0[0].at, "links[1].name");
        assert!(
            e.0[0]
                .message
                .starts_with("link name \"l1\" is already used by links[0]"),
            "{e}"
        );
    }

    #[test]
    fn a_manual_step_is_a_string_and_may_be_all_a_scenario_says() {
        let text = format!(
            "{BASE}\n[scenarios.fast]\nmanual = \"On the router's console: ip routing process fast\"\n[scenarios.plain]\n"
        );
        let s = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap();
        let fast = s.iter().find(|x| x.name == "fast").unwrap();
        assert_eq!(
            fast.manual.as_deref(),
            Some("On the router's console: ip routing process fast")
        );
        assert_eq!(fast.topology.links.len(), 1, "the lab as the file has it");
        assert!(!fast.text.contains("manual"), "not part of the lab");
        let plain = s.iter().find(|x| x.name == "plain").unwrap();
        assert_eq!(plain.manual, None);
        crate::topology::parse_str(&text, Path::new("x.toml")).unwrap();

        for bad in ["manual = 1", "manual = \"  \"", "manual = [\"a\"]"] {
            let text = format!("{BASE}\n[scenarios.fast]\n{bad}\n");
            let e = scenarios_str(&text, Path::new("x.toml"), KernelFacts::FULL).unwrap_err();
            let d = &e.0[0];
            assert_eq!(d.at, "scenarios.fast.manual", "{bad}");
            assert_eq!(d.line, 12, "{bad}: {d}");
            assert!(d.message.contains("non-empty string"), "{d}");
            assert!(crate::topology::parse_str(&text, Path::new("x.toml")).is_err());
        }
    }

    #[test]
    fn no_scenarios_is_an_empty_list() {
        assert!(
            scenarios_str(BASE, Path::new("x.toml"), KernelFacts::FULL)
                .unwrap()
                .is_empty()
        );
    }
}
