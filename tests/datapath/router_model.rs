//! A router's device model in the slow path, measured with tunbench's own
//! engine: a per-flow ceiling F with an aggregate A gives F to one flow and
//! min(A, n x F) to n flows; an aggregate UDP ceiling holds offered load above
//! it to the ceiling; what no ceiling names is not held back. Ceilings meter
//! transport payload, which is what the engine reports. Each figure is
//! measured until it lies between what the ceiling lets through and
//! `REACHED` of it (`rate_reached`); the ceilings (tests/fixtures/router/model-profile.toml)
//! are low enough that the slow path, not the CPU, holds the traffic.

use crate::common::*;
use crate::support::*;
use std::path::PathBuf;

/// One engine test from left to right (or back with -R) to `to`, 2 s long:
/// the receiver's rate.
fn measure(lab: &str, to: &str, port: u16, args: &[&str]) -> Figure {
    let mut a = vec!["-t", "2"];
    a.extend_from_slice(args);
    let j = engine_json(lab, "left", "right", to, port, &a);
    eprintln!("  (the test's time: {:.2} Mbit/s)", received_bps(&j) / 1e6);
    receiver_rate(&j)
}

#[test]
fn flow_and_aggregate_ceilings_hold_per_direction_and_protocol() {
    let lab = lab_name("rmod");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/router/model.toml");
    let (_g, o) = up(&file, &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // Download (-R): flow 2M, aggregate 8M, in each family: one flow gets
    // the flow ceiling, three get three times it (more than any one flow's
    // bounds let through), six the aggregate (less than six flows' would).
    for (to, fam, streams, ceiling, port) in [
        ("198.18.63.2", "IPv4", 1, 2e6, 5401),
        ("2001:2:0:63::2", "IPv6", 3, 6e6, 5402),
        ("198.18.63.2", "IPv4", 6, 8e6, 5403),
    ] {
        let n = streams.to_string();
        assert_rate(
            &format!("{fam} TCP download, {streams} flows"),
            REACHED * ceiling,
            |secs| ceiling_most(ceiling, secs, streams),
            || measure(&lab, to, port, &["-R", "-P", &n]),
        );
    }
    // UDP upload: 8M offered into a 4M aggregate.
    assert_rate(
        "IPv4 UDP upload at twice the ceiling",
        REACHED * 4e6,
        |secs| ceiling_most(4e6, secs, 1),
        || measure(&lab, "198.18.63.2", 5404, &["-u", "-b", "8M", "-l", "1400"]),
    );
    // TCP upload has no ceiling: nothing holds it back.
    let stats = state_dir(&lab).join("datapath-router.r1.json");
    tcp_passes_by_every_ceiling(&lab, "left", "right", "198.18.63.2", &stats);
    // The model's drops are counted as such in the slow path's stats.
    wait_queue_full_drops(&stats);
}

/// `tunbench run` through a router with the NVR500 profile writes, for each
/// cell, the model's limit on it into the JSON results: the fast path's
/// per-flow IPv6 TCP download ceiling for one stream, nothing for IPv4 TCP
/// download (the profile has no ceiling there), and for TCP through a
/// WireGuard tunnel across the router the UDP upload ceiling its packets
/// meet, turned into inner payload (1420 - 20 - 32 of every 1420 + 32).
#[test]
fn run_writes_the_models_limit_into_each_cell() {
    let lab = lab_name("mlim");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("limit.toml");
    std::fs::write(
        &file,
        format!(
            r#"
name = "{lab}"
[nodes.pc]
kind = "host"
routes = [{{ to = "default", via = "198.18.64.1" }}, {{ to = "default", via = "2001:2:0:64::1" }}]
[nodes.r1]
kind = "router"
profile = "nvr500"
mode = "fast"
lan = "lan"
[nodes.server]
kind = "host"
routes = [{{ to = "default", via = "198.18.65.1" }}, {{ to = "default", via = "2001:2:0:65::1" }}]
[[links]]
a = {{ port = "pc:eth0", ipv4 = "198.18.64.2/24", ipv6 = "2001:2:0:64::2/64" }}
b = {{ port = "r1:lan", ipv4 = "198.18.64.1/24", ipv6 = "2001:2:0:64::1/64" }}
[[links]]
a = {{ port = "r1:wan", ipv4 = "198.18.65.1/24", ipv6 = "2001:2:0:65::1/64" }}
b = {{ port = "server:eth0", ipv4 = "198.18.65.2/24", ipv6 = "2001:2:0:65::2/64" }}
[tunnels.vpn]
kind = "wireguard"
peers = [
  {{ node = "pc", endpoint = "198.18.64.2", address = "198.18.66.2/24" }},
  {{ node = "server", endpoint = "198.18.65.2", address = "198.18.66.10/24" }},
]
[[measure]]
name = "raw"
from = "pc"
to = "server"
ipv4 = "198.18.65.2"
ipv6 = "2001:2:0:65::2"
protocols = ["tcp"]
directions = ["receiver"]
latency = false
[[measure]]
name = "wg"
from = "pc"
to = "server"
ipv4 = "198.18.66.10"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
latency = false
"#
        ),
    )
    .unwrap();
    let _g = LabGuard(lab.clone());
    let o = tunbench(&[
        "run",
        file.to_str().unwrap(),
        "--runs",
        "1",
        "--duration",
        "1",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "run: {}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("JSON results: {e}: {}", text(&o)));
    let cell = |path: &str, family: &str| -> serde_json::Value {
        v["paths"]
            .as_array()
            .unwrap_or_else(|| panic!("no paths: {v}"))
            .iter()
            .find(|p| p["path"] == path)
            .unwrap_or_else(|| panic!("no path {path}: {v}"))["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cell"]["family"] == family)
            .unwrap_or_else(|| panic!("no {family} cell on {path}: {v}"))
            .clone()
    };
    let v6 = cell("raw", "ipv6");
    assert_eq!(v6["error"], serde_json::Value::Null, "{v6}");
    assert_eq!(
        v6["model_limit"]["what"], "nvr500 fast on r1: ipv6 tcp download ceiling per flow",
        "{v6}"
    );
    assert_eq!(v6["model_limit"]["bps"], 249e6, "{v6}");
    let v4 = cell("raw", "ipv4");
    assert_eq!(v4["model_limit"], serde_json::Value::Null, "{v4}");
    let wg = cell("wg", "ipv4");
    assert_eq!(wg["error"], serde_json::Value::Null, "{wg}");
    let what = wg["model_limit"]["what"].as_str().unwrap_or_default();
    assert!(
        what.starts_with(
            "nvr500 fast on r1: ipv4 udp upload ceiling 29.43 Mbit/s on tunnel vpn's WireGuard"
        ),
        "{wg}"
    );
    let bps = wg["model_limit"]["bps"].as_f64().unwrap_or_default();
    let want = 29.43e6 * (1420.0 - 20.0 - 32.0) / (1420.0 + 32.0);
    assert!((bps - want).abs() < 1.0, "{bps} against {want}: {wg}");
    assert_gone(&lab);
}
