//! ESP tunnels end to end, as root in namespaces: tunbench's ESP datapath at
//! both ends, over UDP 4500 and raw protocol 50, IPv4 and IPv6 inside; a live
//! capture that tshark decrypts with the lab's keys; and a replayed packet, a
//! packet with a broken ICV and one for an unknown SPI, each dropped and
//! counted while the tunnel keeps working.

use crate::common::reaches;
use crate::common::*;
use serde_json::Value;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;

fn topology(dir: &Path, encap: &str) -> PathBuf {
    let text = format!(
        r#"name = "esptest"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.74.1/24", ipv6 = "2001:2:0:74::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.74.2/24", ipv6 = "2001:2:0:74::2/64" }}
[tunnels.ipsec]
kind = "esp"
encap = "{encap}"
ends = [
  {{ node = "a", endpoint = "198.18.74.1", address = ["198.18.75.1/24", "2001:2:0:75::1/64"] }},
  {{ node = "b", endpoint = "198.18.74.2", address = ["198.18.75.2/24", "2001:2:0:75::2/64"] }},
]
"#
    );
    let p = dir.join(format!("esp-{encap}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn stats(lab: &str, node: &str) -> Value {
    let p = state_dir(lab).join(format!("datapath-ipsec-{node}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn drops(lab: &str, node: &str, reason: &str) -> u64 {
    stats(lab, node)["drops"][reason].as_u64().unwrap_or(0)
}

fn ping(lab: &str, from: &str, to: &str, size: &str) -> bool {
    reaches(lab, from, &["-s", size, to])
}

#[test]
fn esp_over_udp_and_raw_carries_tcp_and_udp_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    for encap in ["udp", "raw"] {
        let lab = lab_name(&format!("esp{}", &encap[..1]));
        let _g = up_named(&topology(dir.path(), encap), &lab);
        assert!(
            ping(&lab, "a", "198.18.75.2", "56"),
            "{lab}: no ping through ESP"
        );
        traffic_both_ways(
            &lab,
            &[("a", "b", "198.18.75.2"), ("b", "a", "2001:2:0:75::1")],
        );
        // b decrypted the 2 MiB a sent (its stats file is rewritten every second).
        eventually("b counts over 1 MB received from a", || {
            stats(&lab, "b")["net_rx"]["bytes"].as_u64().unwrap() > 1_000_000
        });
        // The inner MTU is what fits a 1500-byte underlay.
        let o = Command::new("ip")
            .args(["-n", &format!("{lab}-a"), "link", "show", "esp-ipsec"])
            .output()
            .unwrap();
        let want = if encap == "udp" {
            "mtu 1438"
        } else {
            "mtu 1446"
        };
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(want),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

#[test]
fn a_live_capture_decrypts_and_bad_packets_are_dropped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("espbad");
    let _g = up_named(&topology(dir.path(), "udp"), &lab);
    assert!(ping(&lab, "a", "198.18.75.2", "56"));
    let pcap = dir.path().join("esp.pcap");
    capture_one(
        &lab,
        "b",
        // a -> b only: the SA below, and the replays to b, are that direction's
        // (b's reply, captured when tshark starts late, has another SPI and key).
        "src host 198.18.74.1 and udp dst port 4500 and greater 300",
        &pcap,
        || {
            ping_from(&lab, "a", &["-s", "400", "198.18.75.2"]);
        },
    );
    // tshark decrypts the live packet with the SA from the lab's key file.
    let keys: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir(&lab).join("keys.json")).unwrap())
            .unwrap();
    let key_b = keys["tunnels"]["ipsec"]["sa"]["b"].as_str().unwrap();
    let sa = format!(
        "uat:esp_sa:\"IPv4\",\"198.18.74.1\",\"198.18.74.2\",\"0x00001001\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x{key_b}\",\"NULL\",\"\""
    );
    let o = Command::new(program("tshark"))
        .arg("-r")
        .arg(&pcap)
        .args(["-o", "esp.enable_encryption_decode:TRUE", "-o", &sa, "-V"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("ESP Decrypted Data"), "{out}");
    assert!(out.contains("Src: 198.18.75.1, Dst: 198.18.75.2"), "{out}");
    let esp = udp_payloads(&std::fs::read(&pcap).unwrap()).remove(0);
    let send = |lab: &str, data: Vec<u8>| {
        netns::namespace::run_in(&format!("{lab}-a"), move || {
            UdpSocket::bind("198.18.74.1:0")?
                .send_to(&data, "198.18.74.2:4500")
                .map(|_| ())
        })
        .expect("sending from a");
    };
    // The same packet again: replayed.
    let before = drops(&lab, "b", "replayed");
    send(&lab, esp.clone());
    eventually("b drops the replay", || {
        drops(&lab, "b", "replayed") > before
    });
    // A broken ICV (and a sequence number not seen yet): unauthentic.
    let mut broken = esp.clone();
    broken[4..8].copy_from_slice(&0x7fff_0000u32.to_be_bytes());
    let last = broken.len() - 1;
    broken[last] ^= 0x55;
    let before = drops(&lab, "b", "unauthentic");
    send(&lab, broken);
    eventually("b drops the broken ICV", || {
        drops(&lab, "b", "unauthentic") > before
    });
    // An SPI nobody has: unknown.
    let mut stranger = esp.clone();
    stranger[..4].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    let before = drops(&lab, "b", "unknown_peer");
    send(&lab, stranger);
    eventually("b drops the unknown SPI", || {
        drops(&lab, "b", "unknown_peer") > before
    });
    assert!(
        ping(&lab, "a", "198.18.75.2", "56"),
        "the tunnel still works"
    );
    assert!(ping(&lab, "b", "198.18.75.1", "56"), "both ways");
}
