//! Tunnels whose two ends are on different hosts (crate::emulated): ESP and
//! L2TP/IPsec between two hosts, their keys in the file, and a DS-Lite
//! softwire whose B4 and AFTR are on different hosts (WireGuard's is
//! crate::cross_host's); IKEv2 across hosts is refused. Each host
//! builds its part; the tunnel carries packets both ways across the VXLAN
//! link between them.

use crate::common::*;
use crate::emulated::Hosts;
use crate::parts::{Parts, on};

const UNDERLAY_MTU: u32 = 1550;

/// Two hosts, a on west and b on east, one link between them, and `tunnel`.
fn split_vpn(tunnel: &str) -> String {
    format!(
        r#"name = "split-vpn"

[hosts.west]
underlay = "198.18.230.1"
mtu = 1550

[hosts.east]
underlay = "198.18.230.2"
mtu = 1550

[nodes.a]
kind = "host"
host = "west"

[nodes.b]
kind = "host"
host = "east"

[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.72.1/24", ipv6 = "2001:2:0:72::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.72.2/24", ipv6 = "2001:2:0:72::2/64" }}

[tunnels.vpn]
{tunnel}
ends = [
  {{ node = "a", endpoint = "198.18.72.1", address = ["198.18.73.1/24", "2001:2:0:73::1/64"]{a} }},
  {{ node = "b", endpoint = "198.18.72.2", address = ["198.18.73.2/24", "2001:2:0:73::2/64"]{b} }},
]
"#,
        a = if tunnel.contains("ikev2") {
            ""
        } else {
            r#", sa_key = "00112233445566778899aabbccddeeff01020304""#
        },
        b = if tunnel.contains("ikev2") {
            ""
        } else {
            r#", sa_key = "ffeeddccbbaa99887766554433221100a0b0c0d0""#
        },
    )
}

/// Up `topology` on the hosts, named in `names` order; then every (host index,
/// node, address) ping answers; then down, leaving nothing.
fn up_ping_down(topology: &str, names: &[&str], pings: &[(usize, &str, &str)], tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("split.toml");
    std::fs::write(&file, topology).unwrap();
    let file = file.to_str().unwrap();
    let hosts = Hosts::with_mtu(names.len() as u8, UNDERLAY_MTU);
    let lab = lab_name(tag);
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    for (h, name) in hosts.hosts.iter().zip(names) {
        let o = on(h, &["up", file, "--name", &lab, "--host", name]);
        assert!(o.status.success(), "up --host {name}: {}", text(&o));
    }
    for &(i, node, to) in pings {
        eventually(&format!("{node} on {} reaches {to}", names[i]), || {
            on(
                &hosts.hosts[i],
                &["exec", &lab, node, "--", "ping", "-c1", "-W1", to],
            )
            .status
            .success()
        });
    }
    for (h, name) in hosts.hosts.iter().zip(names) {
        let o = on(h, &["down", &lab]);
        assert!(o.status.success(), "down on {name}: {}", text(&o));
        assert!(h.namespaces().is_empty(), "{name}: {:?}", h.namespaces());
        assert!(h.vxlan_devices().is_empty(), "{name}: VXLAN left");
    }
}

/// a pings b and b pings a inside the tunnel, IPv4 and IPv6.
const BOTH_WAYS: [(usize, &str, &str); 4] = [
    (0, "a", "198.18.73.2"),
    (0, "a", "2001:2:0:73::2"),
    (1, "b", "198.18.73.1"),
    (1, "b", "2001:2:0:73::1"),
];

#[test]
fn esp_with_its_sa_keys_in_the_file_carries_both_ways_between_hosts() {
    up_ping_down(
        &split_vpn("kind = \"esp\""),
        &["west", "east"],
        &BOTH_WAYS,
        "xte",
    );
}

#[test]
fn l2tp_over_ipsec_with_its_sa_keys_in_the_file_carries_both_ways_between_hosts() {
    up_ping_down(
        &split_vpn("kind = \"l2tp\"\nipsec = true"),
        &["west", "east"],
        &BOTH_WAYS,
        "xtl",
    );
}

/// IKEv2 cannot cross hosts yet: refused before anything is built, naming
/// what to use instead.
#[test]
fn an_ikev2_tunnel_between_hosts_is_refused_before_anything_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("split.toml");
    std::fs::write(
        &file,
        split_vpn("kind = \"ikev2\"\npsk = \"a lab's throwaway pre-shared key\""),
    )
    .unwrap();
    let hosts = Hosts::with_mtu(1, UNDERLAY_MTU);
    let lab = lab_name("xti");
    let _parts = Parts {
        hosts: &hosts.hosts,
        lab: lab.clone(),
    };
    let o = on(
        &hosts.hosts[0],
        &[
            "up",
            file.to_str().unwrap(),
            "--name",
            &lab,
            "--host",
            "west",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("an IKEv2 tunnel cannot cross hosts yet"),
        "{}",
        text(&o)
    );
    assert!(hosts.hosts[0].namespaces().is_empty());
}

/// dslite.toml's client and B4 at home, its AFTR and server at the ISP: the
/// IPv6 access link crosses hosts, and IPv4 goes through the softwire.
#[test]
fn a_dslite_softwire_between_b4_and_aftr_on_two_hosts_carries_ipv4() {
    let text = std::fs::read_to_string(topo("dslite.toml")).unwrap();
    let placed = text
        .replacen(
            "\n[nodes.client]",
            "\n[hosts.home]\nunderlay = \"198.18.230.1\"\nmtu = 1550\n\n[hosts.isp]\nunderlay = \"198.18.230.2\"\nmtu = 1550\n\n[nodes.client]\nhost = \"home\"",
            1,
        )
        .replacen("[nodes.b4]\n", "[nodes.b4]\nhost = \"home\"\n", 1)
        .replacen("[nodes.aftr]\n", "[nodes.aftr]\nhost = \"isp\"\n", 1)
        .replacen("[nodes.server]\n", "[nodes.server]\nhost = \"isp\"\n", 1)
        // The userspace softwire, on any kernel (seg6 is not everywhere).
        .replacen(
            "[tunnels.sw]\nkind = \"dslite\"\n",
            "[tunnels.sw]\nkind = \"dslite\"\ndatapath = \"userspace\"\n",
            1,
        );
    assert_eq!(placed.matches("host = \"").count(), 4, "{placed}");
    assert!(placed.contains("datapath = \"userspace\""), "{placed}");
    up_ping_down(
        &placed,
        &["home", "isp"],
        &[
            (0, "client", "198.18.52.10"),
            (0, "client", "2001:2:0:52::10"),
        ],
        "xtd",
    );
}
