//! `tunbench report A.json B.json`: the parts a placed lab's hosts measured
//! merge into one report, in every format; parts that cannot be merged are
//! bad input naming the files.

use crate::common::*;
use tunbench::measure::results::*;
use tunbench::vocab::Cell;

/// One TCP cell of one run at `mbit`.
fn cell(key: &str, mbit: f64) -> CellResult {
    let run = Run {
        bits_per_second: mbit * 1e6,
        bytes: (mbit * 1e6 * 10.0 / 8.0) as u64,
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
    CellResult::from_runs(Cell::parse_key(key).unwrap(), vec![run], None)
}

/// Path `name` from pc to server across the three hosts, sending at `mbit`.
fn path(name: &str, address: &str, mbit: f64) -> PathResult {
    PathResult {
        path: name.into(),
        scenario: None,
        from: "pc".into(),
        to: "server".into(),
        ipv4: Some(address.into()),
        ipv6: None,
        cells: vec![cell("ipv4.tcp.sender", mbit)],
        idle_latency: Vec::new(),
        tunnel: None,
        hosts: vec!["pc".into(), "router".into(), "server".into()],
        idle_latency_seconds: None,
        same_lab_as: None,
    }
}

fn underlay(from: &str, to: &str, mbit: f64) -> UnderlayResult {
    UnderlayResult {
        from_host: from.into(),
        to_host: to.into(),
        from_address: format!("198.18.230.{}", if from == "pc" { 1 } else { 2 }),
        to_address: format!("198.18.230.{}", if to == "router" { 2 } else { 3 }),
        upload_bps: Some(mbit * 1e6),
        download_bps: Some(mbit * 1e6),
        seconds: 5.0,
        error: None,
    }
}

/// Host `host`'s part: its paths, and the underlays pc -> router (9400
/// Mbit/s) and router -> server (1000 Mbit/s).
fn part(host: &str, paths: Vec<PathResult>) -> Results {
    Results {
        tool: "tunbench 0.1.0".into(),
        lab: "home-split".into(),
        topology: Some("home-split.toml".into()),
        started: 1_580_560_200,
        seconds: 60.0,
        runs_per_cell: 1,
        duration_per_run: 10.0,
        paths,
        reference: None,
        notes: Vec::new(),
        host: Some(host.into()),
        phases: Vec::new(),
        underlays: vec![
            underlay("pc", "router", 9400.0),
            underlay("router", "server", 1000.0),
        ],
    }
}

#[test]
fn report_merges_the_hosts_parts_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, r: &Results| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_string_pretty(r).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    // raw reaches the 1000 Mbit/s between router and server; wireguard not.
    let pc = file(
        "pc.json",
        &part("pc", vec![path("raw", "198.18.1.10", 941.0)]),
    );
    let router = file(
        "router.json",
        &part("router", vec![path("wireguard", "198.18.96.2", 400.0)]),
    );
    let report = |args: &[&str]| {
        let o = tunbench(&[&["report", &pc, &router], args].concat());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = report(&[]);
    for want in [
        "\nraw: pc -> server (198.18.1.10)\nwireguard: pc -> server (198.18.96.2)\n",
        "\nUnderlay between hosts\n",
        "\nrouter -> server: upload 1000 Mbit/s, download 1000 Mbit/s (198.18.230.2 and 198.18.230.3)\n",
        "\nraw: pc -> router -> server\nwireguard: pc -> router -> server\n",
        " 941^",
        "\nNote: merged from 2 parts: host pc measured raw; host router measured wireguard\n",
        "\nNote: ^ at 90 % or more of the underlay from router to server (1000 Mbit/s)",
    ] {
        assert!(out.contains(want), "{want} not in {out}");
    }
    assert_eq!(out.matches("pc -> router: upload").count(), 1, "{out}");

    let csv = report(&["--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].ends_with(",hosts,underlay_limit_bps,at_underlay_capacity"),
        "{csv}"
    );
    assert!(
        lines[1].starts_with("raw,")
            && lines[1].ends_with(",pc -> router -> server,1000000000,true")
    );
    assert!(lines[2].starts_with("wireguard,") && lines[2].ends_with(",false"));
    let json: Results = serde_json::from_str(&report(&["--format", "json"])).unwrap();
    assert_eq!((json.paths.len(), json.host), (2, None));
    assert!(report(&["--format", "md"]).contains("### Underlay between hosts"));
    assert!(report(&["--format", "html"]).contains("id=\"underlays\""));
    // Expectations check the merge: a path of each part.
    report(&["--expect", "wireguard/raw >= 0.4"]);
    let o = tunbench(&["report", &pc, &router, "--expect", "wireguard/raw >= 0.5"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn parts_that_cannot_be_merged_are_bad_input_naming_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, r: &Results| {
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_string_pretty(r).unwrap()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let pc = file(
        "pc.json",
        &part("pc", vec![path("raw", "198.18.1.10", 941.0)]),
    );
    let again = file(
        "again.json",
        &part("router", vec![path("raw", "198.18.1.10", 900.0)]),
    );
    let mut office = part("router", Vec::new());
    office.lab = "office".into();
    let office = file("office.json", &office);
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"tool\": ").unwrap();
    let broken = broken.to_str().unwrap().to_string();

    let refused = |b: &str, says: &str| {
        let o = tunbench(&["report", &pc, b]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(says), "{says} not in {}", text(&o));
    };
    refused(
        &again,
        &format!("path raw (pc -> server) is in both {pc} and {again}"),
    );
    refused(
        &office,
        &format!("{office} is of lab office, but {pc} is of lab home-split"),
    );
    refused(&broken, "broken.json:1:9: not tunbench results");
}
