//! Userspace link impairments through a link's relay namespace: a delay of
//! 20 ms shows as 20 +- 1 ms one way (timestamps from the one clock all the
//! lab's namespaces share); a loss of 1 % measures 0.8-1.2 % over more than
//! 100k datagrams of the engine's UDP test, with reordering seen as out of
//! order; the relay's own counters agree; both ends still see one Ethernet
//! segment (neighbour discovery, both families); `tunbench impair` changes
//! the delay of the running lab; the relay namespace goes with the lab.

use crate::common::*;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: one timespec on the stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One-way delays (ms) of `n` datagrams from `from`'s namespace to `to`,
/// each stamped with the monotonic clock when sent.
fn one_way_ms(lab: &str, to: &str, n: usize) -> Vec<f64> {
    let port = 7300;
    let ns_b = format!("{lab}-right");
    let (tx, rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || {
        netns::namespace::enter(&ns_b).unwrap();
        let s = UdpSocket::bind(("::", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        tx.send(()).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        while out.len() < n {
            let Ok(len) = s.recv(&mut buf) else { break };
            if len >= 8 {
                let sent = u64::from_be_bytes(buf[..8].try_into().unwrap());
                out.push((monotonic_ns() - sent) as f64 / 1e6);
            }
        }
        out
    });
    rx.recv().unwrap();
    let ns_a = format!("{lab}-left");
    let to = to.to_string();
    std::thread::spawn(move || {
        netns::namespace::enter(&ns_a).unwrap();
        let s = UdpSocket::bind(("::", 0)).unwrap();
        for _ in 0..n {
            s.send_to(&monotonic_ns().to_be_bytes(), (to.as_str(), port))
                .unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    })
    .join()
    .unwrap();
    receiver.join().unwrap()
}

#[test]
fn delay_loss_and_reordering_through_the_relay() {
    let lab = lab_name("rly");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/impair/relay.toml");
    let (g, o) = up(&file, &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    let relay_ns = format!("{lab}-link.0");
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(&relay_ns),
        "the relay namespace {relay_ns} exists while the lab runs"
    );

    // 20 ms one way, left to right, both families (the first datagrams also
    // wait for neighbour discovery: the median is what is judged).
    for to in ["198.18.82.2", "2001:2:0:82::2"] {
        let mut d = one_way_ms(&lab, to, 200);
        assert!(d.len() >= 190, "{to}: {} of 200 arrived", d.len());
        d.sort_by(|a, b| a.total_cmp(b));
        let median = d[d.len() / 2];
        eprintln!("one way to {to}: min {:.2} median {median:.2} ms", d[0]);
        assert!((median - 20.0).abs() <= 1.0, "{to}: median {median} ms");
        assert!(d[0] >= 19.9, "{to}: nothing arrives early: {} ms", d[0]);
    }

    // 1 % loss right to left, measured by the engine's UDP receiver (-R: the
    // server on the right sends): 120k datagrams of 100 bytes at 20k a second.
    // On this noisy machine a neighbour's burst can overflow a queue on the
    // way (6 % real loss once in CI at twice this packet rate): more loss is
    // measured again, less is wrong (see `on_a_noisy_machine`).
    let udp = || {
        let mut server = Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-right"), bin()])
            .args(["server", "-1", "-p", "5310"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let o = Command::new("ip")
            .args(["netns", "exec", &format!("{lab}-left"), bin()])
            .args(["client", "198.18.82.2", "-p", "5310", "-R", "-u"])
            .args(["-b", "16M", "-l", "100", "-t", "6", "-J"])
            .output()
            .unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert!(o.status.success(), "{}", text(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let sum = &j["end"]["sum"];
        let packets = sum["packets"].as_u64().unwrap_or(0);
        let lost = sum["lost_percent"].as_f64().unwrap_or(-1.0);
        let ooo = sum["out_of_order"].as_u64().unwrap_or(0);
        eprintln!("UDP right to left: {packets} datagrams, {lost:.3} % lost, {ooo} out of order");
        (packets, lost, ooo)
    };
    let mut ooo = 0;
    on_a_noisy_machine(3, "1 % loss right to left", || {
        let (packets, lost, out_of_order) = udp();
        ooo = out_of_order;
        let why = format!("{packets} datagrams, {lost:.3} % lost");
        if packets < 100_000 {
            Judged::Short(why)
        } else if lost < 0.8 {
            Judged::Wrong(why)
        } else if lost > 1.2 {
            Judged::Short(why)
        } else {
            Judged::Pass
        }
    });
    assert!(ooo > 0, "2 % reordering shows as out of order");

    // The relay counted what it did.
    std::thread::sleep(Duration::from_millis(1200));
    let p = state_dir(&lab).join("datapath-link.0.b_to_a.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or_default();
    assert!(
        v["drops"]["lost"].as_u64().unwrap_or(0) > 1000,
        "{p:?}: {v}"
    );

    // Changed on the running lab: 5 ms instead of 20, taken within a second.
    let o = tunbench(&[
        "impair",
        &lab,
        "left:eth0",
        "--direction",
        "out",
        "--delay",
        "5ms",
    ]);
    assert!(o.status.success(), "impair: {}", text(&o));
    assert!(text(&o).contains("delay 5 ms"), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(1500));
    let mut d = one_way_ms(&lab, "198.18.82.2", 100);
    d.sort_by(|a, b| a.total_cmp(b));
    let median = d[d.len() / 2];
    eprintln!("one way after impair --delay 5ms: median {median:.2} ms");
    assert!((median - 5.0).abs() <= 1.0, "median {median} ms");

    drop(g);
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains(&relay_ns),
        "the relay namespace goes with the lab"
    );
}
