//! WireGuard end to end, as root in namespaces: tunbench's peers with each
//! other over IPv4 and IPv6 underlays, with Debian's wireguard-go (either side
//! starting the handshake), a peer with the wrong key, a replayed data packet,
//! and garbage, truncated handshakes and a flood of initiations sent at a
//! running datapath. Traffic is TCP and UDP echoed through the tunnel.

use crate::common::reaches;
use crate::common::*;
use serde_json::Value;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const A_INNER: &str = "198.18.71.1";
const B_INNER: &str = "198.18.71.2";
const A_INNER6: &str = "2001:2:0:71::1";
const B_INNER6: &str = "2001:2:0:71::2";

/// Two hosts and a WireGuard tunnel, like topologies/wireguard.toml, with the
/// underlay family and b's implementation chosen.
fn topology(dir: &Path, underlay_v6: bool, b_impl: &str) -> PathBuf {
    let (ea, eb) = if underlay_v6 {
        ("2001:2:0:70::1", "2001:2:0:70::2")
    } else {
        ("198.18.70.1", "198.18.70.2")
    };
    let text = format!(
        r#"name = "wgtest"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = {{ port = "a:eth0", ipv4 = "198.18.70.1/24", ipv6 = "2001:2:0:70::1/64" }}
b = {{ port = "b:eth0", ipv4 = "198.18.70.2/24", ipv6 = "2001:2:0:70::2/64" }}
[tunnels.wg]
kind = "wireguard"
preshared_key = true
peers = [
  {{ node = "a", endpoint = "{ea}", address = ["{A_INNER}/24", "{A_INNER6}/64"] }},
  {{ node = "b", endpoint = "{eb}", address = ["{B_INNER}/24", "{B_INNER6}/64"], implementation = "{b_impl}" }},
]
"#
    );
    let p = dir.join(format!(
        "wg-{}-{b_impl}.toml",
        if underlay_v6 { 6 } else { 4 }
    ));
    std::fs::write(&p, text).unwrap();
    p
}

fn json(path: PathBuf) -> Value {
    let t = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&t).unwrap()
}

fn stats(lab: &str, node: &str) -> Value {
    json(state_dir(lab).join(format!("datapath-wg-{node}.json")))
}

fn peers(lab: &str, node: &str) -> Value {
    json(state_dir(lab).join(format!("peers-wg-{node}.json")))
}

fn log(lab: &str, node: &str) -> String {
    std::fs::read_to_string(state_dir(lab).join(format!("logs/datapath-wg-{node}.log")))
        .unwrap_or_default()
}

/// Whether `from` reaches `to` through the tunnel (within `BOUND`).
fn ping(lab: &str, from: &str, to: &str) -> bool {
    reaches(lab, from, &[to])
}

/// Whether any ping gets through within `secs`: for a path that must stay
/// shut, where only a datapath that lets it through can make this true.
fn gets_through_within(lab: &str, from: &str, to: &str, secs: u64) -> bool {
    poll(Duration::from_secs(secs), || {
        ping_from(lab, from, &[to]).then_some(())
    })
    .is_some()
}

fn drops(v: &Value, reason: &str) -> u64 {
    v["drops"][reason].as_u64().unwrap_or(0)
}

/// TCP and UDP through the tunnel both ways, IPv4 and IPv6 inside.
fn traffic(lab: &str) {
    traffic_both_ways(lab, &[("a", "b", B_INNER), ("b", "a", A_INNER6)]);
}

#[test]
fn tunbench_peers_over_ipv4_and_ipv6_underlays() {
    let dir = tempfile::tempdir().unwrap();
    for v6 in [false, true] {
        let lab = lab_name(if v6 { "wg6" } else { "wg4" });
        let _g = up_named(&topology(dir.path(), v6, "tunbench"), &lab);
        assert!(
            ping(&lab, "a", B_INNER),
            "{lab}: no ping through the tunnel"
        );
        traffic(&lab);
        // The traffic crossed the tunnel: b decrypted the 2 MiB a sent, from
        // a's endpoint (the stats files are rewritten every second).
        eventually("b counts over 1 MB received", || {
            stats(&lab, "b")["net_rx"]["bytes"].as_u64().unwrap() > 1_000_000
        });
        eventually("a counts over 1 MB sent to b", || {
            peers(&lab, "a")["peers"][0]["tx_bytes"].as_u64().unwrap() > 1_000_000
        });
        let s = stats(&lab, "b");
        assert_eq!(s["drops"]["unauthentic"], 0, "{s}");
        let p = peers(&lab, "a");
        let ep = p["peers"][0]["endpoint"].as_str().unwrap().to_string();
        assert!(
            ep.contains(if v6 { "2001:2:0:70::2" } else { "198.18.70.2" }),
            "{ep}"
        );
        assert!(
            p["peers"][0]["latest_handshake_secs"].as_f64().is_some(),
            "{p}"
        );
        // `status` shows it like `wg show`, and no key is ever printed.
        let o = tunbench(&["status", &lab]);
        let out = text(&o);
        assert!(out.contains("wireguard wg on a (tunbench)"), "{out}");
        assert!(out.contains("latest handshake"), "{out}");
        let keys = std::fs::read_to_string(state_dir(&lab).join("keys.json")).unwrap();
        let mode = std::fs::metadata(state_dir(&lab).join("keys.json")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        let private: Value = serde_json::from_str(&keys).unwrap();
        let ka = private["tunnels"]["wg"]["private"]["a"].as_str().unwrap();
        assert!(!out.contains(ka), "status printed a private key");
    }
}

#[test]
fn interop_with_wireguard_go_either_side_starting_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    // (IPv6 underlay, who sends first)
    for (v6, first) in [(false, "a"), (true, "b")] {
        let lab = lab_name(if v6 { "wgg6" } else { "wgg4" });
        let _g = up_named(&topology(dir.path(), v6, "wireguard-go"), &lab);
        let (from, to) = if first == "a" {
            ("a", B_INNER)
        } else {
            ("b", A_INNER)
        };
        assert!(
            ping(&lab, from, to),
            "{lab}: {from} cannot reach {to} through the tunnel"
        );
        traffic(&lab);
        // Our side counted what wireguard-go sent, and wireguard-go's own
        // account (read through its UAPI) shows the session.
        eventually("a counts over 1 MB from wireguard-go", || {
            stats(&lab, "a")["net_rx"]["bytes"].as_u64().unwrap() > 1_000_000
        });
        eventually("wireguard-go reports the handshake and its bytes", || {
            let p = peers(&lab, "b");
            p["implementation"] == "wireguard-go"
                && p["peers"][0]["latest_handshake_secs"].as_f64().is_some()
                && p["peers"][0]["rx_bytes"].as_u64().unwrap_or(0) > 1_000_000
        });
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One exchange with wireguard-go's UAPI socket (inside its private /run).
fn uapi(lab: &str, node: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let child = stats(lab, node)["child_pid"].as_u64().expect("child_pid");
    let sock = format!("/proc/{child}/root/run/wireguard/wg-wg.sock");
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut out = String::new();
    let mut buf = [0u8; 4096];
    while !out.ends_with("\n\n") {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        out += &String::from_utf8_lossy(&buf[..n]);
    }
    out
}

#[test]
fn a_peer_with_the_wrong_key_gets_nothing_through_and_we_log_why() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("wgkey");
    let _g = up_named(&topology(dir.path(), false, "wireguard-go"), &lab);
    // wireguard-go gets a new private key: its public key is no longer the one
    // a has for it.
    let r = uapi(
        &lab,
        "b",
        &format!("set=1\nprivate_key={}\n\n", hex(&[0x41; 32])),
    );
    assert!(r.contains("errno=0"), "{r}");
    assert!(
        !gets_through_within(&lab, "b", A_INNER, 3),
        "b got through with the wrong key"
    );
    assert!(
        !gets_through_within(&lab, "a", B_INNER, 2),
        "a got through to the wrong key"
    );
    eventually("a counts b's initiations as unauthentic", || {
        drops(&stats(&lab, "a"), "unauthentic") > 0
    });
    let l = log(&lab, "a");
    assert!(l.contains("not the configured peer's"), "a's log: {l}");
}

/// Runs `f` with a UDP socket in `lab`'s node a, bound to a's underlay address.
fn from_a<R: Send + 'static>(lab: &str, f: impl FnOnce(UdpSocket) -> R + Send + 'static) -> R {
    netns::namespace::run_in(&format!("{lab}-a"), move || {
        let s = UdpSocket::bind("198.18.70.1:0")?;
        Ok::<_, std::io::Error>(f(s))
    })
    .expect("a socket in a")
}

#[test]
fn a_replayed_data_packet_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("wgrep");
    let _g = up_named(&topology(dir.path(), false, "tunbench"), &lab);
    assert!(ping(&lab, "a", B_INNER), "no ping through the tunnel");
    let pcap = dir.path().join("wg.pcap");
    capture_one(
        &lab,
        "b",
        // a -> b only: a reply b -> a, captured when tshark starts late,
        // is for a's session and would not be a replay at b.
        "src host 198.18.70.1 and udp dst port 51820 and greater 300",
        &pcap,
        || {
            ping_output(&lab, "a", &["-s", "400", B_INNER]);
        },
    );
    // A WireGuard data message (type 4) carrying the ping.
    let data = udp_payloads(&std::fs::read(&pcap).unwrap())
        .into_iter()
        .find(|p| p.first() == Some(&4) && p.len() > 100)
        .expect("a WireGuard data packet in the capture");
    let before = drops(&stats(&lab, "b"), "replayed");
    from_a(&lab, move |s| {
        s.send_to(&data, "198.18.70.2:51820").unwrap()
    });
    eventually("b drops the replayed packet as replayed", || {
        drops(&stats(&lab, "b"), "replayed") > before
    });
    assert!(ping(&lab, "a", B_INNER), "the tunnel still works");
}

#[test]
fn garbage_truncated_handshakes_and_an_initiation_flood_do_not_stop_the_datapath() {
    use boringtun::noise::{Tunn, TunnResult};
    use boringtun::x25519::{PublicKey, StaticSecret};
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("wgbad");
    let _g = up_named(&topology(dir.path(), false, "tunbench"), &lab);
    assert!(ping(&lab, "a", B_INNER), "no ping through the tunnel");
    let b_public = peers(&lab, "b")["public_key"].as_str().unwrap().to_string();
    let b_public = tunbench::vocab::keys::parse(&b_public).unwrap();
    let pid = stats(&lab, "b")["pid"].as_u64().unwrap();
    let before = stats(&lab, "b");
    let sent = from_a(&lab, move |s| {
        let mut n = 0u64;
        // Garbage of every length up to a full datagram.
        let mut r = 1u32;
        for len in 0..600usize {
            let junk: Vec<u8> = (0..len * 2)
                .map(|_| {
                    r = r.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (r >> 16) as u8
                })
                .collect();
            s.send_to(&junk, "198.18.70.2:51820").unwrap();
            n += 1;
        }
        // An attacker with a key of its own: valid MACs for b, unknown static.
        let mut t = Tunn::new(
            StaticSecret::from([0x55; 32]),
            PublicKey::from(b_public),
            None,
            None,
            1,
            None,
        );
        let mut buf = [0u8; 256];
        for i in 0..3000 {
            if let TunnResult::WriteToNetwork(init) = t.format_handshake_initiation(&mut buf, true)
            {
                // Every tenth cut short.
                let len = if i % 10 == 0 { 100 } else { init.len() };
                s.send_to(&init[..len], "198.18.70.2:51820").unwrap();
                n += 1;
            }
        }
        n
    });
    assert!(sent > 3000);
    // Still running, still forwarding, and every bad datagram counted.
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "b's datapath died"
    );
    assert!(ping(&lab, "a", B_INNER), "the tunnel stopped working");
    eventually("b counts the garbage and the cut handshakes", || {
        let s = stats(&lab, "b");
        drops(&s, "malformed") + drops(&s, "truncated")
            >= drops(&before, "malformed") + drops(&before, "truncated") + 850
    });
    let s = stats(&lab, "b");
    // The limiter turned most of the flood away (cookie replies or drops):
    // far fewer than 2700 initiations reached the DH.
    let refused = drops(&s, "rate_limited") + drops(&s, "unauthentic");
    assert!(refused > 0, "{s}");
    assert_eq!(s["errors"]["codec_panic"], 0, "{s}");
}

#[test]
fn keygen_and_pubkey_agree_with_wg() {
    let o = tunbench(&["keygen"]);
    assert!(o.status.success());
    let private = String::from_utf8(o.stdout).unwrap();
    assert_eq!(private.trim().len(), 44, "{private}");
    let pubkey = |prog: &str, args: &[&str]| {
        use std::io::Write;
        let mut c = Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(private.as_bytes())
            .unwrap();
        c.wait_with_output().unwrap()
    };
    let ours = pubkey(bin(), &["pubkey"]);
    let theirs = pubkey("wg", &["pubkey"]);
    assert!(ours.status.success() && theirs.status.success());
    assert_eq!(ours.stdout, theirs.stdout);
    // Bad input says what is wrong and fails.
    let mut c = Command::new(bin())
        .arg("pubkey")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        c.stdin.take().unwrap().write_all(b"not a key\n").unwrap();
    }
    let o = c.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("not base64"), "{}", text(&o));
}

#[test]
fn spokes_reach_each_other_through_a_hub() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hub.toml");
    std::fs::write(
        &file,
        r#"name = "wghub"
[nodes.h]
kind = "router"
[nodes.s1]
kind = "host"
[nodes.s2]
kind = "host"
[nodes.sw]
kind = "switch"
[[links]]
a = { port = "h:eth0", ipv4 = "198.18.80.1/24" }
b = "sw:p1"
[[links]]
a = { port = "s1:eth0", ipv4 = "198.18.80.11/24" }
b = "sw:p2"
[[links]]
a = { port = "s2:eth0", ipv4 = "198.18.80.12/24" }
b = "sw:p3"
[tunnels.wg]
kind = "wireguard"
hub = "h"
peers = [
  { node = "h", endpoint = "198.18.80.1", address = "198.18.81.1/24" },
  { node = "s1", endpoint = "198.18.80.11", address = "198.18.81.11/24" },
  { node = "s2", endpoint = "198.18.80.12", address = "198.18.81.12/24" },
]
"#,
    )
    .unwrap();
    let lab = lab_name("wghub");
    let _g = up_named(&file, &lab);
    // s1 -> hub -> s2: the hub decrypts, forwards, encrypts again.
    assert!(
        ping(&lab, "s1", "198.18.81.12"),
        "s1 cannot reach s2 through the hub"
    );
    // The spokes have no session with each other, only with the hub.
    let p = peers(&lab, "s1");
    assert_eq!(p["peers"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["peers"][0]["name"], "h");
    let hub = peers(&lab, "h");
    assert_eq!(hub["peers"].as_array().unwrap().len(), 2, "{hub}");
    traffic_both_ways(&lab, &[("s1", "s2", "198.18.81.12")]);
}

/// Issue 16: a hub on a host forwards too. Node `a` is a host (hosts do not
/// forward by their kind); as a tunnel's hub, tunbench turns forwarding on for
/// it, so spoke reaches spoke over an IPv6 underlay, one spoke wireguard-go,
/// and `check` (whose model now knows the hub forwards) expects and sees it.
#[test]
fn a_hub_on_a_host_forwards_between_spokes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosthub.toml");
    std::fs::write(
        &file,
        r#"name = "wghosthub"
[nodes.a]
kind = "host"
[nodes.s1]
kind = "host"
[nodes.s2]
kind = "host"
[nodes.sw]
kind = "switch"
[[links]]
a = { port = "a:eth0", ipv6 = "2001:2:0:82::1/64" }
b = "sw:p1"
[[links]]
a = { port = "s1:eth0", ipv6 = "2001:2:0:82::11/64" }
b = "sw:p2"
[[links]]
a = { port = "s2:eth0", ipv6 = "2001:2:0:82::12/64" }
b = "sw:p3"
[tunnels.wg]
kind = "wireguard"
hub = "a"
peers = [
  { node = "a", endpoint = "2001:2:0:82::1", address = "198.18.83.1/24" },
  { node = "s1", endpoint = "2001:2:0:82::11", address = "198.18.83.11/24" },
  { node = "s2", endpoint = "2001:2:0:82::12", address = "198.18.83.12/24", implementation = "wireguard-go" },
]
"#,
    )
    .unwrap();
    let dry = tunbench(&["up", file.to_str().unwrap(), "--dry-run"]);
    assert!(
        text(&dry).contains("sysctl -qw net.ipv4.ip_forward=1"),
        "{}",
        text(&dry)
    );
    let lab = lab_name("wghh");
    let _g = up_named(&file, &lab);
    assert!(
        ping(&lab, "s1", "198.18.83.12"),
        "s1 cannot reach s2 through the host hub"
    );
    assert!(
        ping(&lab, "s2", "198.18.83.11"),
        "s2 cannot reach s1 through the host hub"
    );
    let j = tunbench(&["check", &lab, "--json"]);
    assert_eq!(j.status.code(), Some(0), "{}", text(&j));
    let v: Value = serde_json::from_slice(&j.stdout).unwrap();
    let p = v["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["from"] == "s1" && p["addr"] == "198.18.83.12")
        .cloned()
        .expect("a probe s1 -> s2's inner address");
    assert!(p["unreachable_because"].is_null(), "{p}");
    assert_eq!(p["replied"], true, "{p}");
}

#[test]
fn persistent_keepalive_brings_the_session_up_without_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let file = topology(dir.path(), false, "tunbench");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "preshared_key = true",
            "preshared_key = true\nkeepalive = 1",
        ),
    )
    .unwrap();
    let lab = lab_name("wgka");
    let _g = up_named(&file, &lab);
    // No packet is sent through the tunnel; the keepalive timer alone makes
    // the handshake and then keeps sending.
    eventually("a handshake without traffic", || {
        peers(&lab, "a")["peers"][0]["latest_handshake_secs"]
            .as_f64()
            .is_some()
    });
    // Then keepalives keep coming with nothing else to send: five more
    // packets at b. Without the timer an idle session sends its handshake
    // and the confirmation (which the stats file, rewritten every second,
    // may count late), then nothing.
    let first = stats(&lab, "b")["net_rx"]["packets"].as_u64().unwrap();
    eventually("five more packets (keepalives) at b", || {
        stats(&lab, "b")["net_rx"]["packets"].as_u64().unwrap() >= first + 5
    });
}

/// Whether this kernel makes WireGuard devices, asked of `ip` in a network
/// namespace of its own that nobody names (nothing is left behind).
fn kernel_makes_wireguard() -> bool {
    Command::new("unshare")
        .args(["--net", "ip", "link", "add", "probe0", "type", "wireguard"])
        .output()
        .expect("unshare and ip")
        .status
        .success()
}

/// `validate` asks the kernel: where it has no WireGuard (this project's
/// development machines), a peer with `implementation = "kernel"` is refused
/// with the file's line and key, the missing feature and what to use
/// instead, exit 2; where it has, the file is valid.
#[test]
fn validate_refuses_a_kernel_peer_where_the_kernel_has_no_wireguard() {
    let dir = tempfile::tempdir().unwrap();
    let file = topology(dir.path(), false, "kernel");
    let o = tunbench(&["validate", file.to_str().unwrap()]);
    let said = text(&o);
    if kernel_makes_wireguard() {
        assert!(o.status.success(), "{said}");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(
        said.contains("wg-4-kernel.toml:14:111:")
            && said.contains("tunnels.wg.peers[1].implementation")
            && said.contains("the kernel lacks `wireguard`")
            && said.contains("\"tunbench\""),
        "{said}"
    );
    // A file for another machine is not held to this kernel.
    let o = tunbench(&["validate", "--file-only", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}
