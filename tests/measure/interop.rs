//! Interop with Debian's iperf3 (3.12): our client against `iperf3 -s`, and
//! `iperf3 -c` against our server, TCP and UDP, IPv4 and IPv6, -R, -P 4, --bidir,
//! -O 1, --udp-counters-64bit. Data passes through the real peer; both sides'
//! byte counts must agree within 2 % and the peer must exit 0. Loopback only.

use crate::common::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server child killed on drop, whatever the test did.
struct Peer(Option<Child>);
impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
impl Peer {
    fn finish(mut self, within: Duration) -> (Option<i32>, String) {
        let mut c = self.0.take().unwrap();
        let t0 = Instant::now();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                let mut out = String::new();
                use std::io::Read;
                if let Some(mut o) = c.stdout.take() {
                    let _ = o.read_to_string(&mut out);
                }
                return (st.code(), out);
            }
            if t0.elapsed() > within {
                let _ = c.kill();
                let _ = c.wait();
                return (None, String::new());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn agree(a: u64, b: u64, what: &str) {
    assert!(a > 0 && b > 0, "{what}: no data ({a} vs {b})");
    let diff = (a as f64 - b as f64).abs() / a.max(b) as f64;
    assert!(
        diff <= 0.02,
        "{what}: sent {a} and received {b} differ by {:.2} %",
        diff * 100.0
    );
}

/// Bytes the receiver accounts for: what arrived, plus, for UDP, the datagrams it
/// counted as lost. Real loss on a busy shared machine (6.5 % once in CI at 50
/// Mbit/s over loopback) is not an interop fault; a loss count that does not
/// match the gap is. Loss above a quarter makes the run meaningless and fails.
fn accounted(sum: &Value, received: u64, ctx: &str) -> u64 {
    let lost = sum["lost_packets"].as_u64().unwrap_or(0);
    let packets = sum["packets"].as_u64().unwrap_or(0);
    if lost == 0 || packets == 0 {
        return received;
    }
    assert!(
        lost * 4 < packets,
        "{ctx}: {lost} of {packets} datagrams lost; the machine is too busy to judge"
    );
    let arrived = packets.saturating_sub(lost).max(1);
    eprintln!("{ctx}: {lost} of {packets} datagrams lost (counted, not a fault)");
    received + lost * (received / arrived)
}

/// Checks a -J document: sent and received agree, per direction.
fn check_sums(j: &Value, bidir: bool, ctx: &str) -> (u64, u64) {
    let end = &j["end"];
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let recv = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
    agree(sent, accounted(&end["sum"], recv, ctx), ctx);
    if bidir {
        let rctx = format!("{ctx} (reverse direction)");
        let rrecv = end["sum_received_bidir_reverse"]["bytes"]
            .as_u64()
            .unwrap_or(0);
        agree(
            end["sum_sent_bidir_reverse"]["bytes"].as_u64().unwrap_or(0),
            accounted(&end["sum_bidir_reverse"], rrecv, &rctx),
            &rctx,
        );
    }
    (sent, recv)
}

/// Tests run long enough that what is in flight when the sender stops (a receiver
/// that stops at TEST_END does not count it) stays well under 2 %. For UDP at
/// 50 Mbit/s one batch of 100 datagrams is 2.3 % of a second: seen to fail a
/// 1-second test once in CI.
fn time_for(args: &[&str]) -> &'static str {
    match (args.contains(&"-O"), args.contains(&"-u")) {
        // --bidir: a stock iperf3 stops reading at TEST_END while our sending
        // thread has filled its socket buffers; a longer test keeps that small.
        _ if args.contains(&"--bidir") && !args.contains(&"-u") => "3",
        (true, _) => "3",
        (false, _) => "2",
    }
}

/// Our client against `iperf3 -s -1`.
/// One interop test at a time: run side by side, a TCP pair at full speed
/// starves a single-threaded iperf3 UDP receiver into real loss (3.9 % at 50
/// Mbit/s in CI), and sent and received no longer agree for reasons of load.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

fn ours_to_iperf3(host: &str, args: &[&str]) {
    let _turn = one_at_a_time();
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(program("iperf3"));
        c.args(["-s", "-1", "-J", "-p", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    });
    let server = Peer(Some(child));
    let mut a = vec![
        "client",
        host,
        "-p",
        &port.to_string(),
        "-t",
        time_for(args),
        "-J",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    a.extend(args.iter().map(|s| s.to_string()));
    let a: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = tunbench(&a);
    let ctx = format!("tunbench {}", a.join(" "));
    assert!(o.status.success(), "{ctx}: {}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {}", text(&o)));
    let (sent, _) = check_sums(&j, args.contains(&"--bidir"), &ctx);
    let (code, out) = server.finish(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{ctx}: iperf3 -s exit code");
    // iperf3's own account of the same test agrees with ours.
    let theirs: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{ctx}: iperf3 -J output not JSON ({e}): {out}"));
    // The server reports from its side: what it sent with -R, else what it received.
    let (ours_key, theirs_key) = if args.contains(&"-R") {
        ("sum_sent", "sum_sent")
    } else {
        ("sum_received", "sum_received")
    };
    agree(
        j["end"][ours_key]["bytes"].as_u64().unwrap_or(0),
        theirs["end"][theirs_key]["bytes"].as_u64().unwrap_or(0),
        &format!("{ctx}: our {ours_key} vs the iperf3 server's {theirs_key}"),
    );
    let _ = sent;
}

/// `iperf3 -c` against our server in one-off mode.
fn iperf3_to_ours(host: &str, args: &[&str]) {
    let _turn = one_at_a_time();
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-1", "-J", "-p", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    });
    let server = Peer(Some(child));
    let mut a: Vec<String> = vec![
        "-c",
        host,
        "-p",
        &port.to_string(),
        "-t",
        time_for(args),
        "-J",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    a.extend(args.iter().map(|s| s.to_string()));
    let ctx = format!("iperf3 {}", a.join(" "));
    let o = Command::new(program("iperf3")).args(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{ctx}: {}", text(&o));
    let j: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{ctx}: not JSON ({e})"));
    assert!(j.get("error").is_none(), "{ctx}: {}", j["error"]);
    let (sent, _) = check_sums(&j, args.contains(&"--bidir"), &ctx);
    let (code, out) = server.finish(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{ctx}: tunbench server -1 exit code");
    let ours: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{ctx}: our server's output is not JSON ({e}): {out}"));
    agree(
        sent,
        ours["end"]["sum_sent"]["bytes"].as_u64().unwrap_or(0),
        &format!("{ctx}: iperf3's sum_sent vs our server's"),
    );
}

macro_rules! both_ways {
    ($name:ident, $host:expr, [$($arg:expr),*]) => {
        mod $name {
            #[test]
            fn ours_to_iperf3() {
                super::ours_to_iperf3($host, &[$($arg),*]);
            }
            #[test]
            fn iperf3_to_ours() {
                super::iperf3_to_ours($host, &[$($arg),*]);
            }
        }
    };
}

both_ways!(tcp_ipv4, "127.0.0.1", []);
both_ways!(tcp_ipv6, "::1", []);
both_ways!(udp_ipv4, "127.0.0.1", ["-u", "-b", "50M"]);
both_ways!(udp_ipv6, "::1", ["-u", "-b", "50M", "-l", "1448"]);
both_ways!(tcp_reverse, "127.0.0.1", ["-R"]);
both_ways!(udp_reverse, "::1", ["-u", "-b", "50M", "-R"]);
both_ways!(tcp_four_streams, "127.0.0.1", ["-P", "4"]);
// Paced: at TEST_END each receiver stops reading while the other side's sender
// runs until it hears of it, so an unpaced 10+ Gbit/s stream loses a
// scheduling delay's worth (30 MB, 2.2 %, seen in CI) between sent and received.
both_ways!(tcp_bidir, "::1", ["--bidir", "-b", "2G"]);
both_ways!(udp_bidir, "127.0.0.1", ["-u", "-b", "20M", "--bidir"]);
both_ways!(tcp_omit, "127.0.0.1", ["-O", "1"]);
both_ways!(
    udp_64bit_counters,
    "127.0.0.1",
    ["-u", "-b", "30M", "--udp-counters-64bit", "-P", "2"]
);
