//! bench/scale.sh in a tiny mode: chains and stars of 3 and 4 nodes, one round,
//! with the test's own tunbench (`--bin`), real labs (root, as CI runs). Its
//! table has a row per shape and size with check's mode and verdict, its labs
//! are gone afterwards, and the host's neighbour-table limits are as before.
//! Also the argument checks that come before anything is built.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/scale.sh"));
    c
}

fn neigh_limits() -> Vec<String> {
    ["ipv4", "ipv6"]
        .iter()
        .flat_map(|f| {
            (1..=3).map(move |t| {
                std::fs::read_to_string(format!("/proc/sys/net/{f}/neigh/default/gc_thresh{t}"))
                    .unwrap_or_default()
            })
        })
        .collect()
}

#[test]
fn tiny_run_tables_every_shape_and_size_and_leaves_nothing() {
    let before = neigh_limits();
    let dir = tempfile::tempdir().unwrap();
    let o = script()
        .args([
            "--bin",
            env!("CARGO_BIN_EXE_tunbench"),
            "--sizes",
            "3 4",
            "--rounds",
            "1",
        ])
        .arg("--out")
        .arg(dir.path())
        .env("SETTLE", "0")
        .output()
        .expect("running bash");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o));
    for row in [
        "| chain | 3 |",
        "| chain | 4 |",
        "| star | 3 |",
        "| star | 4 |",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}:\n{out}"));
        assert!(line.contains("| all | pass |"), "{line}");
    }
    assert!(out.contains("load average"), "{out}");
    assert!(dir.path().join("report.md").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs.tsv"))
            .unwrap()
            .lines()
            .count(),
        5
    );
    for lab in ["scc3", "scc4", "scs3", "scs4"] {
        assert!(namespaces(&format!("{lab}-")).is_empty(), "{lab} left");
    }
    assert_eq!(neigh_limits(), before, "the host's gc_thresh not restored");
}

#[test]
fn bad_arguments_are_refused_before_anything_is_built() {
    for (args, want) in [
        (vec!["--sizes", "1"], "a size is at least 2"),
        (vec!["--sizes", "x"], "a size must be a whole number"),
        (vec!["--shapes", "ring"], "a shape is chain or star"),
        (vec!["--rounds", "0"], "--rounds must be a whole number"),
        (vec!["--frobnicate"], "unknown argument"),
    ] {
        let o = script().args(&args).output().expect("running bash");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}
