//! What several tests of this area share: one engine test's JSON, a rate
//! measured until it lies within the bounds its limit sets, and stats files waited for.

pub use crate::common::shaped::{START_LAG, shaped_most, tbf_bucket};
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The least share of its limit a figure must reach to show the limit was
/// reached. A sender or datapath starved of CPU past a queue's length loses
/// line time (TCP through a tail-drop queue some more, to retransmission
/// timeouts), as a loaded machine makes likely; half the limit still gets
/// through with the path starved for much of the test, while a limit applied
/// to the wrong class, direction or unit misses the bounds by far more.
pub const REACHED: f64 = 0.5;

/// `tunbench server -1 -p PORT` in namespace `LAB-NODE`, once it listens;
/// killed on drop, also when the test fails.
pub struct EngineServer(pub KillOnDrop);

impl EngineServer {
    pub fn start(lab: &str, node: &str, port: u16) -> EngineServer {
        let ns = format!("{lab}-{node}");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, bin()])
            .args(["server", "-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the server");
        let mut srv = EngineServer(KillOnDrop(child));
        wait_listening(&mut srv.0.0, port, &format!("tunbench server in {ns}"));
        srv
    }
}

/// One test of tunbench's engine inside a lab: the server in `LAB-SERVER`,
/// the client in `LAB-CLIENT` to `to` with `args` and -J: the client's JSON.
pub fn engine_json(
    lab: &str,
    client: &str,
    server: &str,
    to: &str,
    port: u16,
    args: &[&str],
) -> Value {
    let srv = EngineServer::start(lab, server, port);
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-{client}"), bin()])
        .args(["client", to, "-p", &port.to_string(), "-J"])
        .args(args)
        .output()
        .expect("running the client");
    drop(srv);
    assert!(o.status.success(), "client {args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).expect("the client's JSON")
}

/// One measured rate: bit/s, and the seconds its bytes were counted over.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    pub bps: f64,
    pub secs: f64,
}

/// The receiver's own rate in an engine test's JSON: the payload its streams
/// received over the longest time one of them ran (from the receiver's start
/// of the test to its end, the tail after the test's time included). What a
/// queue still held at the end counts, and so does the time it took to
/// arrive: a limit that lets `r` through from the first packet on lets no
/// more than `r` through over this time, give or take `START_LAG`.
pub fn receiver_rate(j: &Value) -> Figure {
    let streams = j["end"]["streams"]
        .as_array()
        .unwrap_or_else(|| panic!("no streams in {j}"));
    let (mut bytes, mut secs) = (0.0, 0.0_f64);
    for s in streams {
        let r = if s["udp"].is_object() {
            &s["udp"]
        } else {
            &s["receiver"]
        };
        bytes += r["bytes"].as_f64().unwrap_or(0.0);
        secs = secs.max(r["seconds"].as_f64().unwrap_or(0.0));
    }
    assert!(secs > 0.0, "no receiving stream ran: {j}");
    Figure {
        bps: bytes * 8.0 / secs,
        secs,
    }
}

/// The receiver's bit/s of the test's time (what iperf3 reports) in an engine
/// test's JSON.
pub fn received_bps(j: &Value) -> f64 {
    j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no sum_received in {j}"))
}

/// Attempts a rate gets to reach its floor, and the time after which no new
/// attempt starts: an idle machine passes on the first, and one that starves
/// the path for half a minute says no more than one that starves it for a
/// second, and a test with several figures stays within its time limit.
const ATTEMPTS: usize = 4;
const ATTEMPTS_WITHIN: Duration = Duration::from_secs(30);

/// Measures a rate until one attempt lies within `least..=most(secs)` bit/s
/// (`secs`: what that attempt counted over), and returns its bit/s. The
/// ceiling is physics, which no load can beat: the first attempt over it is
/// the verdict. The floor shows the limit was reached, which a path starved
/// of CPU cannot show: an attempt under it is made again, `ATTEMPTS` times at
/// most, none begun after `ATTEMPTS_WITHIN`. Err names every attempt's figure.
pub fn rate_reached(
    what: &str,
    least: f64,
    most: impl Fn(f64) -> f64,
    mut measure: impl FnMut() -> Figure,
) -> Result<f64, String> {
    let m = |x: f64| x / 1e6;
    let began = Instant::now();
    let mut seen = Vec::new();
    loop {
        let f = measure();
        let ceiling = most(f.secs);
        seen.push(format!("{:.2}", m(f.bps)));
        eprintln!(
            "{what}: {:.2} Mbit/s over {:.2} s, held to {:.2}..{:.2}",
            m(f.bps),
            f.secs,
            m(least),
            m(ceiling)
        );
        if f.bps > ceiling {
            return Err(format!(
                "{what}: {:.2} Mbit/s, more than the limit lets through ({:.2}); \
                 attempts: {} Mbit/s",
                m(f.bps),
                m(ceiling),
                seen.join(", ")
            ));
        }
        if f.bps >= least {
            return Ok(f.bps);
        }
        let spent = began.elapsed().as_secs_f64();
        if seen.len() >= ATTEMPTS || spent >= ATTEMPTS_WITHIN.as_secs_f64() {
            return Err(format!(
                "{what}: the path never carried {:.2} Mbit/s, `REACHED` of its limit, in {} \
                 attempts over {spent:.0} s: starved of CPU or limited wrongly; attempts: {} Mbit/s",
                m(least),
                seen.len(),
                seen.join(", ")
            ));
        }
    }
}

/// [`rate_reached`], failing the test when it fails.
pub fn assert_rate(
    what: &str,
    least: f64,
    most: impl Fn(f64) -> f64,
    measure: impl FnMut() -> Figure,
) -> f64 {
    rate_reached(what, least, most, measure).unwrap_or_else(|e| panic!("{e}"))
}

/// The most a userspace ceiling of `limit` bit/s (a device model's, a host's
/// or a termination's) lets through, as [`receiver_rate`] measures it over
/// `secs` with `streams` streams: its rate, since a packet's turn follows the
/// one before it (no burst), over the test and `START_LAG`, and the first
/// packet of each stream, which passes at once.
pub fn ceiling_most(limit: f64, secs: f64, streams: u32) -> f64 {
    limit * (1.0 + START_LAG / secs) + f64::from(streams) * 1500.0 * 8.0 / secs
}

/// A datapath's stats file (rewritten every second) as written after this
/// call: what it counts then includes everything that happened before it.
pub fn stats_after_now(path: &Path) -> Value {
    let uptime = |t: &str| {
        serde_json::from_str::<Value>(t)
            .ok()
            .and_then(|v| v["uptime_seconds"].as_f64())
    };
    let seen = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| uptime(&t))
        .unwrap_or(-1.0);
    let t = wait_for_file(path, "the stats file written again", |t| {
        uptime(t).is_some_and(|u| u > seen)
    });
    serde_json::from_str(&t).expect("stats JSON")
}

/// The drops for a full queue a datapath's stats file counts, as written
/// after this call: every drop before it counted.
pub fn queue_full_drops(path: &Path) -> u64 {
    stats_after_now(path)["drops"]["queue_full"]
        .as_u64()
        .unwrap_or_else(|| panic!("{path:?}: no drops.queue_full"))
}

/// TCP from `client` to `server` at `to` passes by every ceiling of the
/// datapath whose stats file is `stats`: all its 8 MiB arrive and none of its
/// packets is dropped for a full queue. A ceiling that held it would: TCP
/// grows its window past any queue that holds it back.
pub fn tcp_passes_by_every_ceiling(lab: &str, client: &str, server: &str, to: &str, stats: &Path) {
    let before = queue_full_drops(stats);
    tcp_moves(lab, client, server, to, false);
    let after = queue_full_drops(stats);
    assert_eq!(
        after - before,
        0,
        "{lab}: TCP {client} -> {to}: {} packets dropped for a full queue",
        after - before
    );
}

/// Waits until a datapath's stats file counts drops for a full queue, as a
/// ceiling's queue makes them: the count.
pub fn wait_queue_full_drops(path: &Path) -> u64 {
    let full = |t: &str| {
        serde_json::from_str::<Value>(t)
            .ok()
            .and_then(|v| v["drops"]["queue_full"].as_u64())
            .unwrap_or(0)
    };
    let t = wait_for_file(path, "queue_full drops counted", |t| full(t) > 0);
    full(&t)
}

/// TCP from `client` to `server` at `to` (`reverse`: back, -R): 8 MiB, every
/// byte of which arrives. Traffic passes, whatever this machine's speed.
pub fn tcp_moves(lab: &str, client: &str, server: &str, to: &str, reverse: bool) {
    let mut args = vec!["-n", "8M"];
    if reverse {
        args.push("-R");
    }
    let j = engine_json(lab, client, server, to, 5201, &args);
    let got = j["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(
        got >= 8 << 20,
        "{lab}: TCP {client} -> {to} (reverse {reverse}): {got} bytes of 8 MiB arrived"
    );
}
