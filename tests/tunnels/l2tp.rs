//! L2TP tunnels end to end, as root in namespaces: L2TPv2/PPP over UDP 1701
//! bare, and L2TP/IPsec (ESP transport mode over UDP 4500 and raw protocol
//! 50), carrying TCP and UDP both ways with IPv4 and IPv6 inside; live
//! captures that tshark dissects as L2TP -> PPP -> IP and, given the lab's SA
//! key, decrypts as ESP -> UDP 1701 -> L2TP -> PPP -> IP; truncated,
//! length-lying and foreign-session datagrams dropped and counted.

use crate::common::reaches;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Two hosts and one L2TP tunnel; `extra` adds tunnel settings.
fn topology(dir: &Path, tag: &str, extra: &str) -> PathBuf {
    let text = format!(
        r#"name = "l2tptest"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.76.1/24", ipv6 = "2001:2:0:76::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.76.2/24", ipv6 = "2001:2:0:76::2/64" }}
[tunnels.vpn]
kind = "l2tp"
{extra}
ends = [
  {{ node = "a", endpoint = "198.18.76.1", address = ["198.18.77.1/24", "2001:2:0:77::1/64"], tunnel_id = 7, session_id = 8 }},
  {{ node = "b", endpoint = "198.18.76.2", address = ["198.18.77.2/24", "2001:2:0:77::2/64"] }},
]
"#
    );
    let p = dir.join(format!("l2tp-{tag}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn ping(lab: &str, from: &str, to: &str, size: &str) -> bool {
    reaches(lab, from, &["-s", size, to])
}

/// The tunnel's inner MTU as `tunbench status --json` states it.
fn stated_mtu(lab: &str) -> u64 {
    let o = tunbench(&["status", lab, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v[0]["tunnels"][0]["sizes"]["inner_mtu"].as_u64().unwrap()
}

#[test]
fn bare_and_protected_l2tp_carry_tcp_and_udp_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    for (tag, extra, mtu) in [
        // 1500 - 20 - 8 - 6 - 4
        ("bare", "", 1462),
        // 1500 - 20 - 8 - (8 + 8 + 8 + 10 + 4 + pad + 2 + 16)
        ("udp", "ipsec = true\nsequence = true", 1416),
        // no UDP 4500 header: 8 more
        ("raw", "ipsec = true\nencap = \"raw\"", 1428),
    ] {
        let lab = lab_name(&format!("l2{tag}"));
        let _g = up_named(&topology(dir.path(), tag, extra), &lab);
        assert!(ping(&lab, "a", "198.18.77.2", "56"), "{tag}: no IPv4 ping");
        assert!(
            ping(&lab, "b", "2001:2:0:77::1", "56"),
            "{tag}: no IPv6 ping"
        );
        traffic_both_ways(
            &lab,
            &[("a", "b", "198.18.77.2"), ("b", "a", "2001:2:0:77::1")],
        );
        // The MTU made, the MTU stated, and what fits a 1500-byte underlay.
        assert_eq!(stated_mtu(&lab), mtu, "{tag}");
        let o = Command::new("ip")
            .args(["-n", &format!("{lab}-a"), "link", "show", "l2tp-vpn"])
            .output()
            .unwrap();
        let link = String::from_utf8_lossy(&o.stdout);
        assert!(link.contains(&format!("mtu {mtu} ")), "{tag}: {link}");
        // A full-size packet with DF set fits; one byte more does not.
        let full = (mtu - 28).to_string();
        assert!(ping(&lab, "a", "198.18.77.2", &full), "{tag}: {full}");
        let over = (mtu - 27).to_string();
        let o = ping_output(&lab, "a", &["-M", "do", "-s", &over, "198.18.77.2"]);
        assert!(
            !o.status.success(),
            "{tag}: {over} bytes passed an MTU of {mtu}"
        );
    }
}

fn drops(lab: &str, node: &str, reason: &str) -> u64 {
    let p = state_dir(lab).join(format!("datapath-vpn-{node}.json"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    v["drops"][reason].as_u64().unwrap_or(0)
}

fn tshark(pcap: &Path, opts: &[String]) -> String {
    let mut c = Command::new(program("tshark"));
    c.arg("-r").arg(pcap);
    for o in opts {
        c.args(["-o", o]);
    }
    let o = c.arg("-V").output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn captures_dissect_as_l2tp_ppp_ip_and_decrypt_with_the_lab_keys() {
    let dir = tempfile::tempdir().unwrap();
    // Bare: L2TP -> PPP -> IPv4, with the ids the topology gave.
    let lab = lab_name("l2cap");
    {
        let _g = up_named(&topology(dir.path(), "cap", "sequence = true"), &lab);
        let pcap = dir.path().join("bare.pcap");
        // b -> a only: a reply a -> b, captured when tshark starts late,
        // carries b's ids rather than the ones asserted below.
        capture_one(
            &lab,
            "a",
            "src host 198.18.76.2 and udp port 1701 and greater 300",
            &pcap,
            || {
                ping_from(&lab, "b", &["-s", "400", "198.18.77.1"]);
            },
        );
        let out = tshark(&pcap, &[]);
        assert!(out.contains("Layer 2 Tunneling Protocol"), "{out}");
        assert!(
            out.contains("Tunnel ID: 7") && out.contains("Session ID: 8"),
            "{out}"
        );
        assert!(out.contains("Point-to-Point Protocol"), "{out}");
        assert!(out.contains("Src: 198.18.77.2, Dst: 198.18.77.1"), "{out}");
        // Bad datagrams built from the captured one are dropped and counted;
        // the session keeps working.
        let good = udp_payloads(&std::fs::read(&pcap).unwrap()).remove(0);
        assert_eq!(&good[..2], &[0x08, 0x02], "L2TPv2 data with Ns/Nr");
        let mut wrong_session = good.clone();
        wrong_session[4..6].copy_from_slice(&99u16.to_be_bytes());
        let mut lying = good.clone();
        // The inner IPv4 total length (after 10 bytes of L2TP and 4 of PPP).
        lying[16..18].copy_from_slice(&60000u16.to_be_bytes());
        for (bad, reason) in [
            (good[..5].to_vec(), "truncated"),
            (wrong_session, "no_session"),
            (lying, "malformed"),
        ] {
            let before = drops(&lab, "a", reason);
            netns::namespace::run_in(&format!("{lab}-b"), move || {
                std::net::UdpSocket::bind("198.18.76.2:0")?
                    .send_to(&bad, "198.18.76.1:1701")
                    .map(|_| ())
            })
            .expect("sending from b");
            eventually(&format!("a counts a {reason} drop"), || {
                drops(&lab, "a", reason) > before
            });
        }
        assert!(ping(&lab, "b", "198.18.77.1", "56"), "still working");
    }
    assert_gone(&lab);
    // Protected: nothing readable without the key; with it, ESP -> UDP 1701
    // (checksum right) -> L2TP -> PPP -> IPv4.
    let lab = lab_name("l2ipc");
    let _g = up_named(&topology(dir.path(), "ipc", "ipsec = true"), &lab);
    let pcap = dir.path().join("ipsec.pcap");
    capture_one(
        &lab,
        "b",
        // a -> b only: the SA given to tshark below is that direction's (a reply
        // b -> a, captured when tshark starts late, is another SPI and key).
        "src host 198.18.76.1 and udp dst port 4500 and greater 300",
        &pcap,
        || {
            ping_from(&lab, "a", &["-s", "400", "198.18.77.2"]);
        },
    );
    let plain = tshark(&pcap, &[]);
    assert!(plain.contains("Encapsulating Security Payload"), "{plain}");
    assert!(!plain.contains("Layer 2 Tunneling Protocol"), "{plain}");
    let keys: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir(&lab).join("keys.json")).unwrap())
            .unwrap();
    let key_b = keys["tunnels"]["vpn"]["sa"]["b"].as_str().unwrap();
    let sa = format!(
        "uat:esp_sa:\"IPv4\",\"198.18.76.1\",\"198.18.76.2\",\"0x00001001\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x{key_b}\",\"NULL\",\"\""
    );
    let out = tshark(
        &pcap,
        &[
            "esp.enable_encryption_decode:TRUE".into(),
            sa,
            "udp.check_checksum:TRUE".into(),
        ],
    );
    let inner_udp = out
        .split("Src Port: 1701, Dst Port: 1701")
        .nth(1)
        .and_then(|rest| rest.split("Layer 2 Tunneling Protocol").next())
        .unwrap_or_else(|| panic!("no UDP 1701 inside: {out}"));
    assert!(inner_udp.contains("[Checksum Status: Good]"), "{out}");
    assert!(out.contains("Layer 2 Tunneling Protocol"), "{out}");
    assert!(out.contains("Point-to-Point Protocol"), "{out}");
    assert!(out.contains("Src: 198.18.77.1, Dst: 198.18.77.2"), "{out}");
}

/// `tunbench run` on topologies/vpn.toml compares the raw link and the VPN
/// per scenario (tunbench's ESP and L2TP/IPsec) side by side, with ratios and
/// a note per tunnel kind with its bytes per packet. The columns and notes
/// come from the topology, not the figures: one short TCP upload over IPv4
/// per path and no latency probes give them all. (strongSwan's IKEv2 through
/// a lab is tests/tunnels/ikev2.rs's.)
#[test]
fn run_compares_vpns_side_by_side_with_their_overhead() {
    let lab = lab_name("vrun");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("vpn.toml");
    let t = std::fs::read_to_string(topo("vpn.toml"))
        .unwrap()
        .replacen("name = \"vpn\"", &format!("name = \"{lab}\""), 1)
        .replace(
            "udp_len = 1392",
            "protocols = [\"tcp\"]\nfamilies = [\"ipv4\"]\ndirections = [\"sender\"]",
        );
    std::fs::write(&f, t).unwrap();
    let _g = LabGuard(lab.clone());
    let o = tunbench(&[
        "run",
        f.to_str().unwrap(),
        "--scenario",
        "esp",
        "--scenario",
        "l2tp-ipsec",
        "--runs",
        "1",
        "--duration",
        "1",
        "--no-latency",
    ]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for column in [
        "esp/raw",
        "esp/vpn",
        "l2tp-ipsec/raw",
        "l2tp-ipsec/vpn",
        "ratio",
    ] {
        assert!(out.contains(column), "no column {column}: {out}");
    }
    // The notes, wrapped to the terminal's 120 columns, read as one line each.
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(
            "Note: path vpn crosses ESP in UDP 4500 tunnel vpn: 62-65 bytes per packet over IPv4"
        ),
        "{out}"
    );
    assert!(
        flat.contains(
            "Note: path vpn crosses L2TP/IPsec in UDP 4500 tunnel vpn: 80-83 bytes per packet over IPv4"
        ),
        "{out}"
    );
    assert!(
        flat.contains("inner MTU 1420, TCP MSS 1380 (IPv4) / 1360 (IPv6)"),
        "{out}"
    );
    // The tunnel views give the bytes per packet as a column too.
    assert!(out.contains("B/pkt"), "{out}");
    assert!(out.contains("62-65"), "{out}");
    assert_gone(&lab);
}
