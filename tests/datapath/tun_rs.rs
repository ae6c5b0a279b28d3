//! The tun-rs TUN backend (TUNBENCH_TUN=tun-rs, core/src/driver/tun_rs_backend.rs),
//! as root in namespaces: the shipped WireGuard and DS-Lite labs come up with
//! their datapaths on tun-rs with offloads on, and TCP (and UDP) moves through
//! them both ways, through tun-rs's GSO split and GRO table, judged by what
//! arrives (UDP one datagram at a time, so no queue can overflow). The
//! datapaths' stats must say tun-rs ran: a backend that quietly fell back to
//! ours fails.

use crate::common::*;
use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// `tunbench up FILE --scenario S --name LAB` with TUNBENCH_TUN=tun-rs (the
/// datapath processes inherit it); the guard takes the lab down.
fn up_on_tun_rs(file: &Path, scenario: &str, lab: &str) -> LabGuard {
    let g = LabGuard(lab.to_string());
    let o = Command::new(bin())
        .args(["up", file.to_str().unwrap(), "--scenario", scenario])
        .args(["--name", lab])
        .env("TUNBENCH_TUN", "tun-rs")
        .output()
        .expect("running tunbench up");
    assert!(o.status.success(), "up failed: {}", text(&o));
    g
}

/// The stats of each of the tunnel's datapaths (`datapath-TUNNEL-NODE.json`),
/// as written after this call (they are rewritten every second): all the
/// traffic before it counted.
fn datapath_stats(lab: &str, tunnel: &str) -> Vec<(String, Value)> {
    let prefix = format!("datapath-{tunnel}-");
    let mut v: Vec<(String, Value)> = std::fs::read_dir(state_dir(lab))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        .map(|n| {
            let v = stats_after_now(&state_dir(lab).join(&n));
            (n, v)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn counter(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("no {path:?} in {v}"))
}

/// Every datapath of `tunnel` ran on tun-rs with TSO on, cut super-packets
/// from the TUN, coalesced into it, and wrote without errors.
fn check_ran_on_tun_rs(lab: &str, tunnel: &str) {
    let all = datapath_stats(lab, tunnel);
    assert_eq!(all.len(), 2, "{lab}: datapaths of {tunnel}: {all:?}");
    for (name, s) in &all {
        assert_eq!(s["tun_backend"], "tun-rs", "{lab} {name}: {s}");
        assert_eq!(s["offloads"]["tso"], true, "{lab} {name}: {s}");
        assert!(
            counter(s, &["tun_rx", "bytes"]) > 1_000_000,
            "{lab} {name}: {s}"
        );
        assert!(
            counter(s, &["tun_tx", "bytes"]) > 1_000_000,
            "{lab} {name}: {s}"
        );
        assert_eq!(counter(s, &["errors", "tun_write"]), 0, "{lab} {name}: {s}");
        assert_eq!(counter(s, &["errors", "offload"]), 0, "{lab} {name}: {s}");
    }
    // TCP both ways: each side read super-packets from its TUN and wrote
    // coalesced ones into it, on one side at least.
    let seg: u64 = all
        .iter()
        .map(|(_, s)| counter(s, &["segmented", "super_packets"]))
        .sum();
    let coal: u64 = all
        .iter()
        .map(|(_, s)| counter(s, &["coalesced", "super_packets"]))
        .sum();
    assert!(seg > 0, "{lab}: tun-rs split no super-packet: {all:?}");
    assert!(coal > 0, "{lab}: tun-rs coalesced nothing: {all:?}");
    // How much of it was coalesced depends on how many segments a thread
    // finds queued when it wakes: driver_stall.rs holds a burst of one flow
    // to one super-packet on tun-rs, and docs/benchmarks/tun-rs.md measures
    // the share here.
    let joined: u64 = all
        .iter()
        .map(|(_, s)| counter(s, &["coalesced", "packets"]))
        .sum();
    let written: u64 = all
        .iter()
        .map(|(_, s)| counter(s, &["tun_tx", "packets"]))
        .sum();
    eprintln!("{lab}: tun-rs coalesced {joined} of the {written} packets it wrote");
}

#[test]
fn wireguard_moves_tcp_on_tun_rs_with_offloads() {
    let lab = lab_name("rwg");
    let _g = up_on_tun_rs(&topo("wireguard.toml"), "tunbench", &lab);
    eventually("a ping through the WireGuard tunnel", || {
        ping_from(&lab, "a", &["198.18.71.2"])
    });
    for (client, server, to) in [("a", "b", "198.18.71.2"), ("b", "a", "198.18.71.1")] {
        tcp_moves(&lab, client, server, to, false);
        traffic_both_ways(&lab, &[(client, server, to)]);
    }
    check_ran_on_tun_rs(&lab, "wg");
}

#[test]
fn dslite_moves_tcp_on_tun_rs_with_offloads() {
    let lab = lab_name("rds");
    let _g = up_on_tun_rs(&topo("dslite.toml"), "userspace", &lab);
    eventually("a ping through the softwire", || {
        ping_from(&lab, "client", &["198.18.52.10"])
    });
    // Through the AFTR's NAT44 only the client opens connections: upload,
    // then download (-R).
    let to = "198.18.52.10";
    tcp_moves(&lab, "client", "server", to, false);
    traffic_both_ways(&lab, &[("client", "server", to)]);
    tcp_moves(&lab, "client", "server", to, true);
    check_ran_on_tun_rs(&lab, "sw");
}
