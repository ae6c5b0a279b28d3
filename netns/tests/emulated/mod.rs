//! Machines emulated on this one, for tests of labs split over several hosts.
//!
//! Each host is a network namespace with a mount namespace of its own, held
//! by a `sleep` started under `unshare --net --mount --propagation private`
//! after it mounted a fresh tmpfs on /run and a sysfs of its own: the host
//! has its own /run/netns and /run/tunbench, so a lab built inside it is
//! listed, recorded and cleaned there only, and /sys/class/net lists its
//! own interfaces. A program runs "on" a host under `nsenter --target
//! HOLDER --net --mount`: a whole process in both namespaces (a process that
//! is not single-threaded cannot enter a mount namespace itself), so the
//! namespaces it makes are bound under the host's /run/netns and stay there,
//! held by the host's mount namespace, after it exits. The hosts' underlay
//! is a Linux bridge in a namespace of its own (held the same way), each host
//! joined to it by a veth `u0` with MTU 1500 (or the one asked for) and
//! addresses of 198.18.230.0/24 and 2001:2:0:230::/64, sending at most
//! [`UNDERLAY_RATE`]: no test judges the underlay's speed, and a measurement
//! across an unshaped veth costs both cores for every second it runs.
//!
//! Dropping `Hosts` kills the holders: with no process left in a host's
//! mount namespace, its bind mounts go, and with them every namespace (and
//! device) built on it. Nothing is ever named in this machine's /run/netns.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a holder may take to say it is ready.
const READY_BOUND: Duration = Duration::from_secs(20);

/// The underlay's MTU unless asked otherwise, as on an Ethernet between real
/// machines.
pub const UNDERLAY_MTU: u32 = 1500;

/// The underlay interface of every host.
pub const UNDERLAY_IF: &str = "u0";

/// Each host's sending rate on the underlay (a token bucket on `u0`).
pub const UNDERLAY_RATE: &str = "100mbit";

/// A process that holds a network and a mount namespace open.
struct Holder(Child);

impl Holder {
    /// A holder whose /run is a fresh tmpfs with an empty netns directory,
    /// and whose /sys shows its own network namespace's devices.
    fn start() -> Holder {
        let script = "mount -t tmpfs -o mode=755 tunbench-emulated-host /run \
                      && mkdir /run/netns && mount -t sysfs sysfs /sys \
                      && ip link set lo up && echo ready && exec sleep infinity";
        let mut child = Command::new("unshare")
            .args(["--net", "--mount", "--propagation", "private", "--"])
            .args(["sh", "-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting an emulated host (unshare, from util-linux)");
        let out = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let holder = Holder(child);
        match rx.recv_timeout(READY_BOUND) {
            Ok(l) if l.trim() == "ready" => holder,
            other => panic!("an emulated host did not get ready within {READY_BOUND:?}: {other:?}"),
        }
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One emulated machine.
pub struct Host {
    pub name: String,
    /// Its addresses on the underlay (interface `u0`).
    pub underlay: Ipv4Addr,
    pub underlay6: Ipv6Addr,
    holder: Holder,
}

impl Host {
    /// `program args...` run on this host: in its network and mount namespaces.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--target={}", self.holder.pid()))
            .args(["--net", "--mount", "--"])
            .arg(program);
        c
    }

    /// `ip ARGS` on this host; panics naming the host when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        let o = self.command("ip").args(args).output().expect("running ip");
        ok(&self.name, &o, args)
    }

    /// The namespaces under this host's /run/netns.
    pub fn namespaces(&self) -> Vec<String> {
        self.ip(&["netns", "list"])
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(String::from))
            .collect()
    }

    /// The VXLAN devices in this host's own network namespace.
    pub fn vxlan_devices(&self) -> Vec<String> {
        vxlan_devices(&self.ip(&["-j", "link", "show", "type", "vxlan"]))
    }
}

/// Device names of an `ip -j link show` answer.
pub fn vxlan_devices(json: &str) -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("ip -j output: {e}: {json}"));
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ifname"].as_str().map(String::from))
        .collect()
}

fn ok(host: &str, o: &Output, args: &[&str]) -> String {
    assert!(
        o.status.success(),
        "on {host}: ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// N emulated hosts on one underlay bridge.
pub struct Hosts {
    pub hosts: Vec<Host>,
    /// The MTU of the bridge and of every `u0`.
    mtu: u32,
    /// Declared after the hosts: dropped last.
    _underlay: Holder,
}

impl Hosts {
    /// `n` hosts named h1..hN, at 198.18.230.1..N and 2001:2:0:230::1..N
    /// on the underlay.
    pub fn new(n: u8) -> Hosts {
        Hosts::with_mtu(n, UNDERLAY_MTU)
    }

    /// `Hosts::new` on an underlay of MTU `mtu`.
    pub fn with_mtu(n: u8, mtu: u32) -> Hosts {
        let underlay = Holder::start();
        let mut hosts = Vec::new();
        for k in 1..=n {
            let host = Host {
                name: format!("h{k}"),
                underlay: Ipv4Addr::new(198, 18, 230, k),
                underlay6: Ipv6Addr::new(0x2001, 2, 0, 0x230, 0, 0, 0, k.into()),
                holder: Holder::start(),
            };
            hosts.push(host);
        }
        let h = Hosts {
            hosts,
            mtu,
            _underlay: underlay,
        };
        h.wire();
        h
    }

    /// The bridge, and each host's `u0` on it, addressed and up.
    fn wire(&self) {
        let u = self._underlay.pid().to_string();
        let mtu = self.mtu.to_string();
        let on_underlay = |args: &[&str]| {
            let o = Command::new("nsenter")
                .args([&format!("--target={u}"), "--net", "--", "ip"])
                .args(args)
                .output()
                .expect("running ip");
            ok("the underlay", &o, args);
        };
        on_underlay(&["link", "add", "br0", "mtu", &mtu, "type", "bridge"]);
        on_underlay(&["link", "set", "br0", "up"]);
        for h in &self.hosts {
            let port = format!("to-{}", h.name);
            let pid = h.holder.pid().to_string();
            let args = [
                "link",
                "add",
                UNDERLAY_IF,
                "netns",
                &pid,
                "mtu",
                &mtu,
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                &u,
                "mtu",
                &mtu,
            ];
            let o = Command::new("ip").args(args).output().expect("running ip");
            ok("this machine", &o, &args);
            on_underlay(&["link", "set", &port, "master", "br0", "up"]);
            let addr = format!("{}/24", h.underlay);
            h.ip(&["addr", "add", &addr, "dev", UNDERLAY_IF]);
            let addr6 = format!("{}/64", h.underlay6);
            h.ip(&["addr", "add", &addr6, "dev", UNDERLAY_IF, "nodad"]);
            h.ip(&["link", "set", UNDERLAY_IF, "up"]);
            let shape = [
                "qdisc",
                "add",
                "dev",
                UNDERLAY_IF,
                "root",
                "tbf",
                "rate",
                UNDERLAY_RATE,
                "burst",
                "32kb",
                "latency",
                "50ms",
            ];
            let o = h.command("tc").args(shape).output().expect("running tc");
            ok(&h.name, &o, &shape);
        }
    }
}
