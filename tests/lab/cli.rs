//! The command line: graph, gen, dry runs, argument errors, and generated chains
//! built end to end (one of 100 nodes, longer than the default hop limit).

use crate::common::*;

#[test]
fn graph_dot_shows_nodes_links_interfaces_and_addresses() {
    let o = tunbench(&["graph", topo("nvr500-home.toml").to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.starts_with("graph \"home\" {"), "{s}");
    assert!(s.contains("\"nvr500\" [shape=ellipse"), "{s}");
    assert!(s.contains("\"sw\" [shape=box3d"), "{s}");
    assert!(s.contains("\"pc\" -- \"nvr500\" [taillabel=\"eth0\\n198.18.11.2/24\\n2001:2:0:11::2/64\", headlabel=\"lan1\\n198.18.11.250/24"), "{s}");
    // Ten links, the softwire from the OpenWrt B4 to the AFTR, the
    // WireGuard, L2TP/IPsec and IKEv2 tunnels from the PC to the server, and
    // the PC's L2TP/IPsec tunnel to the NVR500's own server.
    assert_eq!(s.matches(" -- ").count(), 15);
    // The softwire's datapath is "auto": the kernel's where the kernel can.
    let dp = if kernel_has_seg6() {
        "kernel"
    } else {
        "userspace"
    };
    assert!(
        s.contains(&format!(
            "\"openwrt\" -- \"aftr\" [style=dashed, label=\"dslite transix ({dp})\"]"
        )),
        "{s}"
    );
    assert!(
        s.contains("\"pc\" -- \"server\" [style=dashed, label=\"wireguard vpn (tunbench)\"]"),
        "{s}"
    );
    assert!(
        s.contains("\"pc\" -- \"server\" [style=dashed, label=\"l2tp l2tp (ipsec, raw)\"]"),
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
fn graph_shows_external_devices_and_the_host_interfaces_that_reach_them() {
    let file = topo("nvr500-real.toml");
    let dot = tunbench(&["graph", file.to_str().unwrap()]);
    assert!(dot.status.success(), "{}", text(&dot));
    let s = String::from_utf8_lossy(&dot.stdout);
    assert!(
        s.contains("\"nvr500\" [shape=hexagon, label=\"nvr500\\n(external)\"]"),
        "{s}"
    );
    assert!(s.contains("label=\"mtu 1500, host enp1s0 (moved)\""), "{s}");
    let m = tunbench(&["graph", file.to_str().unwrap(), "--format", "mermaid"]);
    let s = String::from_utf8_lossy(&m.stdout);
    assert!(s.contains("nvr500{{\"nvr500<br/>external\"}}"), "{s}");
    assert!(
        s.contains("(mtu 1500, host enp2s0 (moved))\"| nvr500"),
        "{s}"
    );
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
        text(&o).contains("a chain has 2 to 5000 nodes"),
        "{}",
        text(&o)
    );
    // Latency switches: on and off at once, rates and durations out of range,
    // each refused before any lab is looked for.
    for (args, says) in [
        (
            vec![
                "measure",
                "x",
                "--from",
                "a",
                "--to",
                "b",
                "--latency",
                "--no-latency",
            ],
            "'--latency' cannot be used with '--no-latency'",
        ),
        (
            vec!["run", "x.toml", "--latency-rate", "0"],
            "'0' probes per second; use 1 to 1000",
        ),
        (
            vec!["latency", "x", "--from", "a", "--to", "b", "--rate", "5000"],
            "'5000' probes per second; use 1 to 1000",
        ),
        (
            vec![
                "latency",
                "x",
                "--from",
                "a",
                "--to",
                "b",
                "--duration",
                "0.1",
            ],
            "--duration 0.1: use 0.5 to 3600 seconds",
        ),
        (
            vec![
                "latency", "x", "--from", "a", "--to", "b", "--family", "ipv5",
            ],
            "--family ipv5: use ipv4, ipv6",
        ),
    ] {
        let o = tunbench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
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

/// Saved results of one path, raw, with TCP upload at 900 Mbit/s and the
/// published figure for it.
fn results_with_reference(published: &str) -> String {
    use tunbench::measure::results::*;
    use tunbench::topology::reference::{PublishedFigure, Reference, Tolerance};
    use tunbench::vocab::Cell;
    let cell = Cell::parse_key("ipv4.tcp.sender").unwrap();
    let run = Run {
        bits_per_second: 900e6,
        bytes: 1_125_000_000,
        seconds: 10.0,
        retransmits: Some(0),
        offered_bps: None,
        lost_percent: None,
        jitter_ms: None,
        out_of_order: None,
        sender_limited: false,
        cpu_client: 20.0,
        cpu_server: 30.0,
        intervals_bps: Vec::new(),
        interval_seconds: None,
    };
    let r = Results {
        tool: "tunbench 0.1.0".into(),
        lab: "ref".into(),
        topology: None,
        started: 0,
        seconds: 10.0,
        runs_per_cell: 1,
        duration_per_run: 10.0,
        paths: vec![PathResult {
            path: "raw".into(),
            scenario: None,
            from: "a".into(),
            to: "b".into(),
            ipv4: Some("198.18.0.2".into()),
            ipv6: None,
            cells: vec![CellResult::from_runs(cell, vec![run], None)],
            idle_latency: Vec::new(),
            tunnel: None,
            hosts: Vec::new(),
            idle_latency_seconds: None,
            same_lab_as: None,
        }],
        host: None,
        underlays: Vec::new(),
        phases: Vec::new(),
        reference: Some(Reference {
            source: Some("the NVR500 study".into()),
            tolerance: Tolerance::DEFAULT,
            figures: vec![PublishedFigure {
                path: "raw".into(),
                cell,
                published_bps: published.parse::<f64>().unwrap() * 1e6,
                calibrated: false,
            }],
            marks_calibration: false,
            unpredicted: Vec::new(),
        }),
        notes: vec!["the router is a model".into()],
    };
    serde_json::to_string_pretty(&r).unwrap()
}

#[test]
fn expect_reference_gates_on_the_published_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();

    // 900 against 941: -4 %, within 15 %.
    std::fs::write(path("ok.json"), results_with_reference("941")).unwrap();
    let o = tunbench(&["report", &path("ok.json"), "--expect-reference"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("\nPublished (the NVR500 study) vs measured\n"),
        "{out}"
    );
    assert!(
        out.contains("\nraw   IPv4 TCP Sender        941       900   0.96  ok\n"),
        "{out}"
    );
    assert!(
        out.contains("\n1 of 1 cells within tolerance (TCP +-15 %, UDP +-25 %)\n"),
        "{out}"
    );
    assert!(out.ends_with("\nNote: the router is a model\n"), "{out}");

    // 900 against 1200: -25 %, out.
    std::fs::write(path("out.json"), results_with_reference("1200")).unwrap();
    let o = tunbench(&["report", &path("out.json"), "--expect-reference"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "tunbench: expectation failed: reference raw: ipv4.tcp.sender: measured 900.0 Mbit/s \
             against published 1.200 Gbit/s (ratio 0.750, -25 %, outside +-15 %)"
        ),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("OUT (-25 %)"),
        "{}",
        text(&o)
    );
    // Without the flag the report is the same and the exit code 0.
    let o = tunbench(&["report", &path("out.json")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // Results without published figures: nothing to gate on is bad input.
    let mut plain: serde_json::Value =
        serde_json::from_str(&results_with_reference("941")).unwrap();
    plain.as_object_mut().unwrap().remove("reference");
    std::fs::write(path("plain.json"), plain.to_string()).unwrap();
    let o = tunbench(&["report", &path("plain.json"), "--expect-reference"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--expect-reference: no published figures to check against"),
        "{}",
        text(&o)
    );
}

/// Saved results whose reference marks the cell calibrated: every format of
/// `report` says so, and `--expect-reference` names the basis of a failure.
#[test]
fn report_marks_a_calibrated_cell_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let mut r: serde_json::Value = serde_json::from_str(&results_with_reference("1200")).unwrap();
    r["reference"]["marks_calibration"] = true.into();
    r["reference"]["figures"][0]["calibrated"] = true.into();
    std::fs::write(path("cal.json"), r.to_string()).unwrap();
    let report = |format: &str| {
        let o = tunbench(&["report", &path("cal.json"), "--format", format]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = report("text");
    assert!(
        out.contains(
            "\nraw   IPv4 TCP Sender       1200       900   0.75  OUT (-25 %)  calibrated\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("\n0 of 1 calibrated cells reproduced within tolerance; no predicted cells; tolerance TCP +-15 %, UDP +-25 %\n"),
        "{out}"
    );
    assert!(report("md").contains("| OUT (-25 %) | calibrated |"));
    assert!(report("html").contains("<td>calibrated</td>"));
    let csv = report("csv");
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .ends_with(",1200000000,0.7500,false,calibrated,,"),
        "{csv}"
    );
    assert!(report("json").contains("\"calibrated\": true"));
    let o = tunbench(&["report", &path("cal.json"), "--expect-reference"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "tunbench: expectation failed: reference raw (calibrated): ipv4.tcp.sender: measured 900.0 Mbit/s"
        ),
        "{}",
        text(&o)
    );
}

/// `report --format html`: one page with the views, their charts and the
/// topology's graph, read from the file the results name; where that file is
/// gone the page says so.
#[test]
fn report_writes_an_html_page_with_the_topologys_graph() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let mut r: serde_json::Value = serde_json::from_str(&results_with_reference("941")).unwrap();
    let topology = concat!(env!("CARGO_MANIFEST_DIR"), "/topologies/nvr500-home.toml");
    r["topology"] = topology.into();
    std::fs::write(path("r.json"), r.to_string()).unwrap();
    let o = tunbench(&[
        "report",
        &path("r.json"),
        "--format",
        "html",
        "-o",
        &path("r.html"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let html = std::fs::read_to_string(path("r.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("<h2>Published (the NVR500 study) vs measured</h2>"),
        "{html}"
    );
    assert!(html.contains("<svg xmlns="), "{html}");
    assert!(
        html.contains("<pre class=\"graph\">graph &quot;home&quot; {"),
        "{html}"
    );
    assert!(html.contains("&quot;nvr500&quot;"), "{html}");
    // Drawn too: a box per node of the file.
    assert!(
        html.contains(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"topology\""
        ),
        "{html}"
    );
    for node in ["pc", "nvr500", "sw", "server", "aftr", "inet"] {
        assert!(
            html.contains(&format!("font-weight=\"bold\">{node}</text>")),
            "{node}: {html}"
        );
    }
    assert!(html.contains("<li>the router is a model</li>"), "{html}");

    r["topology"] = path("gone.toml").into();
    std::fs::write(path("gone.json"), r.to_string()).unwrap();
    let o = tunbench(&["report", &path("gone.json"), "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let html = String::from_utf8_lossy(&o.stdout);
    assert!(
        html.contains(&format!(
            "The topology's graph is not in this page: topology file {} could not be read",
            path("gone.toml")
        )),
        "{html}"
    );
}

#[test]
fn run_with_expect_reference_and_no_reference_stops_before_building() {
    // No [[measure]] either: were the flag not checked first, `run` would stop
    // there, still before building anything.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("noref.toml");
    std::fs::write(
        &f,
        "name = \"noref\"\n[nodes.a]\nkind = \"host\"\n[nodes.b]\nkind = \"host\"\n",
    )
    .unwrap();
    let o = tunbench(&["run", f.to_str().unwrap(), "--expect-reference"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no published figures to check against; add a [reference] section"),
        "{}",
        text(&o)
    );
    assert!(namespaces("noref-").is_empty());
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

/// Issue 16: a chain of 100 is longer than the hop limit Linux starts IPv6
/// packets with (64); the generator gives every interface 255 (through
/// conf.default, which interfaces copy when they are made), so h0 and h99
/// reach each other in both families and `check` (all pairs at this size)
/// passes. The other modes say which they used.
#[test]
fn hundred_node_chain_checks_end_to_end_in_both_families() {
    let lab = lab_name("c100");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("chain.toml");
    let g = tunbench(&[
        "gen",
        "chain",
        "--nodes",
        "100",
        "--name",
        &lab,
        "-o",
        f.to_str().unwrap(),
    ]);
    assert!(g.status.success(), "{}", text(&g));
    let _g = LabGuard(lab.clone());
    let u = tunbench(&["up", f.to_str().unwrap()]);
    assert!(u.status.success(), "{}", text(&u));
    for node in ["h0", "r50", "h99"] {
        let ns = format!("{lab}-{node}");
        let o = std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "sysctl", "-n"])
            .arg(if node == "h0" {
                "net.ipv6.conf.right.hop_limit"
            } else {
                "net.ipv6.conf.left.hop_limit"
            })
            .output()
            .unwrap();
        assert_eq!(text(&o).trim(), "255", "{node}");
    }
    let j = tunbench(&["check", &lab, "--json"]);
    assert_eq!(j.status.code(), Some(0), "{}", text(&j));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["mode"], "all");
    let probes = v["probes"].as_array().unwrap();
    for (from, addr) in [
        ("h0", "2001:2:0:62::2"),
        ("h99", "2001:2::1"),
        ("h0", "198.18.98.2"),
        ("h99", "198.18.0.1"),
    ] {
        let p = probes
            .iter()
            .find(|p| p["from"] == from && p["addr"] == addr)
            .unwrap_or_else(|| panic!("no probe {from} -> {addr}"));
        assert_eq!(p["replied"], true, "{from} -> {addr}");
        assert!(p["unreachable_because"].is_null(), "{from} -> {addr}");
    }
    let t = tunbench(&["check", &lab]);
    assert!(
        text(&t).contains("mode: all pairs") && text(&t).contains("0 did not"),
        "{}",
        text(&t)
    );
    let s = tunbench(&["check", &lab, "--mode", "segments"]);
    assert_eq!(s.status.code(), Some(0), "{}", text(&s));
    assert!(
        text(&s).contains("396 of 396 addresses answered") && text(&s).contains("mode: segments"),
        "{}",
        text(&s)
    );
    let s = tunbench(&["check", &lab, "--sample", "20", "--seed", "3"]);
    assert_eq!(s.status.code(), Some(0), "{}", text(&s));
    assert!(
        text(&s).contains("mode: sample") && text(&s).contains("20 random pairs"),
        "{}",
        text(&s)
    );
    assert!(tunbench(&["down", &lab]).status.success());
    assert_gone(&lab);
}
