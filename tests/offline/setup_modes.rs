//! scripts/setup.sh's modes, through `--list` (which installs nothing): the
//! default mode holds what labs run and none of the tests' tools, `--tests`
//! adds to it, every package the tests' programs come from is there, and every
//! package any mode installs is a word of setup.sh itself (a tool that learns
//! what a fresh machine gets reads those words). A bad argument is refused.

use crate::common;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

const SETUP: &str = "scripts/setup.sh";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn setup(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(SETUP)
        .args(args)
        .current_dir(root())
        .output()
        .expect("running bash scripts/setup.sh")
}

/// The packages `setup.sh --list ARGS` prints, in order, each once.
fn listed(args: &[&str]) -> Vec<String> {
    let mut all = vec!["--list"];
    all.extend(args);
    let out = setup(&all);
    assert!(
        out.status.success(),
        "setup.sh {all:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let valid = |p: &str| {
        p.len() > 1
            && p.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
    };
    let bad: Vec<&String> = lines.iter().filter(|p| !valid(p)).collect();
    assert!(
        bad.is_empty(),
        "setup.sh {all:?}: not package names: {bad:?}"
    );
    let unique: BTreeSet<&String> = lines.iter().collect();
    assert_eq!(
        unique.len(),
        lines.len(),
        "setup.sh {all:?} repeats: {lines:?}"
    );
    lines
}

/// The words of setup.sh's lines that are not comments, split as a package
/// name ends.
fn setup_words() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join(SETUP)).expect("reading scripts/setup.sh");
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| {
            l.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c)))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn the_default_mode_installs_what_labs_run_and_no_test_tool() {
    let runtime = listed(&[]);
    // What tunbench's own messages tell a user to install for IKEv2.
    let strongswan = tunbench::vocab::programs::PACKAGES
        .split_whitespace()
        .chain([tunbench::vocab::programs::PKI_PACKAGE]);
    for needed in ["iproute2", "nftables"].into_iter().chain(strongswan) {
        assert!(
            runtime.iter().any(|p| p == needed),
            "setup.sh's default mode lacks {needed}: {runtime:?}"
        );
    }
    for test_only in [
        "chromium",
        "tshark",
        "irtt",
        "wireguard-go",
        "jq",
        "iperf3",
        "gcc",
        "cargo",
        "shellcheck",
    ] {
        assert!(
            !runtime.iter().any(|p| p == test_only),
            "setup.sh's default mode installs {test_only}, which no lab runs: {runtime:?}"
        );
    }
}

#[test]
fn build_and_tests_add_to_the_runtime() {
    let runtime = listed(&[]);
    let build = listed(&["--build"]);
    let tests = listed(&["--tests"]);
    let both = listed(&["--tests", "--build"]);
    for (mode, list) in [
        ("--build", &build),
        ("--tests", &tests),
        ("--tests --build", &both),
    ] {
        let lacking: Vec<&String> = runtime.iter().filter(|p| !list.contains(p)).collect();
        assert!(
            lacking.is_empty(),
            "setup.sh {mode} lacks runtime's {lacking:?}"
        );
    }
    for p in ["gcc", "libc6-dev", "cargo", "rustc"] {
        assert!(build.iter().any(|b| b == p), "--build lacks {p}: {build:?}");
        assert!(
            !tests.iter().any(|b| b == p),
            "--tests alone has {p}: {tests:?}"
        );
    }
    for p in build.iter().chain(&tests) {
        assert!(both.contains(p), "--tests --build lacks {p}");
    }
}

/// Every program the tests run (tests/common's table) comes from a package
/// `--tests` installs, or from one Debian always has (Essential: yes).
#[test]
fn tests_mode_has_the_package_of_every_program_the_tests_run() {
    let tests = listed(&["--tests"]);
    for (program, package) in common::PACKAGES {
        if tests.iter().any(|p| p == package) {
            continue;
        }
        let essential = Command::new("dpkg-query")
            .args(["-W", "-f=${Essential}", package])
            .output()
            .expect("running dpkg-query");
        assert!(
            String::from_utf8_lossy(&essential.stdout).trim() == "yes",
            "the tests run {program}, from {package}, which setup.sh --tests does not install"
        );
    }
}

#[test]
fn every_listed_package_is_a_word_of_setup_sh() {
    let words = setup_words();
    let all: BTreeSet<String> = listed(&["--tests", "--build"]).into_iter().collect();
    let unnamed: Vec<&String> = all.iter().filter(|p| !words.contains(*p)).collect();
    assert!(
        unnamed.is_empty(),
        "setup.sh installs {unnamed:?} without naming them on a line of its own text"
    );
}

#[test]
fn an_unknown_argument_is_a_usage_error() {
    for args in [&["--test"][..], &["--list", "runtime"][..]] {
        let out = setup(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "setup.sh {args:?}: {err}");
        let bad = args[args.len() - 1];
        assert!(
            err.contains("usage:") && err.contains(bad),
            "setup.sh {args:?} should name {bad} and show the usage: {err}"
        );
        assert!(out.stdout.is_empty(), "setup.sh {args:?} printed a list");
    }
}

/// A script that sources setup.sh passes it its mode: sourced without
/// arguments, setup.sh would read the script's own (a benchmark's round count,
/// a filter for the tests) as its modes.
#[test]
fn every_script_sourcing_setup_sh_names_its_mode() {
    let mut sourcing = Vec::new();
    for dir in ["scripts", "bench"] {
        for entry in std::fs::read_dir(root().join(dir)).expect("reading a script folder") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_none_or(|x| x != "sh") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("reading a script");
            for line in text.lines().map(str::trim) {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let [".", script, rest @ ..] | ["source", script, rest @ ..] = &words[..] {
                    if script.ends_with("setup.sh") {
                        sourcing.push(path.display().to_string());
                        assert!(
                            rest.first().is_some_and(|w| w.starts_with("--")),
                            "{} sources setup.sh without a mode: {line:?}",
                            path.display()
                        );
                    }
                }
            }
        }
    }
    assert!(
        sourcing.len() >= 2,
        "main-job.sh and test.sh source setup.sh, found only {sourcing:?}"
    );
}
