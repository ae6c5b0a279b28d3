//! bench/distributed-scale.sh: the files it runs (`--gen`, its default 5,000
//! nodes on 5 hosts) validate and are placed as its report says; a tiny run
//! (10 nodes on 2 emulated hosts, root as CI runs) tables every mode, pings
//! across the link between hosts both ways and leaves nothing; bad arguments
//! are refused before anything is built.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/distributed-scale.sh"))
        .args(["--bin", env!("CARGO_BIN_EXE_tunbench")]);
    c
}

#[test]
fn generated_files_validate_with_a_thousand_nodes_per_host() {
    let dir = tempfile::tempdir().unwrap();
    let o = script()
        .arg("--gen")
        .arg(dir.path())
        .output()
        .expect("running bash");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let placed = dir.path().join("placed.toml");
    let o = tunbench(&["validate", placed.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("ok (5000 nodes, 4999 links)"), "{out}");
    let hosts: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("host host"))
        .collect();
    assert_eq!(hosts.len(), 5, "{out}");
    for line in hosts {
        let nodes = line
            .split("nodes ")
            .nth(1)
            .unwrap()
            .split(';')
            .next()
            .unwrap();
        assert_eq!(nodes.split(", ").count(), 1000, "{}", &line[..80]);
        assert!(line.contains("mtu 1550"), "{}", &line[..80]);
    }
    let file = std::fs::read_to_string(&placed).unwrap();
    assert!(file.contains("4 links cross hosts"), "{}", &file[..600]);
    let single = dir.path().join("single.toml");
    let o = tunbench(&["validate", single.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("host host"), "{}", text(&o));
}

#[test]
fn tiny_run_tables_every_mode_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = script()
        .args(["--nodes", "10", "--hosts", "2"])
        .arg("--out")
        .arg(dir.path())
        .env("SETTLE_BOUND", "0")
        .output()
        .expect("running bash");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o));
    // (row, whether it holds the mode's pings, whether it is one host's).
    for (row, pings, one_host) in [
        ("| parallel | host1 | 5 |", false, true),
        ("| parallel | host2 | 5 |", false, true),
        ("| parallel | all | 10 |", true, false),
        ("| single | solo | 10 |", true, true),
        ("| serial | all | 10 |", true, false),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}:\n{out}"));
        if pings {
            // One link between hosts: each end pings the far one, IPv4 and IPv6.
            assert!(line.contains("| 4/4 |"), "{line}");
        }
        if one_host {
            assert!(line.contains("| nothing |"), "{line}");
        }
    }
    assert!(out.contains("1 links between hosts"), "{out}");
    assert!(out.contains("parallel over one host"), "{out}");
    assert!(dir.path().join("report.md").exists());
    assert!(namespaces("dsc-").is_empty(), "{:?}", namespaces("dsc-"));
}

#[test]
fn bad_arguments_are_refused_before_anything_is_built() {
    for (args, want) in [
        (vec!["--hosts", "1"], "--hosts is 2 to 250"),
        (
            vec!["--nodes", "3", "--hosts", "4"],
            "must be at least --hosts",
        ),
        (vec!["--shape", "ring"], "--shape is chain or star"),
        (
            vec!["--modes", "both"],
            "a mode is parallel, serial or single",
        ),
        (vec!["--rounds", "0"], "--rounds must be a whole number"),
        (vec!["--frobnicate"], "unknown argument"),
    ] {
        let o = script().args(&args).output().expect("running bash");
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}
