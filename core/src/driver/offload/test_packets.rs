//! Packets for the offload tests: TCP packets and TSO reads built with correct
//! lengths and checksums, and checks that a packet's checksums verify.

use super::checksum::{
    addrs, fold, ipv4_header_checksum, nonzero, pseudo_sum, sum, transport_checksum_ok,
};
use super::layout::{PROTO_TCP, put16, tcp};
use super::segment::{TunRead, split_tun_read};
use super::vnet_header::{F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6, VirtioNetHdr};

pub(crate) fn ip_ok(p: &[u8]) -> bool {
    if p[0] >> 4 == 6 {
        return true;
    }
    let ihl = (p[0] & 15) as usize * 4;
    fold(sum(&p[..ihl]) as u64) == 0xffff
}

pub(crate) fn l4_ok(p: &[u8]) -> bool {
    let (ip_len, v6, proto) = if p[0] >> 4 == 6 {
        (40, true, p[6])
    } else {
        ((p[0] & 15) as usize * 4, false, p[9])
    };
    transport_checksum_ok(p, ip_len, v6, proto)
}

pub(crate) const SRC4: [u8; 4] = [198, 18, 253, 1];
pub(crate) const DST4: [u8; 4] = [198, 18, 253, 2];
pub(crate) const SRC6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0, 0, 0, 1];
pub(crate) const DST6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 0, 0, 0xfd, 0, 0, 0, 0, 0, 0, 0, 2];
/// NOP, NOP, timestamps (kind 8, length 10).
pub(crate) const TS_OPTIONS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78];

pub(crate) struct Tcp<'a> {
    pub(crate) v6: bool,
    pub(crate) seq: u32,
    pub(crate) flags: u8,
    pub(crate) options: &'a [u8],
    pub(crate) payload: &'a [u8],
    pub(crate) ident: u16,
}

impl Default for Tcp<'_> {
    fn default() -> Self {
        Tcp {
            v6: false,
            seq: 0x0102_0304,
            flags: tcp::ACK_FLAG,
            options: &TS_OPTIONS,
            payload: b"",
            ident: 0x4000,
        }
    }
}

/// An IPv4 or IPv6 TCP packet with correct lengths and checksums
/// (`partial`: the TCP checksum field holds the pseudo-header sum instead, as in
/// a super-packet the kernel hands over with NEEDS_CSUM).
pub(crate) fn tcp_packet(t: &Tcp, partial: bool) -> Vec<u8> {
    let thl = 20 + t.options.len();
    let mut p = Vec::new();
    if t.v6 {
        p.extend_from_slice(&[0x60, 0, 0, 0]);
        p.extend_from_slice(&((thl + t.payload.len()) as u16).to_be_bytes());
        p.extend_from_slice(&[PROTO_TCP, 64]);
        p.extend_from_slice(&SRC6);
        p.extend_from_slice(&DST6);
    } else {
        let total = (20 + thl + t.payload.len()) as u16;
        p.extend_from_slice(&[0x45, 0]);
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&t.ident.to_be_bytes());
        p.extend_from_slice(&[0x40, 0, 64, PROTO_TCP, 0, 0]); // DF, TTL 64
        p.extend_from_slice(&SRC4);
        p.extend_from_slice(&DST4);
        ipv4_header_checksum(&mut p[..20]);
    }
    let ip_len = p.len();
    p.extend_from_slice(&40000u16.to_be_bytes());
    p.extend_from_slice(&5201u16.to_be_bytes());
    p.extend_from_slice(&t.seq.to_be_bytes());
    p.extend_from_slice(&0xa0b0_c0d0u32.to_be_bytes()); // ack
    p.push(((thl / 4) as u8) << 4);
    p.push(t.flags);
    p.extend_from_slice(&[0x01, 0xf5, 0, 0, 0, 0]); // window, checksum, urgent
    p.extend_from_slice(t.options);
    p.extend_from_slice(t.payload);
    let len = p.len() - ip_len;
    let ps = pseudo_sum(addrs(&p, t.v6), PROTO_TCP, len);
    let c = if partial {
        fold(ps)
    } else {
        nonzero(!fold(ps + sum(&p[ip_len..]) as u64))
    };
    put16(&mut p, ip_len + 16..ip_len + 18, c);
    p
}

pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A TSO read as the TUN gives it: virtio header, then the super-packet.
pub(crate) fn tso_read(t: &Tcp, gso_size: u16) -> Vec<u8> {
    let p = tcp_packet(t, true);
    let ip_len = if t.v6 { 40 } else { 20 };
    let hdr = VirtioNetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if t.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        hdr_len: (ip_len + 20 + t.options.len()) as u16,
        gso_size,
        csum_start: ip_len as u16,
        csum_offset: 16,
    };
    let mut b = hdr.to_bytes().to_vec();
    b.extend_from_slice(&p);
    b
}

pub(crate) fn segments(read: &mut [u8]) -> Vec<Vec<u8>> {
    match split_tun_read(read).unwrap() {
        TunRead::Gso(s) => (0..s.count())
            .map(|i| {
                let mut v = Vec::new();
                s.segment_into(i, &mut v);
                v
            })
            .collect(),
        TunRead::Packet(p) => vec![p.to_vec()],
    }
}
