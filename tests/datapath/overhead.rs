//! The per-packet overhead tunbench states for each tunnel kind (`tunbench
//! status`, and the notes of `tunbench run`) against captured packets: one lab
//! with a WireGuard tunnel, ESP over an IPv6 underlay, bare L2TP with
//! sequence numbers and L2TP/IPsec over raw ESP, each on its own link. Inner
//! packets of four sizes in a row cover every ESP padding length. The frames
//! are read from a packet socket on b's end of each link, as tshark reads
//! them.

use crate::common::*;
use serde_json::Value;
use socket2::Socket;
use std::os::fd::{AsRawFd, FromRawFd};

const TOPOLOGY: &str = r#"name = "overhead"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.100.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.100.2/24" }
[[links]]
a = { port = "a:eth1", ipv6 = "2001:2:0:101::1/64" }
b = { port = "b:eth1", ipv6 = "2001:2:0:101::2/64" }
[[links]]
a = { port = "a:eth2", ipv4 = "198.18.102.1/24" }
b = { port = "b:eth2", ipv4 = "198.18.102.2/24" }
[[links]]
a = { port = "a:eth3", ipv4 = "198.18.103.1/24" }
b = { port = "b:eth3", ipv4 = "198.18.103.2/24" }
[tunnels.wg]
kind = "wireguard"
peers = [
  { node = "a", endpoint = "198.18.100.1", address = "198.18.104.1/24" },
  { node = "b", endpoint = "198.18.100.2", address = "198.18.104.2/24" },
]
[tunnels.esp6]
kind = "esp"
ends = [
  { node = "a", endpoint = "2001:2:0:101::1", address = "198.18.105.1/24" },
  { node = "b", endpoint = "2001:2:0:101::2", address = "198.18.105.2/24" },
]
[tunnels.l2]
kind = "l2tp"
sequence = true
ends = [
  { node = "a", endpoint = "198.18.102.1", address = "198.18.106.1/24" },
  { node = "b", endpoint = "198.18.102.2", address = "198.18.106.2/24" },
]
[tunnels.l2sec]
kind = "l2tp"
ipsec = true
encap = "raw"
ends = [
  { node = "a", endpoint = "198.18.103.1", address = "198.18.107.1/24" },
  { node = "b", endpoint = "198.18.103.2", address = "198.18.107.2/24" },
]
"#;

/// A packet socket on `iface` of namespace `ns`: every frame that crosses
/// it, either way, Ethernet header included, from now on; nonblocking.
fn frames_on(ns: &str, iface: &str) -> Socket {
    let iface = std::ffi::CString::new(iface).unwrap();
    let what = format!("a packet socket on {ns}:{iface:?}");
    in_ns(ns, move || {
        let all = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: socket(2) returns a new descriptor or -1; the address is a
        // zeroed sockaddr_ll passed with its size.
        unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                i32::from(all),
            );
            assert!(fd >= 0, "{what}: {}", std::io::Error::last_os_error());
            let s = Socket::from_raw_fd(fd);
            let mut at: libc::sockaddr_ll = std::mem::zeroed();
            at.sll_family = libc::AF_PACKET as u16;
            at.sll_protocol = all;
            at.sll_ifindex = libc::if_nametoindex(iface.as_ptr()) as i32;
            let len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            let bound = libc::bind(s.as_raw_fd(), (&raw const at).cast(), len);
            assert_eq!(bound, 0, "{what}: {}", std::io::Error::last_os_error());
            s
        }
    })
}

/// The frames a nonblocking socket of `frames_on` holds.
fn take_frames(s: &Socket) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [std::mem::MaybeUninit::new(0u8); 2048];
    while let Ok(n) = s.recv(&mut buf) {
        // SAFETY: recv wrote the first n bytes.
        out.push(
            buf[..n]
                .iter()
                .map(|b| unsafe { b.assume_init() })
                .collect(),
        );
    }
    out
}

/// Which frames carry a tunnel: IPv6 or not, its IP protocol, and its UDP
/// port (either end) if it is UDP.
#[derive(Clone, Copy)]
struct Carrier {
    v6: bool,
    proto: u8,
    port: Option<u16>,
}

impl Carrier {
    fn carries(&self, f: &[u8]) -> bool {
        self.matches(f).unwrap_or(false)
    }

    /// None: no IP packet of a kind this reads (or a truncated one).
    fn matches(&self, f: &[u8]) -> Option<bool> {
        let (v6, proto, l4) = match f.get(12..14)? {
            [0x08, 0x00] => (false, *f.get(23)?, 14 + usize::from(f.get(14)? & 0x0f) * 4),
            [0x86, 0xdd] => (true, *f.get(20)?, 54),
            _ => return None,
        };
        if (v6, proto) != (self.v6, self.proto) {
            return Some(false);
        }
        let Some(port) = self.port else {
            return Some(true);
        };
        let at = |i: usize| Some(u16::from_be_bytes([*f.get(i)?, *f.get(i + 1)?]));
        Some(at(l4)? == port || at(l4 + 2)? == port)
    }
}

/// The outer IP packet's bytes beyond the inner one of an echo of `size`
/// bytes of ICMP payload from `LAB-a` to `to`, in every frame of `carrier`
/// over 1000 bytes the echo (request and reply) put on `capture`.
fn overheads_of_an_echo(
    lab: &str,
    to: &str,
    size: u64,
    capture: &Socket,
    carrier: Carrier,
) -> Vec<u64> {
    take_frames(capture);
    eventually(&format!("an echo of {size} bytes to {to}"), || {
        ping_from(lab, "a", &["-s", &size.to_string(), to])
    });
    // Both frames of the answered echo crossed b's end before the answer
    // reached a: the socket holds them.
    take_frames(capture)
        .into_iter()
        .filter(|f| f.len() > 1000 && carrier.carries(f))
        // Outer IP packet = frame - Ethernet 14; inner = ICMP payload + 8 + 20.
        .map(|f| f.len() as u64 - 14 - (size + 28))
        .collect()
}

#[test]
fn stated_overhead_matches_captured_packets_for_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("overhead.toml");
    std::fs::write(&file, TOPOLOGY).unwrap();
    let lab = lab_name("ovh");
    let _g = up_named(&file, &lab);
    let o = tunbench(&["status", &lab, "--json"]);
    let status: Value = serde_json::from_slice(&o.stdout).unwrap();
    let stated = |name: &str| -> (u64, u64) {
        let t = status[0]["tunnels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tunnel {name} in {status}"));
        (
            t["sizes"]["overhead_min"].as_u64().unwrap(),
            t["sizes"]["overhead_max"].as_u64().unwrap(),
        )
    };
    // Expected from the formats: outer IP 20/40, UDP 8, WireGuard 32; ESP 8 +
    // IV 8 + pad 0-3 + 2 + ICV 16; L2TP 6 (+4 with Ns/Nr) + PPP 4.
    let udp = |v6, port| Carrier {
        v6,
        proto: 17,
        port: Some(port),
    };
    let esp = Carrier {
        v6: false,
        proto: 50,
        port: None,
    };
    for (tunnel, iface, carrier, to, expected) in [
        ("wg", "eth0", udp(false, 51820), "198.18.104.2", (60, 60)),
        ("esp6", "eth1", udp(true, 4500), "198.18.105.2", (82, 85)),
        ("l2", "eth2", udp(false, 1701), "198.18.106.2", (42, 42)),
        ("l2sec", "eth3", esp, "198.18.107.2", (72, 75)),
    ] {
        let capture = frames_on(&format!("{lab}-b"), iface);
        let mut seen = Vec::new();
        for size in 1000..1004u64 {
            let each = overheads_of_an_echo(&lab, to, size, &capture, carrier);
            assert!(
                !each.is_empty() && each.iter().all(|o| *o == each[0]),
                "{tunnel}: an echo of {size} bytes on {iface}: overheads {each:?}"
            );
            seen.push(each[0]);
        }
        let measured = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
        eprintln!(
            "{tunnel}: {seen:?} bytes per packet captured, {:?} stated",
            stated(tunnel)
        );
        assert_eq!(measured, stated(tunnel), "{tunnel}: captured {seen:?}");
        // And what the wire formats' RFCs say.
        assert_eq!(measured, expected, "{tunnel}");
    }
}
