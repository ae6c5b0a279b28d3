//! DS-Lite softwires end to end, as root in namespaces: NAT44 keyed per softwire
//! with two B4s that use the same private addresses, the kernel and userspace
//! datapaths with each other, MTU handling, tshark's view of the wire, and a
//! userspace decapsulator fed garbage.

use crate::common::*;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;

const INET: Ipv4Addr = Ipv4Addr::new(198, 18, 30, 10);
const PRIVATE: Ipv4Addr = Ipv4Addr::new(198, 18, 40, 2);
const POOL: Ipv4Addr = Ipv4Addr::new(198, 18, 31, 1);

/// tests/fixtures/dslite/two-b4.toml with each endpoint's datapath chosen.
fn two_b4(dir: &Path, aftr: &str, b4a: &str, b4b: &str) -> PathBuf {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dslite/two-b4.toml"),
    )
    .unwrap();
    let mut out = String::new();
    for line in base.lines() {
        let dp = if line.contains("node = \"aftr\"") {
            aftr
        } else if line.contains("node = \"b4a\"") {
            b4a
        } else if line.contains("node = \"b4b\"") {
            b4b
        } else {
            ""
        };
        if dp.is_empty() {
            out.push_str(line);
        } else {
            out.push_str(&line.replace("datapath = \"kernel\"", &format!("datapath = \"{dp}\"")));
        }
        out.push('\n');
    }
    let p = dir.join(format!("two-b4-{aftr}-{b4a}-{b4b}.toml"));
    std::fs::write(&p, out).unwrap();
    p
}

/// `up_ok`, or where `datapaths` ask for the kernel's on a kernel without SRv6
/// lightweight tunnels, the refusal checked (None).
fn up_softwire<const N: usize>(file: &Path, lab: &str, datapaths: [&str; N]) -> Option<LabGuard> {
    if datapaths.contains(&"kernel") {
        up_kernel_softwire(file, lab)
    } else {
        Some(up_ok(file, lab))
    }
}

fn up_ok(file: &Path, lab: &str) -> LabGuard {
    let (g, o) = up(file, lab);
    assert!(o.status.success(), "up failed: {}", text(&o));
    g
}

/// A TCP server on the IPv4 internet host that answers each of `n` clients with
/// the address it saw the client at.
fn echo_peer_server(lab: &str, n: usize) -> std::thread::JoinHandle<Vec<SocketAddr>> {
    let ns = format!("{lab}-inet");
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        netns::namespace::enter(&ns).expect("entering inet");
        let l = TcpListener::bind("0.0.0.0:7000").expect("bind 7000");
        tx.send(()).unwrap();
        let mut seen = Vec::new();
        for _ in 0..n {
            let (mut c, peer) = l.accept().expect("accept");
            let mut buf = [0u8; 64];
            let k = c.read(&mut buf).unwrap_or(0);
            let _ =
                c.write_all(format!("{} {peer}", String::from_utf8_lossy(&buf[..k])).as_bytes());
            seen.push(peer);
        }
        seen
    });
    rx.recv_timeout(BOUND).expect("server ready");
    h
}

/// Connect from `node` with a fixed private source address and port; returns the
/// server's answer.
fn client(lab: &str, node: &str, port: u16) -> String {
    let tag = node.to_string();
    in_ns(&format!("{lab}-{node}"), move || {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_reuse_address(true).unwrap();
        s.bind(&SocketAddr::V4(SocketAddrV4::new(PRIVATE, port)).into())
            .unwrap();
        s.connect_timeout(&SocketAddr::V4(SocketAddrV4::new(INET, 7000)).into(), BOUND)
            .unwrap_or_else(|e| panic!("{tag}: connecting through the softwire: {e}"));
        let mut s: std::net::TcpStream = s.into();
        s.set_read_timeout(Some(BOUND)).unwrap();
        s.write_all(tag.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    })
}

/// Both customers use 198.18.40.2 and the same source port: the AFTR must give
/// them different public ports and send each answer back into its own softwire.
fn nat44_keeps_two_b4s_apart(aftr: &str, b4: &str, tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let file = two_b4(dir.path(), aftr, b4, b4);
    let Some(_g) = up_softwire(&file, &lab, [aftr, b4]) else {
        return;
    };
    let server = echo_peer_server(&lab, 2);
    let a = client(&lab, "h1", 40000);
    let b = client(&lab, "h2", 40000);
    let seen = server.join().unwrap();
    assert!(a.starts_with("h1 "), "h1 got {a:?}");
    assert!(b.starts_with("h2 "), "h2 got {b:?}");
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(
            s.ip(),
            std::net::IpAddr::V4(POOL),
            "not NATed to the pool: {s}"
        );
    }
    assert_ne!(
        seen[0].port(),
        seen[1].port(),
        "two softwires share one public port: {seen:?}"
    );
}

#[test]
fn kernel_aftr_nat44_keeps_two_b4s_with_the_same_addresses_apart() {
    nat44_keeps_two_b4s_apart("kernel", "kernel", "dsk");
}

#[test]
fn userspace_aftr_nat44_keeps_two_b4s_with_the_same_addresses_apart() {
    nat44_keeps_two_b4s_apart("userspace", "userspace", "dsu");
}

#[test]
fn kernel_b4_works_with_a_userspace_aftr() {
    nat44_keeps_two_b4s_apart("userspace", "kernel", "dkb");
}

#[test]
fn userspace_b4_works_with_a_kernel_aftr() {
    nat44_keeps_two_b4s_apart("kernel", "userspace", "dub");
}

/// A kernel endpoint sends TCP into the softwire as GSO super-packets, and a
/// raw socket hands them to the userspace endpoint whole: it must cut them
/// back to the softwire's size on the way into its TUN, or the other side
/// gets packets that fit no link and bulk TCP crawls at one segment per
/// retransmission timeout. Both mixes; the echo makes both directions.
fn bulk_tcp_through_mixed_datapaths(aftr: &str, b4: &str, tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let file = two_b4(dir.path(), aftr, b4, b4);
    let Some(_g) = up_softwire(&file, &lab, [aftr, b4]) else {
        return;
    };
    traffic_both_ways(&lab, &[("h1", "inet", "198.18.30.10")]);
}

#[test]
fn bulk_tcp_from_a_kernel_aftr_to_a_userspace_b4() {
    bulk_tcp_through_mixed_datapaths("kernel", "userspace", "dbk");
}

#[test]
fn bulk_tcp_from_a_kernel_b4_to_a_userspace_aftr() {
    bulk_tcp_through_mixed_datapaths("userspace", "kernel", "dbu");
}

/// tshark on the IPv6-only core sees IPv6 with next header 4 carrying the
/// customer's IPv4 packet, with the addresses the topology gives.
#[test]
fn tshark_dissects_a_softwire_packet_as_ipv6_then_ipv4() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("dst");
    let file = two_b4(dir.path(), "auto", "auto", "auto");
    let _g = up_ok(&file, &lab);
    let mut cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{lab}-core"),
            "tshark",
            "-n",
            "-i",
            "a1",
            "-c",
            "1",
        ])
        .args(["-a", "duration:20", "-f", "ip6 proto 4", "-T", "fields"])
        .args([
            "-e",
            "ipv6.src",
            "-e",
            "ipv6.dst",
            "-e",
            "ipv6.nxt",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "udp.dstport",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tshark (Debian's tshark package; scripts/setup.sh installs it)");
    wait_until_capturing(&mut cap);
    // Datagrams until tshark has one (it gives up after 20 s by itself).
    let s = in_ns(&format!("{lab}-h1"), || {
        std::net::UdpSocket::bind("198.18.40.2:0").unwrap()
    });
    let _ = poll(BOUND, || {
        s.send_to(b"softwire", "198.18.30.10:9").unwrap();
        cap.try_wait().unwrap()
    });
    let out = cap.wait_with_output().unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = line.trim().split('\t').collect();
    assert_eq!(
        f,
        [
            "2001:2:0:a1::2",
            "2001:2:0:a0::2",
            "4",
            "198.18.40.2",
            "198.18.30.10",
            "9"
        ],
        "tshark said: {line:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The kernel B4 clamps the MSS of SYNs to mtu - 40 = 1420 both ways, so TCP
/// never sends what the softwire cannot carry.
#[test]
fn kernel_b4_clamps_the_mss_to_the_softwire() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("dms");
    let file = two_b4(dir.path(), "auto", "kernel", "auto");
    let Some(_g) = up_kernel_softwire(&file, &lab) else {
        return;
    };
    let ns = format!("{lab}-inet");
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        netns::namespace::enter(&ns).unwrap();
        let l = TcpListener::bind("0.0.0.0:7001").unwrap();
        tx.send(()).unwrap();
        let (c, _) = l.accept().unwrap();
        let mss = {
            use std::os::fd::AsRawFd;
            getsockopt_int(c.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG)
        };
        drop(c);
        mss
    });
    rx.recv().unwrap();
    in_ns(&format!("{lab}-h1"), || {
        std::net::TcpStream::connect_timeout(&"198.18.30.10:7001".parse().unwrap(), BOUND)
            .expect("connect through the softwire");
    });
    let mss = server.join().unwrap();
    assert!(
        mss <= 1420,
        "server-side MSS {mss} above the softwire's 1420"
    );
    assert!(
        mss >= 1380,
        "server-side MSS {mss} clamped further than asked"
    );
}

const IP_MTU: libc::c_int = 14;

/// A UDP socket with path MTU discovery set to `mode` (IP_PMTUDISC_DO: DF set
/// and the path MTU learnt; IP_PMTUDISC_DONT: DF clear).
fn udp_with_pmtu(bind: &str, mode: libc::c_int) -> std::net::UdpSocket {
    let s = std::net::UdpSocket::bind(bind).unwrap();
    set_pmtu(&s, mode);
    s
}

fn set_pmtu(s: &std::net::UdpSocket, mode: libc::c_int) {
    use std::os::fd::AsRawFd;
    setsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, mode);
}

fn path_mtu(s: &std::net::UdpSocket) -> libc::c_int {
    use std::os::fd::AsRawFd;
    getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, IP_MTU)
}

/// Sends DF datagrams of 1472 bytes (a 1500-byte packet) on a connected socket
/// until its path MTU drops (at most `BOUND`); returns (before, after, 1472
/// now refused locally, 1432 still goes).
fn converge(s: &std::net::UdpSocket) -> (libc::c_int, libc::c_int, bool, bool) {
    let before = path_mtu(s);
    // Whether it dropped, and to what, is for the caller to assert.
    let _ = poll(BOUND, || {
        let _ = s.send(&[0u8; 1472]);
        (path_mtu(s) < before).then_some(())
    });
    // Once converged the big datagram is refused locally and a fitting one goes.
    // (A port unreachable from the far end may surface as ECONNREFUSED on any
    // send; only EMSGSIZE says the datagram is too big.)
    let too_big =
        |r: std::io::Result<usize>| matches!(r, Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE));
    let refused = too_big(s.send(&[0u8; 1472]));
    // A send may first report an error queued by an earlier ICMP message.
    let fits = (0..3).any(|_| s.send(&[0u8; 1432]).is_ok());
    (before, path_mtu(s), refused, fits)
}

/// A DF datagram bigger than the softwire's 1460 bytes gets ICMP fragmentation
/// needed from the B4, and the sender's path MTU converges to 1460.
fn b4_answers_df_packets_too_big(b4: &str, tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let file = two_b4(dir.path(), "auto", b4, "auto");
    let Some(_g) = up_softwire(&file, &lab, [b4]) else {
        return;
    };
    let mtu = in_ns(&format!("{lab}-h1"), || {
        let s = udp_with_pmtu("198.18.40.2:0", libc::IP_PMTUDISC_DO);
        s.connect("198.18.30.10:9").unwrap();
        converge(&s)
    });
    assert_eq!(mtu.0, 1500, "{b4} B4: path MTU before: {mtu:?}");
    assert_eq!(
        mtu.1, 1460,
        "{b4} B4: path MTU after ICMP fragmentation needed: {mtu:?}"
    );
    assert!(mtu.2 && mtu.3, "{b4} B4: {mtu:?}");
}

#[test]
fn userspace_b4_answers_df_packets_too_big_and_pmtu_converges() {
    b4_answers_df_packets_too_big("userspace", "dpm");
}

#[test]
fn kernel_b4_answers_df_packets_too_big_and_pmtu_converges() {
    b4_answers_df_packets_too_big("kernel", "dpk");
}

/// The other way: a server on the internet answers a customer with a DF-clear
/// datagram too big for the softwire, which arrives whole; then with DF ones,
/// which the AFTR answers with ICMP fragmentation needed (its quoted packet
/// translated back through the NAT44), and the server's path MTU to the pool
/// address converges.
fn aftr_answers_df_packets_too_big(aftr: &str, tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let file = two_b4(dir.path(), aftr, "auto", "auto");
    let Some(_g) = up_softwire(&file, &lab, [aftr]) else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let ns = format!("{lab}-inet");
    let server = std::thread::spawn(move || {
        netns::namespace::enter(&ns).unwrap();
        let s = udp_with_pmtu("0.0.0.0:7003", libc::IP_PMTUDISC_DO);
        s.set_read_timeout(Some(BOUND)).unwrap();
        tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        let (_, customer) = s.recv_from(&mut buf).expect("the customer's hello");
        s.connect(customer).unwrap();
        // From the same socket: the NAT44 lets only the customer's peer back in.
        set_pmtu(&s, libc::IP_PMTUDISC_DONT);
        s.send(&[9u8; 1472]).unwrap();
        // The customer has it (or never will) before DF probes follow.
        s.recv(&mut buf).ok();
        set_pmtu(&s, libc::IP_PMTUDISC_DO);
        (customer, converge(&s))
    });
    rx.recv().unwrap();
    let got = in_ns(&format!("{lab}-h1"), || {
        let s = std::net::UdpSocket::bind("198.18.40.2:40001").unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        s.send_to(b"hello", "198.18.30.10:7003").unwrap();
        let mut buf = [0u8; 4000];
        let got = s.recv(&mut buf).ok();
        s.send_to(b"done", "198.18.30.10:7003").unwrap();
        got
    });
    let (customer, mtu) = server.join().unwrap();
    assert_eq!(customer.ip(), std::net::IpAddr::V4(POOL), "{customer}");
    assert_eq!(mtu.0, 1500, "{aftr} AFTR: path MTU before: {mtu:?}");
    assert_eq!(
        mtu.1, 1460,
        "{aftr} AFTR: server's path MTU after ICMP fragmentation needed: {mtu:?}"
    );
    assert!(mtu.2 && mtu.3, "{aftr} AFTR: {mtu:?}");
    assert_eq!(
        got,
        Some(1472),
        "{aftr} AFTR: the DF-clear datagram did not arrive whole"
    );
}

#[test]
fn kernel_aftr_answers_df_packets_too_big_and_pmtu_converges() {
    aftr_answers_df_packets_too_big("kernel", "dak");
}

#[test]
fn userspace_aftr_answers_df_packets_too_big_and_pmtu_converges() {
    aftr_answers_df_packets_too_big("userspace", "dau");
}

/// Sends one DF-clear datagram of 1472 bytes from h1 through the softwire and
/// captures the underlay between b4a and the core with tshark, reassembly off:
/// returns (bytes the server got, one line per captured packet of `field`).
fn df_clear_through_b4(
    aftr: &str,
    b4: &str,
    tag: &str,
    filter: &str,
    field: &str,
) -> Option<(usize, String)> {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name(tag);
    let file = two_b4(dir.path(), aftr, b4, "auto");
    let _g = up_softwire(&file, &lab, [aftr, b4])?;
    let ns = format!("{lab}-inet");
    let (tx, rx) = std::sync::mpsc::channel();
    let (sent, was_sent) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        netns::namespace::enter(&ns).unwrap();
        let s = std::net::UdpSocket::bind("0.0.0.0:7002").unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        tx.send(()).unwrap();
        // The bound counts from the send, not from tshark's start-up before it
        // (the socket holds the datagram meanwhile).
        let _ = was_sent.recv();
        let mut buf = [0u8; 4000];
        match s.recv_from(&mut buf) {
            Ok((n, from)) => {
                assert_eq!(from.ip(), std::net::IpAddr::V4(POOL), "not NATed: {from}");
                n
            }
            Err(_) => 0,
        }
    });
    rx.recv().unwrap();
    let mut cap = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{lab}-core"),
            "tshark",
            "-n",
            "-i",
            "a1",
            "-c",
            "2",
        ])
        .args([
            "-o",
            "ipv6.defragment:FALSE",
            "-o",
            "ip.defragment:FALSE",
            "-a",
            "duration:20",
            "-f",
            filter,
            "-T",
            "fields",
            "-e",
            field,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tshark");
    wait_until_capturing(&mut cap);
    in_ns(&format!("{lab}-h1"), || {
        let s = udp_with_pmtu("198.18.40.2:0", libc::IP_PMTUDISC_DONT);
        s.send_to(&[7u8; 1472], "198.18.30.10:7002").unwrap();
    });
    drop(sent);
    let got = server.join().unwrap();
    let out = cap.wait_with_output().unwrap();
    Some((got, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// With DF clear, the userspace B4 sends a too-big inner packet whole: the IPv6
/// packet is fragmented after encapsulation (RFC 2473 7.2), never the IPv4 one,
/// and the far side gets the datagram intact.
#[test]
fn userspace_b4_fragments_the_ipv6_packet_not_the_inner_one() {
    for aftr in ["userspace", "kernel"] {
        let Some((got, frags)) = df_clear_through_b4(
            aftr,
            "userspace",
            &format!("dfr{}", &aftr[..1]),
            "ip6 proto 44",
            "ipv6.fraghdr.offset",
        ) else {
            continue;
        };
        assert_eq!(
            got, 1472,
            "{aftr} AFTR: the datagram did not arrive whole (reassembled before decapsulation)"
        );
        assert_eq!(
            frags.lines().count(),
            2,
            "expected two IPv6 fragments on the underlay: {frags:?}"
        );
    }
}

/// The kernel datapath cannot fragment after encapsulation (ip6_forward never
/// fragments a forwarded packet), so its MTU gate fragments the DF-clear IPv4
/// packet before it enters the softwire: two whole IPv6 packets, each carrying an
/// IPv4 fragment, and the far side gets the datagram intact.
#[test]
fn kernel_b4_fragments_a_df_clear_packet_before_the_softwire() {
    let Some((got, frags)) =
        df_clear_through_b4("kernel", "kernel", "dfk", "ip6 proto 4", "ip.frag_offset")
    else {
        return;
    };
    assert_eq!(got, 1472, "the datagram did not arrive whole");
    let offsets: Vec<&str> = frags.lines().collect();
    assert_eq!(
        offsets.len(),
        2,
        "expected two softwire packets with IPv4 fragments: {frags:?}"
    );
    assert_eq!(offsets[0], "0", "{frags:?}");
    assert_ne!(
        offsets[1], "0",
        "the second is not a later fragment: {frags:?}"
    );
}

/// Garbage at the userspace decapsulator is dropped and counted, and traffic
/// keeps flowing.
#[test]
fn userspace_decapsulator_drops_and_counts_bad_packets() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("dbd");
    let file = two_b4(dir.path(), "auto", "userspace", "auto");
    let _g = up_ok(&file, &lab);
    let stats = state_dir(&lab).join("datapath-sw-b4a.json");
    // From the AFTR's own address (the only peer the B4 accepts) and from a
    // stranger: truncated IPv4, a lying total length, not IPv4 at all.
    in_ns(&format!("{lab}-aftr"), || {
        let s = socket2::Socket::new(
            socket2::Domain::IPV6,
            socket2::Type::RAW,
            Some(socket2::Protocol::from(4)),
        )
        .unwrap();
        s.bind(&"[2001:2:0:a0::2]:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let to: socket2::SockAddr = "[2001:2:0:a1::2]:0".parse::<SocketAddr>().unwrap().into();
        let mut lying = vec![
            0x45u8, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 30, 10, 198, 18, 40, 2,
        ];
        lying.extend_from_slice(&[0; 8]);
        for p in [&[0x45u8, 0, 0][..], &lying[..], &[0x60u8; 40][..]] {
            s.send_to(p, &to).unwrap();
        }
    });
    // The stats file is rewritten every second.
    wait_for_file(&stats, "the B4 counts the 3 bad packets as drops", |t| {
        let j: serde_json::Value = serde_json::from_str(t).unwrap();
        let drops = j["drops"].as_object().expect("drops in stats");
        drops.values().filter_map(|v| v.as_u64()).sum::<u64>() >= 3
    });
    // Still forwarding.
    let server = echo_peer_server(&lab, 1);
    let a = client(&lab, "h1", 40001);
    server.join().unwrap();
    assert!(a.starts_with("h1 "), "{a}");
}

#[test]
fn down_stops_userspace_datapaths_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("ddn");
    let file = two_b4(dir.path(), "userspace", "userspace", "userspace");
    let g = up_ok(&file, &lab);
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir(&lab).join("state.json")).unwrap())
            .unwrap();
    let pids: Vec<i64> = st["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"]["pid"].as_i64())
        .collect();
    assert_eq!(pids.len(), 3, "one datapath per userspace endpoint: {st}");
    drop(g);
    for p in pids {
        assert!(process_ended(p), "datapath {p} still running");
    }
    assert_gone(&lab);
}

/// The shipped small topology: every probe the routing model (which knows the
/// softwire and its NAT44) expects answers, with either datapath.
#[test]
fn dslite_topology_checks_clean_with_both_datapaths() {
    for scenario in ["kernel", "userspace"] {
        let lab = lab_name(&format!("dc{}", &scenario[..1]));
        let g = LabGuard(lab.clone());
        let o = tunbench(&[
            "up",
            topo("dslite.toml").to_str().unwrap(),
            "--name",
            &lab,
            "--scenario",
            scenario,
        ]);
        assert!(o.status.success(), "{scenario}: {}", text(&o));
        // The kernel scenario is datapath = "auto": the kernel's softwire, or
        // tunbench's own with a word on a kernel without SRv6 tunnels.
        assert_eq!(
            text(&o).contains("runs in tunbench's userspace datapath"),
            scenario == "kernel" && !kernel_has_seg6(),
            "{scenario}: {}",
            text(&o)
        );
        let c = tunbench(&["check", &lab]);
        assert_eq!(c.status.code(), Some(0), "{scenario}:\n{}", text(&c));
        assert!(text(&c).contains("0 did not"), "{}", text(&c));
        drop(g);
        assert_gone(&lab);
    }
}

/// IPv6 fragments that never complete stay in the kernel's bounded reassembly
/// (ip6frag_time 5 s in a userspace endpoint's namespace; the kernel's memory
/// thresholds) and never reach the decapsulator; the softwire keeps working.
#[test]
fn incomplete_ipv6_fragments_never_reach_the_userspace_decapsulator() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("dif");
    let file = two_b4(dir.path(), "auto", "userspace", "auto");
    let _g = up_ok(&file, &lab);
    let b4 = format!("{lab}-b4a");
    let reasm = |ns: &str| -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", "/proc/net/snmp6"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("Ip6ReasmReqds"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let before = reasm(&b4);
    // First fragments (offset 0, more fragments) of protocol-4 packets that
    // never get their second halves, from the core router (the AFTR's conntrack
    // would hold its own outgoing fragments back for reassembly).
    in_ns(&format!("{lab}-core"), || {
        let s = socket2::Socket::new(
            socket2::Domain::IPV6,
            socket2::Type::RAW,
            Some(socket2::Protocol::from(44)),
        )
        .unwrap();
        s.bind(&"[2001:2:0:a1::1]:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let to: socket2::SockAddr = "[2001:2:0:a1::2]:0".parse::<SocketAddr>().unwrap().into();
        for id in 0..100u32 {
            // Fragment header: next header 4, reserved, offset 0 + M flag, ident.
            let mut p = vec![4u8, 0, 0, 1];
            p.extend_from_slice(&(0x7000_0000 + id).to_be_bytes());
            p.extend_from_slice(&[0x45; 64]);
            s.send_to(&p, &to).unwrap();
        }
    });
    eventually("the kernel takes the 100 fragments into reassembly", || {
        reasm(&b4) >= before + 100
    });
    // A stats file written after that (it is rewritten every second).
    let path = state_dir(&lab).join("datapath-sw-b4a.json");
    let uptime = |t: &str| -> f64 {
        let j: serde_json::Value = serde_json::from_str(t).unwrap();
        j["uptime_seconds"].as_f64().expect("uptime_seconds")
    };
    let then = uptime(&wait_for_file(&path, "the B4's stats", |_| true));
    let stats = wait_for_file(&path, "the B4's stats rewritten", |t| uptime(t) > then);
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(
        stats["net_rx"]["packets"], 0,
        "a fragment reached the decapsulator: {stats}"
    );
    let server = echo_peer_server(&lab, 1);
    let a = client(&lab, "h1", 40002);
    server.join().unwrap();
    assert!(a.starts_with("h1 "), "{a}");
}

/// A userspace AFTR with `max_mappings_per_b4 = 2`: h1 (behind b4a) opens
/// five UDP flows and only two get through; h2 (behind b4b) is unaffected.
#[test]
fn userspace_aftr_holds_each_b4_to_its_mapping_limit() {
    let dir = tempfile::tempdir().unwrap();
    let lab = lab_name("dpb4lim");
    let base = two_b4(dir.path(), "userspace", "auto", "auto");
    let text = std::fs::read_to_string(&base).unwrap().replace(
        "pool = \"198.18.31.1\",",
        "pool = \"198.18.31.1\", max_mappings_per_b4 = 2,",
    );
    assert!(text.contains("max_mappings_per_b4 = 2"));
    let file = dir.path().join("limit.toml");
    std::fs::write(&file, text).unwrap();
    let _g = up_ok(&file, &lab);
    let rx = in_ns(&format!("{lab}-inet"), || {
        std::net::UdpSocket::bind(SocketAddrV4::new(INET, 7001)).unwrap()
    });
    let send = |node: &str, ports: std::ops::Range<u16>| {
        in_ns(&format!("{lab}-{node}"), move || {
            for port in ports {
                let s = std::net::UdpSocket::bind(SocketAddrV4::new(PRIVATE, port)).unwrap();
                s.send_to(b"flow", SocketAddrV4::new(INET, 7001)).unwrap();
            }
        })
    };
    send("h1", 41000..41005);
    send("h2", 42000..42001);
    // The flows that pass arrive, and the AFTR counts the three it refused
    // (its stats file is rewritten every second): nothing else is on its way.
    let want = [41000, 41001, 42000];
    let mut seen = std::collections::BTreeSet::new();
    let mut buf = [0u8; 64];
    rx.set_read_timeout(Some(BOUND)).unwrap();
    while !want.iter().all(|p| seen.contains(p)) {
        match rx.recv_from(&mut buf) {
            Ok((_, from)) => seen.insert(from.port()),
            Err(e) => panic!("flows {want:?} expected, {seen:?} arrived, then {e}"),
        };
    }
    let stats = state_dir(&lab).join("datapath-sw-aftr.json");
    let j = wait_for_file(&stats, "the AFTR counts 3 mapping_limit drops", |t| {
        let j: serde_json::Value = serde_json::from_str(t).unwrap();
        j["drops"]["mapping_limit"].as_u64().unwrap_or(0) >= 3
    });
    let j: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(j["drops"]["mapping_limit"], 3, "{j}");
    rx.set_nonblocking(true).unwrap();
    while let Ok((_, from)) = rx.recv_from(&mut buf) {
        seen.insert(from.port());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        want,
        "h1's first two flows and h2's (ports preserved)"
    );
}

/// `validate` says what "auto" takes on this kernel and refuses an explicit
/// kernel softwire the kernel cannot make, naming where; `--file-only` checks
/// the file for a kernel that has everything. No namespace is made.
#[test]
fn validate_tells_the_softwire_datapath_this_kernel_gives() {
    let has = kernel_has_seg6();
    let shipped = topo("dslite.toml");
    let o = tunbench(&["validate", shipped.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        text(&o).contains("note: DS-Lite tunnel sw runs in tunbench's userspace datapath"),
        !has,
        "{}",
        text(&o)
    );
    let o = tunbench(&["validate", "--file-only", shipped.to_str().unwrap()]);
    assert!(
        o.status.success() && !text(&o).contains("note:"),
        "{}",
        text(&o)
    );

    let dir = tempfile::tempdir().unwrap();
    let file = two_b4(dir.path(), "kernel", "userspace", "userspace");
    let o = tunbench(&["validate", file.to_str().unwrap()]);
    if has {
        assert!(o.status.success(), "{}", text(&o));
    } else {
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            text(&o).contains(
                "tunnels.sw.aftr.datapath: datapath = \"kernel\" needs the kernel's softwire, and the kernel lacks `seg6`"
            ),
            "{}",
            text(&o)
        );
    }
    let o = tunbench(&["validate", "--file-only", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}
