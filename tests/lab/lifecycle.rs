//! Labs leave nothing behind and their records hold up: processes nobody recorded,
//! records that are corrupt, missing or tampered with, and `down`, `clean LAB` and
//! `status` over them. Only labs named here are ever removed (never a bare `clean`).

use crate::common::*;
use std::process::{Command, Stdio};

/// `sleep infinity` started in `ns` by hand, as `ip netns exec` does: no record
/// names it, and it never ends unless something stops it.
fn unrecorded_sleeper(ns: &str) -> KillOnDrop {
    let mut p = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", ns, "sleep", "infinity"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ip netns exec sleep"),
    );
    // `ip netns exec` enters the namespace, then becomes sleep (same pid).
    wait_until(&format!("sleep running in {ns}"), BOUND, || {
        assert!(!p.ended(), "ip netns exec {ns} sleep ended early");
        std::fs::read_to_string(format!("/proc/{}/comm", p.0.id()))
            .is_ok_and(|c| c.trim() == "sleep")
    });
    p
}

/// Removes a namespace made by the test, whatever happens.
struct DelNs(String);

impl Drop for DelNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn add_ns(name: &str) -> DelNs {
    let ok = Command::new("ip")
        .args(["netns", "add", name])
        .status()
        .unwrap();
    assert!(ok.success(), "ip netns add {name}");
    DelNs(name.to_string())
}

fn up_pair(tag: &str) -> (LabGuard, String) {
    let lab = lab_name(tag);
    let (g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    (g, lab)
}

#[test]
fn down_with_a_corrupt_record_stops_a_process_nobody_recorded() {
    let (_g, lab) = up_pair("nsorph");
    let mut p = unrecorded_sleeper(&format!("{lab}-h1"));
    std::fs::write(state_dir(&lab).join("state.json"), "{ not json").unwrap();
    let d = tunbench(&["down", &lab]);
    wait_until("down stopped the process nobody recorded", BOUND, || {
        p.ended()
    });
    assert_gone(&lab);
    // Everything went, and the corrupt record was said.
    assert_eq!(d.status.code(), Some(1), "{}", text(&d));
    assert!(
        text(&d).contains(&format!("lab {lab}: unreadable record")),
        "{}",
        text(&d)
    );
}

#[test]
fn clean_of_a_lab_without_a_record_stops_a_process_nobody_recorded() {
    let (_g, lab) = up_pair("nsorpc");
    let mut p = unrecorded_sleeper(&format!("{lab}-h2"));
    std::fs::remove_dir_all(state_dir(&lab)).unwrap();
    let c = tunbench(&["clean", &lab]);
    assert!(c.status.success(), "{}", text(&c));
    wait_until("clean stopped the process nobody recorded", BOUND, || {
        p.ended()
    });
    assert!(
        text(&c).contains(&format!("{lab}: removed 2 namespaces, stopped 1 processes")),
        "{}",
        text(&c)
    );
    assert_gone(&lab);
}

#[test]
fn down_leaves_alone_a_namespace_the_record_names_but_that_is_not_the_labs() {
    let (_g, lab) = up_pair("nstamp");
    let foreign = format!("{lab}x-foreign");
    let _f = add_ns(&foreign);
    let mut p = unrecorded_sleeper(&foreign);
    // A tampered record claims the foreign namespace.
    let file = state_dir(&lab).join("state.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    s["nodes"].as_array_mut().unwrap().push(serde_json::json!({
        "node": "x", "namespace": foreign, "kind": "host"
    }));
    std::fs::write(&file, serde_json::to_vec(&s).unwrap()).unwrap();
    let d = tunbench(&["down", &lab]);
    assert_eq!(namespaces(&foreign), vec![foreign.clone()], "{}", text(&d));
    assert!(
        !p.ended(),
        "a process of a namespace not the lab's was stopped"
    );
    assert_gone(&lab);
    assert_eq!(d.status.code(), Some(1), "{}", text(&d));
    assert!(
        text(&d).contains(&format!(
            "lab {lab}: left namespace {foreign} alone: the record names it but it carries no tunbench marker"
        )),
        "{}",
        text(&d)
    );
}

#[test]
fn down_after_kill_9_during_up_removes_every_namespace() {
    let lab = lab_name("nsk9");
    let dir = tempfile::tempdir().unwrap();
    let _g = LabGuard(lab.clone());
    // Killed right after its namespaces exist, before the phase that follows.
    let mut child = slow_up_of_chain(&lab, 4, dir.path());
    child.kill().unwrap();
    child.wait().unwrap();
    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert!(text(&d).contains("removed 4 namespaces"), "{}", text(&d));
    assert_gone(&lab);
}

/// A lab directory whose record is not JSON; removed on drop.
struct CorruptLab(String);

impl CorruptLab {
    fn new(tag: &str) -> CorruptLab {
        let lab = lab_name(tag);
        std::fs::create_dir_all(state_dir(&lab)).unwrap();
        std::fs::write(state_dir(&lab).join("state.json"), "{ not json").unwrap();
        CorruptLab(lab)
    }
}

impl Drop for CorruptLab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(state_dir(&self.0));
    }
}

#[test]
fn status_of_every_lab_goes_on_past_a_corrupt_one() {
    // "tnsa…" sorts before "tnsz…": the corrupt lab comes first.
    let bad = CorruptLab::new("nsa");
    let (_g, good) = up_pair("nsz");
    let s = tunbench(&["status"]);
    assert!(
        text(&s).contains(&format!("lab {good} (up)")),
        "{}",
        text(&s)
    );
    assert!(
        text(&s).contains(&format!("lab {}: unreadable record", bad.0)),
        "{}",
        text(&s)
    );
    assert_eq!(s.status.code(), Some(1), "{}", text(&s));
    let j = tunbench(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).expect("status --json");
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .any(|l| l["lab"] == good.as_str()),
        "{}",
        text(&j)
    );
    assert_eq!(j.status.code(), Some(1), "{}", text(&j));
}

#[test]
fn clean_of_named_labs_goes_on_past_one_it_cannot_remove() {
    // A lab directory that cannot be removed: a mount point inside it.
    let stuck_guard = stuck_lab("nsc");
    let stuck = stuck_guard.lab.clone();
    let (_g, lab) = up_pair("nsd");
    let c = tunbench(&["clean", &stuck, &lab]);
    assert_gone(&lab);
    assert!(
        text(&c).contains(&format!("{lab}: removed 2 namespaces")),
        "{}",
        text(&c)
    );
    assert!(text(&c).contains(&format!("lab {stuck}: ")), "{}", text(&c));
    assert_eq!(c.status.code(), Some(1), "{}", text(&c));
}

/// An `up` killed between creating a namespace's file under /run/netns and binding
/// the namespace onto it leaves an empty file that the record names: `down`
/// removes it (it holds no kernel object, so it can carry no marker) and says
/// nothing is wrong. Found by bench/faults.sh (a SIGKILL 3 ms into `up`).
#[test]
fn down_removes_the_empty_file_of_a_namespace_up_never_finished() {
    let (_g, lab) = up_pair("nsholder");
    let holder = format!("{lab}-half");
    let path = std::path::Path::new("/run/netns").join(&holder);
    struct RmFile(std::path::PathBuf);
    impl Drop for RmFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    std::fs::File::create(&path).unwrap();
    let _rm = RmFile(path.clone());
    let file = state_dir(&lab).join("state.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    s["nodes"].as_array_mut().unwrap().push(serde_json::json!({
        "node": "half", "namespace": holder, "kind": "host"
    }));
    std::fs::write(&file, serde_json::to_vec(&s).unwrap()).unwrap();
    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert!(
        !path.exists(),
        "the placeholder is still there: {}",
        text(&d)
    );
    assert_gone(&lab);
}
