//! bench/assertions.sh in a tiny mode: a 3-node chain with 2 and 3 assertions,
//! one round, this build's tunbench; its table has a row per count, and its
//! labs are gone afterwards. Also an argument error before anything is built.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/assertions.sh"));
    c
}

#[test]
fn tiny_run_tables_each_count_and_leaves_nothing() {
    let o = script()
        .args([
            "--bin",
            bin(),
            "--nodes",
            "3",
            "--counts",
            "2 3",
            "--rounds",
            "1",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("| chain nodes | assertions |"), "{out}");
    for row in ["| 3 | 2 |", "| 3 | 3 |"] {
        assert!(out.contains(row), "no row {row:?} in:\n{out}");
    }
    for lab in ["sa2", "sa3"] {
        assert_gone(lab);
    }
}

#[test]
fn a_bad_argument_is_refused_before_anything_is_built() {
    let o = script().args(["--nodes", "1"]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--nodes must be at least 2"),
        "{}",
        text(&o)
    );
}
