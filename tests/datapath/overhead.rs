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
/// it, either way, Ethernet header included, from now on; nonblocking. Each
/// frame comes behind its virtio-net header, which says whether it is a
/// super-packet (several datagrams a sender handed the kernel as one).
pub(crate) fn frames_on(ns: &str, iface: &str) -> Socket {
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
            setsockopt_int(s.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1);
            let bound = libc::bind(s.as_raw_fd(), (&raw const at).cast(), len);
            assert_eq!(bound, 0, "{what}: {}", std::io::Error::last_os_error());
            s
        }
    })
}

/// One frame of `frames_on`, and the payload bytes per datagram if it is a
/// super-packet (the virtio-net header's GSO size), else 0.
struct Frame {
    bytes: Vec<u8>,
    gso_size: usize,
}

/// The frames a nonblocking socket of `frames_on` holds.
fn take_frames(s: &Socket) -> Vec<Frame> {
    const VNET: usize = 10;
    let mut out = Vec::new();
    let mut buf = vec![std::mem::MaybeUninit::new(0u8); VNET + 65_536 + 14];
    loop {
        let n = match s.recv(&mut buf) {
            Ok(n) => n,
            // A kernel before 6.2 cannot describe a UDP super-packet: the
            // read fails and the frame is gone.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => continue,
            Err(_) => break,
        };
        // SAFETY: recv wrote the first n bytes.
        let read: Vec<u8> = buf[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert!(n >= VNET, "a read of {n} bytes has no virtio-net header");
        out.push(Frame {
            gso_size: usize::from(u16::from_ne_bytes([read[4], read[5]])),
            bytes: read[VNET..].to_vec(),
        });
    }
    out
}

/// Which frames carry a tunnel: IPv6 or not, its IP protocol, and its UDP
/// port (either end) if it is UDP.
#[derive(Clone, Copy)]
pub(crate) struct Carrier {
    pub(crate) v6: bool,
    pub(crate) proto: u8,
    pub(crate) port: Option<u16>,
}

impl Carrier {
    fn carries(&self, f: &[u8]) -> bool {
        self.matches(f).unwrap_or(false)
    }

    /// IPv6 or not, the IP protocol and where its header ends in frame `f`.
    fn ip(f: &[u8]) -> Option<(bool, u8, usize)> {
        Some(match f.get(12..14)? {
            [0x08, 0x00] => (false, *f.get(23)?, 14 + usize::from(f.get(14)? & 0x0f) * 4),
            [0x86, 0xdd] => (true, *f.get(20)?, 54),
            _ => return None,
        })
    }

    /// The IP packets' lengths on a wire: the frame's, or each full
    /// datagram's of a UDP super-packet.
    fn wire_len(f: &Frame) -> usize {
        match (f.gso_size, Carrier::ip(&f.bytes)) {
            (0, _) => f.bytes.len() - 14,
            (gso, Some((_, 17, l4))) => l4 - 14 + 8 + gso,
            (gso, _) => panic!("a super-packet of {gso}-byte segments that is not UDP"),
        }
    }

    /// None: no IP packet of a kind this reads (or a truncated one).
    fn matches(&self, f: &[u8]) -> Option<bool> {
        let (v6, proto, l4) = Carrier::ip(f)?;
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
pub(crate) fn overheads_of_an_echo(
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
    // A request and its retry may cross as one super-packet: each counts as
    // a datagram. Inner IP packet = ICMP payload + 8 + 20.
    take_frames(capture)
        .into_iter()
        .filter(|f| f.bytes.len() > 1000 && carrier.carries(&f.bytes))
        .map(|f| Carrier::wire_len(&f) as u64 - (size + 28))
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

/// Three UDP datagrams sent as one super-packet (UDP_SEGMENT, as tunbench's
/// datapaths send) cross a veth whole; the capture behind the `overhead`
/// assertion counts the three datagrams a wire carries, not one long packet.
#[test]
fn the_overhead_capture_counts_a_udp_super_packet_as_its_datagrams() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gso.toml");
    std::fs::write(
        &file,
        r#"name = "gso"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.108.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.108.2/24" }
"#,
    )
    .unwrap();
    let lab = lab_name("gsocap");
    let _g = up_named(&file, &lab);
    let b = format!("{lab}-b");
    let plain = frames_on(&b, "eth0");
    let mut capture = in_ns(&b, || {
        tunbench::verify::capture::Capture::on("eth0").unwrap()
    });
    in_ns(&format!("{lab}-a"), || {
        let s = std::net::UdpSocket::bind("198.18.108.1:0").unwrap();
        setsockopt_int(s.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT, 1000);
        s.send_to(&[0x5a; 2500], "198.18.108.2:9").unwrap();
    });
    let (mut whole, mut lengths, mut undescribed) = (Vec::new(), Vec::new(), 0);
    eventually("the super-packet's datagrams in the capture", || {
        whole.extend(
            take_frames(&plain)
                .into_iter()
                .filter(|f| f.gso_size > 0)
                .map(|f| (f.bytes.len() - 14, f.gso_size)),
        );
        let arrived = capture.arrived();
        undescribed += arrived.undescribed;
        lengths.extend(arrived.lengths.into_iter().filter(|l| *l > 500));
        undescribed > 0 || (!whole.is_empty() && lengths.len() >= 3)
    });
    if undescribed == 0 {
        // One packet of 2528 bytes crossed; a wire carries 1028 + 1028 + 528.
        assert_eq!(whole, [(2528, 1000)], "what crossed whole");
        assert_eq!(lengths, [1028, 1028, 528]);
    } else {
        // A kernel before 6.2 reads no UDP super-packet to a packet socket:
        // the capture says so and reports no length it did not see.
        assert_eq!((undescribed, &lengths), (1, &vec![]), "{whole:?}");
    }
}
