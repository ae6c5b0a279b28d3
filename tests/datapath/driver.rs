//! The shared tunnel driver end to end (needs root): two namespaces joined by a
//! veth (IPv6, 2001:2:0:fd::/64), a persistent TUN in each carrying the inner
//! IPv4 network 198.18.253.0/24, and a driver in each running a toy codec, plain
//! IPv4-in-IPv6 over raw IP protocol 4 or IPv4 over UDP. Traffic between the
//! inner addresses crosses both drivers.

use crate::common::{BOUND, wait_until};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tunbench::codec::{Codec, DropReason, Verdict};
use tunbench::driver::tun::{Tun, TunError};
use tunbench::driver::{Driver, DriverConfig, DriverError, StatsSnapshot, Transport};

pub(crate) const TUN: &str = "tbt0";
pub(crate) const OUTER_A: &str = "2001:2:0:fd::1";
pub(crate) const OUTER_B: &str = "2001:2:0:fd::2";
pub(crate) const INNER_A: Ipv4Addr = Ipv4Addr::new(198, 18, 253, 1);
pub(crate) const INNER_B: Ipv4Addr = Ipv4Addr::new(198, 18, 253, 2);
pub(crate) const UDP_PORT: u16 = 4789;

/// The toy tunnel: every IPv4 packet from the TUN goes to the one peer; every
/// well-formed IPv4 packet from the peer goes into the TUN. `ticks` counts
/// the driver's calls of `tick`.
pub(crate) struct Plain {
    peer: SocketAddr,
    ticks: u64,
}

impl Plain {
    pub(crate) fn new(peer: SocketAddr) -> Plain {
        Plain { peer, ticks: 0 }
    }
}

impl Codec for Plain {
    fn tick(&mut self, _now: Instant) {
        self.ticks += 1;
    }

    fn handle_tun(&mut self, p: &mut Vec<u8>, _now: Instant) -> Verdict {
        if p.len() < 20 || p[0] >> 4 != 4 {
            // IPv6 the kernel sends on its own (router solicitations, MLD).
            return Verdict::Drop(DropReason::WrongProtocol);
        }
        Verdict::ToNetwork(self.peer)
    }

    fn handle_network(&mut self, peer: SocketAddr, p: &mut Vec<u8>, _now: Instant) -> Verdict {
        if peer.ip() != self.peer.ip() {
            return Verdict::Drop(DropReason::UnknownPeer);
        }
        if p.len() < 20 {
            return Verdict::Drop(DropReason::Truncated);
        }
        if p[0] >> 4 != 4 || u16::from_be_bytes([p[2], p[3]]) as usize != p.len() {
            return Verdict::Drop(DropReason::Malformed);
        }
        Verdict::ToTun
    }
}

pub(crate) fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

pub(crate) fn namespaces(prefix: &str) -> Vec<String> {
    netns::namespace::list()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Two namespaces of this test; deleted on drop, also when the test panics.
pub(crate) struct Lab {
    pub(crate) prefix: String,
    pub(crate) a: String,
    pub(crate) b: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Lab {
    /// Namespaces `tbdrv-<pid>-<tag>-a` and `-b`, a veth between them, and a TUN
    /// of `mtu` in each with the inner address.
    pub(crate) fn new(tag: &str, tun_mtu: u32) -> Lab {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!(
            "tbdrv-{}-{tag}{}-",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let lab = Lab {
            a: format!("{prefix}a"),
            b: format!("{prefix}b"),
            prefix,
        };
        let (a, b) = (lab.a.as_str(), lab.b.as_str());
        ip(&["netns", "add", a]);
        ip(&["netns", "add", b]);
        for ns in [a, b] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b,
        ]);
        for (ns, dev, outer, inner) in [(a, "va", OUTER_A, INNER_A), (b, "vb", OUTER_B, INNER_B)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{outer}/64"),
                "dev",
                dev,
                "nodad",
            ]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            netns::namespace::run_in(ns, || netns::tun::create_persistent(TUN))
                .expect("creating the TUN");
            // No IPv6 on the TUN: the kernel sends none of its own (neighbour
            // discovery, MLD) through the drivers, which count what they see.
            ip(&["-n", ns, "link", "set", TUN, "addrgenmode", "none"]);
            ip(&[
                "-n",
                ns,
                "link",
                "set",
                TUN,
                "mtu",
                &tun_mtu.to_string(),
                "up",
            ]);
            ip(&["-n", ns, "addr", "add", &format!("{inner}/24"), "dev", TUN]);
        }
        lab
    }

    /// `frames`: raw IPv6 sends as Ethernet frames where it can.
    fn drivers(
        &self,
        offloads: bool,
        udp: bool,
        queues: usize,
        frames: bool,
    ) -> (Driver<Plain>, Driver<Plain>) {
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
            c.frames = frames;
            c.namespace = Some(ns.to_string());
            Driver::start(c, Plain::new(peer)).expect("starting the driver")
        };
        (
            start(&self.a, OUTER_A, OUTER_B),
            start(&self.b, OUTER_B, OUTER_A),
        )
    }

    pub(crate) fn in_ns<T: Send + 'static>(
        &self,
        ns: &str,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> T {
        netns::namespace::run_in(ns, f).expect("socket in the namespace")
    }
}

/// Byte `i` of the test data: a pattern whose period (a prime) is no multiple of
/// any segment size, so a lost, doubled or reordered segment breaks it.
fn pattern(i: usize) -> u8 {
    let i = i % PERIOD;
    (i % 251) as u8 ^ (i >> 8) as u8
}

const PERIOD: usize = 65521;
const CHUNK: usize = 1 << 20;

/// The pattern from 0 to PERIOD + CHUNK: bytes `at..at + n` of any transfer
/// (n <= CHUNK) are `window(at, n)`, compared with memcmp even in debug builds.
fn window(at: usize, n: usize) -> &'static [u8] {
    static DATA: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let d = DATA.get_or_init(|| (0..PERIOD + CHUNK).map(pattern).collect());
    &d[at % PERIOD..at % PERIOD + n]
}

/// Echoes of small UDP datagrams between the inner addresses, a ping of sorts;
/// waits first for the path to come up.
pub(crate) fn ping(lab: &Lab, count: usize) {
    let server = lab.in_ns(&lab.b, move || UdpSocket::bind((INNER_B, 7)));
    let client = lab.in_ns(&lab.a, move || UdpSocket::bind((INNER_A, 0)));
    // Echoes until told to stop (directly, not through the tunnel) or idle
    // for the bound of a wait.
    let stop = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        server.set_read_timeout(Some(BOUND)).unwrap();
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            if &buf[..n] == b"stop" {
                break;
            }
            let _ = server.send_to(&buf[..n], from);
        }
    });
    // A hello every 100 ms until one comes back.
    client
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; 2048];
    wait_until("an echo through the tunnel", BOUND, || {
        client.send_to(b"hello", (INNER_B, 7)).unwrap();
        client.recv(&mut buf).is_ok()
    });
    client.set_read_timeout(Some(BOUND)).unwrap();
    for i in 0..count {
        let msg: Vec<u8> = (0..1000).map(|j| pattern(i + j)).collect();
        client.send_to(&msg, (INNER_B, 7)).unwrap();
        // Late answers to the warm-up's hellos may come first.
        let n = loop {
            let n = client.recv(&mut buf).expect("echo reply");
            if &buf[..n] != b"hello" {
                break n;
            }
        };
        assert_eq!(&buf[..n], &msg[..], "echo {i}");
    }
    let stopper = lab.in_ns(&lab.b, move || UdpSocket::bind((INNER_B, 0)));
    stopper.send_to(b"stop", stop).unwrap();
    echo.join().unwrap();
}

/// Sends `bytes` over TCP from namespace `from` to `to_addr` in namespace `to`
/// and checks every byte on arrival; returns Mbit/s.
fn tcp_transfer(lab: &Lab, from: &str, to: &str, to_addr: Ipv4Addr, bytes: usize) -> f64 {
    let listener = lab.in_ns(to, move || TcpListener::bind((to_addr, 5001)));
    let receiver = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.set_read_timeout(Some(BOUND)).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut at = 0usize;
        loop {
            let n = s.read(&mut buf).expect("reading the transfer");
            if n == 0 {
                break;
            }
            assert!(
                buf[..n] == *window(at, n),
                "bytes {at}.. of the transfer differ"
            );
            at += n;
        }
        at
    });
    let mut s = lab.in_ns(from, move || {
        TcpStream::connect_timeout(&SocketAddr::from((to_addr, 5001)), BOUND)
    });
    s.set_write_timeout(Some(BOUND)).unwrap();
    let t0 = Instant::now();
    let mut sent = 0;
    while sent < bytes {
        let n = (bytes - sent).min(CHUNK);
        s.write_all(window(sent, n)).expect("sending the transfer");
        sent += n;
    }
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = receiver.join().expect("receiver");
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(got, bytes, "bytes received");
    bytes as f64 * 8.0 / secs / 1e6
}

/// Sends one UDP GSO train (20 datagrams of 1000 bytes in one send) from A to B;
/// with USO on the TUN it reaches the driver whole and is cut there.
fn udp_gso_train(lab: &Lab) {
    let rx = lab.in_ns(&lab.b, move || UdpSocket::bind((INNER_B, 9)));
    let tx = lab.in_ns(&lab.a, move || {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        s.bind(&SockAddr::from(SocketAddr::from((INNER_A, 0))))?;
        Ok(s)
    });
    let seg: libc::c_int = 1000;
    // SAFETY: one int for UDP_SEGMENT.
    let ok = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&tx),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            &seg as *const libc::c_int as *const libc::c_void,
            4,
        )
    } == 0;
    assert!(ok, "UDP_SEGMENT");
    let train: Vec<u8> = (0..20_000).map(pattern).collect();
    tx.send_to(&train, &SockAddr::from(SocketAddr::from((INNER_B, 9))))
        .expect("sending a GSO train");
    rx.set_read_timeout(Some(BOUND)).unwrap();
    let mut buf = [0u8; 2048];
    for i in 0..20 {
        let n = rx.recv(&mut buf).expect("a datagram of the train");
        assert_eq!(&buf[..n], &train[i * 1000..(i + 1) * 1000], "datagram {i}");
    }
}

/// Sends garbage at A's tunnel socket from B's outer address: the codec drops it
/// (Malformed, Truncated) and the driver carries on.
fn send_garbage(lab: &Lab, udp: bool, count: usize) {
    let s = lab.in_ns(&lab.b, move || {
        let (ty, proto) = if udp {
            (Type::DGRAM, Protocol::UDP)
        } else {
            (Type::RAW, Protocol::from(4))
        };
        let s = Socket::new(Domain::IPV6, ty, Some(proto))?;
        s.bind(&SockAddr::from(SocketAddr::new(
            OUTER_B.parse().unwrap(),
            0,
        )))?;
        Ok(s)
    });
    let to = SockAddr::from(SocketAddr::new(
        OUTER_A.parse().unwrap(),
        if udp { UDP_PORT } else { 0 },
    ));
    for i in 0..count {
        let junk: Vec<u8> = if i % 2 == 0 {
            vec![0x77; 300]
        } else {
            vec![0x45; 7]
        };
        s.send_to(&junk, &to).expect("sending garbage");
    }
}

/// Ticks an idle driver is watched over.
const IDLE_TICKS: u64 = 4;

/// Idle drivers sleep in poll(2) until their next tick: over a few ticks each
/// thread wakes about once a tick (the TUNs carry no IPv6, so the kernel sends
/// nothing of its own; twice a tick is the slack), and each wake-up costs
/// microseconds of CPU. A thread that spun would wake thousands of times, or
/// use a good share of a core: both bounds count what the drivers did per
/// tick, which no load on the machine changes.
fn assert_idle_sleeps(tag: &str, drivers: &[&Driver<Plain>]) {
    let ticks = |d: &Driver<Plain>| d.with_codec(|c| c.ticks);
    let before: Vec<(u64, StatsSnapshot)> = drivers.iter().map(|d| (ticks(d), d.stats())).collect();
    wait_until(
        &format!("{tag}: idle drivers ticking {IDLE_TICKS} times"),
        BOUND,
        || {
            drivers
                .iter()
                .zip(&before)
                .all(|(d, (t0, _))| ticks(d) >= t0 + IDLE_TICKS)
        },
    );
    for (d, (t0, s0)) in drivers.iter().zip(&before) {
        let (ticked, s1) = (ticks(d) - t0, d.stats());
        let wakes = s1.batches.waits - s0.batches.waits;
        let cpu = s1.cpu_seconds - s0.cpu_seconds;
        let most = s1.threads as u64 * 2 * (ticked + 1);
        assert!(
            wakes <= most,
            "{tag}: idle driver threads woke {wakes} times in {ticked} ticks (at most {most})"
        );
        // 2 ms of CPU a wake-up: a hundred times what one costs.
        assert!(
            cpu <= most as f64 * 0.002,
            "{tag}: idle drivers used {cpu:.4} s of CPU in {ticked} ticks"
        );
    }
}

/// What `cmd` prints run in namespace `ns` (`ip netns exec`).
fn ns_output(ns: &str, cmd: &[&str]) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .expect("running ip netns exec");
    assert!(o.status.success(), "{ns}: {cmd:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Datagrams the kernel dropped between the two drivers' sockets, either
/// way, as it counts them in each namespace: the veth's drops (a CPU's
/// backlog full), failed reassemblies, and the drops of every raw and UDP
/// socket (a receive buffer full), while the drivers' sockets are open. A
/// busy machine makes them; nothing else loses a datagram on the way.
fn kernel_drops(lab: &Lab) -> u64 {
    let mut n = 0;
    for (ns, dev) in [(&lab.a, "va"), (&lab.b, "vb")] {
        let link = ns_output(ns, &["ip", "-s", "-j", "link", "show", "dev", dev]);
        let link: serde_json::Value = serde_json::from_str(&link).expect("ip -j link");
        let stats = &link[0]["stats64"];
        for way in ["rx", "tx"] {
            n += stats[way]["dropped"].as_u64().expect("stats64 dropped");
        }
        let sockets = ns_output(ns, &["cat", "/proc/net/raw6", "/proc/net/udp6"]);
        n += sockets
            .lines()
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
        let snmp = ns_output(ns, &["cat", "/proc/net/snmp6"]);
        n += snmp
            .lines()
            .filter_map(|l| l.strip_prefix("Ip6ReasmFails"))
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

/// The drivers' stats after a run of `bytes` each way, `garbage` datagrams
/// sent to A besides, and `kernel_dropped` datagrams dropped on the way.
fn check_stats(
    what: &str,
    (a, b): (&StatsSnapshot, &StatsSnapshot),
    bytes: usize,
    offloads: bool,
    (garbage, kernel_dropped): (u64, u64),
) {
    eprintln!("{what}: A {}", serde_json::to_string(a).unwrap());
    eprintln!("{what}: B {}", serde_json::to_string(b).unwrap());
    for (s, side) in [(a, "A"), (b, "B")] {
        // Both ways carried a transfer of `bytes`, plus headers and acks.
        assert!(
            s.tun_rx.bytes >= bytes as u64,
            "{what} {side} tun_rx {:?}",
            s.tun_rx
        );
        assert!(
            s.net_tx.bytes >= bytes as u64,
            "{what} {side} net_tx {:?}",
            s.net_tx
        );
        assert!(
            s.net_rx.bytes >= bytes as u64,
            "{what} {side} net_rx {:?}",
            s.net_rx
        );
        assert!(
            s.tun_tx.bytes >= bytes as u64,
            "{what} {side} tun_tx {:?}",
            s.tun_tx
        );
        assert_eq!(s.errors.tun_write, 0, "{what} {side} {:?}", s.errors);
        assert_eq!(s.errors.offload, 0, "{what} {side} {:?}", s.errors);
        assert_eq!(s.errors.codec_panic, 0, "{what} {side} {:?}", s.errors);
        assert_eq!(s.drops.len(), DropReason::ALL.len());
        assert!(s.cpu_seconds > 0.0, "{what} {side} cpu");
        assert_eq!(s.offloads.tso, offloads);
        if offloads {
            // With TSO on its TUN the kernel hands over 8 MiB of TCP in
            // super-packets. (How many segments reach a TUN write together
            // depends on how the threads wake: driver_stall.rs queues a burst
            // to see it coalesced.)
            assert!(
                s.segmented.super_packets > 0,
                "{what} {side} nothing segmented"
            );
        } else {
            assert_eq!(s.segmented.super_packets, 0);
            assert_eq!(s.coalesced.super_packets, 0);
        }
    }
    // Whatever A's driver sent, B's received, and the other way round (but
    // for the garbage A got), less what the kernel dropped and counted.
    let (ab, ba) = (
        (a.net_tx.packets, b.net_rx.packets),
        (b.net_tx.packets + garbage, a.net_rx.packets),
    );
    eprintln!("{what}: datagrams A->B {ab:?}, B->A {ba:?}, dropped by the kernel {kernel_dropped}");
    assert!(
        ab.1 <= ab.0 && ba.1 <= ba.0 && ab.0 - ab.1 + ba.0 - ba.1 <= kernel_dropped,
        "{what}: datagrams (sent, received) A->B {ab:?}, B->A {ba:?}: more lost than the \
         kernel's {kernel_dropped} drops, or more received than sent"
    );
}

fn run(tag: &str, udp: bool, offloads: bool, tun_mtu: u32, queues: usize, frames: bool) {
    let lab = Lab::new(tag, tun_mtu);
    let prefix = lab.prefix.clone();
    {
        let (da, db) = lab.drivers(offloads, udp, queues, frames);
        ping(&lab, 20);
        assert_idle_sleeps(tag, &[&da, &db]);
        let bytes = 8 << 20;
        let up = tcp_transfer(&lab, &lab.a, &lab.b, INNER_B, bytes);
        let down = tcp_transfer(&lab, &lab.b, &lab.a, INNER_A, bytes);
        eprintln!("{tag}: TCP A->B {up:.0} Mbit/s, B->A {down:.0} Mbit/s");
        udp_gso_train(&lab);
        let garbage = 40u64;
        send_garbage(&lab, udp, garbage as usize);
        // Traffic keeps flowing after the garbage.
        ping(&lab, 5);
        let dropped = kernel_drops(&lab);
        let a = da.stop();
        let b = db.stop();
        check_stats(tag, (&a, &b), bytes, offloads, (garbage, dropped));
        assert_eq!(a.drops_of(DropReason::Malformed), garbage / 2, "{tag}");
        assert_eq!(a.drops_of(DropReason::Truncated), garbage / 2, "{tag}");
        if offloads && a.offloads.uso {
            assert!(a.segmented.packets >= 20);
        }
        if udp {
            assert!(a.udp_gro && b.udp_gro, "{tag} GRO");
            if tun_mtu <= 1400 {
                assert!(a.udp_gso && b.udp_gso, "{tag} GSO");
            }
        }
        for (s, side) in [(&a, "A"), (&b, "B")] {
            let f = s.frames;
            assert_eq!(f.enabled, frames && !udp, "{tag} {side} {f:?}");
            if !f.enabled {
                assert_eq!(
                    (f.packets, f.fallbacks, f.lookups),
                    (0, 0, 0),
                    "{tag} {side}"
                );
                continue;
            }
            // The first packet to the peer went through the raw socket, which
            // made the kernel resolve the neighbour.
            assert!(f.fallbacks >= 1 && f.lookups >= 1, "{tag} {side} {f:?}");
            assert!(f.packets <= s.net_tx.packets, "{tag} {side} {f:?}");
            if tun_mtu + 40 > 1500 {
                // Full-size packets no longer fit the link once encapsulated:
                // the raw socket sent them, and the kernel fragmented them.
                assert!(f.fallbacks > 1000, "{tag} {side} {f:?}");
                assert!(f.packets > 100, "{tag} {side} {f:?}");
            } else {
                // Everything fits: frames carried nearly all.
                assert!(f.packets > s.net_tx.packets * 9 / 10, "{tag} {side} {f:?}");
            }
        }
    }
    drop(lab);
    assert_eq!(
        namespaces(&prefix),
        Vec::<String>::new(),
        "namespaces left behind"
    );
}

#[test]
fn raw_ipv6_with_offloads() {
    // TUN MTU 1500 on a 1500-byte link: every full-size packet is fragmented
    // after encapsulation and reassembled before the codec sees it (RFC 2473).
    run("rawon", false, true, 1500, 1, true);
}

#[test]
fn raw_ipv6_without_offloads() {
    run("rawoff", false, false, 1460, 1, true);
}

/// The raw socket alone, as when no packet socket can be had.
#[test]
fn raw_ipv6_without_frames() {
    run("rawonly", false, true, 1460, 1, false);
}

#[test]
fn udp_with_offloads_two_queues() {
    run("udpon", true, true, 1400, 2, true);
}

#[test]
fn udp_without_offloads() {
    run("udpoff", true, false, 1400, 1, true);
}

/// Frames follow the kernel's neighbour table: when the peer's MAC changes and
/// the old entry is gone, frames to the old MAC stop within a refresh, the raw
/// socket's packets make the kernel resolve the new one, and frames resume,
/// to the new MAC (an echo sent to the old one would be lost, and `ping` fail).
#[test]
fn raw_ipv6_frames_follow_a_neighbour_change() {
    let lab = Lab::new("neigh", 1460);
    let prefix = lab.prefix.clone();
    {
        let (da, db) = lab.drivers(true, false, 1, true);
        // The first packets take the raw socket, which makes the kernel
        // resolve the peer; once it has, frames carry the rest.
        wait_until("15 echoes sent as frames to the peer's MAC", BOUND, || {
            ping(&lab, 1);
            da.stats().frames.packets >= 15
        });
        let before = da.stats().frames;
        ip(&[
            "-n",
            &lab.b,
            "link",
            "set",
            "vb",
            "address",
            "02:00:5e:10:00:fd",
        ]);
        ip(&["-n", &lab.a, "neigh", "flush", "dev", "va"]);
        // ping waits for the first echo: frames to the old MAC are lost until
        // the next hop is looked up again, after a refresh.
        ping(&lab, 5);
        let after = da.stats().frames;
        assert!(after.fallbacks > before.fallbacks, "{before:?} {after:?}");
        // Past the retry interval the new neighbour is looked up, and frames
        // go to its MAC.
        wait_until("15 echoes sent as frames to the new MAC", BOUND, || {
            ping(&lab, 1);
            da.stats().frames.packets >= after.packets + 15
        });
        let a = da.stop();
        let b = db.stop();
        assert_eq!(a.errors.net_send, 0, "{:?}", a.errors);
        assert_eq!(b.errors.net_send, 0, "{:?}", b.errors);
    }
    drop(lab);
    assert_eq!(namespaces(&prefix), Vec::<String>::new());
}

#[test]
fn tun_device_lifecycle() {
    let lab = Lab::new("tun", 1500);
    let prefix = lab.prefix.clone();
    lab.in_ns(&lab.a, || {
        // Creating it again is harmless.
        netns::tun::create_persistent(TUN)?;
        let t = Tun::attach(TUN, 3, true, false).map_err(std::io::Error::other)?;
        assert_eq!(t.queue_count(), 3);
        assert!(t.offloads().tso && t.offloads().csum);
        drop(t);
        let t = Tun::attach(TUN, 1, false, false).map_err(std::io::Error::other)?;
        assert_eq!(t.offloads(), Default::default());
        drop(t);
        match Tun::attach("tbnone0", 1, true, false) {
            Err(e @ TunError::Missing(_)) => assert!(e.to_string().contains("tbnone0")),
            other => panic!("attach to a missing device: {other:?}"),
        }
        // A veth is no TUN: the error names it.
        match Tun::attach("va", 1, true, false) {
            Err(e) => assert!(e.to_string().contains("va"), "{e}"),
            Ok(_) => panic!("attached to a veth"),
        }
        assert!(netns::tun::delete_persistent(TUN)?);
        assert!(!netns::tun::exists(TUN));
        assert!(!netns::tun::delete_persistent(TUN)?);
        Ok(())
    });
    drop(lab);
    assert_eq!(namespaces(&prefix), Vec::<String>::new());
}

#[test]
fn bad_configurations_are_refused() {
    let t = Transport::Udp {
        bind: "[::1]:0".parse().unwrap(),
    };
    for (batch, queues) in [(0, 1), (129, 1), (64, 0)] {
        let mut c = DriverConfig::new(TUN, t);
        c.batch = batch;
        c.queues = queues;
        match Driver::start(c, Plain::new("[::1]:1".parse().unwrap())) {
            Err(DriverError::Config(_)) => {}
            Err(e) => panic!("batch {batch} queues {queues}: {e}"),
            Ok(_) => panic!("batch {batch} queues {queues} accepted"),
        }
    }
    let mut c = DriverConfig::new("tbnone0", t);
    c.namespace = Some("tbdrv-no-such-namespace".into());
    let e = Driver::start(c, Plain::new("[::1]:1".parse().unwrap()))
        .err()
        .expect("no namespace");
    assert!(e.to_string().contains("tbdrv-no-such-namespace"), "{e}");
}
