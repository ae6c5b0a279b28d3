//! `run` builds and measures once what is the same on this machine: two
//! scenarios that resolve to the same lab share one (the second shows the
//! first's figures, said so in a note), and a cell two paths ask for the same
//! way is measured once (the second path's cell names the first).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Two hosts; scenario `two` differs from `one` only in words, `three` has h1
/// forward (a lab of its own). Path `b` asks for the very cell `a` measures.
fn three_scenarios(dir: &Path) -> PathBuf {
    let base = std::fs::read_to_string(topo("two-hosts.toml")).unwrap();
    let text = format!(
        r#"{base}
[[measure]]
name = "a"
from = "h1"
to = "h2"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1

[[measure]]
name = "b"
from = "h1"
to = "h2"
scenarios = ["two"]
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1

[scenarios.one]
description = "as built"

[scenarios.two]
description = "the same lab, said differently"

[scenarios.three]
description = "h1 forwards"
nodes.h1.forwarding = true
"#
    );
    let f = dir.join("same.toml");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn scenarios_of_one_lab_and_cells_asked_twice_are_measured_once() {
    let lab = format!("sl{}", std::process::id() % 100000);
    let dir = tempfile::tempdir().unwrap();
    let f = three_scenarios(dir.path());
    let saved = dir.path().join("r.json");
    let _g = LabGuard(lab.clone());
    let o = Command::new(bin())
        .args(["run", f.to_str().unwrap(), "--name", &lab, "--no-latency"])
        .args(["--save", saved.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{out}\n{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let ups: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["what"] == "up")
        .map(|p| p["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(ups, ["one", "three"], "two labs built, not three");
    let path = |label: &str| {
        r["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                format!(
                    "{}/{}",
                    p["scenario"].as_str().unwrap(),
                    p["path"].as_str().unwrap()
                ) == label
            })
            .unwrap_or_else(|| panic!("no path {label} in {r}"))
            .clone()
    };
    let (one, two) = (path("one/a"), path("two/a"));
    assert_eq!(two["same_lab_as"], "one");
    assert_eq!(two["cells"], one["cells"], "two's figures are one's");
    assert!(one["cells"][0]["median_bps"].as_f64().unwrap() > 0.0);
    let b = path("two/b");
    assert_eq!(b["cells"][0]["measured_with"], "one/a", "{b}");
    assert_eq!(b["cells"][0]["median_bps"], one["cells"][0]["median_bps"]);
    assert!(path("three/a")["same_lab_as"].is_null());
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("scenario two builds the same lab as scenario one"),
        "{notes}"
    );
    assert!(notes.contains("path two/b: its IPv4 TCP Sender cell is the one one/a measured"));
    assert!(err.contains("(measured once, with one/a)"), "{err}");
}

/// Two paths the other way round, latency on, 1 s of idle probes per family.
fn two_ways(dir: &Path) -> PathBuf {
    let base = std::fs::read_to_string(topo("two-hosts.toml")).unwrap();
    let entry = |name: &str, from: &str, to: &str| {
        format!(
            r#"
[[measure]]
name = "{name}"
from = "{from}"
to = "{to}"
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1
latency_idle = 1
"#
        )
    };
    let text = format!(
        "{base}{}{}",
        entry("there", "h1", "h2"),
        entry("back", "h2", "h1")
    );
    let f = dir.join("ways.toml");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn idle_latency_is_one_phase_per_lab_and_family_with_every_path_at_once() {
    let lab = format!("sli{}", std::process::id() % 100000);
    let dir = tempfile::tempdir().unwrap();
    let f = two_ways(dir.path());
    let saved = dir.path().join("r.json");
    let _g = LabGuard(lab.clone());
    let o = Command::new(bin())
        .args(["run", f.to_str().unwrap(), "--name", &lab])
        .args(["--save", saved.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let idle: Vec<f64> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["what"] == "idle latency")
        .map(|p| p["seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(idle.len(), 1, "{r}");
    assert!(idle[0] >= 2.0, "1 s of probes per family: {}", idle[0]);
    for p in r["paths"].as_array().unwrap() {
        let idle = p["idle_latency"].as_array().unwrap();
        assert_eq!(idle.len(), 2, "each path its own figure per family: {p}");
        for (_, l) in idle.iter().map(|x| (&x[0], &x[1])) {
            assert!(l["received"].as_u64().unwrap() > 0, "{p}");
        }
    }
}
