//! bench/main-job-before-after.sh's table, on results files written here (its
//! `--report DIR` renders without running anything): each run's wall time and
//! time note, one row per cell with every run's figure and UDP trials, cells
//! shown from another measurement marked, and each AFTER figure judged against
//! the BEFORE runs' range widened by its own width. Also the argument checks
//! that come before any lab is built.

use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/main-job-before-after.sh"));
    c
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// A results file: path fast/raw with a TCP cell at `tcp` Mbit/s and a UDP
/// cell at `udp` found in `trials` trials; path fast/speedtest's cell shown
/// from fast/raw's.
fn results(tcp: f64, udp: f64, trials: usize, note: &str) -> serde_json::Value {
    let cell = |protocol: &str, mbit: f64, search: serde_json::Value| {
        json!({
            "cell": {"family": "ipv4", "protocol": protocol, "direction": "sender", "streams": 1},
            "median_bps": mbit * 1e6, "error": null, "search": search,
        })
    };
    let search = json!({"trials": vec![json!({}); trials]});
    let mut shared = cell("tcp", tcp, json!(null));
    shared["measured_with"] = json!("fast/raw");
    json!({
        "notes": [note],
        "paths": [
            {"path": "raw", "scenario": "fast", "cells": [
                cell("tcp", tcp, json!(null)), cell("udp", udp, search)]},
            {"path": "speedtest", "scenario": "fast", "cells": [shared]},
        ]
    })
}

#[test]
fn the_table_judges_each_after_figure_against_the_before_runs_noise() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, tcp, udp, trials, wall) in [
        ("before-1", 900.0, 30.0, 8, 865),
        ("after-1", 905.0, 45.0, 3, 470),
        ("before-2", 880.0, 29.0, 8, 890),
    ] {
        let note = format!("time: {name}");
        std::fs::write(
            d.join(format!("{name}.json")),
            results(tcp, udp, trials, &note).to_string(),
        )
        .unwrap();
        std::fs::write(d.join(format!("{name}.wall")), format!("{wall}\n")).unwrap();
    }
    let o = script().arg("--report").arg(d).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("- after-1: 470 s wall. time: after-1"), "{t}");
    assert!(
        t.contains("| cell | before-1 | after-1 | before-2 | AFTER vs BEFORE |"),
        "runs in round order, BEFORE first: {t}"
    );
    // TCP: before 880-900 (width 20), after 905: within 860-920.
    assert!(
        t.contains("| fast/raw ipv4 tcp sender | 900.0 | 905.0 | 880.0 | same |"),
        "{t}"
    );
    // UDP: before 29-30 (width 1), after 45: 50 % past 30.
    assert!(
        t.contains("| fast/raw ipv4 udp sender | 30.0 (8 tr) | 45.0 (3 tr) | 29.0 (8 tr) | outside (+50 % past the BEFORE range) |"),
        "{t}"
    );
    assert!(
        t.contains("| fast/speedtest ipv4 tcp sender | 900.0 = | 905.0 = |"),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(d.join("report.md")).unwrap().trim(),
        String::from_utf8_lossy(&o.stdout).trim()
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    for (args, says) in [
        (vec![], "give two tunbench binaries"),
        (vec!["/bin/true", "/bin/false"], "not a tunbench binary"),
        (
            vec!["--rounds", "0", "a", "b"],
            "--rounds must be a whole number",
        ),
        (vec!["--bogus"], "unknown option '--bogus'"),
        (
            vec!["--order", "before,later", "a", "b"],
            "--order lists before and after only (got 'later')",
        ),
    ] {
        let o = script().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    let empty = tempfile::tempdir().unwrap();
    let o = script().arg("--report").arg(empty.path()).output().unwrap();
    assert!(text(&o).contains("no results files"), "{}", text(&o));
}
