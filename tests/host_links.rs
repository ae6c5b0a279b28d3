//! The real path on emulated hardware: labs whose links leave by interfaces of
//! "the host" (macvlan, ipvlan, VLAN, moved) toward an external router. The
//! host is a namespace the test builds (tests/common EmulatedHost) and tunbench
//! runs inside it, so no interface of this machine is touched.

mod common;
use common::*;

/// pc and server of nvr500-real.toml, with the `host` of each link given.
fn two_lans(name: &str, pc_host: &str, server_host: &str, router_v4: [&str; 2]) -> String {
    let [r1, r2] = router_v4;
    let sub = |a: &str| a.rsplit_once('.').unwrap().0.to_string();
    let (s1, s2) = (sub(r1), sub(r2));
    let v6 = |s: &str| format!("2001:2:0:{}", s.rsplit('.').next().unwrap());
    let (g1, g2) = (v6(&s1), v6(&s2));
    format!(
        r#"
name = "{name}"
[nodes.pc]
kind = "host"
routes = [{{ to = "default", via = "{r1}" }}, {{ to = "default", via = "{g1}::250" }}]
[nodes.server]
kind = "host"
routes = [{{ to = "default", via = "{r2}" }}, {{ to = "default", via = "{g2}::250" }}]
[nodes.rtr]
kind = "external"
[[links]]
a = {{ port = "pc:eth0", ipv4 = "{s1}.2/24", ipv6 = "{g1}::2/64" }}
b = {{ port = "rtr:lan1", ipv4 = "{r1}/24", ipv6 = "{g1}::250/64" }}
host = {pc_host}
[[links]]
a = {{ port = "server:eth0", ipv4 = "{s2}.10/24", ipv6 = "{g2}::10/64" }}
b = {{ port = "rtr:lan2", ipv4 = "{r2}/24", ipv6 = "{g2}::250/64" }}
host = {server_host}
"#
    )
}

fn ip_in(ns: &str, args: &[&str]) {
    let o = std::process::Command::new(program("ip"))
        .args(["-n", ns])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "ip -n {ns} {args:?}: {}", text(&o));
}

/// Up, check, engine TCP and UDP both ways between pc and server, down; then
/// the host namespace has the same interfaces, in the same state, as before.
fn carries_traffic_and_leaves_the_host_as_it_was(h: &EmulatedHost, lab: &str, file: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, file).unwrap();
    let before: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    let links_before = h.links();
    {
        let _g = LabGuard(lab.to_string());
        let o = h.tunbench(&["up", path.to_str().unwrap(), "--name", lab]);
        assert!(o.status.success(), "up: {}", text(&o));
        let c = h.tunbench(&["check", lab]);
        assert!(c.status.success(), "check: {}", text(&c));
        traffic_both_ways(
            lab,
            &[
                ("pc", "server", "198.18.1.10"),
                ("server", "pc", "2001:2:0:11::2"),
            ],
        );
        let d = h.tunbench(&["down", lab]);
        assert!(d.status.success(), "down: {}", text(&d));
    }
    assert_gone(lab);
    assert_eq!(h.links(), links_before, "host interfaces after down");
    let after: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    assert_eq!(after, before, "host interfaces' state after down");
}

#[test]
fn macvlan_and_ipvlan_carry_traffic_and_go_with_the_lab() {
    let h = EmulatedHost::new("mv");
    let lab = lab_name("hmv");
    let file = two_lans(
        &lab,
        r#""enp1s0""#,
        r#"{ iface = "enp2s0", mode = "ipvlan" }"#,
        ["198.18.11.250", "198.18.1.2"],
    );
    // The router's addresses on lan1/lan2 are .250 and .2; the file's v6 ::250.
    ip_in(
        &h.router,
        &["addr", "add", "2001:2:0:1::250/64", "dev", "lan2", "nodad"],
    );
    carries_traffic_and_leaves_the_host_as_it_was(&h, &lab, &file);
}

#[test]
fn vlans_of_one_nic_serve_both_lans() {
    let h = EmulatedHost::new("vl");
    // The managed switch's side: VLANs 11 and 12 tagged on the router's lan1.
    for (id, v4, v6) in [
        ("11", "198.18.31.250/24", "2001:2:0:31::250/64"),
        ("12", "198.18.32.250/24", "2001:2:0:32::250/64"),
    ] {
        let dev = format!("lan1.{id}");
        ip_in(
            &h.router,
            &[
                "link", "add", "link", "lan1", "name", &dev, "type", "vlan", "id", id,
            ],
        );
        ip_in(&h.router, &["link", "set", &dev, "up"]);
        ip_in(&h.router, &["addr", "add", v4, "dev", &dev]);
        ip_in(&h.router, &["addr", "add", v6, "dev", &dev, "nodad"]);
    }
    let lab = lab_name("hvl");
    let file = two_lans(
        &lab,
        r#"{ iface = "enp1s0", vlan = 11 }"#,
        r#"{ iface = "enp1s0", vlan = 12 }"#,
        ["198.18.31.250", "198.18.32.250"],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, &file).unwrap();
    let before = h.state_of("enp1s0");
    let links_before = h.links();
    {
        let _g = LabGuard(lab.clone());
        let o = h.tunbench(&["up", path.to_str().unwrap(), "--name", &lab]);
        assert!(o.status.success(), "up: {}", text(&o));
        let c = h.tunbench(&["check", &lab]);
        assert!(c.status.success(), "check: {}", text(&c));
        traffic_both_ways(
            &lab,
            &[
                ("pc", "server", "198.18.32.10"),
                ("server", "pc", "2001:2:0:31::2"),
            ],
        );
    }
    assert_gone(&lab);
    assert_eq!(h.links(), links_before);
    assert_eq!(h.state_of("enp1s0"), before);
}

#[test]
fn the_real_nvr500_file_moves_both_nics_in_and_gives_them_back_exactly() {
    let h = EmulatedHost::new("mo");
    // States to give back: enp1s0 down with MTU 1400; enp2s0 up with an address
    // and a route of the host's own (so --force is needed to take it).
    ip_in(&h.host, &["link", "set", "enp1s0", "down", "mtu", "1400"]);
    ip_in(&h.host, &["addr", "add", "198.18.99.1/24", "dev", "enp2s0"]);
    ip_in(
        &h.host,
        &[
            "route",
            "add",
            "198.18.98.0/24",
            "via",
            "198.18.99.2",
            "dev",
            "enp2s0",
        ],
    );
    let lab = lab_name("hmo");
    let file = topo("nvr500-real.toml");
    let before: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    let links_before = h.links();

    let refused = h.tunbench(&["up", file.to_str().unwrap(), "--name", &lab]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("198.18.99.1/24") && text(&refused).contains("--force"),
        "{}",
        text(&refused)
    );
    assert_gone(&lab);
    {
        let _g = LabGuard(lab.clone());
        let o = h.tunbench(&["up", file.to_str().unwrap(), "--name", &lab, "--force"]);
        assert!(o.status.success(), "up: {}", text(&o));
        assert!(
            !h.links().contains(&"enp1s0".to_string()),
            "enp1s0 is in the lab"
        );
        let c = h.tunbench(&["check", &lab]);
        assert!(c.status.success(), "check: {}", text(&c));
        traffic_both_ways(
            &lab,
            &[
                ("pc", "server", "198.18.1.10"),
                ("server", "pc", "2001:2:0:11::2"),
            ],
        );
        let d = h.tunbench(&["down", &lab]);
        assert!(d.status.success(), "down: {}", text(&d));
    }
    assert_gone(&lab);
    assert_eq!(h.links(), links_before);
    let after: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    assert_eq!(after, before, "moved interfaces given back exactly");
}

#[test]
fn refusals_name_the_interface_and_build_nothing() {
    let h = EmulatedHost::new("rf");
    let lab = lab_name("hrf");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_string()
    };
    let up = |file: &str, extra: &[&str]| {
        let mut args = vec!["up", file, "--name", &lab];
        args.extend_from_slice(extra);
        let o = h.tunbench(&args);
        assert_gone(&lab);
        o
    };
    // The management interface: default route and address.
    let mgmt = write(
        "mgmt.toml",
        two_lans(
            &lab,
            r#"{ iface = "mgmt0", move = true }"#,
            r#""enp2s0""#,
            ["198.18.11.250", "198.18.1.2"],
        ),
    );
    let o = up(&mgmt, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    for needle in [
        "mgmt0",
        "default",
        "198.18.250.1",
        "198.18.250.2/24",
        "--force",
    ] {
        assert!(text(&o).contains(needle), "no {needle:?} in: {}", text(&o));
    }
    // A missing interface: validate (no side effects) says so, and up refuses.
    let missing = write(
        "missing.toml",
        two_lans(
            &lab,
            r#""enp9s0""#,
            r#""enp2s0""#,
            ["198.18.11.250", "198.18.1.2"],
        ),
    );
    let v = h.tunbench(&["validate", &missing]);
    assert_ne!(v.status.code(), Some(0), "{}", text(&v));
    assert!(
        text(&v).contains("enp9s0") && text(&v).contains("does not exist"),
        "{}",
        text(&v)
    );
    let o = up(&missing, &["--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("enp9s0"), "{}", text(&o));
    // An interface another lab has moved: refused even with --force.
    let other = lab_name("hrg");
    let first = write(
        "first.toml",
        two_lans(
            &other,
            r#"{ iface = "enp1s0", move = true }"#,
            r#""enp2s0""#,
            ["198.18.11.250", "198.18.1.2"],
        ),
    );
    let _g = LabGuard(other.clone());
    let o = h.tunbench(&["up", &first, "--name", &other]);
    assert!(o.status.success(), "{}", text(&o));
    let second = write(
        "second.toml",
        two_lans(
            &lab,
            r#"{ iface = "enp1s0", move = true }"#,
            r#""enp2s0""#,
            ["198.18.11.250", "198.18.1.2"],
        ),
    );
    let o = up(&second, &["--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("enp1s0") && text(&o).contains(&other),
        "{}",
        text(&o)
    );
    let d = h.tunbench(&["down", &other]);
    assert!(d.status.success(), "{}", text(&d));
    assert!(h.links().contains(&"enp1s0".to_string()));
}
