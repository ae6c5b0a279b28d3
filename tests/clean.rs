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

#[test]
fn clean_goes_on_past_a_lab_it_cannot_remove_and_names_it() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // "tnsa…" sorts before "tnsz…": the stuck lab comes first. A mount point in
    // its directory keeps it from being removed.
    let stuck_guard = stuck_lab("nsa");
    let stuck = stuck_guard.lab.clone();
    let lab = lab_name("nsz");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let c = tunbench(&["clean"]);
    assert_gone(&lab);
    assert!(text(&c).contains(&format!("lab {stuck}: ")), "{}", text(&c));
    assert_eq!(c.status.code(), Some(1), "{}", text(&c));
}

#[test]
fn clean_stops_processes_in_marked_namespaces_without_a_record() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lab = lab_name("nsorp");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    // Started by hand (`ip netns exec` becomes sleep): no record names it, and
    // it never ends unless something stops it.
    let mut sleeper = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-h1"), "sleep", "infinity"])
            .spawn()
            .unwrap(),
    );
    let pid = sleeper.0.id();
    wait_until(&format!("sleep running in {lab}-h1"), BOUND, || {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    });
    std::fs::remove_dir_all(state_dir(&lab)).unwrap();
    let c = tunbench(&["clean"]);
    assert!(c.status.success(), "{}", text(&c));
    wait_until(
        "clean stopped the process in a marked namespace",
        BOUND,
        || matches!(sleeper.0.try_wait(), Ok(Some(_))),
    );
    assert_gone(&lab);
}

/// `kill -9` of `up` once it has moved the NICs into the lab, then `clean`
/// (run from the machine's namespace, as after a crash): both come back with
/// their state, and nothing of the lab is left. On emulated hardware
/// (tests/common EmulatedHost), so no interface of this machine is touched.
#[test]
fn kill_9_after_a_move_then_clean_gives_the_interfaces_back() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let h = EmulatedHost::new("k9");
    let ip = |args: &[&str]| {
        let o = Command::new("ip")
            .args(["-n", &h.host])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o));
    };
    ip(&["link", "set", "enp1s0", "mtu", "1400"]);
    ip(&["link", "set", "enp2s0", "down"]);
    let before: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    let lab = lab_name("k9m");
    let _g = LabGuard(lab.clone());
    let mut up = KillOnDrop(
        h.command(&[
            "up",
            topo("nvr500-real.toml").to_str().unwrap(),
            "--name",
            &lab,
        ])
        .env("TUNBENCH_TEST_PHASE_DELAY_MS", "1500")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap(),
    );
    // Killed in the delay after the phase that moves the NICs.
    wait_until("up moved enp2s0 out of the host", BOUND, || {
        !h.links().contains(&"enp2s0".to_string())
    });
    up.0.kill().unwrap(); // SIGKILL: no cleanup of its own
    up.0.wait().unwrap();
    assert!(state_dir(&lab).exists(), "the write-ahead record is there");

    let c = tunbench(&["clean"]);
    assert!(c.status.success(), "{}", text(&c));
    assert!(
        text(&c).contains("gave back host interfaces") && text(&c).contains("enp1s0"),
        "{}",
        text(&c)
    );
    assert_gone(&lab);
    let after: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    assert_eq!(after, before, "the NICs as they were before up");
}
