//! Every tunnel's overhead on the wire, predicted from the bytes its format
//! adds and measured: through WireGuard (IPv4 and IPv6 underlay), ESP in UDP
//! and raw, L2TP, L2TP/IPsec, IKEv2's ESP in UDP and DS-Lite, over a 20 Mbit/s
//! Ethernet underlay, TCP and UDP carry at most what the underlay's shaper
//! lets through (`shaped_most`) x payload / wire bytes of the outer frame,
//! measured as tests/datapath/wire.rs does, and at least `REACHED` of the
//! steady rate's share, measured again until reached. 20M is far below what
//! any of these datapaths carries on one busy CPU (strongSwan's libipsec, the
//! slowest, carries some 400 Mbit/s on two cores), so the shaper holds each
//! figure; docs/benchmarks/shaped-wire.md measures how close they come, and
//! the same table at 1G.

use crate::common::*;
use crate::support::{REACHED, rate_reached, shaped_most, tbf_bucket};
use crate::wire::ETHERNET;
use std::path::PathBuf;
use std::process::Command;

const RATE: f64 = 20e6;

/// ESP's bytes around a payload of `n`: header 8, IV 8, padding to 4 with
/// the 2 trailer bytes, ICV 16 (AES-GCM-128).
fn esp(n: f64) -> f64 {
    let pad = (4.0 - (n + 2.0) % 4.0) % 4.0;
    8.0 + 8.0 + pad + 2.0 + 16.0
}

/// Bytes a tunnel adds to an inner packet of `n` bytes, outer IP included.
fn overhead(kind: &str, n: f64) -> f64 {
    match kind {
        "ipv4-underlay" => 20.0 + 8.0 + 32.0,
        "ipv6-underlay" => 40.0 + 8.0 + 32.0,
        "esp" | "ikev2" => 20.0 + 8.0 + esp(n),
        "esp-raw" => 20.0 + esp(n),
        "l2tp" => 20.0 + 8.0 + 6.0 + 4.0,
        // The L2TP datagram (UDP 8, L2TP 6, PPP 4) in ESP transport mode in UDP.
        "l2tp-ipsec" => 20.0 + 8.0 + 18.0 + esp(n + 18.0),
        "dslite" => 40.0,
        other => panic!("no overhead known for {other}"),
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/wire/{name}"))
}

/// The MTU of the device `LAB-node` routes `to` by: the tunnel's.
fn mtu_toward(lab: &str, node: &str, to: &str) -> f64 {
    let ns = format!("{lab}-{node}");
    let o = Command::new("ip")
        .args(["-n", &ns, "-o", "route", "get", to])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut words = line.split_whitespace();
    let dev = words
        .find(|w| *w == "dev")
        .and_then(|_| words.next())
        .unwrap_or_else(|| panic!("no route to {to} in {ns}: {line:?}"));
    let o = Command::new("ip")
        .args(["netns", "exec", &ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/mtu"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// One tunnel kind: its scenario of `file`, and the inner addresses of the
/// client's end and the server's.
struct Tunnel {
    file: &'static str,
    scenario: &'static str,
    client: &'static str,
    server: (&'static str, &'static str, &'static str),
    /// The inner MTU where the client routes by no tunnel device (a
    /// softwire's is the B4's); otherwise read from the client's.
    mtu: Option<f64>,
}

/// Up the scenario; each cell from the server to the client (-R, so the
/// client times what arrives), held to the prediction.
fn carries_what_its_bytes_allow(tag: &str, t: &Tunnel) {
    let lab = lab_name(tag);
    let _g = LabGuard(lab.clone());
    let o = tunbench(&[
        "up",
        fixture(t.file).to_str().unwrap(),
        "--name",
        &lab,
        "--scenario",
        t.scenario,
    ]);
    assert!(o.status.success(), "up {}: {}", t.scenario, text(&o));
    let client_node = t.client;
    let (server_node, v4, v6) = t.server;
    let mtu = t.mtu.unwrap_or_else(|| mtu_toward(&lab, client_node, v4));
    let mut failed = Vec::new();
    let families: &[(bool, &str)] = if v6.is_empty() {
        &[(false, v4)]
    } else {
        &[(false, v4), (true, v6)]
    };
    for (i, &(inner_v6, to)) in families.iter().enumerate() {
        for udp in [false, true] {
            let ip = if inner_v6 { 40.0 } else { 20.0 };
            let payload = mtu - ip - if udp { 8.0 } else { 32.0 };
            let wire = mtu + overhead(t.scenario, mtu) + ETHERNET;
            let predicted = RATE * payload / wire;
            let offered = format!("{}", (RATE * 1.2).round());
            let len = format!("{payload}");
            // As tests/datapath/wire.rs measures.
            let mut args = vec!["-R", "-t", "3"];
            if udp {
                args.extend(["-u", "-b", &offered, "-l", &len]);
            }
            let port = 5340 + 2 * i as u16 + udp as u16;
            let cell = format!(
                "{} {}/IPv{} ({payload} B per {wire} B, predicted {:.2})",
                t.scenario,
                if udp { "UDP" } else { "TCP" },
                if inner_v6 { 6 } else { 4 },
                predicted / 1e6
            );
            let r = rate_reached(
                &cell,
                REACHED * predicted,
                |secs| shaped_most(RATE, tbf_bucket(RATE), secs) * payload / wire,
                || {
                    let j = crate::support::engine_json(
                        &lab,
                        client_node,
                        server_node,
                        to,
                        port,
                        &args,
                    );
                    crate::wire::interval_rate(&j)
                },
            );
            failed.extend(r.err());
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

fn ipsec(scenario: &'static str) -> Tunnel {
    Tunnel {
        file: "tunnels.toml",
        scenario,
        client: "a",
        server: ("b", "198.18.87.2", "2001:2:0:87::2"),
        mtu: None,
    }
}

fn wireguard(scenario: &'static str) -> Tunnel {
    Tunnel {
        file: "wireguard.toml",
        ..ipsec(scenario)
    }
}

#[test]
fn wireguard_over_ipv4_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wtw4", &wireguard("ipv4-underlay"));
}

#[test]
fn wireguard_over_ipv6_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wtw6", &wireguard("ipv6-underlay"));
}

#[test]
fn esp_in_udp_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wte", &ipsec("esp"));
}

#[test]
fn raw_esp_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wter", &ipsec("esp-raw"));
}

#[test]
fn l2tp_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wtl", &ipsec("l2tp"));
}

#[test]
fn l2tp_ipsec_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wtli", &ipsec("l2tp-ipsec"));
}

#[test]
fn ikev2_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow("wti", &ipsec("ikev2"));
}

/// IPv4 only inside: the softwire carries IPv4 in IPv6 from the B4 to the
/// AFTR, over the IPv6-only access link shaped to 20M.
#[test]
fn dslite_carries_what_its_bytes_allow() {
    carries_what_its_bytes_allow(
        "wtd",
        &Tunnel {
            file: "dslite.toml",
            scenario: "dslite",
            client: "client",
            server: ("server", "198.18.52.10", ""),
            mtu: Some(1460.0),
        },
    );
}
