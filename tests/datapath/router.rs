//! Routers' datapaths end to end, as root in namespaces: the userspace slow path
//! (every forwarded packet through tunbench's process) forwards IPv4 and IPv6,
//! takes one off the TTL / hop limit, answers with ICMP errors so path MTU
//! discovery works, and goes away with the lab; the kernel datapath is held to
//! the same behaviour.

use crate::common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

fn file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/router/slow.toml")
}

/// The lab with r1's datapath as the file says (userspace) or as the `kernel`
/// scenario overrides it.
fn lab_with(datapath: &str, tag: &str) -> (LabGuard, String) {
    let lab = lab_name(tag);
    let g = LabGuard(lab.clone());
    let f = file();
    let mut args = vec!["up", f.to_str().unwrap(), "--name", &lab];
    if datapath == "kernel" {
        args.extend(["--scenario", "kernel"]);
    }
    let o = tunbench(&args);
    assert!(o.status.success(), "up ({datapath}): {}", text(&o));
    (g, lab)
}

const RIGHT_V4: &str = "198.18.61.2";
const RIGHT_V6: &str = "2001:2:0:61::2";

fn slow_path_packets(lab: &str) -> u64 {
    let p = state_dir(lab).join("datapath-router.r1.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or_default();
    v["tun_rx"]["packets"].as_u64().unwrap_or(0)
}

/// TCP both families from left to right: the answers arrive, and the slow
/// path's own counters (written each second) saw the traffic.
#[test]
fn slow_path_forwards_both_families_through_its_process() {
    let (_g, lab) = lab_with("userspace", "rsf");
    let before = slow_path_packets(&lab);
    for dst in [RIGHT_V4, RIGHT_V6] {
        let (tx, rx) = std::sync::mpsc::channel();
        let ns = format!("{lab}-right");
        let server = std::thread::spawn(move || {
            netns::namespace::enter(&ns).unwrap();
            let l = TcpListener::bind("[::]:7100").unwrap();
            tx.send(()).unwrap();
            let (mut c, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 100_000];
            c.read_exact(&mut buf).unwrap();
            c.write_all(&buf).unwrap();
        });
        rx.recv().unwrap();
        let addr: SocketAddr = SocketAddr::new(dst.parse().unwrap(), 7100);
        let echoed = in_ns(&format!("{lab}-left"), move || {
            let mut c = TcpStream::connect_timeout(&addr, BOUND)
                .unwrap_or_else(|e| panic!("connecting to {addr} through r1: {e}"));
            c.set_read_timeout(Some(BOUND)).unwrap();
            let out: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            c.write_all(&out).unwrap();
            let mut back = vec![0u8; out.len()];
            c.read_exact(&mut back).unwrap();
            back == out
        });
        server.join().unwrap();
        assert!(echoed, "{dst}: the echo came back different");
    }
    // 2 x 200 kB is well over 100 packets each way; the counters are
    // written each second.
    wait_until(
        &format!("the slow path counting 200 packets beyond {before}: traffic bypassed it"),
        BOUND,
        || slow_path_packets(&lab) >= before + 200,
    );
}

/// A datagram leaving with TTL / hop limit 2 arrives (r1 takes one); with 1,
/// r1 answers ICMP time exceeded, which the sender's socket reports, and does
/// not forward it: a third datagram (TTL 2) sent after it, on the same path,
/// arrives right after the first. Each is sent once, once a ping has crossed
/// r1 (a slow path's TUN takes nothing the kernel redirects to it until the
/// kernel has seen its reader attach).
fn ttl_drops_by_exactly_one(datapath: &str, tag: &str) {
    let (_g, lab) = lab_with(datapath, tag);
    for (dst, v6) in [(RIGHT_V4, false), (RIGHT_V6, true)] {
        eventually(&format!("a ping through r1 to {dst}"), || {
            ping_from(&lab, "left", &[dst])
        });
        let ns = format!("{lab}-right");
        let (tx, rx) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            netns::namespace::enter(&ns).unwrap();
            let s = UdpSocket::bind("[::]:7101").unwrap();
            s.set_read_timeout(Some(BOUND)).unwrap();
            tx.send(()).unwrap();
            let mut buf = [0u8; 64];
            let mut got = Vec::new();
            while got.last() != Some(&3) {
                match s.recv(&mut buf) {
                    Ok(_) => got.push(buf[0]),
                    Err(_) => break,
                }
            }
            got
        });
        rx.recv().unwrap();
        let to: SocketAddr = SocketAddr::new(dst.parse().unwrap(), 7101);
        let errno = in_ns(&format!("{lab}-left"), move || {
            let s = UdpSocket::bind(if v6 { "[::]:0" } else { "0.0.0.0:0" }).unwrap();
            s.connect(to).unwrap();
            let fd = s.as_raw_fd();
            let ttl = |v: i32| {
                if v6 {
                    setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS, v)
                } else {
                    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TTL, v)
                }
            };
            if v6 {
                setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1);
            } else {
                setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVERR, 1);
            }
            ttl(2);
            s.send(&[2]).unwrap();
            ttl(1);
            s.send(&[1]).unwrap();
            s.set_read_timeout(Some(BOUND)).unwrap();
            let mut buf = [0u8; 16];
            let errno = s.recv(&mut buf).err().and_then(|e| e.raw_os_error());
            ttl(2);
            s.send(&[3]).unwrap();
            errno
        });
        let got = server.join().unwrap();
        assert_eq!(
            got,
            vec![2, 3],
            "{datapath} {dst}: the datagram sent with TTL 1 must not arrive"
        );
        assert_eq!(
            errno,
            Some(libc::EHOSTUNREACH),
            "{datapath} {dst}: the sender should hear ICMP time exceeded"
        );
    }
}

#[test]
fn userspace_router_takes_one_off_the_ttl_and_answers_time_exceeded() {
    ttl_drops_by_exactly_one("userspace", "rst");
}

#[test]
fn kernel_router_takes_one_off_the_ttl_and_answers_time_exceeded() {
    ttl_drops_by_exactly_one("kernel", "rkt");
}

const IPV6_MTU: i32 = 24;
const IP_MTU: i32 = 14;

/// Datagrams of a 1500-byte packet towards the right-hand link (MTU 1400): r1
/// answers fragmentation needed (DF set) / packet too big, and the sender's
/// path MTU becomes 1400.
fn pmtu_converges(datapath: &str, tag: &str) {
    let (_g, lab) = lab_with(datapath, tag);
    for (dst, v6) in [(RIGHT_V4, false), (RIGHT_V6, true)] {
        let to: SocketAddr = SocketAddr::new(dst.parse().unwrap(), 9);
        let (before, after) = in_ns(&format!("{lab}-left"), move || {
            let s = UdpSocket::bind(if v6 { "[::]:0" } else { "0.0.0.0:0" }).unwrap();
            s.connect(to).unwrap();
            let fd = s.as_raw_fd();
            let (level, opt, payload) = if v6 {
                (libc::IPPROTO_IPV6, IPV6_MTU, 1500 - 48)
            } else {
                setsockopt_int(
                    fd,
                    libc::IPPROTO_IP,
                    libc::IP_MTU_DISCOVER,
                    libc::IP_PMTUDISC_DO,
                );
                (libc::IPPROTO_IP, IP_MTU, 1500 - 28)
            };
            let before = getsockopt_int(fd, level, opt);
            // Sent again until r1's answer lowers the path MTU.
            poll(BOUND, || {
                let _ = s.send(&vec![0u8; payload]);
                (getsockopt_int(fd, level, opt) < before).then_some(())
            });
            (before, getsockopt_int(fd, level, opt))
        });
        assert_eq!(before, 1500, "{datapath} {dst}: path MTU before");
        assert_eq!(
            after, 1400,
            "{datapath} {dst}: path MTU after r1's ICMP error"
        );
    }
}

#[test]
fn path_mtu_discovery_works_through_a_userspace_router() {
    pmtu_converges("userspace", "rsp");
}

#[test]
fn path_mtu_discovery_works_through_a_kernel_router() {
    pmtu_converges("kernel", "rkp");
}

/// Every address the routing model expects answers, with either datapath, and
/// `down` stops the slow-path process and leaves nothing.
#[test]
fn both_datapaths_check_clean_and_down_stops_the_slow_path() {
    for datapath in ["kernel", "userspace"] {
        let (g, lab) = lab_with(datapath, &format!("rc{}", &datapath[..1]));
        let c = tunbench(&["check", &lab]);
        assert_eq!(c.status.code(), Some(0), "{datapath}:\n{}", text(&c));
        let state: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(state_dir(&lab).join("state.json")).unwrap(),
        )
        .unwrap();
        let pids: Vec<i64> = state["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| {
                p["what"]
                    .as_str()
                    .unwrap_or("")
                    .contains("slow path of router r1")
            })
            .filter_map(|p| p["id"]["pid"].as_i64())
            .collect();
        assert_eq!(
            pids.len(),
            usize::from(datapath == "userspace"),
            "{datapath}: slow-path processes in the lab's state: {state}"
        );
        let d = tunbench(&["down", &lab]);
        assert!(d.status.success(), "{}", text(&d));
        drop(g);
        assert_gone(&lab);
        for p in pids {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            assert!(
                stat.is_empty() || stat.contains(") Z "),
                "slow path {p} still running: {stat}"
            );
        }
    }
}

/// A slow-path thread that dies (a fault only tests inject) takes the
/// datapath process down, and its log says which thread and why.
#[test]
fn a_dead_slow_path_thread_ends_the_process_with_a_log_line() {
    let lab = lab_name("dpdead");
    let _g = LabGuard(lab.clone());
    let f = file();
    let o = std::process::Command::new(bin())
        .args(["up", f.to_str().unwrap(), "--name", &lab])
        .env("TUNBENCH_TEST_FAULT", "panic:tb-tun0-to-net")
        .output()
        .expect("running tunbench up");
    assert!(o.status.success(), "up: {}", text(&o));
    let stats = state_dir(&lab).join("datapath-router.r1.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).expect("stats file")).unwrap();
    let pid = v["pid"].as_u64().expect("pid in the stats file");
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    // Gone, or a zombie of a parent that has not reaped it yet.
    wait_until(
        &format!("the slow path (pid {pid}) ending with a dead thread"),
        BOUND,
        || {
            std::fs::read_to_string(proc_dir.join("stat")).map_or(true, |s| {
                s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'))
            })
        },
    );
    let log = std::fs::read_to_string(state_dir(&lab).join("logs/datapath-router.r1.log"))
        .expect("the slow path's log");
    assert!(
        log.contains("thread tb-tun0-to-net panicked at") && log.contains("injected fault"),
        "{log}"
    );
    assert!(
        log.contains(
            "datapath thread tb-tun0-to-net panicked: injected fault; stopping the datapath"
        ),
        "{log}"
    );
}

/// A slow path's log flooded (3 MiB appended, as a writer gone wild would)
/// is cut back under its 1 MiB cap, with a note.
#[test]
fn a_flooded_datapath_log_is_cut_back_under_its_cap() {
    let (_g, lab) = lab_with("userspace", "dplogfl");
    let log = state_dir(&lab).join("logs/datapath-router.r1.log");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .expect("the slow path's log");
    let line = format!("{}\n", "flood ".repeat(50));
    for _ in 0..(3 << 20) / line.len() {
        f.write_all(line.as_bytes()).unwrap();
    }
    // The cut empties the file and then writes its note: the two are waited
    // for together, as a reader between them finds an empty log. The cut may
    // fall while this test still appends, so lines of the flood can land
    // between the truncation and the note: the note is looked for in the
    // file, not only at its start.
    let note = "tunbench datapath: log reached 1048576 bytes; cut back";
    wait_until(
        "the flooded log cut back to 1 MiB or less, with a note saying so",
        BOUND,
        || {
            let text = std::fs::read_to_string(&log).unwrap();
            text.len() <= 1 << 20 && text.contains(note)
        },
    );
}
