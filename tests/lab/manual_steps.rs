//! `[scenarios.NAME] manual = "..."`: a step taken by hand before a scenario is
//! measured (the NVR500 study's `ip routing process fast` on the router's console).
//! `run` prints it once the scenario's lab is up and waits for Enter on the
//! terminal, or goes on with `--yes`; without a terminal and without `--yes` it
//! refuses before building anything. `validate` and the dry runs show the steps.

use crate::common::pty::AtTerminal;
use crate::common::*;
use crate::support::reading_stdin;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn mx_name(tag: &str) -> String {
    format!("mx{tag}{}", std::process::id() % 100000)
}

const FAST: &str = "On the router's console: ip routing process fast";
const NORMAL: &str = "On the router's console: ip routing process normal";

/// Two hosts, one quick TCP cell, and two scenarios that change nothing but
/// say what to do by hand first. The tests run it with `--no-latency`: they
/// look at the steps and that each scenario is measured, not at figures.
fn two_steps(dir: &Path) -> PathBuf {
    let base = std::fs::read_to_string(topo("two-hosts.toml")).unwrap();
    let text = format!(
        r#"{base}
[[measure]]
from = "h1"
to = "h2"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1

[scenarios.fast]
manual = "{FAST}"

[scenarios.normal]
description = "the slow path"
manual = "{NORMAL}"
"#
    );
    let f = dir.join("steps.toml");
    std::fs::write(&f, text).unwrap();
    f
}

#[test]
fn run_with_yes_prints_each_step_before_its_scenario_and_goes_on() {
    let lab = mx_name("y");
    let dir = tempfile::tempdir().unwrap();
    let f = two_steps(dir.path());
    let _g = LabGuard(lab.clone());
    let o = Command::new(bin())
        .args([
            "run",
            f.to_str().unwrap(),
            "--name",
            &lab,
            "--yes",
            "--no-latency",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{out}\n{err}");
    let fast = err
        .find(&format!(
            "scenario fast, manual step: {FAST}\n(--yes: going on)"
        ))
        .unwrap_or_else(|| panic!("{err}"));
    let normal = err
        .find(&format!(
            "scenario normal, manual step: {NORMAL}\n(--yes: going on)"
        ))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(fast < normal, "in the order run takes them: {err}");
    assert!(!err.contains("press Enter"), "{err}");
    // Only the named scenario, and so only its step.
    let o = Command::new(bin())
        .args([
            "run",
            f.to_str().unwrap(),
            "--name",
            &lab,
            "--yes",
            "--no-latency",
            "--scenario",
            "normal",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{}", text(&o));
    assert!(err.contains(NORMAL) && !err.contains(FAST), "{err}");
    assert!(
        out.contains("fast/raw") && out.contains("normal/raw"),
        "{out}"
    );
    assert_gone(&lab);
}

#[test]
fn without_a_terminal_or_yes_nothing_is_built() {
    let lab = mx_name("t");
    let dir = tempfile::tempdir().unwrap();
    let f = two_steps(dir.path());
    let _g = LabGuard(lab.clone());
    // A pipe that would give Enter is still no terminal: the rule is the
    // terminal, not what stdin happens to hold.
    let mut child = Command::new(bin())
        .args(["run", f.to_str().unwrap(), "--name", &lab])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(b"\n\n");
    let o = child.wait_with_output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains(&format!(
            "scenario fast has a manual step (\"{FAST}\") and standard input is not a terminal"
        )) && t.contains("--yes"),
        "{t}"
    );
    assert!(
        namespaces(&format!("{lab}-")).is_empty(),
        "a namespace was made"
    );
    assert!(!state_dir(&lab).exists(), "a lab record was made");
    // The same with stdin closed.
    let o = Command::new(bin())
        .args(["run", f.to_str().unwrap(), "--name", &lab])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(namespaces(&format!("{lab}-")).is_empty());
}

#[test]
fn at_a_terminal_run_waits_for_enter_and_ctrl_c_takes_the_lab_down() {
    let lab = mx_name("w");
    let dir = tempfile::tempdir().unwrap();
    let f = two_steps(dir.path());
    let _g = LabGuard(lab.clone());

    // Enter at each step: both scenarios measured.
    let mut run = AtTerminal::spawn(&["run", f.to_str().unwrap(), "--name", &lab, "--no-latency"]);
    run.wait_for(
        &format!("scenario fast, manual step: {FAST}"),
        Duration::from_secs(30),
    );
    run.wait_for("press Enter", BOUND);
    // Waiting on the terminal, with the scenario's lab up.
    let pid = run.child.id();
    wait_until("run blocked reading the terminal for Enter", BOUND, || {
        assert!(run.child.try_wait().unwrap().is_none(), "it did not wait");
        reading_stdin(pid)
    });
    assert_eq!(namespaces(&format!("{lab}-")).len(), 2);
    run.pty.press_enter();
    run.wait_for(
        &format!("scenario normal, manual step: {NORMAL}"),
        Duration::from_secs(60),
    );
    run.pty.press_enter();
    let (status, out, err) = run.finish(Duration::from_secs(60));
    assert!(status.success(), "{out}\n{err}");
    assert!(
        out.contains("fast/raw") && out.contains("normal/raw"),
        "{out}"
    );
    assert_gone(&lab);

    // Ctrl-C while waiting: the lab goes down, the run ends.
    let mut run = AtTerminal::spawn(&["run", f.to_str().unwrap(), "--name", &lab]);
    run.wait_for("press Enter", Duration::from_secs(30));
    assert_eq!(namespaces(&format!("{lab}-")).len(), 2);
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGINT) };
    let (status, out, err) = run.finish(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("interrupted while waiting for the manual step of scenario fast"),
        "{err}"
    );
    assert!(!out.contains("raw"), "nothing measured: {out}");
    assert_gone(&lab);
}

#[test]
fn validate_and_the_dry_runs_show_the_steps() {
    let dir = tempfile::tempdir().unwrap();
    let f = two_steps(dir.path());
    let file = f.to_str().unwrap();
    let o = tunbench(&["validate", file]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "  scenario fast, manual step: {FAST}\n  scenario normal, manual step: {NORMAL}"
        )),
        "{t}"
    );

    let o = tunbench(&["run", file, "--dry-run"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&format!(
            "scenario fast\n  manual step (run waits for Enter, or --yes): {FAST}\n  measure fast/raw: h1 -> h2, ipv4 x tcp x sender"
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "scenario normal (the slow path)\n  manual step (run waits for Enter, or --yes): {NORMAL}"
        )),
        "{t}"
    );

    let o = tunbench(&["up", file, "--scenario", "normal", "--dry-run"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.starts_with(&format!(
            "# scenario normal, manual step (`run` waits for it): {NORMAL}\n"
        )),
        "{t}"
    );
}
