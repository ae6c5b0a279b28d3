//! Resolution: layered defaults, kinds, names. (Errors are covered by the corpus
//! in tests/broken/.)

use super::*;
use std::path::Path;

fn parse(s: &str) -> Topology {
    parse_str(s, Path::new("t.toml")).unwrap_or_else(|e| panic!("{e}"))
}

const LAYERS: &str = r#"
name = "layers"
[defaults]
mtu = 9000
sysctls = { "net.core.somaxconn" = 1024, "net.ipv4.tcp_ecn" = 1 }
[kinds.router]
sysctls = { "net.ipv4.tcp_ecn" = 2 }
[nodes.h]
kind = "host"
[nodes.r]
kind = "router"
sysctls = { "net.core.somaxconn" = 99, "net.ipv4.ip_forward" = false }
[nodes.s]
kind = "switch"
forwarding = true
[[links]]
a = { port = "h:eth0", ipv4 = "198.18.0.1/24" }
b = { port = "r:eth0", ipv4 = "198.18.0.2/24" }
[[links]]
a = "r:eth1"
b = "s:p1"
mtu = 1500
"#;

#[test]
fn defaults_then_kind_then_node() {
    let t = parse(LAYERS);
    let n = |name: &str| &t.nodes[t.node_index(name).unwrap()];
    assert_eq!(n("h").sysctls["net.core.somaxconn"], "1024");
    assert_eq!(n("h").sysctls["net.ipv4.tcp_ecn"], "1");
    assert_eq!(
        n("r").sysctls["net.ipv4.tcp_ecn"],
        "2",
        "kind overrides defaults"
    );
    assert_eq!(
        n("r").sysctls["net.core.somaxconn"],
        "99",
        "node overrides defaults"
    );
    // An explicit sysctl beats the forwarding a kind implies.
    assert!(n("r").forwarding);
    assert_eq!(n("r").sysctls["net.ipv4.ip_forward"], "0");
    assert_eq!(n("r").sysctls["net.ipv6.conf.all.forwarding"], "1");
    assert!(!n("h").forwarding);
    assert_eq!(n("h").sysctls["net.ipv4.ip_forward"], "0");
    assert!(n("s").forwarding, "node setting beats the kind's default");
    // Built-ins are there for everyone.
    assert_eq!(n("h").sysctls["net.ipv6.conf.default.accept_dad"], "0");
}

#[test]
fn link_mtu_defaults_and_bridge_name() {
    let t = parse(LAYERS);
    assert_eq!(t.links[0].mtu, 9000);
    assert_eq!(t.links[1].mtu, 1500);
    let s = &t.nodes[t.node_index("s").unwrap()];
    assert_eq!(s.bridge.as_deref(), Some("br0"));
    assert_eq!(s.interfaces.len(), 1);
    assert_eq!(s.interfaces[0].peer_iface, "eth1");
}

#[test]
fn switch_segments_join_all_ports() {
    let t = parse(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/nvr500-home.toml"
        ))
        .unwrap(),
    );
    let segs = t.segments();
    let sw = t.node_index("sw").unwrap();
    let lan2 = segs
        .iter()
        .find(|s| s.iter().any(|(n, _)| *n == sw))
        .unwrap();
    // nvr500, server, hgw, openwrt and the switch's four ports plus its bridge.
    assert_eq!(lan2.len(), 4 + 5);
    assert_eq!(
        segs.len(),
        6,
        "LAN1, LAN2, the WAN link, the NGN to the AFTR, and the AFTR's and the ISP's links to the internet server"
    );
}

#[test]
fn locator_points_at_keys_in_tables_arrays_and_inline_tables() {
    let text = "name = \"x\"\n[nodes.a]\nkind = \"host\"\nroutes = [\n  { to = \"default\", via = \"1.2.3.4\" },\n]\n";
    let l = locate::Locator::new(text);
    assert_eq!(
        l.find(&KeyPath::root().key("nodes").key("a").key("kind")),
        (3, 8)
    );
    assert_eq!(
        l.find(
            &KeyPath::root()
                .key("nodes")
                .key("a")
                .key("routes")
                .index(0)
                .key("via")
        ),
        (5, 27)
    );
    // A path that goes past what exists stops at the deepest part found.
    assert_eq!(
        l.find(&KeyPath::root().key("nodes").key("a").key("nope")),
        (2, 8)
    );
}

#[test]
fn key_paths_print_like_the_file() {
    let p = KeyPath::root()
        .key("nodes")
        .key("h1")
        .key("sysctls")
        .key("net.ipv4.ip_forward");
    assert_eq!(p.to_string(), "nodes.h1.sysctls.\"net.ipv4.ip_forward\"");
    assert_eq!(
        KeyPath::root().key("links").index(3).key("a").to_string(),
        "links[3].a"
    );
}
