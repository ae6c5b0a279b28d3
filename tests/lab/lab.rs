//! End-to-end: labs built in real namespaces (run as root, as CI does).

use crate::common::*;
use std::process::Command;

fn up_check_down(file: &str, tag: &str) {
    let lab = lab_name(tag);
    let (_g, o) = up(&topo(file), &lab);
    assert!(o.status.success(), "up {file}: {}", text(&o));
    assert!(
        text(&o).contains(&format!("lab {lab} is up")),
        "{}",
        text(&o)
    );
    let t = tunbench(&["check", &lab]);
    assert_eq!(t.status.code(), Some(0), "check {file}:\n{}", text(&t));
    assert!(text(&t).contains("0 did not"), "{}", text(&t));
    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert_gone(&lab);
    // Idempotent.
    let d2 = tunbench(&["down", &lab]);
    assert!(
        d2.status.success() && text(&d2).contains("not up"),
        "{}",
        text(&d2)
    );
}

#[test]
fn nvr500_home_up_check_down() {
    up_check_down("nvr500-home.toml", "home");
}

#[test]
fn two_hosts_up_check_down() {
    up_check_down("two-hosts.toml", "pair");
}

#[test]
fn router_up_check_down() {
    up_check_down("router.toml", "rim");
}

#[test]
fn check_matrix_matches_routing() {
    let lab = lab_name("mx");
    let (_g, o) = up(&topo("nvr500-home.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let j = tunbench(&["check", &lab, "--json"]);
    assert!(j.status.success(), "{}", text(&j));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let probes = v["probes"].as_array().unwrap();
    let find = |from: &str, addr: &str| {
        probes
            .iter()
            .find(|p| p["from"] == from && p["addr"] == addr)
            .unwrap_or_else(|| panic!("no probe {from} -> {addr}"))
    };
    // Through the NVR500, the switch and the home gateway to the ISP over IPv6.
    assert_eq!(find("pc", "2001:2:0:100::1")["replied"], true);
    assert_eq!(find("server", "198.18.11.2")["replied"], true);
    // IPv4 never reaches the ISP side (it has no IPv4): routing knows, so no failure.
    assert!(
        probes
            .iter()
            .all(|p| p["to"] != "isp" || p["addr"].as_str().unwrap().contains(':'))
    );
    // The ISP has no route to the OpenWrt box's LAN2 address family it lacks.
    let p = find("isp", "198.18.1.3");
    assert_eq!(p["replied"], false);
    assert!(p["unreachable_because"].is_string());
}

#[test]
fn check_fails_when_a_link_is_cut() {
    let lab = lab_name("cut");
    let (_g, o) = up(&topo("router.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    // Cut the router's right side behind tunbench's back.
    let s = Command::new("ip")
        .args(["-n", &format!("{lab}-r1"), "link", "set", "eth1", "down"])
        .status()
        .unwrap();
    assert!(s.success());
    let t = tunbench(&["check", &lab]);
    assert_eq!(t.status.code(), Some(1), "{}", text(&t));
    assert!(
        text(&t).contains("FAIL left -> 198.18.2.2 (right:eth0)"),
        "{}",
        text(&t)
    );
}

#[test]
fn two_labs_from_one_file_at_once() {
    let (a, b) = (lab_name("twa"), lab_name("twb"));
    let (_ga, oa) = up(&topo("router.toml"), &a);
    let (_gb, ob) = up(&topo("router.toml"), &b);
    assert!(
        oa.status.success() && ob.status.success(),
        "{}\n{}",
        text(&oa),
        text(&ob)
    );
    assert_eq!(namespaces(&format!("{a}-")).len(), 3);
    assert_eq!(namespaces(&format!("{b}-")).len(), 3);
    for l in [&a, &b] {
        let t = tunbench(&["check", l]);
        assert_eq!(t.status.code(), Some(0), "{}", text(&t));
    }
    assert!(tunbench(&["down", &a]).status.success());
    assert_gone(&a);
    // The other lab is untouched.
    assert_eq!(tunbench(&["check", &b]).status.code(), Some(0));
}

#[test]
fn same_lab_twice_is_refused_and_leaves_the_first_alone() {
    let lab = lab_name("dup");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let again = tunbench(&[
        "up",
        topo("two-hosts.toml").to_str().unwrap(),
        "--name",
        &lab,
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("already up"), "{}", text(&again));
    assert_eq!(tunbench(&["check", &lab]).status.code(), Some(0));
}

#[test]
fn foreign_namespace_is_never_taken_or_removed() {
    let lab = lab_name("frn");
    let foreign = format!("{lab}-h2");
    assert!(
        Command::new("ip")
            .args(["netns", "add", &foreign])
            .status()
            .unwrap()
            .success()
    );
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _d = Del(foreign.clone());
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains(&format!("namespace {foreign} already exists")),
        "{}",
        text(&o)
    );
    assert_eq!(
        namespaces(&format!("{lab}-")),
        vec![foreign.clone()],
        "only the foreign namespace remains"
    );
    assert!(!state_dir(&lab).exists());
}

/// A step the kernel rejects in the middle of `up`: everything built is removed.
#[test]
fn failing_step_rolls_back_everything() {
    let lab = lab_name("rb");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    // IPv6 is disabled on h2's eth0 by a device sysctl, so the kernel refuses the
    // IPv6 address on it: a failure only the kernel can find.
    let text_in = std::fs::read_to_string(topo("two-hosts.toml"))
        .unwrap()
        .replace(
            "[nodes.h2]\nkind = \"host\"",
            "[nodes.h2]\nkind = \"host\"\nsysctls = { \"net.ipv6.conf.eth0.disable_ipv6\" = 1 }",
        );
    assert!(text_in.contains("disable_ipv6"));
    std::fs::write(&file, text_in).unwrap();
    let (_g, o) = up(&file, &lab);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let msg = text(&o);
    assert!(
        msg.contains("addr add 2001:2::2/64 dev eth0"),
        "names the step: {msg}"
    );
    assert!(msg.contains("everything built so far was removed"), "{msg}");
    assert_gone(&lab);
}

#[test]
fn unknown_sysctl_rolls_back_with_the_kernels_reason() {
    let lab = lab_name("sy");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    let t = std::fs::read_to_string(topo("router.toml"))
        .unwrap()
        .replace(
            "[nodes.r1]\nkind = \"router\"",
            "[nodes.r1]\nkind = \"router\"\nsysctls = { \"net.ipv4.tunbench_no_such_knob\" = 1 }",
        );
    std::fs::write(&file, t).unwrap();
    let (_g, o) = up(&file, &lab);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("net.ipv4.tunbench_no_such_knob=1: no such sysctl"),
        "{}",
        text(&o)
    );
    assert_gone(&lab);
}

#[test]
fn ctrl_c_during_up_rolls_back() {
    let lab = lab_name("int");
    let dir = tempfile::tempdir().unwrap();
    let _g = LabGuard(lab.clone());
    let child = slow_up_of_chain(&lab, 12, dir.path());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    assert_gone(&lab);
}

#[test]
fn exec_runs_inside_the_node_and_passes_the_exit_code() {
    let lab = lab_name("ex");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let e = tunbench(&[
        "exec", &lab, "h1", "--", "ip", "-o", "addr", "show", "dev", "eth0",
    ]);
    assert!(e.status.success(), "{}", text(&e));
    assert!(text(&e).contains("198.18.0.1/24"), "{}", text(&e));
    // /sys shows the node's own devices.
    let s = tunbench(&["exec", &lab, "h2", "--", "ls", "/sys/class/net"]);
    assert!(
        text(&s).contains("eth0") && text(&s).contains("lo"),
        "{}",
        text(&s)
    );
    let c = tunbench(&["exec", &lab, "h1", "--", "sh", "-c", "exit 7"]);
    assert_eq!(c.status.code(), Some(7));
    let n = tunbench(&["exec", &lab, "nope", "--", "true"]);
    assert_eq!(n.status.code(), Some(2));
    assert!(text(&n).contains("has no node \"nope\""), "{}", text(&n));
}

#[test]
fn status_reports_devices_addresses_and_state() {
    let lab = lab_name("st");
    let (_g, o) = up(&topo("nvr500-home.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let j = tunbench(&["status", &lab, "--json"]);
    assert!(j.status.success(), "{}", text(&j));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let nodes = v[0]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 10);
    let nvr = nodes.iter().find(|n| n["node"] == "nvr500").unwrap();
    let lan1 = nvr["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "lan1")
        .unwrap();
    assert_eq!(lan1["up"], true);
    assert_eq!(lan1["mtu"], 1500);
    let addrs: Vec<&str> = lan1["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        addrs.contains(&"198.18.11.250/24") && addrs.contains(&"2001:2:0:11::250/64"),
        "{addrs:?}"
    );
    let sw = nodes.iter().find(|n| n["node"] == "sw").unwrap();
    let ports = sw["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["master"] == "br0")
        .count();
    assert_eq!(ports, 4);
    let t = tunbench(&["status", &lab]);
    assert!(
        text(&t).contains("lan1") && text(&t).contains("master br0"),
        "{}",
        text(&t)
    );
}

#[test]
fn down_takes_a_topology_file_too() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("df");
    let file = dir.path().join("lab.toml");
    std::fs::write(
        &file,
        std::fs::read_to_string(topo("two-hosts.toml"))
            .unwrap()
            .replace("name = \"pair\"", &format!("name = \"{lab}\"")),
    )
    .unwrap();
    let _g = LabGuard(lab.clone());
    assert!(tunbench(&["up", file.to_str().unwrap()]).status.success());
    let d = tunbench(&["down", file.to_str().unwrap()]);
    assert!(d.status.success(), "{}", text(&d));
    assert_gone(&lab);
}

#[test]
fn ipv6_works_at_once_without_dad() {
    let lab = lab_name("dad");
    let (_g, o) = up(&topo("two-hosts.toml"), &lab);
    assert!(o.status.success());
    // Immediately after up: no address is tentative.
    let a = tunbench(&[
        "exec",
        &lab,
        "h1",
        "--",
        "ip",
        "-6",
        "addr",
        "show",
        "tentative",
    ]);
    assert!(a.status.success());
    assert!(
        String::from_utf8_lossy(&a.stdout).trim().is_empty(),
        "tentative addresses: {}",
        text(&a)
    );
}

#[test]
fn routes_with_metric_and_device_are_installed_as_written() {
    let lab = lab_name("rt");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("routes.toml");
    let t = std::fs::read_to_string(topo("router.toml")).unwrap().replace(
        "  { to = \"default\", via = \"2001:2:0:1::1\" },\n]",
        "  { to = \"default\", via = \"2001:2:0:1::1\" },\n  { to = \"198.18.9.0/24\", via = \"198.18.1.1\", metric = 10 },\n  { to = \"198.18.8.0/24\", dev = \"eth0\" },\n  { to = \"2001:2:0:9::/64\", via = \"2001:2:0:1::1\", dev = \"eth0\", metric = 7 },\n]",
    );
    assert!(t.contains("metric = 7"));
    std::fs::write(&file, t).unwrap();
    let (_g, o) = up(&file, &lab);
    assert!(o.status.success(), "{}", text(&o));
    let r4 = tunbench(&["exec", &lab, "left", "--", "ip", "-4", "route"]);
    let r4 = text(&r4);
    assert!(
        r4.contains("198.18.9.0/24 via 198.18.1.1 dev eth0 proto static metric 10"),
        "{r4}"
    );
    assert!(
        r4.contains("198.18.8.0/24 dev eth0 proto static scope link"),
        "{r4}"
    );
    let r6 = tunbench(&["exec", &lab, "left", "--", "ip", "-6", "route"]);
    let r6 = text(&r6);
    assert!(
        r6.contains("2001:2:0:9::/64 via 2001:2:0:1::1 dev eth0 proto static metric 7"),
        "{r6}"
    );
}
