//! Links between hosts at the kernel layer: two machines emulated on this
//! one (tests/emulated), each building its own part of a lab with the netns
//! crate, joined by one point-to-point VXLAN link (`Op::Vxlan`, VNI 100)
//! over an underlay of MTU 1500: MTU 1450 over IPv4 underlay addresses,
//! 1430 over IPv6. Traffic passes both ways over IPv4 and IPv6, a packet of
//! the link's MTU with DF passes and one a byte longer does not, an MTU that
//! does not fit is refused before anything is built, and each host's
//! `down`, or `clean` after its builder was killed with SIGKILL, leaves
//! nothing on it. Needs root (CI runs as root).
//!
//! The lab code runs on a host as a process of its own: this test binary,
//! run again under `nsenter --net --mount` with XH_WORKER saying what to do
//! (the `host_worker` test), as `tunbench` will run on each real host.

mod emulated;

use emulated::{Host, Hosts, UNDERLAY_IF, UNDERLAY_MTU};
use netns::ops::VXLAN_PORT;
use netns::{Cancel, Op, Phase, Plan};
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The lab, its node's namespace and the node's cross-host port: the same
/// names on every host, which each host keeps apart in its own /run.
const LAB: &str = "xh";
const NODE_NS: &str = "xh-n";
const PORT: &str = "xhost0";
const VNI: u32 = 100;

/// The family of the hosts' underlay addresses the link runs over.
#[derive(Clone, Copy)]
enum Underlay {
    V4,
    V6,
}

impl Underlay {
    fn addr(self, h: &Host) -> IpAddr {
        match self {
            Underlay::V4 => IpAddr::V4(h.underlay),
            Underlay::V6 => IpAddr::V6(h.underlay6),
        }
    }

    /// The largest link MTU over the 1500-byte underlay: less VXLAN's 50
    /// bytes over IPv4, 70 over IPv6 (physics, not netns::ops).
    fn link_mtu(self) -> u32 {
        match self {
            Underlay::V4 => UNDERLAY_MTU - 50,
            Underlay::V6 => UNDERLAY_MTU - 70,
        }
    }
}

/// How long a condition is waited for: far above what a loaded machine needs.
const BOUND: Duration = Duration::from_secs(20);

/// One host's part: its node, and the node's end of the link to `far`.
fn part(me: &Host, far: &Host, k: u8, under: Underlay) -> Plan {
    let ns = NODE_NS.to_string();
    let addr = |a: &str| Op::Address {
        ns: ns.clone(),
        iface: PORT.into(),
        addr: a.parse().unwrap(),
    };
    Plan {
        lab: LAB.into(),
        host: Some(me.name.clone()),
        nodes: vec![("n".into(), ns.clone(), "host".into())],
        ops: vec![
            Op::Namespace {
                ns: ns.clone(),
                marker: netns::apply::marker(LAB),
                sysctls: Vec::new(),
            },
            Op::Vxlan {
                ns: ns.clone(),
                name: PORT.into(),
                vni: VNI,
                local: under.addr(me),
                remote: under.addr(far),
                port: VXLAN_PORT,
                underlay: Some(UNDERLAY_IF.into()),
                mtu: under.link_mtu(),
            },
            addr(&format!("198.18.231.{k}/24")),
            addr(&format!("2001:2:0:231::{k}/64")),
        ],
    }
}

/// What a worker is asked to do on its host.
#[derive(serde::Serialize, serde::Deserialize)]
enum Work {
    /// Build the part; the result is `up`'s error, if any.
    Up(Plan),
    /// Build the part and stop after the links phase until killed.
    UpAndHang(Plan),
    Down(String),
    Clean,
}

const RESULT: &str = "XH-RESULT ";
const HANGING: &str = "XH-HANGING";

/// The worker: does what XH_WORKER says in the host it was started in, and
/// prints the outcome as JSON on a line of its own. Without XH_WORKER (a
/// normal test run) it does nothing.
#[test]
fn host_worker() {
    let Ok(spec) = std::env::var("XH_WORKER") else {
        return;
    };
    let work: Work = serde_json::from_str(&spec).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let no_progress = |_: Phase, _: usize| {};
    let out = match work {
        Work::Up(plan) => {
            let r = rt.block_on(netns::up(&plan, None, &Cancel::new(), &no_progress, false));
            serde_json::json!(r.err().map(|e| e.to_string()))
        }
        Work::UpAndHang(plan) => {
            let hang = |ph: Phase, _: usize| {
                if ph == Phase::Links {
                    println!("{HANGING}");
                    std::thread::sleep(Duration::from_secs(120));
                }
            };
            let r = rt.block_on(netns::up(&plan, None, &Cancel::new(), &hang, false));
            serde_json::json!(r.err().map(|e| e.to_string()))
        }
        Work::Down(lab) => serde_json::json!(rt.block_on(netns::down(&lab)).unwrap()),
        Work::Clean => serde_json::json!(rt.block_on(netns::clean())),
    };
    println!("{RESULT}{out}");
}

/// Run `work` on `host` in a worker; its outcome.
fn on(host: &Host, work: &Work) -> serde_json::Value {
    let o = worker(host, work)
        .stdout(Stdio::piped())
        .output()
        .expect("running a worker");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let Some(line) = stdout.lines().find_map(|l| Some(l.split_once(RESULT)?.1)) else {
        panic!(
            "the worker on {} gave no result: {}{}",
            host.name,
            stdout,
            String::from_utf8_lossy(&o.stderr)
        );
    };
    serde_json::from_str(line).unwrap()
}

fn worker(host: &Host, work: &Work) -> std::process::Command {
    let me = std::env::current_exe().unwrap();
    let mut c = host.command(me.to_str().unwrap());
    c.args(["--exact", "host_worker", "--nocapture", "--test-threads=1"])
        .env("XH_WORKER", serde_json::to_string(work).unwrap());
    c
}

/// `ping ARGS` from the node on `host`: whether an echo came back.
fn ping(host: &Host, args: &[&str]) -> Result<(), String> {
    let o = host
        .command("ip")
        .args(["netns", "exec", NODE_NS, "ping", "-c1", "-W1"])
        .args(args)
        .output()
        .expect("running ping (iputils-ping)");
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}

/// Ping until one echo is answered, within BOUND; the last failure if none.
fn pings(host: &Host, args: &[&str]) {
    let until = Instant::now() + BOUND;
    loop {
        match ping(host, args) {
            Ok(()) => return,
            Err(e) if Instant::now() > until => {
                panic!(
                    "no answer on {} to ping {args:?} within {BOUND:?}: {e}",
                    host.name
                )
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether ping said its packet did not fit a link of `mtu` ("mtu=1450"
/// for IPv4, "mtu: 1450" for IPv6).
fn too_long(ping_output: &str, mtu: u32) -> bool {
    ping_output.contains("message too long") && ping_output.contains(&mtu.to_string())
}

/// Nothing of the lab on `host`: no namespace, no VXLAN device in its own
/// namespace, no record.
fn assert_nothing_on(host: &Host) {
    assert_eq!(host.namespaces(), Vec::<String>::new(), "on {}", host.name);
    assert_eq!(
        host.vxlan_devices(),
        Vec::<String>::new(),
        "on {}",
        host.name
    );
    let o = host
        .command("ls")
        .args(["-A", "/run/tunbench"])
        .output()
        .unwrap();
    let records = String::from_utf8_lossy(&o.stdout);
    assert!(
        records.trim().is_empty(),
        "records left on {}: {records}",
        host.name
    );
}

/// Nothing of the lab on this machine itself: the hosts' namespaces, records
/// and devices never appear here.
fn assert_nothing_here() {
    assert!(
        !netns::namespace::exists(NODE_NS),
        "{NODE_NS} in this machine's /run/netns"
    );
    assert!(
        !netns::state::LabState::dir(LAB).exists(),
        "lab {LAB} recorded on this machine"
    );
    let o = std::process::Command::new("ip")
        .args(["-j", "link", "show", "type", "vxlan"])
        .output()
        .unwrap();
    let here = emulated::vxlan_devices(&String::from_utf8_lossy(&o.stdout));
    assert!(
        !here.contains(&PORT.to_string()),
        "{PORT} in this machine's namespace"
    );
}

/// The node's port on `host`, as `ip -d -j link` shows it.
fn port_details(host: &Host) -> serde_json::Value {
    let j = host.ip(&["-n", NODE_NS, "-d", "-j", "link", "show", PORT]);
    serde_json::from_str::<serde_json::Value>(&j).unwrap()[0].clone()
}

/// The node's port on `me` is the VXLAN device asked for, to `far`; it is in
/// the node, its socket in the host: none is in the host's namespace.
fn assert_port_made(me: &Host, far: &Host, under: Underlay) {
    assert_eq!(me.namespaces(), vec![NODE_NS.to_string()]);
    assert_eq!(me.vxlan_devices(), Vec::<String>::new(), "on {}", me.name);
    let d = port_details(me);
    let x = &d["linkinfo"]["info_data"];
    let (mtu, vni) = (d["mtu"].as_u64(), x["id"].as_u64());
    let want = (Some(under.link_mtu().into()), Some(VNI.into()));
    assert_eq!((mtu, vni), want, "{d}");
    assert_eq!(x["learning"], false, "{d}");
    assert_eq!(x["port"].as_u64(), Some(VXLAN_PORT.into()), "{d}");
    let (local, remote) = (under.addr(me).to_string(), under.addr(far).to_string());
    // iproute2 names them local6 and remote6 for IPv6.
    let six = if matches!(under, Underlay::V6) {
        "6"
    } else {
        ""
    };
    let got = (&x[format!("local{six}")], &x[format!("remote{six}")]);
    assert_eq!(got, (&local.into(), &remote.clone().into()), "{d}");
    // `remote` alone gives the all-zeros entry `bridge fdb append` would.
    let fdb = me
        .command("bridge")
        .args(["-n", NODE_NS, "fdb", "show", "dev", PORT])
        .output()
        .unwrap();
    let fdb = String::from_utf8_lossy(&fdb.stdout);
    let entry = format!("00:00:00:00:00:00 dst {remote} ");
    assert!(
        fdb.contains(&entry),
        "on {}: no default entry to the far host: {fdb}",
        me.name
    );
}

/// A link over `under` between two hosts: traffic both ways in both
/// families, a packet of the link's MTU with DF passes and one byte more
/// does not, and each host's `down` leaves nothing on it.
fn carried_and_removed(under: Underlay) {
    let hosts = Hosts::new(2);
    let (a, b) = (&hosts.hosts[0], &hosts.hosts[1]);
    for (me, far, k) in [(a, b, 1), (b, a, 2)] {
        let err = on(me, &Work::Up(part(me, far, k, under)));
        assert!(err.is_null(), "up on {}: {err}", me.name);
    }
    for (me, far) in [(a, b), (b, a)] {
        assert_port_made(me, far, under);
    }
    assert_nothing_here();
    // Each host's /sys is its own: its underlay interface, not this machine's.
    let mtu_file = format!("/sys/class/net/{UNDERLAY_IF}/mtu");
    let o = a.command("cat").arg(&mtu_file).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        UNDERLAY_MTU.to_string()
    );
    let mtu = under.link_mtu();
    let fits = |hdr: u32| (mtu - hdr).to_string();
    let over = |hdr: u32| (mtu - hdr + 1).to_string();
    for (me, v4, v6) in [
        (a, "198.18.231.2", "2001:2:0:231::2"),
        (b, "198.18.231.1", "2001:2:0:231::1"),
    ] {
        pings(me, &[v4]);
        pings(me, &[v6]);
        // ICMP echo: 28 bytes of headers over IPv4, 48 over IPv6.
        pings(me, &["-M", "do", "-s", &fits(28), v4]);
        pings(me, &["-M", "do", "-s", &fits(48), v6]);
        let e = ping(me, &["-M", "do", "-s", &over(28), v4]).expect_err("MTU + 1 with DF passed");
        assert!(too_long(&e, mtu), "{e}");
        let e = ping(me, &["-M", "do", "-s", &over(48), v6]).expect_err("MTU + 1 passed");
        assert!(too_long(&e, mtu), "{e}");
    }
    // The kernel agrees: one byte more does not fit the 1500-byte underlay.
    let o = a
        .command("ip")
        .args([
            "-n",
            NODE_NS,
            "link",
            "set",
            PORT,
            "mtu",
            &(mtu + 1).to_string(),
        ])
        .output()
        .unwrap();
    assert!(!o.status.success(), "MTU {} was accepted", mtu + 1);

    again_at_once_while_the_old_namespace_lives(a, b, under);
    for me in [a, b] {
        let r = on(me, &Work::Down(LAB.into()));
        assert_eq!(
            r["namespaces"],
            serde_json::json!([NODE_NS]),
            "down on {}: {r}",
            me.name
        );
        assert_eq!(
            r["problems"],
            serde_json::json!([]),
            "down on {}: {r}",
            me.name
        );
        assert_nothing_on(me);
    }
    assert_nothing_here();
}

/// `down` and at once `up` again on `me`, while a process holds the old
/// node namespace open, as the kernel does for a while after deleting one:
/// its VXLAN device must be gone with `down` (had it stayed in that
/// namespace, its VNI and port would still be taken, EEXIST).
fn again_at_once_while_the_old_namespace_lives(me: &Host, far: &Host, under: Underlay) {
    let hold = format!("exec 3</run/netns/{NODE_NS} && echo held && exec sleep 120");
    let mut holder = me
        .command("bash")
        .args(["-c", &hold])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the holder");
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held", "the holder did not open {NODE_NS}");
    let r = on(me, &Work::Down(LAB.into()));
    assert_eq!(
        r["problems"],
        serde_json::json!([]),
        "down on {}: {r}",
        me.name
    );
    let err = on(me, &Work::Up(part(me, far, 1, under)));
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(err.is_null(), "up again on {}: {err}", me.name);
}

#[test]
fn a_vxlan_link_over_an_ipv4_underlay_carries_both_families_and_leaves_nothing() {
    carried_and_removed(Underlay::V4);
}

#[test]
fn a_vxlan_link_over_an_ipv6_underlay_carries_both_families_and_leaves_nothing() {
    carried_and_removed(Underlay::V6);
}

#[test]
fn a_part_whose_builder_was_killed_is_removed_by_clean_on_its_host() {
    let hosts = Hosts::new(2);
    let (a, b) = (&hosts.hosts[0], &hosts.hosts[1]);
    let mut child = worker(a, &Work::UpAndHang(part(a, b, 1, Underlay::V4)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(HANGING) {
                let _ = tx.send(());
            }
        }
    });
    let hanging = rx.recv_timeout(BOUND);
    // nsenter execs the worker: this is SIGKILL to the builder itself.
    let _ = child.kill();
    let _ = child.wait();
    hanging.expect("the worker never finished its links phase");
    assert_eq!(a.namespaces(), vec![NODE_NS.to_string()]);
    let d = port_details(a);
    assert_eq!(d["linkinfo"]["info_kind"], "vxlan", "{d}");
    assert_eq!(a.vxlan_devices(), Vec::<String>::new());
    // The record on the host, written before anything was made, still says
    // the build is under way, by a builder that is gone.
    let o = a
        .command("cat")
        .arg(format!("/run/tunbench/{LAB}/state.json"))
        .output()
        .unwrap();
    let record: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("the killed build left no record: {e}"));
    assert_eq!(record["status"], "building", "{record}");
    assert_eq!(record["nodes"][0]["namespace"], NODE_NS, "{record}");

    let r = on(a, &Work::Clean);
    let removed = r.as_array().unwrap();
    assert_eq!(removed.len(), 1, "{r}");
    assert_eq!(removed[0]["lab"], LAB, "{r}");
    assert_eq!(
        removed[0]["namespaces"],
        serde_json::json!([NODE_NS]),
        "{r}"
    );
    assert_eq!(removed[0]["problems"], serde_json::json!([]), "{r}");
    // No process to stop: SIGKILL reached the builder itself (nsenter
    // execs the worker rather than forking it).
    assert_eq!(removed[0]["processes"], 0, "{r}");
    assert_nothing_on(a);
    assert_nothing_on(b);
    assert_nothing_here();
}

#[test]
fn a_link_mtu_the_underlay_cannot_carry_is_refused_and_nothing_is_left() {
    let hosts = Hosts::new(2);
    let (a, b) = (&hosts.hosts[0], &hosts.hosts[1]);
    let mut p = part(a, b, 1, Underlay::V6);
    for op in &mut p.ops {
        if let Op::Vxlan { mtu, .. } = op {
            *mtu += 1;
        }
    }
    let err = on(a, &Work::Up(p));
    let err = err
        .as_str()
        .expect("MTU 1431 over an IPv6 underlay of 1500 was built");
    let why =
        "MTU 1431 plus VXLAN's 70 bytes exceeds u0's MTU 1500; the link's MTU may be at most 1430";
    assert!(err.contains(why), "{err}");
    assert!(err.contains("nothing was built"), "{err}");
    assert_nothing_on(a);
    assert_nothing_here();
}
