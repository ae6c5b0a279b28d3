//! The NVR500 study's method end to end in a lab: the matrix, the UDP search, expectations,
//! `run` from a topology file, and the measurement as a library call. Where a
//! test judges figures or a UDP search's outcome, its link is shaped
//! (tests/fixtures/measure/shaped-pair.toml, or a router model's ceiling) and
//! the figures are held to that.

use crate::common::shaped;
use crate::common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use tunbench::vocab::Family;

/// The rate of tests/fixtures/measure/shaped-pair.toml's link, each way.
const SHAPED_RATE: f64 = 20e6;

/// Two hosts, h1 and h2, on a link shaped to `SHAPED_RATE`: what a cell
/// carries, and what a UDP search loses above it, is the shaper's.
fn shaped_pair() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/measure/shaped-pair.toml")
}

/// The most an IPv4 cell of `protocol` ("tcp", "udp": 1448-byte datagrams)
/// carries over the shaped pair's link in a 1-s run, and its goodput there.
fn shaped_ipv4(protocol: &str) -> (f64, f64) {
    let goodput = match protocol {
        "tcp" => shaped::tcp_goodput(SHAPED_RATE, Family::Ipv4),
        _ => shaped::udp_goodput(SHAPED_RATE, 1448.0, Family::Ipv4),
    };
    (shaped::most(goodput, SHAPED_RATE, 1.0), goodput)
}

/// `tunbench measure` h1 -> h2 with short runs and no latency probes (the
/// latency tests hold those), `runs` per cell, after `extra`.
fn quick(lab: &str, runs: u32, extra: &[&str]) -> std::process::Output {
    let runs = runs.to_string();
    let mut a = vec![
        "measure",
        lab,
        "--from",
        "h1",
        "--to",
        "h2",
        "--runs",
        &runs,
        "--duration",
        "1",
        "--trial-duration",
        "1",
        "--udp-trials",
        "3",
        "--no-latency",
    ];
    a.extend_from_slice(extra);
    tunbench(&a)
}

#[test]
fn matrix_with_udp_search_and_json_results() {
    let lab = lab_name("ms");
    let (_g, o) = up(&shaped_pair(), &lab);
    assert!(o.status.success(), "{}", text(&o));
    // One family: IPv6 cells are measure_external's.
    let o = quick(
        &lab,
        2,
        &[
            "--families",
            "ipv4",
            "--protocols",
            "tcp,udp",
            "--directions",
            "sender,receiver",
            "--format",
            "json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let cells = j["paths"][0]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "2 protocols x 2 directions");
    for c in cells {
        let key = format!(
            "{}.{}.{}",
            c["cell"]["family"].as_str().unwrap(),
            c["cell"]["protocol"].as_str().unwrap(),
            c["cell"]["direction"].as_str().unwrap()
        );
        assert!(c["error"].is_null(), "{key}: {}", c["error"]);
        assert_eq!(c["runs"].as_array().unwrap().len(), 2, "{key}");
        assert!(
            c["best_bps"].as_f64().unwrap() >= c["median_bps"].as_f64().unwrap(),
            "{key}"
        );
        // No more than the shaper lets through, and more than a tenth of it
        // (the cell carried traffic, however loaded the machine).
        let (most, goodput) = shaped_ipv4(c["cell"]["protocol"].as_str().unwrap());
        let (min, best) = (
            c["min_bps"].as_f64().unwrap(),
            c["best_bps"].as_f64().unwrap(),
        );
        assert!(
            min > goodput / 10.0 && best <= most,
            "{key}: {min}..{best} bit/s through a shaper of {goodput} (at most {most})"
        );
        // The receiving end's rate per second, for charts over time: every run
        // but a UDP upload's, whose client sees only what it offered.
        let udp_upload = c["cell"]["protocol"] == "udp" && c["cell"]["direction"] == "sender";
        for r in c["runs"].as_array().unwrap() {
            let iv = r["intervals_bps"].as_array();
            if udp_upload {
                assert!(iv.is_none(), "{key}: {r}");
            } else {
                let iv = iv.unwrap_or_else(|| panic!("{key}: no intervals in {r}"));
                assert!(
                    !iv.is_empty() && iv.iter().all(|b| b.as_f64().unwrap() > 0.0),
                    "{key}: {r}"
                );
                assert_eq!(r["interval_seconds"], 1.0, "{key}");
            }
        }
        if c["cell"]["protocol"] == "udp" {
            let s = &c["search"];
            let trials = s["trials"].as_array().unwrap();
            assert!(
                !trials.is_empty() && trials.len() <= 3 + 3,
                "{key}: {} trials",
                trials.len()
            );
            // More than 10 % lost above what the shaper lets through.
            let searched = s["rate_bps"].as_f64().unwrap();
            assert!(
                searched > 0.0 && searched * 0.9 <= most,
                "{key}: searched {searched} bit/s, the shaper lets {most} through"
            );
            // The cell's rate is the highest offered rate of a run it keeps,
            // and every run it keeps held the loss rule: at that rate, at one
            // a failed run stepped down to, or at what its sender could send.
            let rate = s["rate_bps"].as_f64().unwrap();
            let runs = c["runs"].as_array().unwrap();
            let offered: Vec<f64> = runs
                .iter()
                .map(|r| r["offered_bps"].as_f64().unwrap())
                .collect();
            assert!(offered.iter().all(|o| *o <= rate), "{key}: {c}");
            assert!(offered.contains(&rate), "{key}: {c}");
            for r in runs {
                let lost = r["lost_percent"].as_f64().unwrap();
                assert!(lost <= 10.0, "{key}: a run kept with {lost} % lost: {r}");
            }
        } else {
            assert!(c["search"].is_null());
        }
    }
    // The measurement server is gone and no longer in the lab's record.
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir(&lab).join("state.json")).unwrap())
            .unwrap();
    assert_eq!(state["processes"].as_array().unwrap().len(), 0, "{state}");
    assert!(state_dir(&lab).join("logs/server-h2.log").exists());
}

#[test]
fn expectations_pass_and_fail_with_exit_codes() {
    let lab = lab_name("mx");
    let (_g, o) = up(&shaped_pair(), &lab);
    assert!(o.status.success(), "{}", text(&o));
    // A malformed expectation is refused before anything is measured: no
    // server was started, so it left no log, and no cell was reported.
    let malformed = quick(&lab, 1, &["--expect", "ipv4.tcp.sideways >= 1"]);
    let t = text(&malformed);
    assert_eq!(malformed.status.code(), Some(2), "{t}");
    assert!(t.contains("--expect 'ipv4.tcp.sideways >= 1'"), "{t}");
    assert!(!t.contains("[raw] "), "measured before refusing: {t}");
    assert!(
        !state_dir(&lab).join("logs/server-h2.log").exists(),
        "a server started before the refusal: {t}"
    );
    // One TCP sender cell, checked against an expectation.
    let tcp_sender = |expect: &str| {
        quick(
            &lab,
            1,
            &[
                "--families",
                "ipv4",
                "--protocols",
                "tcp",
                "--directions",
                "sender",
                "--expect",
                expect,
            ],
        )
    };
    // A tenth of the shaped link's goodput, which any machine carries; and
    // twice its line rate, which no wire of that rate can.
    let (_, goodput) = shaped_ipv4("tcp");
    let (least, beyond) = (
        format!("ipv4.tcp.sender >= {:.0}", goodput / 10.0),
        format!("ipv4.tcp.sender >= {:.0}", 2.0 * SHAPED_RATE),
    );
    let ok = tcp_sender(&least);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    assert!(
        text(&ok).contains("\nAll paths\n=========\nWhat did path raw carry?\n"),
        "one path's view: {}",
        text(&ok)
    );
    assert!(
        text(&ok).contains("\nIPv4 TCP Sender  raw "),
        "its row: {}",
        text(&ok)
    );
    let bad = tcp_sender(&beyond);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        text(&bad).contains(&format!("expectation failed: {beyond}")),
        "{}",
        text(&bad)
    );
}

#[test]
fn run_brings_up_measures_reports_and_takes_down() {
    let lab = lab_name("rn");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.toml");
    let t = std::fs::read_to_string(topo("router.toml"))
        .unwrap()
        .replace("name = \"rim\"", &format!("name = \"{lab}\""))
        + "\n[[measure]]\nfrom = \"left\"\nto = \"right\"\nprotocols = [\"tcp\"]\nruns = 1\nduration = 1\nlatency = false\n";
    std::fs::write(&f, t).unwrap();
    let _g = LabGuard(lab.clone());
    let saved = dir.path().join("results.json");
    let o = tunbench(&[
        "run",
        f.to_str().unwrap(),
        "--save",
        saved.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).lines().count() == 5,
        "a header and 4 TCP cells: {}",
        text(&o)
    );
    assert_gone(&lab);
    // The saved results render again.
    let r = tunbench(&["report", saved.to_str().unwrap(), "--format", "md"]);
    assert!(r.status.success(), "{}", text(&r));
    assert!(text(&r).contains('|'), "{}", text(&r));
}

#[test]
fn ctrl_c_during_run_takes_the_lab_down() {
    let lab = lab_name("ri");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("m.toml");
    let t = std::fs::read_to_string(topo("two-hosts.toml"))
        .unwrap()
        .replace("name = \"pair\"", &format!("name = \"{lab}\""))
        + "\n[[measure]]\nfrom = \"h1\"\nto = \"h2\"\nruns = 5\nduration = 5\n";
    std::fs::write(&f, t).unwrap();
    let _g = LabGuard(lab.clone());
    let mut child = Command::new(bin())
        .args(["run", f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once the measurement server runs: its log exists.
    wait_for_file(
        &state_dir(&lab).join("logs/server-h2.log"),
        "the measurement server of run started",
        |_| true,
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    // Its 40 runs of 5 s would take minutes: ending within the bound is the
    // interruption.
    let status = wait_exit(&mut child, "run ended after Ctrl-C", BOUND);
    let o = std::process::Output {
        status,
        stdout: read_all(child.stdout.take()),
        stderr: read_all(child.stderr.take()),
    };
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    assert_gone(&lab);
}

/// What is left to read of a child's pipe.
fn read_all(pipe: Option<impl std::io::Read>) -> Vec<u8> {
    let mut v = Vec::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_end(&mut v);
    }
    v
}

/// `spec` measured in the running lab `lab` as a library call, with this
/// build's tunbench as the server.
fn measure_in(
    lab: &str,
    spec: tunbench::measure::spec::MeasureSpec,
) -> tunbench::measure::results::PathResult {
    let running = tunbench::lab::find(lab).unwrap();
    let spec = tunbench::measure::spec::MeasureSpec {
        server_exe: Some(bin().into()),
        ..spec
    };
    tunbench::measure::runner::measure(
        &running,
        &spec,
        &mut Default::default(),
        &std::sync::atomic::AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn one_cell_as_a_library_call() {
    use tunbench::measure::spec::MeasureSpec;
    use tunbench::vocab::{Direction, Family, Proto};
    let lab = lab_name("lib");
    let (_g, o) = up(&topo("router.toml"), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let r = measure_in(
        &lab,
        MeasureSpec {
            families: vec![Family::Ipv6],
            protocols: vec![Proto::Tcp],
            directions: vec![Direction::Receiver],
            runs: 1,
            duration: 1.0,
            latency: None,
            ..MeasureSpec::seed("left", "right")
        },
    );
    assert_eq!(r.cells.len(), 1);
    assert_eq!(r.ipv6.as_deref(), Some("2001:2:0:2::2"));
    // A figure measured (this path is unshaped: how much is the machine's).
    let c = &r.cells[0];
    assert!(c.error.is_none() && c.best_bps > 0.0, "{c:?}");
}

/// A path whose queue swallows a short trial's excess: a router model that lets
/// each UDP flow through at 10 Mbit/s with a queue of 400 datagrams (about
/// 0.46 s). The search's one-second trial at 13 Mbit/s leaves about 260 in the
/// queue and drops none; those still queued when the trial ends are not loss
/// (a receiver counts the gaps before the last datagram it saw), so the trial
/// passes however late the queue drains. A six-second run at that rate
/// overflows it by about 1,150 datagrams (17 % of what it sends), so the
/// confirmation must step the rate down until a full-length run keeps its
/// loss within the threshold, and the report must say so. Rates this low
/// leave the sender and the slow path (its TUN queue holds 0.45 s of them)
/// far from the CPU's limit.
#[test]
fn a_confirmation_steps_down_where_the_search_overshoots() {
    const OFFERED: f64 = 13e6;
    use tunbench::measure::spec::MeasureSpec;
    use tunbench::vocab::{Direction, Family, Proto};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("overshoot.toml"),
        r#"
kind = "router"
name = "overshoot"
# About 0.46 s of 1448-byte datagrams at 10 Mbit/s.
queue_packets = 400
[modes.deep]
ceilings = [{ protocol = "udp", flow = "10M" }]
"#,
    )
    .unwrap();
    let router = std::fs::read_to_string(topo("router.toml"))
        .unwrap()
        .replace(
            "[nodes.r1]\nkind = \"router\"\n",
            "[nodes.r1]\nkind = \"router\"\nprofile = \"./overshoot.toml\"\nmode = \"deep\"\nlan = \"eth0\"\n",
        );
    assert!(router.contains("overshoot"), "router.toml changed shape");
    let file = dir.path().join("overshoot-lab.toml");
    std::fs::write(&file, router).unwrap();
    let lab = lab_name("ovs");
    let (_g, o) = up(&file, &lab);
    assert!(o.status.success(), "{}", text(&o));
    let r = measure_in(
        &lab,
        MeasureSpec {
            families: vec![Family::Ipv4],
            protocols: vec![Proto::Udp],
            directions: vec![Direction::Sender],
            runs: 1,
            duration: 6.0,
            trial_duration: 1.0,
            udp_max_trials: 1,
            udp_start_bps: Some(OFFERED),
            udp_ceiling_bps: OFFERED,
            latency: None,
            ..MeasureSpec::seed("left", "right")
        },
    );
    let c = &r.cells[0];
    assert!(c.error.is_none(), "{c:?}");
    let s = c.search.as_ref().unwrap();
    eprintln!("search and confirmations: {s:?}");
    // The search's short trial passed at the offered rate ...
    assert_eq!(s.trials.len(), 1, "{s:?}");
    assert!(s.trials[0].lost_percent <= 10.0, "{s:?}");
    // ... a full-length run there did not, and the rate stepped down.
    let first = &s.confirmations[0];
    assert_eq!(first.offered_bps, OFFERED, "{s:?}");
    assert!(first.lost_percent > 10.0, "{s:?}");
    assert!(s.rate_bps < OFFERED * 0.91, "{s:?}");
    // The figure is a rate at which a full-length run kept the rule, and every
    // run the cell keeps did.
    let kept = s.confirmations.last().unwrap();
    assert_eq!(kept.offered_bps, s.rate_bps);
    assert!(kept.lost_percent <= 10.0, "{s:?}");
    assert!(!c.runs.is_empty());
    assert!(
        c.runs.iter().all(|r| r.lost_percent.unwrap() <= 10.0),
        "{c:?}"
    );
    // The report says what happened.
    let results = tunbench::measure::results::Results {
        tool: "t".into(),
        lab: lab.clone(),
        topology: None,
        started: 0,
        seconds: 0.0,
        runs_per_cell: 1,
        duration_per_run: 6.0,
        paths: vec![r.clone()],
        reference: None,
        notes: Vec::new(),
        host: None,
        underlays: Vec::new(),
        phases: Vec::new(),
    };
    let report = tunbench::report::render(&results, tunbench::report::Format::Text, None);
    assert!(
        report.contains(&format!(
            "a full-length run at {:.1} Mbit/s received",
            OFFERED / 1e6
        )),
        "{report}"
    );
    assert!(report.contains("stepped down to"), "{report}");
}

/// Without a terminal (CI, a pipe) a measurement says each cell as it
/// finishes, one line on standard error: the path, the cell, its figure and
/// the time since the start.
#[test]
fn through_a_pipe_one_progress_line_per_finished_cell() {
    let lab = format!("vw{}", lab_name("p"));
    let (_g, o) = up(&shaped_pair(), &lab);
    assert!(o.status.success(), "{}", text(&o));
    let o = tunbench(&[
        "measure",
        &lab,
        "--from",
        "h1",
        "--to",
        "h2",
        "--families",
        "ipv4",
        "--protocols",
        "tcp,udp",
        "--directions",
        "sender",
        "--runs",
        "1",
        "--duration",
        "1",
        "--trial-duration",
        "1",
        "--udp-trials",
        "2",
        "--no-latency",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("[raw] ")).collect();
    assert_eq!(lines.len(), 2, "one line per cell: {stderr}");
    assert!(
        lines[0].starts_with("[raw] IPv4 TCP Sender (1/2): ")
            && lines[0].contains(" Mbit/s median (best ")
            && lines[0].ends_with(" elapsed"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("[raw] IPv4 UDP Sender (2/2): ")
            && lines[1].contains(" Mbit/s median at -b ")
            && lines[1].contains(" % lost)"),
        "{}",
        lines[1]
    );
    // No terminal, so none of the terminal's redraws.
    assert!(!stderr.contains('\r'), "{stderr:?}");
    assert!(!stderr.contains("\x1b["), "{stderr:?}");
}

#[test]
fn goodput_is_the_payloads_share_of_the_wire() {
    // 1448 of 1538 bytes, and 1448 of 1514.
    assert_eq!(shaped::tcp_goodput(1538e6, Family::Ipv4), 1448e6);
    assert_eq!(shaped::udp_goodput(1514e6, 1448.0, Family::Ipv4), 1448e6);
    assert_eq!(shaped::tcp_goodput(1538e6, Family::Ipv6), 1428e6);
}
