//! `tunbench validate` against a corpus of broken topology files (tests/fixtures/broken/)
//! and the shipped ones (topologies/). Each broken file states what it expects
//! in its first lines:
//!
//! ```text
//! # expect: 9:1: unknown node kind "hots"
//! # expect: 14:5: ...
//! ```
//!
//! Every expectation must appear on a stderr line that starts `FILE:9:1:`, the
//! file must be reported with exactly that many problems, the exit code must be 2,
//! and validating must create no network namespace. Needs no root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MIN_BROKEN: usize = 24;
const NETNS_DIR: &str = "/run/netns";

fn tunbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tunbench"))
}

fn validate(files: &[&Path]) -> Output {
    tunbench()
        .arg("validate")
        .args(files)
        .output()
        .expect("running tunbench validate")
}

fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// The `.toml` files of a directory, sorted.
fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

fn namespaces() -> BTreeSet<String> {
    match std::fs::read_dir(NETNS_DIR) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// One `# expect: LINE:COL: TEXT` comment.
#[derive(Debug)]
struct Expect {
    line: usize,
    column: usize,
    text: String,
}

fn expectations(path: &Path, text: &str) -> Result<Vec<Expect>, String> {
    let mut v = Vec::new();
    for (n, l) in text.lines().enumerate() {
        let Some(rest) = l.strip_prefix("# expect:") else {
            continue;
        };
        let mut parts = rest.trim().splitn(3, ':');
        let (Some(line), Some(column), Some(want)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "{}:{}: expect line is not `# expect: LINE:COL: TEXT`",
                path.display(),
                n + 1
            ));
        };
        let (Ok(line), Ok(column)) = (line.trim().parse(), column.trim().parse()) else {
            return Err(format!(
                "{}:{}: expect line has no LINE:COL numbers",
                path.display(),
                n + 1
            ));
        };
        let want = want.trim();
        if want.is_empty() {
            return Err(format!(
                "{}:{}: expect line has no message text",
                path.display(),
                n + 1
            ));
        }
        v.push(Expect {
            line,
            column,
            text: want.to_string(),
        });
    }
    if v.is_empty() {
        return Err(format!("{}: has no `# expect:` line", path.display()));
    }
    Ok(v)
}

/// The lab name a file declares, else the file stem: namespaces would start with it.
fn lab_prefix(path: &Path, text: &str) -> String {
    text.lines()
        .find_map(|l| {
            let v = l.strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(v.trim().trim_matches('"').to_string())
        })
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

/// Checks one broken file; every way it falls short, as text.
fn check_broken(path: &Path) -> Vec<String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return vec![format!("{}: {e}", path.display())],
    };
    let expects = match expectations(path, &text) {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let prefix = lab_prefix(path, &text);

    let before = namespaces();
    let out = validate(&[path]);
    let after = namespaces();

    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut fails = Vec::new();
    let show = || format!("\n--- stderr ---\n{stderr}--------------");
    if out.status.code() != Some(2) {
        fails.push(format!(
            "{}: exit code {:?}, want 2{}",
            path.display(),
            out.status.code(),
            show()
        ));
    }
    let reported: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("{}:", path.display())))
        .collect();
    for e in &expects {
        let loc = format!("{}:{}:{}:", path.display(), e.line, e.column);
        let found = reported.iter().any(|l| {
            l.strip_prefix(&loc)
                .is_some_and(|rest| rest.contains(&e.text))
        });
        if !found {
            fails.push(format!(
                "{}: want a line `{loc} ...{}...`{}",
                path.display(),
                e.text,
                show()
            ));
        }
    }
    // A problem is reported once: more lines than expectations means a duplicate
    // or a problem the file did not mean to have.
    if reported.len() != expects.len() {
        fails.push(format!(
            "{}: {} problem lines reported, {} expected{}",
            path.display(),
            reported.len(),
            expects.len(),
            show()
        ));
    }
    let new: Vec<&String> = after
        .difference(&before)
        .filter(|n| n.starts_with(&prefix))
        .collect();
    if !new.is_empty() {
        fails.push(format!(
            "{}: validate created network namespaces {new:?}",
            path.display()
        ));
    }
    fails
}

#[test]
fn broken_files_are_rejected_where_they_say() {
    let files = toml_files(&dir("tests/fixtures/broken"));
    assert!(
        files.len() >= MIN_BROKEN,
        "tests/fixtures/broken has {} topology files; the corpus needs at least {MIN_BROKEN}",
        files.len()
    );
    let fails: Vec<String> = files.iter().flat_map(|f| check_broken(f)).collect();
    assert!(
        fails.is_empty(),
        "{} of {} broken files are not rejected as expected:\n\n{}",
        fails.len(),
        files.len(),
        fails.join("\n\n")
    );
}

#[test]
fn shipped_topologies_validate() {
    let files = toml_files(&dir("topologies"));
    assert!(!files.is_empty(), "topologies/ has no topology files");
    for f in &files {
        // The file alone: nvr500-real.toml names NICs this machine lacks
        // (tests/lab/host_links.rs checks it against emulated hardware).
        let out = tunbench()
            .args(["validate", "--file-only"])
            .arg(f)
            .output()
            .expect("running tunbench validate");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{} does not validate:\n{}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("{}: ok", f.display())),
            "{}: no ok line in {stdout}",
            f.display()
        );
    }
}

#[test]
fn several_files_report_each_bad_one() {
    let good = dir("topologies/two-hosts.toml");
    let broken = dir("tests/fixtures/broken");
    let bad = [
        broken.join("unknown-node-kind.toml"),
        broken.join("toml-syntax-error.toml"),
        broken.join("route-through-host.toml"),
    ];
    let out = validate(&[&bad[0], &good, &bad[1], &bad[2]]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
    for b in &bad {
        let text = std::fs::read_to_string(b).expect("reading broken file");
        for e in expectations(b, &text).expect("expect lines") {
            let loc = format!("{}:{}:{}:", b.display(), e.line, e.column);
            assert!(
                stderr
                    .lines()
                    .any(|l| l.starts_with(&loc) && l.contains(&e.text)),
                "{} is not reported as `{loc} ...{}...` when validated with others:\n{stderr}",
                b.display(),
                e.text
            );
        }
    }
    assert!(
        stdout.contains(&format!("{}: ok", good.display())),
        "the good file among bad ones is not reported ok:\n{stdout}"
    );
    assert!(
        !stderr.contains(&good.display().to_string()),
        "the good file is blamed:\n{stderr}"
    );
}

/// A file placed on several hosts: one line per host, with its nodes and its
/// ends of the links between hosts (VNIs derived from the links' ends).
#[test]
fn placed_file_lists_each_host() {
    let f = dir("topologies/home-split.toml");
    let out = tunbench()
        .args(["validate", "--file-only"])
        .arg(&f)
        .output()
        .expect("running tunbench validate");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let want = format!(
        "{}: ok (3 nodes, 2 links)
  host pc (198.18.230.1, mtu 1550): nodes pc; links to other hosts: pc:eth0 to router (VNI 9993956)
  host router (198.18.230.2, mtu 1550): nodes nvr; links to other hosts: nvr:lan1 to pc (VNI 9993956), nvr:lan2 to server (VNI 5869184)
  host server (198.18.230.3, mtu 1550): nodes server; links to other hosts: server:eth0 to router (VNI 5869184)
",
        f.display()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
