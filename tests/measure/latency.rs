//! The latency probes measure the truth, in real namespaces. A loaded machine
//! only ever adds delay, to the probes whose wake-ups it stalls, so each figure
//! is held below by what the path cannot beat, and above only where a stall
//! can hardly reach: the least of hundreds of probes, or a median (half of
//! them would have to stall), and then with a margin of a tenth of the delay:
//! - a link delayed 100 ms each way in the userspace link path: for both
//!   families the least round trip is 200 to 220 ms and the least one-way delay
//!   100 to 110 ms each way, every probe keeps to its schedule and is answered;
//! - irtt on that link at the same time: its least round trip within the same
//!   bounds and within 20 ms of ours;
//! - a 20 Mbit/s link with a 200-frame queue under one TCP upload: the forward
//!   delay reaches what the queue holds at that rate (200 frames of 1538 bytes
//!   on the wire: 123 ms) and its median stays within it, the way back and
//!   the idle lab have none (far less than it), and `--expect` reads it;
//! - `[[assert]]` entries hold latency figures in `tunbench test`.

use crate::common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// delay.toml's delay, each way: long, so that a margin far larger than a
/// loaded machine's stalls is still small against it.
const DELAY_MS: f64 = 100.0;
/// How far above the delay the least one-way delay may be, per delayed hop: a
/// tenth of it, several times what the quickest of hundreds of probes has been
/// seen to take beyond the link with the machine saturated.
const FLOOR_SLACK_MS: f64 = DELAY_MS / 10.0;

fn file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/latency")
        .join(name)
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

/// `tunbench latency` left -> right as JSON, after `args`.
fn idle(lab: &str, args: &[&str]) -> serde_json::Value {
    let o = tunbench(
        &[
            &["latency", lab, "--from", "left", "--to", "right", "--json"],
            args,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", text(&o));
    json(&o)
}

fn ms(v: &serde_json::Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{v} is not a number of ms"))
}

/// Asserts `floor` (ms) is at least `delay` and at most `FLOOR_SLACK_MS` per
/// delayed hop above it.
fn floor_of(what: &str, floor: f64, delay: f64) {
    let hops = (delay / DELAY_MS).round();
    assert!(
        floor >= delay && floor <= delay + hops * FLOOR_SLACK_MS,
        "{what}: least {floor:.3} ms, the link's delay {delay} ms"
    );
}

/// Asserts the probes of one phase (`l`, `seconds` at `rate` per second) kept
/// their schedule: the k-th sent no sooner than k intervals after the first
/// (late ones never catch up in a burst), no more than the schedule holds, and
/// every one answered. The series holds every probe's send time while there
/// are fewer than its 300 points.
fn on_schedule(what: &str, l: &serde_json::Value, seconds: f64, rate: f64) {
    let sent = l["sent"].as_u64().unwrap_or(0);
    let most = (seconds * rate) as u64 + 1;
    assert!(
        (1..=most).contains(&sent) && sent < 300,
        "{what}: {sent} probes sent in {seconds} s at {rate}/s"
    );
    assert_eq!(
        l["received"], l["sent"],
        "{what}: probes lost on a lossless link"
    );
    let mut at: Vec<f64> = l["series"]
        .as_array()
        .expect("a series of (seconds, ms)")
        .iter()
        .map(|p| p[0].as_f64().expect("a send time"))
        .collect();
    at.sort_by(f64::total_cmp);
    assert_eq!(at.len() as u64, sent, "{what}: one point per probe");
    for (k, t) in at.iter().enumerate() {
        assert!(
            *t >= k as f64 / rate - 1e-5,
            "{what}: probe {k} sent {t} s after the first, before its turn"
        );
    }
}

#[test]
fn a_delayed_link_shows_its_delay_each_way_and_twice_round_trip() {
    let lab = lab_name("lyd");
    let (_g, o) = up(&file("delay.toml"), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    let v = idle(&lab, &["--duration", "2"]);
    let families = v.as_array().expect("a list of [family, latency]");
    assert_eq!(families.len(), 2, "{v}");
    for f in families {
        let (family, l) = (f[0].to_string(), &f[1]);
        let (rtt, fwd, rev) = (
            ms(&l["rtt_ms"]["min"]),
            ms(&l["forward_ms"]["min"]),
            ms(&l["reverse_ms"]["min"]),
        );
        eprintln!(
            "{family}: least RTT {rtt:.3} ms, forward {fwd:.3} ms, reverse {rev:.3} ms; medians {:.3}, {:.3}, {:.3} ms",
            ms(&l["rtt_ms"]["median"]),
            ms(&l["forward_ms"]["median"]),
            ms(&l["reverse_ms"]["median"]),
        );
        floor_of(&format!("{family} forward"), fwd, DELAY_MS);
        floor_of(&format!("{family} reverse"), rev, DELAY_MS);
        floor_of(&format!("{family} RTT"), rtt, 2.0 * DELAY_MS);
        // Every round trip is its two ways, so its least is no less than theirs.
        assert!(rtt >= fwd + rev - 1e-6, "{family}: {rtt} < {fwd} + {rev}");
        on_schedule(&family, l, 2.0, 100.0);
    }
}

#[test]
fn a_full_queue_shows_as_delay_under_load_one_way() {
    let lab = lab_name("lyq");
    let (_g, o) = up(&file("queue.toml"), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("queue.json");
    // 200 full frames, each 1514 bytes on the veth and 24 more on the wire.
    let predicted = 200.0 * 1538.0 * 8.0 / 20e6 * 1e3;
    let o = tunbench(&[
        "measure",
        &lab,
        "--from",
        "left",
        "--to",
        "right",
        "--families",
        "ipv4",
        "--protocols",
        "tcp",
        "--directions",
        "sender",
        "--runs",
        "1",
        "--duration",
        "3",
        "--format",
        "json",
        "--save",
        saved.to_str().unwrap(),
        "--expect",
        "raw:ipv4.tcp.sender.latency.forward.p99 >= 50ms",
    ]);
    let v = json(&o);
    let path = &v["paths"][0];
    let idle = ms(&path["idle_latency"][0][1]["rtt_ms"]["min"]);
    let l = &path["cells"][0]["latency"];
    let (p99, median, back) = (
        ms(&l["forward_ms"]["p99"]),
        ms(&l["forward_ms"]["median"]),
        ms(&l["reverse_ms"]["median"]),
    );
    eprintln!(
        "least idle RTT {idle:.3} ms; under load one way out p99 {p99:.1} ms, median {median:.1} ms, back median {back:.2} ms; predicted {predicted:.1} ms"
    );
    // No queue on an idle lab, nor on the way back under load: far less
    // than the forward queue's delay, which a stalled probe or responder
    // (only ever adding delay) cannot blur into it.
    assert!(
        idle < predicted / 10.0,
        "least idle RTT {idle} ms: a queue on an idle lab (the full queue's {predicted:.1} ms)"
    );
    // Stalls only add delay: the queue filled if even the p99 reaches it ...
    assert!(
        p99 >= predicted * 0.8,
        "p99 {p99:.1} ms: the queue of {predicted:.1} ms never filled"
    );
    // ... and it holds no more than it should if half the probes waited less.
    assert!(
        median <= predicted * 1.2,
        "median {median:.1} ms beyond the queue's {predicted:.1} ms"
    );
    assert!(
        back < predicted / 4.0,
        "the way back has no queue: median {back} ms (the full queue's {predicted:.1} ms)"
    );
    assert!(o.status.success(), "the expectation held: {}", text(&o));
    // The saved results, checked again: a latency ceiling the queue breaks
    // fails with the figure, and so does a cell measured without latency.
    let o = tunbench(&[
        "report",
        saved.to_str().unwrap(),
        "--expect",
        "raw:ipv4.tcp.sender.latency.p99 <= 20ms",
        "--expect",
        "raw:ipv4.udp.sender.latency <= 20ms",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("raw:ipv4.tcp.sender.latency.p99 <= 20ms: measured ") && t.contains("% over"),
        "{t}"
    );
    assert!(t.contains("no cell ipv4.udp.sender on raw"), "{t}");
}

/// On the delayed link, irtt and tunbench probe side by side (100 probes/s
/// each for 2 s): both least round trips sit within a tenth of the delay above
/// the link's round trip, and so within as much of each other. On a plain veth
/// they differ by how fast each runtime wakes up (irtt's Go scheduler, our
/// threads), which compares runtimes, not the path; the delay dwarfs that.
#[test]
fn idle_round_trips_agree_with_irtt_on_a_delayed_link() {
    let irtt = program("irtt");
    let lab = lab_name("lyi");
    let (_g, o) = up(&file("delay.toml"), &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    let server = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-right"), irtt])
            .args(["server", "--thread", "-i", "0", "-b", "198.18.81.2:2112"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting irtt server"),
    );
    wait_until("the irtt server bound to UDP port 2112", BOUND, || {
        bound_udp(&server.0, 2112)
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("irtt.json");
    let mut client = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-left"), irtt])
            .args(["client", "--thread", "-i", "10ms", "-d", "2s", "-Q", "-o"])
            .arg(&out)
            .arg("198.18.81.2")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting irtt client"),
    );
    let v = idle(&lab, &["--family", "ipv4", "--duration", "2"]);
    let status = wait_exit(&mut client.0, "the irtt client finished", BOUND);
    assert!(status.success(), "irtt client: {status}");
    let theirs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("irtt's JSON")).unwrap();
    let theirs = ms(&theirs["stats"]["rtt"]["min"]) / 1e6;
    let ours = ms(&v[0][1]["rtt_ms"]["min"]);
    eprintln!("least RTT: tunbench {ours:.3} ms, irtt {theirs:.3} ms");
    floor_of("tunbench's RTT", ours, 2.0 * DELAY_MS);
    floor_of("irtt's RTT", theirs, 2.0 * DELAY_MS);
    assert!(
        (ours - theirs).abs() <= 2.0 * FLOOR_SLACK_MS,
        "least RTT: tunbench {ours:.3} ms, irtt {theirs:.3} ms"
    );
}

/// The figure `tunbench test` printed for assertion `name` with `verdict`
/// (ok or FAIL), in ms.
fn figure(t: &str, verdict: &str, name: &str) -> f64 {
    let head = format!("{verdict} {name}: measured ");
    let at = t
        .find(&head)
        .unwrap_or_else(|| panic!("no '{head}' in: {t}"));
    let rest = &t[at + head.len()..];
    rest.split(" ms")
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no figure after '{head}' in: {t}"))
}

/// `[[assert]]` kind `throughput` reads latency: the idle round trip's floor,
/// a one-way delay under load, and a ceiling the delay breaks (exit 1, with the
/// figure), the two loaded ones from one measurement. The figures are held to
/// what the link's delay forbids: less than its delay one way, twice that
/// round trip.
#[test]
fn assertions_hold_latency_figures() {
    let lab = lab_name("lya");
    let _g = LabGuard(lab.clone());
    let o = tunbench(&["test", file("delay.toml").to_str().unwrap(), "--name", &lab]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(figure(&t, "ok", "idle-round-trip") >= 2.0 * DELAY_MS, "{t}");
    assert!(figure(&t, "ok", "one-way-under-load") >= DELAY_MS, "{t}");
    assert!(
        figure(&t, "FAIL", "a-ceiling-it-breaks") >= 2.0 * DELAY_MS,
        "{t}"
    );
    assert!(t.contains("2 passed, 1 failed"), "{t}");
    assert_gone(&lab);
}
