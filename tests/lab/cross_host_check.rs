//! `check` and `[[assert]]` on a lab split over three machines emulated on
//! this one (crate::emulated): home-split.toml's pc, router and server each
//! probe from the nodes they hold, and the union of their verdicts is the
//! one-machine lab's. A part whose far host never came up fails its probes
//! across hosts.

use crate::common::*;
use crate::emulated::{Host, Hosts};
use crate::parts::{Parts, on};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

/// home-split.toml's hosts, in the order of the emulated hosts (underlay
/// 198.18.230.1, .2 and .3, as the file declares).
const HOSTS: [&str; 3] = ["pc", "router", "server"];

/// The underlay MTU the file declares: 1500-byte links plus VXLAN's 50.
const UNDERLAY_MTU: u32 = 1550;

/// Each node the file places, with its host.
const NODES: [(&str, &str); 3] = [("pc", "pc"), ("nvr", "router"), ("server", "server")];

/// A probe's verdict by (from, address): (routing expects a reply, replied).
type Probes = BTreeMap<(String, String), (bool, bool)>;

/// An assertion's verdict by name: "success", "failure", "error" or
/// "skipped: MESSAGE", as JUnit says.
type Asserts = BTreeMap<String, String>;

fn home_split() -> String {
    topo("home-split.toml").to_str().unwrap().to_string()
}

/// Brings up the parts of `names` on `hosts`, in order.
fn up_parts<'a>(hosts: &'a [Host], names: &[&str], lab: &str) -> Parts<'a> {
    let parts = Parts {
        hosts,
        lab: lab.to_string(),
    };
    for (h, name) in hosts.iter().zip(names) {
        let o = on(h, &["up", &home_split(), "--name", lab, "--host", name]);
        assert!(o.status.success(), "up on {name}: {}", text(&o));
    }
    parts
}

/// home-split.toml without its placement: the same lab on one machine.
fn one_machine_file(dir: &Path) -> String {
    let text = std::fs::read_to_string(home_split()).unwrap();
    let mut doc: toml_edit::DocumentMut = text.parse().unwrap();
    doc.remove("hosts");
    for (_, node) in doc["nodes"].as_table_mut().unwrap().iter_mut() {
        node.as_table_mut().unwrap().remove("host");
    }
    let path = dir.join("home-one.toml");
    std::fs::write(&path, doc.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// The probes of a `check --json` answer, and the host and nodes it says it
/// left to other hosts.
fn probes(o: &Output) -> (Probes, serde_json::Value) {
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("check --json: {e}: {}", text(o)));
    let mut out = Probes::new();
    for p in v["probes"].as_array().unwrap() {
        let key = (
            p["from"].as_str().unwrap().to_string(),
            p["addr"].as_str().unwrap().to_string(),
        );
        let verdict = (
            p["unreachable_because"].is_null(),
            p["replied"].as_bool().unwrap(),
        );
        assert!(out.insert(key, verdict).is_none(), "a probe twice: {p}");
    }
    (out, v)
}

/// The verdicts of a JUnit file `tunbench test` wrote.
fn junit(path: &Path) -> Asserts {
    let xml = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|c| {
            let status = match c.children().find(|n| n.is_element()) {
                None => "success".to_string(),
                Some(n) if n.has_tag_name("skipped") => {
                    format!("skipped: {}", n.attribute("message").unwrap_or(""))
                }
                Some(n) => n.tag_name().name().to_string(),
            };
            (c.attribute("name").unwrap().to_string(), status)
        })
        .collect()
}

fn pc_reaches_server_through_wireguard(ping: impl Fn(&str) -> bool) {
    for to in ["198.18.1.10", "198.18.96.2", "2001:2:0:96::2"] {
        eventually(&format!("pc reaches the server at {to}"), || ping(to));
    }
}

/// The one-machine lab's check and assertion verdicts.
fn on_one_machine(dir: &Path) -> (Probes, Asserts) {
    let file = one_machine_file(dir);
    let lab = lab_name("xc1");
    let guard = up_named(Path::new(&file), &lab);
    pc_reaches_server_through_wireguard(|to| ping_from(&lab, "pc", &[to]));
    let check = tunbench(&["check", &lab, "--json"]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    let (probes, _) = probes(&check);
    drop(guard);
    let xml = dir.join("one.xml");
    let lab = lab_name("xc2");
    let _gone = LabGuard(lab.clone());
    let test = std::process::Command::new(bin())
        .args(["test", &file, "--name", &lab, "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(test.status.code(), Some(0), "{}", text(&test));
    (probes, junit(&xml))
}

/// `check --json` of host `name`'s part, which must pass, probe from its
/// nodes only and name the other hosts' nodes.
fn check_part(h: &Host, name: &str, lab: &str) -> Probes {
    let check = on(h, &["check", lab, "--json"]);
    assert_eq!(check.status.code(), Some(0), "on {name}: {}", text(&check));
    let (mine, v) = probes(&check);
    assert_eq!(v["host"], name, "{v}");
    let mut elsewhere: Vec<(String, String)> = Vec::new();
    for e in v["probed_elsewhere"].as_array().unwrap() {
        for n in e["nodes"].as_array().unwrap() {
            elsewhere.push((n.to_string(), e["host"].to_string()));
        }
    }
    let want: Vec<(String, String)> = NODES
        .iter()
        .filter(|(_, host)| *host != name)
        .map(|(n, host)| (format!("{n:?}"), format!("{host:?}")))
        .collect();
    assert_eq!(elsewhere, want, "on {name}");
    for (from, _) in mine.keys() {
        let held = NODES.iter().any(|&(n, host)| n == from && host == name);
        assert!(held, "{name} probed from {from}, which it does not hold");
    }
    mine
}

#[test]
fn split_home_gives_the_one_machine_check_and_assertion_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let (one_probes, one_asserts) = on_one_machine(dir.path());
    // Three nodes, each to the eight addresses of the two others; three
    // assertions.
    assert_eq!((one_probes.len(), one_asserts.len()), (24, 3));
    let hosts = Hosts::with_mtu(3, UNDERLAY_MTU);
    let lab = lab_name("xc3");
    let parts = up_parts(&hosts.hosts, &HOSTS, &lab);
    let pc = &hosts.hosts[0];
    pc_reaches_server_through_wireguard(|to| {
        on(pc, &["exec", &lab, "pc", "--", "ping", "-c1", "-W2", to])
            .status
            .success()
    });
    let mut split_probes = Probes::new();
    let mut split_asserts = Asserts::new();
    for (h, name) in hosts.hosts.iter().zip(HOSTS) {
        split_probes.extend(check_part(h, name, &lab));
        let xml = dir.path().join(format!("{name}.xml"));
        let file = home_split();
        let args = ["test", &file, "--name", &lab, "--host", name, "--junit"];
        let test = h.command(bin()).args(args).arg(&xml).output().unwrap();
        assert_eq!(test.status.code(), Some(0), "on {name}: {}", text(&test));
        for (assertion, verdict) in junit(&xml) {
            if let Some(why) = verdict.strip_prefix("skipped: ") {
                // home-split's assertions all start at pc.
                assert_eq!(why, "left to host pc, which holds node pc", "{assertion}");
            } else {
                let twice = split_asserts.insert(assertion.clone(), verdict);
                assert!(twice.is_none(), "{assertion} checked on two hosts");
            }
        }
        // The part stays up.
        assert_eq!(h.namespaces().len(), 1, "on {name}: {:?}", h.namespaces());
    }
    assert_eq!(split_probes, one_probes);
    assert_eq!(split_asserts, one_asserts);
    let text_check = on(pc, &["check", &lab]);
    assert!(
        text(&text_check).contains(
            "probes from nodes on other hosts: run `tunbench check` there: router (nvr), server (server)"
        ),
        "{}",
        text(&text_check)
    );
    let tap = on(
        &hosts.hosts[1],
        &[
            "test",
            &home_split(),
            "--name",
            &lab,
            "--host",
            "router",
            "--tap",
        ],
    );
    assert!(
        String::from_utf8_lossy(&tap.stdout).contains(
            "ok 1 - home-split.toml: pc-reaches-server-ipv4 # SKIP left to host pc, which holds node pc"
        ),
        "{}",
        text(&tap)
    );
    drop(parts);
}

#[test]
fn a_part_whose_far_host_is_down_fails_its_probes_across_hosts() {
    // pc's and router's parts up; server's never came up.
    let hosts = Hosts::with_mtu(2, UNDERLAY_MTU);
    let lab = lab_name("xc4");
    let _parts = up_parts(&hosts.hosts, &HOSTS[..2], &lab);
    let pc = &hosts.hosts[0];
    eventually("pc reaches the router", || {
        on(
            pc,
            &[
                "exec",
                &lab,
                "pc",
                "--",
                "ping",
                "-c1",
                "-W2",
                "198.18.11.250",
            ],
        )
        .status
        .success()
    });
    let check = on(pc, &["check", &lab, "--json"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    let (probes, _) = probes(&check);
    let server = [
        "198.18.1.10",
        "2001:2:0:1::10",
        "198.18.96.2",
        "2001:2:0:96::2",
    ];
    for ((from, addr), (expected, replied)) in &probes {
        assert_eq!(from, "pc");
        if server.contains(&addr.as_str()) {
            assert!(!replied, "{addr} on the host that is down replied");
        } else if *expected {
            assert!(replied, "{addr} on a host that is up did not reply");
        }
    }
    // Routing expects at least the server's LAN2 addresses.
    let failed: Vec<&String> = probes
        .iter()
        .filter(|(_, (expected, replied))| *expected && !replied)
        .map(|((_, addr), _)| addr)
        .collect();
    assert!(failed.contains(&&"198.18.1.10".to_string()), "{failed:?}");
    let t = text(&on(pc, &["check", &lab]));
    assert!(
        t.contains("FAIL pc -> 198.18.1.10 (server:eth0, on host server): no reply"),
        "{t}"
    );
    assert!(t.contains("failed toward nodes on other hosts"), "{t}");
    // Testing a part that is not up is refused, naming the command that
    // brings it up.
    let file = home_split();
    let missing = on(
        pc,
        &["test", &file, "--name", "xcheck-none", "--host", "pc"],
    );
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(
        text(&missing).contains(&format!(
            "`tunbench up {file} --host pc --name xcheck-none`"
        )),
        "{}",
        text(&missing)
    );
}
