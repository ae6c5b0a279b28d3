//! The kernel's own tunnels as lab implementations, on the stock kernel that
//! has them: a WireGuard peer with `implementation = "kernel"` facing
//! tunbench's own peer (interop both ways), TCP and UDP through it and the
//! bytes it adds to each packet, captured on the underlay.

use crate::common::*;
use crate::kernel::stock_kernel;
use crate::overhead::{Carrier, frames_on, overheads_of_an_echo};
use serde_json::Value;
use std::path::{Path, PathBuf};

const A_INNER: &str = "198.18.91.1";
const B_INNER: &str = "198.18.91.2";
const A_INNER6: &str = "2001:2:0:91::1";
const B_INNER6: &str = "2001:2:0:91::2";

/// Two hosts and a WireGuard tunnel: a runs tunbench's own peer, b the
/// kernel's, over an IPv4 or IPv6 underlay.
fn wireguard_topology(dir: &Path, underlay_v6: bool) -> PathBuf {
    let (ea, eb) = if underlay_v6 {
        ("2001:2:0:90::1", "2001:2:0:90::2")
    } else {
        ("198.18.90.1", "198.18.90.2")
    };
    let text = format!(
        r#"name = "ktwg"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.90.1/24", ipv6 = "2001:2:0:90::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.90.2/24", ipv6 = "2001:2:0:90::2/64" }}
[tunnels.wg]
kind = "wireguard"
preshared_key = true
peers = [
  {{ node = "a", endpoint = "{ea}", address = ["{A_INNER}/24", "{A_INNER6}/64"] }},
  {{ node = "b", endpoint = "{eb}", address = ["{B_INNER}/24", "{B_INNER6}/64"], implementation = "kernel" }},
]
"#
    );
    let p = dir.join(format!("ktwg{}.toml", if underlay_v6 { 6 } else { 4 }));
    std::fs::write(&p, text).unwrap();
    p
}

fn peers_file(lab: &str, node: &str) -> Value {
    let p = state_dir(lab).join(format!("peers-wg-{node}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or(Value::Null)
}

/// `up`, then traffic both ways between tunbench's peer and the kernel's,
/// the kernel's own account of it, and the captured overhead per packet.
fn kernel_wireguard_with_tunbench_peer(underlay_v6: bool, tag: &str) {
    stock_kernel();
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let _g = up_named(&wireguard_topology(dir.path(), underlay_v6), &lab);
    // b's tunnel device is the kernel's WireGuard, not a TUN.
    let o = std::process::Command::new("ip")
        .args(["-n", &format!("{lab}-b"), "-d", "link", "show", "wg-wg"])
        .output()
        .unwrap();
    let shown = text(&o);
    assert!(shown.contains("wireguard"), "b's wg-wg: {shown}");
    assert!(
        shown.contains("mtu 1420"),
        "b's wg-wg has the tunnel's MTU: {shown}"
    );
    // One inner family per underlay, to keep the emulated VM's time short:
    // IPv4 inside IPv4 from a, IPv6 inside IPv6 from b.
    let pair = if underlay_v6 {
        ("b", "a", A_INNER6)
    } else {
        ("a", "b", B_INNER)
    };
    traffic_both_ways(&lab, &[pair]);
    // The kernel's account, read over netlink by b's peer process, shows the
    // session with a's endpoint and the megabytes a sent.
    let a_end = if underlay_v6 {
        "2001:2:0:90::1"
    } else {
        "198.18.90.1"
    };
    eventually(
        "the kernel's peer reports the handshake and over 1 MB from a",
        || {
            let p = peers_file(&lab, "b");
            p["implementation"] == "kernel"
                && p["peers"][0]["name"] == "a"
                && p["peers"][0]["latest_handshake_secs"].as_f64().is_some()
                && p["peers"][0]["rx_bytes"].as_u64().unwrap_or(0) > 1_000_000
                && p["peers"][0]["endpoint"]
                    .as_str()
                    .is_some_and(|e| e.contains(a_end))
        },
    );
    let st = tunbench(&["status", &lab]);
    let said = text(&st);
    assert!(said.contains("wireguard wg on b (kernel)"), "{said}");
    // What each adds per packet: outer IP 20/40 + UDP 8 + WireGuard 32
    // (header 16, tag 16), both ways for inner packets of a multiple of 16
    // bytes. The kernel also pads the inner packet to a multiple of 16
    // (as the protocol allows); tunbench does not.
    let outer = if underlay_v6 { 80 } else { 60 };
    let capture = frames_on(&format!("{lab}-b"), "eth0");
    let carrier = Carrier {
        v6: underlay_v6,
        proto: 17,
        port: Some(51820),
    };
    // ICMP payload + 28 = inner IPv4 packet: 1008 and 1024 bytes.
    for size in [980u64, 996] {
        let each = overheads_of_an_echo(&lab, B_INNER, size, &capture, carrier);
        assert!(
            !each.is_empty() && each.iter().all(|o| *o == outer),
            "an echo of {size} bytes over the {} underlay: overheads {each:?}, expected {outer}",
            if underlay_v6 { "IPv6" } else { "IPv4" }
        );
    }
    // A 1009-byte inner packet: tunbench's request as it is, the kernel's
    // reply padded by 15.
    let mut each = overheads_of_an_echo(&lab, B_INNER, 981, &capture, carrier);
    each.sort();
    each.dedup();
    assert_eq!(each, vec![outer, outer + 15], "an echo of 981 bytes");
}

#[test]
fn kernel_wireguard_and_tunbench_pass_traffic_over_ipv4_at_60_bytes_a_packet() {
    kernel_wireguard_with_tunbench_peer(false, "ktw4");
}

#[test]
fn kernel_wireguard_and_tunbench_pass_traffic_over_ipv6_at_80_bytes_a_packet() {
    kernel_wireguard_with_tunbench_peer(true, "ktw6");
}
