//! IKEv2 tunnels end to end, as root in namespaces: strongSwan's charon with
//! userspace ESP (kernel-libipsec) at both ends, negotiated by `up`. TCP and
//! UDP both ways through it, a capture that shows ESP in UDP 4500 on the
//! underlay and not the inner packets, with the overhead the reports give,
//! `down` leaving no charon behind; an
//! unreachable peer failing `up` within the tunnel's timeout with charon's
//! log; and validation naming the packages when strongSwan is missing.
//! The main lab is the shipped topologies/ikev2.toml (and its `certificates`
//! scenario). strongSwan must be installed (scripts/setup.sh): no test skips
//! without it.

use crate::common::reaches;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tunbench::codec::overhead::Encapsulation;

/// Lab names of this file start with "ik".
fn ik_lab(tag: &str) -> String {
    format!("ik{tag}{}", std::process::id() % 100000)
}

/// Two hosts and an IKEv2 tunnel, like topologies/ikev2.toml, where line 10
/// is the tunnel's kind.
fn two_hosts(dir: &Path) -> PathBuf {
    let text = r#"name = "ikv"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.86.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.86.2/24" }
[tunnels.vpn]
kind = "ikev2"
ends = [
  { node = "a", endpoint = "198.18.86.1", address = "198.18.87.1/24" },
  { node = "b", endpoint = "198.18.86.2", address = "198.18.87.2/24" },
]
"#;
    let p = dir.join("ikev2.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// b's IKE endpoint is on a link to c that a has no route to.
fn unreachable_peer(dir: &Path) -> PathBuf {
    let text = r#"name = "iku"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[nodes.c]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.86.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.86.2/24" }
[[links]]
a = { port = "b:eth1", ipv4 = "198.18.88.2/24" }
b = { port = "c:eth0", ipv4 = "198.18.88.3/24" }
[tunnels.vpn]
kind = "ikev2"
timeout = 8
ends = [
  { node = "a", endpoint = "198.18.86.1", address = "198.18.87.1/24" },
  { node = "b", endpoint = "198.18.88.2", address = "198.18.87.2/24" },
]
"#;
    let p = dir.join("ikev2-unreachable.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn assert_strongswan_installed() {
    for f in [
        "/usr/lib/ipsec/charon",
        "/usr/sbin/swanctl",
        "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so",
        "/usr/lib/ipsec/plugins/libstrongswan-openssl.so",
    ] {
        assert!(
            Path::new(f).is_file(),
            "{f} is missing: run scripts/setup.sh (strongSwan is part of the test setup)"
        );
    }
}

/// charon processes of `lab`: their /run is a directory in the lab's state.
fn charons_of(lab: &str) -> Vec<i32> {
    let mark = format!("/tunbench/{lab}/ikev2-");
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "charon" {
            continue;
        }
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        if mounts.contains(&mark) {
            v.push(pid);
        }
    }
    v
}

fn sa_file(lab: &str, node: &str) -> Value {
    let p = state_dir(lab).join(format!("sa-vpn-{node}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn child_sa(lab: &str, node: &str) -> Value {
    sa_file(lab, node)["ike"][0]["children"][0].clone()
}

#[test]
fn ikev2_carries_tcp_and_udp_both_ways_as_esp_in_udp() {
    assert_strongswan_installed();
    let dir = tempfile::tempdir().unwrap();
    let lab = ik_lab("v");
    let t0 = Instant::now();
    let _g = up_named(&topo("ikev2.toml"), &lab);
    eprintln!("{lab}: up in {:.1} s", t0.elapsed().as_secs_f64());
    // `up` returned: both child SAs are installed.
    for node in ["a", "b"] {
        let c = child_sa(&lab, node);
        assert_eq!(c["state"], "INSTALLED", "{node}: {c}");
        assert_eq!(c["encap"], true, "{node}: libipsec always uses UDP: {c}");
        assert_eq!(c["cipher"], "AES_GCM_16-128", "{node}: {c}");
    }
    assert_eq!(sa_file(&lab, "a")["ike"][0]["state"], "ESTABLISHED");
    let charons = charons_of(&lab);
    assert_eq!(charons.len(), 2, "one charon per end: {charons:?}");
    let st = tunbench(&["status", &lab]);
    let out = text(&st);
    assert_eq!(out.matches("child SA vpn INSTALLED").count(), 2, "{out}");
    assert!(out.contains("ipsec0"), "{out}");

    traffic_both_ways(
        &lab,
        &[("a", "b", "198.18.87.2"), ("b", "a", "2001:2:0:87::1")],
    );
    eventually("the SA counts the traffic", || {
        child_sa(&lab, "b")["bytes_in"].as_u64().unwrap_or(0) > 1_000_000
    });

    // On the underlay: ESP in UDP 4500 (a non-zero SPI where IKE has its
    // zero marker), and not the ping's 0xa5 pattern in clear.
    let pcap = dir.path().join("ikev2.pcap");
    capture_one(&lab, "b", "udp port 4500 and greater 300", &pcap, || {
        ping_from(&lab, "a", &["-s", "400", "-p", "a5", "198.18.87.2"]);
    });
    let payload = udp_payloads(&std::fs::read(&pcap).unwrap()).remove(0);
    // The 428-byte inner packet (IPv4 20 + ICMP 8 + 400) costs what the
    // reports say ESP in UDP costs: outer IPv4 20 + UDP 8 + the ESP payload.
    let inner = 20 + 8 + 400;
    assert_eq!(
        20 + 8 + payload.len() - inner,
        Encapsulation::Esp { udp: true }.overhead(false, inner),
        "{} bytes of ESP for {inner} inside",
        payload.len()
    );
    assert_ne!(payload[..4], [0, 0, 0, 0], "an IKE message, not ESP");
    assert!(
        !payload.windows(16).any(|w| w.iter().all(|&b| b == 0xa5)),
        "the inner ping is in clear on the underlay"
    );
    let o = Command::new(program("tshark"))
        .arg("-r")
        .arg(&pcap)
        .output()
        .unwrap();
    let dissected = String::from_utf8_lossy(&o.stdout);
    assert!(dissected.contains("ESP"), "{dissected}");

    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert_gone(&lab);
    assert_eq!(charons_of(&lab), Vec::<i32>::new(), "charon left behind");
    for pid in charons {
        assert!(process_ended(pid.into()), "charon {pid} still runs");
    }
}

#[test]
fn certificates_from_a_lab_ca_authenticate_both_ends() {
    assert_strongswan_installed();
    assert!(
        Path::new("/usr/bin/pki").is_file(),
        "/usr/bin/pki is missing: run scripts/setup.sh (strongswan-pki)"
    );
    let lab = ik_lab("c");
    let _g = LabGuard(lab.clone());
    let file = topo("ikev2.toml");
    let o = tunbench(&[
        "up",
        file.to_str().unwrap(),
        "--name",
        &lab,
        "--scenario",
        "certificates",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for node in ["a", "b"] {
        assert_eq!(child_sa(&lab, node)["state"], "INSTALLED");
        let log =
            std::fs::read_to_string(state_dir(&lab).join(format!("ikev2-vpn-{node}/charon.log")))
                .unwrap();
        let peer = if node == "a" { "b" } else { "a" };
        assert!(
            log.contains(&format!("received end entity cert \"CN={peer}\"")),
            "{log}"
        );
        assert!(
            log.contains("with ECDSA_WITH_SHA256_DER successful"),
            "{log}"
        );
    }
    // The lab keeps the CA's certificate, not its key.
    let keys = std::fs::read_to_string(state_dir(&lab).join("keys.json")).unwrap();
    assert_eq!(keys.matches("BEGIN EC PRIVATE KEY").count(), 2, "{keys}");
    assert!(reaches(&lab, "a", &["198.18.87.2"]), "a -> b");
    assert!(reaches(&lab, "b", &["2001:2:0:87::1"]), "b -> a");
    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert_gone(&lab);
    assert_eq!(charons_of(&lab), Vec::<i32>::new(), "charon left behind");
}

#[test]
fn an_unreachable_peer_fails_up_within_the_timeout_with_charons_log() {
    assert_strongswan_installed();
    let dir = tempfile::tempdir().unwrap();
    let lab = ik_lab("u");
    let (_g, o) = up(&unreachable_peer(dir.path()), &lab);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    // timeout = 8: the end's wait for the SA is bounded by the tunnel's own
    // timeout, and it says so; ignoring it, it would be the default's.
    const _: () = assert!(tunbench::topology::tunnel::ikev2::DEFAULT_TIMEOUT != 8);
    assert!(
        out.contains("the rest of the tunnel's timeout of 8 s"),
        "not the tunnel's timeout of 8 s: {out}"
    );
    assert!(out.contains("IKEv2 end a of tunnel vpn"), "{out}");
    assert!(out.contains("charon's log"), "{out}");
    assert!(
        out.contains("initiating IKE_SA vpn") && out.contains("198.18.88.2"),
        "the error quotes charon's log: {out}"
    );
    assert_gone(&lab);
    assert_eq!(charons_of(&lab), Vec::<i32>::new(), "charon left behind");
}

#[test]
fn without_strongswan_the_topology_fails_validation_naming_the_packages() {
    assert_strongswan_installed();
    let dir = tempfile::tempdir().unwrap();
    let file = two_hosts(dir.path());
    let ok = tunbench(&["validate", file.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", text(&ok));
    let lab = ik_lab("m");
    let missing = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .env("TUNBENCH_STRONGSWAN_PREFIX", dir.path().join("nowhere"))
            .output()
            .unwrap()
    };
    let v = missing(&["validate", file.to_str().unwrap()]);
    let out = text(&v);
    assert_eq!(v.status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!("{}:10:8: tunnels.vpn.kind:", file.display())),
        "{out}"
    );
    assert!(
        out.contains(
            "apt-get install strongswan-charon strongswan-swanctl libcharon-extra-plugins"
        ),
        "{out}"
    );
    assert!(
        out.contains("nowhere/usr/lib/ipsec/charon (strongswan-charon)"),
        "{out}"
    );
    // `up` validates first: nothing is made.
    let _g = LabGuard(lab.clone());
    let u = missing(&["up", file.to_str().unwrap(), "--name", &lab]);
    assert_eq!(u.status.code(), Some(2), "{}", text(&u));
    assert!(namespaces(&format!("{lab}-")).is_empty());
}
