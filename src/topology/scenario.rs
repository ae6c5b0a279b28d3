//! `[scenarios.NAME]`: variants of one topology. A scenario is a partial topology
//! merged over the file (tables merge key by key, anything else replaces), so
//! `[scenarios.userspace.tunnels.transix] datapath = "userspace"` changes one
//! setting and keeps the rest. `tunbench run` measures every scenario.

use super::{Diagnostic, InvalidTopology, KeyPath, Seg, Topology, locate, parse_with};
use std::path::Path;

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    pub topology: Topology,
    /// The merged file, as the lab built from this scenario keeps it.
    pub text: String,
}

/// The scenarios of a topology file, each resolved and validated; empty when the
/// file declares none.
pub fn scenarios_str(text: &str, path: &Path) -> Result<Vec<Scenario>, InvalidTopology> {
    let at = |line, column, at: String, message: String| Diagnostic {
        file: path.to_path_buf(),
        line,
        column,
        at,
        message,
    };
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
    let loc = locate::Locator::new(text);
    let root = KeyPath::root().key("scenarios");
    let toml::Value::Table(scenarios) = scenarios else {
        let (l, c) = loc.find(&root);
        return Err(InvalidTopology(vec![at(
            l,
            c,
            "scenarios".into(),
            "scenarios is a table of [scenarios.NAME] tables".into(),
        )]));
    };
    let mut out = Vec::new();
    let mut diags = Vec::new();
    let names: Vec<String> = scenarios.keys().cloned().collect();
    for (name, v) in scenarios {
        let sat = root.key(&name);
        let toml::Value::Table(mut overrides) = v else {
            let (l, c) = loc.find(&sat);
            diags.push(at(
                l,
                c,
                sat.to_string(),
                format!("scenario \"{name}\" must be a table of settings to change"),
            ));
            continue;
        };
        if !super::valid_name(&name) {
            let (l, c) = loc.find(&sat);
            diags.push(at(
                l,
                c,
                sat.to_string(),
                format!("scenario name \"{name}\" must be 1-32 letters, digits, '-' or '_'"),
            ));
            continue;
        }
        let description = match overrides.remove("description") {
            Some(toml::Value::String(s)) => Some(s),
            _ => None,
        };
        for (forbidden, why) in [
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
                "reference",
                "it belongs to the whole file; give figures for this scenario under [reference.figures.\"SCENARIO/PATH\"]",
            ),
        ] {
            if overrides.contains_key(forbidden) {
                let (l, c) = loc.find(&sat.key(forbidden));
                diags.push(at(
                    l,
                    c,
                    sat.key(forbidden).to_string(),
                    format!("a scenario cannot change {forbidden}; {why}"),
                ));
            }
        }
        // Said once above; merged, it would be checked against this lab alone.
        overrides.remove("reference");
        let mut merged = doc.clone();
        merge(&mut merged, &overrides);
        keep_measurements_of(&mut merged, &name);
        let merged_text = toml::to_string(&merged).unwrap_or_default();
        match parse_with(&merged_text, path, Some(&names)) {
            Ok(topology) => out.push(Scenario {
                name,
                description,
                topology,
                text: merged_text,
            }),
            Err(InvalidTopology(ds)) => {
                // Point at the scenario's own setting where it has one, else at
                // the base file's.
                for d in ds {
                    let path_in = parse_path(&d.at);
                    let (l, c) = if has_path(&overrides, &path_in) {
                        let mut p = sat.clone();
                        p.0.extend(path_in.0.clone());
                        loc.find(&p)
                    } else {
                        loc.find(&path_in)
                    };
                    diags.push(at(l, c, d.at, format!("in scenario {name}: {}", d.message)));
                }
            }
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(InvalidTopology(diags))
    }
}

/// A scenario's lab measures the `[[measure]]` entries meant for it (no
/// `scenarios` key, or one that names it); the key itself goes, since the merged
/// file is one concrete lab with no scenarios of its own.
fn keep_measurements_of(doc: &mut toml::Table, scenario: &str) {
    let Some(toml::Value::Array(ms)) = doc.get_mut("measure") else {
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
        let s = scenarios_str(&text, Path::new("x.toml")).unwrap();
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
        let e = scenarios_str(&text, Path::new("x.toml")).unwrap_err();
        let d = &e.0[0];
        assert!(d.message.starts_with("in scenario bad: "), "{}", d.message);
        assert_eq!(d.line, 12, "{d}");
    }

    #[test]
    fn a_measurement_for_one_scenario_runs_only_there() {
        let text = format!(
            "{BASE}\n[[measure]]\nfrom = \"a\"\nto = \"b\"\nscenarios = [\"one\"]\n\n[scenarios.one]\n[scenarios.two]\n"
        );
        let s = scenarios_str(&text, Path::new("x.toml")).unwrap();
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

    #[test]
    fn no_scenarios_is_an_empty_list() {
        assert!(scenarios_str(BASE, Path::new("x.toml")).unwrap().is_empty());
    }
}
