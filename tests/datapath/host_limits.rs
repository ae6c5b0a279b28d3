//! A host profile's UDP receive limits, in namespaces: a server whose profile
//! (a file named by path) takes 10 Mbit/s of UDP over IPv4 and 4 over IPv6
//! loses what arrives beyond that, per family, while TCP to it is untouched.
//! UDP is measured with tunbench's own engine until a figure lies between what
//! the limit lets through and `REACHED` of it (`rate_reached`); the limits run
//! in the host's slow path, whose counters show the drops, and none of TCP's.

use crate::common::*;
use crate::support::*;
use std::path::PathBuf;

/// `hp…`: a lab name of this file's, unique to the process.
fn lab(tag: &str) -> String {
    format!("hp{tag}{}", std::process::id() % 100000)
}

/// The receiver's rate of one engine test from client to server.
fn measure(lab: &str, to: &str, port: u16, args: &[&str]) -> Figure {
    let j = engine_json(lab, "client", "server", to, port, args);
    eprintln!("  (the test's time: {:.2} Mbit/s)", received_bps(&j) / 1e6);
    receiver_rate(&j)
}

#[test]
fn udp_beyond_the_limit_is_lost_and_tcp_is_not() {
    let lab = lab("hl");
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host_limits/limits.toml");
    let (_g, o) = up(&file, &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // The lab's own copy of the topology, kept elsewhere, still finds the
    // profile the file names by a relative path.
    let s = tunbench(&["status", &lab]);
    assert!(s.status.success(), "status: {}", text(&s));
    let stats = state_dir(&lab).join("datapath-router.server.json");
    // Each family to its own limit: the bounds of 10M and 4M do not overlap.
    for (family, to, limit, port) in [
        ("IPv4", "198.18.90.2", 10e6, 5401),
        ("IPv6", "2001:2:0:90::2", 4e6, 5403),
    ] {
        // Twice the limit, from the first second on.
        let offered = format!("{}", 2.0 * limit);
        let args = ["-u", "-b", &offered, "-l", "1400", "-t", "2"];
        assert_rate(
            &format!("{family} UDP at twice the limit"),
            REACHED * limit,
            |secs| ceiling_most(limit, secs, 1),
            || measure(&lab, to, port, &args),
        );
        tcp_passes_by_every_ceiling(&lab, "client", "server", to, &stats);
    }
    wait_queue_full_drops(&stats);
}
