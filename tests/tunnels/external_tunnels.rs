//! Tunnels that end at devices outside the lab (issue 15): a lab's WireGuard
//! peer with wireguard-go on "the other machine", and a lab's DS-Lite B4 (kernel
//! and userspace) with a kernel seg6 AFTR of the test's own, both built here
//! with `ip` in namespaces named `xt...` (on a kernel without SRv6 lightweight
//! tunnels, the B4's half only: see `softwire_to_an_aftr_outside_the_lab`). The lab reaches them through the
//! emulated host's NIC (tests/common EmulatedHost): tunbench runs inside the
//! namespace that plays the host, so no interface of this machine is touched.

use crate::common::*;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn id() -> u32 {
    std::process::id() % 100000
}

/// The emulated host (`xth...`), whose router namespace (`xtr...`) plays the
/// device outside the lab, and the lab's name (`xt...`).
fn hardware(tag: &str) -> (EmulatedHost, String) {
    let id = id();
    let h = EmulatedHost::named(&format!("xth{tag}{id}"), &format!("xtr{tag}{id}"));
    (h, format!("xt{tag}{id}"))
}

fn run(cmd: &mut Command) -> Output {
    let o = cmd.output().expect("running a command");
    assert!(o.status.success(), "{cmd:?}: {}", text(&o));
    o
}

fn ip_in(ns: &str, args: &[&str]) {
    run(Command::new(program("ip")).args(["-n", ns]).args(args));
}

/// `PROGRAM ARGS...` inside namespace `ns`.
fn exec_in(ns: &str, program: &str, args: &[&str]) -> Output {
    run(Command::new("ip")
        .args(["netns", "exec", ns, program])
        .args(args))
}

/// A namespace of the test's own, removed on drop.
struct Netns(String);

impl Netns {
    fn new(name: String) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        run(Command::new(program("ip")).args(["netns", "add", &name]));
        ip_in(&name, &["link", "set", "lo", "up"]);
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A process of the test's, stopped on drop, with a file it leaves behind
/// (wireguard-go's UAPI socket, which a killed one does not remove).
struct Running(Child, String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_string()
}

/// pc, on the emulated host's enp1s0 (a macvlan), peers over WireGuard with
/// rtr, the device on the other end of the cable: wireguard-go, configured
/// with `wg setconf` from what `tunbench keys` prints plus its own private key.
/// pc's peer is run by `imp`.
fn a_lab_peer_and_wireguard_go_outside_the_lab(tag: &str, imp: &str) {
    let (h, lab) = hardware(tag);
    let dir = tempfile::tempdir().unwrap();
    let private = exec_in(&h.router, program("wg"), &["genkey"]).stdout;
    let mut pubkey = Command::new(program("wg"))
        .arg("pubkey")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut pubkey.stdin.take().unwrap(), &private).unwrap();
    let public = String::from_utf8(pubkey.wait_with_output().unwrap().stdout).unwrap();
    let public = public.trim();
    let file = write(
        dir.path(),
        "wg.toml",
        &format!(
            r#"
name = "{lab}"

[nodes.pc]
kind = "host"

[nodes.rtr]
kind = "external"
description = "wireguard-go on the other end of enp1s0"

[[links]]
a = {{ port = "pc:eth0", ipv4 = "198.18.11.2/24" }}
b = {{ port = "rtr:lan1", ipv4 = "198.18.11.250/24" }}
host = "enp1s0"

[tunnels.wg]
kind = "wireguard"
preshared_key = true
implementation = "{imp}"
peers = [
  {{ node = "pc", endpoint = "198.18.11.2", address = ["198.18.71.2/24", "2001:2:0:71::2/64"] }},
  {{ node = "rtr", endpoint = "198.18.11.250", address = ["198.18.71.1/24", "2001:2:0:71::1/64"],
    public_key = "{public}" }},
]
"#
        ),
    );
    let g = h.tunbench(&["graph", &file]);
    assert!(
        text(&g).contains(&format!(
            "\"pc\" -- \"rtr\" [style=dashed, label=\"wireguard wg ({imp}/external)\"]"
        )),
        "{}",
        text(&g)
    );
    {
        let _g = LabGuard(lab.clone());
        let o = h.tunbench(&["up", &file, "--name", &lab]);
        assert!(o.status.success(), "up: {}", text(&o));
        // Nothing of the lab on the device's side: one datapath, on pc.
        assert_eq!(
            namespaces(&format!("{lab}-")),
            [format!("{lab}-pc")],
            "namespaces of the lab"
        );
        let keys = h.tunbench(&["keys", &lab]);
        assert!(keys.status.success(), "keys: {}", text(&keys));
        let conf = String::from_utf8(keys.stdout).unwrap();
        for want in [
            "[Interface]\nListenPort = 51820\n",
            &format!("[Peer]\n# pc ({imp})\nPublicKey = "),
            "PresharedKey = ",
            "Endpoint = 198.18.11.2:51820\n",
            "AllowedIPs = 198.18.71.2/32, 2001:2:0:71::2/128\n",
            public,
        ] {
            assert!(conf.contains(want), "no {want:?} in:\n{conf}");
        }
        assert!(!conf.contains("PrivateKey"), "{conf}");

        // The device: wireguard-go, set up from that text.
        let dev = format!("xt{tag}{}", id());
        let socket = format!("/var/run/wireguard/{dev}.sock");
        let _ = std::fs::remove_file(&socket);
        let _wg = Running(
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &h.router,
                    program("wireguard-go"),
                    "-f",
                    &dev,
                ])
                .env("WG_PROCESS_FOREGROUND", "1")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting wireguard-go"),
            socket.clone(),
        );
        // Its file appears at bind(), before wireguard-go listens on it.
        eventually("wireguard-go taking connections on its UAPI socket", || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
        let conf_file = write(dir.path(), "far-end.conf", &conf);
        let key_file = write(
            dir.path(),
            "far-end.key",
            &String::from_utf8_lossy(&private),
        );
        exec_in(&h.router, program("wg"), &["setconf", &dev, &conf_file]);
        exec_in(
            &h.router,
            program("wg"),
            &["set", &dev, "private-key", &key_file],
        );
        ip_in(&h.router, &["addr", "add", "198.18.71.1/24", "dev", &dev]);
        ip_in(
            &h.router,
            &["addr", "add", "2001:2:0:71::1/64", "dev", &dev, "nodad"],
        );
        ip_in(&h.router, &["link", "set", &dev, "mtu", "1420", "up"]);

        let c = h.tunbench(&["check", &lab]);
        assert!(c.status.success(), "check: {}", text(&c));
        let pc = format!("{lab}-pc");
        traffic_both_ways(
            "",
            &[
                (&pc, &h.router, "198.18.71.1"),
                (&h.router, &pc, "2001:2:0:71::2"),
            ],
        );
        // `measure` to a server on the device, through the tunnel: the report
        // says what the tunnel costs and who runs each end.
        // Its own namespace: the port is free there.
        let mut server = Running(
            Command::new("ip")
                .args(["netns", "exec", &h.router, bin(), "server", "-p", "5202"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting the server"),
            String::new(),
        );
        wait_listening(&mut server.0, 5202, "tunbench server on the device");
        let to = "198.18.71.1:5202";
        let m = h.tunbench(&[
            "measure",
            &lab,
            "--from",
            "pc",
            "--to",
            to,
            "--protocols",
            "tcp",
            "--directions",
            "sender",
            "--runs",
            "1",
            "--duration",
            "1",
        ]);
        drop(server);
        assert!(m.status.success(), "measure: {}", text(&m));
        assert!(
            text(&m).contains(&format!("tunnel wg ({imp}/external)")),
            "{}",
            text(&m)
        );
        // The device saw the lab's peer by the key the lab holds for it.
        let shown = String::from_utf8(
            exec_in(
                &h.router,
                program("wg"),
                &["show", &dev, "latest-handshakes"],
            )
            .stdout,
        )
        .unwrap();
        let handshake: u64 = shown
            .split_whitespace()
            .nth(1)
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        assert!(handshake > 0, "no handshake on the device: {shown}");

        let d = h.tunbench(&["down", &lab]);
        assert!(d.status.success(), "down: {}", text(&d));
    }
    assert_gone(&lab);
}

#[test]
fn a_tunbench_peer_and_wireguard_go_outside_the_lab() {
    a_lab_peer_and_wireguard_go_outside_the_lab("wt", "tunbench");
}

#[test]
fn a_wireguard_go_peer_and_wireguard_go_outside_the_lab() {
    a_lab_peer_and_wireguard_go_outside_the_lab("wg", "wireguard-go");
}

/// The AFTR on the other end of enp1s0, as a kernel does it with `ip`: its
/// address 2001:2:0:200::1 on lo, IPv4-in-IPv6 to it decapsulated by seg6local
/// End.DX4 (only protocol 4: echoes to it stay local, by a rule before
/// `lookup local`), the B4's prefixes and 192.0.0.2 back through seg6
/// `encap.red` from its address to the B4 at 2001:2:0:11::2, and an IPv4 server `web`
/// (198.18.50.10) behind it. No NAT44: the server sees the customer's addresses.
fn kernel_aftr(h: &EmulatedHost, web: &str) {
    let r = h.router.as_str();
    ip_in(r, &["addr", "add", "2001:2:0:200::1/128", "dev", "lo"]);
    ip_in(r, &["-6", "rule", "add", "pref", "1000", "lookup", "local"]);
    ip_in(r, &["-6", "rule", "del", "pref", "0", "lookup", "local"]);
    ip_in(
        r,
        &[
            "-6",
            "rule",
            "add",
            "pref",
            "100",
            "to",
            "2001:2:0:200::1/128",
            "ipproto",
            "4",
            "lookup",
            "4600",
        ],
    );
    ip_in(
        r,
        &[
            "-6",
            "route",
            "add",
            "2001:2:0:200::1/128",
            "encap",
            "seg6local",
            "action",
            "End.DX4",
            "nh4",
            "0.0.0.0",
            "dev",
            "lan1",
            "table",
            "4600",
        ],
    );
    // The softwire's outer source is the AFTR's address (RFC 6333 6.4: a B4
    // takes IPv4-in-IPv6 from its AFTR only), not lan1's.
    ip_in(r, &["sr", "tunsrc", "set", "2001:2:0:200::1"]);
    for customer in ["198.18.21.0/24", "192.0.0.2/32"] {
        ip_in(
            r,
            &[
                "route",
                "add",
                customer,
                "encap",
                "seg6",
                "mode",
                "encap.red",
                "segs",
                "2001:2:0:11::2",
                "dev",
                "lan1",
            ],
        );
    }
    ip_in(
        r,
        &[
            "link", "add", "inet", "type", "veth", "peer", "name", "eth0", "netns", web,
        ],
    );
    ip_in(r, &["addr", "add", "198.18.50.1/24", "dev", "inet"]);
    ip_in(r, &["link", "set", "inet", "up"]);
    ip_in(web, &["addr", "add", "198.18.50.10/24", "dev", "eth0"]);
    ip_in(web, &["link", "set", "eth0", "up"]);
    ip_in(web, &["route", "add", "default", "via", "198.18.50.1"]);
}

/// client behind the lab's B4 reaches web, an IPv4 server beyond the AFTR
/// outside the lab: the B4 (datapath `dp`) encapsulates to the AFTR's address.
/// On a kernel without SRv6 lightweight tunnels no AFTR can be made with `ip`;
/// there the test checks the B4's half on the wire instead (`b4_half_only`):
/// a kernel B4 is refused naming the kernel option, a userspace one
/// encapsulates the customer's packet to the external AFTR's address.
fn softwire_to_an_aftr_outside_the_lab(tag: &str, dp: &str) {
    let (h, lab) = hardware(tag);
    let web = Netns::new(format!("xtw{tag}{}", id()));
    let b4_half_only = !kernel_has_seg6();
    let graphed = |file: &str| {
        let g = h.tunbench(&["graph", file]);
        assert!(
            text(&g).contains(&format!("label=\"dslite transix ({dp}/external)\"")),
            "{}",
            text(&g)
        );
    };
    if !b4_half_only {
        kernel_aftr(&h, &web.0);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "ds.toml",
        &format!(
            r#"
name = "{lab}"

[nodes.client]
kind = "host"
routes = [{{ to = "default", via = "198.18.21.1" }}]

[nodes.b4]
kind = "router"
routes = [{{ to = "default", via = "2001:2:0:11::250" }}]

[nodes.aftr]
kind = "external"
description = "the ISP's AFTR"
addresses = ["2001:2:0:200::1/128"]

[nodes.web]
kind = "external"
description = "an IPv4 server beyond the AFTR"

[[links]]
a = {{ port = "client:eth0", ipv4 = "198.18.21.2/24" }}
b = {{ port = "b4:lan", ipv4 = "198.18.21.1/24" }}

[[links]]
a = {{ port = "b4:wan", ipv6 = "2001:2:0:11::2/64" }}
b = {{ port = "aftr:lan1", ipv6 = "2001:2:0:11::250/64" }}
host = "enp1s0"

[[links]]
a = {{ port = "aftr:inet", ipv4 = "198.18.50.1/24" }}
b = {{ port = "web:eth0", ipv4 = "198.18.50.10/24" }}

[tunnels.transix]
kind = "dslite"
datapath = "{dp}"
aftr = {{ node = "aftr", address = "2001:2:0:200::1" }}
b4 = {{ node = "b4", address = "2001:2:0:11::2", prefixes = ["198.18.21.0/24"] }}
"#
        ),
    );
    if b4_half_only {
        if dp != "kernel" {
            graphed(&file);
        }
        b4_half_on_the_wire(&h, &lab, &file, dp);
        return;
    }
    graphed(&file);
    {
        let _g = LabGuard(lab.clone());
        let o = h.tunbench(&["up", &file, "--name", &lab]);
        assert!(o.status.success(), "up: {}", text(&o));
        assert_eq!(
            namespaces(&format!("{lab}-")),
            [format!("{lab}-b4"), format!("{lab}-client")],
            "namespaces of the lab"
        );
        let c = h.tunbench(&["check", &lab, "--json"]);
        assert!(c.status.success(), "check: {}", text(&c));
        // check counted on the path through the softwire, and it answered.
        let report: serde_json::Value = serde_json::from_slice(&c.stdout).expect("check JSON");
        let through = report["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["from"] == "client" && p["addr"] == "198.18.50.10")
            .cloned()
            .unwrap_or_default();
        assert!(
            through["unreachable_because"].is_null() && through["replied"] == true,
            "{through}"
        );
        traffic_both_ways("", &[(&format!("{lab}-client"), &web.0, "198.18.50.10")]);
        let d = h.tunbench(&["down", &lab]);
        assert!(d.status.success(), "down: {}", text(&d));
    }
    assert_gone(&lab);
}

/// Without an AFTR: the kernel B4 is refused (exit 2, the kernel option named,
/// nothing built); the userspace B4's softwire packet arrives at the AFTR's
/// address on the device, from the B4's, carrying the customer's IPv4 packet.
fn b4_half_on_the_wire(h: &EmulatedHost, lab: &str, file: &str, dp: &str) {
    let _g = LabGuard(lab.to_string());
    let o = h.tunbench(&["up", file, "--name", lab]);
    if dp == "kernel" {
        assert_eq!(o.status.code(), Some(2), "up: {}", text(&o));
        assert!(
            text(&o).contains("CONFIG_IPV6_SEG6_LWTUNNEL"),
            "{}",
            text(&o)
        );
        assert!(namespaces(&format!("{lab}-")).is_empty(), "built something");
        eprintln!("this kernel has no SRv6 lightweight tunnels: checked the refusal");
        return;
    }
    assert!(o.status.success(), "up: {}", text(&o));
    // The device takes the AFTR's address, and a raw socket there gets what
    // arrives for it with next header 4 (nothing else in this kernel wants it).
    ip_in(
        &h.router,
        &["addr", "add", "2001:2:0:200::1/128", "dev", "lo"],
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let router = h.router.clone();
    let listener = std::thread::spawn(move || {
        netns::namespace::enter(&router).expect("entering the device");
        let s = socket2::Socket::new(
            socket2::Domain::IPV6,
            socket2::Type::RAW,
            Some(socket2::Protocol::from(4)),
        )
        .expect("raw IPv6 socket for protocol 4");
        s.set_read_timeout(Some(BOUND)).unwrap();
        tx.send(()).unwrap();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
        let (n, from) = s
            .recv_from(&mut buf)
            .expect("a softwire packet at the AFTR");
        // SAFETY: recv_from initialised the first n bytes.
        let bytes: Vec<u8> = buf[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        (bytes, from.as_socket().map(|a| a.ip()))
    });
    rx.recv().unwrap();
    // Pings (nothing answers them) until the device has a softwire packet
    // (its listener gives up after BOUND): one lost is not what this checks.
    while !listener.is_finished() {
        ping_from(lab, "client", &["198.18.50.10"]);
    }
    let (inner, from) = listener.join().expect("listener");
    assert_eq!(
        from,
        Some("2001:2:0:11::2".parse().unwrap()),
        "outer source"
    );
    assert!(
        inner.len() >= 20 && inner[0] >> 4 == 4,
        "not IPv4 inside: {inner:?}"
    );
    assert_eq!(
        &inner[12..16],
        &[198, 18, 21, 2],
        "inner source: the customer"
    );
    assert_eq!(&inner[16..20], &[198, 18, 50, 10], "inner destination: web");
    let d = h.tunbench(&["down", lab]);
    assert!(d.status.success(), "down: {}", text(&d));
}

#[test]
fn a_kernel_b4_and_a_kernel_aftr_outside_the_lab() {
    softwire_to_an_aftr_outside_the_lab("dk", "kernel");
}

#[test]
fn a_userspace_b4_and_a_kernel_aftr_outside_the_lab() {
    softwire_to_an_aftr_outside_the_lab("du", "userspace");
}
