//! The engine against itself on loopback: pacing (-b), byte-bounded tests (-n),
//! omit (-O) and the per-second intervals.

use crate::common::*;
use serde_json::Value;
use std::process::{Command, Stdio};

/// A `tunbench server` on loopback, killed on drop, and its port.
struct Server {
    _process: KillOnDrop,
    port: u16,
}

fn server() -> Server {
    let (c, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    });
    Server {
        _process: KillOnDrop(c),
        port,
    }
}

fn client(s: &Server, args: &[&str]) -> Value {
    let port = s.port.to_string();
    let mut a = vec!["client", "127.0.0.1", "-p", &port, "-J"];
    a.extend_from_slice(args);
    let o = tunbench(&a);
    assert!(o.status.success(), "{a:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Whether `v` is what a pacer at `target` gives: no more than 5 % over it
/// (one write ahead of the schedule, and the ends' clocks), and at least 80 %
/// of it. Load only makes a paced sender fall behind, and then only by what a
/// stall at the very end of the test keeps it from catching up: a fifth of a
/// 3 s test is a stall far longer than any wake-up.
fn paced(v: f64, target: f64) -> bool {
    v <= target * 1.05 && v >= target * 0.8
}

#[test]
fn tcp_and_udp_pacing_hold_the_rate() {
    let s = server();
    for args in [
        &["-t", "3", "-b", "80M"][..],
        &["-t", "3", "-u", "-b", "80M"],
        &["-t", "3", "-u", "-b", "40M", "-P", "2", "-R"],
    ] {
        let j = client(&s, args);
        let bps = j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap();
        // -b is per stream, as in iperf3: 2 x 40M is 80M too.
        let want = 80e6;
        assert!(
            paced(bps, want),
            "{args:?}: {bps} bit/s, want {want} (-20 %, +5 %)"
        );
    }
}

#[test]
fn byte_bounded_test_stops_at_the_count() {
    let s = server();
    let j = client(&s, &["-n", "20M", "-P", "2"]);
    let sent = j["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    let want = 20 * 1024 * 1024;
    // Each stream may finish the block it was writing.
    assert!(
        sent >= want && sent <= want + 2 * 131072 + 2 * 131072,
        "{sent}"
    );
}

#[test]
fn omit_and_intervals() {
    let s = server();
    let j = client(&s, &["-t", "2", "-O", "1", "-b", "40M"]);
    let iv = j["intervals"].as_array().unwrap();
    assert!(iv.len() >= 3, "1 s omitted + 2 s counted: {}", iv.len());
    assert_eq!(iv[0]["sum"]["omitted"], true);
    assert_eq!(iv.last().unwrap()["sum"]["omitted"], false);
    // The omitted second is not in the total: 2 s at 40 Mbit/s, not 3.
    let bytes = j["end"]["sum_received"]["bytes"].as_f64().unwrap();
    assert!(paced(bytes, 2.0 * 40e6 / 8.0), "{bytes}");
}
