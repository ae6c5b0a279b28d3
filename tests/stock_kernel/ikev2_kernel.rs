//! IKEv2 on strongSwan's kernel datapath (`datapath = "kernel"`), on a stock
//! kernel, which has xfrm ESP: `validate` takes it, `up` returns with both
//! child SAs INSTALLED as the kernel's xfrm states (no libipsec TUN), TCP and
//! UDP pass both ways, the underlay carries plain ESP (protocol 50, not UDP
//! 4500) costing what tunbench predicts, and the path MTU is the one it
//! predicts.

use crate::common::*;
use crate::kernel::stock_kernel;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use tunbench::codec::overhead::Encapsulation;

/// Two hosts, one link, an IKEv2 tunnel on the kernel datapath.
fn kernel_tunnel(dir: &Path) -> PathBuf {
    let text = r#"name = "swk"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.86.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.86.2/24" }
[tunnels.vpn]
kind = "ikev2"
datapath = "kernel"
ends = [
  { node = "a", endpoint = "198.18.86.1", address = ["198.18.87.1/24", "2001:2:0:87::1/64"] },
  { node = "b", endpoint = "198.18.86.2", address = ["198.18.87.2/24", "2001:2:0:87::2/64"] },
]
"#;
    let p = dir.join("ikev2-kernel.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn sa_file(lab: &str, node: &str) -> serde_json::Value {
    let p = state_dir(lab).join(format!("sa-vpn-{node}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn ip_in(lab: &str, node: &str, args: &[&str]) -> String {
    let o = std::process::Command::new(program("ip"))
        .args(["-n", &format!("{lab}-{node}")])
        .args(args)
        .output()
        .unwrap();
    text(&o)
}

/// A packet socket on `dev` of namespace `ns`, open before anything is sent,
/// so every IPv4 packet crossing it from then on is queued for the test.
fn packet_socket(ns: &str, dev: &'static str) -> OwnedFd {
    in_ns(ns, move || {
        // SAFETY: plain socket calls on a descriptor this closure owns.
        unsafe {
            let fd = libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM,
                (libc::ETH_P_IP as u16).to_be() as i32,
            );
            assert!(
                fd >= 0,
                "a packet socket: {}",
                std::io::Error::last_os_error()
            );
            let name = std::ffi::CString::new(dev).unwrap();
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
            sll.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            let r = libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(
                r,
                0,
                "binding to {dev}: {}",
                std::io::Error::last_os_error()
            );
            OwnedFd::from_raw_fd(fd)
        }
    })
}

/// The first IPv4 packet from `src` longer than `over` bytes that the socket
/// has or gets within BOUND.
fn packet_from(fd: &OwnedFd, src: Ipv4Addr, over: usize) -> Vec<u8> {
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 100_000,
    };
    // SAFETY: a valid socket and a timeval-sized option.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    let mut buf = vec![0u8; 65536];
    wait_for("an IPv4 packet from a's endpoint", BOUND, || {
        // SAFETY: the buffer outlives the call and its length is given.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        let p = buf.get(..usize::try_from(n).ok()?)?;
        (p.len() > over && p[0] >> 4 == 4 && p[12..16] == src.octets()).then(|| p.to_vec())
    })
}

#[test]
fn ikev2_on_the_kernel_datapath_installs_xfrm_sas_and_sends_plain_esp() {
    stock_kernel();
    let dir = tempfile::tempdir().unwrap();
    let file = kernel_tunnel(dir.path());
    let v = tunbench(&["validate", file.to_str().unwrap()]);
    assert!(v.status.success(), "this kernel has xfrm ESP: {}", text(&v));
    let lab = lab_name("sw");
    let _g = up_named(&file, &lab);
    // `up` returned: both child SAs INSTALLED, in the kernel, not in UDP.
    for node in ["a", "b"] {
        let f = sa_file(&lab, node);
        assert_eq!(f["datapath"], "kernel", "{node}: {f}");
        let c = &f["ike"][0]["children"][0];
        assert_eq!(c["state"], "INSTALLED", "{node}: {c}");
        assert_eq!(c["encap"], false, "{node}: no NAT between the ends: {c}");
        let states = ip_in(&lab, node, &["xfrm", "state"]);
        assert_eq!(states.matches("proto esp").count(), 2, "{node}: {states}");
        assert!(states.contains("rfc4106(gcm(aes))"), "{node}: {states}");
        assert!(!states.contains("encap type espinudp"), "{node}: {states}");
        let policies = ip_in(&lab, node, &["xfrm", "policy"]);
        assert!(policies.contains("dir out"), "{node}: {policies}");
        let tun = ip_in(&lab, node, &["link", "show", "ipsec0"]);
        assert!(
            tun.contains("does not exist"),
            "{node}: no libipsec TUN: {tun}"
        );
    }

    traffic_both_ways(
        &lab,
        &[("a", "b", "198.18.87.2"), ("b", "a", "2001:2:0:87::1")],
    );

    // What tunbench predicts for this tunnel.
    let t = tunbench::topology::load(&file, tunbench::topology::kernel::KernelFacts::FULL)
        .expect("the topology loads");
    let sizes = t.tunnels[0].sizes();
    assert_eq!(sizes.encapsulation, "ESP (protocol 50)");

    // On b's underlay: the 428-byte inner ping (IPv4 20 + ICMP 8 + 400) is
    // ESP, protocol 50, and costs what tunbench predicts; its 0xa5 pattern
    // is not in clear.
    let cap = packet_socket(&format!("{lab}-b"), "eth0");
    assert!(reaches(
        &lab,
        "a",
        &["-s", "400", "-p", "a5", "198.18.87.2"]
    ));
    let outer = packet_from(&cap, Ipv4Addr::new(198, 18, 86, 1), 300);
    let inner = 20 + 8 + 400;
    assert_eq!(outer[9], 50, "not ESP (protocol 50): {:02x?}", &outer[..28]);
    let total = u16::from_be_bytes([outer[2], outer[3]]) as usize;
    assert_eq!(total, outer.len());
    let predicted = Encapsulation::Esp { udp: false }.overhead(false, inner);
    assert_eq!(
        total - inner,
        predicted,
        "{total} bytes on the wire for {inner}"
    );
    assert!((sizes.overhead_min..=sizes.overhead_max).contains(&(total - inner)));
    assert!(
        !outer.windows(16).any(|w| w.iter().all(|&b| b == 0xa5)),
        "the inner ping is in clear on the underlay"
    );

    // The path MTU the kernel gives a socket into the tunnel is tunbench's.
    let mtu = in_ns(&format!("{lab}-a"), || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.connect("198.18.87.2:9").unwrap();
        getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU)
    });
    assert_eq!(
        mtu as u32, sizes.inner_mtu,
        "the kernel's path MTU into the SA"
    );

    let d = tunbench(&["down", &lab]);
    assert!(d.status.success(), "{}", text(&d));
    assert_gone(&lab);
}
