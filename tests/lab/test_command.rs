//! `tunbench test`: assertions that hold and fail in a real lab, the exit
//! codes (0, 1, 2), the JUnit XML read back with an XML parser against the
//! elements and attributes the JUnit schema requires, TAP 13 on standard
//! output, several files in distinct labs, and Ctrl-C taking the lab down.

use crate::common::*;
use crate::support::output_of;
use std::path::{Path, PathBuf};

/// Two hosts on a 1400-byte link, with assertions that hold and some that
/// do not.
const MIXED: &str = r#"name = "NAME"
[nodes.h1]
kind = "host"
[nodes.h2]
kind = "host"
[[links]]
a = { port = "h1:eth0", ipv4 = "198.18.0.1/24", ipv6 = "2001:2::1/64" }
b = { port = "h2:eth0", ipv4 = "198.18.0.2/24", ipv6 = "2001:2::2/64" }
mtu = 1400

[[assert]]
name = "reaches"
kind = "reach"
from = "h1"
to = "h2"
family = "ipv6"

[[assert]]
name = "mtu-is-1500"
kind = "path_mtu"
from = "h1"
to = "h2"
family = "ipv4"
equals = 1500

[[assert]]
name = "mtu-is-1400"
kind = "path_mtu"
from = "h1"
to = "2001:2::2"
equals = 1400

[[assert]]
name = "h2-is-unreachable"
kind = "reach"
from = "h1"
to = "198.18.0.2"
expect = "unreachable"

[[assert]]
name = "false"
kind = "command"
node = "h2"
run = ["ip", "route", "get", "198.18.99.1"]
"#;

fn write(dir: &Path, file: &str, lab: &str, text: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, text.replace("NAME", lab)).unwrap();
    p
}

fn attr<'a>(n: &roxmltree::Node<'a, '_>, a: &str) -> &'a str {
    n.attribute(a)
        .unwrap_or_else(|| panic!("<{}> has no {a}=", n.tag_name().name()))
}

#[test]
fn failing_assertions_exit_1_with_junit_and_tap() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("asmix");
    let file = write(dir.path(), "mixed.toml", &lab, MIXED);
    let junit = dir.path().join("junit.xml");
    let _g = LabGuard(lab.clone());
    let o = tunbench(&[
        "test",
        file.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--tap",
    ]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_gone(&lab);

    // TAP 13 on stdout: version, one line per assertion in order, YAML under
    // each failure, the plan last.
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "TAP version 13", "{out}");
    assert_eq!(*lines.last().unwrap(), "1..5", "{out}");
    for (i, (ok, name)) in [
        (true, "reaches"),
        (false, "mtu-is-1500"),
        (true, "mtu-is-1400"),
        (false, "h2-is-unreachable"),
        (false, "false"),
    ]
    .iter()
    .enumerate()
    {
        let want = format!(
            "{} {} - mixed.toml: {name}",
            if *ok { "ok" } else { "not ok" },
            i + 1
        );
        assert!(lines.contains(&want.as_str()), "no '{want}' in\n{out}");
    }
    assert!(
        out.contains("  measured: '1400 bytes to 198.18.0.2"),
        "{out}"
    );
    assert!(out.contains("  expected: '1500 bytes'"), "{out}");
    // The human lines went to stderr.
    assert!(
        err.contains("FAIL mtu-is-1500: measured 1400 bytes to 198.18.0.2"),
        "{err}"
    );
    assert!(err.contains("ok mtu-is-1400: measured 1400 bytes"), "{err}");
    assert!(
        err.contains("FAIL false: measured exit 2 (RTNETLINK answers: Network is unreachable)"),
        "{err}"
    );

    // JUnit: testsuites > testsuite > testcase, with the attributes the
    // schema requires, and the measured and expected values in the failure.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites", "{xml}");
    assert_eq!(attr(&root, "tests"), "5");
    assert_eq!(attr(&root, "failures"), "3");
    assert_eq!(attr(&root, "errors"), "0");
    attr(&root, "time").parse::<f64>().unwrap();
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let suite = &suites[0];
    assert_eq!(suite.tag_name().name(), "testsuite");
    assert_eq!(attr(suite, "name"), "mixed.toml");
    assert_eq!(attr(suite, "tests"), "5");
    assert_eq!(attr(suite, "failures"), "3");
    assert_eq!(attr(suite, "errors"), "0");
    attr(suite, "time").parse::<f64>().unwrap();
    let cases: Vec<_> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 5, "{xml}");
    for c in &cases {
        assert_eq!(attr(c, "classname"), "mixed.toml");
        attr(c, "time").parse::<f64>().unwrap();
    }
    let failure = |name: &str| {
        let c = cases
            .iter()
            .find(|c| attr(c, "name") == name)
            .unwrap_or_else(|| panic!("no testcase {name}"));
        c.children().find(|n| n.has_tag_name("failure"))
    };
    assert!(failure("reaches").is_none());
    let f = failure("mtu-is-1500").expect("a <failure>");
    assert_eq!(attr(&f, "type"), "path_mtu");
    let m = attr(&f, "message");
    assert!(
        m.starts_with("measured 1400 bytes to 198.18.0.2") && m.ends_with("expected 1500 bytes"),
        "{m}"
    );
    assert!(failure("h2-is-unreachable").is_some());
}

#[test]
fn bad_input_exits_2_before_anything_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("asbad");
    let before = namespaces(&lab);
    // An assertion with a node the file does not have.
    let broken = write(
        dir.path(),
        "broken.toml",
        &lab,
        &MIXED.replace("node = \"h2\"", "node = \"h3\""),
    );
    let o = tunbench(&["test", broken.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("assert[4].node: node \"h3\" is not defined"),
        "{}",
        text(&o)
    );
    // A file with nothing to test.
    let none = write(
        dir.path(),
        "none.toml",
        &lab,
        &MIXED[..MIXED.find("[[assert]]").unwrap()],
    );
    let o = tunbench(&["test", none.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no [[assert]] entries"), "{}", text(&o));
    // A scenario no file has.
    let good = write(dir.path(), "good.toml", &lab, MIXED);
    let o = tunbench(&["test", good.to_str().unwrap(), "--scenario", "fast"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(namespaces(&lab), before);
    assert!(!state_dir(&lab).exists());
}

#[test]
fn several_files_run_one_after_another_in_distinct_labs() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("astwo");
    let only_good = |s: &str| {
        let cut = s.find("[[assert]]\nname = \"mtu-is-1500\"").unwrap();
        format!(
            "{}{}",
            &s[..cut],
            "[[assert]]\nname = \"mtu\"\nkind = \"path_mtu\"\nfrom = \"h1\"\nto = \"h2\"\nfamily = \"ipv4\"\nequals = 1400\n"
        )
    };
    // Both files say the same lab name: the second gets LAB-2.
    let a = write(dir.path(), "a.toml", &lab, &only_good(MIXED));
    let b = write(dir.path(), "b.toml", &lab, &only_good(MIXED));
    let _g1 = LabGuard(lab.clone());
    let _g2 = LabGuard(format!("{lab}-2"));
    let junit = dir.path().join("junit.xml");
    let o = tunbench(&[
        "test",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(&format!("# a.toml (lab {lab})")), "{out}");
    assert!(out.contains(&format!("# b.toml (lab {lab}-2)")), "{out}");
    assert!(
        out.contains("4 assertions in 2 suites: 4 passed, 0 failed"),
        "{out}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let names: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .map(|n| attr(&n, "name"))
        .collect();
    assert_eq!(names, ["a.toml", "b.toml"]);
    assert_gone(&lab);
    assert_gone(&format!("{lab}-2"));
}

/// Whether a TCP connection to the measurement server's port is established
/// in the namespace of process `pid` (the lab's server): a run has begun.
fn a_run_is_under_way(pid: u64) -> bool {
    let port = format!(":{:04X}", tunbench::measure::server::SERVER_PORT);
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.len() > 3 && c[1].ends_with(&port) && c[3] == "01"
            })
    })
}

/// The pid of the lab's measurement server on `node`, once it is recorded.
fn measurement_server(lab: &str, node: &str) -> Option<u64> {
    let o = tunbench(&["status", lab, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).ok()?;
    v[0]["processes"]
        .as_array()?
        .iter()
        .find(|p| p["what"] == format!("measurement server on {node}"))
        .and_then(|p| p["id"]["pid"].as_u64())
}

#[test]
fn ctrl_c_during_a_measurement_takes_the_lab_down() {
    use std::time::{Duration, Instant};
    // Made in full, the measurement would last RUNS x SECS; a run under way
    // when Ctrl-C comes ends, the others are never begun. Ending within the
    // rest (a minute) tells the two apart with the lab's teardown to spare.
    const RUNS: u64 = 61;
    const SECS: u64 = 1;
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("asint");
    let text_ = format!(
        r#"{}[[measure]]
from = "h1"
to = "h2"

[[assert]]
name = "long"
kind = "throughput"
expect = "ipv4.tcp.sender >= 1M"
runs = {RUNS}
duration = {SECS}
"#,
        &MIXED[..MIXED.find("[[assert]]").unwrap()],
    );
    let file = write(dir.path(), "long.toml", &lab, &text_);
    let _g = LabGuard(lab.clone());
    let mut test = KillOnDrop(
        std::process::Command::new(bin())
            .args(["test", file.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let server = wait_for("the measurement server on h2 recorded", BOUND, || {
        assert!(test.0.try_wait().unwrap().is_none(), "test ended early");
        measurement_server(&lab, "h2")
    });
    wait_until("the first run connected to the server", BOUND, || {
        a_run_is_under_way(server)
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(test.0.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let interrupted = Instant::now();
    let status = wait_exit(&mut test.0, "test ended after Ctrl-C", BOUND * 6);
    let took = interrupted.elapsed();
    let out = output_of(&mut test.0);
    assert_eq!(status.code(), Some(1), "{out}");
    // The measurement stopped between runs and gave no figure.
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAIL long: measured nothing (") && l.contains("interrupted")),
        "{out}"
    );
    let rest = Duration::from_secs((RUNS - 1) * SECS);
    assert!(
        took < rest,
        "the test ended {took:?} after Ctrl-C: runs were begun after it ({rest:?} of them were left)\n{out}"
    );
    assert_gone(&lab);
}
