//! Shared by the end-to-end tests: run the binary, name labs uniquely, and a
//! guard that takes a lab down even when the test fails or panics.
#![allow(dead_code)]

pub mod pty;
pub mod shaped;
pub mod traffic;
pub mod wait;

#[allow(unused_imports)] // the areas without tunnels or host links
pub use traffic::traffic_both_ways;
pub use wait::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Debian package of each program the tests run besides tunbench.
pub const PACKAGES: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("nsenter", "util-linux"),
    ("ping", "iputils-ping"),
    ("tshark", "tshark"),
    ("iperf3", "iperf3"),
    ("irtt", "irtt"),
    ("wg", "wireguard-tools"),
    ("wireguard-go", "wireguard-go"),
    ("swanctl", "strongswan-swanctl"),
    ("sshd", "openssh-server"),
    ("ssh-keygen", "openssh-client"),
    ("ssh", "openssh-client"),
];

/// `name`, once it is known to be on PATH. A missing program fails the test
/// naming its package, instead of surfacing as a misleading "no ping through
/// the tunnel" (or, worse, passing a test that expects a command to fail).
pub fn program(name: &'static str) -> &'static str {
    if let Err(e) = find_program(name, &std::env::var_os("PATH").unwrap_or_default()) {
        panic!("{e}");
    }
    name
}

/// Whether `name` is an executable file in one of the directories of `path`;
/// if not, what to install.
pub fn find_program(name: &str, path: &std::ffi::OsStr) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let found = std::env::split_paths(path).any(|d| {
        std::fs::metadata(d.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    });
    if found {
        return Ok(());
    }
    let package = PACKAGES
        .iter()
        .find(|(p, _)| *p == name)
        .map_or("its package", |(_, pkg)| pkg);
    Err(format!(
        "{name} is not installed, and this test runs it: install Debian's {package} (bash scripts/setup.sh does)"
    ))
}

/// One ping from `LAB-NODE` (one echo, 1 s to answer), `args` after the
/// defaults (the target last), as it ran.
pub fn ping_output(lab: &str, node: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &format!("{lab}-{node}")])
        .args([program("ping"), "-c", "1", "-W", "1"])
        .args(args)
        .output()
        .expect("running ip netns exec ... ping")
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tunbench")
}

pub fn topo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies")
        .join(name)
}

pub fn tunbench(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("running tunbench")
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A lab name unique to this test and this process: concurrent runs never collide.
pub fn lab_name(tag: &str) -> String {
    format!("t{tag}{}", std::process::id() % 100000)
}

/// Namespaces whose name starts with `prefix`.
pub fn namespaces(prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn state_dir(lab: &str) -> PathBuf {
    Path::new("/run/tunbench").join(lab)
}

/// Kills (SIGKILL) and reaps the child on drop: a process a test started
/// must not outlive a failed test.
pub struct KillOnDrop(pub std::process::Child);

impl KillOnDrop {
    /// Whether the process has ended (reaping it when it has).
    pub fn ended(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(Some(_)))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Takes the lab down on drop, whatever happened in the test.
pub struct LabGuard(pub String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = tunbench(&["down", &self.0]);
        // Last resort, so a broken `down` cannot leak into later tests.
        for ns in namespaces(&format!("{}-", self.0)) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
    }
}

/// Asserts nothing of the lab remains: namespaces, state, host-side devices.
pub fn assert_gone(lab: &str) {
    assert_eq!(
        namespaces(&format!("{lab}-")),
        Vec::<String>::new(),
        "namespaces of {lab} left behind"
    );
    assert!(
        !state_dir(lab).exists(),
        "state directory of {lab} left behind"
    );
    let host_links = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip link");
    let host_links = String::from_utf8_lossy(&host_links.stdout);
    assert!(
        !host_links.contains(&format!("tunbench.{lab}")),
        "a marked device of {lab} is in the host namespace"
    );
}

pub fn up(file: &Path, lab: &str) -> (LabGuard, Output) {
    let g = LabGuard(lab.to_string());
    let o = tunbench(&["up", file.to_str().unwrap(), "--name", lab]);
    (g, o)
}

/// `tunbench up` of a generated chain of `nodes`, slowed between phases so a test
/// can interrupt or kill it midway; returns once every namespace exists.
pub fn slow_up_of_chain(lab: &str, nodes: usize, dir: &Path) -> std::process::Child {
    let file = dir.join("chain.toml");
    let g = tunbench(&[
        "gen",
        "chain",
        "--nodes",
        &nodes.to_string(),
        "--name",
        lab,
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(g.status.success(), "{}", text(&g));
    let child = Command::new(bin())
        .args(["up", file.to_str().unwrap()])
        .env("TUNBENCH_TEST_PHASE_DELAY_MS", "500")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting tunbench up");
    wait_until(
        &format!("up of {lab} made all {nodes} namespaces"),
        BOUND,
        || namespaces(&format!("{lab}-")).len() >= nodes,
    );
    child
}

/// Runs `f` on a thread inside namespace `ns` and returns what it returns.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::namespace::enter(&ns).expect("entering namespace");
        f()
    })
    .join()
    .expect("namespace thread")
}

/// An int socket option set; the test fails if the kernel refuses it.
pub fn setsockopt_int(fd: i32, level: i32, opt: i32, v: i32) {
    // SAFETY: a valid socket and a c_int-sized option.
    let r = unsafe { libc::setsockopt(fd, level, opt, &v as *const _ as *const libc::c_void, 4) };
    assert_eq!(r, 0, "setsockopt {level}/{opt}");
}

/// An int socket option's value.
pub fn getsockopt_int(fd: i32, level: i32, opt: i32) -> i32 {
    let mut v: libc::c_int = 0;
    let mut len: libc::socklen_t = 4;
    // SAFETY: a valid socket and a c_int-sized buffer.
    unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    v
}

/// A port free for TCP and UDP right now (a server still has to win it: see
/// `spawn_listening`).
pub fn free_port() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("[::]:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("::", port)).is_ok() {
            return port;
        }
    }
}

/// Starts the server `make(port)` builds on a free port and returns once that
/// very process listens there. Tests in one binary run in parallel: two can be
/// handed the same free port, and a probe connection would then reach the
/// other test's server while ours failed to bind. So the listener must belong
/// to our child; if the child exits (lost the port), it starts again on another.
pub fn spawn_listening(make: impl Fn(u16) -> std::process::Command) -> (std::process::Child, u16) {
    wait_for("a server listening on a free port", BOUND, || {
        let port = free_port();
        let mut child = make(port).spawn().expect("starting the server");
        // Ours once it listens; gone (another test won the port) means try again.
        let ours = wait_for("the server to listen or exit", BOUND, || {
            if listens(&child, port) {
                Some(true)
            } else {
                child.try_wait().unwrap().map(|_| false)
            }
        });
        ours.then_some((child, port))
    })
}

/// `tunbench up FILE --name LAB`, asserted to work; the guard takes it down.
pub fn up_named(file: &Path, lab: &str) -> LabGuard {
    let g = LabGuard(lab.to_string());
    let o = tunbench(&["up", file.to_str().unwrap(), "--name", lab]);
    assert!(o.status.success(), "up failed: {}", text(&o));
    g
}

/// Whether process `pid` has ended: gone, or a zombie that whoever adopted it
/// has not reaped yet.
pub fn process_ended(pid: i64) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// Waits for `f` to hold (stats files are rewritten every second).
pub fn eventually(what: &str, f: impl FnMut() -> bool) {
    wait_until(what, BOUND, f)
}

/// Captures one packet matching `filter` on `LAB-NODE`'s eth0 with tshark into
/// `pcap`, calling `poke` (which should make such a packet) until it has one.
pub fn capture_one(lab: &str, node: &str, filter: &str, pcap: &Path, poke: impl FnMut()) {
    capture_one_on(lab, node, "eth0", filter, pcap, poke)
}

/// `capture_one` on another interface.
pub fn capture_one_on(
    lab: &str,
    node: &str,
    iface: &str,
    filter: &str,
    pcap: &Path,
    mut poke: impl FnMut(),
) {
    use std::process::Stdio;
    let cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{lab}-{node}"),
            program("tshark"),
            "-q",
            "-i",
            iface,
        ])
        .args(["-c", "1", "-F", "pcap", "-w"])
        .arg(pcap)
        .args(["-f", filter])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark");
    let mut cap = KillOnDrop(cap);
    wait_until_capturing(&mut cap.0);
    wait_until(
        &format!("tshark captured a packet for {filter}"),
        BOUND,
        || {
            let done = cap.0.try_wait().unwrap().is_some();
            if !done {
                poke();
            }
            done
        },
    );
}

/// How long tshark may take to start capturing: its start-up (thousands of
/// dissectors, Lua) is seconds of CPU, stretched many times on a loaded core.
const TSHARK_START_BOUND: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits for tshark (`cap`, its stderr piped) to say "Capture started": its
/// filter is live from then on, so what is sent after is captured. The rest
/// of its stderr is drained, so tshark never blocks on a full pipe.
pub fn wait_until_capturing(cap: &mut std::process::Child) {
    use std::io::BufRead;
    let err = cap.stderr.take().expect("tshark's stderr piped");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            // Once the test stopped listening, the rest is only drained.
            let _ = tx.send(l);
        }
    });
    let t0 = std::time::Instant::now();
    let mut said = Vec::new();
    loop {
        let left = TSHARK_START_BOUND.saturating_sub(t0.elapsed());
        match lines.recv_timeout(left) {
            // "Capturing on 'eth0'" comes first; the filter is live at "Capture started".
            Ok(l) if l.contains("Capture started") => return,
            Ok(l) => said.push(l),
            Err(e) => panic!(
                "tshark did not say \"Capture started\" within {TSHARK_START_BOUND:?} ({e}); it said:\n{}",
                said.join("\n")
            ),
        }
    }
}

/// The frames of a classic pcap file (Ethernet, as captured).
pub fn frames(pcap: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 24;
    while off + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[off + 8..off + 12].try_into().unwrap()) as usize;
        out.push(pcap[off + 16..(off + 16 + caplen).min(pcap.len())].to_vec());
        off += 16 + caplen;
    }
    out
}

/// The UDP payloads of the Ethernet/IPv4 frames in a classic pcap file.
pub fn udp_payloads(pcap: &[u8]) -> Vec<Vec<u8>> {
    frames(pcap)
        .into_iter()
        .filter(|f| f.len() >= 14 + 20 + 8 && f[12..14] == [0x08, 0x00] && f[23] == 17)
        .map(|f| {
            let ihl = ((f[14] & 0x0f) as usize) * 4;
            f[14 + ihl + 8..].to_vec()
        })
        .collect()
}

/// One ping from `LAB-NODE` (one echo, 1 s to answer), `args` after the
/// defaults (the target last): whether it was answered.
pub fn ping_from(lab: &str, node: &str, args: &[&str]) -> bool {
    ping_output(lab, node, args).status.success()
}

/// Whether a ping from `LAB-NODE` (`args`, the target last) is answered
/// within `BOUND`: one echo at a time, each given 1 s, until one is. A first
/// packet may wait for a handshake or a neighbour, and a loaded machine may
/// answer late; only a path that never carries the echo fails.
pub fn reaches(lab: &str, node: &str, args: &[&str]) -> bool {
    poll(BOUND, || ping_from(lab, node, args).then_some(())).is_some()
}

/// The directory of lab `tag` that `clean` cannot remove: a tmpfs mounted inside
/// it. Unmounted and removed on drop.
pub struct StuckLab {
    pub lab: String,
    mnt: PathBuf,
}

impl Drop for StuckLab {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = std::fs::remove_dir_all(state_dir(&self.lab));
    }
}

pub fn stuck_lab(tag: &str) -> StuckLab {
    let lab = lab_name(tag);
    let mnt = state_dir(&lab).join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "none"])
        .arg(&mnt)
        .status()
        .unwrap();
    let stuck = StuckLab { lab, mnt };
    assert!(
        mounted.success(),
        "mount a tmpfs in {}",
        stuck.mnt.display()
    );
    stuck
}

/// Hardware for the real-path tests, made with `ip` so no interface of this
/// machine is touched: namespace `HOST` plays the machine tunbench runs on, with
/// "NICs" `enp1s0` and `enp2s0` (veths) cabled to namespace `ROUTER`, a plain
/// Linux router standing in for the NVR500 (lan1 198.18.11.250/24 +
/// 2001:2:0:11::250/64, lan2 198.18.1.2/24 + 2001:2:0:1::2/64, as
/// topologies/nvr500-real.toml says), and `mgmt0`, the machine's management
/// interface with 198.18.250.2/24 and the default route. Removed on drop.
pub struct EmulatedHost {
    pub host: String,
    pub router: String,
}

fn ip_ok(args: &[&str]) {
    let o = Command::new(program("ip")).args(args).output().expect("ip");
    assert!(o.status.success(), "ip {}: {}", args.join(" "), text(&o));
}

impl EmulatedHost {
    pub fn new(tag: &str) -> EmulatedHost {
        let id = std::process::id() % 100000;
        Self::named(&format!("eh{tag}{id}"), &format!("er{tag}{id}"))
    }

    /// The same hardware with the two namespaces named by the caller.
    pub fn named(host: &str, router: &str) -> EmulatedHost {
        let h = EmulatedHost {
            host: host.to_string(),
            router: router.to_string(),
        };
        let (host, router) = (h.host.as_str(), h.router.as_str());
        ip_ok(&["netns", "add", host]);
        ip_ok(&["netns", "add", router]);
        for ns in [host, router] {
            ip_ok(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for (nic, port) in [("enp1s0", "lan1"), ("enp2s0", "lan2")] {
            ip_ok(&[
                "-n", host, "link", "add", nic, "type", "veth", "peer", "name", port, "netns",
                router,
            ]);
            ip_ok(&["-n", host, "link", "set", nic, "up"]);
            ip_ok(&["-n", router, "link", "set", port, "up"]);
        }
        let sysctl = |ns: &str, kv: &str| {
            ip_ok(&["netns", "exec", ns, "sysctl", "-qw", kv]);
        };
        sysctl(router, "net.ipv4.ip_forward=1");
        sysctl(router, "net.ipv6.conf.all.forwarding=1");
        for (port, v4, v6) in [
            ("lan1", "198.18.11.250/24", "2001:2:0:11::250/64"),
            ("lan2", "198.18.1.2/24", "2001:2:0:1::2/64"),
        ] {
            ip_ok(&["-n", router, "addr", "add", v4, "dev", port]);
            ip_ok(&["-n", router, "addr", "add", v6, "dev", port, "nodad"]);
        }
        ip_ok(&[
            "-n", host, "link", "add", "mgmt0", "type", "veth", "peer", "name", "mgmt0p",
        ]);
        ip_ok(&["-n", host, "link", "set", "mgmt0", "up"]);
        ip_ok(&["-n", host, "link", "set", "mgmt0p", "up"]);
        ip_ok(&["-n", host, "addr", "add", "198.18.250.2/24", "dev", "mgmt0"]);
        ip_ok(&["-n", host, "route", "add", "default", "via", "198.18.250.1"]);
        h
    }

    /// tunbench run in the namespace that plays the host (`nsenter --net`,
    /// which keeps the mount namespace: labs' /run/netns entries are shared).
    pub fn tunbench(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .expect("running tunbench in the host")
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(program("nsenter"));
        c.arg(format!("--net=/run/netns/{}", self.host))
            .arg("--")
            .arg(bin())
            .args(args);
        c
    }

    /// `ip -j ...` in the host namespace, parsed.
    pub fn ip_json(&self, args: &[&str]) -> serde_json::Value {
        let o = Command::new(program("ip"))
            .args(["-n", &self.host, "-j"])
            .args(args)
            .output()
            .expect("ip");
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
        serde_json::from_slice(&o.stdout).expect("ip -j output")
    }

    /// What a host interface is, as `down` must give it back: name, MTU, flags
    /// (up/down), MAC, its addresses, and the routes out of it.
    pub fn state_of(&self, nic: &str) -> String {
        let link = &self.ip_json(&["link", "show", "dev", nic])[0];
        let mut flags: Vec<String> = link["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .filter(|f| !["LOWER_UP", "NO-CARRIER", "M-DOWN"].contains(f))
            .map(String::from)
            .collect();
        flags.sort();
        let addrs: Vec<String> = self.ip_json(&["addr", "show", "dev", nic])[0]["addr_info"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["scope"] == "global")
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or("?"), a["prefixlen"]))
            .collect();
        let mut routes: Vec<String> = ["-4", "-6"]
            .iter()
            .flat_map(|f| {
                let r = self.ip_json(&[f, "route", "show", "dev", nic]);
                r.as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["protocol"] != "kernel")
                    .map(|r| format!("{} via {}", r["dst"], r["gateway"]))
                    .collect::<Vec<_>>()
            })
            .collect();
        routes.sort();
        format!(
            "{nic} mtu {} flags {flags:?} mac {} addresses {addrs:?} routes {routes:?}",
            link["mtu"], link["address"]
        )
    }

    /// Interfaces of the host namespace, sorted.
    pub fn links(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .ip_json(&["link", "show"])
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["ifname"].as_str().map(String::from))
            .collect();
        v.sort();
        v
    }
}

impl Drop for EmulatedHost {
    fn drop(&mut self) {
        for ns in [&self.host, &self.router] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Whether this kernel makes seg6 and seg6local routes (CONFIG_IPV6_SEG6_LWTUNNEL),
/// the kernel DS-Lite datapath, asked of `ip` in a namespace of the test's own.
/// Tests of the kernel datapath check it carries traffic where the kernel has
/// it, and that tunbench refuses it naming the kernel option where it has not.
pub fn kernel_has_seg6() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        let ns = format!("hkseg6{}", std::process::id() % 100000);
        let ip = |args: &[&str]| {
            Command::new(program("ip"))
                .args(args)
                .output()
                .expect("running ip")
        };
        assert!(
            ip(&["netns", "add", &ns]).status.success(),
            "ip netns add {ns}"
        );
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        let made = ip(&[
            "-n",
            &ns,
            "-6",
            "route",
            "add",
            "2001:2:0:ff::1/128",
            "encap",
            "seg6local",
            "action",
            "End.DX4",
            "nh4",
            "0.0.0.0",
            "dev",
            "lo",
        ]);
        ip(&["netns", "del", &ns]);
        made.status.success()
    })
}

/// `up` of a file whose DS-Lite endpoints ask for the kernel datapath: the lab
/// where the kernel has SRv6 lightweight tunnels, or else (None) the refusal
/// checked: exit 2, the option named, nothing built.
pub fn up_kernel_softwire(file: &Path, lab: &str) -> Option<LabGuard> {
    let (g, o) = up(file, lab);
    if kernel_has_seg6() {
        assert!(o.status.success(), "up failed: {}", text(&o));
        return Some(g);
    }
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a kernel softwire without seg6: {t}"
    );
    assert!(
        t.contains("datapath = \"kernel\" needs") && t.contains("CONFIG_IPV6_SEG6_LWTUNNEL"),
        "the refusal names what the kernel lacks: {t}"
    );
    drop(g);
    assert_gone(lab);
    eprintln!(
        "this kernel has no SRv6 lightweight tunnels: checked that the kernel softwire is refused"
    );
    None
}
