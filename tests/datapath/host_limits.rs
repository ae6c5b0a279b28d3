//! A host profile's UDP receive limits, in namespaces: a server whose profile
//! (a file named by path) takes 40 Mbit/s of UDP over IPv4 and 30 over IPv6
//! loses what arrives beyond that, per family, while TCP to it is untouched.
//! Measured with tunbench's own engine; the limits run in the host's slow path,
//! whose counters show the drops.

use crate::common::*;
use std::path::PathBuf;

use std::time::Duration;

/// `hp…`: a lab name of this file's, unique to the process.
fn lab(tag: &str) -> String {
    format!("hp{tag}{}", std::process::id() % 100000)
}

/// The receiver's bit/s of one engine test from client to server.
fn measure(lab: &str, to: &str, port: u16, args: &[&str]) -> f64 {
    engine_bps(lab, "client", "server", to, port, args)
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
    for (family, to, limit, port) in [
        ("IPv4", "198.18.90.2", 40e6, 5401),
        ("IPv6", "2001:2:0:90::2", 30e6, 5403),
    ] {
        // The limit counts UDP payload, as the engine does.
        let payload = limit;
        // Twice the limit, from the first second on.
        let offered = format!("{}", 2.0 * limit);
        on_a_noisy_machine(4, &format!("{family} UDP at twice the limit"), || {
            let udp = measure(
                &lab,
                to,
                port,
                &["-u", "-b", &offered, "-l", "1400", "-t", "2"],
            );
            rate_within(udp, payload, 0.10)
        });
        let tcp = measure(&lab, to, port + 1, &["-t", "1"]);
        eprintln!("{family} TCP: {:.0} Mbit/s", tcp / 1e6);
        assert!(
            tcp > 3.0 * limit,
            "{family} TCP: {:.1} Mbit/s; the UDP limit of {:.0} must not touch it",
            tcp / 1e6,
            limit / 1e6
        );
    }
    std::thread::sleep(Duration::from_millis(1200));
    let p = state_dir(&lab).join("datapath-router.server.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or_default();
    assert!(
        v["drops"]["queue_full"].as_u64().unwrap_or(0) > 0,
        "the server's slow path counts what it dropped: {v}"
    );
}
