//! Tunnels a router terminates itself, end to end as root in namespaces: the
//! termination ceilings of its profile (`[terminations.KIND]`) hold the inner
//! traffic at its end of the tunnel, each direction to its own figure, while
//! the router's forwarding ceilings (its slow path) neither meet that traffic
//! again nor stop holding what it forwards past the tunnel. Rates are the
//! receiving engine's (transport payload, what the ceilings meter).

use crate::common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/terminate")
        .join(name)
}

/// One 2-second engine test (`args` added), the receiver's bit/s.
fn bps(lab: &str, client: &str, server: &str, to: &str, port: u16, args: &[&str]) -> f64 {
    let mut a = vec!["-t", "2"];
    a.extend_from_slice(args);
    engine_bps(lab, client, server, to, port, &a)
}

/// Within 20 % of `expected`, as many as four times (see `on_a_noisy_machine`);
/// the last figure measured.
fn about(measure: impl Fn() -> f64, expected: f64, what: &str) -> f64 {
    let mut last = 0.0;
    on_a_noisy_machine(4, what, || {
        last = measure();
        rate_within(last, expected, 0.20)
    });
    last
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
    for (to, fam, port) in [
        ("198.18.99.10", "IPv4", 5501),
        ("2001:2:0:99::10", "IPv6", 5503),
    ] {
        let up = about(
            || bps(&lab, "pc", "srv", to, port, &[]),
            40e6,
            &format!("{fam} TCP upload through the tunnel (ceiling 40M)"),
        );
        let down = about(
            || bps(&lab, "pc", "srv", to, port + 1, &["-R"]),
            20e6,
            &format!("{fam} TCP download through the tunnel (ceiling 20M)"),
        );
        assert!(
            up > 1.4 * down,
            "{fam}: upload {:.1} and download {:.1} Mbit/s should differ as 40 and 20 do",
            up / 1e6,
            down / 1e6
        );
    }
    // Past the tunnel, the forwarding ceiling (10M for every class) holds:
    // the slow path still meters what it forwards, just not the tunnel's.
    about(
        || bps(&lab, "pc", "srv", "198.18.98.10", 5505, &[]),
        10e6,
        "IPv4 TCP upload forwarded past the tunnel (forwarding ceiling 10M)",
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
    let down = about(
        || bps(&lab, "h", "inet", "198.18.32.10", 5511, &["-R"]),
        50e6,
        "IPv4 TCP download through the softwire (ceiling 50M)",
    );
    let up = about(
        || bps(&lab, "h", "inet", "198.18.32.10", 5512, &[]),
        30e6,
        "IPv4 TCP upload through the softwire (ceiling 30M)",
    );
    assert!(down > 1.3 * up, "download {down} upload {up}");
}
