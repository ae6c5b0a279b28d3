//! The shared driver with a codec that stalls (needs root), in the lab of
//! tests/datapath/driver.rs with one driver, in A: a burst the test queues
//! while the codec holds a marked packet reaches the driver as one batch,
//! whatever the machine's speed. A codec's panic drops its packet alone each
//! way; in-order TCP segments of one flow go into the TUN as one super-packet
//! on each TUN backend; a thread that dies stops the datapath.

use crate::common::{BOUND, wait_for, wait_until};
use crate::driver::{INNER_A, INNER_B, Lab, OUTER_A, OUTER_B, TUN, namespaces};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::cell::Cell;
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tunbench::codec::{Codec, DropReason, Verdict};
use tunbench::driver::tun_rs_backend::TunBackend;
use tunbench::driver::{
    Driver, DriverConfig, DriverError, Fault, StatsSnapshot, Transport, run_until,
};

/// A codec with a bug: it panics on a poisoned packet (first byte from the
/// network, first UDP payload byte from the TUN), and stalls on a marker,
/// saying so on `stalled`, until the test sends on `release`: a burst the test
/// queues meanwhile reaches it as one batch.
struct Fragile {
    peer: SocketAddr,
    stalled: mpsc::Sender<()>,
    release: mpsc::Receiver<()>,
}

/// The test's ends of a `Fragile` codec's stall.
struct Stall {
    stalled: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
}

impl Fragile {
    fn new(peer: SocketAddr) -> (Fragile, Stall) {
        let (stalled_tx, stalled) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let codec = Fragile {
            peer,
            stalled: stalled_tx,
            release: release_rx,
        };
        (codec, Stall { stalled, release })
    }

    fn stall_or_poison(&self, b: Option<&u8>) -> Option<Verdict> {
        match b {
            Some(&STALL) => {
                let _ = self.stalled.send(());
                // Released by the test; a test gone (its sender dropped) ends it too.
                let _ = self.release.recv_timeout(BOUND);
                Some(Verdict::Drop(DropReason::Unsupported))
            }
            Some(&POISON) => panic!("fragile codec: poisoned packet"),
            _ => None,
        }
    }
}

impl Stall {
    /// Waits until the codec holds a STALL packet.
    fn wait_stalled(&self, what: &str) {
        self.stalled
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("waited {BOUND:?} and this never happened: {what}"));
    }
}

const POISON: u8 = 0xee;
const STALL: u8 = 0xdd;

impl Codec for Fragile {
    fn handle_tun(&mut self, p: &mut Vec<u8>, _now: Instant) -> Verdict {
        if p.len() < 29 || p[0] >> 4 != 4 {
            return Verdict::Drop(DropReason::WrongProtocol);
        }
        self.stall_or_poison(p.get(28))
            .unwrap_or(Verdict::ToNetwork(self.peer))
    }

    fn handle_network(&mut self, _peer: SocketAddr, p: &mut Vec<u8>, _now: Instant) -> Verdict {
        self.stall_or_poison(p.first()).unwrap_or(Verdict::ToTun)
    }
}

/// Packets the qdisc of namespace `ns`'s TUN has handed to the TUN: each is in
/// the TUN's queue for the driver to read once it has.
fn tun_qdisc_sent(ns: &str) -> u64 {
    let o = Command::new("ip")
        .args([
            "netns", "exec", ns, "tc", "-s", "-j", "qdisc", "show", "dev", TUN,
        ])
        .output()
        .expect("tc -s qdisc");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["root"] == true)
        .filter_map(|q| q["packets"].as_u64())
        .sum()
}

/// An IPv4 packet of `protocol` from B's inner address to A's around `l4`,
/// its header checksum complete.
fn inner_ipv4_to_a(protocol: u8, l4: &[u8]) -> Vec<u8> {
    let len = 20 + l4.len();
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    // Don't fragment, as TCP sets it.
    p[6] = 0x40;
    p[8] = 64;
    p[9] = protocol;
    p[12..16].copy_from_slice(&INNER_B.octets());
    p[16..20].copy_from_slice(&INNER_A.octets());
    let c = tunbench::wire::checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(l4);
    p
}

/// An IPv4 UDP packet from B's inner address to A's discard port.
fn inner_udp_to_a(payload: &[u8]) -> Vec<u8> {
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&9u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(payload);
    inner_ipv4_to_a(17, &udp)
}

/// A TCP segment (ACK only, no options) of one flow from B's inner address to
/// A's, carrying the flow's bytes from `seq` on, its checksum complete.
fn inner_tcp_to_a(seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&5001u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&9u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&1u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x10;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp.extend_from_slice(payload);
    let mut pseudo = Vec::with_capacity(12 + tcp.len());
    pseudo.extend_from_slice(&INNER_B.octets());
    pseudo.extend_from_slice(&INNER_A.octets());
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(&tcp);
    let c = tunbench::wire::checksum(&pseudo);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    inner_ipv4_to_a(6, &tcp)
}

/// A raw IPv6 socket of protocol 4 bound to `at` in namespace `ns`: in B it
/// sends as B's tunnel end would; in A it gets a copy of each packet A's
/// driver gets.
fn raw_4in6(lab: &Lab, ns: &str, at: &str) -> Socket {
    let at: SocketAddr = SocketAddr::new(at.parse().unwrap(), 0);
    lab.in_ns(ns, move || {
        let s = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::from(4)))?;
        s.bind(&SockAddr::from(at))?;
        Ok(s)
    })
}

/// The packets A's driver has been sent from B's outer address so far, as a
/// raw socket of the test's own in A counts its copies of them.
struct Copies {
    sock: Socket,
    seen: Cell<u64>,
}

impl Copies {
    fn new(lab: &Lab) -> Copies {
        let sock = raw_4in6(lab, &lab.a, OUTER_A);
        sock.set_nonblocking(true).unwrap();
        Copies {
            sock,
            seen: Cell::new(0),
        }
    }

    fn count(&self) -> u64 {
        let mut buf = [std::mem::MaybeUninit::new(0u8); 128];
        while self.sock.recv(&mut buf).is_ok() {
            self.seen.set(self.seen.get() + 1);
        }
        self.seen.get()
    }
}

fn fragile_driver(lab: &Lab, fault: Option<Fault>) -> DriverConfig {
    let mut c = DriverConfig::new(
        TUN,
        Transport::RawIp {
            local: OUTER_A.parse().unwrap(),
            protocol: 4,
        },
    );
    c.frames = false;
    c.namespace = Some(lab.a.clone());
    c.fault = fault;
    c
}

/// `count` packets that reach the codec as one batch while it holds a STALL
/// packet: `send` sends the STALL packet (None), then packet `i` of the
/// burst; `queued` says how many of them wait for the driver. Released once
/// all `count` wait.
fn burst_behind_a_stall(
    stall: &Stall,
    what: &str,
    count: usize,
    send: impl Fn(Option<usize>),
    queued: impl Fn() -> u64,
) {
    send(None);
    stall.wait_stalled(&format!("{what}: the codec holding the STALL packet"));
    let before = queued();
    for i in 0..count {
        send(Some(i));
    }
    wait_until(
        &format!("{what}: the burst queued for the driver"),
        BOUND,
        || queued() >= before + count as u64,
    );
    stall.release.send(()).expect("releasing the codec");
}

#[test]
fn a_codec_panic_drops_its_packet_alone_each_way() {
    let lab = Lab::new("dppanic", 1400);
    let prefix = lab.prefix.clone();
    {
        let b_peer = SocketAddr::new(OUTER_B.parse().unwrap(), 0);
        let (codec, stall) = Fragile::new(b_peer);
        let d = Driver::start(fragile_driver(&lab, None), codec).expect("starting the driver");
        let panicked = |s: &StatsSnapshot| s.drops.get("panicked").copied().unwrap_or(0);

        // TUN -> network: datagrams from A's inner address into the TUN,
        // once one gets there (the kernel drops what it sends into the TUN
        // until it has seen the driver attach, up to a second or so later).
        let tx = lab.in_ns(&lab.a, move || UdpSocket::bind((INNER_A, 0)));
        wait_until("a datagram through the TUN to the driver", BOUND, || {
            tx.send_to(&[0x01; 32], (INNER_B, 9)).unwrap();
            d.stats().tun_rx.packets > 0
        });
        let s0 = wait_for("the driver reading all the TUN got", BOUND, || {
            let s = d.stats();
            (s.tun_rx.packets >= tun_qdisc_sent(&lab.a)).then_some(s)
        });
        burst_behind_a_stall(
            &stall,
            "TUN -> network",
            15,
            |i| {
                let b = match i {
                    None => STALL,
                    Some(i) if i % 3 == 1 => POISON,
                    Some(_) => 0x01,
                };
                tx.send_to(&[b; 32], (INNER_B, 9)).unwrap();
            },
            || tun_qdisc_sent(&lab.a),
        );
        let s = wait_for("TUN -> network: the burst handled", BOUND, || {
            let s = d.stats();
            (s.tun_rx.packets >= s0.tun_rx.packets + 16).then_some(s)
        });
        assert_eq!(panicked(&s), 5, "{:?}", s.drops);
        assert_eq!(s.errors.codec_panic, 5);
        assert_eq!(
            s.net_tx.packets - s0.net_tx.packets,
            10,
            "the good packets of the batch went on"
        );
        // The STALL packet alone, then the burst (and any packet of the
        // kernel's that came along) in one batch.
        let (batches, packets) = (
            s.batches.tun_to_net - s0.batches.tun_to_net,
            s.tun_rx.packets - s0.tun_rx.packets,
        );
        assert!(
            batches <= packets - 14,
            "{batches} batches for {packets} packets"
        );

        // Network -> TUN: datagrams from B's outer address to the socket.
        let (sock, copies) = (raw_4in6(&lab, &lab.b, OUTER_B), Copies::new(&lab));
        let to = SockAddr::from(SocketAddr::new(OUTER_A.parse().unwrap(), 0));
        let s0 = d.stats();
        burst_behind_a_stall(
            &stall,
            "network -> TUN",
            15,
            |i| {
                let p = match i {
                    None => vec![STALL; 40],
                    Some(i) if i % 3 == 1 => vec![POISON; 40],
                    Some(_) => inner_udp_to_a(b"good"),
                };
                sock.send_to(&p, &to).unwrap();
            },
            || copies.count(),
        );
        let s = wait_for("network -> TUN: the burst handled", BOUND, || {
            let s = d.stats();
            (s.net_rx.packets >= s0.net_rx.packets + 16).then_some(s)
        });
        let (batches, packets) = (
            s.batches.net_to_tun - s0.batches.net_to_tun,
            s.net_rx.packets - s0.net_rx.packets,
        );
        let s = d.stop();
        assert_eq!(panicked(&s), 10, "{:?}", s.drops);
        assert_eq!(s.errors.codec_panic, 10);
        assert_eq!(
            s.tun_tx.packets - s0.tun_tx.packets,
            10,
            "the good packets of the batch went on"
        );
        assert_eq!(packets, 16, "STALL and the burst");
        assert!(batches <= 2, "{batches} batches for {packets} packets");
    }
    drop(lab);
    assert_eq!(namespaces(&prefix), Vec::<String>::new());
}

/// The coalescing burst: 44 segments of 1460 bytes, 64,280 bytes of IP
/// packet once joined, about all one super-packet of 64 KiB holds: a backend
/// whose buffers had room for less would write some of them alone.
const SEGMENTS: usize = 44;
const MSS: usize = 1460;

/// In-order TCP segments of one flow from the network, queued while the
/// codec stalls so that they reach the driver as one batch, go into A's TUN
/// as one super-packet on `backend`.
fn a_burst_goes_into_the_tun_whole(backend: TunBackend, tag: &str) {
    let lab = Lab::new(tag, 1500);
    let prefix = lab.prefix.clone();
    {
        let (codec, stall) = Fragile::new(SocketAddr::new(OUTER_B.parse().unwrap(), 0));
        let mut config = fragile_driver(&lab, None);
        config.tun_backend = Some(backend);
        let d = Driver::start(config, codec).expect("starting the driver");
        let (sock, copies) = (raw_4in6(&lab, &lab.b, OUTER_B), Copies::new(&lab));
        let to = SockAddr::from(SocketAddr::new(OUTER_A.parse().unwrap(), 0));
        let flow: Vec<u8> = (0..SEGMENTS * MSS).map(|i| (i % 251) as u8).collect();
        let s0 = d.stats();
        burst_behind_a_stall(
            &stall,
            &format!("{tag}: one TCP flow"),
            SEGMENTS,
            |i| {
                let p = match i {
                    None => vec![STALL; 40],
                    Some(i) => {
                        let bytes = &flow[i * MSS..(i + 1) * MSS];
                        inner_tcp_to_a((1 + i * MSS) as u32, bytes)
                    }
                };
                sock.send_to(&p, &to).unwrap();
            },
            || copies.count(),
        );
        wait_until(
            &format!("{tag}: the burst written into the TUN"),
            BOUND,
            || d.stats().tun_tx.packets >= s0.tun_tx.packets + SEGMENTS as u64,
        );
        let s = d.stop();
        assert_eq!(s.tun_backend, backend, "{tag}");
        assert_eq!(
            s.errors.tun_write + s.errors.offload,
            0,
            "{tag}: {:?}",
            s.errors
        );
        assert_eq!(
            s.tun_tx.packets - s0.tun_tx.packets,
            SEGMENTS as u64,
            "{tag}"
        );
        let coalesced = (
            s.coalesced.super_packets - s0.coalesced.super_packets,
            s.coalesced.packets - s0.coalesced.packets,
        );
        assert_eq!(
            coalesced,
            (1, SEGMENTS as u64),
            "{tag}: (super-packets, segments in them) written for {SEGMENTS} segments in order"
        );
    }
    drop(lab);
    assert_eq!(namespaces(&prefix), Vec::<String>::new());
}

#[test]
fn a_burst_of_one_tcp_flow_goes_into_the_tun_as_one_super_packet() {
    a_burst_goes_into_the_tun_whole(TunBackend::Tunbench, "dpgro");
}

/// tun-rs coalesces into a buffer only within its capacity
/// (core/src/driver/tun_rs_backend.rs, `Writer`).
#[test]
fn a_burst_of_one_tcp_flow_goes_into_the_tun_as_one_super_packet_on_tun_rs() {
    a_burst_goes_into_the_tun_whole(TunBackend::TunRs, "dpgrors");
}

/// Runs a driver with `fault` as a datapath process does; what `run_until`
/// returned, or None if it still ran a wait's bound after the fault.
fn run_with_fault(lab: &Lab, fault: Fault) -> Option<Result<StatsSnapshot, DriverError>> {
    let config = fragile_driver(lab, Some(fault));
    let (codec, _stall) = Fragile::new(SocketAddr::new(OUTER_B.parse().unwrap(), 0));
    let (tx, rx) = mpsc::channel();
    let stop: &'static std::sync::atomic::AtomicBool =
        Box::leak(Box::new(std::sync::atomic::AtomicBool::new(false)));
    std::thread::spawn(move || {
        let r = run_until(config, codec, stop, Duration::from_millis(100), |_| {});
        let _ = tx.send(r);
    });
    let r = rx.recv_timeout(Fault::AFTER + BOUND).ok();
    // Whatever happened, the driver stops (its namespace goes with the lab).
    stop.store(true, Ordering::Relaxed);
    r
}

#[test]
fn a_dead_driver_thread_stops_the_datapath_and_says_which() {
    let lab = Lab::new("dpdead", 1400);
    let prefix = lab.prefix.clone();
    for (fault, thread, how) in [
        (
            Fault::Panic("tb-net-to-tun0".into()),
            "tb-net-to-tun0",
            "panicked: injected fault",
        ),
        (
            Fault::Exit("tb-tun0-to-net".into()),
            "tb-tun0-to-net",
            "exited",
        ),
    ] {
        let r = run_with_fault(&lab, fault).expect("the datapath stops when a thread dies");
        match r {
            Err(e @ DriverError::ThreadDied { .. }) => {
                let text = e.to_string();
                assert!(text.contains(thread) && text.contains(how), "{text}");
            }
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("{thread}: no error"),
        }
    }
    drop(lab);
    assert_eq!(namespaces(&prefix), Vec::<String>::new());
}
