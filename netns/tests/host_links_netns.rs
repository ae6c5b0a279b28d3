//! Host interfaces in a lab, at the kernel layer: macvlan, ipvlan,
//! VLAN and moved interfaces made, passing traffic, and removed or given back
//! exactly; a moved interface given back after `up` was killed with SIGKILL;
//! the refusals, with nothing recorded or made.
//!
//! No interface of this machine is touched: each test builds with `ip` a
//! namespace that plays the host (`hlh-PID-TAG`) holding veths named like NICs
//! (enp1s0, ...) whose other ends sit in a far namespace (`hlf-PID-TAG`), and
//! runs the lab code on a thread inside the host-playing namespace. A guard
//! takes the labs down and deletes the namespaces even when a test fails.
//! Needs root (CI runs as root).

use netns::features::Feature;
use netns::state::{LabState, Status};
use netns::{Cancel, HostAttach, LabError, Op, Phase, Plan};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn sh(args: &[&str]) -> String {
    run(args).unwrap_or_else(|e| panic!("{e}"))
}

/// The host-playing and far namespaces of one test, and the labs it builds.
struct World {
    tag: String,
    host: String,
    far: String,
    labs: Vec<String>,
}

impl World {
    fn new(tag: &str) -> World {
        let pid = std::process::id();
        let w = World {
            tag: tag.into(),
            host: format!("hlh-{pid}-{tag}"),
            far: format!("hlf-{pid}-{tag}"),
            labs: Vec::new(),
        };
        for ns in [&w.host, &w.far] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        w
    }

    /// A lab name of this test (names start with `hl`).
    fn lab(&mut self, n: u32) -> String {
        let lab = format!("hl{}{}{n}", self.tag, std::process::id());
        self.labs.push(lab.clone());
        lab
    }

    /// A "NIC" of the host: a veth whose other end `far_name` is in the far namespace, both up.
    fn nic(&self, name: &str, far_name: &str) {
        sh(&[
            "ip", "-n", &self.host, "link", "add", name, "type", "veth", "peer", "name", far_name,
            "netns", &self.far,
        ]);
        sh(&["ip", "-n", &self.host, "link", "set", name, "up"]);
        sh(&["ip", "-n", &self.far, "link", "set", far_name, "up"]);
        // The carrier comes a moment later, from the kernel's link watcher: a
        // snapshot taken before it would differ from one taken after `down`.
        assert!(
            eventually(BOUND, || {
                let l = json(&self.ip_host(&["-j", "link", "show", name]));
                l[0]["operstate"] == "UP"
            }),
            "{name} has no carrier"
        );
    }

    fn ip_host(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "-n", &self.host];
        v.extend(args);
        sh(&v)
    }

    fn ip_far(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "-n", &self.far];
        v.extend(args);
        sh(&v)
    }

    /// Run `f` on a thread inside the host-playing namespace, with a
    /// current-thread runtime: there, the lab code's "host" is that namespace.
    fn in_host<T: Send>(&self, f: impl FnOnce(&tokio::runtime::Runtime) -> T + Send) -> T {
        in_ns(&self.host, f)
    }

    fn up(&self, plan: &Plan, force: bool) -> Result<(), LabError> {
        self.in_host(|rt| rt.block_on(netns::up(plan, None, &Cancel::new(), &|_, _| {}, force)))
    }

    fn down(&self, lab: &str) -> netns::Removed {
        self.in_host(|rt| rt.block_on(netns::down(lab)))
            .unwrap_or_else(|e| panic!("down {lab}: {e}"))
    }

    /// The host's interfaces, as `ip -j link` shows them (without counters).
    fn host_links(&self) -> serde_json::Value {
        json(&self.ip_host(&["-j", "link", "show"]))
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for lab in &self.labs {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = self.in_host(|rt| rt.block_on(netns::down(lab)));
            }));
            let _ = run(&["ip", "netns", "del", &format!("{lab}-n")]);
            let _ = LabState::remove(lab);
        }
        for ns in [&self.host, &self.far] {
            let _ = run(&["ip", "netns", "del", ns]);
        }
    }
}

fn in_ns<T: Send>(ns: &str, f: impl FnOnce(&tokio::runtime::Runtime) -> T + Send) -> T {
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            netns::namespace::enter(ns).expect("entering the host-playing namespace");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            f(&rt)
        });
        worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A lab of one node whose device eth0 is made from the host's `host`, with `addr`.
fn plan(lab: &str, host: &str, attach: HostAttach, mtu: u32, addr: &str) -> Plan {
    let ns = format!("{lab}-n");
    Plan {
        lab: lab.into(),
        host: None,
        nodes: vec![("n".into(), ns.clone(), "host".into())],
        ops: vec![
            Op::Namespace {
                ns: ns.clone(),
                marker: netns::apply::marker(lab),
                sysctls: Vec::new(),
            },
            Op::HostLink {
                ns: ns.clone(),
                name: "eth0".into(),
                host: host.into(),
                attach,
                mtu,
            },
            Op::Address {
                ns,
                iface: "eth0".into(),
                addr: addr.parse().unwrap(),
            },
        ],
    }
}

/// Ping from namespace `ns` until one echo is answered, for up to 20 s (the
/// first may wait for ARP; a loaded machine may answer late).
fn pings(ns: &str, to: &str) -> bool {
    eventually(BOUND, || {
        run(&["ip", "netns", "exec", ns, "ping", "-c1", "-W1", to]).is_ok()
    })
}

/// How long a condition is waited for: far above what a loaded machine needs.
const BOUND: u64 = 20;

/// Wait until `f` holds, up to `secs`.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A macvlan, ipvlan or VLAN device: made in the node, traffic to the far end,
/// gone after `down`, with the host interface as it was.
fn attached(tag: &str, attach: HostAttach) {
    let mut w = World::new(tag);
    w.nic("enp1s0", "far1");
    let before = w.host_links();
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp1s0", attach, 1500, "198.18.40.1/24");
    if let Some(missing) = kernel_lacks(&w, attach) {
        // This kernel has no such driver: `up` says so, by name, before it
        // makes anything.
        let e = w.up(&p, false).expect_err("up without the driver");
        assert!(e.to_string().contains(&missing), "{e}");
        assert!(
            e.to_string().contains("nothing was recorded or made"),
            "{e}"
        );
        assert!(LabState::load(&lab).unwrap().is_none());
        assert!(!netns::namespace::exists(&node));
        assert_eq!(w.host_links(), before);
        eprintln!("note: {missing}: the {attach} datapath was not exercised on this kernel");
        return;
    }
    let (far_dev, far_addr) = match attach {
        HostAttach::Vlan(id) => {
            let dev = format!("far1.{id}");
            w.ip_far(&[
                "link",
                "add",
                "link",
                "far1",
                "name",
                &dev,
                "type",
                "vlan",
                "id",
                &id.to_string(),
            ]);
            w.ip_far(&["link", "set", &dev, "up"]);
            (dev, "198.18.40.2")
        }
        _ => ("far1".to_string(), "198.18.40.2"),
    };
    w.ip_far(&["addr", "add", "198.18.40.2/24", "dev", &far_dev]);
    w.up(&p, false).unwrap_or_else(|e| panic!("up: {e}"));
    let dev = json(&sh(&[
        "ip", "-n", &node, "-d", "-j", "link", "show", "eth0",
    ]));
    let kind = dev[0]["linkinfo"]["info_kind"].as_str().unwrap_or_default();
    assert_eq!(
        kind,
        match attach {
            HostAttach::Macvlan => "macvlan",
            HostAttach::Ipvlan => "ipvlan",
            _ => "vlan",
        },
        "{dev}"
    );
    assert!(
        dev[0]["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "UP"),
        "{dev}"
    );
    assert_eq!(dev[0]["mtu"], 1500);
    assert!(
        pings(&node, far_addr),
        "no traffic from {node} to {far_addr}"
    );
    let state = LabState::load(&lab).unwrap().unwrap();
    assert_eq!(state.host_links.len(), 1);
    assert_eq!(state.host_links[0].attach, attach);
    assert!(state.host_links[0].moved.is_none());
    assert!(state.host_netns.is_some());

    let r = w.down(&lab);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.namespaces, [node.as_str()]);
    assert!(!netns::namespace::exists(&node));
    // The device went with its namespace: nothing answers for the node's
    // address any more, and the host's interface is as it was.
    assert!(
        eventually(BOUND, || run(&[
            "ip",
            "netns",
            "exec",
            &w.far,
            "ping",
            "-c1",
            "-W1",
            "198.18.40.1"
        ])
        .is_err()),
        "198.18.40.1 still answers after down"
    );
    assert!(
        eventually(BOUND, || w.host_links() == before),
        "host interfaces changed:\nbefore {before}\nafter {}",
        w.host_links()
    );
    assert!(LabState::load(&lab).unwrap().is_none());
}

/// The driver `attach` needs, named as `up`'s refusal names it, when this
/// kernel lacks it: probed by making one in the test's own host namespace.
fn kernel_lacks(w: &World, attach: HostAttach) -> Option<String> {
    let (kind, missing): (&[&str], _) = match attach {
        HostAttach::Ipvlan => (&["ipvlan", "mode", "l2"], Feature::Ipvlan),
        HostAttach::Vlan(_) => (&["vlan", "id", "99"], Feature::Vlan),
        _ => (&["macvlan", "mode", "bridge"], Feature::Macvlan),
    };
    let missing = missing.lacking();
    let mut probe = vec![
        "ip", "-n", &w.host, "link", "add", "link", "enp1s0", "name", "probe0", "type",
    ];
    probe.extend(kind);
    match run(&probe) {
        Ok(_) => {
            sh(&["ip", "-n", &w.host, "link", "del", "probe0"]);
            None
        }
        Err(e) if e.contains("Unknown device type") => Some(missing),
        Err(e) => panic!("probing for the driver: {e}"),
    }
}

#[test]
fn a_macvlan_on_a_host_interface_carries_traffic_and_goes_with_its_node() {
    attached("mv", HostAttach::Macvlan);
}

#[test]
fn an_ipvlan_on_a_host_interface_carries_traffic_and_goes_with_its_node() {
    attached("iv", HostAttach::Ipvlan);
}

#[test]
fn a_vlan_of_a_host_interface_carries_traffic_and_goes_with_its_node() {
    attached("vl", HostAttach::Vlan(11));
}

/// A NIC with state to give back: MTU, IPv4 and IPv6 addresses, a route of
/// each family, changed sysctls.
fn nic_with_state(w: &World, name: &str, far: &str, net: u8) {
    w.nic(name, far);
    w.ip_host(&["link", "set", name, "mtu", "1400"]);
    w.ip_far(&["link", "set", far, "mtu", "1400"]);
    let a = |h: u8| format!("198.18.{net}.{h}/24");
    let a6 = |h: u8| format!("2001:2:0:{net}::{h}/64");
    w.ip_host(&["addr", "add", &a(1), "dev", name]);
    w.ip_host(&["addr", "add", &a6(1), "dev", name, "nodad"]);
    w.ip_far(&["addr", "add", &a(2), "dev", far]);
    w.ip_far(&["addr", "add", &a6(2), "dev", far, "nodad"]);
    let via = format!("198.18.{net}.2");
    let via6 = format!("2001:2:0:{net}::2");
    w.ip_host(&[
        "route",
        "add",
        &format!("198.18.{}.0/24", net + 1),
        "via",
        &via,
        "dev",
        name,
    ]);
    w.ip_host(&[
        "-6",
        "route",
        "add",
        &format!("2001:2:0:{}::/64", net + 1),
        "via",
        &via6,
        "dev",
        name,
    ]);
    for (k, v) in [
        (format!("net.ipv4.conf.{name}.rp_filter"), "2"),
        (format!("net.ipv6.conf.{name}.hop_limit"), "33"),
    ] {
        sh(&[
            "ip",
            "netns",
            "exec",
            &w.host,
            "sysctl",
            "-qw",
            &format!("{k}={v}"),
        ]);
    }
}

/// Once duplicate address detection is over (no address tentative), so that
/// a snapshot taken now is the interface's steady state.
fn settled(w: &World, dev: &str) {
    let done = eventually(BOUND, || {
        !w.ip_host(&["-j", "addr", "show", "dev", dev])
            .contains("tentative")
    });
    assert!(done, "{dev}'s addresses stay tentative");
}

/// Everything of a host interface `down` must give back, as `ip -j` and
/// /proc/sys show it (addresses sorted; the kernel orders them by scope).
fn snapshot(w: &World, dev: &str) -> String {
    let mut link = json(&w.ip_host(&["-j", "link", "show", "dev", dev]));
    let mut addr = json(&w.ip_host(&["-j", "addr", "show", "dev", dev]));
    if let Some(infos) = addr[0]["addr_info"].as_array_mut() {
        infos.sort_by_key(|a| a["local"].to_string());
    }
    // The kernel attaches a device's qdisc when it is set up, and a device that
    // changed namespace shows `noop` until then: one given back down keeps
    // `noop` (tunbench does not set a down NIC up just for that).
    let down = !link[0]["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "UP"));
    if down {
        for v in [&mut link, &mut addr] {
            if let Some(o) = v[0].as_object_mut() {
                o.remove("qdisc");
            }
        }
    }
    let r4 = json(&w.ip_host(&["-j", "route", "show", "dev", dev]));
    let r6 = json(&w.ip_host(&["-j", "-6", "route", "show", "dev", dev]));
    let script =
        format!("cd /proc/sys/net && grep -r . ipv4/conf/{dev} ipv6/conf/{dev} 2>/dev/null | sort");
    let sysctls = run(&["ip", "netns", "exec", &w.host, "sh", "-c", &script]).unwrap_or_default();
    format!("link {link}\naddr {addr}\nroute {r4}\nroute6 {r6}\nsysctls\n{sysctls}")
}

fn host_has(w: &World, dev: &str) -> bool {
    run(&["ip", "-n", &w.host, "link", "show", "dev", dev]).is_ok()
}

fn assert_given_back(w: &World, dev: &str, before: &str) {
    let same = eventually(BOUND, || snapshot(w, dev) == before);
    assert!(
        same,
        "{dev} not given back as it was:\n--- before\n{before}\n--- after\n{}",
        snapshot(w, dev)
    );
}

#[test]
fn a_moved_interface_carries_traffic_and_is_given_back_exactly() {
    let mut w = World::new("mo");
    nic_with_state(&w, "enp2s0", "far2", 41);
    settled(&w, "enp2s0");
    let before = snapshot(&w, "enp2s0");
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp2s0", HostAttach::Move, 1400, "198.18.41.10/24");
    // It carries global addresses: taken only with force.
    w.up(&p, true).unwrap_or_else(|e| panic!("up: {e}"));
    assert!(!host_has(&w, "enp2s0"), "enp2s0 still in the host");
    let dev = json(&sh(&["ip", "-n", &node, "-j", "link", "show", "eth0"]));
    assert_eq!(dev[0]["mtu"], 1400);
    assert!(
        pings(&node, "198.18.41.2"),
        "no traffic from {node} to the far end"
    );
    let rec = LabState::load(&lab).unwrap().unwrap().host_links;
    let moved = rec[0].moved.as_ref().expect("the host state is recorded");
    assert_eq!(
        (moved.name.as_str(), moved.mtu, moved.up),
        ("enp2s0", 1400, true)
    );
    assert!(
        moved
            .addresses
            .iter()
            .any(|a| a.addr.to_string() == "198.18.41.1/24")
    );
    assert!(
        moved
            .addresses
            .iter()
            .any(|a| a.addr.to_string() == "2001:2:0:41::1/64")
    );
    assert_eq!(moved.routes.len(), 2, "{:?}", moved.routes);
    assert!(
        moved
            .sysctls
            .iter()
            .any(|(k, v)| k == "net.ipv4.conf.enp2s0.rp_filter" && v == "2")
    );

    let r = w.down(&lab);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.returned.len(), 1, "{r:?}");
    assert!(!netns::namespace::exists(&node));
    assert_given_back(&w, "enp2s0", &before);
    assert!(LabState::load(&lab).unwrap().is_none());
}

#[test]
fn a_moved_interface_that_was_down_comes_back_down() {
    let mut w = World::new("dn");
    w.nic("enp9s0", "far9");
    w.ip_far(&["addr", "add", "198.18.39.2/24", "dev", "far9"]);
    w.ip_host(&["addr", "add", "198.18.39.1/24", "dev", "enp9s0"]);
    w.ip_host(&["link", "set", "enp9s0", "down"]);
    let conf = "net.ipv4.conf.enp9s0.arp_ignore=1";
    sh(&["ip", "netns", "exec", &w.host, "sysctl", "-qw", conf]);
    let before = snapshot(&w, "enp9s0");
    assert!(!before.contains("\"UP\""), "{before}");
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp9s0", HostAttach::Move, 1500, "198.18.39.10/24");
    w.up(&p, true).unwrap_or_else(|e| panic!("up: {e}"));
    // Up in the node, like any device of a lab.
    assert!(pings(&node, "198.18.39.2"), "no traffic from {node}");
    let r = w.down(&lab);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.returned.len(), 1, "{r:?}");
    assert_given_back(&w, "enp9s0", &before);
}

/// The child of the kill -9 tests: builds the lab it is given and stops after
/// the phase it is given (Namespaces: before the move; Links: after it), until
/// killed. Without HL_KILL9_CHILD (a normal test run) it does nothing.
#[test]
fn kill_9_child() {
    let Ok(spec) = std::env::var("HL_KILL9_CHILD") else {
        return;
    };
    let (host, plan, links): (String, Plan, bool) = serde_json::from_str(&spec).unwrap();
    let stop = if links {
        Phase::Links
    } else {
        Phase::Namespaces
    };
    in_ns(&host, |rt| {
        let progress = |ph: Phase, _: usize| {
            if ph == stop {
                println!("HL-STOPPED");
                use std::io::Write;
                let _ = std::io::stdout().flush();
                std::thread::sleep(Duration::from_secs(120));
            }
        };
        let _ = rt.block_on(netns::up(&plan, None, &Cancel::new(), &progress, false));
    });
}

/// Build a lab moving `enp3s0` in a child process, SIGKILL it after the move
/// (`after_move`) or just before it, then `tunbench clean LAB` (`down` of the
/// lab): the interface is back in the host exactly as it was.
fn killed_then_cleaned(tag: &str, after_move: bool) {
    let mut w = World::new(tag);
    w.nic("enp3s0", "far3");
    w.ip_host(&["link", "set", "enp3s0", "mtu", "1450"]);
    let conf = "net.ipv4.conf.enp3s0.rp_filter=2";
    sh(&["ip", "netns", "exec", &w.host, "sysctl", "-qw", conf]);
    w.ip_far(&["addr", "add", "198.18.43.2/24", "dev", "far3"]);
    settled(&w, "enp3s0");
    let before = snapshot(&w, "enp3s0");
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp3s0", HostAttach::Move, 1500, "198.18.43.1/24");
    let spec = serde_json::to_string(&(&w.host, &p, after_move)).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill_9_child", "--nocapture", "--test-threads=1"])
        .env("HL_KILL9_CHILD", spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.contains("HL-STOPPED") {
                let _ = tx.send(());
            }
        }
    });
    let stopped = rx.recv_timeout(Duration::from_secs(30));
    // SIGKILL, whatever happened: no `up` survives this test.
    let _ = child.kill();
    let _ = child.wait();
    stopped.expect("the child never got there");
    assert_eq!(!host_has(&w, "enp3s0"), after_move, "moved: {after_move}");
    let s = LabState::load(&lab)
        .unwrap()
        .expect("the record survives the kill");
    assert_eq!(s.status, Status::Building);
    assert!(s.host_links[0].moved.is_some(), "recorded before the move");
    if after_move {
        sh(&["ip", "-n", &node, "link", "show", "dev", "eth0"]);
    }

    let r = w.down(&lab);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.returned.len(), 1, "{r:?}");
    let from = if after_move {
        node.as_str()
    } else {
        "the host"
    };
    assert!(r.returned[0].contains(from), "{r:?}");
    assert_given_back(&w, "enp3s0", &before);
    assert!(!netns::namespace::exists(&node));
    assert!(LabState::load(&lab).unwrap().is_none());
}

#[test]
fn a_moved_interface_is_given_back_by_clean_after_kill_9() {
    killed_then_cleaned("k9", true);
}

#[test]
fn an_interface_not_yet_moved_when_up_is_killed_is_left_as_it_was() {
    killed_then_cleaned("k8", false);
}

/// A refused `up` left nothing: no record, no namespace, the host as it was.
fn refused(w: &World, p: &Plan, force: bool, expect: &[&str]) {
    let before = w.host_links();
    let e = w.up(p, force).expect_err("up was not refused");
    let LabError::HostRefused(r) = &e else {
        panic!("not a refusal: {e}")
    };
    let text = e.to_string();
    for x in expect {
        assert!(text.contains(x), "{x:?} not in:\n{text}");
    }
    assert!(!r.problems.is_empty());
    assert!(
        LabState::load(&p.lab).unwrap().is_none(),
        "a record was written"
    );
    assert!(
        !LabState::dir(&p.lab).exists(),
        "a state directory was left"
    );
    assert!(
        !netns::namespace::exists(&p.nodes[0].1),
        "a namespace was made"
    );
    assert_eq!(w.host_links(), before, "the host changed");
}

#[test]
fn unsafe_or_missing_host_interfaces_are_refused_with_nothing_made() {
    let mut w = World::new("rf");
    // The host's default route goes out of enp4s0; enp5s0 has a global address.
    w.nic("enp4s0", "far4");
    w.ip_host(&["route", "add", "default", "dev", "enp4s0"]);
    w.nic("enp5s0", "far5");
    w.ip_host(&["addr", "add", "198.18.45.1/24", "dev", "enp5s0"]);
    w.ip_far(&["addr", "add", "198.18.45.2/24", "dev", "far5"]);
    let lab = w.lab(1);
    refused(
        &w,
        &plan(&lab, "enp4s0", HostAttach::Move, 1500, "198.18.44.1/24"),
        false,
        &[
            "enp4s0 (for ",
            ":eth0, moved)",
            "default route `default dev enp4s0 (IPv4, table main)`",
            "--force",
        ],
    );
    refused(
        &w,
        &plan(&lab, "enp5s0", HostAttach::Macvlan, 1500, "198.18.45.10/24"),
        false,
        &["enp5s0", "global (management) address 198.18.45.1/24"],
    );
    refused(
        &w,
        &plan(&lab, "enp9s0", HostAttach::Macvlan, 1500, "198.18.49.1/24"),
        true,
        &["enp9s0", "no such interface", "enp4s0", "enp5s0"],
    );
    // A bridge port: never moved, not even with --force.
    w.nic("enp6s0", "far6");
    w.ip_host(&["link", "add", "br0", "type", "bridge"]);
    w.ip_host(&["link", "set", "enp6s0", "master", "br0"]);
    refused(
        &w,
        &plan(&lab, "enp6s0", HostAttach::Move, 1500, "198.18.46.1/24"),
        true,
        &[
            "enp6s0",
            "a port of br0 in the host; moving it would take it out of br0",
        ],
    );
    // --force takes them anyway.
    for (iface, addr, far) in [
        ("enp4s0", "198.18.44.1/24", None),
        ("enp5s0", "198.18.45.10/24", Some("198.18.45.2")),
    ] {
        let p = plan(&lab, iface, HostAttach::Macvlan, 1500, addr);
        w.up(&p, true)
            .unwrap_or_else(|e| panic!("up --force on {iface}: {e}"));
        if let Some(far) = far {
            assert!(pings(&p.nodes[0].1, far));
        }
        let r = w.down(&lab);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

#[test]
fn an_interface_another_lab_moved_is_refused() {
    let mut w = World::new("rg");
    w.nic("enp6s0", "far6");
    let first = w.lab(1);
    let second = w.lab(2);
    w.up(
        &plan(&first, "enp6s0", HostAttach::Move, 1500, "198.18.46.1/24"),
        false,
    )
    .unwrap_or_else(|e| panic!("up: {e}"));
    for force in [false, true] {
        refused(
            &w,
            &plan(
                &second,
                "enp6s0",
                HostAttach::Macvlan,
                1500,
                "198.18.46.3/24",
            ),
            force,
            &[&format!(
                "already taken by lab {first}: moved into its namespace {first}-n as eth0"
            )],
        );
    }
    // A lab that lost the race for it (its move failed after both checked)
    // has it in its record too: its `down` leaves it to the holder.
    let mut loser = LabState::load(&first).unwrap().unwrap();
    loser.lab = second.clone();
    loser.nodes[0].namespace = format!("{second}-n");
    loser.host_links[0].ns = format!("{second}-n");
    loser.status = Status::Building;
    loser.save().unwrap();
    let r = w.down(&second);
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains(&format!(
            "not given back: lab {first} holds it (moved into {first}-n as eth0)"
        )),
        "{}",
        r.problems[0]
    );
    assert!(LabState::load(&second).unwrap().is_none());
    sh(&["ip", "-n", &format!("{first}-n"), "link", "show", "eth0"]);
    let r = w.down(&first);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert!(host_has(&w, "enp6s0"));
}

#[test]
fn a_return_that_fails_keeps_the_namespace_and_record_for_a_retry() {
    let mut w = World::new("rt");
    w.nic("enp7s0", "far7");
    w.ip_far(&["addr", "add", "198.18.47.2/24", "dev", "far7"]);
    settled(&w, "enp7s0");
    let before = snapshot(&w, "enp7s0");
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp7s0", HostAttach::Move, 1500, "198.18.47.1/24");
    w.up(&p, false).unwrap_or_else(|e| panic!("up: {e}"));
    // Something else takes the name in the host meanwhile: the interface cannot
    // go back under it, so its namespace and record stay.
    w.ip_host(&[
        "link", "add", "enp7s0", "type", "veth", "peer", "name", "squat",
    ]);
    let r = w.down(&lab);
    assert!(r.returned.is_empty(), "{r:?}");
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains(&format!(
            "giving back host interface enp7s0 (moved into {node} as eth0)"
        )) && r.problems[0].contains(&format!("left {node} and the record in place")),
        "{}",
        r.problems[0]
    );
    assert!(!r.namespaces.contains(&node));
    assert!(netns::namespace::exists(&node));
    let kept = LabState::load(&lab).unwrap().expect("the record is kept");
    assert_eq!(kept.host_links.len(), 1);
    assert_eq!(kept.namespaces().collect::<Vec<_>>(), [node.as_str()]);
    // Once the name is free again, the next `down` (`clean LAB`) gives it back.
    w.ip_host(&["link", "del", "enp7s0"]);
    let r = w.down(&lab);
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.returned.len(), 1, "{r:?}");
    assert_given_back(&w, "enp7s0", &before);
    assert!(!netns::namespace::exists(&node));
    assert!(LabState::load(&lab).unwrap().is_none());
}

#[test]
fn a_host_namespace_that_is_gone_is_reported_and_the_record_kept() {
    let mut w = World::new("hg");
    w.nic("enp8s0", "far8");
    let lab = w.lab(1);
    let node = format!("{lab}-n");
    let p = plan(&lab, "enp8s0", HostAttach::Move, 1500, "198.18.48.1/24");
    w.up(&p, false).unwrap_or_else(|e| panic!("up: {e}"));
    sh(&["ip", "netns", "del", &w.host]);
    // `down` from another namespace: the host's cannot be found anywhere.
    let r = in_ns(&w.far, |rt| rt.block_on(netns::down(&lab))).unwrap();
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains("cannot give back host interface enp8s0")
            && r.problems[0].contains(&format!("(namespace {}) is gone", w.host)),
        "{}",
        r.problems[0]
    );
    assert!(netns::namespace::exists(&node));
    assert!(LabState::load(&lab).unwrap().is_some());
}
