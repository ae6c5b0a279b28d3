//! Helpers of the lab tests that tests/common does not have (yet).

use crate::common::*;
use std::process::Child;

/// Kills (SIGKILL) and reaps the child on drop: a `tunbench` the test started
/// must not outlive a failed test.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// All the standard output and error of a child that has ended (both piped).
pub fn output_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    out
}

/// Whether a thread of process `pid` is blocked reading its standard input:
/// /proc/PID/task/*/syscall says `read` on descriptor 0.
pub fn reading_stdin(pid: u32) -> bool {
    let want = format!("{} 0x0 ", libc::SYS_read);
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()).any(|t| {
                std::fs::read_to_string(t.path().join("syscall"))
                    .is_ok_and(|s| s.starts_with(&want))
            })
        })
        .unwrap_or(false)
}

/// The engine's JSON report of `tunbench client TO ARGS -J` in `LAB-CLIENT`
/// against a one-off `tunbench server` in `LAB-SERVER`.
fn engine_report(
    lab: &str,
    client: &str,
    server: &str,
    to: &str,
    args: &[&str],
) -> serde_json::Value {
    use std::process::{Command, Stdio};
    let server_ns = format!("{lab}-{server}");
    let (srv, port) = spawn_listening(|port| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &server_ns, bin()])
            .args(["server", "-1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    });
    let _srv = KillOnDrop(srv);
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-{client}"), bin()])
        .args(["client", to, "-p", &port.to_string(), "-J"])
        .args(args)
        .output()
        .expect("running the client");
    assert!(
        o.status.success(),
        "{lab}: client {client} -> {to} {args:?}: {}",
        text(&o)
    );
    serde_json::from_slice(&o.stdout).expect("the client's JSON")
}

/// Bytes of TCP and datagrams of UDP that each (client, server, target)
/// moves: a few megabytes, and a few dozen datagrams (paced at 10 Mbit/s, so
/// they come in a trickle the receiver keeps up with, not one burst).
const TCP_BYTES: u64 = 4 << 20;
const UDP_DATAGRAMS: u64 = 48;
const UDP_LENGTH: u64 = 1200;

/// Traffic through the lab for every (client, server, target), with tunbench's
/// engine: a fixed amount of TCP arrives whole, and UDP datagrams arrive (not
/// necessarily all: the server stops reading at the client's end of test,
/// and may not have read the last ones by then). That the path
/// carries both is checked, not how fast: counts, no rate.
pub fn traffic_passes(lab: &str, pairs: &[(&str, &str, &str)]) {
    for &(client, server, to) in pairs {
        let what = format!("{lab}: {client} -> {to}");
        let tcp = engine_report(lab, client, server, to, &["-n", &TCP_BYTES.to_string()]);
        assert_eq!(
            tcp["end"]["sum_received"]["bytes"].as_u64(),
            Some(TCP_BYTES),
            "{what}: TCP bytes received of {TCP_BYTES} sent: {}",
            tcp["end"]
        );
        let udp = engine_report(
            lab,
            client,
            server,
            to,
            &[
                "-u",
                "-b",
                "10M",
                "-l",
                &UDP_LENGTH.to_string(),
                "-n",
                &(UDP_DATAGRAMS * UDP_LENGTH).to_string(),
            ],
        );
        // The receiver's counts, iperf3's: the highest datagram counter seen
        // ("packets") and the gaps below it ("lost_packets").
        let end = &udp["end"];
        let sum = &end["sum"];
        let (Some(highest), Some(gaps)) = (sum["packets"].as_u64(), sum["lost_packets"].as_u64())
        else {
            panic!("{what}: no UDP counts in {end}");
        };
        // The sender stops after the batch of datagrams that reaches -n.
        let sent_bytes = end["sum_sent"]["bytes"].as_u64().unwrap_or(0);
        let sent = sent_bytes / UDP_LENGTH;
        assert!(
            sent >= UDP_DATAGRAMS && sent_bytes % UDP_LENGTH == 0,
            "{what}: UDP bytes sent: {end}"
        );
        assert!(
            highest <= sent && gaps < highest,
            "{what}: UDP: {} of {sent} datagrams arrived: {end}",
            highest.saturating_sub(gaps)
        );
    }
}
