//! The engine against itself on loopback: pacing (-b), byte-bounded tests (-n),
//! omit (-O) and the per-second intervals, each held to what the senders'
//! own counts and clocks allow, never to how fast this machine moves bytes.

use crate::common::*;
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Instant;

/// A `tunbench server` on loopback, killed on drop, and its port.
struct Server {
    _process: KillOnDrop,
    port: u16,
}

fn server() -> Server {
    let (c, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    });
    Server {
        _process: KillOnDrop(c),
        port,
    }
}

/// The client's -J report of a test with `args`, and the wall time its whole
/// run took: it holds every sender's own time, the server's with -R too.
fn client(s: &Server, args: &[&str]) -> (Value, f64) {
    let port = s.port.to_string();
    let mut a = vec!["client", "127.0.0.1", "-p", &port, "-J"];
    a.extend_from_slice(args);
    let began = Instant::now();
    let o = tunbench(&a);
    let ran = began.elapsed().as_secs_f64();
    assert!(o.status.success(), "{a:?}: {}", text(&o));
    (serde_json::from_slice(&o.stdout).unwrap(), ran)
}

/// What a sender paced to `rate` bit/s in each of `streams` streams may have
/// sent within `secs` of its own time: the rate over that time, and the block
/// a TCP writer has in hand when its turn comes (a UDP sender sends no
/// datagram before its time). Load only makes a paced sender fall behind.
fn paced_most(rate: f64, streams: u32, secs: f64) -> f64 {
    f64::from(streams) * (rate * secs / 8.0 + 128.0 * 1024.0)
}

/// A paced test on loopback: its senders sent something, never more than the
/// rate allows over the time they ran (at most the client's whole run), and
/// the receivers got no more than was sent. How close to the rate a sender
/// keeps, and how it catches up after a stall, is the pacer's own tests'
/// (core/src/engine/stream.rs, on a made-up clock): on an unshaped path the
/// figure is this machine's, a benchmark's (docs/benchmarks/engine-vs-iperf3.md).
#[test]
fn tcp_and_udp_pacing_hold_the_rate() {
    let s = server();
    for (args, streams) in [
        (&["-t", "1", "-b", "80M"][..], 1),
        (&["-t", "1", "-u", "-b", "80M"], 1),
        // -b is per stream, as in iperf3: 2 x 40M.
        (&["-t", "1", "-u", "-b", "40M", "-P", "2", "-R"], 2),
    ] {
        let (j, ran) = client(&s, args);
        let rate = if streams == 2 { 40e6 } else { 80e6 };
        let end = &j["end"];
        let sent = end["sum_sent"]["bytes"].as_f64().unwrap();
        let received = end["sum_received"]["bytes"].as_f64().unwrap();
        let most = paced_most(rate, streams, ran);
        eprintln!(
            "{args:?}: sent {:.2} Mbit, received {:.2} Mbit, in {ran:.2} s",
            sent * 8.0 / 1e6,
            received * 8.0 / 1e6
        );
        assert!(
            sent > 0.0 && sent <= most && received <= sent,
            "{args:?}: sent {sent} bytes in {ran:.2} s (at most {most}), received {received}"
        );
    }
}

#[test]
fn byte_bounded_test_stops_at_the_count() {
    let s = server();
    let (j, _) = client(&s, &["-n", "20M", "-P", "2"]);
    let sent = j["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    let want = 20 * 1024 * 1024;
    // Each stream may finish the block it was writing.
    assert!(
        sent >= want && sent <= want + 2 * 131072 + 2 * 131072,
        "{sent}"
    );
}

/// -O 1: the first second's interval is marked omitted and its bytes are
/// not in the total. The sender's own count after the omitted second is at
/// least what all its intervals hold less the omitted ones (sampled at the
/// tick, a little after the second ended: a little more), and less than all
/// of them: the pacer sends its first blocks at once, in the omitted second,
/// more than the one block a stream may write after the last tick.
#[test]
fn omit_and_intervals() {
    let s = server();
    let (j, ran) = client(&s, &["-t", "1", "-O", "1", "-b", "40M"]);
    let iv = j["intervals"].as_array().unwrap();
    assert!(iv.len() >= 2, "1 s omitted + 1 s counted: {}", iv.len());
    assert_eq!(iv[0]["sum"]["omitted"], true);
    assert_eq!(iv.last().unwrap()["sum"]["omitted"], false);
    let bytes = |i: &Value| i["sum"]["bytes"].as_f64().unwrap();
    let all: f64 = iv.iter().map(bytes).sum();
    let omitted: f64 = iv
        .iter()
        .filter(|i| i["sum"]["omitted"] == true)
        .map(bytes)
        .sum();
    let counted = j["end"]["sum_sent"]["bytes"].as_f64().unwrap();
    assert!(
        counted >= all - omitted && counted < all,
        "counted {counted} bytes; the intervals hold {all}, {omitted} of them omitted"
    );
    let most = paced_most(40e6, 1, ran);
    assert!(
        counted <= most,
        "{counted} bytes in {ran:.2} s: more than {most}"
    );
}
