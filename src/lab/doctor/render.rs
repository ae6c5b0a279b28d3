//! The doctor's report: an aligned table in three groups and a verdict for
//! people, a JSON array for scripts.

use super::{Check, Kind};
use std::fmt::Write;

/// Which checks a group of the table holds.
type Holds = fn(&Check) -> bool;

/// The groups of the table, in order.
const GROUPS: [(&str, Holds); 3] = [
    ("Required by every lab", |c| {
        c.kind == Kind::Kernel && c.required
    }),
    ("Used by some labs", |c| {
        c.kind == Kind::Kernel && !c.required
    }),
    ("Programs", |c| c.kind == Kind::Program),
];

/// The table and the verdict; `kernel` is the kernel's release.
pub fn text(checks: &[Check], kernel: Option<&str>) -> String {
    let name_width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let status_width = checks.iter().map(|c| status(c).len()).max().unwrap_or(0);
    let indent = " ".repeat(2 + name_width + 2 + status_width + 2);
    let mut s = match kernel {
        Some(k) => format!("What this machine offers tunbench (Linux {k}):\n"),
        None => "What this machine offers tunbench:\n".to_string(),
    };
    for (title, holds) in GROUPS {
        let _ = writeln!(s, "\n{title}");
        for c in checks.iter().filter(|c| holds(c)) {
            let _ = writeln!(
                s,
                "  {:<name_width$}  {:<status_width$}  {}",
                c.name,
                status(c),
                c.needed_by
            );
            if c.available {
                continue;
            }
            match (c.undetermined(), c.kind) {
                (true, _) => {
                    let _ = writeln!(s, "{indent}{}", c.detail.as_deref().unwrap_or_default());
                }
                (false, Kind::Kernel) => {
                    let _ = writeln!(s, "{indent}missing: {}", c.what);
                }
                (false, Kind::Program) => {
                    let why = c.detail.as_deref().unwrap_or("not installed");
                    let _ = writeln!(s, "{indent}missing: {why}; {}", c.what);
                }
            }
            let _ = writeln!(s, "{indent}without: {}", c.without);
        }
    }
    let _ = writeln!(s, "\n{}", verdict(checks));
    s
}

/// "yes", "no" or "unknown"; a program's version where it printed one.
fn status(c: &Check) -> String {
    match (c.available, c.undetermined(), &c.version) {
        (true, _, Some(v)) => v.clone(),
        (true, _, None) => "yes".into(),
        (false, true, _) => "unknown".into(),
        (false, false, _) => "no".into(),
    }
}

/// One line: whether every lab can run here, and what is missing.
pub fn verdict(checks: &[Check]) -> String {
    let names = |f: &dyn Fn(&Check) -> bool| {
        checks
            .iter()
            .filter(|c| f(c))
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let missing = names(&|c| c.required && !c.available && !c.undetermined());
    let untried = names(&|c| c.required && c.undetermined());
    let blocking = match (missing.is_empty(), untried.is_empty()) {
        (true, true) => None,
        (false, true) => Some(format!("{missing} missing")),
        (true, false) => Some(format!("{untried} could not be tried")),
        (false, false) => Some(format!("{missing} missing, {untried} could not be tried")),
    };
    if let Some(b) = blocking {
        return format!("verdict: no lab can run here: {b}");
    }
    let missing = names(&|c| !c.available);
    if missing.is_empty() {
        "verdict: every lab can run here, with everything tunbench can use".into()
    } else {
        format!(
            "verdict: every lab can run here; missing {missing} (each one's `without` says what tunbench does instead)"
        )
    }
}

/// The checks as a JSON array, one object each.
pub fn json(checks: &[Check]) -> String {
    serde_json::to_string_pretty(checks).expect("checks serialize")
}

#[cfg(test)]
mod tests {
    use super::super::{exit_code, kernel_check};
    use super::*;
    use netns::features::{Feature, Found};

    fn program(name: &str, version: Option<&str>) -> Check {
        Check {
            name: name.into(),
            kind: Kind::Program,
            required: false,
            available: version.is_some(),
            version: version.map(String::from),
            what: format!("from Debian's {name}"),
            detail: None,
            needed_by: format!("what runs {name}"),
            without: format!("what happens without {name}"),
        }
    }

    /// A machine with everything but 802.1Q, one probe that could not tell
    /// and one program missing.
    fn made_up() -> Vec<Check> {
        let mut v: Vec<Check> = Feature::ALL
            .iter()
            .map(|&f| {
                let found = match f {
                    Feature::Vlan => Found::Absent("the kernel answered: EOPNOTSUPP".into()),
                    Feature::UdpGro => Found::Unknown("no socket".into()),
                    _ => Found::Present,
                };
                kernel_check(f, found)
            })
            .collect();
        v.push(program("tc", Some("6.1.0")));
        v.push(program("wireguard-go", None));
        v
    }

    #[test]
    fn the_table_groups_aligns_and_says_what_happens_without() {
        let t = text(&made_up(), Some("6.1.0-test"));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "What this machine offers tunbench (Linux 6.1.0-test):"
        );
        let at = |title: &str| lines.iter().position(|l| *l == title).expect(title);
        let (required, some, programs) = (
            at("Required by every lab"),
            at("Used by some labs"),
            at("Programs"),
        );
        assert!(required < some && some < programs);
        let netns = lines
            .iter()
            .position(|l| l.starts_with("  netns "))
            .unwrap();
        let vlan = lines.iter().position(|l| l.starts_with("  vlan ")).unwrap();
        let tc = lines.iter().position(|l| l.starts_with("  tc ")).unwrap();
        assert!(
            required < netns && netns < some && some < vlan && vlan < programs && programs < tc
        );
        // Names and statuses in columns: "wireguard-go" is the widest name.
        let column = "  wireguard-go  ".len();
        assert_eq!(&lines[netns][column..column + 3], "yes");
        assert_eq!(&lines[vlan][column..column + 3], "no ");
        assert_eq!(&lines[tc][column..column + 5], "6.1.0");
        assert!(
            lines[vlan + 1]
                .trim_start()
                .starts_with("missing: 802.1Q VLAN devices, CONFIG_VLAN_8021Q")
        );
        assert!(
            lines[vlan + 2]
                .trim_start()
                .starts_with("without: `validate` and `up` refuse")
        );
        let gro = lines
            .iter()
            .position(|l| l.starts_with("  udp-gro "))
            .unwrap();
        assert_eq!(&lines[gro][column..column + 7], "unknown");
        assert_eq!(lines[gro + 1].trim_start(), "could not tell: no socket");
        assert_eq!(
            lines.last().unwrap(),
            &"verdict: every lab can run here; missing vlan, udp-gro, wireguard-go (each one's `without` says what tunbench does instead)"
        );
    }

    #[test]
    fn exit_1_only_when_something_every_lab_needs_is_missing() {
        let mut v = made_up();
        assert_eq!(exit_code(&v), 0, "vlan and a program missing");
        let veth = v.iter_mut().find(|c| c.name == "veth").unwrap();
        *veth = kernel_check(Feature::Veth, Found::Absent("EOPNOTSUPP".into()));
        assert_eq!(exit_code(&v), 1);
        assert_eq!(verdict(&v), "verdict: no lab can run here: veth missing");
        // A probe that could not tell counts as missing: tunbench cannot use it.
        let mut v = made_up();
        v[0] = kernel_check(Feature::Namespaces, Found::Unknown("not permitted".into()));
        assert_eq!(exit_code(&v), 1);
        assert_eq!(
            verdict(&v),
            "verdict: no lab can run here: netns could not be tried"
        );
        let all: Vec<Check> = made_up().into_iter().filter(|c| c.available).collect();
        assert_eq!(exit_code(&all), 0);
        assert_eq!(
            verdict(&all),
            "verdict: every lab can run here, with everything tunbench can use"
        );
    }

    #[test]
    fn json_is_an_array_of_named_checks_with_versions_only_where_known() {
        let v: serde_json::Value = serde_json::from_str(&json(&made_up())).unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), Feature::ALL.len() + 2);
        let vlan = a.iter().find(|c| c["name"] == "vlan").unwrap();
        assert_eq!(vlan["kind"], "kernel");
        assert_eq!(vlan["available"], false);
        assert_eq!(vlan["required"], false);
        assert!(vlan.get("version").is_none());
        assert!(vlan["without"].as_str().unwrap().contains("refuse"));
        let tc = a.iter().find(|c| c["name"] == "tc").unwrap();
        assert_eq!(tc["kind"], "program");
        assert_eq!(tc["version"], "6.1.0");
        for c in a {
            for key in [
                "name",
                "kind",
                "required",
                "available",
                "what",
                "needed_by",
                "without",
            ] {
                assert!(c.get(key).is_some(), "{key} missing in {c}");
            }
        }
    }
}
