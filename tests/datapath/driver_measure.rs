//! Not a test but a benchmark, run on purpose: TCP through the toy tunnel of
//! tests/datapath/driver.rs against the plain veth under it, with iperf3.

use crate::common::wait_listening;
use crate::driver::{Lab, OUTER_A, OUTER_B, Plain, TUN, UDP_PORT, ip, ping};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};
use tunbench::driver::{Driver, DriverConfig, StatsSnapshot, Transport};

/// iperf3 between namespaces: the receiver's Mbit/s of a `secs`-second TCP test
/// from `client` to `server_addr` served in `server` (`reverse`: -R).
fn iperf3(server: &str, client: &str, server_addr: &str, secs: u32, reverse: bool) -> f64 {
    let mut srv = Command::new("ip")
        .args(["netns", "exec", server, "iperf3", "-s", "-1", "-p", "5301"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("iperf3 -s");
    wait_listening(&mut srv, 5301, "iperf3 -s");
    let secs = secs.to_string();
    let mut args = vec![
        "netns",
        "exec",
        client,
        "iperf3",
        "-c",
        server_addr,
        "-p",
        "5301",
        "-t",
        &secs,
        "-J",
    ];
    if reverse {
        args.push("-R");
    }
    let out = Command::new("ip").args(&args).output().expect("iperf3 -c");
    let _ = srv.wait();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iperf3 JSON");
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6
}

/// Not a test: TCP throughput through the toy tunnel vs the plain veth, with
/// iperf3. Run it on purpose, in a release build:
///   cargo test --release --test datapath -- --ignored driver_measure::measure --nocapture
/// Environment: TB_SECS (5), TB_TUN_MTU (1460), TB_UDP (raw IP when unset),
/// TB_OFFLOADS (1), TB_QUEUES (1), TB_BATCH (64), TB_FRAMES (1: raw IPv6 as
/// Ethernet frames), TB_SKIP_VETH (measure the veth too when unset).
#[test]
#[ignore]
fn measure() {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let secs: u32 = env("TB_SECS", "5").parse().unwrap();
    let mtu: u32 = env("TB_TUN_MTU", "1460").parse().unwrap();
    let udp = std::env::var("TB_UDP").is_ok();
    let offloads = env("TB_OFFLOADS", "1") == "1";
    let queues: usize = env("TB_QUEUES", "1").parse().unwrap();
    let batch: usize = env("TB_BATCH", "64").parse().unwrap();
    let frames = env("TB_FRAMES", "1") == "1";
    let lab = Lab::new("bench", mtu);
    ip(&["-n", &lab.a, "addr", "add", "198.18.254.1/24", "dev", "va"]);
    ip(&["-n", &lab.b, "addr", "add", "198.18.254.2/24", "dev", "vb"]);
    let skip_veth = std::env::var("TB_SKIP_VETH").is_ok();
    let veth = |reverse| {
        if skip_veth {
            f64::NAN
        } else {
            iperf3(&lab.b, &lab.a, "198.18.254.2", secs, reverse)
        }
    };
    let veth_up = veth(false);
    let veth_down = veth(true);
    let (da, db) = {
        let start = |ns: &str, local: &str, peer: &str| {
            let local = local.parse().unwrap();
            let peer = peer.parse().unwrap();
            let (transport, peer) = if udp {
                (
                    Transport::Udp {
                        bind: SocketAddr::new(local, UDP_PORT),
                    },
                    SocketAddr::new(peer, UDP_PORT),
                )
            } else {
                (
                    Transport::RawIp { local, protocol: 4 },
                    SocketAddr::new(peer, 0),
                )
            };
            let mut c = DriverConfig::new(TUN, transport);
            c.offloads = offloads;
            c.queues = queues;
            c.batch = batch;
            c.frames = frames;
            c.namespace = Some(ns.to_string());
            Driver::start(c, Plain::new(peer)).expect("starting the driver")
        };
        (
            start(&lab.a, OUTER_A, OUTER_B),
            start(&lab.b, OUTER_B, OUTER_A),
        )
    };
    ping(&lab, 3);
    let (a0, b0) = (da.stats(), db.stats());
    let t0 = Instant::now();
    let tun_up = iperf3(&lab.b, &lab.a, "198.18.253.2", secs, false);
    let (a1, b1) = (da.stats(), db.stats());
    let t1 = Instant::now();
    let tun_down = iperf3(&lab.b, &lab.a, "198.18.253.2", secs, true);
    let (a2, b2) = (da.stats(), db.stats());
    let t2 = Instant::now();
    println!(
        "transport {}, offloads {}, TUN MTU {mtu}, queues {queues}, batch {batch}, frames {}",
        if udp { "UDP" } else { "raw IPv6 (protocol 4)" },
        if offloads { "on" } else { "off" },
        if a2.frames.enabled { "on" } else { "off" }
    );
    println!(
        "plain veth (IPv4, MTU 1500): A->B {veth_up:.0} Mbit/s, B->A (-R) {veth_down:.0} Mbit/s"
    );
    println!(
        "toy tunnel:                  A->B {tun_up:.0} Mbit/s ({:.2}x), B->A (-R) {tun_down:.0} Mbit/s ({:.2}x)",
        tun_up / veth_up,
        tun_down / veth_down
    );
    // CPU of both drivers, in percent of one core and in seconds per GB carried
    // (the second depends less on what else runs on the machine).
    let cpu = |x0: &StatsSnapshot,
               x1: &StatsSnapshot,
               y0: &StatsSnapshot,
               y1: &StatsSnapshot,
               t: Duration,
               bytes: u64| {
        let s = x1.cpu_seconds - x0.cpu_seconds + y1.cpu_seconds - y0.cpu_seconds;
        (s / t.as_secs_f64() * 100.0, s / (bytes as f64 / 1e9))
    };
    let (up_pct, up_gb) = cpu(
        &a0,
        &a1,
        &b0,
        &b1,
        t1 - t0,
        a1.net_tx.bytes - a0.net_tx.bytes,
    );
    let (down_pct, down_gb) = cpu(
        &a1,
        &a2,
        &b1,
        &b2,
        t2 - t1,
        a2.net_rx.bytes - a1.net_rx.bytes,
    );
    println!(
        "both drivers' CPU: {up_pct:.0} % ({up_gb:.2} s/GB) during A->B, {down_pct:.0} % ({down_gb:.2} s/GB) during B->A"
    );
    for (name, x) in [("A", &a2), ("B", &b2)] {
        println!(
            "{name}: {:.1} packets per TUN batch, {:.1} per socket batch, {:.1} per coalesced write, {:.1} per TUN read, {} waits",
            x.tun_rx.packets as f64 / x.batches.tun_to_net.max(1) as f64,
            x.net_rx.packets as f64 / x.batches.net_to_tun.max(1) as f64,
            x.coalesced.packets as f64 / x.coalesced.super_packets.max(1) as f64,
            x.segmented.packets as f64 / x.segmented.super_packets.max(1) as f64,
            x.batches.waits
        );
    }
}
