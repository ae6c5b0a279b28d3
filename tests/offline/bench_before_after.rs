//! bench/before-after.sh's table, on a run's data written here (its `--report
//! DIR` renders a run's table again without running anything, and needs no
//! root): medians with min-max per variant, the median of the per-round
//! ratios after/before (a round where either side failed has no ratio), CPU
//! seconds per Gbit, the header naming both variants, and the runs that failed.
//! Also the argument checks that come before anything is built or run.

use std::path::Path;
use std::process::{Command, Output};

const SETTINGS: &str = "declare -- ROUNDS=\"3\"\ndeclare -- SECS=\"5\"\n\
    declare -- BEFORE_DESC=\"c53648e = commit c53648ed09c9e66ac27e34c4aa559149a40f07b1 (old)\"\n\
    declare -- AFTER_DESC=\"HEAD = commit f969c9b5d93d55dac1a6297623a1e302f0cbdeb7 (new)\"\n\
    declare -- BEFORE_ENVS=\"\"\ndeclare -- AFTER_ENVS=\"TUNBENCH_TUN=tun-rs\"\n\
    declare -- MACHINE=\"2 CPUs (test), Linux 6\"\ndeclare -- LOAD=\"0.10 0.20 0.30\"\n\
    declare -- IPERF=\"iperf 3.12\"\ndeclare -- STARTED=\"2026-12-03T16:00:00Z\"\n\
    declare -- ENDED=\"2026-12-03T16:05:00Z\"\n";

/// (round, variant, path, dir, Gbit/s, CPU seconds); Gbit/s 0 is a failed run.
/// Each run moves 10 Gbit, so CPU s / 10 is the CPU per Gbit.
const RUNS: &[(u32, &str, &str, &str, f64, f64)] = &[
    // WireGuard upload: before 4, 5, 3 -> 4.00 (3.00-5.00); after 4.4, 5, 3.3 ->
    // ratios 1.1, 1.0, 1.1 -> 1.10 (1.00-1.10).
    (1, "before", "wireguard", "upload", 4.0, 3.0),
    (1, "after", "wireguard", "upload", 4.4, 4.0),
    (2, "after", "wireguard", "upload", 5.0, 5.0),
    (2, "before", "wireguard", "upload", 5.0, 2.0),
    (3, "before", "wireguard", "upload", 3.0, 4.0),
    (3, "after", "wireguard", "upload", 3.3, 3.0),
    // DS-Lite download: after failed in round 2, so its figures and the ratios
    // come from rounds 1 and 3 (2 of 3): 2/4 and 6/3 -> median 1.25.
    (1, "before", "dslite", "download", 4.0, 3.0),
    (1, "after", "dslite", "download", 2.0, 3.0),
    (2, "after", "dslite", "download", 0.0, 0.0),
    (2, "before", "dslite", "download", 9.0, 3.0),
    (3, "before", "dslite", "download", 3.0, 3.0),
    (3, "after", "dslite", "download", 6.0, 3.0),
];

fn script() -> Command {
    let mut c = Command::new("bash");
    c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/before-after.sh"));
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes the run's data, renders it, returns report.md.
fn report() -> String {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("settings"), SETTINGS).unwrap();
    let mut tsv = String::from(
        "round\tpos\tvariant\tpath\tdir\tok\tbps\tgbit\tcpu_s\tdatapaths\tretransmits\n",
    );
    for &(round, variant, path, dir, gbps, cpu) in RUNS {
        let pos = if (round % 2 == 1) == (variant == "before") {
            1
        } else {
            2
        };
        if gbps == 0.0 {
            tsv += &format!("{round}\t{pos}\t{variant}\t{path}\t{dir}\t0\t\t\t\t\t\n");
        } else {
            tsv += &format!(
                "{round}\t{pos}\t{variant}\t{path}\t{dir}\t1\t{}\t10\t{cpu}\t2\t0\n",
                gbps * 1e9
            );
        }
    }
    std::fs::write(d.join("runs.tsv"), tsv).unwrap();
    let out = script()
        .arg("--report")
        .arg(d)
        .output()
        .expect("running bash");
    assert!(out.status.success(), "--report failed: {}", stderr(&out));
    let md = std::fs::read_to_string(d.join("report.md")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        md,
        "printed and written differ"
    );
    md
}

/// The table's row for a path ("WireGuard" or "DS-Lite") and direction.
fn row<'a>(md: &'a str, path: &str, dir: &str) -> &'a str {
    md.lines()
        .find(|l| l.starts_with(&format!("| {path} ")) && l.contains(&format!("| {dir} |")))
        .unwrap_or_else(|| panic!("no row {path} {dir} in:\n{md}"))
}

#[test]
fn medians_and_the_median_of_the_per_round_ratios() {
    let md = report();
    assert_eq!(
        row(&md, "WireGuard", "upload"),
        "| WireGuard a -> b (wireguard.toml, scenario tunbench) | upload | 4.00 (3.00-5.00) \
         | 4.40 (3.30-5.00) | **1.10** (1.00-1.10) | 0.300 | 0.400 |"
    );
}

#[test]
fn a_failed_run_drops_its_round_from_that_variant_and_the_ratios() {
    let md = report();
    assert_eq!(
        row(&md, "DS-Lite", "download (-R)"),
        "| DS-Lite client -> server (dslite.toml, scenario userspace) | download (-R) \
         | 4.00 (3.00-9.00) | 4.00 (2.00-6.00) n=2 | **1.25** (0.50-2.00) n=2 | 0.300 | 0.300 |"
    );
    assert!(
        md.contains(
            "1 run(s) failed three times and are missing above: round 2 after dslite download"
        ),
        "{md}"
    );
    // Cells without any run say so instead of a figure.
    assert!(
        row(&md, "DS-Lite", "upload").ends_with("| - | - | - | - | - |"),
        "{md}"
    );
}

#[test]
fn the_header_names_both_variants_the_machine_and_the_settings() {
    let md = report();
    for want in [
        "- before: c53648e = commit c53648ed09c9e66ac27e34c4aa559149a40f07b1 (old)\n",
        "- after: HEAD = commit f969c9b5d93d55dac1a6297623a1e302f0cbdeb7 (new); \
         environment: `TUNBENCH_TUN=tun-rs`\n",
        "- when: 2026-12-03T16:00:00Z to 2026-12-03T16:05:00Z\n",
        "- machine: 2 CPUs (test), Linux 6; load average at the start 0.10 0.20 0.30\n",
        "- 3 round(s), the order of the variants alternating (odd rounds before first); \
         iperf 3.12, TCP, 1 stream, -t 5 s",
    ] {
        assert!(md.contains(want), "no {want:?} in:\n{md}");
    }
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    for (args, says) in [
        (
            &["--rounds", "0", "a", "b"][..],
            "--rounds must be a whole number >= 1",
        ),
        (
            &["--seconds", "x", "a", "b"],
            "--seconds must be a whole number >= 1",
        ),
        (
            &["--after-env", "NOVALUE", "a", "b"],
            "--after-env takes VAR=VALUE",
        ),
        (&["HEAD"], "give BEFORE and AFTER"),
        (&["--frobnicate"], "unknown option '--frobnicate'"),
        (
            &["--report", "/nonexistent"],
            "not the output directory of a before-after run",
        ),
    ] {
        let out = script().args(args).output().expect("running bash");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}
