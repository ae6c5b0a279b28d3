//! The real path on emulated hardware: labs whose links leave by interfaces of
//! "the host" (macvlan, ipvlan, VLAN, moved) toward an external router. The
//! host is a namespace the test builds (tests/common EmulatedHost) and tunbench
//! runs inside it, so no interface of this machine is touched.

use crate::common::*;

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
        let x = h.tunbench(&["exec", lab, "rtr", "--", "true"]);
        assert_eq!(x.status.code(), Some(2), "{}", text(&x));
        assert!(text(&x).contains("external device"), "{}", text(&x));
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

/// Whether this kernel makes devices of `kind` (`vlan`, `ipvlan`): tried in a
/// scratch namespace of the test's own.
fn kernel_has(kind: &str) -> bool {
    let ns = format!("hk{kind}{}", std::process::id() % 100000);
    ip_in_ok(&["netns", "add", &ns]);
    let made = std::process::Command::new("ip")
        .args(["-n", &ns, "link", "add", "d0", "type", "dummy"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        || std::process::Command::new("ip")
            .args([
                "-n", &ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1",
            ])
            .status()
            .is_ok_and(|s| s.success());
    let mut args = vec![
        "-n", &ns, "link", "add", "link", "d0", "name", "x", "type", kind,
    ];
    args.extend(if kind == "vlan" {
        ["id", "5"]
    } else {
        ["mode", "l2"]
    });
    let has = made
        && std::process::Command::new("ip")
            .args(&args)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &ns])
        .status();
    has
}

fn ip_in_ok(args: &[&str]) {
    let o = std::process::Command::new(program("ip"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "ip {args:?}: {}", text(&o));
}

/// A kernel without the driver: `up` names it and leaves nothing, the host
/// interface as it was.
fn refused_for_want_of_a_driver(h: &EmulatedHost, lab: &str, file: &str, driver: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, file).unwrap();
    let before = h.state_of("enp1s0");
    let links_before = h.links();
    let _g = LabGuard(lab.to_string());
    let o = h.tunbench(&["up", path.to_str().unwrap(), "--name", lab]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(driver), "no {driver:?} in: {}", text(&o));
    assert_gone(lab);
    assert_eq!(h.links(), links_before);
    assert_eq!(h.state_of("enp1s0"), before);
}

#[test]
fn macvlans_carry_traffic_and_go_with_the_lab() {
    let h = EmulatedHost::new("mv");
    let lab = lab_name("hmv");
    let file = two_lans(
        &lab,
        r#""enp1s0""#,
        r#"{ iface = "enp2s0", mode = "macvlan" }"#,
        ["198.18.11.250", "198.18.1.2"],
    );
    // The file's router is ::250 on both LANs; the harness gave lan2 ::2.
    ip_in(
        &h.router,
        &["addr", "add", "2001:2:0:1::250/64", "dev", "lan2", "nodad"],
    );
    carries_traffic_and_leaves_the_host_as_it_was(&h, &lab, &file);
}

/// ipvlan: traffic when the kernel has the driver; on one without it (this
/// project's CI machine has no CONFIG_IPVLAN) a clear refusal that leaves nothing.
#[test]
fn an_ipvlan_carries_traffic_or_is_refused_naming_the_driver() {
    let h = EmulatedHost::new("iv");
    let lab = lab_name("hiv");
    let file = two_lans(
        &lab,
        r#"{ iface = "enp1s0", mode = "ipvlan" }"#,
        r#""enp2s0""#,
        ["198.18.11.250", "198.18.1.2"],
    );
    ip_in(
        &h.router,
        &["addr", "add", "2001:2:0:1::250/64", "dev", "lan2", "nodad"],
    );
    if kernel_has("ipvlan") {
        carries_traffic_and_leaves_the_host_as_it_was(&h, &lab, &file);
    } else {
        refused_for_want_of_a_driver(&h, &lab, &file, "ipvlan");
    }
}

/// One NIC, two VLANs toward a managed switch: traffic when the kernel has
/// 802.1Q; without it (a kernel without CONFIG_VLAN_8021Q) a clear refusal.
#[test]
fn vlans_of_one_nic_serve_both_lans_or_are_refused_naming_the_driver() {
    let h = EmulatedHost::new("vl");
    let lab = lab_name("hvl");
    let file = two_lans(
        &lab,
        r#"{ iface = "enp1s0", vlan = 11 }"#,
        r#"{ iface = "enp1s0", vlan = 12 }"#,
        ["198.18.31.250", "198.18.32.250"],
    );
    if !kernel_has("vlan") {
        refused_for_want_of_a_driver(&h, &lab, &file, "vlan");
        return;
    }
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
        let st = h.tunbench(&["status", &lab]);
        assert!(
            text(&st).contains(&format!(
                "host interface enp1s0 (moved into {lab}-pc as eth0)"
            )),
            "{}",
            text(&st)
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

    // The study itself, as a user with the router would run it (one short run a
    // cell): the manual step, the matrix through the router, the NVR500 study's table.
    // The file as shipped but for its [[measure]]: TCP only and no latency
    // probes. The UDP rate search (tests/measure/measure.rs checks it) and the
    // idle probes would add half a minute that nothing here looks at.
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("nvr500-real.toml");
    let shipped = std::fs::read_to_string(&file).unwrap();
    let tcp_only = shipped.replacen(
        "udp_loss = 10\n",
        "udp_loss = 10\nprotocols = [\"tcp\"]\nlatency = false\n",
        1,
    );
    assert_ne!(tcp_only, shipped, "the file's [[measure]] has moved");
    std::fs::write(&study, tcp_only).unwrap();
    let run = {
        let _g = LabGuard(lab.clone());
        h.tunbench(&[
            "run",
            study.to_str().unwrap(),
            "--name",
            &lab,
            "--force",
            "--yes",
            "--scenario",
            "fast",
            "--runs",
            "1",
            "--duration",
            "1",
        ])
    };
    let out = text(&run);
    assert!(run.status.success(), "run: {out}");
    for needle in [
        "ip routing process fast",
        "(--yes: going on)",
        "fast/raw",
        "IPv6 TCP Receiver",
        "published",
    ] {
        assert!(
            out.contains(needle),
            "no {needle:?} in the run's output:\n{out}"
        );
    }
    // The NVR500 study's figure beside one measured through the router.
    assert!(
        out.lines().any(|l| l.contains("IPv4 TCP Sender")
            && l.contains("824")
            && !l.contains("not measured")),
        "no measured IPv4 TCP Sender beside the NVR500 study's 824 in:\n{out}"
    );
    assert_gone(&lab);
    let after: Vec<String> = ["enp1s0", "enp2s0"].map(|n| h.state_of(n)).to_vec();
    assert_eq!(after, before, "moved interfaces given back after run");
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
        text(&v).contains("enp9s0") && text(&v).contains("no such interface"),
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
