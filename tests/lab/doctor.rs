//! `tunbench doctor`: its verdict on each kernel feature is what `ip`, `tc`,
//! `nft`, the TUN driver and a UDP socket accept when tried directly in a
//! namespace of the test's own; `--json` lists every feature and program once;
//! nothing is left behind (no named namespace, no host interface).

use crate::common::*;
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};

/// A named namespace of the test's own, deleted on drop.
struct Scratch(String);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let name = format!("tdoc{tag}{}", std::process::id() % 100000);
        let o = ip(&["netns", "add", &name]);
        assert!(o.status.success(), "ip netns add {name}: {}", text(&o));
        Scratch(name)
    }

    /// `ip -n NS args`: whether it was accepted, and what it said.
    fn ip(&self, args: &[&str]) -> (bool, String) {
        let o = Command::new(program("ip"))
            .args(["-n", &self.0])
            .args(args)
            .output()
            .expect("running ip");
        (o.status.success(), text(&o))
    }

    /// `program args` inside the namespace.
    fn exec(&self, prog: &'static str, args: &[&str]) -> (bool, String) {
        let o = Command::new(program("ip"))
            .args(["netns", "exec", &self.0, prog])
            .args(args)
            .output()
            .expect("running ip netns exec");
        (o.status.success(), text(&o))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

fn ip(args: &[&str]) -> Output {
    Command::new(program("ip"))
        .args(args)
        .output()
        .expect("running ip")
}

/// All of `steps` accepted, and what the first refusal said.
fn all(steps: Vec<(bool, String)>) -> (bool, String) {
    match steps.into_iter().find(|(ok, _)| !ok) {
        Some(refused) => refused,
        None => (true, String::new()),
    }
}

/// Each kernel feature tried directly in `ns`, as a user would with the
/// standard tools, by doctor's name for it.
fn tried_directly(ns: &Scratch) -> BTreeMap<&'static str, (bool, String)> {
    let mut m = BTreeMap::new();
    // Made by Scratch::new, which asserts it.
    m.insert("netns", (true, String::new()));
    let veth = ns.ip(&["link", "add", "dv0", "type", "veth", "peer", "name", "dv1"]);
    for dev in ["lo", "dv0", "dv1"] {
        ns.ip(&["link", "set", dev, "up"]);
    }
    m.insert("veth", veth);
    m.insert("bridge", ns.ip(&["link", "add", "dbr", "type", "bridge"]));
    // ipvlan on the other end: the kernel refuses an ipvlan on a device that
    // has a macvlan (EBUSY), which is not what doctor is asked.
    for (name, lower, kind) in [
        ("macvlan", "dv0", &["macvlan", "mode", "bridge"][..]),
        ("vlan", "dv0", &["vlan", "id", "5"][..]),
        ("ipvlan", "dv1", &["ipvlan", "mode", "l2"][..]),
    ] {
        let mut args = vec!["link", "add", "link", lower, "name", name, "type"];
        args.extend(kind);
        m.insert(name, ns.ip(&args));
    }
    m.insert(
        "vxlan",
        ns.ip(&[
            "link", "add", "dvx", "type", "vxlan", "id", "42", "dstport", "4789",
        ]),
    );
    m.insert("seg6", seg6(ns));
    m.insert("nft-nat", nat(ns));
    m.insert("tc-tbf", tbf(ns));
    m.insert("tc-cake", cake(ns));
    m.insert(
        "tc-redirect",
        all(vec![
            ns.exec("tc", &["qdisc", "add", "dev", "dv0", "clsact"]),
            ns.exec(
                "tc",
                &[
                    "filter", "add", "dev", "dv0", "ingress", "protocol", "all", "prio", "1",
                    "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
                    "dev", "dv1",
                ],
            ),
        ]),
    );
    let (tun, uso) = tun(ns);
    m.insert("tun", tun);
    m.insert("tun-uso", uso);
    m.insert("udp-gso", udp_option(ns, libc::UDP_SEGMENT, 0));
    m.insert("udp-gro", udp_option(ns, libc::UDP_GRO, 1));
    m.insert("xfrm", xfrm(ns));
    m.insert(
        "wireguard",
        ns.ip(&["link", "add", "dwg", "type", "wireguard"]),
    );
    m
}

/// An ESP tunnel-mode state with AES-GCM and its policy, as charon's
/// kernel-netlink installs them.
fn xfrm(ns: &Scratch) -> (bool, String) {
    all(vec![
        ns.ip(&[
            "xfrm",
            "state",
            "add",
            "src",
            "198.18.255.1",
            "dst",
            "198.18.255.2",
            "proto",
            "esp",
            "spi",
            "0x100",
            "reqid",
            "1",
            "mode",
            "tunnel",
            "aead",
            "rfc4106(gcm(aes))",
            "0x0102030405060708090a0b0c0d0e0f1011121314",
            "128",
        ]),
        ns.ip(&[
            "xfrm",
            "policy",
            "add",
            "src",
            "198.18.255.1",
            "dst",
            "198.18.255.2",
            "dir",
            "out",
            "tmpl",
            "src",
            "198.18.255.1",
            "dst",
            "198.18.255.2",
            "proto",
            "esp",
            "reqid",
            "1",
            "mode",
            "tunnel",
        ]),
    ])
}

fn seg6(ns: &Scratch) -> (bool, String) {
    all(vec![
        ns.ip(&[
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
        ]),
        ns.ip(&[
            "route",
            "add",
            "198.18.255.0/24",
            "encap",
            "seg6",
            "mode",
            "encap.red",
            "segs",
            "2001:2:0:ff::1",
            "dev",
            "lo",
        ]),
    ])
}

fn nat(ns: &Scratch) -> (bool, String) {
    all(vec![
        ns.exec("nft", &["add", "table", "ip", "nat"]),
        ns.exec(
            "nft",
            &[
                "add",
                "chain",
                "ip",
                "nat",
                "post",
                "{ type nat hook postrouting priority srcnat; }",
            ],
        ),
        ns.exec(
            "nft",
            &[
                "add",
                "rule",
                "ip",
                "nat",
                "post",
                "ip",
                "saddr",
                "198.18.0.0/24",
                "snat",
                "to",
                "198.18.1.1",
            ],
        ),
        ns.exec("nft", &["add", "rule", "ip", "nat", "post", "masquerade"]),
    ])
}

/// A TBF charging framing (its own overhead and mpu) over one that meters
/// frames, as labs shape a rate, and a TBF behind a size table.
fn tbf(ns: &Scratch) -> (bool, String) {
    all(vec![
        ns.exec(
            "tc",
            &[
                "qdisc", "add", "dev", "dv0", "root", "handle", "1:", "tbf", "rate", "100mbit",
                "burst", "125000", "latency", "50ms", "overhead", "24", "mpu", "84",
            ],
        ),
        ns.exec(
            "tc",
            &[
                "qdisc", "add", "dev", "dv0", "parent", "1:1", "handle", "10:", "tbf", "rate",
                "4000gbit", "burst", "1518", "limit", "100000",
            ],
        ),
        ns.exec(
            "tc",
            &[
                "qdisc", "add", "dev", "dv1", "stab", "overhead", "24", "mpu", "84", "root", "tbf",
                "rate", "100mbit", "burst", "125000", "latency", "50ms",
            ],
        ),
    ])
}

/// CAKE charging Ethernet's framing per frame, as `shaper = "cake"` shapes a
/// rate, on a veth pair of its own (the other pair's roots hold TBFs).
fn cake(ns: &Scratch) -> (bool, String) {
    all(vec![
        ns.ip(&["link", "add", "dc0", "type", "veth", "peer", "name", "dc1"]),
        ns.exec(
            "tc",
            &[
                "qdisc",
                "add",
                "dev",
                "dc0",
                "root",
                "cake",
                "bandwidth",
                "20mbit",
                "overhead",
                "38",
                "mpu",
                "84",
                "split-gso",
            ],
        ),
    ])
}

/// A multi-queue TUN with virtio headers made by `ip`, then attached with
/// offloads by the datapath's own code: (the TUN, its UDP offload).
fn tun(ns: &Scratch) -> ((bool, String), (bool, String)) {
    let made = ns.ip(&[
        "tuntap",
        "add",
        "dev",
        "dt0",
        "mode",
        "tun",
        "multi_queue",
        "vnet_hdr",
    ]);
    if !made.0 {
        return (made.clone(), made);
    }
    let attached = in_ns(&ns.0, || {
        tunbench::driver::tun::Tun::attach("dt0", 1, true, false).map(|t| t.offloads().uso)
    });
    match attached {
        Ok(uso) => ((true, String::new()), (uso, "no USO".into())),
        Err(e) => ((false, e.to_string()), (false, e.to_string())),
    }
}

/// A UDP socket option set on a socket in the namespace.
fn udp_option(ns: &Scratch, option: libc::c_int, value: libc::c_int) -> (bool, String) {
    in_ns(&ns.0, move || {
        use std::os::fd::AsRawFd;
        let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
        // SAFETY: a valid socket and a c_int-sized option.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_UDP,
                option,
                &value as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        (r == 0, std::io::Error::last_os_error().to_string())
    })
}

fn doctor_json() -> (Output, Vec<serde_json::Value>) {
    let o = tunbench(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}): {}", text(&o)));
    let a = v.as_array().expect("an array").clone();
    (o, a)
}

#[test]
fn doctor_says_of_each_kernel_feature_what_the_tools_accept() {
    let (o, checks) = doctor_json();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let said: BTreeMap<&str, bool> = checks
        .iter()
        .filter(|c| c["kind"] == "kernel")
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["available"].as_bool().unwrap(),
            )
        })
        .collect();
    let ns = Scratch::new("k");
    let direct = tried_directly(&ns);
    assert_eq!(
        said.keys().collect::<Vec<_>>(),
        direct.keys().collect::<Vec<_>>(),
        "the test tries every feature doctor reports, and only those"
    );
    let disagree: Vec<String> = direct
        .iter()
        .filter(|(name, (accepted, _))| said[*name] != *accepted)
        .map(|(name, (accepted, what))| {
            format!(
                "{name}: doctor says {}, the tools {accepted}: {what}",
                said[name]
            )
        })
        .collect();
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

#[test]
fn doctor_json_lists_every_feature_and_program_once() {
    let (o, checks) = doctor_json();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, tunbench::lab::doctor::names());
    for c in &checks {
        for key in [
            "kind",
            "required",
            "available",
            "what",
            "needed_by",
            "without",
        ] {
            assert!(c.get(key).is_some(), "{key} missing in {c}");
        }
        if c["required"] == true {
            assert_eq!(c["available"], true, "this machine runs labs: {c}");
        }
    }
    // ip is on this machine (the tests run it), so doctor finds it with a version.
    let ip = checks.iter().find(|c| c["name"] == "ip").unwrap();
    assert!(
        ip["version"].as_str().is_some_and(|v| !v.is_empty()),
        "{ip}"
    );

    let o = tunbench(&["doctor"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    for group in ["Required by every lab", "Used by some labs", "Programs"] {
        assert!(t.lines().any(|l| l == group), "no {group:?} in:\n{t}");
    }
    assert!(
        t.lines()
            .last()
            .is_some_and(|l| l.starts_with("verdict: every lab can run here")),
        "{t}"
    );
}

/// Doctor with a /run/netns of its own (an empty directory of the test's,
/// bound over it in a private mount namespace): any namespace it named would
/// be left there. It runs in a network namespace of the test's, whose
/// interfaces are compared before and after (the host's own list is not: other
/// tests may change it meanwhile).
#[test]
fn doctor_leaves_no_named_namespace_and_no_interface() {
    let home = Scratch::new("r");
    let links = || home.ip(&["-o", "link"]);
    let before = links();
    assert!(before.0, "ip -o link: {}", before.1);
    let dir = tempfile::tempdir().unwrap();
    let o = doctor_with_run_netns(dir.path(), &home);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "doctor named namespaces: {left:?}");
    assert_eq!(
        links(),
        before,
        "the interfaces of doctor's namespace changed"
    );
}

/// `tunbench doctor` in `home`'s network namespace, with `dir` as its
/// /run/netns.
fn doctor_with_run_netns(dir: &std::path::Path, home: &Scratch) -> Output {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let source = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let net = std::fs::File::open(format!("/run/netns/{}", home.0)).expect("the namespace's file");
    let net_fd = net.as_raw_fd();
    let mut cmd = Command::new(bin());
    cmd.arg("doctor").stdin(Stdio::null());
    // SAFETY: only async-signal-safe syscalls between fork and exec, on
    // strings allocated before.
    unsafe {
        cmd.pre_exec(move || {
            let fail = || Err(std::io::Error::last_os_error());
            if libc::setns(net_fd, libc::CLONE_NEWNET) != 0 {
                return fail();
            }
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            let none = std::ptr::null();
            if libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            if libc::mount(
                source.as_ptr(),
                c"/run/netns".as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            Ok(())
        });
    }
    let o = cmd.output().expect("running tunbench doctor");
    drop(net);
    o
}
