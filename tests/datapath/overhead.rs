//! The per-packet overhead tunbench states for each tunnel kind (`tunbench
//! status`, and the notes of `tunbench run`) against captured packets: one lab
//! with a WireGuard tunnel, ESP over an IPv6 underlay, bare L2TP with
//! sequence numbers and L2TP/IPsec over raw ESP, each on its own link. Inner
//! packets of four sizes in a row cover every ESP padding length.

use crate::common::*;
use serde_json::Value;

const TOPOLOGY: &str = r#"name = "overhead"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.100.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.100.2/24" }
[[links]]
a = { port = "a:eth1", ipv6 = "2001:2:0:101::1/64" }
b = { port = "b:eth1", ipv6 = "2001:2:0:101::2/64" }
[[links]]
a = { port = "a:eth2", ipv4 = "198.18.102.1/24" }
b = { port = "b:eth2", ipv4 = "198.18.102.2/24" }
[[links]]
a = { port = "a:eth3", ipv4 = "198.18.103.1/24" }
b = { port = "b:eth3", ipv4 = "198.18.103.2/24" }
[tunnels.wg]
kind = "wireguard"
peers = [
  { node = "a", endpoint = "198.18.100.1", address = "198.18.104.1/24" },
  { node = "b", endpoint = "198.18.100.2", address = "198.18.104.2/24" },
]
[tunnels.esp6]
kind = "esp"
ends = [
  { node = "a", endpoint = "2001:2:0:101::1", address = "198.18.105.1/24" },
  { node = "b", endpoint = "2001:2:0:101::2", address = "198.18.105.2/24" },
]
[tunnels.l2]
kind = "l2tp"
sequence = true
ends = [
  { node = "a", endpoint = "198.18.102.1", address = "198.18.106.1/24" },
  { node = "b", endpoint = "198.18.102.2", address = "198.18.106.2/24" },
]
[tunnels.l2sec]
kind = "l2tp"
ipsec = true
encap = "raw"
ends = [
  { node = "a", endpoint = "198.18.103.1", address = "198.18.107.1/24" },
  { node = "b", endpoint = "198.18.103.2", address = "198.18.107.2/24" },
]
"#;

#[test]
fn stated_overhead_matches_captured_packets_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("overhead.toml");
    std::fs::write(&file, TOPOLOGY).unwrap();
    let lab = lab_name("ovh");
    let _g = up_named(&file, &lab);
    let o = tunbench(&["status", &lab, "--json"]);
    let status: Value = serde_json::from_slice(&o.stdout).unwrap();
    let stated = |name: &str| -> (u64, u64) {
        let t = status[0]["tunnels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tunnel {name} in {status}"));
        (
            t["sizes"]["overhead_min"].as_u64().unwrap(),
            t["sizes"]["overhead_max"].as_u64().unwrap(),
        )
    };
    // Expected from the formats: outer IP 20/40, UDP 8, WireGuard 32; ESP 8 +
    // IV 8 + pad 0-3 + 2 + ICV 16; L2TP 6 (+4 with Ns/Nr) + PPP 4.
    for (tunnel, iface, filter, to, expected) in [
        ("wg", "eth0", "udp port 51820", "198.18.104.2", (60, 60)),
        (
            "esp6",
            "eth1",
            "ip6 and udp port 4500",
            "198.18.105.2",
            (82, 85),
        ),
        ("l2", "eth2", "udp port 1701", "198.18.106.2", (42, 42)),
        ("l2sec", "eth3", "ip proto 50", "198.18.107.2", (72, 75)),
    ] {
        let mut seen = Vec::new();
        for size in 1000..1004u64 {
            let pcap = dir.path().join(format!("{tunnel}-{size}.pcap"));
            capture_one_on(
                &lab,
                "b",
                iface,
                &format!("{filter} and greater 1000"),
                &pcap,
                || {
                    ping_output(&lab, "a", &["-s", &size.to_string(), to]);
                },
            );
            let frame = frames(&std::fs::read(&pcap).unwrap()).remove(0);
            // Outer IP packet = frame - Ethernet 14; inner = ICMP payload + 8 + 20.
            let outer = frame.len() as u64 - 14;
            seen.push(outer - (size + 28));
        }
        let measured = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
        eprintln!(
            "{tunnel}: {seen:?} bytes per packet captured, {:?} stated",
            stated(tunnel)
        );
        assert_eq!(measured, stated(tunnel), "{tunnel}: captured {seen:?}");
        // And what the wire formats' RFCs say.
        assert_eq!(measured, expected, "{tunnel}");
    }
}
