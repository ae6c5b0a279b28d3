//! `kill -9` of `tunbench up` midway, then `tunbench clean`: nothing is left.
//! Its own test binary: `clean` removes every lab, so it must not share a
//! process with tests whose labs are up (cargo test runs binaries one by one).

mod common;
use common::*;
use std::process::Command;
use std::sync::Mutex;

/// `clean` removes every lab: the tests here take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn kill_9_during_up_then_clean_leaves_nothing() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_name("k9");
    let dir = tempfile::tempdir().unwrap();
    let _g = LabGuard(lab.clone());
    let mut child = slow_up_of_chain(&lab, 30, dir.path());
    child.kill().unwrap(); // SIGKILL: no cleanup of its own
    child.wait().unwrap();
    assert!(state_dir(&lab).exists(), "the write-ahead record is there");
    assert_eq!(
        namespaces(&format!("{lab}-")).len(),
        30,
        "kill -9 left the namespaces, as expected"
    );

    // A namespace the project did not make is never touched.
    let foreign = format!("{lab}x-foreign");
    assert!(
        Command::new("ip")
            .args(["netns", "add", &foreign])
            .status()
            .unwrap()
            .success()
    );
    let c = tunbench(&["clean"]);
    assert!(c.status.success(), "{}", text(&c));
    assert!(
        text(&c).contains(&format!("{lab}: removed 30 namespaces")),
        "{}",
        text(&c)
    );
    assert_gone(&lab);
    assert_eq!(namespaces(&foreign), vec![foreign.clone()]);
    let _ = Command::new("ip").args(["netns", "del", &foreign]).status();

    // Clean again: nothing to do, still success.
    let again = tunbench(&["clean"]);
    assert!(again.status.success());
}

#[test]
fn clean_finds_marked_namespaces_without_a_record() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_name("mk");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    // Lose the record: the marker on lo still says whose the namespaces are.
    std::fs::remove_dir_all(state_dir(&lab)).unwrap();
    let c = tunbench(&["clean"]);
    assert!(c.status.success(), "{}", text(&c));
    assert!(
        text(&c).contains("(no record): removed 2 namespaces"),
        "{}",
        text(&c)
    );
    assert_gone(&lab);
}
