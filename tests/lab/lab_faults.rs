//! Issue 13, the lab's side: a datapath process the lab always knows about, a
//! `status` that tells the truth about dead datapaths, a measurement that names
//! a dead datapath instead of timing out, keys in the lab's topology copy kept
//! from other users, and test-only environment variables off under sudo.

use crate::common::*;
use crate::support::output_of;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The pids of running `tunbench datapath --lab LAB` processes.
fn datapath_pids(lab: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let ours = args.contains(&&b"datapath"[..])
            && args
                .windows(2)
                .any(|w| w[0] == b"--lab" && w[1] == lab.as_bytes());
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rfind(')')
                    .map(|i| s[i + 1..].trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if ours && !zombie {
            pids.push(pid);
        }
    }
    pids
}

fn kill9(pid: i32) {
    // SAFETY: a plain signal to a pid this test found running.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Kills, on drop, any datapath of the lab still running (a leak of the bug
/// under test must not outlive the test).
struct Reaper(String);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in datapath_pids(&self.0) {
            kill9(pid);
        }
    }
}

fn status_json(lab: &str) -> serde_json::Value {
    let o = tunbench(&["status", lab, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()[0].clone()
}

/// The pid of the WireGuard datapath on `node`, from the lab's record.
fn wg_datapath_pid(lab: &str, node: &str) -> i32 {
    let v = status_json(lab);
    let p = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["what"] == format!("the wg datapath on {node}"))
        .unwrap_or_else(|| panic!("no wg datapath on {node} recorded: {v}"));
    p["id"]["pid"].as_i64().unwrap() as i32
}

#[test]
fn an_up_killed_while_starting_its_datapaths_leaves_none_running_and_status_says_starting() {
    let lab = lab_name("lbkill");
    let _g = LabGuard(lab.clone());
    let _r = Reaper(lab.clone());
    // The hook holds `up` between starting a datapath and recording it far
    // longer than the test takes: the test kills `up` inside that window.
    let mut up = KillOnDrop(
        Command::new(bin())
            .args([
                "up",
                topo("wireguard.toml").to_str().unwrap(),
                "--name",
                &lab,
            ])
            .env("TUNBENCH_TEST_RECORD_DELAY_MS", "600000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until("up started a datapath", BOUND, || {
        !datapath_pids(&lab).is_empty()
    });
    // The lab's namespaces are built, its datapaths are not yet running.
    let st = status_json(&lab);
    assert_eq!(st["status"], "starting", "{st}");
    up.0.kill().unwrap(); // SIGKILL: `up` cleans nothing up itself
    up.0.wait().unwrap();
    let st = status_json(&lab);
    assert_eq!(st["status"], "incomplete", "{st}");
    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    // A datapath runs until stopped: one still running is one nothing stopped.
    wait_until(
        "the datapath that `up` started but never recorded ended after `up` and `down`",
        BOUND,
        || datapath_pids(&lab).is_empty(),
    );
}

/// kill -9 of the WireGuard datapath on `node`; its pid, once it is gone.
fn kill_wg_datapath(lab: &str, node: &str) -> i32 {
    let pid = wg_datapath_pid(lab, node);
    kill9(pid);
    wait_until(&format!("kill -9 ended datapath {pid}"), BOUND, || {
        !datapath_pids(lab).contains(&pid)
    });
    pid
}

#[test]
fn status_shows_a_killed_datapath_as_dead_not_its_counters() {
    let lab = lab_name("lbdead");
    let _g = up_named(&topo("wireguard.toml"), &lab);
    assert_eq!(status_json(&lab)["status"], "up");
    let pid = kill_wg_datapath(&lab, "b");
    let v = status_json(&lab);
    assert_eq!(v["status"], "degraded", "{v}");
    let dps = v["datapaths"].as_array().unwrap();
    let b = dps
        .iter()
        .find(|d| d["node"] == "b")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(b["state"], "dead", "{b}");
    assert!(b.get("tun_rx").is_none(), "a dead datapath's counters: {b}");
    assert!(b["reason"].is_string(), "{b}");
    let a = dps.iter().find(|d| d["node"] == "a").unwrap();
    assert_eq!(a["state"], "running", "{a}");
    let t = text(&tunbench(&["status", &lab]));
    assert!(t.contains(&format!("lab {lab} (degraded")), "{t}");
    assert!(
        t.contains(&format!("(pid {pid}) is dead")),
        "the dead datapath is not shown dead:\n{t}"
    );
}

/// `tunbench measure LAB` of one TCP upload cell from a to b through the
/// shipped WireGuard lab's tunnel, `secs` long, without latency probes.
fn wg_measure_args(lab: &str, secs: &str) -> Vec<String> {
    [
        "measure",
        lab,
        "--from",
        "a",
        "--to",
        "b",
        "--to-addr",
        "198.18.71.2",
        "--families",
        "ipv4",
        "--protocols",
        "tcp",
        "--directions",
        "sender",
        "--runs",
        "1",
        "--duration",
        secs,
        "--path",
        "wireguard",
        "--format",
        "json",
        "--no-latency",
    ]
    .map(String::from)
    .to_vec()
}

/// The length of the cells these tests start: far longer than failing one
/// at once takes, so a measurement that ends before it did not run its cell
/// out (or wait on a timeout after it).
const CELL: Duration = Duration::from_secs(60);

#[test]
fn a_measurement_through_a_dead_datapath_fails_its_cell_naming_the_datapath() {
    let lab = lab_name("lbmeas");
    let _g = up_named(&topo("wireguard.toml"), &lab);
    let pid = kill_wg_datapath(&lab, "b");
    let t0 = Instant::now();
    let o = tunbench(
        &wg_measure_args(&lab, &CELL.as_secs().to_string())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let took = t0.elapsed();
    let out = text(&o);
    assert!(
        out.contains(&format!("datapath wg@b (pid {pid}) is not running")),
        "{out}"
    );
    // Named before the cell: its client never started, so met no timeout.
    assert!(
        !out.contains("during this cell"),
        "the cell ran into the dead datapath: {out}"
    );
    assert!(
        took < CELL,
        "a {CELL:?} cell through a dead datapath took {took:?} to fail: {out}"
    );
}

/// Packets b's WireGuard datapath has taken from the network so far.
fn wg_net_rx(lab: &str, node: &str) -> u64 {
    std::fs::read_to_string(state_dir(lab).join(format!("datapath-wg-{node}.json")))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["net_rx"]["packets"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_datapath_dying_in_the_middle_of_a_cell_stops_it_at_once_naming_the_datapath() {
    let lab = lab_name("lbmid");
    let _g = up_named(&topo("wireguard.toml"), &lab);
    let started = Instant::now();
    let mut measure = KillOnDrop(
        Command::new(bin())
            .args(wg_measure_args(&lab, &CELL.as_secs().to_string()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Kill b's datapath once the cell's traffic flows through it: more packets
    // than the handshake and the control connection's exchange make.
    let before = wg_net_rx(&lab, "b");
    wait_until("traffic of the cell through b's datapath", BOUND, || {
        assert!(
            measure.0.try_wait().unwrap().is_none(),
            "measure ended before its traffic reached b's datapath"
        );
        wg_net_rx(&lab, "b") > before + 1_000
    });
    let pid = kill_wg_datapath(&lab, "b");
    // Ends when the cell is failed, or at the latest once the cell had run
    // out and the client waited for the dead server (as it did before).
    wait_exit(
        &mut measure.0,
        "measure ended after the datapath died",
        CELL * 2,
    );
    let took = started.elapsed();
    let out = output_of(&mut measure.0);
    assert!(
        out.contains(&format!(
            "during this cell, datapath wg@b (pid {pid}) is not running"
        )),
        "{out}"
    );
    // The cell began after `started`: run out, it would have ended after CELL.
    assert!(
        took < CELL,
        "a {CELL:?} cell took {took:?} to fail after its datapath died: it was not stopped at once: {out}"
    );
}

#[test]
fn the_lab_copy_of_a_topology_with_keys_is_for_root_only() {
    use std::os::unix::fs::PermissionsExt;
    let lab = lab_name("lbkey");
    let key = text(&tunbench(&["keygen"])).trim().to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keyed.toml");
    let src = std::fs::read_to_string(topo("wireguard.toml")).unwrap();
    let keyed = src.replacen(
        "{ node = \"a\", endpoint = \"198.18.70.1\",",
        &format!("{{ node = \"a\", private_key = \"{key}\", endpoint = \"198.18.70.1\","),
        1,
    );
    assert_ne!(keyed, src);
    std::fs::write(&file, keyed).unwrap();
    let _g = up_named(&file, &lab);
    let copy = state_dir(&lab).join("topology.toml");
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "{} holds a private key and is mode {mode:o}",
        copy.display()
    );
    // Its readers still work: the datapaths run, and status reads it.
    assert_eq!(status_json(&lab)["status"], "up");
}

#[test]
fn the_run_dir_of_the_tests_is_ignored_under_sudo() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("lbsudo");
    let state = dir.path().join(&lab);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("state.json"),
        format!(
            r#"{{"lab":"{lab}","topology":null,"status":"up","created":0,"builder":null,"nodes":[],"processes":[]}}"#
        ),
    )
    .unwrap();
    let run = |sudo: bool| {
        let mut c = Command::new(bin());
        c.args(["status", &lab, "--json"])
            .env("TUNBENCH_RUN_DIR", dir.path())
            .env_remove("SUDO_UID")
            .env_remove("SUDO_USER");
        if sudo {
            c.env("SUDO_UID", "1000").env("SUDO_USER", "someone");
        }
        c.output().unwrap()
    };
    // Without sudo, the tests' own state directory is where the lab is.
    let o = run(false);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(true);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("no lab named {lab}")), "{err}");
    assert!(
        err.contains("ignoring TUNBENCH_RUN_DIR") && err.contains("sudo"),
        "{err}"
    );
}
