//! bench/router-datapaths.sh's table, on a run's files written here (its
//! `--report DIR` renders without running anything): fast and normal medians
//! per cell, their ratio, and the slow path's CPU per Gbit over each normal
//! cell from the stats samples between the cell before's end and its own.
//! Also the argument checks that come before any lab is built.

use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/router-datapaths.sh"));
    c
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

#[test]
fn the_table_gives_ratios_and_cpu_per_gbit_of_the_normal_cells() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("1-new");
    let cell = |mbit: f64| {
        json!({"cell": {"family": "ipv4", "protocol": "tcp", "direction": "sender", "streams": 1},
               "median_bps": mbit * 1e6, "error": null})
    };
    let results = json!({"paths": [
        {"scenario": "fast", "cells": [cell(20000.0)]},
        {"scenario": "normal", "cells": [cell(5000.0)]},
    ]});
    std::fs::write(base.with_extension("json"), results.to_string()).unwrap();
    // 10 Gbit read (1.25e9 bytes) for 0.5 CPU seconds: 0.05 s/Gbit.
    let samples = [
        (100.0, 1.0, 0u64),
        (105.0, 1.2, 625_000_000),
        (110.0, 1.5, 1_250_000_000),
    ]
    .map(|(t, cpu, bytes)| json!({"t": t, "cpu": cpu, "bytes": bytes}).to_string())
    .join("\n");
    std::fs::write(base.with_extension("samples"), samples).unwrap();
    let ends = [(99.0, "fast"), (110.0, "normal")]
        .map(|(t, s)| json!({"t": t, "scenario": s, "cell": "IPv4 TCP upload"}).to_string())
        .join("\n");
    std::fs::write(base.with_extension("ends"), ends).unwrap();
    let o = script().arg("--report").arg(dir.path()).output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("| 1-new | IPv4 TCP upload | 20000 | 5000 | **0.25** | 0.05 |"),
        "{t}"
    );
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    for (args, says) in [
        (vec![], "give one or two tunbench binaries"),
        (vec!["/bin/true"], "not a tunbench binary"),
        (vec!["a", "b", "c"], "give one or two tunbench binaries"),
        (vec!["--bogus"], "unknown option '--bogus'"),
    ] {
        let o = script().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
}
