//! `run --host` on home-split.toml split over three emulated hosts
//! (crate::emulated): each host measures the paths it holds the source of,
//! after the underlay to the next host, with the far parts' servers started
//! by their `up`; and a part that never comes up fails the run in its bound.

use crate::common::*;
use crate::emulated::{Host, Hosts};
use crate::parts::{Parts, on};
use serde_json::Value;

const HOSTS: [&str; 3] = ["pc", "router", "server"];
const UNDERLAY_MTU: u32 = 1550;

/// home-split.toml cut to what the test measures: IPv4 TCP both ways, one
/// run of 2 s per cell, raw and through WireGuard.
pub(crate) fn short_home_split(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(topo("home-split.toml")).unwrap();
    let short = text.replace(
        "runs = 3\nduration = 3\n",
        "runs = 1\nduration = 2\nfamilies = [\"ipv4\"]\nprotocols = [\"tcp\"]\n",
    );
    assert_eq!(short.matches("protocols = [\"tcp\"]").count(), 2, "{short}");
    // Both links shaped: the tests judge what was measured, not how fast, and
    // a path at full speed costs both cores for every second it is measured.
    let short = short.replace(
        "ipv6 = \"2001:2:0:11::250/64\" }\n",
        "ipv6 = \"2001:2:0:11::250/64\" }\nimpairments = { rate = \"50M\" }\n",
    );
    let short = short.replace(
        "ipv6 = \"2001:2:0:1::10/64\" }\n",
        "ipv6 = \"2001:2:0:1::10/64\" }\nimpairments = { rate = \"50M\" }\n",
    );
    assert_eq!(short.matches("rate = \"50M\"").count(), 2, "{short}");
    let path = dir.join("home-split.toml");
    std::fs::write(&path, short).unwrap();
    path.to_str().unwrap().to_string()
}

fn up(h: &Host, file: &str, lab: &str, name: &str) {
    let o = on(h, &["up", file, "--name", lab, "--host", name]);
    assert!(o.status.success(), "up on {name}: {}", text(&o));
}

fn run_json(h: &Host, file: &str, lab: &str, name: &str) -> Value {
    let o = on(
        h,
        &[
            "run", file, "--name", lab, "--host", name, "--format", "json",
        ],
    );
    assert!(o.status.success(), "run --host {name}: {}", text(&o));
    serde_json::from_slice(&o.stdout).expect("results JSON")
}

#[test]
fn each_host_measures_its_paths_tcp_both_ways_through_wireguard_across_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let file = short_home_split(dir.path());
    let hosts = Hosts::with_mtu(3, UNDERLAY_MTU);
    let lab = lab_name("xr");
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    for (h, name) in hosts.hosts.iter().zip(HOSTS) {
        up(h, &file, &lab, name);
    }
    let pc = run_json(&hosts.hosts[0], &file, &lab, "pc");
    assert_eq!(pc["host"], "pc");
    let paths = pc["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{pc:#}");
    for p in paths {
        assert_eq!(p["hosts"], serde_json::json!(["pc", "router", "server"]));
        let cells = p["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "sender and receiver: {p:#}");
        for c in cells {
            assert!(c["error"].is_null(), "{c:#}");
            assert!(c["best_bps"].as_f64().unwrap() > 0.0, "{c:#}");
        }
    }
    let underlays = pc["underlays"].as_array().unwrap();
    assert_eq!(underlays.len(), 1, "pc measures its hop to the router");
    let u = &underlays[0];
    assert_eq!(
        (&u["from_host"], &u["to_host"]),
        (&"pc".into(), &"router".into())
    );
    for way in ["upload_bps", "download_bps"] {
        assert!(u[way].as_f64().is_some_and(|b| b > 0.0), "{way}: {u:#}");
    }
    let notes = pc["notes"].to_string();
    assert!(
        notes.contains("path wireguard crosses hosts pc -> router -> server"),
        "{notes}"
    );
    assert!(notes.contains("is round trips only"), "{notes}");
    // The router holds no source: it measures its hop to the server only.
    let router = run_json(&hosts.hosts[1], &file, &lab, "router");
    assert!(router["paths"].as_array().unwrap().is_empty(), "{router:#}");
    let u = &router["underlays"][0];
    assert_eq!(
        (&u["from_host"], &u["to_host"]),
        (&"router".into(), &"server".into())
    );
    assert!(u["upload_bps"].as_f64().is_some_and(|b| b > 0.0), "{u:#}");
}

#[test]
fn a_host_whose_part_never_comes_up_fails_the_run_within_its_bound_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = short_home_split(dir.path());
    let hosts = Hosts::with_mtu(3, UNDERLAY_MTU);
    let lab = lab_name("xw");
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    // The server's part never comes up.
    for (h, name) in hosts.hosts.iter().zip(HOSTS).take(2) {
        up(h, &file, &lab, name);
    }
    let wait = 3;
    let o = on(
        &hosts.hosts[0],
        &[
            "run",
            &file,
            "--name",
            &lab,
            "--host",
            "pc",
            "--wait",
            &wait.to_string(),
        ],
    );
    assert!(!o.status.success(), "{}", text(&o));
    // Given up after the wait asked for, not a runner's own timeout.
    assert!(
        text(&o).contains(
            "host server's part does not answer: nothing accepted a connection at 198.18.230.3:"
        ) && text(&o).contains(&format!("within {wait} s")),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty(), "no figures: {}", text(&o));
    // Nothing measured, nothing changed: the parts that are up stay up.
    assert_eq!(hosts.hosts[0].namespaces().len(), 1);
}

/// Hosts that declare `synchronised_clock` get one-way delays across them
/// (the emulated hosts share this machine's clock, so the declaration is
/// true); the same file without it, round trips only.
#[test]
fn one_way_delays_cross_hosts_only_where_both_clocks_are_declared_synchronised() {
    let dir = tempfile::tempdir().unwrap();
    let file = short_home_split(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    // Only the raw path's IPv4 TCP upload: one cell.
    let one_cell = text.replacen(
        "families = [\"ipv4\"]\n",
        "families = [\"ipv4\"]\ndirections = [\"sender\"]\n",
        2,
    );
    let synced = one_cell.replace("mtu = 1550\n", "mtu = 1550\nsynchronised_clock = true\n");
    assert_eq!(synced.matches("synchronised_clock = true").count(), 3);
    std::fs::write(&file, synced).unwrap();
    let hosts = Hosts::with_mtu(3, UNDERLAY_MTU);
    let lab = lab_name("xs");
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    for (h, name) in hosts.hosts.iter().zip(HOSTS) {
        up(h, &file, &lab, name);
    }
    let pc = run_json(&hosts.hosts[0], &file, &lab, "pc");
    for p in pc["paths"].as_array().unwrap() {
        let latency = &p["cells"][0]["latency"];
        assert!(latency["received"].as_u64().unwrap() > 0, "{p:#}");
        assert!(latency["forward_ms"]["median"].is_number(), "{p:#}");
        assert!(latency["reverse_ms"]["median"].is_number(), "{p:#}");
    }
    let notes = pc["notes"].to_string();
    assert!(
        notes.contains("which the file declares synchronised"),
        "{notes}"
    );
    assert!(!notes.contains("round trips only:"), "{notes}");
}
