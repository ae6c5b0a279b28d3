//! The command line: graph, gen, dry runs, argument errors, and a generated chain
//! built end to end.

mod common;
use common::*;

#[test]
fn graph_dot_shows_nodes_links_interfaces_and_addresses() {
    let o = tunbench(&["graph", topo("nvr500-home.toml").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.starts_with("graph \"home\" {"), "{s}");
    assert!(s.contains("\"nvr500\" [shape=ellipse"), "{s}");
    assert!(s.contains("\"sw\" [shape=box3d"), "{s}");
    assert!(s.contains("\"pc\" -- \"nvr500\" [taillabel=\"eth0\\n198.18.11.2/24\\n2001:2:0:11::2/64\", headlabel=\"lan1\\n198.18.11.250/24"), "{s}");
    // Nine links and the softwire from the OpenWrt B4 to the AFTR.
    assert_eq!(s.matches(" -- ").count(), 10);
    assert!(
        s.contains("\"openwrt\" -- \"aftr\" [style=dashed, label=\"dslite transix (kernel)\"]"),
        "{s}"
    );
}

#[test]
fn graph_mermaid() {
    let o = tunbench(&[
        "graph",
        topo("router.toml").to_str().unwrap(),
        "--format",
        "mermaid",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.starts_with("flowchart LR\n"), "{s}");
    assert!(s.contains("r1((\"r1<br/>router\"))"), "{s}");
    assert!(s.contains("left ---|\"eth0 198.18.1.2/24 2001:2:0:1::2/64 — eth0 198.18.1.1/24 2001:2:0:1::1/64\"| r1"), "{s}");
}

#[test]
fn graph_of_a_broken_file_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.toml");
    std::fs::write(&f, "name = \"x\"\n[nodes.a]\nkind = \"hub\"\n").unwrap();
    let o = tunbench(&["graph", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("x.toml:3:8: nodes.a.kind: unknown node kind \"hub\""),
        "{}",
        text(&o)
    );
}

#[test]
fn dry_run_prints_ip_commands_and_builds_nothing() {
    let lab = lab_name("dry");
    let o = tunbench(&[
        "up",
        topo("router.toml").to_str().unwrap(),
        "--name",
        &lab,
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.lines()
            .next()
            .unwrap()
            .starts_with(&format!("ip netns add {lab}-left;")),
        "{s}"
    );
    assert!(
        !s.contains(&format!("ip -n {lab}-r1 route add")),
        "the router has no static routes: {s}"
    );
    assert!(
        s.contains(&format!(
            "ip -n {lab}-left route add 0.0.0.0/0 via 198.18.1.1 proto static"
        )),
        "{s}"
    );
    assert!(namespaces(&format!("{lab}-")).is_empty());
    assert!(!state_dir(&lab).exists());
}

#[test]
fn argument_errors_exit_2() {
    for args in [
        vec!["up"],
        vec!["frobnicate"],
        vec!["gen", "chain"],
        vec!["up", "x.toml", "--name", "bad name"],
    ] {
        let o = tunbench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    }
    let o = tunbench(&["gen", "chain", "--nodes", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("a chain has 2 to 500 nodes"),
        "{}",
        text(&o)
    );
    // A file that is not there is bad input too.
    let o = tunbench(&["up", "/nonexistent/lab.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("reading topology file /nonexistent/lab.toml"),
        "{}",
        text(&o)
    );
}

#[test]
fn commands_on_a_lab_that_is_not_up_say_so() {
    let lab = lab_name("none");
    let o = tunbench(&["check", &lab]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains(&format!("no lab named {lab} is up")),
        "{}",
        text(&o)
    );
    let o = tunbench(&["exec", &lab, "h1", "--", "true"]);
    assert!(
        text(&o).contains(&format!("no lab named {lab} is up")),
        "{}",
        text(&o)
    );
    let o = tunbench(&["down", &lab]);
    assert!(
        o.status.success() && text(&o).contains("not up"),
        "{}",
        text(&o)
    );
}

#[test]
fn generated_chain_comes_up_routes_end_to_end_and_goes_away() {
    let lab = lab_name("ch");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("chain.toml");
    let g = tunbench(&[
        "gen",
        "chain",
        "--nodes",
        "20",
        "--name",
        &lab,
        "-o",
        f.to_str().unwrap(),
    ]);
    assert!(g.status.success(), "{}", text(&g));
    assert!(
        tunbench(&["validate", f.to_str().unwrap()])
            .status
            .success()
    );
    let _g = LabGuard(lab.clone());
    let u = tunbench(&["up", f.to_str().unwrap()]);
    assert!(u.status.success(), "{}", text(&u));
    assert!(
        text(&u).contains("20 namespaces, 19 links, 76 addresses"),
        "{}",
        text(&u)
    );
    let j = tunbench(&["check", &lab, "--json"]);
    assert_eq!(j.status.code(), Some(0), "{}", text(&j));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    let probes = v["probes"].as_array().unwrap();
    // End to end across 18 routers, both families, both ways.
    for (from, addr) in [
        ("h0", "198.18.18.2"),
        ("h0", "2001:2:0:12::2"),
        ("h19", "198.18.0.1"),
        ("h19", "2001:2:0:0::1"),
    ] {
        let p = probes
            .iter()
            .find(|p| {
                p["from"] == from
                    && p["addr"]
                        .as_str()
                        .unwrap()
                        .parse::<std::net::IpAddr>()
                        .unwrap()
                        == addr.parse::<std::net::IpAddr>().unwrap()
            })
            .unwrap_or_else(|| panic!("{from} -> {addr}"));
        assert_eq!(p["replied"], true, "{from} -> {addr}");
    }
    assert!(tunbench(&["down", &lab]).status.success());
    assert_gone(&lab);
}
