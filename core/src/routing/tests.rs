use crate::topology::parse_str;
use std::path::Path;

const RIM: &str = r#"
name = "rim"
[nodes.a]
kind = "host"
routes = [{ to = "default", via = "198.18.1.1" }]
[nodes.r]
kind = "router"
[nodes.b]
kind = "host"
routes = [{ to = "198.18.1.0/24", via = "198.18.2.1" }]
[nodes.c]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.1.2/24" }
b = { port = "r:eth0", ipv4 = "198.18.1.1/24" }
[[links]]
a = { port = "r:eth1", ipv4 = "198.18.2.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.2.2/24" }
[[links]]
a = { port = "r:eth2", ipv4 = "198.18.3.1/24" }
b = { port = "c:eth0", ipv4 = "198.18.3.2/24" }
"#;

#[test]
fn echo_needs_a_way_there_and_back() {
    let t = parse_str(RIM, Path::new("rim.toml")).unwrap();
    let r = super::Router::new(&t);
    let (a, b, c) = (
        t.node_index("a").unwrap(),
        t.node_index("b").unwrap(),
        t.node_index("c").unwrap(),
    );
    assert_eq!(r.echo_works(a, "198.18.2.2".parse().unwrap()), Ok(()));
    assert_eq!(r.echo_works(b, "198.18.1.2".parse().unwrap()), Ok(()));
    // c has no route back to a's subnet.
    let e = r.echo_works(a, "198.18.3.2".parse().unwrap()).unwrap_err();
    assert!(
        e.contains("no way back") && e.contains("c has no route"),
        "{e}"
    );
    // b has no route to c's subnet at all.
    assert!(r.echo_works(b, "198.18.3.2".parse().unwrap()).is_err());
    // The router reaches everything on its own links, and c answers its neighbour.
    assert_eq!(
        r.echo_works(t.node_index("r").unwrap(), "198.18.3.2".parse().unwrap()),
        Ok(())
    );
    assert_eq!(r.echo_works(c, "198.18.3.1".parse().unwrap()), Ok(()));
    // A host does not forward: c cannot reach a at all through anything.
    assert!(
        r.echo_works(c, "198.18.1.2".parse().unwrap())
            .unwrap_err()
            .contains("c has no route")
    );
}

/// A trace lists the source, each router and the destination's holder,
/// each with how it got there; a dropped packet is the reason.
#[test]
fn a_trace_names_every_hop_and_how_it_was_reached() {
    use super::{Arrival, Hop};
    let t = parse_str(RIM, Path::new("rim.toml")).unwrap();
    let r = super::Router::new(&t);
    let n = |s: &str| t.node_index(s).unwrap();
    assert_eq!(
        r.trace(n("a"), "198.18.2.2".parse().unwrap()),
        Ok(vec![
            Hop {
                node: n("a"),
                by: None
            },
            Hop {
                node: n("r"),
                by: Some(Arrival::Link)
            },
            Hop {
                node: n("b"),
                by: Some(Arrival::Link)
            },
        ])
    );
    let e = r.trace(n("b"), "198.18.3.2".parse().unwrap()).unwrap_err();
    assert!(e.contains("b has no route"), "{e}");
}

/// A WireGuard peer and a DS-Lite AFTR outside the lab: the inner
/// addresses of the external peer are reached through the tunnel, and IPv4
/// beyond the external AFTR through the softwire, on to what its links and
/// routes reach.
#[test]
fn external_tunnel_ends_carry_the_path() {
    let t = parse_str(
        r#"
name = "xt"
[nodes.client]
kind = "host"
routes = [{ to = "default", via = "198.18.21.1" }]
[nodes.b4]
kind = "router"
routes = [{ to = "default", via = "2001:2:0:11::250" }]
[nodes.aftr]
kind = "external"
addresses = ["2001:2:0:200::1/128"]
[nodes.web]
kind = "external"
[[links]]
a = { port = "client:eth0", ipv4 = "198.18.21.2/24" }
b = { port = "b4:lan", ipv4 = "198.18.21.1/24" }
[[links]]
a = { port = "b4:wan", ipv4 = "198.18.11.2/24", ipv6 = "2001:2:0:11::2/64" }
b = { port = "aftr:lan1", ipv4 = "198.18.11.250/24", ipv6 = "2001:2:0:11::250/64" }
host = "enp1s0"
[[links]]
a = { port = "aftr:inet", ipv4 = "198.18.50.1/24" }
b = { port = "web:eth0", ipv4 = "198.18.50.10/24" }
[tunnels.transix]
kind = "dslite"
aftr = { node = "aftr", address = "2001:2:0:200::1" }
b4 = { node = "b4", address = "2001:2:0:11::2", prefixes = ["198.18.21.0/24"] }
[tunnels.wg]
kind = "wireguard"
peers = [
  { node = "b4", endpoint = "198.18.11.2", address = "198.18.71.2/24" },
  { node = "aftr", endpoint = "198.18.11.250", address = "198.18.71.1/24",
    allowed_ips = ["198.18.72.0/24"], public_key = "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=" },
]
"#,
        Path::new("xt.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let r = super::Router::new(&t);
    let n = |s: &str| t.node_index(s).unwrap();
    // IPv4 beyond the AFTR, through the softwire; the AFTR's own network
    // routes the replies back (no pool given).
    assert_eq!(
        r.echo_works(n("client"), "198.18.50.10".parse().unwrap()),
        Ok(())
    );
    assert_eq!(
        r.echo_works(n("b4"), "198.18.50.1".parse().unwrap()),
        Ok(())
    );
    assert_eq!(
        r.lookup(n("client"), "198.18.50.10".parse().unwrap())
            .unwrap()
            .iface,
        "eth0"
    );
    assert_eq!(
        r.lookup(n("b4"), "198.18.50.10".parse().unwrap())
            .unwrap()
            .iface,
        "softwire:transix"
    );
    // The external peer's inner address, through WireGuard.
    assert_eq!(
        r.echo_works(n("b4"), "198.18.71.1".parse().unwrap()),
        Ok(())
    );
    assert_eq!(
        r.lookup(n("b4"), "198.18.72.9".parse().unwrap())
            .unwrap()
            .iface,
        "wg-wg"
    );
    // Nothing is built for the external ends.
    let plan = crate::plan::plan(&t, &crate::plan::Naming::new("xt", None));
    let text: Vec<String> = plan.ops.iter().map(|o| o.to_string()).collect();
    assert!(
        text.iter()
            .all(|o| !o.contains("xt-aftr") && !o.contains("xt-web"))
    );
    assert!(
        text.iter()
            .any(|o| o.contains("encap seg6 mode encap.red segs 2001:2:0:200::1 dev wan"))
    );
    let jobs = crate::plan::datapath::jobs(&t);
    assert_eq!(
        jobs,
        [(
            crate::plan::datapath::Job::Tunnel("wg".into()),
            "b4".to_string()
        )]
    );
}

/// a - r1 - r2 - b over IPv6: a's packets cross two routers, so they need a
/// hop limit of 3; the reply from b the same.
fn line(a_sysctls: &str) -> String {
    format!(
        r#"
name = "hl"
[nodes.a]
kind = "host"
routes = [{{ to = "default", via = "2001:2:0:1::1" }}]
sysctls = {{ {a_sysctls} }}
[nodes.r1]
kind = "router"
routes = [{{ to = "2001:2:0:3::/64", via = "2001:2:0:2::2" }}]
[nodes.r2]
kind = "router"
routes = [{{ to = "2001:2:0:1::/64", via = "2001:2:0:2::1" }}]
[nodes.b]
kind = "host"
routes = [{{ to = "default", via = "2001:2:0:3::1" }}]
[[links]]
a = {{ port = "a:eth0", ipv6 = "2001:2:0:1::2/64" }}
b = {{ port = "r1:eth0", ipv6 = "2001:2:0:1::1/64" }}
[[links]]
a = {{ port = "r1:eth1", ipv6 = "2001:2:0:2::1/64" }}
b = {{ port = "r2:eth0", ipv6 = "2001:2:0:2::2/64" }}
[[links]]
a = {{ port = "r2:eth1", ipv6 = "2001:2:0:3::1/64" }}
b = {{ port = "b:eth0", ipv6 = "2001:2:0:3::2/64" }}
"#
    )
}

#[test]
fn ipv6_hop_limit_is_the_interfaces_own_copied_from_default() {
    let m = |kv: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    // conf.all is never what a lab's interface uses.
    let all = m(&[("net.ipv6.conf.all.hop_limit", "255")]);
    assert_eq!(super::ipv6_hop_limit(&all, "eth0"), 64);
    // conf.default is copied into every interface made after it is written.
    let default = m(&[("net.ipv6.conf.default.hop_limit", "255")]);
    assert_eq!(super::ipv6_hop_limit(&default, "eth0"), 255);
    // ... but lo exists before any sysctl of the namespace is written.
    assert_eq!(super::ipv6_hop_limit(&default, "lo"), 64);
    // The interface's own setting wins.
    let own = m(&[
        ("net.ipv6.conf.default.hop_limit", "255"),
        ("net.ipv6.conf.eth0.hop_limit", "7"),
    ]);
    assert_eq!(super::ipv6_hop_limit(&own, "eth0"), 7);
    assert_eq!(super::ipv6_hop_limit(&own, "eth1"), 255);
}

#[test]
fn echo_dies_when_the_egress_interfaces_hop_limit_runs_out() {
    let echo = |sysctls: &str| {
        let t = parse_str(&line(sysctls), Path::new("hl.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = super::Router::new(&t);
        r.echo_works(t.node_index("a").unwrap(), "2001:2:0:3::2".parse().unwrap())
    };
    assert_eq!(echo(""), Ok(()));
    let e = echo(r#""net.ipv6.conf.default.hop_limit" = "2""#).unwrap_err();
    assert!(e.contains("hop limit 2 of a runs out"), "{e}");
    assert_eq!(echo(r#""net.ipv6.conf.default.hop_limit" = "3""#), Ok(()));
    // Per interface: eth0 is the way out, so its own value counts.
    let e =
        echo(r#""net.ipv6.conf.default.hop_limit" = "255", "net.ipv6.conf.eth0.hop_limit" = "2""#)
            .unwrap_err();
    assert!(e.contains("runs out"), "{e}");
    assert_eq!(
        echo(r#""net.ipv6.conf.default.hop_limit" = "2", "net.ipv6.conf.eth0.hop_limit" = "3""#),
        Ok(())
    );
}

#[test]
fn setting_conf_all_hop_limit_is_refused_with_what_to_set_instead() {
    let e = parse_str(
        &line(r#""net.ipv6.conf.all.hop_limit" = "255""#),
        Path::new("hl.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("hl.toml:") && e.contains("set \"net.ipv6.conf.default.hop_limit\""),
        "{e}"
    );
}

/// A tunnel end drops inner packets from sources outside its peer's
/// allowed IPs (the codecs' `spoofed`): the home topology's server on
/// LAN2 reaches the PC's end of the NVR500's L2TP/IPsec tunnel only from
/// its address behind it, 198.18.94.10, never from its LAN2 address.
#[test]
fn a_tunnel_end_refuses_sources_outside_its_peers_allowed_ips() {
    let text = std::fs::read_to_string(repo_file!("topologies/nvr500-home.toml")).unwrap();
    let t = parse_str(&text, Path::new("home.toml")).unwrap_or_else(|e| panic!("{e}"));
    let r = super::Router::new(&t);
    let n = |name: &str| t.node_index(name).unwrap();
    let pc_inner = "198.18.94.2".parse().unwrap();
    let e = r.echo_works(n("server"), pc_inner).unwrap_err();
    assert!(
        e.contains("pc drops what nvr500 sends it through tunnel nvr500-l2tp from 198.18.1.10"),
        "{e}"
    );
    // From the PC through the tunnel to the server's address behind it.
    r.echo_works(n("pc"), "198.18.94.10".parse().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    // The IKEv2 end's source is its inner address, as strongSwan picks it.
    r.echo_works(n("server"), "198.18.93.2".parse().unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
}
