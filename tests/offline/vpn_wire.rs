//! VPN packets as tshark sees them. ESP sealed by tunbench (AES-GCM-128, RFC
//! 4106) in UDP encapsulation (RFC 3948) and raw, written to a pcap, then
//! dissected and, given the SA on tshark's command line, decrypted, with the
//! inner IPv4 packet shown; and L2TP data messages from tunbench's L2TP codec,
//! dissected as L2TP -> PPP -> IPv4. Wireshark's dissectors are independent
//! implementations of the same RFCs.

use std::process::Command;
use tunbench::codec::Codec;
use tunbench::codec::esp::{KeyMaterial, Outbound};
use tunbench::codec::l2tp::{L2tp, L2tpConfig};
use tunbench::wire::esp::NEXT_IPV4;

const KEY: [u8; 20] = [
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0xca, 0xfe, 0xba, 0xbe,
];
const SPI: u32 = 0x0000_1000;

fn checksum(b: &[u8]) -> u16 {
    tunbench::wire::checksum(b)
}

/// An IPv4 header (no options) for `payload` with protocol `proto`.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// An ICMP echo request with a recognisable payload.
fn inner_packet() -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    icmp.extend_from_slice(b"tunbench esp wire test");
    let c = checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    ipv4([198, 18, 91, 2], [198, 18, 91, 10], 1, &icmp)
}

/// A classic pcap file (little-endian, version 2.4, Ethernet) of `frames`.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        // zone, sigfigs, snaplen, link type Ethernet
        p.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for v in [i as u32 + 1, 0, f.len() as u32, f.len() as u32] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.extend_from_slice(f);
    }
    p
}

fn ethernet(ip: Vec<u8>) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend(ip);
    f
}

fn esp_packet() -> Vec<u8> {
    let mut o = Outbound::new(SPI, &KeyMaterial(KEY));
    let mut out = Vec::new();
    o.seal(&inner_packet(), NEXT_IPV4, &mut out).unwrap();
    out
}

fn tshark(file: &std::path::Path) -> String {
    tshark_with(file, &KEY)
}

fn tshark_with(file: &std::path::Path, key: &[u8; 20]) -> String {
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let sa = format!(
        "uat:esp_sa:\"IPv4\",\"198.18.70.1\",\"198.18.70.2\",\"{SPI:#010x}\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x{hex}\",\"NULL\",\"\""
    );
    let o = Command::new(crate::common::program("tshark"))
        .arg("-r")
        .arg(file)
        .args(["-o", "esp.enable_encryption_decode:TRUE", "-o", &sa, "-V"])
        .output()
        .expect("tshark is installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn check(out: &str) {
    assert!(out.contains("Encapsulating Security Payload"), "{out}");
    assert!(out.contains("ESP SPI: 0x00001000"), "{out}");
    assert!(out.contains("ESP Sequence: 1"), "{out}");
    // Decrypted with the SA: the ICV checked, the trailer read, the inner
    // packet dissected.
    assert!(out.contains("ESP Decrypted Data"), "{out}");
    assert!(out.contains("Next header: IPIP (0x04)"), "{out}");
    assert!(out.contains("Src: 198.18.91.2, Dst: 198.18.91.10"), "{out}");
    assert!(out.contains("Echo (ping) request"), "{out}");
}

#[test]
fn tshark_decrypts_our_esp_in_udp() {
    let esp = esp_packet();
    let mut udp = vec![0x11, 0x94, 0x11, 0x94];
    udp.extend_from_slice(&((8 + esp.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]); // IPv4 senders may leave it zero (RFC 3948)
    udp.extend_from_slice(&esp);
    let frame = ethernet(ipv4([198, 18, 70, 1], [198, 18, 70, 2], 17, &udp));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("esp-udp.pcap");
    std::fs::write(&f, pcap(&[frame])).unwrap();
    let out = tshark(&f);
    assert!(
        out.contains("User Datagram Protocol, Src Port: 4500"),
        "{out}"
    );
    check(&out);
    // With another key tshark cannot see inside: the check above means it.
    let mut wrong = KEY;
    wrong[0] ^= 1;
    let out = tshark_with(&f, &wrong);
    assert!(!out.contains("Echo (ping) request"), "{out}");
}

#[test]
fn tshark_decrypts_our_raw_esp() {
    let frame = ethernet(ipv4([198, 18, 70, 1], [198, 18, 70, 2], 50, &esp_packet()));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("esp-raw.pcap");
    std::fs::write(&f, pcap(&[frame])).unwrap();
    check(&tshark(&f));
}

#[test]
fn tshark_dissects_our_l2tp_as_ppp_and_ipv4() {
    for sequence in [false, true] {
        let mut c = L2tp::new(L2tpConfig {
            peer: "198.18.70.2:1701".parse().unwrap(),
            peer_tunnel: 0x1234,
            peer_session: 0x5678,
            tunnel: 1,
            session: 2,
            sequence,
            allowed: Vec::new(),
        });
        let mut p = inner_packet();
        c.handle_tun(&mut p, std::time::Instant::now());
        let mut udp = vec![0x06, 0xa5, 0x06, 0xa5];
        udp.extend_from_slice(&((8 + p.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(&p);
        let frame = ethernet(ipv4([198, 18, 70, 1], [198, 18, 70, 2], 17, &udp));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("l2tp.pcap");
        std::fs::write(&f, pcap(&[frame])).unwrap();
        let o = Command::new(crate::common::program("tshark"))
            .arg("-r")
            .arg(&f)
            .arg("-V")
            .output()
            .expect("tshark");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("Layer 2 Tunneling Protocol"), "{out}");
        assert!(out.contains("Tunnel ID: 4660"), "{out}");
        assert!(out.contains("Session ID: 22136"), "{out}");
        assert!(out.contains("Point-to-Point Protocol"), "{out}");
        assert!(
            out.contains("Protocol: Internet Protocol version 4 (0x0021)"),
            "{out}"
        );
        assert!(out.contains("Src: 198.18.91.2, Dst: 198.18.91.10"), "{out}");
        assert!(out.contains("Echo (ping) request"), "{out}");
        if sequence {
            assert!(out.contains("Ns: 0"), "{out}");
        }
    }
}
