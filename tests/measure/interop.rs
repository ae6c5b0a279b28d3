//! Interop with Debian's iperf3 (3.12): our client against `iperf3 -s`, and
//! `iperf3 -c` against our server, TCP and UDP, IPv4 and IPv6, -R, -P 4, --bidir,
//! -O 1, --udp-counters-64bit. Loopback only. Every stream is paced (-b), so
//! what a test moves is set by its rate and length, not by how fast this
//! machine is. Data passes through the real peer: nothing is received that was
//! not sent, and at least three quarters of it is accounted for at the
//! receiver (what arrived, and for UDP what it counted lost); the two programs'
//! reports of one count are equal; and the peer exits 0.

use crate::common::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};

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
    /// Its exit code and standard output, once it has ended (read meanwhile,
    /// so a long report cannot fill the pipe and hold it).
    fn finish(mut self, what: &str) -> (Option<i32>, String) {
        let mut c = self.0.take().unwrap();
        let mut out = c.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            use std::io::Read;
            let _ = out.read_to_string(&mut s);
            s
        });
        let status = wait_exit(&mut c, what, BOUND);
        (status.code(), reader.join().unwrap())
    }
}

/// Received against sent, one direction of one test: at least three quarters
/// of it, and never more, except with -O, where what is in flight as the
/// omitted second ends counts at the receiver only. What a paced stream can
/// leave uncounted is only its tail, sent while the receiver stopped at
/// TEST_END; a quarter of the test is far beyond that, and any miscount of a
/// whole second (the omitted one, say) falls outside.
fn agree(sent: u64, received: u64, omit: bool, what: &str) {
    let most = if omit { sent + sent / 4 } else { sent };
    assert!(
        received > 0 && received <= most && received * 4 >= sent * 3,
        "{what}: sent {sent} bytes and accounted for {received} at the receiver"
    );
}

/// Bytes the receiver accounts for: what arrived, plus, for UDP, the datagrams
/// it counted lost (at the size of those that arrived). Loss on a busy machine
/// is not an interop fault; a loss count that does not match the gap is.
fn accounted(sum: &Value, received: u64, ctx: &str) -> u64 {
    let lost = sum["lost_packets"].as_u64().unwrap_or(0);
    let packets = sum["packets"].as_u64().unwrap_or(0);
    if lost == 0 || packets == 0 {
        return received;
    }
    assert!(lost < packets, "{ctx}: all {packets} datagrams lost");
    let arrived = packets - lost;
    eprintln!("{ctx}: {lost} of {packets} datagrams lost (counted, not a fault)");
    received + lost * (received / arrived)
}

/// Checks a -J document of a test run with `args`: sent and received agree,
/// per direction.
fn check_sums(j: &Value, args: &[&str], ctx: &str) {
    let (bidir, omit) = (args.contains(&"--bidir"), args.contains(&"-O"));
    let end = &j["end"];
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap_or(0);
    let recv = end["sum_received"]["bytes"].as_u64().unwrap_or(0);
    agree(sent, accounted(&end["sum"], recv, ctx), omit, ctx);
    if bidir {
        let rctx = format!("{ctx} (reverse direction)");
        let rrecv = end["sum_received_bidir_reverse"]["bytes"]
            .as_u64()
            .unwrap_or(0);
        agree(
            end["sum_sent_bidir_reverse"]["bytes"].as_u64().unwrap_or(0),
            accounted(&end["sum_bidir_reverse"], rrecv, &rctx),
            omit,
            &rctx,
        );
    }
}

/// One count as two programs report it: the same number.
fn same(ours: &Value, theirs: &Value, what: &str) {
    let (a, b) = (ours["bytes"].as_u64(), theirs["bytes"].as_u64());
    assert!(a.is_some_and(|a| a > 0), "{what}: no count in {ours}");
    assert_eq!(a, b, "{what}");
}

/// Seconds of each test: long against one write or batch of the rate.
const SECONDS: &str = "2";

/// Our client against `iperf3 -s -1`.
fn ours_to_iperf3(host: &str, args: &[&str]) {
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(program("iperf3"));
        c.args(["-s", "-1", "-J", "-p", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    });
    let server = Peer(Some(child));
    let port = port.to_string();
    let mut a = vec!["client", host, "-p", &port, "-t", SECONDS, "-J"];
    a.extend_from_slice(args);
    let o = tunbench(&a);
    let ctx = format!("tunbench {}", a.join(" "));
    assert!(o.status.success(), "{ctx}: {}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{ctx}: not JSON ({e}): {}", text(&o)));
    check_sums(&j, args, &ctx);
    let (code, out) = server.finish(&format!("{ctx}: iperf3 -s -1 ended"));
    assert_eq!(code, Some(0), "{ctx}: iperf3 -s exit code");
    // iperf3's own account of the same test agrees with ours.
    let theirs: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{ctx}: iperf3 -J output not JSON ({e}): {out}"));
    // The server reports from its side: what it sent with -R, else what it received.
    let key = if args.contains(&"-R") {
        "sum_sent"
    } else {
        "sum_received"
    };
    same(
        &j["end"][key],
        &theirs["end"][key],
        &format!("{ctx}: our {key} vs the iperf3 server's"),
    );
}

/// `iperf3 -c` against our server in one-off mode.
fn iperf3_to_ours(host: &str, args: &[&str]) {
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-1", "-J", "-p", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    });
    let server = Peer(Some(child));
    let port = port.to_string();
    let mut a = vec!["-c", host, "-p", &port, "-t", SECONDS, "-J"];
    a.extend_from_slice(args);
    let ctx = format!("iperf3 {}", a.join(" "));
    let o = Command::new(program("iperf3")).args(&a).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{ctx}: {}", text(&o));
    let j: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{ctx}: not JSON ({e})"));
    assert!(j.get("error").is_none(), "{ctx}: {}", j["error"]);
    check_sums(&j, args, &ctx);
    let (code, out) = server.finish(&format!("{ctx}: tunbench server -1 ended"));
    assert_eq!(code, Some(0), "{ctx}: tunbench server -1 exit code");
    let ours: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{ctx}: our server's output is not JSON ({e}): {out}"));
    same(
        &ours["end"]["sum_sent"],
        &j["end"]["sum_sent"],
        &format!("{ctx}: our server's sum_sent vs iperf3's"),
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

// Rates per stream: TCP 100 Mbit/s, UDP 20, low enough that a loaded machine
// keeps to them on loopback.
both_ways!(tcp_ipv4, "127.0.0.1", ["-b", "100M"]);
both_ways!(tcp_ipv6, "::1", ["-b", "100M"]);
both_ways!(udp_ipv4, "127.0.0.1", ["-u", "-b", "20M"]);
both_ways!(udp_ipv6, "::1", ["-u", "-b", "20M", "-l", "1448"]);
both_ways!(tcp_reverse, "127.0.0.1", ["-R", "-b", "100M"]);
both_ways!(udp_reverse, "::1", ["-u", "-b", "20M", "-R"]);
both_ways!(tcp_four_streams, "127.0.0.1", ["-P", "4", "-b", "100M"]);
both_ways!(tcp_bidir, "::1", ["--bidir", "-b", "100M"]);
both_ways!(udp_bidir, "127.0.0.1", ["-u", "-b", "20M", "--bidir"]);
both_ways!(tcp_omit, "127.0.0.1", ["-O", "1", "-b", "100M"]);
both_ways!(
    udp_64bit_counters,
    "127.0.0.1",
    ["-u", "-b", "20M", "--udp-counters-64bit", "-P", "2"]
);
