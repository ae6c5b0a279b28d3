//! Resolution: layered defaults, kinds, names. (Errors are covered by the corpus
//! in tests/fixtures/broken/.)

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
    let t = parse(&std::fs::read_to_string(repo_file!("topologies/nvr500-home.toml")).unwrap());
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
        7,
        "LAN1, LAN2, the WAN link, the NGN to the AFTR, the AFTR's and the ISP's links to the internet server, and the AFTR's to the NGN's server"
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

/// A router with the nvr500 profile between a LAN (a switch with a PC and a
/// second router on it) and a WAN, and a server with the NVR500 study's host profile
/// beyond the WAN. nvr's `spare` interface has no address.
const PROFILED: &str = r#"
name = "prof"
[nodes.sw]
kind = "switch"
[nodes.pc]
kind = "host"
routes = [{ to = "default", via = "198.18.11.250" }]
[nodes.lanr]
kind = "router"
[nodes.nvr]
kind = "router"
profile = "nvr500"
mode = "fast"
lan = "lan1"
routes = [
  { to = "198.18.12.0/24", via = "198.18.11.2" },
  { to = "2001:2:0:12::/64", dev = "lan1" },
  { to = "default", via = "198.18.1.1" },
]
[nodes.isp]
kind = "router"
[nodes.server]
kind = "host"
profile = "nvr500-study-server"
[[links]]
a = "sw:p1"
b = { port = "nvr:lan1", ipv4 = "198.18.11.250/24", ipv6 = "2001:2:0:11::250/64" }
[[links]]
a = { port = "pc:eth0", ipv4 = "198.18.11.1/24" }
b = "sw:p2"
[[links]]
a = { port = "lanr:eth0", ipv4 = "198.18.11.2/24" }
b = "sw:p3"
[[links]]
a = "lanr:eth1"
b = "nvr:spare"
[[links]]
a = { port = "nvr:wan", ipv4 = "198.18.1.2/24" }
b = { port = "isp:eth0", ipv4 = "198.18.1.1/24" }
[[links]]
a = { port = "isp:eth1", ipv4 = "198.18.2.1/24" }
b = { port = "server:eth0", ipv4 = "198.18.2.2/24" }
"#;

#[test]
fn a_router_profile_resolves_into_its_lan_and_the_modes_ceilings() {
    use crate::codec::profile::Way;
    use crate::vocab::{Family, Proto};
    let t = parse(PROFILED);
    let n = &t.nodes[t.node_index("nvr").unwrap()];
    let m = n.model.as_ref().expect("nvr has a device model");
    let lan: Vec<String> = m.lan.iter().map(|p| p.to_string()).collect();
    // lan1's subnets, then what the router sends through a gateway there or out of lan1;
    // the default route leaves by the WAN.
    assert_eq!(
        lan,
        [
            "198.18.11.0/24",
            "2001:2:0:11::/64",
            "198.18.12.0/24",
            "2001:2:0:12::/64"
        ]
    );
    assert_eq!((m.profile.as_str(), m.mode.as_str()), ("nvr500", "fast"));
    assert_eq!(m.queue_packets, 64);
    assert_eq!(m.ceilings.len(), 7);
    let up4 = &m.ceilings[0];
    assert_eq!(
        (
            up4.direction,
            up4.family,
            up4.protocol,
            up4.aggregate_bps,
            up4.flow_bps
        ),
        (
            Some(Way::Upload),
            Some(Family::Ipv4),
            Some(Proto::Tcp),
            Some(824_000_000),
            None
        )
    );
    // The model lives in the slow path.
    assert_eq!(n.datapath, tunnel::Datapath::Userspace);
    assert!(n.host_model.is_none());
    let s = &t.nodes[t.node_index("server").unwrap()];
    let h = s.host_model.as_ref().expect("server has host limits");
    assert_eq!(h.udp_receive_ipv4_bps, Some(312_300_000));
    // ... which run in the host's own slow path as UDP aggregates per family.
    assert_eq!(s.datapath, tunnel::Datapath::Userspace);
    let m = s
        .model
        .as_ref()
        .expect("the host's limits as a device model");
    assert_eq!(m.ceilings.len(), 2);
    assert!(
        m.ceilings
            .iter()
            .all(|c| c.protocol == Some(crate::vocab::Proto::Udp))
    );
    // Without a profile nothing changes.
    let pc = &t.nodes[t.node_index("pc").unwrap()];
    assert!(pc.model.is_none() && pc.host_model.is_none());
    assert_eq!(
        t.nodes[t.node_index("lanr").unwrap()].datapath,
        tunnel::Datapath::Kernel
    );
}

#[test]
fn a_profile_with_one_mode_needs_no_mode_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.toml"),
        "kind = \"router\"\nname = \"one\"\n[modes.only]\nceilings = [{ flow = \"10M\" }]\n",
    )
    .unwrap();
    let file = dir.path().join("t.toml");
    let text = PROFILED.replace(
        "profile = \"nvr500\"\nmode = \"fast\"\n",
        "profile = \"one.toml\"\n",
    );
    let t = parse_str(&text, &file).unwrap_or_else(|e| panic!("{e}"));
    let m = t.nodes[t.node_index("nvr").unwrap()].model.clone().unwrap();
    assert_eq!((m.profile.as_str(), m.mode.as_str()), ("one", "only"));
    assert_eq!(m.ceilings[0].flow_bps, Some(10_000_000));
    assert_eq!(m.ceilings[0].direction, None);
}

#[test]
fn profile_problems_point_at_the_node() {
    let bad = |from: &str, to: &str| -> Vec<String> {
        let text = PROFILED.replace(from, to);
        match parse_str(&text, Path::new("t.toml")) {
            Ok(_) => panic!("accepted with {to:?}"),
            Err(e) => e.0.iter().map(|d| d.to_string()).collect(),
        }
    };
    let e = bad("mode = \"fast\"", "mode = \"turbo\"");
    assert!(
        e[0].contains("nodes.nvr.mode: profile \"nvr500\" has no mode \"turbo\"; its modes: \"fast\", \"normal\""),
        "{e:?}"
    );
    let e = bad("mode = \"fast\"\n", "");
    assert!(
        e[0].contains("nodes.nvr.profile: profile \"nvr500\" has several modes"),
        "{e:?}"
    );
    let e = bad("lan = \"lan1\"", "lan = \"eth7\"");
    assert!(
        e[0].contains("nodes.nvr.lan: node \"nvr\" has no interface \"eth7\"; its interfaces: lan1, spare, wan"),
        "{e:?}"
    );
    // spare has no address: nothing would be on the LAN side.
    let e = bad("lan = \"lan1\"", "lan = \"spare\"");
    assert!(e[0].contains("nvr:spare has no address"), "{e:?}");
    let e = bad("profile = \"nvr500-study-server\"", "profile = \"nvr500\"");
    assert!(
        e[0].contains(
            "nodes.server.profile: \"nvr500\" is a router profile; node \"server\" is a host"
        ),
        "{e:?}"
    );
    let e = bad(
        "lan = \"lan1\"\n",
        "lan = \"lan1\"\ndatapath = \"kernel\"\n",
    );
    assert!(
        e[0].contains(
            "nodes.nvr.datapath: a device profile's ceilings are applied by the userspace slow path"
        ),
        "{e:?}"
    );
}

#[test]
fn a_lab_copy_names_profile_files_by_absolute_path() {
    let text = "name = \"x\"\n[nodes.r]\nkind = \"router\"\nprofile = \"p/r.toml\" # mine\n[nodes.b]\nkind = \"host\"\nprofile = \"nvr500-study-server\"\n[scenarios.s]\nnodes.r.profile = \"other.toml\"\n";
    let out = absolute_profile_paths(text, Path::new("/etc/labs"));
    assert!(
        out.contains("profile = \"/etc/labs/p/r.toml\" # mine\n"),
        "{out}"
    );
    assert!(out.contains("profile = \"nvr500-study-server\""), "{out}");
    assert!(
        out.contains("nodes.r.profile = \"/etc/labs/other.toml\""),
        "{out}"
    );
}

/// A hub between three peers on one switch, the hub being host `a`; `extra`
/// goes into node a's table.
fn host_hub(extra: &str) -> String {
    format!(
        r#"name = "hh"
[nodes.a]
kind = "host"
{extra}
[nodes.s1]
kind = "host"
[nodes.s2]
kind = "host"
[nodes.sw]
kind = "switch"
[[links]]
a = {{ port = "a:eth0", ipv6 = "2001:2:0:82::1/64" }}
b = "sw:p1"
[[links]]
a = {{ port = "s1:eth0", ipv6 = "2001:2:0:82::11/64" }}
b = "sw:p2"
[[links]]
a = {{ port = "s2:eth0", ipv6 = "2001:2:0:82::12/64" }}
b = "sw:p3"
[tunnels.wg]
kind = "wireguard"
hub = "a"
peers = [
  {{ node = "a", endpoint = "2001:2:0:82::1", address = "198.18.83.1/24" }},
  {{ node = "s1", endpoint = "2001:2:0:82::11", address = "198.18.83.11/24" }},
  {{ node = "s2", endpoint = "2001:2:0:82::12", address = "198.18.83.12/24" }},
]
"#
    )
}

#[test]
fn a_hub_forwards_even_on_a_host() {
    let t = parse(&host_hub(""));
    let a = &t.nodes[t.node_index("a").unwrap()];
    assert!(a.forwarding);
    assert_eq!(a.sysctls["net.ipv4.ip_forward"], "1");
    assert_eq!(a.sysctls["net.ipv6.conf.all.forwarding"], "1");
    // The spokes stay hosts that do not forward.
    assert!(!t.nodes[t.node_index("s1").unwrap()].forwarding);
    let r = crate::routing::Router::new(&t);
    assert_eq!(
        r.echo_works(t.node_index("s1").unwrap(), "198.18.83.12".parse().unwrap()),
        Ok(())
    );
}

#[test]
fn a_hub_that_says_it_does_not_forward_is_refused_where_it_says_so() {
    let e = parse_str(&host_hub("forwarding = false"), Path::new("hh.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hh.toml:4:")
            && e.contains("nodes.a.forwarding")
            && e.contains("hub of tunnel \"wg\"")
            && e.contains("remove `forwarding = false`"),
        "{e}"
    );
}

/// The shipped softwire with its datapath said at the tunnel (or not at all).
fn softwire(datapath: Option<&str>) -> String {
    let text = std::fs::read_to_string(Path::new(repo_file!("topologies/dslite.toml"))).unwrap();
    let at = "kind = \"dslite\"\n";
    match datapath {
        None => text,
        Some(d) => text.replacen(at, &format!("{at}datapath = \"{d}\"\n"), 1),
    }
}

fn softwire_datapaths(t: &Topology) -> Vec<(tunnel::Datapath, bool)> {
    let tunnel::TunnelKind::Dslite(d) = &t.tunnels[0].kind else {
        panic!("not a softwire")
    };
    std::iter::once((d.aftr.datapath, d.aftr.auto))
        .chain(d.b4s.iter().map(|b| (b.datapath, b.auto)))
        .collect()
}

#[test]
fn a_softwire_is_auto_by_default_and_auto_follows_the_kernel() {
    use kernel::KernelFacts;
    use tunnel::Datapath::{Kernel, Userspace};
    let without = KernelFacts {
        seg6_lwtunnel: false,
        ..KernelFacts::FULL
    };
    for said in [None, Some("auto")] {
        let text = softwire(said);
        let t = parse_str_for(&text, Path::new("t.toml"), KernelFacts::FULL).unwrap();
        assert_eq!(softwire_datapaths(&t), vec![(Kernel, true); 2], "{said:?}");
        assert_eq!(t.tunnels[0].auto_fallback(), None);
        let t = parse_str_for(&text, Path::new("t.toml"), without).unwrap();
        assert_eq!(
            softwire_datapaths(&t),
            vec![(Userspace, true); 2],
            "{said:?}"
        );
        let note = t.tunnels[0].auto_fallback().expect("a note");
        assert!(
            note.contains("tunnel sw runs in tunbench's userspace datapath")
                && note.contains("the kernel lacks `seg6`")
                && note.contains("CONFIG_IPV6_SEG6_LWTUNNEL"),
            "{note}"
        );
    }
    // Said outright, userspace is userspace on any kernel, and no note.
    let t = parse_str_for(&softwire(Some("userspace")), Path::new("t.toml"), without).unwrap();
    assert_eq!(softwire_datapaths(&t), vec![(Userspace, false); 2]);
    assert_eq!(t.tunnels[0].auto_fallback(), None);
}

#[test]
fn a_kernel_softwire_on_a_kernel_without_seg6_is_refused_where_the_file_asks() {
    let without = kernel::KernelFacts {
        seg6_lwtunnel: false,
        ..kernel::KernelFacts::FULL
    };
    let text = softwire(Some("kernel"));
    assert!(parse_str_for(&text, Path::new("t.toml"), kernel::KernelFacts::FULL).is_ok());
    let e = parse_str_for(&text, Path::new("t.toml"), without)
        .unwrap_err()
        .to_string();
    // Both endpoints inherit it from the tunnel's key, so it is named there.
    assert!(
        e.contains("tunnels.sw.datapath")
            && e.contains(
                "datapath = \"kernel\" needs the kernel's softwire, and the kernel lacks `seg6`"
            )
            && e.contains("`tunbench doctor`")
            && e.contains("CONFIG_IPV6_SEG6_LWTUNNEL")
            && e.contains("\"userspace\""),
        "{e}"
    );
    // One endpoint's own key.
    let one = softwire(None).replacen(
        "pool = \"198.18.53.1\" }",
        "pool = \"198.18.53.1\", datapath = \"kernel\" }",
        1,
    );
    let e = parse_str_for(&one, Path::new("t.toml"), without)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tunnels.sw.aftr.datapath"), "{e}");
    let bad = softwire(Some("fast"));
    let e = parse_str(&bad, Path::new("t.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("datapath \"fast\" is not one of \"auto\", \"kernel\", \"userspace\""),
        "{e}"
    );
}

/// A B4 on a router with the openwrt-b4 profile, an AFTR, and an L2TP/IPsec
/// tunnel from a host to a router with the nvr500 profile.
const TERMINATING: &str = r#"
name = "term"
[nodes.pc]
kind = "host"
[nodes.nvr]
kind = "router"
profile = "nvr500"
mode = "fast"
lan = "lan1"
[nodes.b4]
kind = "router"
profile = "openwrt-b4"
[nodes.aftr]
kind = "router"
[[links]]
a = { port = "pc:eth0", ipv4 = "198.18.11.2/24" }
b = { port = "nvr:lan1", ipv4 = "198.18.11.250/24" }
[[links]]
a = { port = "nvr:lan2", ipv4 = "198.18.1.2/24", ipv6 = "2001:2:0:1::2/64" }
b = { port = "b4:wan", ipv4 = "198.18.1.3/24", ipv6 = "2001:2:0:1::3/64" }
[[links]]
a = { port = "b4:ngn", ipv6 = "2001:2:0:200::1/64" }
b = { port = "aftr:ngn", ipv6 = "2001:2:0:200::2/64" }
[tunnels.sw]
kind = "dslite"
aftr = { node = "aftr", address = "2001:2:0:200::2", pool = "198.18.21.1" }
b4 = { node = "b4", address = "2001:2:0:200::1", prefixes = ["198.18.11.0/24"] }
[tunnels.vpn]
kind = "l2tp"
ipsec = true
encap = "raw"
ends = [
  { node = "pc", endpoint = "198.18.11.2", address = ["198.18.94.2/24"] },
  { node = "nvr", endpoint = "198.18.11.250", address = ["198.18.94.250/24"] },
]
"#;

#[test]
fn terminations_reach_their_ends_and_the_softwire_goes_to_userspace() {
    // A kernel that could run the softwire itself: the profile still needs ours.
    let t = parse_str_for(TERMINATING, Path::new("t.toml"), kernel::KernelFacts::FULL)
        .unwrap_or_else(|e| panic!("{e}"));
    let n = |name: &str| &t.nodes[t.node_index(name).unwrap()];
    assert_eq!(
        n("b4").datapath,
        tunnel::Datapath::Kernel,
        "no forwarding ceilings"
    );
    assert!(n("b4").model.is_none());
    let sw = t.tunnels.iter().find(|x| x.name == "sw").unwrap();
    let tunnel::TunnelKind::Dslite(d) = &sw.kind else {
        panic!("sw is a softwire")
    };
    assert_eq!(d.b4s[0].datapath, tunnel::Datapath::Userspace);
    assert_eq!(
        d.aftr.datapath,
        tunnel::Datapath::Kernel,
        "the AFTR keeps auto's choice"
    );
    assert!(
        sw.auto_fallback().is_none(),
        "the profile chose, not the kernel's lack"
    );
    let b4 = crate::plan::datapath::termination(&t, sw, tunnel::Role::B4(0)).unwrap();
    assert_eq!(
        (b4.profile.as_str(), b4.kind.as_str()),
        ("openwrt-b4", "dslite")
    );
    assert!(crate::plan::datapath::termination(&t, sw, tunnel::Role::Aftr).is_none());
    let vpn = t.tunnels.iter().find(|x| x.name == "vpn").unwrap();
    assert!(crate::plan::datapath::termination(&t, vpn, tunnel::Role::Peer(0)).is_none());
    let nvr = crate::plan::datapath::termination(&t, vpn, tunnel::Role::Peer(1)).unwrap();
    assert_eq!(nvr.ceilings.len(), 2);
    // The NVR500's forwarding ceilings leave its own and the VPN's inner traffic.
    let bypass = &n("nvr").model.as_ref().unwrap().bypass;
    for net in [
        "198.18.11.250/32",
        "198.18.1.2/32",
        "2001:2:0:1::2/128",
        "198.18.94.0/24",
    ] {
        assert!(
            bypass.contains(&net.parse().unwrap()),
            "{net} in {bypass:?}"
        );
    }
    assert!(!bypass.contains(&"198.18.11.0/24".parse().unwrap()));
}

#[test]
fn termination_conflicts_point_at_the_file() {
    let bad = |from: &str, to: &str| -> Vec<String> {
        let text = TERMINATING.replace(from, to);
        assert_ne!(text, TERMINATING, "{from:?} is in the topology");
        match parse_str_for(&text, Path::new("t.toml"), kernel::KernelFacts::FULL) {
            Ok(_) => panic!("accepted with {to:?}"),
            Err(e) => e.0.iter().map(|d| d.to_string()).collect(),
        }
    };
    let e = bad(
        "prefixes = [\"198.18.11.0/24\"] }",
        "prefixes = [\"198.18.11.0/24\"], datapath = \"kernel\" }",
    );
    assert!(
        e[0].starts_with("t.toml:27:92:") && e[0].contains(": tunnels.sw.b4.datapath: B4 b4's profile \"openwrt-b4\" has termination ceilings for \"dslite\""),
        "{e:?}"
    );
    let e = bad(
        "profile = \"openwrt-b4\"\n",
        "profile = \"openwrt-b4\"\nmode = \"fast\"\n",
    );
    assert!(
        e[0].contains(
            "nodes.b4.mode: mode belongs to forwarding ceilings; profile \"openwrt-b4\" has none"
        ),
        "{e:?}"
    );
}

fn wireguard_pair(tunnel_impl: &str, b_impl: &str) -> String {
    format!(
        r#"name = "t"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.90.1/24" }}
b = {{ port = "b:eth0", ipv4 = "198.18.90.2/24" }}
[tunnels.wg]
kind = "wireguard"
{tunnel_impl}
peers = [
  {{ node = "a", endpoint = "198.18.90.1", address = "198.18.91.1/24" }},
  {{ node = "b", endpoint = "198.18.90.2", address = "198.18.91.2/24"{b_impl} }},
]
"#
    )
}

#[test]
fn a_kernel_wireguard_peer_is_refused_on_a_kernel_without_it_where_the_file_says_kernel() {
    use tunnel::implementation::Implementation;
    let without = kernel::KernelFacts {
        wireguard: false,
        ..kernel::KernelFacts::FULL
    };
    // One peer's own key.
    let text = wireguard_pair("", ", implementation = \"kernel\"");
    let t = parse_str_for(&text, Path::new("t.toml"), kernel::KernelFacts::FULL).unwrap();
    let imps: Vec<Implementation> = t.tunnels[0]
        .overlay()
        .unwrap()
        .peers
        .iter()
        .map(|p| p.implementation)
        .collect();
    assert_eq!(imps, [Implementation::Tunbench, Implementation::Kernel]);
    let e = parse_str_for(&text, Path::new("t.toml"), without)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.toml:14:88:")
            && e.contains("tunnels.wg.peers[1].implementation: implementation = \"kernel\" needs the kernel's WireGuard, and the kernel lacks `wireguard`")
            && e.contains("CONFIG_WIREGUARD")
            && e.contains("`tunbench doctor`"),
        "{e}"
    );
    // The tunnel's key, which both peers inherit: named once, there.
    let text = wireguard_pair("implementation = \"kernel\"", "");
    let e = parse_str_for(&text, Path::new("t.toml"), without)
        .unwrap_err()
        .to_string();
    assert_eq!(e.matches("needs the kernel's WireGuard").count(), 1, "{e}");
    assert!(e.contains("tunnels.wg.implementation:"), "{e}");
    // Other implementations ask nothing of the kernel.
    let text = wireguard_pair("", ", implementation = \"wireguard-go\"");
    assert!(parse_str_for(&text, Path::new("t.toml"), without).is_ok());
}
