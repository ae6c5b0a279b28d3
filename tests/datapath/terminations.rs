//! Tunnels a router terminates itself, end to end as root in namespaces: the
//! termination ceilings of its profile (`[terminations.KIND]`) hold the inner
//! traffic at its end of the tunnel, each direction to its own figure, while
//! the router's forwarding ceilings (its slow path) neither meet that traffic
//! again nor stop holding what it forwards past the tunnel. Rates are the
//! receiving engine's (transport payload, what the ceilings meter), each
//! measured until it lies between what its ceiling lets through and
//! `REACHED` of it (`rate_reached`); the ceilings are low enough that the datapaths, not the
//! CPU, hold the traffic.

use crate::common::*;
use crate::support::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/terminate")
        .join(name)
}

/// A TCP engine test of 2 s (`args` added) held to `ceiling`: between what
/// it lets through and `REACHED` of it.
#[allow(clippy::too_many_arguments)]
fn held_to(
    what: &str,
    ceiling: f64,
    lab: &str,
    client: &str,
    server: &str,
    to: &str,
    port: u16,
    args: &[&str],
) {
    let mut a = vec!["-t", "2"];
    a.extend_from_slice(args);
    assert_rate(
        what,
        REACHED * ceiling,
        |secs| ceiling_most(ceiling, secs, 1),
        || {
            let j = engine_json(lab, client, server, to, port, &a);
            eprintln!("  (the test's time: {:.2} Mbit/s)", received_bps(&j) / 1e6);
            receiver_rate(&j)
        },
    );
}

#[test]
fn a_router_terminating_l2tp_ipsec_holds_each_direction_to_its_ceiling() {
    let lab = lab_name("tvpn");
    let (_g, o) = up(&fixture("vpn-server-lab.toml"), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // The router forwards in its slow path (its mode's ceilings) and
    // terminates the tunnel in the L2TP/IPsec datapath: both run.
    assert!(
        state_dir(&lab).join("datapath-router.r.json").exists(),
        "no slow path on r"
    );
    assert!(state_dir(&lab).join("datapath-vpn-r.json").exists());
    // Each direction to its own ceiling: the bounds of 10M and 4M do not
    // overlap, and neither meets those of the forwarding ceiling (1.5M). The
    // ceilings know no family: IPv6 once, downloading.
    for (what, to, ceiling, port, args) in [
        (
            "IPv4 TCP upload through the tunnel (ceiling 10M)",
            "198.18.99.10",
            10e6,
            5501,
            &[][..],
        ),
        (
            "IPv4 TCP download through the tunnel (ceiling 4M)",
            "198.18.99.10",
            4e6,
            5502,
            &["-R"][..],
        ),
        (
            "IPv6 TCP download through the tunnel (ceiling 4M)",
            "2001:2:0:99::10",
            4e6,
            5503,
            &["-R"][..],
        ),
    ] {
        held_to(what, ceiling, &lab, "pc", "srv", to, port, args);
    }
    // Past the tunnel, the forwarding ceiling (1.5M for every class) holds:
    // the slow path still meters what it forwards, just not the tunnel's.
    held_to(
        "IPv4 TCP upload forwarded past the tunnel (forwarding ceiling 1.5M)",
        1.5e6,
        &lab,
        "pc",
        "srv",
        "198.18.98.10",
        5505,
        &[],
    );
    // The router's datapath log names the ceilings it applies.
    let log = std::fs::read_to_string(state_dir(&lab).join("logs/datapath-vpn-r.log"))
        .unwrap_or_default();
    assert!(
        log.contains("r terminates vpn with profile vpn-server's ceilings"),
        "{log}"
    );
}

#[test]
fn a_b4_with_a_softwire_ceiling_holds_ipv4_download_to_it() {
    let lab = lab_name("tb4");
    let (_g, o) = up(&fixture("b4-lab.toml"), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    // The B4 forwards in the kernel: only the softwire's datapath is there.
    assert!(!state_dir(&lab).join("datapath-router.b4.json").exists());
    assert!(state_dir(&lab).join("datapath-sw-b4.json").exists());
    // Each direction to its own ceiling: the bounds of 10M and 4M do not
    // overlap.
    held_to(
        "IPv4 TCP download through the softwire (ceiling 10M)",
        10e6,
        &lab,
        "h",
        "inet",
        "198.18.32.10",
        5511,
        &["-R"],
    );
    held_to(
        "IPv4 TCP upload through the softwire (ceiling 4M)",
        4e6,
        &lab,
        "h",
        "inet",
        "198.18.32.10",
        5512,
        &[],
    );
}
