//! Placement: each rule with a file it refuses and one it accepts; VNI
//! derivation; one host's part; the host found from local addresses.

use super::resolve::{derive_vnis, hashed_vni};
use super::*;
use crate::topology::{InvalidTopology, parse_str};
use std::path::Path;

fn parse(s: &str) -> Result<Topology, InvalidTopology> {
    parse_str(s, Path::new("t.toml"))
}

fn ok(s: &str) -> Topology {
    parse(s).unwrap_or_else(|e| panic!("{e}\n--- file ---\n{s}"))
}

/// The one problem of `s`, as `LINE:COL: at: message`.
fn refused(s: &str) -> String {
    match parse(s) {
        Ok(_) => panic!("accepted:\n{s}"),
        Err(e) => {
            assert_eq!(e.0.len(), 1, "want one problem, got:\n{e}");
            let d = &e.0[0];
            format!("{}:{}: {}: {}", d.line, d.column, d.at, d.message)
        }
    }
}

/// pc - r - srv, each on its own host; `hosts` is the [hosts] part, `extra`
/// goes at the end, and `link_mtu` on the pc - r link.
fn chain(hosts: &str, link_mtu: u32, extra: &str) -> String {
    format!(
        r#"name = "split"
[nodes.pc]
kind = "host"
host = "h1"
[nodes.r]
kind = "router"
host = "h2"
[nodes.srv]
kind = "host"
host = "h3"
[[links]]
a = {{ port = "pc:eth0", ipv4 = "198.18.60.2/24" }}
b = {{ port = "r:lan", ipv4 = "198.18.60.1/24" }}
mtu = {link_mtu}
[[links]]
a = {{ port = "r:wan", ipv4 = "198.18.61.1/24" }}
b = {{ port = "srv:eth0", ipv4 = "198.18.61.2/24" }}
mtu = 1400
{hosts}
{extra}
"#
    )
}

const V4_HOSTS: &str = r#"
[hosts.h1]
underlay = "198.18.230.1"
[hosts.h2]
underlay = "198.18.230.2"
interface = "eth9"
[hosts.h3]
underlay = "198.18.230.3"
"#;

const V6_HOSTS: &str = r#"
[hosts.h1]
underlay = "2001:2:0:230::1"
[hosts.h2]
underlay = "2001:2:0:230::2"
[hosts.h3]
underlay = "2001:2:0:230::3"
"#;

#[test]
fn a_file_without_hosts_has_no_placement() {
    let t = ok(r#"name = "one"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = "a:eth0"
b = "b:eth0"
"#);
    assert!(t.placement.is_none());
    assert!(t.placement_lines().is_empty());
    assert!(t.host_part("a").is_none());
    assert_eq!(t.host_for_addresses(&[]), Err(HostLookup::Unplaced));
    let json = serde_json::to_string(&t).unwrap();
    assert!(!json.contains("placement"), "{json}");
}

#[test]
fn host_without_hosts_is_refused_naming_the_node() {
    let s = chain("", 1450, "");
    let e = parse(&s).unwrap_err();
    assert_eq!(e.0.len(), 3, "{e}");
    assert!(
        e.0[0]
            .message
            .contains("node \"pc\" is placed on host \"h1\", but the file declares no [hosts]"),
        "{e}"
    );
    assert_eq!(e.0[0].at, "nodes.pc.host");
    assert_eq!(e.0[0].line, 4);
}

#[test]
fn every_node_is_placed_on_a_declared_host() {
    let s = chain(V4_HOSTS, 1450, "").replace("host = \"h3\"\n", "");
    assert_eq!(
        refused(&s),
        "8:8: nodes.srv: node \"srv\" is placed on no host; the file declares [hosts] (h1, h2, h3), so add host = \"NAME\""
    );
    let s = chain(V4_HOSTS, 1450, "").replace("host = \"h3\"", "host = \"h4\"");
    assert_eq!(
        refused(&s),
        "10:8: nodes.srv.host: host \"h4\" is not declared; declared hosts: h1, h2, h3"
    );
    ok(&chain(V4_HOSTS, 1450, ""));
}

#[test]
fn unknown_keys_of_a_host_are_refused() {
    let s = chain(V4_HOSTS, 1450, "").replace("interface = \"eth9\"", "iface = \"eth9\"");
    assert!(
        refused(&s).contains("unknown field `iface`"),
        "{}",
        refused(&s)
    );
}

#[test]
fn a_host_that_holds_no_node_is_refused() {
    let s = chain(
        V4_HOSTS,
        1450,
        "[hosts.spare]\nunderlay = \"198.18.230.9\"\n",
    );
    assert!(
        refused(&s).contains("hosts.spare: host \"spare\" holds no node"),
        "{}",
        refused(&s)
    );
}

#[test]
fn underlay_addresses_are_distinct_and_parse() {
    let s = chain(&V4_HOSTS.replace("198.18.230.3", "198.18.230.1"), 1450, "");
    assert!(
        refused(&s).contains("hosts.h3.underlay: underlay 198.18.230.1 is also host \"h1\"'s"),
        "{}",
        refused(&s)
    );
    let s = chain(
        &V4_HOSTS.replace("198.18.230.3", "198.18.230.3/24"),
        1450,
        "",
    );
    assert!(refused(&s).contains("is not an IPv4 or IPv6 address"));
}

#[test]
fn both_ends_of_a_crossing_link_share_an_underlay_family() {
    let s = chain(
        &V4_HOSTS.replace("198.18.230.1", "2001:2:0:230::1"),
        1400,
        "",
    );
    let e = refused(&s);
    assert!(e.starts_with("12:1: links[0]: link pc:eth0 - r:lan joins host \"h1\" (underlay 2001:2:0:230::1, IPv6) and host \"h2\" (underlay 198.18.230.2, IPv4)"), "{e}");
}

#[test]
fn link_mtu_fits_vxlan_over_ipv4_exactly_at_the_limit() {
    ok(&chain(V4_HOSTS, 1450, ""));
    let e = refused(&chain(V4_HOSTS, 1451, ""));
    assert!(e.contains("its MTU 1451 plus VXLAN's 50 bytes over IPv4 is 1501, more than host \"h1\"'s underlay MTU 1500; set mtu = 1501 in [hosts.h1] and [hosts.h2] if the underlay carries it, or give the link mtu = 1450 at most"), "{e}");
    // The underlay MTU the message names makes it fit.
    let wider = V4_HOSTS
        .replace(
            "underlay = \"198.18.230.1\"",
            "underlay = \"198.18.230.1\"\nmtu = 1501",
        )
        .replace("interface = \"eth9\"", "interface = \"eth9\"\nmtu = 9000");
    ok(&chain(&wider, 1451, ""));
}

#[test]
fn link_mtu_fits_vxlan_over_ipv6_exactly_at_the_limit() {
    ok(&chain(V6_HOSTS, 1430, ""));
    let e = refused(&chain(V6_HOSTS, 1431, ""));
    assert!(
        e.contains("its MTU 1431 plus VXLAN's 70 bytes over IPv6 is 1501"),
        "{e}"
    );
    assert!(e.contains("mtu = 1430 at most"), "{e}");
}

#[test]
fn the_smaller_underlay_mtu_of_the_two_hosts_counts() {
    let narrow = V4_HOSTS.replace("interface = \"eth9\"", "interface = \"eth9\"\nmtu = 1400");
    // r - srv (1400) crosses h2 (1400) and h3 (1500): 1400 + 50 > 1400.
    let e = refused(&chain(&narrow, 1350, ""));
    assert!(
        e.contains("link r:wan - srv:eth0 crosses from host \"h2\" to host \"h3\""),
        "{e}"
    );
    assert!(e.contains("host \"h2\"'s underlay MTU 1400"), "{e}");
}

#[test]
fn links_on_one_host_get_no_vni_and_no_mtu_rule() {
    let one = chain(V4_HOSTS, 1500, "").replace("host = \"h1\"", "host = \"h2\"");
    let t = ok(&one.replace("[hosts.h1]\nunderlay = \"198.18.230.1\"\n", ""));
    let pl = t.placement.as_ref().unwrap();
    assert_eq!(pl.crossings.len(), 1);
    assert_eq!(pl.crossings[0].link, 1);
    let s = chain(V4_HOSTS, 1450, "").replace("mtu = 1400\n", "mtu = 1400\nvni = 7\n");
    let same = s
        .replace("host = \"h3\"", "host = \"h2\"")
        .replace("[hosts.h3]\nunderlay = \"198.18.230.3\"\n", "");
    assert!(
        refused(&same).contains(
            "links[1].vni: this link does not cross hosts (both ends are on host \"h2\")"
        ),
        "{}",
        refused(&same)
    );
    assert_eq!(ok(&s).placement.unwrap().crossings[1].vni, 7);
}

#[test]
fn a_switch_split_across_hosts_is_refused() {
    let base = r#"name = "sw"
[hosts.x]
underlay = "198.18.230.1"
[hosts.y]
underlay = "198.18.230.2"
[nodes.sw]
kind = "switch"
host = "x"
[nodes.a]
kind = "host"
host = "x"
[nodes.b]
kind = "host"
host = "B"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.60.1/24" }
b = "sw:p1"
mtu = 1400
[[links]]
a = { port = "b:eth0", ipv4 = "198.18.60.2/24" }
b = "sw:p2"
mtu = 1400
"#;
    let e = refused(&base.replace("\"B\"", "\"y\""));
    assert!(
        e.contains("nodes.sw: switch \"sw\" is one bridge on host \"x\", but nodes on its ports are on host \"y\" (b)"),
        "{e}"
    );
    let t = ok(&base
        .replace("\"B\"", "\"x\"")
        .replace("[hosts.y]\nunderlay = \"198.18.230.2\"\n", ""));
    assert!(t.placement.unwrap().crossings.is_empty());
}

#[test]
fn vnis_are_in_range_and_distinct() {
    let with = |a: &str, b: &str| {
        chain(V4_HOSTS, 1450, "")
            .replace("mtu = 1450\n", &format!("mtu = 1450\n{a}\n"))
            .replace("mtu = 1400\n", &format!("mtu = 1400\n{b}\n"))
    };
    let e = refused(&with("vni = 5", "vni = 5"));
    assert!(
        e.contains("links[1].vni: vni 5 is also link pc:eth0 - r:lan's"),
        "{e}"
    );
    let e = refused(&with("vni = 16777216", ""));
    assert!(
        e.contains("vni 16777216 is out of range; use 1..=16777215"),
        "{e}"
    );
    let e = refused(&with("vni = 0", ""));
    assert!(e.contains("vni 0 is out of range"), "{e}");
    let t = ok(&with("vni = 16777215", "vni = 1"));
    let v: Vec<u32> = t
        .placement
        .unwrap()
        .crossings
        .iter()
        .map(|c| c.vni)
        .collect();
    assert_eq!(v, [16_777_215, 1]);
}

#[test]
fn vxlan_port_defaults_to_4789_and_is_checked() {
    assert_eq!(
        ok(&chain(V4_HOSTS, 1450, "")).placement.unwrap().vxlan_port,
        4789
    );
    let s = chain(V4_HOSTS, 1450, "").replacen(
        "name = \"split\"",
        "name = \"split\"\nvxlan_port = 8472",
        1,
    );
    assert_eq!(ok(&s).placement.unwrap().vxlan_port, 8472);
    let s = chain(V4_HOSTS, 1450, "").replacen(
        "name = \"split\"",
        "name = \"split\"\nvxlan_port = 70000",
        1,
    );
    assert!(refused(&s).contains("vxlan_port 70000 is not a UDP port"));
}

#[test]
fn derived_vnis_do_not_move_when_unrelated_links_are_added() {
    let t = ok(&chain(V4_HOSTS, 1450, ""));
    let before: Vec<u32> = t
        .placement
        .unwrap()
        .crossings
        .iter()
        .map(|c| c.vni)
        .collect();
    assert_eq!(before[0], hashed_vni("pc:eth0 r:lan"));
    assert_eq!(before[1], hashed_vni("r:wan srv:eth0"));
    // A node (shifting node indices) and a crossing link written first.
    let more = chain(V4_HOSTS, 1450, "")
        .replacen(
            "[[links]]",
            "[nodes.aa]\nkind = \"host\"\nhost = \"h3\"\n[[links]]\na = \"aa:eth0\"\nb = \"pc:eth1\"\nmtu = 1400\n[[links]]",
            1,
        );
    let t = ok(&more);
    let pl = t.placement.as_ref().unwrap();
    let vni_of = |key: &str| {
        pl.crossings
            .iter()
            .find(|c| super::resolve::end_key(&t.nodes, &t.links[c.link]) == key)
            .unwrap()
            .vni
    };
    assert_eq!(pl.crossings.len(), 3);
    assert_eq!(vni_of("pc:eth0 r:lan"), before[0]);
    assert_eq!(vni_of("r:wan srv:eth0"), before[1]);
}

#[test]
fn a_derived_vni_steps_past_a_taken_one() {
    let want = hashed_vni("k1");
    let mut cs = vec![
        Crossing {
            link: 0,
            vni: want,
            vni_at: Some(KeyPath::root()),
        },
        Crossing {
            link: 1,
            vni: 0,
            vni_at: None,
        },
        Crossing {
            link: 2,
            vni: 0,
            vni_at: None,
        },
    ];
    // Links 1 and 2 hash alike, and onto link 0's VNI.
    derive_vnis(&mut cs, |_| "k1".to_string(), hashed_vni);
    let step = |v: u32| v % VNI_MAX + 1;
    assert_eq!(cs[0].vni, want);
    assert_eq!(cs[1].vni, step(want));
    assert_eq!(cs[2].vni, step(step(want)));
    // At the top, stepping wraps to 1.
    let mut cs = vec![
        Crossing {
            link: 0,
            vni: VNI_MAX,
            vni_at: Some(KeyPath::root()),
        },
        Crossing {
            link: 1,
            vni: 0,
            vni_at: None,
        },
    ];
    derive_vnis(&mut cs, |l| format!("k{l}"), |_| VNI_MAX);
    assert_eq!(cs[1].vni, 1);
}

#[test]
fn a_host_part_holds_its_nodes_links_and_vxlan_ends() {
    let t = ok(&chain(V4_HOSTS, 1450, ""));
    let pl = t.placement.as_ref().unwrap();
    let r = t.node_index("r").unwrap();
    let part = t.host_part("h2").unwrap();
    assert_eq!(part.nodes, [r]);
    assert!(part.local_links.is_empty());
    assert_eq!(part.ends.len(), 2);
    let lan = &part.ends[0];
    assert_eq!((lan.link, lan.node, lan.iface.as_str()), (0, r, "lan"));
    assert_eq!(lan.remote_host, "h1");
    assert_eq!(lan.local, "198.18.230.2".parse::<IpAddr>().unwrap());
    assert_eq!(lan.remote, "198.18.230.1".parse::<IpAddr>().unwrap());
    assert_eq!((lan.port, lan.vni), (4789, pl.crossings[0].vni));
    assert_eq!(lan.underlay_interface.as_deref(), Some("eth9"));
    assert_eq!(part.ends[1].remote_host, "h3");
    let pc_part = t.host_part("h1").unwrap();
    assert_eq!(pc_part.ends.len(), 1);
    assert_eq!(pc_part.ends[0].vni, lan.vni);
    assert_eq!(pc_part.ends[0].remote, lan.local);
    assert!(t.host_part("nope").is_none());
    // Two nodes on one host: their link is local.
    let t = ok(&chain(V4_HOSTS, 1450, "")
        .replace("host = \"h3\"", "host = \"h2\"")
        .replace("[hosts.h3]\nunderlay = \"198.18.230.3\"\n", ""));
    let part = t.host_part("h2").unwrap();
    assert_eq!(part.nodes.len(), 2);
    assert_eq!(part.local_links, [1]);
    assert_eq!(part.ends.len(), 1);
}

#[test]
fn the_host_is_found_from_local_addresses() {
    let t = ok(&chain(V4_HOSTS, 1450, ""));
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(
        t.host_for_addresses(&[a("127.0.0.1"), a("198.18.230.3")]),
        Ok("h3")
    );
    assert!(
        matches!(t.host_for_addresses(&[a("127.0.0.1")]), Err(HostLookup::NoneLocal(d)) if d.len() == 3)
    );
    assert_eq!(
        t.host_for_addresses(&[a("198.18.230.1"), a("198.18.230.2")]),
        Err(HostLookup::Several(vec!["h1".into(), "h2".into()]))
    );
}

#[test]
fn validate_lists_each_host() {
    let t = ok(&chain(V4_HOSTS, 1450, ""));
    let v = t.placement.as_ref().unwrap().crossings[0].vni;
    let lines = t.placement_lines();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        format!(
            "host h1 (198.18.230.1, mtu 1500): nodes pc; links to other hosts: pc:eth0 to h2 (VNI {v})"
        )
    );
}

#[test]
fn tunnels_across_hosts_are_accepted() {
    let s = chain(
        V4_HOSTS,
        1450,
        r#"
[tunnels.wg]
kind = "wireguard"
peers = [
  { node = "pc", endpoint = "198.18.60.2", address = ["198.18.62.1/24"] },
  { node = "srv", endpoint = "198.18.61.2", address = ["198.18.62.2/24"] },
]
"#,
    )
    .replace(
        "kind = \"host\"\nhost = \"h1\"",
        "kind = \"host\"\nhost = \"h1\"\nroutes = [{ to = \"default\", via = \"198.18.60.1\" }]",
    )
    .replace(
        "kind = \"host\"\nhost = \"h3\"",
        "kind = \"host\"\nhost = \"h3\"\nroutes = [{ to = \"default\", via = \"198.18.61.1\" }]",
    );
    let t = ok(&s);
    assert_eq!(t.tunnels.len(), 1);
}

#[test]
fn a_link_between_hosts_has_no_relayed_impairments() {
    let file = chain(V4_HOSTS, 1400, "").replace(
        "b = { port = \"srv:eth0\", ipv4 = \"198.18.61.2/24\" }\nmtu = 1400",
        "b = { port = \"srv:eth0\", ipv4 = \"198.18.61.2/24\" }\nmtu = 1400\nimpairments = { delay = \"5ms\" }",
    );
    let e = refused(&file);
    assert!(
        e.contains("crosses from host \"h2\" to host \"h3\" and has userspace impairments"),
        "{e}"
    );
    // A kernel rate is shaped at the sending end's device, a VXLAN one too.
    ok(&file.replace("delay = \"5ms\"", "rate = \"100M\""));
}
