//! Network -> TUN: GRO-style coalescing. Consecutive in-order TCP segments of
//! one flow are planned into one super-packet write (the rules of the kernel's
//! tcp_gro_receive), every segment's checksum verified before it joins; the
//! head's headers are rewritten for it and the payloads gathered, not copied.

use super::checksum::{addrs, fold, ipv4_header_checksum, pseudo_sum, transport_checksum_ok};
use super::layout::{MAX_IP_LEN, PROTO_TCP, get16, get32, ipv4, ipv6, put16, tcp};
use super::vnet_header::{F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6, VirtioNetHdr};

/// Segments one coalesced write may carry at most (the kernel's GRO also stops at
/// 64 KiB, which MSS 1024 and up reach first).
pub const MAX_COALESCED_SEGMENTS: usize = 64;

/// The 4-tuple and family of a TCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    addrs: [u8; 32],
    ports: [u8; 4],
    v6: bool,
}

/// A TCP packet that may join a coalesced write.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    key: FlowKey,
    ip_len: usize,
    tcp_len: usize,
    seq: u32,
    payload: usize,
    psh: bool,
}

/// The IP and TCP header lengths and the flow of a TCP packet, if it is one with
/// a consistent header; nothing is checked beyond that.
fn tcp_flow(p: &[u8]) -> Option<(FlowKey, usize, usize, bool)> {
    let (ip_len, v6) = match p.first()? >> 4 {
        4 if p.len() >= ipv4::HEADER_LEN && p[ipv4::PROTOCOL] == PROTO_TCP => {
            ((p[ipv4::VER_IHL] & 0x0f) as usize * 4, false)
        }
        6 if p.len() >= ipv6::HEADER_LEN && p[ipv6::NEXT_HEADER] == PROTO_TCP => {
            (ipv6::HEADER_LEN, true)
        }
        _ => return None,
    };
    if ip_len < ipv4::HEADER_LEN || p.len() < ip_len + tcp::HEADER_LEN {
        return None;
    }
    let tcp_len = (p[ip_len + tcp::DATA_OFF] >> 4) as usize * 4;
    if tcp_len < tcp::HEADER_LEN || p.len() < ip_len + tcp_len {
        return None;
    }
    let mut key = FlowKey {
        addrs: [0; 32],
        ports: [0; 4],
        v6,
    };
    let a = addrs(p, v6);
    key.addrs[..a.len()].copy_from_slice(a);
    key.ports
        .copy_from_slice(&p[ip_len + tcp::PORTS.start..ip_len + tcp::PORTS.end]);
    Some((key, ip_len, tcp_len, v6))
}

/// A TCP segment that GRO may merge: no IP options or extension headers, not a
/// fragment, lengths that agree with the buffer, flags ACK or ACK|PSH only, and
/// some payload.
fn candidate(p: &[u8]) -> Option<Candidate> {
    let (key, ip_len, tcp_len, v6) = tcp_flow(p)?;
    if v6 {
        if get16(p, ipv6::PAYLOAD_LEN) as usize != p.len() - ipv6::HEADER_LEN {
            return None;
        }
    } else {
        if ip_len != ipv4::HEADER_LEN || get16(p, ipv4::TOTAL_LEN) as usize != p.len() {
            return None;
        }
        let ff = get16(p, ipv4::FLAGS_FRAG);
        if p[ipv4::FLAGS_FRAG.start] & ipv4::MF != 0 || ff & 0x1fff != 0 {
            return None;
        }
    }
    let th = &p[ip_len..];
    let flags = th[tcp::FLAGS];
    if th[tcp::DATA_OFF] & 0x0f != 0
        || (flags != tcp::ACK_FLAG && flags != tcp::ACK_FLAG | tcp::PSH)
    {
        return None;
    }
    let payload = p.len() - ip_len - tcp_len;
    if payload == 0 {
        return None;
    }
    Some(Candidate {
        key,
        ip_len,
        tcp_len,
        seq: get32(th, tcp::SEQ),
        payload,
        psh: flags & tcp::PSH != 0,
    })
}

/// One write into the TUN: packet `head` alone, or `head` followed by the
/// payloads of its members as one super-packet.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    head: usize,
    /// First and last member (packet indices), `NONE` when alone.
    first: usize,
    last: usize,
    segments: usize,
    v6: bool,
    ip_len: usize,
    tcp_len: usize,
    gso_size: usize,
    /// IP packet bytes once coalesced.
    total: usize,
    psh: bool,
}

const NONE: usize = usize::MAX;

impl Group {
    /// Index of the packet whose headers lead the write.
    pub fn head(&self) -> usize {
        self.head
    }

    /// IP packets in this write (1: not coalesced).
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Where each member's payload starts (its IP plus TCP header bytes).
    pub fn payload_offset(&self) -> usize {
        self.ip_len + self.tcp_len
    }

    /// Bytes of the IP packet written (the coalesced length for a group).
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// A flow whose latest group may still grow.
#[derive(Debug, Clone, Copy)]
struct Open {
    key: FlowKey,
    group: usize,
    next_seq: u32,
    head_checked: bool,
    /// A shorter segment or PSH was appended: nothing may follow.
    closed: bool,
}

/// Plans the TUN writes for a batch of packets: which are coalesced into which.
/// Reused from batch to batch; it allocates only while its tables grow.
#[derive(Debug, Default)]
pub struct Coalescer {
    /// A packet longer than this never joins or heads a group: it is written
    /// alone (a super-packet from a raw socket, cut by `cut_for_tun`).
    pub max_len: Option<usize>,
    groups: Vec<Group>,
    /// `next[i]`: the member after packet `i` in its group.
    next: Vec<usize>,
    open: Vec<Open>,
}

impl Coalescer {
    pub fn new() -> Coalescer {
        Coalescer::default()
    }

    /// Plans writes for `packets[i]`, `i` from `order` (in the order given). A
    /// packet joins the latest group of its flow when it continues it exactly;
    /// any other packet of that flow ends the group, so a flow's bytes are written
    /// in the order they came.
    pub fn plan<B: AsRef<[u8]>>(&mut self, packets: &[B], order: impl IntoIterator<Item = usize>) {
        self.groups.clear();
        self.open.clear();
        self.next.clear();
        self.next.resize(packets.len(), NONE);
        for i in order {
            let Some(p) = packets.get(i).map(|b| b.as_ref()) else {
                continue;
            };
            let alone = self.max_len.is_some_and(|m| p.len() > m);
            if let Some(c) = candidate(p).filter(|_| !alone) {
                if let Some(o) = self.open.iter().position(|o| o.key == c.key) {
                    if self.try_append(o, i, &c, packets) {
                        continue;
                    }
                    self.open.swap_remove(o);
                }
                self.groups.push(Group {
                    head: i,
                    first: NONE,
                    last: NONE,
                    segments: 1,
                    v6: c.key.v6,
                    ip_len: c.ip_len,
                    tcp_len: c.tcp_len,
                    gso_size: c.payload,
                    total: p.len(),
                    psh: c.psh,
                });
                self.open.push(Open {
                    key: c.key,
                    group: self.groups.len() - 1,
                    next_seq: c.seq.wrapping_add(c.payload as u32),
                    head_checked: false,
                    closed: c.psh,
                });
            } else {
                if let Some((key, ..)) = tcp_flow(p) {
                    self.open.retain(|o| o.key != key);
                }
                self.groups.push(Group {
                    head: i,
                    first: NONE,
                    last: NONE,
                    segments: 1,
                    v6: false,
                    ip_len: 0,
                    tcp_len: 0,
                    gso_size: 0,
                    total: p.len(),
                    psh: false,
                });
            }
        }
    }

    fn try_append<B: AsRef<[u8]>>(
        &mut self,
        o: usize,
        i: usize,
        c: &Candidate,
        packets: &[B],
    ) -> bool {
        let open = self.open[o];
        let g = self.groups[open.group];
        let head = packets[g.head].as_ref();
        let p = packets[i].as_ref();
        if open.closed
            || c.seq != open.next_seq
            || c.payload > g.gso_size
            || c.tcp_len != g.tcp_len
            || g.segments >= MAX_COALESCED_SEGMENTS
            || g.total + c.payload > MAX_IP_LEN
        {
            return false;
        }
        // The kernel's GRO flushes on any difference in these (tcp_gro_receive,
        // inet_gro_receive, ipv6_gro_receive).
        let same_ip = if c.key.v6 {
            head[ipv6::VER_TC_FLOW] == p[ipv6::VER_TC_FLOW]
                && head[ipv6::HOP_LIMIT] == p[ipv6::HOP_LIMIT]
        } else {
            head[ipv4::TOS] == p[ipv4::TOS]
                && head[ipv4::TTL] == p[ipv4::TTL]
                && head[ipv4::FLAGS_FRAG.start] & ipv4::DF_RESERVED
                    == p[ipv4::FLAGS_FRAG.start] & ipv4::DF_RESERVED
        };
        let (hth, pth) = (
            &head[g.ip_len..g.ip_len + g.tcp_len],
            &p[c.ip_len..c.ip_len + c.tcp_len],
        );
        if !same_ip
            || hth[tcp::ACK] != pth[tcp::ACK]
            || hth[tcp::WINDOW] != pth[tcp::WINDOW]
            || hth[tcp::HEADER_LEN..] != pth[tcp::HEADER_LEN..]
        {
            return false;
        }
        // Coalesced segments reach TCP as CHECKSUM_PARTIAL, never checked again:
        // a corrupt one must be written alone, for the kernel to drop.
        if !open.head_checked {
            if !transport_checksum_ok(head, g.ip_len, g.v6, PROTO_TCP) {
                return false;
            }
            self.open[o].head_checked = true;
        }
        if !transport_checksum_ok(p, c.ip_len, c.key.v6, PROTO_TCP) {
            return false;
        }
        let g = &mut self.groups[open.group];
        if g.first == NONE {
            g.first = i;
        } else {
            self.next[g.last] = i;
        }
        g.last = i;
        g.segments += 1;
        g.total += c.payload;
        g.psh = c.psh;
        let open = &mut self.open[o];
        open.next_seq = open.next_seq.wrapping_add(c.payload as u32);
        open.closed = c.psh || c.payload < g.gso_size;
        true
    }

    /// The planned writes, in the order they are to be made.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The packets whose payloads follow the head of `g`, in order.
    pub fn members(&self, g: &Group) -> Members<'_> {
        Members {
            next: &self.next,
            at: g.first,
        }
    }

    /// Rewrites the head packet of `g` into the header of the coalesced packet
    /// (lengths, IPv4 header checksum, PSH of the last member, and the TCP
    /// checksum field holding the pseudo-header sum for the kernel to finish), and
    /// returns the virtio header to write before it: all zero for a packet alone.
    pub fn finish_head(g: &Group, head: &mut [u8]) -> VirtioNetHdr {
        if g.segments < 2 || head.len() < g.ip_len + g.tcp_len {
            return VirtioNetHdr::default();
        }
        if g.v6 {
            put16(head, ipv6::PAYLOAD_LEN, (g.total - ipv6::HEADER_LEN) as u16);
        } else {
            put16(head, ipv4::TOTAL_LEN, g.total as u16);
            ipv4_header_checksum(&mut head[..g.ip_len]);
        }
        let th = g.ip_len;
        if g.psh {
            head[th + tcp::FLAGS] |= tcp::PSH;
        }
        let partial = fold(pseudo_sum(addrs(head, g.v6), PROTO_TCP, g.total - g.ip_len));
        put16(
            head,
            th + tcp::CHECKSUM.start..th + tcp::CHECKSUM.end,
            partial,
        );
        VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if g.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            hdr_len: (g.ip_len + g.tcp_len) as u16,
            gso_size: g.gso_size as u16,
            csum_start: g.ip_len as u16,
            csum_offset: tcp::CHECKSUM.start as u16,
        }
    }

    /// The bytes one write of `g` carries (virtio header included), assembled into
    /// `out`: for tests, and for a writer that cannot gather.
    pub fn assemble<B: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        g: &Group,
        packets: &mut [B],
        out: &mut Vec<u8>,
    ) {
        out.clear();
        let hdr = Coalescer::finish_head(g, packets[g.head].as_mut());
        out.extend_from_slice(&hdr.to_bytes());
        out.extend_from_slice(packets[g.head].as_ref());
        for m in self.members(g) {
            out.extend_from_slice(&packets[m].as_ref()[g.payload_offset()..]);
        }
    }
}

/// Iterator over the members of a group.
pub struct Members<'a> {
    next: &'a [usize],
    at: usize,
}

impl Iterator for Members<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.at == NONE {
            return None;
        }
        let i = self.at;
        self.at = self.next.get(i).copied().unwrap_or(NONE);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::offload::layout::PROTO_UDP;
    use crate::driver::offload::test_packets::*;

    fn coalesce_all(packets: &mut [Vec<u8>]) -> Vec<Vec<u8>> {
        let mut c = Coalescer::new();
        c.plan(packets, 0..packets.len());
        let groups = c.groups().to_vec();
        let mut out = Vec::new();
        for g in &groups {
            let mut w = Vec::new();
            c.assemble(g, packets, &mut w);
            out.push(w);
        }
        out
    }

    #[test]
    fn segment_then_coalesce_gives_back_the_same_bytes() {
        for v6 in [false, true] {
            for (len, mss) in [
                (10_000, 1448),
                (65_000 - 52, 1448),
                (3 * 1000, 1000),
                (1448 * 2 + 1, 1448),
            ] {
                for psh in [false, true] {
                    let payload = pattern(len);
                    let t = Tcp {
                        v6,
                        payload: &payload,
                        flags: tcp::ACK_FLAG | if psh { tcp::PSH } else { 0 },
                        ..Tcp::default()
                    };
                    let original = tso_read(&t, mss);
                    let mut segs = segments(&mut original.clone());
                    let writes = coalesce_all(&mut segs);
                    assert_eq!(writes.len(), 1, "v6 {v6} len {len} mss {mss}");
                    assert_eq!(writes[0], original, "v6 {v6} len {len} mss {mss} psh {psh}");
                }
            }
        }
    }

    #[test]
    fn a_short_last_segment_ends_the_group() {
        let payload = pattern(1448 * 2 + 100);
        let t = Tcp {
            payload: &payload,
            ..Tcp::default()
        };
        let mut segs = segments(&mut tso_read(&t, 1448));
        // One more in-order segment after the short one must not join.
        let more = pattern(1448);
        segs.push(tcp_packet(
            &Tcp {
                seq: 0x0102_0304 + payload.len() as u32,
                payload: &more,
                ..Tcp::default()
            },
            false,
        ));
        let mut c = Coalescer::new();
        c.plan(&segs, 0..4);
        let sizes: Vec<usize> = c.groups().iter().map(|g| g.segments()).collect();
        assert_eq!(sizes, vec![3, 1]);
    }

    /// A packet over `max_len` (a super-packet off a raw socket) is written
    /// alone: a segment that continues it starts a group of its own.
    #[test]
    fn a_packet_over_max_len_is_written_alone() {
        let big = pattern(5000);
        let small = pattern(1000);
        let segs = [
            tcp_packet(
                &Tcp {
                    payload: &big,
                    ..Tcp::default()
                },
                false,
            ),
            tcp_packet(
                &Tcp {
                    seq: 0x0102_0304 + big.len() as u32,
                    payload: &small,
                    ..Tcp::default()
                },
                false,
            ),
        ];
        let mut c = Coalescer::new();
        c.plan(&segs, 0..2);
        assert_eq!(c.groups().len(), 1, "without a limit the small one joins");
        c.max_len = Some(1460);
        c.plan(&segs, 0..2);
        let sizes: Vec<usize> = c.groups().iter().map(|g| g.segments()).collect();
        assert_eq!(sizes, vec![1, 1]);
    }

    #[test]
    fn what_is_not_coalesced() {
        let pl = pattern(1000);
        let seg = |seq_i: u32, flags: u8, options: &'static [u8]| {
            tcp_packet(
                &Tcp {
                    seq: 1000 + seq_i * 1000,
                    flags,
                    options,
                    payload: &pl,
                    ..Tcp::default()
                },
                false,
            )
        };
        let ack = tcp::ACK_FLAG;
        let plan = |packets: &[Vec<u8>]| -> Vec<(usize, usize)> {
            let mut c = Coalescer::new();
            c.plan(packets, 0..packets.len());
            c.groups()
                .iter()
                .map(|g| (g.head(), g.segments()))
                .collect()
        };
        // In order: one group.
        assert_eq!(
            plan(&[
                seg(0, ack, &TS_OPTIONS),
                seg(1, ack, &TS_OPTIONS),
                seg(2, ack, &TS_OPTIONS)
            ]),
            vec![(0, 3)]
        );
        // Out of order: 0, 2, 1 -> 0 alone... 2 starts a group, 1 does not precede.
        assert_eq!(
            plan(&[
                seg(0, ack, &TS_OPTIONS),
                seg(2, ack, &TS_OPTIONS),
                seg(1, ack, &TS_OPTIONS)
            ]),
            vec![(0, 1), (1, 1), (2, 1)]
        );
        // A SYN (and a FIN) is written alone and ends the flow's group.
        assert_eq!(
            plan(&[
                seg(0, ack, &TS_OPTIONS),
                seg(1, ack | tcp::FIN, &TS_OPTIONS),
                seg(2, ack, &TS_OPTIONS)
            ]),
            vec![(0, 1), (1, 1), (2, 1)]
        );
        assert_eq!(
            plan(&[seg(0, tcp::SYN, &[]), seg(1, ack, &[])]),
            vec![(0, 1), (1, 1)]
        );
        // PSH ends a group: the next one starts anew.
        assert_eq!(
            plan(&[
                seg(0, ack, &[]),
                seg(1, ack | tcp::PSH, &[]),
                seg(2, ack, &[]),
                seg(3, ack, &[])
            ]),
            vec![(0, 2), (2, 2)]
        );
        // Different options length, or different option bytes.
        assert_eq!(
            plan(&[seg(0, ack, &TS_OPTIONS), seg(1, ack, &[])]),
            vec![(0, 1), (1, 1)]
        );
        const OTHER_TS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0x12, 0x35, 0, 0, 0x56, 0x78];
        assert_eq!(
            plan(&[seg(0, ack, &TS_OPTIONS), seg(1, ack, &OTHER_TS)]),
            vec![(0, 1), (1, 1)]
        );
        // A corrupt checksum, on the head or a member, keeps the packet alone.
        let mut bad = seg(1, ack, &[]);
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(
            plan(&[seg(0, ack, &[]), bad.clone(), seg(2, ack, &[])]),
            vec![(0, 1), (1, 1), (2, 1)]
        );
        let mut bad0 = seg(0, ack, &[]);
        bad0[60] ^= 0x80;
        assert_eq!(
            plan(&[bad0, seg(1, ack, &[]), seg(2, ack, &[])]),
            vec![(0, 1), (1, 2)]
        );
        // No payload (a pure ACK): alone.
        let pure = tcp_packet(&Tcp::default(), false);
        assert_eq!(plan(&[pure.clone(), pure]), vec![(0, 1), (1, 1)]);
        // Not TCP: alone.
        let mut udp = seg(0, ack, &[]);
        udp[9] = PROTO_UDP;
        assert_eq!(plan(&[udp.clone(), udp]), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn interleaved_flows_are_coalesced_apart_and_in_order() {
        let pl = pattern(1200);
        let mk = |v6: bool, i: u32| {
            tcp_packet(
                &Tcp {
                    v6,
                    seq: 7 + i * 1200,
                    payload: &pl,
                    ..Tcp::default()
                },
                false,
            )
        };
        let mut packets = vec![
            mk(false, 0),
            mk(true, 0),
            mk(false, 1),
            mk(true, 1),
            mk(false, 2),
        ];
        let mut c = Coalescer::new();
        c.plan(&packets, 0..packets.len());
        let groups = c.groups().to_vec();
        assert_eq!(
            groups
                .iter()
                .map(|g| (g.head(), g.segments()))
                .collect::<Vec<_>>(),
            vec![(0, 3), (1, 2)]
        );
        assert_eq!(c.members(&groups[0]).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(c.members(&groups[1]).collect::<Vec<_>>(), vec![3]);
        let mut w = Vec::new();
        c.assemble(&groups[0], &mut packets, &mut w);
        let hdr = VirtioNetHdr::parse(&w).unwrap();
        assert_eq!(hdr.gso_type, GSO_TCPV4);
        assert_eq!(hdr.gso_size, 1200);
        assert_eq!(w.len(), 10 + 20 + 32 + 3 * 1200);
    }

    #[test]
    fn a_group_stops_at_64_kib() {
        let pl = pattern(1448);
        let packets: Vec<Vec<u8>> = (0..50)
            .map(|i| {
                tcp_packet(
                    &Tcp {
                        seq: i * 1448,
                        payload: &pl,
                        ..Tcp::default()
                    },
                    false,
                )
            })
            .collect();
        let mut c = Coalescer::new();
        c.plan(&packets, 0..50);
        let sizes: Vec<usize> = c.groups().iter().map(|g| g.segments()).collect();
        // (65535 - 52) / 1448 = 45 segments fit.
        assert_eq!(sizes, vec![45, 5]);
        assert!(c.groups().iter().all(|g| g.len() <= 65535));
    }

    #[test]
    fn coalescer_survives_garbage() {
        let mut seed = 0x1234_5678u32;
        let mut rnd = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        let pl = pattern(500);
        let base = tcp_packet(
            &Tcp {
                payload: &pl,
                ..Tcp::default()
            },
            false,
        );
        let mut packets: Vec<Vec<u8>> = Vec::new();
        for _ in 0..300 {
            let mut p = base.clone();
            let cut = rnd() as usize % (p.len() + 1);
            p.truncate(cut);
            for _ in 0..(rnd() % 4) {
                if !p.is_empty() {
                    let at = rnd() as usize % p.len();
                    p[at] = rnd() as u8;
                }
            }
            packets.push(p);
        }
        packets.push(Vec::new());
        let mut c = Coalescer::new();
        c.plan(&packets, (0..packets.len()).chain([packets.len() + 5]));
        let groups = c.groups().to_vec();
        let mut w = Vec::new();
        for g in &groups {
            c.assemble(g, &mut packets, &mut w);
        }
        assert_eq!(
            groups.len() + groups.iter().map(|g| g.segments() - 1).sum::<usize>(),
            packets.len()
        );
    }
}
