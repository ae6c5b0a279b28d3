//! The kernel's own impairments as references for tunbench's, on a stock
//! kernel that has them.
//!
//! The link relay (delay, loss, duplication, reordering in userspace, with
//! netem's semantics) against netem itself: the same impairments on a lab
//! link and on a plain veth pair with `tc qdisc ... netem`, the same
//! datagrams through both at once, and the shares each loses, duplicates and
//! reorders agree within their binomial spread; neither delivers a datagram
//! sooner than the delay (an emulated machine may stretch a delay, never
//! shorten it).
//!
//! CAKE as a link's shaper (`shaper = "cake"`): held to the physics the TBF
//! pair is held to in tests/datapath/impair.rs.

use crate::common::shaped::{shaped_most, tcp_goodput, udp_goodput};
use crate::common::*;
use crate::support::{REACHED, assert_rate, engine_json, receiver_rate};
use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tunbench::vocab::Family;

/// The impairments both emulations are given. Left to right: a delay, loss
/// and duplication, so every datagram must arrive no sooner than the delay,
/// and in order (an end marker closes the stream). Right to left: a delay
/// and reordering, which lose nothing (all datagrams close the stream).
const DELAY_MS: u64 = 30;
const LOSS: f64 = 5.0;
const DUPLICATE: f64 = 5.0;
const REORDER: f64 = 20.0;

/// Datagrams each way through each emulation, and the time between two:
/// 500 a second each way, 1000 a second through the relay's process on the
/// VM's emulated CPUs, 3 s when they keep up. Enough for a share of 5 % to be known within 0.6 % (one
/// standard deviation), and twice it to be told from it.
const DATAGRAMS: u32 = 1500;
const GAP: Duration = Duration::from_millis(2);

/// How far apart two shares may be, in standard deviations of their
/// difference: a draw passes 4 with a chance of 1 in 16,000, while a share
/// twice or half the other (an impairment applied twice, or to the wrong
/// direction) is more than 4 apart at these counts.
const SIGMAS: f64 = 4.0;

/// A datagram: its kind, its sequence number and when it was sent
/// (CLOCK_MONOTONIC, which every namespace of one kernel shares).
const LEN: usize = 16;
const DATA: u32 = 0xda7a;
const END: u32 = 0xe0d;
const WARM: u32 = 0x3a4;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: one timespec on the stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn datagram(kind: u32, seq: u32) -> [u8; LEN] {
    let mut d = [0u8; LEN];
    d[..4].copy_from_slice(&kind.to_be_bytes());
    d[4..8].copy_from_slice(&seq.to_be_bytes());
    d[8..].copy_from_slice(&monotonic_ns().to_be_bytes());
    d
}

/// When a way's receiver has all there is to see.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Close {
    /// At the first end marker: the way keeps its order, so everything sent
    /// before the marker that was not lost has arrived.
    AtEndMarker,
    /// Once every datagram has arrived: the way loses none.
    AllArrived,
}

/// One direction through one emulation: a socket sending in one namespace,
/// one receiving in the other.
struct Way {
    what: String,
    tx: UdpSocket,
    rx: UdpSocket,
    close: Close,
}

/// A datagram's arrival: its sequence number and one-way delay.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    seq: u32,
    delay_ms: f64,
}

/// Port the receivers listen on, in namespaces of this test's own.
const PORT: u16 = 7400;

impl Way {
    /// From namespace `from` to `to_addr` in namespace `to`.
    fn new(what: &str, from: &str, to: &str, to_addr: &str, close: Close) -> Way {
        let rx = in_ns(to, || {
            UdpSocket::bind(("0.0.0.0", PORT)).expect("binding the receiver")
        });
        // Room for every datagram of the test at once: a receiver starved of
        // CPU loses none, so every loss is the emulation's.
        use std::os::fd::AsRawFd;
        setsockopt_int(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            16 << 20,
        );
        let to_addr = format!("{to_addr}:{PORT}");
        let tx = in_ns(from, move || {
            let s = UdpSocket::bind("0.0.0.0:0").expect("binding the sender");
            s.connect(&to_addr).expect("connecting the sender");
            s
        });
        Way {
            what: what.to_string(),
            tx,
            rx,
            close,
        }
    }

    /// Warm-up datagrams until one arrives: the neighbours are resolved
    /// before the test's own datagrams, which would otherwise wait (or be
    /// dropped) behind an ARP request the emulation lost.
    fn warm_up(&self) {
        self.rx
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 64];
        wait_until(&format!("{}: a datagram through", self.what), BOUND, || {
            let _ = self.tx.send(&datagram(WARM, 0));
            matches!(self.rx.recv(&mut buf), Ok(LEN) if buf[..4] == WARM.to_be_bytes())
        });
    }

    /// What arrives until the way closes (`Close`). A way that waits for
    /// every datagram stops once none has come for `BOUND`: what never came
    /// is then for the test to explain; a way that never sees its end marker
    /// fails.
    fn receive(&self, done: &AtomicBool) -> Vec<Arrival> {
        self.rx.set_read_timeout(Some(BOUND)).unwrap();
        let mut seen = vec![false; DATAGRAMS as usize];
        let (mut distinct, mut out) = (0, Vec::new());
        let mut buf = [0u8; 64];
        loop {
            let len = match self.rx.recv(&mut buf) {
                Ok(len) => len,
                Err(_) if self.close == Close::AllArrived => break,
                Err(e) => panic!(
                    "{}: {distinct} of {DATAGRAMS} datagrams and no end marker, then {e}",
                    self.what
                ),
            };
            let now = monotonic_ns();
            if len != LEN {
                continue;
            }
            let field = |r: std::ops::Range<usize>| {
                u64::from_be_bytes({
                    let mut b = [0u8; 8];
                    b[8 - r.len()..].copy_from_slice(&buf[r]);
                    b
                })
            };
            let (kind, seq, sent) = (field(0..4) as u32, field(4..8) as u32, field(8..16));
            match kind {
                DATA if seq < DATAGRAMS => {
                    let first = !std::mem::replace(&mut seen[seq as usize], true);
                    distinct += usize::from(first);
                    out.push(Arrival {
                        seq,
                        delay_ms: (now - sent) as f64 / 1e6,
                    });
                }
                END if self.close == Close::AtEndMarker => break,
                _ => continue,
            }
            if self.close == Close::AllArrived && distinct == DATAGRAMS as usize {
                break;
            }
        }
        done.store(true, Ordering::SeqCst);
        out
    }
}

/// Sends the test's datagrams through every way at once, paced at `GAP`,
/// then end markers until every way has closed: what each received.
fn run(ways: &[Way]) -> Vec<Vec<Arrival>> {
    for w in ways {
        w.warm_up();
    }
    let done: Vec<AtomicBool> = ways.iter().map(|_| AtomicBool::new(false)).collect();
    std::thread::scope(|s| {
        let receivers: Vec<_> = ways
            .iter()
            .zip(&done)
            .map(|(w, d)| s.spawn(move || w.receive(d)))
            .collect();
        let t0 = Instant::now();
        for seq in 0..DATAGRAMS {
            // Paced, not waited on: late wake-ups send the next ones at once.
            let at = t0 + GAP * seq;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            for w in ways {
                let _ = w.tx.send(&datagram(DATA, seq));
            }
        }
        // End markers, lost like the rest, until every way has closed.
        let all_closed = || done.iter().all(|d| d.load(Ordering::SeqCst));
        poll(BOUND * 2, || {
            for (w, d) in ways.iter().zip(&done) {
                if w.close == Close::AtEndMarker && !d.load(Ordering::SeqCst) {
                    let _ = w.tx.send(&datagram(END, 0));
                }
            }
            all_closed().then_some(())
        });
        receivers
            .into_iter()
            .map(|r| r.join().expect("a receiver"))
            .collect()
    })
}

/// What one way did to the test's datagrams.
#[derive(Debug)]
struct Seen {
    what: String,
    /// Datagrams that never arrived, and those that arrived twice.
    lost: u64,
    twice: u64,
    /// First arrivals, and those of them that overtook a datagram sent
    /// before them (jumped the delay line).
    arrived: u64,
    ahead: u64,
    /// One-way delays of every arrival, sorted.
    delays_ms: Vec<f64>,
}

impl Seen {
    fn of(what: &str, arrivals: &[Arrival]) -> Seen {
        let mut count = vec![0u32; DATAGRAMS as usize];
        let mut firsts = Vec::new();
        for a in arrivals {
            count[a.seq as usize] += 1;
            if count[a.seq as usize] == 1 {
                firsts.push(a.seq);
            }
        }
        // A first arrival is ahead when a datagram sent before it arrives
        // after it: the smallest sequence number still to come is smaller.
        let mut ahead = 0;
        let mut smallest_later = u32::MAX;
        for &seq in firsts.iter().rev() {
            ahead += u64::from(smallest_later < seq);
            smallest_later = smallest_later.min(seq);
        }
        let mut delays_ms: Vec<f64> = arrivals.iter().map(|a| a.delay_ms).collect();
        delays_ms.sort_by(f64::total_cmp);
        Seen {
            what: what.to_string(),
            lost: count.iter().filter(|&&c| c == 0).count() as u64,
            twice: count.iter().filter(|&&c| c >= 2).count() as u64,
            arrived: firsts.len() as u64,
            ahead,
            delays_ms,
        }
    }

    fn max_ms(&self) -> f64 {
        self.delays_ms.last().copied().unwrap_or(f64::NAN)
    }

    fn min_ms(&self) -> f64 {
        self.delays_ms.first().copied().unwrap_or(f64::NAN)
    }

    fn median_ms(&self) -> f64 {
        self.delays_ms
            .get(self.delays_ms.len() / 2)
            .copied()
            .unwrap_or(f64::NAN)
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: lost {}, twice {}, ahead {} of {} arrived; one way min {:.2} median {:.2} max {:.2} ms",
            self.what,
            self.lost,
            self.twice,
            self.ahead,
            self.arrived,
            self.min_ms(),
            self.median_ms(),
            self.max_ms()
        )
    }
}

/// `x1` of `n1` against `x2` of `n2`: within `SIGMAS` standard deviations of
/// their difference (two binomial draws of one pooled share), or why not.
fn shares_agree(what: &str, (x1, n1): (u64, u64), (x2, n2): (u64, u64)) -> Result<(), String> {
    let (p1, p2) = (x1 as f64 / n1 as f64, x2 as f64 / n2 as f64);
    let p = (x1 + x2) as f64 / (n1 + n2) as f64;
    let sd = (p * (1.0 - p) * (1.0 / n1 as f64 + 1.0 / n2 as f64)).sqrt();
    eprintln!(
        "{what}: relay {x1}/{n1} = {:.2} %, netem {x2}/{n2} = {:.2} %, allowed apart {:.2} %",
        100.0 * p1,
        100.0 * p2,
        100.0 * SIGMAS * sd
    );
    if (p1 - p2).abs() <= SIGMAS * sd {
        Ok(())
    } else {
        Err(format!(
            "{what}: the relay's {:.2} % and netem's {:.2} % are more than {SIGMAS} standard deviations ({:.2} %) apart",
            100.0 * p1,
            100.0 * p2,
            100.0 * sd
        ))
    }
}

/// The share `x` of `n` shows an impairment of `percent` was applied: within
/// half and one and a half times it (far wider than the draw's spread).
fn applied(what: &str, x: u64, n: u64, percent: f64) {
    let share = 100.0 * x as f64 / n as f64;
    assert!(
        (0.5 * percent..=1.5 * percent).contains(&share),
        "{what}: {share:.2} % where {percent} % was asked for"
    );
}

/// Two namespaces of the test's own joined by a veth pair (eth0 each side,
/// 198.18.85.1 and .2), each end's egress given to netem as `netem`'s
/// lines say; removed on drop.
struct NetemPair {
    left: String,
    right: String,
}

impl NetemPair {
    fn new(name: &str, left_to_right: &str, right_to_left: &str) -> NetemPair {
        let pair = NetemPair {
            left: format!("{name}-left"),
            right: format!("{name}-right"),
        };
        let ip = |args: &[&str]| {
            let o = Command::new(program("ip")).args(args).output().expect("ip");
            assert!(o.status.success(), "ip {}: {}", args.join(" "), text(&o));
        };
        for ns in [&pair.left, &pair.right] {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n",
            &pair.left,
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &pair.right,
        ]);
        for (ns, addr, netem) in [
            (&pair.left, "198.18.85.1/24", left_to_right),
            (&pair.right, "198.18.85.2/24", right_to_left),
        ] {
            ip(&["-n", ns, "addr", "add", addr, "dev", "eth0"]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            netns::tc::run(ns, &format!("qdisc add dev eth0 root netem {netem}\n"))
                .unwrap_or_else(|e| panic!("netem in {ns}: {e}"));
            // As a lab steers a shaped link: one flow, one CPU, its order kept.
            netns::steer::by_flow(ns, "eth0").unwrap_or_else(|e| panic!("{e}"));
        }
        pair
    }
}

impl Drop for NetemPair {
    fn drop(&mut self) {
        for ns in [&self.left, &self.right] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Frames the TAP `tap` in namespace `ns` dropped before its reader took
/// them: its own count and its queueing discipline's.
fn dropped_at(ns: &str, tap: &str) -> u64 {
    let json = |cmd: &[&str]| -> serde_json::Value {
        let o = Command::new(program("ip"))
            .args(["netns", "exec", ns])
            .args(cmd)
            .output()
            .expect("ip netns exec");
        assert!(o.status.success(), "{cmd:?} in {ns}: {}", text(&o));
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    let link = json(&["ip", "-s", "-j", "link", "show", "dev", tap]);
    let qdiscs = json(&["tc", "-s", "-j", "qdisc", "show", "dev", tap]);
    let root = qdiscs
        .as_array()
        .and_then(|q| q.iter().find(|q| q["root"] == true))
        .map_or(0, |q| q["drops"].as_u64().unwrap_or(0));
    link[0]["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0) + root
}

/// The lab's topology: the same impairments as netem's lines, on the link
/// relay.
fn relay_topology(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("refs.toml");
    let text = format!(
        r#"name = "refs"
[nodes.left]
kind = "host"
[nodes.right]
kind = "host"
[[links]]
a = {{ port = "left:eth0", ipv4 = "198.18.84.1/24" }}
b = {{ port = "right:eth0", ipv4 = "198.18.84.2/24" }}
impairments.a_to_b = {{ delay = "{DELAY_MS}ms", loss = {LOSS}, duplicate = {DUPLICATE} }}
impairments.b_to_a = {{ delay = "{DELAY_MS}ms", reorder = {REORDER} }}
"#
    );
    std::fs::write(&file, text).expect("writing the topology");
    file
}

/// The four ways through the lab `lab`'s relay and through `netem`: each
/// emulation left to right (loss and duplicates, in order) and back
/// (reordering, losing nothing).
fn four_ways(lab: &str, netem: &NetemPair) -> [Way; 4] {
    let (l, r) = (&format!("{lab}-left"), &format!("{lab}-right"));
    let (nl, nr) = (&netem.left, &netem.right);
    let (fifo, all) = (Close::AtEndMarker, Close::AllArrived);
    [
        Way::new("relay left->right", l, r, "198.18.84.2", fifo),
        Way::new("netem left->right", nl, nr, "198.18.85.2", fifo),
        Way::new("relay right->left", r, l, "198.18.84.1", all),
        Way::new("netem right->left", nr, nl, "198.18.85.1", all),
    ]
}

/// What `seen` says of the four ways (`four_ways`), `starved` the frames
/// each of the relay's TAPs dropped before it could read them: the shares
/// agree, each impairment was applied, no delay was shortened, and
/// reordering lost nothing.
fn judge(seen: &[Seen], starved: [u64; 2]) {
    let n = u64::from(DATAGRAMS);
    let (relay, net, relay_back, net_back) = (&seen[0], &seen[1], &seen[2], &seen[3]);
    // The relay's trials are the frames it read.
    let (relay_lost, relay_n) = (relay.lost - starved[0], n - starved[0]);
    let disagree: Vec<String> = [
        shares_agree("loss", (relay_lost, relay_n), (net.lost, n)),
        shares_agree("duplicates", (relay.twice, relay_n), (net.twice, n)),
        shares_agree(
            "reordered",
            (relay_back.ahead, relay_back.arrived),
            (net_back.ahead, net_back.arrived),
        ),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    for (s, lost, trials) in [(relay, relay_lost, relay_n), (net, net.lost, n)] {
        applied(&format!("{}: loss", s.what), lost, trials, LOSS);
        applied(
            &format!("{}: duplicates", s.what),
            s.twice,
            trials,
            DUPLICATE,
        );
        assert!(
            s.min_ms() >= DELAY_MS as f64,
            "{}: a datagram arrived {:.2} ms after it was sent, sooner than the {DELAY_MS} ms delay",
            s.what,
            s.min_ms()
        );
    }
    for (s, dropped) in [(relay_back, starved[1]), (net_back, 0)] {
        assert_eq!(
            s.lost, dropped,
            "{}: reordering loses nothing, and {dropped} frames were dropped before the emulation",
            s.what
        );
        applied(
            &format!("{}: reordered", s.what),
            s.ahead,
            s.arrived,
            REORDER,
        );
    }
}

#[test]
fn the_link_relay_loses_duplicates_reorders_and_delays_as_netem_does() {
    crate::kernel::stock_kernel();
    let began = Instant::now();
    let lab = lab_name("ikrelay");
    let dir = tempfile::tempdir().unwrap();
    // The netem pair is built while the lab comes up: both are a few seconds
    // of `ip` and `tc` on an emulated CPU.
    let (netem, _lab) = std::thread::scope(|s| {
        let netem = s.spawn(|| {
            NetemPair::new(
                &lab_name("iknetem"),
                &format!("delay {DELAY_MS}ms loss {LOSS}% duplicate {DUPLICATE}%"),
                &format!("delay {DELAY_MS}ms reorder {REORDER}%"),
            )
        });
        let lab = up_named(&relay_topology(dir.path()), &lab);
        (netem.join().expect("building the netem pair"), lab)
    });
    let built = began.elapsed().as_secs_f64();
    let relay = format!("{lab}-link.0");
    // Every device a test datagram is received on, the relay's sides
    // included, steered by flow: one flow, one CPU backlog, its order kept.
    for (ns, dev) in [
        (&format!("{lab}-left"), "eth0"),
        (&format!("{lab}-right"), "eth0"),
        (&relay, "ra"),
        (&relay, "rb"),
    ] {
        netns::steer::by_flow(ns, dev).unwrap_or_else(|e| panic!("{e}"));
    }
    let ways = four_ways(&lab, &netem);
    let taps = || [dropped_at(&relay, "tap-ab"), dropped_at(&relay, "tap-ba")];
    let before = taps();
    let sending = Instant::now();
    let got = run(&ways);
    // Frames the relay never read (its TAP's queue full while it was starved
    // of CPU) met none of its draws: they are not its trials.
    let after = taps();
    let starved = [after[0] - before[0], after[1] - before[1]];
    let sent_in = sending.elapsed().as_secs_f64();
    let seen: Vec<Seen> = ways
        .iter()
        .zip(&got)
        .map(|(w, a)| Seen::of(&w.what, a))
        .collect();
    for s in &seen {
        eprintln!("{s}");
    }
    eprintln!(
        "frames the relay's TAPs dropped unread: {starved:?}; lab and netem pair built in \
         {built:.1} s, datagrams sent and received in {sent_in:.1} s; the test took {:.1} s",
        began.elapsed().as_secs_f64()
    );
    judge(&seen, starved);
}

/// The rates of tests/fixtures/impair/cake.toml, which the VM's emulated
/// CPUs carry with room to spare on a host as loaded as the suite loads it
/// (there TCP at 20 Mbit/s fell under half its goodput, and at 10 Mbit/s
/// came within a fifth of that floor).
const LEFT_TO_RIGHT: f64 = 8e6;
const RIGHT_TO_LEFT: f64 = 3e6;

/// The most CAKE lets through beyond its rate: it has no bucket, and a frame
/// leaves once the frames before it have had their time, so over any span it
/// passes the span's worth of its rate and one frame (a full frame's bytes on
/// an Ethernet wire, 1538).
const CAKE_BURST: f64 = 1538.0 * 8.0;

/// The qdiscs on eth0 of `LAB-NODE`, as `tc` shows them.
fn qdisc(lab: &str, node: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-{node}")])
        .args(["tc", "qdisc", "show", "dev", "eth0"])
        .output()
        .expect("tc qdisc show");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn cake_shapes_a_link_to_its_rate_each_way_for_tcp_and_udp() {
    crate::kernel::stock_kernel();
    let lab = lab_name("ikcake");
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/impair/cake.toml");
    let _g = up_named(&file, &lab);
    // CAKE, not TBF, on each sending end, charging Ethernet's framing.
    for (node, rate) in [("left", "8Mbit"), ("right", "3Mbit")] {
        let q = qdisc(&lab, node);
        assert!(
            q.contains("qdisc cake 1: root")
                && q.contains(&format!("bandwidth {rate}"))
                && q.contains("split-gso")
                && q.contains("overhead 38 mpu 84")
                && !q.contains("tbf"),
            "{node}: {q}"
        );
    }
    let v4 = Family::Ipv4;
    assert_rate(
        "TCP left->right through CAKE at 8M",
        REACHED * tcp_goodput(LEFT_TO_RIGHT, v4),
        |secs| shaped_most(LEFT_TO_RIGHT, CAKE_BURST, secs) * tcp_goodput(1.0, v4),
        || {
            receiver_rate(&engine_json(
                &lab,
                "left",
                "right",
                "198.18.86.2",
                5401,
                &["-t", "3"],
            ))
        },
    );
    // UDP offered above the rate: CAKE drops what it cannot pass.
    let args = ["-t", "3", "-u", "-b", "4500K", "-l", "1400"];
    assert_rate(
        "UDP right->left through CAKE at 3M",
        REACHED * udp_goodput(RIGHT_TO_LEFT, 1400.0, v4),
        |secs| shaped_most(RIGHT_TO_LEFT, CAKE_BURST, secs) * udp_goodput(1.0, 1400.0, v4),
        || {
            receiver_rate(&engine_json(
                &lab,
                "right",
                "left",
                "198.18.86.1",
                5402,
                &args,
            ))
        },
    );
    // `tunbench impair --rate` keeps the direction's shaper.
    let o = tunbench(&[
        "impair",
        &lab,
        "left:eth0",
        "--rate",
        "5M",
        "--direction",
        "out",
    ]);
    assert!(o.status.success(), "impair: {}", text(&o));
    let q = qdisc(&lab, "left");
    assert!(
        q.contains("qdisc cake 1: root") && q.contains("bandwidth 5Mbit"),
        "{q}"
    );
}
