//! DS-Lite (RFC 6333): IPv4 carried in IPv6 (RFC 2473) between a B4 at the
//! customer and an AFTR that NATs it to the IPv4 internet, as two sans-IO codecs.
//!
//! ```text
//!  LAN host ─ TUN ─ B4 ══ IPv6, next header 4 ══ AFTR ─ TUN ─ kernel ─ IPv4 internet
//!   192.168.1.10      2001:db8:1::2      2001:db8::1     NAT44 to the pool
//! ```
//!
//! The driver's tunnel socket is a raw IPv6 socket for next header 4. On receive
//! the kernel has removed the outer header and reassembled IPv6 fragments; on send
//! it adds the outer header, and fragments the IPv6 packet when it exceeds the link
//! MTU (RFC 2473 section 7.2: the inner IPv4 packet is never fragmented, erratum
//! 5847). So both codecs see, and emit, nothing but IPv4 packets.
//!
//! The inner MTU (1460 by default, the Japanese IPoE practice) bounds what goes
//! into the softwire: larger packets with DF set are answered with an ICMP
//! "fragmentation needed" (RFC 1191) through `poll`, larger ones without DF are
//! sent and fragmented outside. TCP SYNs get their MSS clamped so most flows never
//! need either (RFC 6333 section 5.3).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use ipnetwork::Ipv4Network;

use crate::codec::{Codec, DropReason, Verdict};
use crate::wire::icmpv4_error;
use crate::wire::ipv4::{self, ChecksumDelta, Endpoint, l4, protocol};
use crate::wire::{self, checksum};

/// The AFTR's end of every softwire (RFC 6333 section 5.7).
pub const AFTR_SOFTWIRE_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 1);
/// The B4's end of its softwire (RFC 6333 section 5.7); a B4 may source packets
/// from it, so every softwire allows it.
pub const B4_SOFTWIRE_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 2);
/// 1500 minus the 40-byte IPv6 header.
pub const DEFAULT_INNER_MTU: u16 = 1460;

/// 192.0.0.0/29, reserved for softwire ends (RFC 6333 section 5.7, RFC 7335):
/// never NATed to the internet.
fn in_softwire_block(a: Ipv4Addr) -> bool {
    u32::from(a) & 0xffff_fff8 == 0xc000_0000
}

/// IPv4's minimum MTU (RFC 791).
const MIN_MTU: u16 = 68;
/// ICMP errors waiting for `poll`; more are counted and not built.
const ICMP_QUEUE_LEN: usize = 64;
/// ICMP errors a codec builds per second, with a burst of `ICMP_BURST`
/// (RFC 1812 section 4.3.2.8; Linux's icmp_msgs_per_sec and _burst defaults).
const ICMP_PER_SEC: u64 = 1000;
const ICMP_BURST: u64 = 50;
/// Mapping slots the AFTR examines per `tick`: a 250 ms tick sweeps 64 k
/// mappings a second however large the table.
const EXPIRY_SCAN_PER_TICK: usize = 16_384;
/// Ports tried for a new mapping before giving up: bounds the work a packet can
/// cause when the pool is nearly full.
const MAX_PORT_PROBES: usize = 1024;

/// How a codec rewrites the MSS option of TCP SYNs (RFC 9293 section 3.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MssClamp {
    Off,
    /// The inner MTU minus 40 (IPv4 and TCP headers without options).
    FromMtu,
    Fixed(u16),
}

impl MssClamp {
    fn value(self, inner_mtu: u16) -> Option<u16> {
        match self {
            MssClamp::Off => None,
            MssClamp::FromMtu => Some(inner_mtu.saturating_sub(40)),
            MssClamp::Fixed(v) => Some(v),
        }
    }
}

/// Checks a whole IPv4 packet as the TUN device or the raw socket hands it, and
/// cuts bytes beyond its total length. Both deliver whole packets, so a total
/// length beyond the buffer lies (`Malformed`), while a buffer too short for the
/// header is `Truncated`. A bad header checksum is `Malformed` (RFC 1812 section
/// 5.2.2). `ipv6` is the reason for an IPv6 packet where IPv4 belongs.
fn check_ipv4(packet: &mut Vec<u8>, ipv6: DropReason) -> Result<(), DropReason> {
    let Some(&first) = packet.first() else {
        return Err(DropReason::Truncated);
    };
    match first >> 4 {
        4 => {}
        6 => return Err(ipv6),
        _ => return Err(DropReason::Malformed),
    }
    let p = ipv4::Packet::new_unchecked(&packet[..]);
    p.check_header_len().map_err(wire_drop)?;
    let total = p.total_len() as usize;
    if total < p.header_len() || total > packet.len() {
        return Err(DropReason::Malformed);
    }
    if !p.verify_checksum() {
        return Err(DropReason::Malformed);
    }
    packet.truncate(total);
    Ok(())
}

fn wire_drop(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::Malformed => DropReason::Malformed,
    }
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The TCP or UDP port at `at` (source or destination), if the transport header
/// is all there.
fn transport_port(proto: u8, upper: &[u8], at: usize) -> Option<u16> {
    let need = if proto == protocol::TCP {
        l4::TCP_HEADER_LEN
    } else {
        l4::UDP_HEADER_LEN
    };
    (upper.len() >= need).then(|| read_u16(upper, at))
}

/// Lowers the MSS option of a TCP SYN or SYN-ACK to `clamp` and fixes the
/// checksum incrementally; true if it did. `packet` passed `check_ipv4`. Clamping
/// is what keeps TCP working when PMTUD through the tunnel does not (RFC 4459
/// section 3.2). A malformed option list is left alone: a forwarder does not
/// police TCP.
fn clamp_mss(packet: &mut [u8], clamp: u16) -> bool {
    let p = ipv4::Packet::new_unchecked(&*packet);
    if p.protocol() != protocol::TCP || p.frag_offset() != 0 {
        return false;
    }
    let (hl, tl) = (p.header_len(), p.total_len() as usize);
    let tcp = &mut packet[hl..tl];
    if tcp.len() < l4::TCP_HEADER_LEN || tcp[l4::TCP_FLAGS] & l4::TCP_FLAG_SYN == 0 {
        return false;
    }
    let doff = (tcp[l4::TCP_DATA_OFF] >> 4) as usize * 4;
    if doff < l4::TCP_HEADER_LEN || doff > tcp.len() {
        return false;
    }
    const EOL: u8 = 0;
    const NOP: u8 = 1;
    const MSS: u8 = 2;
    let mut i = l4::TCP_HEADER_LEN;
    while i < doff {
        match tcp[i] {
            EOL => break,
            NOP => i += 1,
            kind => {
                if i + 1 >= doff {
                    break;
                }
                let len = tcp[i + 1] as usize;
                if len < 2 || i + len > doff {
                    break;
                }
                if kind == MSS && len == 4 {
                    if read_u16(tcp, i + 2) <= clamp {
                        return false;
                    }
                    let mut delta = ChecksumDelta::new();
                    delta.rewrite(&mut tcp[..doff], i + 2, &clamp.to_be_bytes());
                    let sum = delta.apply(read_u16(tcp, l4::TCP_CHECKSUM.start));
                    tcp[l4::TCP_CHECKSUM].copy_from_slice(&sum.to_be_bytes());
                    return true;
                }
                i += len;
            }
        }
    }
    false
}

/// A token bucket for generated ICMP errors.
#[derive(Debug)]
struct RateLimit {
    tokens: u64,
    last: Option<Instant>,
}

impl RateLimit {
    fn new() -> Self {
        RateLimit {
            tokens: ICMP_BURST,
            last: None,
        }
    }

    fn allow(&mut self, now: Instant) -> bool {
        let last = *self.last.get_or_insert(now);
        let elapsed_ms = now.saturating_duration_since(last).as_millis() as u64;
        let earned = elapsed_ms.saturating_mul(ICMP_PER_SEC) / 1000;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(ICMP_BURST);
            self.last = Some(now);
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// The ICMP errors a codec generated, waiting for `poll`.
#[derive(Debug)]
struct IcmpErrors {
    pending: VecDeque<Vec<u8>>,
    limit: RateLimit,
    ident: u16,
    sent: u64,
    suppressed: u64,
}

impl IcmpErrors {
    fn new() -> Self {
        IcmpErrors {
            pending: VecDeque::new(),
            limit: RateLimit::new(),
            ident: 0,
            sent: 0,
            suppressed: 0,
        }
    }

    /// Queues "fragmentation needed" about `original` (passed `check_ipv4`) from
    /// `src`, unless the rules or the rate limit forbid it.
    fn frag_needed(&mut self, original: &[u8], mtu: u16, src: Ipv4Addr, now: Instant) {
        let orig = ipv4::Packet::new_unchecked(original);
        if !icmpv4_error::may_report(&orig)
            || self.pending.len() >= ICMP_QUEUE_LEN
            || !self.limit.allow(now)
        {
            self.suppressed += 1;
            return;
        }
        let mut buf = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
        let n = icmpv4_error::emit_frag_needed(&orig, mtu, src, self.ident, &mut buf);
        buf.truncate(n);
        self.ident = self.ident.wrapping_add(1);
        self.sent += 1;
        self.pending.push_back(buf);
    }

    fn pop(&mut self) -> Option<(Verdict, Vec<u8>)> {
        self.pending.pop_front().map(|b| (Verdict::ToTun, b))
    }
}

// ---------------------------------------------------------------------------
// B4
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct B4Config {
    /// The AFTR's IPv6 address (learned through DHCPv6 option 64, RFC 6334).
    pub aftr: Ipv6Addr,
    /// The largest IPv4 packet sent into the softwire with DF set.
    pub inner_mtu: u16,
    pub mss_clamp: MssClamp,
    /// The source of the ICMP errors the B4 generates.
    pub softwire_addr: Ipv4Addr,
}

impl B4Config {
    /// Inner MTU 1460, MSS clamped to 1420, softwire address 192.0.0.2.
    pub fn new(aftr: Ipv6Addr) -> Self {
        B4Config {
            aftr,
            inner_mtu: DEFAULT_INNER_MTU,
            mss_clamp: MssClamp::FromMtu,
            softwire_addr: B4_SOFTWIRE_ADDR,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct B4Stats {
    pub mss_clamped: u64,
    pub icmp_errors_sent: u64,
    /// Not built: about an error or a fragment, rate limited, or the queue full.
    pub icmp_errors_suppressed: u64,
}

/// The customer end: IPv4 from the LAN goes to the AFTR unchanged (no NAT here,
/// RFC 6333 section 5.5), IPv4 from the AFTR goes to the LAN.
#[derive(Debug)]
pub struct B4 {
    config: B4Config,
    aftr: SocketAddr,
    mss: Option<u16>,
    icmp: IcmpErrors,
    mss_clamped: u64,
}

impl B4 {
    pub fn new(config: B4Config) -> Self {
        B4 {
            aftr: SocketAddr::new(IpAddr::V6(config.aftr), 0),
            mss: config.mss_clamp.value(config.inner_mtu),
            config,
            icmp: IcmpErrors::new(),
            mss_clamped: 0,
        }
    }

    pub fn config(&self) -> &B4Config {
        &self.config
    }

    pub fn stats(&self) -> B4Stats {
        B4Stats {
            mss_clamped: self.mss_clamped,
            icmp_errors_sent: self.icmp.sent,
            icmp_errors_suppressed: self.icmp.suppressed,
        }
    }

    fn clamp(&mut self, packet: &mut [u8]) {
        if let Some(mss) = self.mss {
            if clamp_mss(packet, mss) {
                self.mss_clamped += 1;
            }
        }
    }
}

impl Codec for B4 {
    /// An IPv6 packet on the TUN is `WrongProtocol`: DS-Lite carries IPv4 only.
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        if let Err(r) = check_ipv4(packet, DropReason::WrongProtocol) {
            return Verdict::Drop(r);
        }
        if packet.len() > self.config.inner_mtu as usize
            && ipv4::Packet::new_unchecked(&packet[..]).dont_frag()
        {
            let (mtu, src) = (self.config.inner_mtu, self.config.softwire_addr);
            self.icmp.frag_needed(packet, mtu, src, now);
            return Verdict::Drop(DropReason::TooBig);
        }
        self.clamp(packet);
        Verdict::ToNetwork(self.aftr)
    }

    /// `packet` is the inner IPv4 packet: the kernel stripped the outer header.
    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, _now: Instant) -> Verdict {
        if peer.ip() != self.aftr.ip() {
            return Verdict::Drop(DropReason::UnknownPeer);
        }
        if let Err(r) = check_ipv4(packet, DropReason::Malformed) {
            return Verdict::Drop(r);
        }
        self.clamp(packet);
        Verdict::ToTun
    }

    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.icmp.pop()
    }
}

// ---------------------------------------------------------------------------
// AFTR
// ---------------------------------------------------------------------------

/// One B4 the AFTR serves, and the inner sources it may use (RFC 6333 section
/// 6.4: the AFTR may restrict them; 192.0.0.2 is always allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Softwire {
    pub b4: Ipv6Addr,
    pub prefixes: Vec<Ipv4Network>,
}

/// Idle time after which a NAT mapping ends, per protocol (RFC 4787 REQ-5 asks
/// at least 2 min for UDP; RFC 5382 asks 2 h 4 min for established TCP, which a
/// benchmark lab does not need).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatTimeouts {
    pub tcp: Duration,
    pub udp: Duration,
    pub icmp: Duration,
}

impl Default for NatTimeouts {
    fn default() -> Self {
        NatTimeouts {
            tcp: Duration::from_secs(300),
            udp: Duration::from_secs(60),
            icmp: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AftrConfig {
    /// The AFTR's own IPv6 address (the B4s' tunnel destination).
    pub addr: Ipv6Addr,
    pub softwires: Vec<Softwire>,
    /// The NAT44 pool's external addresses.
    pub pool: Vec<Ipv4Addr>,
    /// External ports (and ICMP echo identifiers) a mapping may get.
    pub ports: RangeInclusive<u16>,
    /// The largest IPv4 packet sent into a softwire with DF set.
    pub inner_mtu: u16,
    pub timeouts: NatTimeouts,
    pub max_mappings: usize,
    /// Mappings one B4 may hold at once (RFC 6888 REQ-4: a limit per
    /// subscriber), so one B4 cannot take the whole table; beyond it a new
    /// flow from that B4 is dropped as `MappingLimit`.
    pub max_mappings_per_b4: usize,
}

/// The whole NAT table by default.
pub const DEFAULT_MAX_MAPPINGS: usize = 1 << 18;

/// A B4's share of the NAT table by default: ports enough for a busy home
/// (RFC 6888 leaves the number to the operator), 1/64 of the whole table.
pub const DEFAULT_MAX_MAPPINGS_PER_B4: usize = 4096;

impl AftrConfig {
    /// No softwires yet, ports 1024-65535, inner MTU 1460, timeouts TCP 300 s,
    /// UDP 60 s, ICMP 30 s, at most 262 144 mappings, 4096 of them per B4.
    pub fn new(addr: Ipv6Addr, pool: Vec<Ipv4Addr>) -> Self {
        AftrConfig {
            addr,
            softwires: Vec::new(),
            pool,
            ports: 1024..=65535,
            inner_mtu: DEFAULT_INNER_MTU,
            timeouts: NatTimeouts::default(),
            max_mappings: DEFAULT_MAX_MAPPINGS,
            max_mappings_per_b4: DEFAULT_MAX_MAPPINGS_PER_B4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AftrConfigError {
    #[error("the NAT44 pool is empty")]
    EmptyPool,
    #[error("pool address {0} is listed twice")]
    DuplicatePoolAddress(Ipv4Addr),
    #[error("the port range {0}-{1} is empty")]
    EmptyPortRange(u16, u16),
    #[error("softwire {0} is listed twice")]
    DuplicateSoftwire(Ipv6Addr),
    #[error("max_mappings is 0: no flow could pass")]
    NoMappings,
    #[error("max_mappings_per_b4 is 0: no flow could pass")]
    NoMappingsPerB4,
    #[error("inner MTU {0} is below IPv4's minimum of 68 bytes")]
    MtuTooSmall(u16),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AftrStats {
    /// Live mappings (some may have expired and wait for `tick`).
    pub mappings: usize,
    pub mappings_created: u64,
    pub mappings_expired: u64,
    /// New flows refused because their B4 held `max_mappings_per_b4`.
    pub mappings_over_b4_limit: u64,
    /// Echo requests to 192.0.0.1 answered.
    pub echo_replies: u64,
    /// ICMP errors from the internet translated and sent to a B4.
    pub icmp_errors_translated: u64,
    /// "Fragmentation needed" sent to internet senders.
    pub icmp_errors_sent: u64,
    pub icmp_errors_suppressed: u64,
}

/// The inside of a NAT mapping: per softwire, so customers may reuse the same
/// private addresses and ports (RFC 6333 section 6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct InsideKey {
    softwire: u32,
    addr: Ipv4Addr,
    port: u16,
    proto: u8,
}

/// The outside of a NAT mapping. Endpoint-independent (RFC 4787 REQ-1, RFC 6888
/// REQ-1): the remote end is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct OutsideKey {
    addr: Ipv4Addr,
    port: u16,
    proto: u8,
}

#[derive(Debug, Clone, Copy)]
struct Mapping {
    inside: InsideKey,
    outside: OutsideKey,
    pool_index: u32,
    last_seen: Instant,
}

/// Ports in use at one pool address for one protocol, and where the next search
/// starts.
#[derive(Debug, Clone, Copy, Default)]
struct PortUse {
    used: u32,
    next: u16,
}

#[derive(Debug)]
struct SoftwireState {
    b4: SocketAddr,
    prefixes: Vec<Ipv4Network>,
    /// Live mappings of this B4, against `max_mappings_per_b4`.
    mappings: usize,
}

impl SoftwireState {
    fn allows(&self, src: Ipv4Addr) -> bool {
        src == B4_SOFTWIRE_ADDR || self.prefixes.iter().any(|n| n.contains(src))
    }
}

fn proto_index(proto: u8) -> usize {
    match proto {
        protocol::TCP => 0,
        protocol::UDP => 1,
        _ => 2,
    }
}

/// The tunnel concentrator with its NAT44 (RFC 6333 section 6). Softwires in from
/// the network are decapsulated, checked and NATed out to the TUN; packets from
/// the TUN (the internet) are NATed back and sent to their B4.
///
/// Handled: TCP, UDP, ICMP echo (by identifier), and ICMP destination
/// unreachable, time exceeded and parameter problem from the internet that quote
/// a mapped packet (RFC 5508 section 3). Not handled, dropped as `Unsupported`:
/// IPv4 fragments after the first (they carry no ports; following them needs
/// reassembly or per-datagram state, and DS-Lite hosts behind an MSS clamp and PMTUD
/// rarely fragment), other protocols, and ICMP errors from the LAN side.
#[derive(Debug)]
pub struct Aftr {
    config: AftrConfig,
    softwire_by_b4: HashMap<Ipv6Addr, u32>,
    softwires: Vec<SoftwireState>,
    inside: HashMap<InsideKey, u32>,
    outside: HashMap<OutsideKey, u32>,
    slots: Vec<Option<Mapping>>,
    free: Vec<u32>,
    ports: Vec<[PortUse; 3]>,
    port_lo: u16,
    port_count: u32,
    scan_at: usize,
    icmp: IcmpErrors,
    created: u64,
    expired: u64,
    over_b4_limit: u64,
    echo_replies: u64,
    translated: u64,
}

impl Aftr {
    pub fn new(config: AftrConfig) -> Result<Self, AftrConfigError> {
        if config.pool.is_empty() {
            return Err(AftrConfigError::EmptyPool);
        }
        for (i, a) in config.pool.iter().enumerate() {
            if config.pool[..i].contains(a) {
                return Err(AftrConfigError::DuplicatePoolAddress(*a));
            }
        }
        let (lo, hi) = (*config.ports.start(), *config.ports.end());
        if lo > hi {
            return Err(AftrConfigError::EmptyPortRange(lo, hi));
        }
        if config.max_mappings == 0 {
            return Err(AftrConfigError::NoMappings);
        }
        if config.max_mappings_per_b4 == 0 {
            return Err(AftrConfigError::NoMappingsPerB4);
        }
        if config.inner_mtu < MIN_MTU {
            return Err(AftrConfigError::MtuTooSmall(config.inner_mtu));
        }
        let mut softwire_by_b4 = HashMap::new();
        let mut softwires = Vec::new();
        for (i, sw) in config.softwires.iter().enumerate() {
            if softwire_by_b4.insert(sw.b4, i as u32).is_some() {
                return Err(AftrConfigError::DuplicateSoftwire(sw.b4));
            }
            softwires.push(SoftwireState {
                b4: SocketAddr::new(IpAddr::V6(sw.b4), 0),
                prefixes: sw.prefixes.clone(),
                mappings: 0,
            });
        }
        let capacity = config.max_mappings.min(4096);
        let start = PortUse { used: 0, next: lo };
        Ok(Aftr {
            softwire_by_b4,
            softwires,
            inside: HashMap::with_capacity(capacity),
            outside: HashMap::with_capacity(capacity),
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            ports: vec![[start; 3]; config.pool.len()],
            port_lo: lo,
            port_count: (hi - lo) as u32 + 1,
            scan_at: 0,
            icmp: IcmpErrors::new(),
            created: 0,
            expired: 0,
            over_b4_limit: 0,
            echo_replies: 0,
            translated: 0,
            config,
        })
    }

    pub fn config(&self) -> &AftrConfig {
        &self.config
    }

    /// Live mappings.
    pub fn mappings(&self) -> usize {
        self.inside.len()
    }

    pub fn stats(&self) -> AftrStats {
        AftrStats {
            mappings: self.inside.len(),
            mappings_created: self.created,
            mappings_expired: self.expired,
            mappings_over_b4_limit: self.over_b4_limit,
            echo_replies: self.echo_replies,
            icmp_errors_translated: self.translated,
            icmp_errors_sent: self.icmp.sent,
            icmp_errors_suppressed: self.icmp.suppressed,
        }
    }

    /// The external address and port (or echo identifier) of the mapping for
    /// this B4's inner source, if there is one.
    pub fn external(
        &self,
        b4: Ipv6Addr,
        proto: u8,
        inner_addr: Ipv4Addr,
        inner_port: u16,
    ) -> Option<(Ipv4Addr, u16)> {
        let softwire = *self.softwire_by_b4.get(&b4)?;
        let key = InsideKey {
            softwire,
            addr: inner_addr,
            port: inner_port,
            proto,
        };
        let m = self.slots[*self.inside.get(&key)? as usize].as_ref()?;
        Some((m.outside.addr, m.outside.port))
    }

    fn timeout(&self, proto: u8) -> Duration {
        match proto {
            protocol::TCP => self.config.timeouts.tcp,
            protocol::UDP => self.config.timeouts.udp,
            _ => self.config.timeouts.icmp,
        }
    }

    fn expired_at(&self, m: &Mapping, now: Instant) -> bool {
        now.saturating_duration_since(m.last_seen) > self.timeout(m.inside.proto)
    }

    /// The pool address for an inner host: always the same one for the same
    /// (softwire, inner address), "paired" pooling (RFC 4787 REQ-2, RFC 6888 REQ-2),
    /// spread over the pool by a multiplicative hash.
    fn paired_address(&self, softwire: u32, addr: Ipv4Addr) -> usize {
        let x = ((softwire as u64) << 32) | u32::from(addr) as u64;
        let h = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> 32) % self.config.pool.len() as u64) as usize
    }

    /// A new mapping: the inner port itself when it is in range and free (port
    /// preservation, RFC 4787 section 4.1), else the next free port after the last
    /// one handed out at that address.
    fn create(&mut self, inside: InsideKey, now: Instant) -> Result<u32, DropReason> {
        if self.inside.len() >= self.config.max_mappings {
            return Err(DropReason::NatExhausted);
        }
        if self.softwires[inside.softwire as usize].mappings >= self.config.max_mappings_per_b4 {
            self.over_b4_limit += 1;
            return Err(DropReason::MappingLimit);
        }
        let pool_index = self.paired_address(inside.softwire, inside.addr);
        let addr = self.config.pool[pool_index];
        let pi = proto_index(inside.proto);
        let usage = self.ports[pool_index][pi];
        if usage.used >= self.port_count {
            return Err(DropReason::NatExhausted);
        }
        let free = |port: u16| {
            !self.outside.contains_key(&OutsideKey {
                addr,
                port,
                proto: inside.proto,
            })
        };
        let port = if self.config.ports.contains(&inside.port) && free(inside.port) {
            Some(inside.port)
        } else {
            let mut candidate = usage.next;
            let mut found = None;
            for _ in 0..(self.port_count as usize).min(MAX_PORT_PROBES) {
                let port = candidate;
                candidate = if port == *self.config.ports.end() {
                    self.port_lo
                } else {
                    port + 1
                };
                if free(port) {
                    found = Some(port);
                    break;
                }
            }
            self.ports[pool_index][pi].next = candidate;
            found
        };
        let Some(port) = port else {
            return Err(DropReason::NatExhausted);
        };
        let outside = OutsideKey {
            addr,
            port,
            proto: inside.proto,
        };
        let mapping = Mapping {
            inside,
            outside,
            pool_index: pool_index as u32,
            last_seen: now,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(mapping);
                s
            }
            None => {
                self.slots.push(Some(mapping));
                (self.slots.len() - 1) as u32
            }
        };
        self.inside.insert(inside, slot);
        self.outside.insert(outside, slot);
        self.ports[pool_index][pi].used += 1;
        self.softwires[inside.softwire as usize].mappings += 1;
        self.created += 1;
        Ok(slot)
    }

    fn remove(&mut self, slot: u32) {
        if let Some(m) = self.slots[slot as usize].take() {
            self.inside.remove(&m.inside);
            self.outside.remove(&m.outside);
            let usage = &mut self.ports[m.pool_index as usize][proto_index(m.inside.proto)];
            usage.used = usage.used.saturating_sub(1);
            let sw = &mut self.softwires[m.inside.softwire as usize];
            sw.mappings = sw.mappings.saturating_sub(1);
            self.free.push(slot);
            self.expired += 1;
        }
    }

    /// A live mapping for an outside key, refreshed; expired ones are removed here
    /// so replies never use a mapping `tick` has not reached yet.
    fn lookup_outside(&mut self, key: OutsideKey, now: Instant, refresh: bool) -> Option<Mapping> {
        let slot = *self.outside.get(&key)?;
        let m = *self.slots[slot as usize].as_ref()?;
        if self.expired_at(&m, now) {
            self.remove(slot);
            return None;
        }
        if refresh {
            if let Some(live) = self.slots[slot as usize].as_mut() {
                live.last_seen = now;
            }
        }
        Some(m)
    }

    /// Echo requests to the AFTR's softwire address are answered (RFC 6333
    /// section 5.7 lets a B4 ping it to test the softwire); nothing else there is.
    fn answer_echo(&mut self, softwire: u32, packet: &mut [u8]) -> Verdict {
        let p = ipv4::Packet::new_unchecked(&*packet);
        if p.protocol() != protocol::ICMP || p.is_fragment() {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let icmp = p.payload();
        if icmp.len() < l4::ICMP_HEADER_LEN {
            return Verdict::Drop(DropReason::Truncated);
        }
        if icmp[l4::ICMP_TYPE] != 8 || icmp[l4::ICMP_CODE] != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        if checksum(icmp) != 0 {
            return Verdict::Drop(DropReason::Malformed);
        }
        let (src, dst) = (p.src_addr(), p.dst_addr());
        let mut p = ipv4::Packet::new_unchecked(&mut *packet);
        p.set_src_addr(dst);
        p.set_dst_addr(src);
        p.set_ttl(64);
        p.fill_checksum();
        let icmp = p.payload_mut();
        let mut delta = ChecksumDelta::new();
        delta.rewrite(icmp, l4::ICMP_TYPE, &[0]); // echo reply
        let sum = match delta.apply(read_u16(icmp, l4::ICMP_CHECKSUM.start)) {
            // An all-zero reply needs 0xffff, which equation 3 cannot give.
            0 => {
                icmp[l4::ICMP_CHECKSUM].copy_from_slice(&[0, 0]);
                checksum(icmp)
            }
            s => s,
        };
        icmp[l4::ICMP_CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        self.echo_replies += 1;
        Verdict::ToNetwork(self.softwires[softwire as usize].b4)
    }

    /// An ICMP error from the internet about a packet the NAT sent: the quoted
    /// packet's source and port, its header checksum and, when quoted, its
    /// upper-layer checksum go back to the inner values, then the outer
    /// destination; the ICMP checksum follows every change (RFC 5508 section 3.2,
    /// RFC 3022 section 4.3). Errors do not refresh mappings.
    fn translate_icmp_error(&mut self, packet: &mut [u8], now: Instant) -> Verdict {
        let p = ipv4::Packet::new_unchecked(&*packet);
        let (hl, outer_dst) = (p.header_len(), p.dst_addr());
        let icmp = p.payload();
        if checksum(icmp) != 0 {
            return Verdict::Drop(DropReason::Malformed);
        }
        let quoted = &icmp[icmpv4_error::HEADER_LEN..];
        let q = ipv4::Packet::new_unchecked(quoted);
        if let Err(e) = q.check_header_len() {
            return Verdict::Drop(wire_drop(e));
        }
        if q.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let (qhl, qproto, qsrc) = (q.header_len(), q.protocol(), q.src_addr());
        let qupper = &quoted[qhl..];
        let port_at = match qproto {
            protocol::TCP | protocol::UDP => l4::SRC_PORT.start,
            protocol::ICMP => {
                if qupper.len() < l4::ICMP_IDENT.end {
                    return Verdict::Drop(DropReason::Truncated);
                }
                if qupper[l4::ICMP_TYPE] != 8 {
                    return Verdict::Drop(DropReason::Unsupported);
                }
                l4::ICMP_IDENT.start
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        if qupper.len() < port_at + 2 {
            return Verdict::Drop(DropReason::Truncated);
        }
        let key = OutsideKey {
            addr: qsrc,
            port: read_u16(qupper, port_at),
            proto: qproto,
        };
        if qsrc != outer_dst {
            return Verdict::Drop(DropReason::NoRoute);
        }
        let Some(m) = self.lookup_outside(key, now, false) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        let (inner_addr, inner_port) = (m.inside.addr, m.inside.port);
        let qsum_at = match qproto {
            protocol::TCP => l4::TCP_CHECKSUM.start,
            protocol::UDP => l4::UDP_CHECKSUM.start,
            _ => l4::ICMP_CHECKSUM.start,
        };
        let qupper_len = qupper.len();

        let icmp = &mut packet[hl..];
        let mut icmp_delta = ChecksumDelta::new();
        // Offsets below are from the start of the ICMP message, which is how its
        // checksum's words are aligned.
        let qbase = icmpv4_error::HEADER_LEN;
        let mut addr_delta = ChecksumDelta::new();
        addr_delta.addr(qsrc, inner_addr);
        let q_header_sum = addr_delta.apply(read_u16(icmp, qbase + 10));
        icmp_delta.rewrite(icmp, qbase + 12, &inner_addr.octets());
        icmp_delta.rewrite(icmp, qbase + 10, &q_header_sum.to_be_bytes());
        let ubase = qbase + qhl;
        if qupper_len >= qsum_at + 2 {
            let mut upper_delta = if qproto == protocol::ICMP {
                ChecksumDelta::new()
            } else {
                addr_delta
            };
            upper_delta.word(key.port, inner_port);
            let old = read_u16(icmp, ubase + qsum_at);
            let new = match qproto {
                protocol::UDP if old == 0 => 0,
                protocol::UDP => match upper_delta.apply(old) {
                    0 => 0xffff,
                    s => s,
                },
                _ => upper_delta.apply(old),
            };
            icmp_delta.rewrite(icmp, ubase + qsum_at, &new.to_be_bytes());
        }
        icmp_delta.rewrite(icmp, ubase + port_at, &inner_port.to_be_bytes());
        let icmp_sum = icmp_delta.apply(read_u16(icmp, l4::ICMP_CHECKSUM.start));
        icmp[l4::ICMP_CHECKSUM].copy_from_slice(&icmp_sum.to_be_bytes());

        let mut outer = ChecksumDelta::new();
        outer.addr(outer_dst, inner_addr);
        let mut p = ipv4::Packet::new_unchecked(&mut *packet);
        let sum = outer.apply(p.checksum());
        p.set_dst_addr(inner_addr);
        p.set_checksum(sum);
        self.translated += 1;
        Verdict::ToNetwork(self.softwires[m.inside.softwire as usize].b4)
    }
}

impl Codec for Aftr {
    /// From the internet, to a pool address: NAT back and into the B4's
    /// softwire. An IPv6 packet is `WrongProtocol`.
    fn handle_tun(&mut self, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        if let Err(r) = check_ipv4(packet, DropReason::WrongProtocol) {
            return Verdict::Drop(r);
        }
        let p = ipv4::Packet::new_unchecked(&packet[..]);
        if p.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let upper = p.payload();
        let proto = p.protocol();
        let port = match proto {
            protocol::TCP | protocol::UDP => match transport_port(proto, upper, l4::DST_PORT.start)
            {
                Some(port) => port,
                None => return Verdict::Drop(DropReason::Truncated),
            },
            protocol::ICMP => {
                if upper.len() < l4::ICMP_HEADER_LEN {
                    return Verdict::Drop(DropReason::Truncated);
                }
                match upper[l4::ICMP_TYPE] {
                    0 => read_u16(upper, l4::ICMP_IDENT.start),
                    icmpv4_error::TYPE_DEST_UNREACHABLE
                    | icmpv4_error::TYPE_TIME_EXCEEDED
                    | icmpv4_error::TYPE_PARAM_PROBLEM => {
                        return self.translate_icmp_error(packet, now);
                    }
                    // An echo request to a pool address has no mapping: hosts
                    // behind the NAT cannot be pinged from outside.
                    8 => return Verdict::Drop(DropReason::NoRoute),
                    _ => return Verdict::Drop(DropReason::Unsupported),
                }
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        let key = OutsideKey {
            addr: p.dst_addr(),
            port,
            proto,
        };
        let Some(m) = self.lookup_outside(key, now, true) else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        // Before the rewrite, so the error quotes what the sender sent.
        if packet.len() > self.config.inner_mtu as usize && p.dont_frag() {
            let (mtu, src) = (self.config.inner_mtu, key.addr);
            self.icmp.frag_needed(packet, mtu, src, now);
            return Verdict::Drop(DropReason::TooBig);
        }
        let mut p = ipv4::Packet::new_unchecked(&mut packet[..]);
        if let Err(e) = p.nat_rewrite(Endpoint::Destination, m.inside.addr, m.inside.port) {
            return Verdict::Drop(wire_drop(e));
        }
        Verdict::ToNetwork(self.softwires[m.inside.softwire as usize].b4)
    }

    /// From a B4: check the inner source, then NAT out to the TUN.
    fn handle_network(&mut self, peer: SocketAddr, packet: &mut Vec<u8>, now: Instant) -> Verdict {
        let softwire = match peer.ip() {
            IpAddr::V6(b4) => self.softwire_by_b4.get(&b4).copied(),
            IpAddr::V4(_) => None,
        };
        let Some(softwire) = softwire else {
            return Verdict::Drop(DropReason::UnknownPeer);
        };
        if let Err(r) = check_ipv4(packet, DropReason::Malformed) {
            return Verdict::Drop(r);
        }
        let p = ipv4::Packet::new_unchecked(&packet[..]);
        let src = p.src_addr();
        if !self.softwires[softwire as usize].allows(src) {
            return Verdict::Drop(DropReason::Spoofed);
        }
        let dst = p.dst_addr();
        if dst == AFTR_SOFTWIRE_ADDR {
            return self.answer_echo(softwire, packet);
        }
        if in_softwire_block(dst) {
            return Verdict::Drop(DropReason::NoRoute);
        }
        if p.frag_offset() != 0 {
            return Verdict::Drop(DropReason::Unsupported);
        }
        let upper = p.payload();
        let proto = p.protocol();
        let port = match proto {
            protocol::TCP | protocol::UDP => match transport_port(proto, upper, l4::SRC_PORT.start)
            {
                Some(port) => port,
                None => return Verdict::Drop(DropReason::Truncated),
            },
            protocol::ICMP => {
                if upper.len() < l4::ICMP_HEADER_LEN {
                    return Verdict::Drop(DropReason::Truncated);
                }
                if upper[l4::ICMP_TYPE] != 8 {
                    return Verdict::Drop(DropReason::Unsupported);
                }
                read_u16(upper, l4::ICMP_IDENT.start)
            }
            _ => return Verdict::Drop(DropReason::Unsupported),
        };
        let inside = InsideKey {
            softwire,
            addr: src,
            port,
            proto,
        };
        let slot = match self.inside.get(&inside) {
            Some(&s) => s,
            None => match self.create(inside, now) {
                Ok(s) => s,
                Err(r) => return Verdict::Drop(r),
            },
        };
        let Some(m) = self.slots[slot as usize].as_mut() else {
            return Verdict::Drop(DropReason::NoRoute);
        };
        m.last_seen = now;
        let (addr, port) = (m.outside.addr, m.outside.port);
        let mut p = ipv4::Packet::new_unchecked(&mut packet[..]);
        if let Err(e) = p.nat_rewrite(Endpoint::Source, addr, port) {
            return Verdict::Drop(wire_drop(e));
        }
        Verdict::ToTun
    }

    fn poll(&mut self, _now: Instant) -> Option<(Verdict, Vec<u8>)> {
        self.icmp.pop()
    }

    /// Expires idle mappings, looking at a bounded number of slots per call.
    fn tick(&mut self, now: Instant) {
        let n = self.slots.len();
        for _ in 0..n.min(EXPIRY_SCAN_PER_TICK) {
            if self.scan_at >= self.slots.len() {
                self.scan_at = 0;
            }
            let slot = self.scan_at;
            self.scan_at += 1;
            let expired = match &self.slots[slot] {
                Some(m) => self.expired_at(m, now),
                None => false,
            };
            if expired {
                self.remove(slot as u32);
            }
        }
    }
}

/// Entry points for the cargo-fuzz targets `dslite_b4` and `dslite_aftr`, also
/// replayed by tests/fuzz_regressions.rs. An input is a list of records: a flags
/// byte, a big-endian 16-bit length, then that many bytes (fewer at the end).
/// Besides "never panics" they check that whatever a codec forwards or generates
/// is a whole IPv4 packet with right checksums.
#[doc(hidden)]
pub mod fuzz {
    use super::*;

    const MAX_RECORDS: usize = 64;
    const FLAG_FROM_NETWORK: u8 = 0x01;
    const FLAG_FIX_CHECKSUMS: u8 = 0x02;

    pub const AFTR6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    pub const B4_A: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
    pub const B4_B: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 2);
    const STRANGER: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 9, 0, 0, 0, 0, 9);

    fn records(mut data: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
        std::iter::from_fn(move || {
            let (&flags, rest) = data.split_first()?;
            let (len, rest) = match rest {
                [h, l, rest @ ..] => (u16::from_be_bytes([*h, *l]) as usize, rest),
                _ => (0, &[][..]),
            };
            let (record, rest) = rest.split_at(len.min(rest.len()));
            data = rest;
            Some((flags, record))
        })
        .take(MAX_RECORDS)
    }

    /// Makes the header checksum and the upper-layer checksum right (the quoted
    /// header's too, for an ICMP error), so inputs get past the checks.
    pub fn fix_checksums(pkt: &mut [u8]) {
        let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
            return;
        };
        p.fill_checksum();
        if p.is_fragment() {
            return;
        }
        let (src, dst, proto) = (p.src_addr(), p.dst_addr(), p.protocol());
        let upper = p.payload_mut();
        let at = match proto {
            protocol::TCP if upper.len() >= l4::TCP_HEADER_LEN => l4::TCP_CHECKSUM,
            protocol::UDP if upper.len() >= l4::UDP_HEADER_LEN => l4::UDP_CHECKSUM,
            protocol::ICMP if upper.len() >= l4::ICMP_HEADER_LEN => l4::ICMP_CHECKSUM,
            _ => return,
        };
        upper[at.clone()].copy_from_slice(&[0, 0]);
        let sum = if proto == protocol::ICMP {
            if icmpv4_error::is_error(upper[0]) {
                let mut q = ipv4::Packet::new_unchecked(&mut upper[icmpv4_error::HEADER_LEN..]);
                if q.check_header_len().is_ok() {
                    q.fill_checksum();
                }
            }
            checksum(upper)
        } else {
            match ipv4::upper_layer_checksum(src, dst, proto, upper) {
                0 if proto == protocol::UDP => 0xffff,
                s => s,
            }
        };
        upper[at].copy_from_slice(&sum.to_be_bytes());
    }

    fn upper_ok(pkt: &[u8]) -> Option<bool> {
        let p = ipv4::Packet::new_checked(pkt).ok()?;
        ipv4::verify_upper_checksum(&p)
    }

    fn check_forwarded(v: Verdict, pkt: &[u8], upper_before: Option<bool>) {
        if let Verdict::Drop(_) = v {
            return;
        }
        let p = ipv4::Packet::new_checked(pkt).expect("a forwarded packet is IPv4");
        assert_eq!(p.total_len() as usize, pkt.len(), "trailing bytes cut");
        assert!(p.verify_checksum(), "header checksum right");
        if upper_before == Some(true) {
            assert_eq!(
                ipv4::verify_upper_checksum(&p),
                Some(true),
                "upper checksum kept"
            );
        }
    }

    fn check_generated(v: Verdict, pkt: &[u8]) {
        assert_eq!(v, Verdict::ToTun);
        assert!(pkt.len() <= icmpv4_error::MAX_PACKET_LEN);
        let p = ipv4::Packet::new_checked(pkt).expect("a generated packet is IPv4");
        assert!(p.verify_checksum());
        let e = icmpv4_error::Packet::new_checked(p.payload()).expect("ICMP header");
        assert_eq!(
            icmpv4_error::Repr::parse(&e).map(|r| (r.msg_type, r.code)),
            Ok((3, 4))
        );
    }

    /// B4 fuzzing. Flags: bit 0 from the network (else from the TUN), bit 1 fix
    /// checksums first, bit 2 from a stranger instead of the AFTR, bit 3 the B4
    /// with inner MTU 576 (else 1460).
    pub fn b4(data: &[u8]) {
        let config = B4Config::new(AFTR6);
        let small = B4Config {
            inner_mtu: 576,
            ..config.clone()
        };
        let mut b4s = [B4::new(config), B4::new(small)];
        let t0 = Instant::now();
        for (i, (flags, bytes)) in records(data).enumerate() {
            let now = t0 + Duration::from_millis(i as u64);
            let mut pkt = bytes.to_vec();
            if flags & FLAG_FIX_CHECKSUMS != 0 {
                fix_checksums(&mut pkt);
            }
            let before = upper_ok(&pkt);
            let b4 = &mut b4s[(flags >> 3) as usize & 1];
            let v = if flags & FLAG_FROM_NETWORK != 0 {
                let peer = if flags & 0x04 != 0 { STRANGER } else { AFTR6 };
                b4.handle_network(SocketAddr::new(IpAddr::V6(peer), 0), &mut pkt, now)
            } else {
                b4.handle_tun(&mut pkt, now)
            };
            check_forwarded(v, &pkt, before);
            while let Some((v, icmp)) = b4.poll(now) {
                check_generated(v, &icmp);
            }
        }
    }

    /// The AFTR of `aftr`: two softwires, a small pool and port range so
    /// exhaustion is reachable.
    pub fn aftr_config() -> AftrConfig {
        let mut c = AftrConfig::new(
            AFTR6,
            vec![
                Ipv4Addr::new(198, 51, 100, 1),
                Ipv4Addr::new(198, 51, 100, 2),
            ],
        );
        c.softwires = vec![
            Softwire {
                b4: B4_A,
                prefixes: vec!["192.168.0.0/16".parse().expect("prefix")],
            },
            Softwire {
                b4: B4_B,
                prefixes: vec!["10.0.0.0/8".parse().expect("prefix")],
            },
        ];
        c.ports = 1024..=1087;
        c.inner_mtu = 576;
        c.max_mappings = 48;
        c
    }

    /// Points `pkt` (from the internet) at the mapping `last` (a NATed packet)
    /// came from: destination address, protocol and port or echo identifier.
    fn aim_at(pkt: &mut [u8], last: &[u8]) {
        let Ok(l) = ipv4::Packet::new_checked(last) else {
            return;
        };
        let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
            return;
        };
        let (lproto, lsrc, lupper) = (l.protocol(), l.src_addr(), l.payload());
        p.set_dst_addr(lsrc);
        p.set_protocol(lproto);
        let upper = p.payload_mut();
        match lproto {
            protocol::TCP | protocol::UDP if upper.len() >= 4 && lupper.len() >= 2 => {
                upper[l4::DST_PORT].copy_from_slice(&lupper[l4::SRC_PORT]);
            }
            protocol::ICMP if upper.len() >= 8 && lupper.len() >= 6 => {
                upper[0] = 0;
                upper[l4::ICMP_IDENT].copy_from_slice(&lupper[l4::ICMP_IDENT]);
            }
            _ => {}
        }
    }

    /// Turns `pkt` (from a B4) into TCP (1), an ICMP echo request (2) or UDP (3),
    /// so every NAT path is reached without the fuzzer guessing protocol numbers.
    fn make_protocol(pkt: &mut [u8], steer: u8) {
        let Ok(mut p) = ipv4::Packet::new_checked(&mut pkt[..]) else {
            return;
        };
        let proto = [protocol::TCP, protocol::ICMP, protocol::UDP][(steer as usize - 1) % 3];
        p.set_protocol(proto);
        if let (protocol::ICMP, [t, c, ..]) = (proto, p.payload_mut()) {
            (*t, *c) = (8, 0);
        }
    }

    /// An ICMP error from 203.0.113.9 quoting `last`; `pkt` picks the type, code
    /// and how much is quoted.
    fn error_about(pkt: &[u8], last: &[u8]) -> Vec<u8> {
        let Ok(l) = ipv4::Packet::new_checked(last) else {
            return pkt.to_vec();
        };
        let b = |i: usize| pkt.get(i).copied().unwrap_or(0);
        let msg_type = [3, 11, 12, 4][b(0) as usize % 4];
        let quoted_len = (l.header_len() + b(2) as usize % 32).min(last.len());
        let repr = icmpv4_error::Repr {
            msg_type,
            code: b(1),
            rest_of_header: 1400,
            quoted_len,
        };
        let mut out = vec![0u8; ipv4::HEADER_LEN + repr.buffer_len()];
        let n = icmpv4_error::emit_packet(
            &repr,
            &l,
            Ipv4Addr::new(203, 0, 113, 9),
            b(3) as u16,
            &mut out,
        );
        out.truncate(n);
        out
    }

    /// AFTR fuzzing. Flags: bit 0 from a B4 (else from the internet), bit 1 fix
    /// checksums first, bits 2-3 the peer (B4 A, B4 B, a stranger, an IPv4 peer),
    /// bits 4-5 for packets from a B4: make it TCP, ICMP echo or UDP; for packets
    /// from the internet: 1 aim at the last NATed packet's mapping, 2 an ICMP
    /// error quoting it; bit 7 advance the clock by the record's first byte in
    /// seconds and tick.
    pub fn aftr(data: &[u8]) {
        let mut aftr = Aftr::new(aftr_config()).expect("fuzz config is valid");
        let max = aftr.config().max_mappings;
        let mut now = Instant::now();
        let mut last: Vec<u8> = Vec::new();
        for (flags, bytes) in records(data) {
            if flags & 0x80 != 0 {
                now += Duration::from_secs(bytes.first().copied().unwrap_or(0) as u64);
                aftr.tick(now);
            }
            let handle_network = flags & FLAG_FROM_NETWORK != 0;
            let mut pkt = bytes.to_vec();
            match ((flags >> 4) & 3, handle_network) {
                (0, _) => {}
                (1, false) => aim_at(&mut pkt, &last),
                (2, false) => pkt = error_about(&pkt, &last),
                (_, false) => {}
                (steer, true) => make_protocol(&mut pkt, steer),
            }
            if flags & FLAG_FIX_CHECKSUMS != 0 {
                fix_checksums(&mut pkt);
            }
            let before = upper_ok(&pkt);
            let v = if handle_network {
                let peer = match (flags >> 2) & 3 {
                    0 => IpAddr::V6(B4_A),
                    1 => IpAddr::V6(B4_B),
                    2 => IpAddr::V6(STRANGER),
                    _ => IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
                };
                aftr.handle_network(SocketAddr::new(peer, 0), &mut pkt, now)
            } else {
                aftr.handle_tun(&mut pkt, now)
            };
            check_forwarded(v, &pkt, before);
            if handle_network && v == Verdict::ToTun {
                last.clone_from(&pkt);
            }
            assert!(aftr.mappings() <= max);
            while let Some((v, icmp)) = aftr.poll(now) {
                check_generated(v, &icmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fuzz::{AFTR6, B4_A, B4_B, fix_checksums};
    use super::*;
    use crate::wire::icmp_echo;

    // UDP from the LAN host 192.168.1.10:5000 to 203.0.113.5:53, DF set, "tunb".
    static LAN_UDP: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, // version, IHL, DSCP, total length 32
        0x1c, 0x46, 0x40, 0x00, // identification, DF
        0x40, 0x11, 0x20, 0xcf, // TTL 64, UDP, header checksum
        0xc0, 0xa8, 0x01, 0x0a, // 192.168.1.10
        0xcb, 0x00, 0x71, 0x05, // 203.0.113.5
        0x13, 0x88, 0x00, 0x35, // ports 5000 -> 53
        0x00, 0x0c, 0x0b, 0x89, // UDP length 12, checksum
        b't', b'u', b'n', b'b',
    ];

    // The same after the AFTR's NAT44 to 198.51.100.1:5000 (port preserved);
    // checksums from a full recomputation.
    static NATED_UDP: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, //
        0x1c, 0x46, 0x40, 0x00, //
        0x40, 0x11, 0xb8, 0x4c, // header checksum
        0xc6, 0x33, 0x64, 0x01, // 198.51.100.1
        0xcb, 0x00, 0x71, 0x05, //
        0x13, 0x88, 0x00, 0x35, //
        0x00, 0x0c, 0xa3, 0x06, // UDP checksum
        b't', b'u', b'n', b'b',
    ];

    const LAN_HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
    const SERVER: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 5);
    const POOL: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);

    fn peer(a: Ipv6Addr) -> SocketAddr {
        SocketAddr::new(IpAddr::V6(a), 0)
    }

    fn packet(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, upper: &[u8], df: bool) -> Vec<u8> {
        let repr = ipv4::Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: proto,
            payload_len: upper.len(),
            ttl: 64,
            dscp_ecn: 0,
            ident: 0x4242,
            dont_frag: df,
            more_frags: false,
            frag_offset: 0,
        };
        let mut b = vec![0u8; repr.buffer_len()];
        let mut p = ipv4::Packet::new_unchecked(&mut b[..]);
        repr.emit(&mut p);
        p.payload_mut().copy_from_slice(upper);
        fix_checksums(&mut b);
        b
    }

    fn udp(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, len: usize) -> Vec<u8> {
        let mut u = vec![0u8; 8 + len];
        u[0..2].copy_from_slice(&sport.to_be_bytes());
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
        packet(src, dst, protocol::UDP, &u, true)
    }

    /// A TCP segment with `flags` and an MSS option (after a NOP when `odd`, so the
    /// value sits at an odd offset).
    fn tcp(
        src: Ipv4Addr,
        sport: u16,
        dst: Ipv4Addr,
        dport: u16,
        flags: u8,
        mss: u16,
        odd: bool,
    ) -> Vec<u8> {
        let mut t = vec![0u8; 28];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[12] = 7 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&64240u16.to_be_bytes());
        let opts: [u8; 8] = if odd {
            let m = mss.to_be_bytes();
            [1, 2, 4, m[0], m[1], 1, 1, 0]
        } else {
            let m = mss.to_be_bytes();
            [2, 4, m[0], m[1], 1, 1, 1, 0]
        };
        t[20..28].copy_from_slice(&opts);
        packet(src, dst, protocol::TCP, &t, true)
    }

    fn echo(src: Ipv4Addr, dst: Ipv4Addr, kind: icmp_echo::Kind, ident: u16) -> Vec<u8> {
        let r = icmp_echo::Repr {
            family: icmp_echo::Family::V4,
            kind,
            ident,
            seq: 1,
            data_len: 4,
        };
        let mut m = vec![0u8; r.buffer_len()];
        r.emit(&mut icmp_echo::Packet::new_unchecked(&mut m[..]), b"ping");
        packet(src, dst, protocol::ICMP, &m, false)
    }

    /// (source, source port, destination, destination port); ports are the echo
    /// identifier for ICMP.
    fn endpoints(pkt: &[u8]) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
        let p = ipv4::Packet::new_checked(pkt).unwrap();
        let u = p.payload();
        let (s, d) = if p.protocol() == protocol::ICMP {
            (read_u16(u, 4), read_u16(u, 4))
        } else {
            (read_u16(u, 0), read_u16(u, 2))
        };
        (p.src_addr(), s, p.dst_addr(), d)
    }

    fn assert_checksums(pkt: &[u8]) {
        let p = ipv4::Packet::new_checked(pkt).unwrap();
        assert_eq!(p.total_len() as usize, pkt.len());
        assert!(p.verify_checksum(), "IPv4 header checksum");
        assert_eq!(
            ipv4::verify_upper_checksum(&p),
            Some(true),
            "upper-layer checksum"
        );
    }

    fn mss_of(pkt: &[u8]) -> u16 {
        let p = ipv4::Packet::new_checked(pkt).unwrap();
        let t = p.payload();
        let at = if t[20] == 1 { 23 } else { 22 };
        read_u16(t, at)
    }

    fn aftr_config() -> AftrConfig {
        let mut c = AftrConfig::new(AFTR6, vec![POOL]);
        c.softwires = vec![
            Softwire {
                b4: B4_A,
                prefixes: vec!["192.168.0.0/16".parse().unwrap()],
            },
            Softwire {
                b4: B4_B,
                prefixes: vec!["10.0.0.0/8".parse().unwrap()],
            },
        ];
        c
    }

    fn aftr() -> Aftr {
        Aftr::new(aftr_config()).unwrap()
    }

    fn b4() -> B4 {
        B4::new(B4Config::new(AFTR6))
    }

    // ---- B4 ----

    #[test]
    fn b4_golden_both_ways() {
        let mut b4 = b4();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        assert_eq!(b4.handle_tun(&mut p, now), Verdict::ToNetwork(peer(AFTR6)));
        assert_eq!(p, LAN_UDP, "the B4 does not rewrite");
        // Trailing bytes beyond the total length are cut on the way in.
        let mut p = LAN_UDP.to_vec();
        p.extend_from_slice(&[0xee; 6]);
        assert_eq!(b4.handle_network(peer(AFTR6), &mut p, now), Verdict::ToTun);
        assert_eq!(p, LAN_UDP);
        assert_eq!(b4.poll(now), None);
    }

    #[test]
    fn b4_drops() {
        let mut b4 = b4();
        let now = Instant::now();
        let net = |b4: &mut B4, p: &[u8]| b4.handle_network(peer(AFTR6), &mut p.to_vec(), now);
        assert_eq!(net(&mut b4, &[]), Verdict::Drop(DropReason::Truncated));
        assert_eq!(
            net(&mut b4, &LAN_UDP[..1]),
            Verdict::Drop(DropReason::Truncated)
        );
        assert_eq!(
            net(&mut b4, &LAN_UDP[..19]),
            Verdict::Drop(DropReason::Truncated)
        );
        // A total length longer than what arrived lies.
        assert_eq!(
            net(&mut b4, &LAN_UDP[..30]),
            Verdict::Drop(DropReason::Malformed)
        );
        let mut ihl = LAN_UDP;
        ihl[0] = 0x44;
        assert_eq!(net(&mut b4, &ihl), Verdict::Drop(DropReason::Malformed));
        let mut sum = LAN_UDP;
        sum[10] ^= 0x80;
        assert_eq!(net(&mut b4, &sum), Verdict::Drop(DropReason::Malformed));
        let mut v6 = LAN_UDP;
        v6[0] = 0x60;
        assert_eq!(net(&mut b4, &v6), Verdict::Drop(DropReason::Malformed));
        assert_eq!(
            b4.handle_network(peer(B4_B), &mut LAN_UDP.to_vec(), now),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        let v4_peer = SocketAddr::new(IpAddr::V4(SERVER), 0);
        assert_eq!(
            b4.handle_network(v4_peer, &mut LAN_UDP.to_vec(), now),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        // From the TUN: an IPv6 packet is not for a DS-Lite softwire.
        assert_eq!(
            b4.handle_tun(&mut v6.to_vec(), now),
            Verdict::Drop(DropReason::WrongProtocol)
        );
        assert_eq!(
            b4.handle_tun(&mut vec![0x45; 12], now),
            Verdict::Drop(DropReason::Truncated)
        );
    }

    #[test]
    fn b4_clamps_mss_both_ways() {
        let mut b4 = b4();
        let now = Instant::now();
        for odd in [false, true] {
            let mut syn = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1460, odd);
            assert_eq!(
                b4.handle_tun(&mut syn, now),
                Verdict::ToNetwork(peer(AFTR6))
            );
            assert_eq!(mss_of(&syn), 1420);
            assert_checksums(&syn);
            // Incremental equals a full recomputation.
            let mut full = syn.clone();
            fix_checksums(&mut full);
            assert_eq!(syn, full);

            let flags = l4::TCP_FLAG_SYN | l4::TCP_FLAG_ACK;
            let mut syn_ack = tcp(SERVER, 443, LAN_HOST, 40000, flags, 1460, odd);
            assert_eq!(
                b4.handle_network(peer(AFTR6), &mut syn_ack, now),
                Verdict::ToTun
            );
            assert_eq!(mss_of(&syn_ack), 1420);
            assert_checksums(&syn_ack);
        }
        assert_eq!(b4.stats().mss_clamped, 4);
        // Smaller MSS and non-SYN segments are left alone.
        let small = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1380, false);
        let mut p = small.clone();
        b4.handle_tun(&mut p, now);
        assert_eq!(p, small);
        let ack = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_ACK, 1460, false);
        let mut p = ack.clone();
        b4.handle_tun(&mut p, now);
        assert_eq!(p, ack);
        // Clamping off, or a fixed value.
        let mut off = B4Config::new(AFTR6);
        off.mss_clamp = MssClamp::Off;
        let mut p = tcp(LAN_HOST, 1, SERVER, 2, l4::TCP_FLAG_SYN, 1460, false);
        B4::new(off.clone()).handle_tun(&mut p, now);
        assert_eq!(mss_of(&p), 1460);
        off.mss_clamp = MssClamp::Fixed(1200);
        B4::new(off).handle_tun(&mut p, now);
        assert_eq!(mss_of(&p), 1200);
        assert_checksums(&p);
    }

    #[test]
    fn b4_too_big_with_df_answers_frag_needed() {
        let mut b4 = b4();
        let now = Instant::now();
        let big = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
        assert_eq!(big.len(), 1500);
        let mut p = big.clone();
        assert_eq!(
            b4.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        let (v, icmp) = b4.poll(now).expect("an ICMP error");
        assert_eq!(v, Verdict::ToTun);
        assert_eq!(b4.poll(now), None);
        let ip = ipv4::Packet::new_checked(&icmp[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.src_addr(), B4_SOFTWIRE_ADDR);
        assert_eq!(ip.dst_addr(), LAN_HOST);
        assert_eq!(ip.protocol(), protocol::ICMP);
        let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(
            icmpv4_error::Repr::parse(&e),
            Ok(icmpv4_error::Repr::frag_needed(1460, 28))
        );
        assert_eq!(e.next_hop_mtu(), 1460);
        assert_eq!(e.quoted(), &big[..28]);
        assert_eq!(b4.stats().icmp_errors_sent, 1);

        // Exactly the MTU passes.
        let mut fits = udp(LAN_HOST, 5000, SERVER, 53, 1460 - 28);
        assert_eq!(
            b4.handle_tun(&mut fits, now),
            Verdict::ToNetwork(peer(AFTR6))
        );
    }

    #[test]
    fn b4_too_big_without_df_is_sent_for_outer_fragmentation() {
        let mut b4 = b4();
        let now = Instant::now();
        let mut p = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
        ipv4::Packet::new_unchecked(&mut p[..]).set_dont_frag(false);
        fix_checksums(&mut p);
        let before = p.clone();
        assert_eq!(b4.handle_tun(&mut p, now), Verdict::ToNetwork(peer(AFTR6)));
        assert_eq!(p, before, "the inner packet is never fragmented");
        assert_eq!(b4.poll(now), None);
    }

    #[test]
    fn b4_never_answers_errors_and_rate_limits() {
        let mut b4 = b4();
        let now = Instant::now();
        // An ICMP error that is too big: dropped, not answered.
        let mut m = vec![0u8; 1500 - 20];
        m[0] = 3;
        let mut p = packet(LAN_HOST, SERVER, protocol::ICMP, &m, true);
        assert_eq!(
            b4.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        assert_eq!(b4.poll(now), None);
        // A flood gets at most the burst.
        for _ in 0..200 {
            let mut p = udp(LAN_HOST, 5000, SERVER, 53, 1500 - 28);
            b4.handle_tun(&mut p, now);
        }
        let mut n = 0;
        while b4.poll(now).is_some() {
            n += 1;
        }
        assert_eq!(n, ICMP_BURST as usize);
        assert_eq!(b4.stats().icmp_errors_suppressed, 1 + 200 - ICMP_BURST);
    }

    // ---- AFTR ----

    #[test]
    fn aftr_golden_out_and_back() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        assert_eq!(p, NATED_UDP);
        assert_eq!(aftr.mappings(), 1);
        assert_eq!(
            aftr.external(B4_A, protocol::UDP, LAN_HOST, 5000),
            Some((POOL, 5000))
        );

        let mut reply = udp(SERVER, 53, POOL, 5000, 4);
        assert_eq!(
            aftr.handle_tun(&mut reply, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(endpoints(&reply), (SERVER, 53, LAN_HOST, 5000));
        assert_checksums(&reply);
    }

    #[test]
    fn aftr_drops_what_it_decapsulates() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut net =
            |from: Ipv6Addr, p: &[u8]| aftr.handle_network(peer(from), &mut p.to_vec(), now);
        assert_eq!(
            net(B4_A, &LAN_UDP[..12]),
            Verdict::Drop(DropReason::Truncated)
        );
        assert_eq!(
            net(B4_A, &LAN_UDP[..31]),
            Verdict::Drop(DropReason::Malformed)
        );
        let stranger = "2001:db8:9::9".parse().unwrap();
        assert_eq!(
            net(stranger, &LAN_UDP),
            Verdict::Drop(DropReason::UnknownPeer)
        );
        assert_eq!(net(AFTR6, &LAN_UDP), Verdict::Drop(DropReason::UnknownPeer));
        // 192.168.1.10 belongs to B4 A's prefix, not B4 B's.
        assert_eq!(net(B4_B, &LAN_UDP), Verdict::Drop(DropReason::Spoofed));
        let from_ten = udp(Ipv4Addr::new(10, 0, 0, 1), 1, SERVER, 2, 0);
        assert_eq!(net(B4_A, &from_ten), Verdict::Drop(DropReason::Spoofed));
        // Other softwire-block destinations are not routed.
        let to_b4 = udp(LAN_HOST, 1, B4_SOFTWIRE_ADDR, 2, 0);
        assert_eq!(net(B4_A, &to_b4), Verdict::Drop(DropReason::NoRoute));
        // Other protocols, ICMP other than echo, later fragments.
        let gre = packet(LAN_HOST, SERVER, 47, &[0; 8], true);
        assert_eq!(net(B4_A, &gre), Verdict::Drop(DropReason::Unsupported));
        let mut unreach = echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 1);
        unreach[20] = 3;
        fix_checksums(&mut unreach);
        assert_eq!(net(B4_A, &unreach), Verdict::Drop(DropReason::Unsupported));
        let mut frag = LAN_UDP;
        ipv4::Packet::new_unchecked(&mut frag[..]).set_frag_offset(1480);
        fix_checksums(&mut frag);
        assert_eq!(net(B4_A, &frag), Verdict::Drop(DropReason::Unsupported));
        let short_tcp = packet(LAN_HOST, SERVER, protocol::TCP, &[0; 12], true);
        assert_eq!(net(B4_A, &short_tcp), Verdict::Drop(DropReason::Truncated));
        assert_eq!(aftr.mappings(), 0);

        // From the internet: no mapping.
        let mut p = udp(SERVER, 53, POOL, 5000, 4);
        assert_eq!(
            aftr.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut ping = echo(SERVER, POOL, icmp_echo::Kind::Request, 9);
        assert_eq!(
            aftr.handle_tun(&mut ping, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        let mut v6 = LAN_UDP.to_vec();
        v6[0] = 0x60;
        assert_eq!(
            aftr.handle_tun(&mut v6, now),
            Verdict::Drop(DropReason::WrongProtocol)
        );
    }

    #[test]
    fn aftr_first_fragment_is_nated() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = udp(LAN_HOST, 5000, SERVER, 53, 64);
        ipv4::Packet::new_unchecked(&mut p[..]).set_more_frags(true);
        fix_checksums(&mut p);
        let sum_before = read_u16(&p, 26);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        assert_eq!(endpoints(&p).0, POOL);
        assert!(ipv4::Packet::new_checked(&p[..]).unwrap().verify_checksum());
        // The port is preserved, so only the address changed the UDP checksum.
        let mut d = ChecksumDelta::new();
        d.addr(LAN_HOST, POOL);
        assert_eq!(read_u16(&p, 26), d.apply(sum_before));
    }

    #[test]
    fn aftr_answers_echo_to_its_softwire_address() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = echo(
            B4_SOFTWIRE_ADDR,
            AFTR_SOFTWIRE_ADDR,
            icmp_echo::Kind::Request,
            0x1234,
        );
        assert_eq!(
            aftr.handle_network(peer(B4_B), &mut p, now),
            Verdict::ToNetwork(peer(B4_B))
        );
        assert_checksums(&p);
        let ip = ipv4::Packet::new_checked(&p[..]).unwrap();
        assert_eq!(
            (ip.src_addr(), ip.dst_addr()),
            (AFTR_SOFTWIRE_ADDR, B4_SOFTWIRE_ADDR)
        );
        let e = icmp_echo::Packet::new_checked(ip.payload()).unwrap();
        let r = icmp_echo::Repr::parse(&e, icmp_echo::Family::V4).unwrap();
        assert_eq!(
            (r.kind, r.ident, r.seq),
            (icmp_echo::Kind::Reply, 0x1234, 1)
        );
        assert_eq!(e.data(), b"ping");
        assert_eq!(aftr.mappings(), 0);
        assert_eq!(aftr.stats().echo_replies, 1);
        // A reply that is all zero still gets a checksum that verifies.
        let mut zero = echo(
            B4_SOFTWIRE_ADDR,
            AFTR_SOFTWIRE_ADDR,
            icmp_echo::Kind::Request,
            0,
        );
        zero.truncate(28);
        let mut ip = ipv4::Packet::new_unchecked(&mut zero[..]);
        ip.set_total_len(28);
        ip.payload_mut()[6..8].copy_from_slice(&[0, 0]);
        fix_checksums(&mut zero);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut zero, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(&zero[20..], &[0, 0, 0xff, 0xff, 0, 0, 0, 0]);
        assert_checksums(&zero);
        // Anything else to 192.0.0.1 is not served.
        let mut u = udp(B4_SOFTWIRE_ADDR, 1, AFTR_SOFTWIRE_ADDR, 7, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_B), &mut u, now),
            Verdict::Drop(DropReason::Unsupported)
        );
    }

    #[test]
    fn two_b4s_with_the_same_inner_source_get_distinct_mappings() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut out = [Vec::new(), Vec::new()];
        for (i, b4) in [B4_A, B4_B].into_iter().enumerate() {
            let mut p = udp(B4_SOFTWIRE_ADDR, 5000, SERVER, 53, 4);
            assert_eq!(aftr.handle_network(peer(b4), &mut p, now), Verdict::ToTun);
            assert_checksums(&p);
            out[i] = p;
        }
        let (a_addr, a_port, ..) = endpoints(&out[0]);
        let (b_addr, b_port, ..) = endpoints(&out[1]);
        assert_ne!((a_addr, a_port), (b_addr, b_port));
        assert_eq!((a_addr, a_port), (POOL, 5000), "the first keeps its port");
        assert_eq!(aftr.mappings(), 2);
        // The same with a private LAN address both B4s may use.
        let mut c = aftr_config();
        c.softwires[1].prefixes = c.softwires[0].prefixes.clone();
        let mut shared = Aftr::new(c).unwrap();
        let mut pa = LAN_UDP.to_vec();
        let mut pb = LAN_UDP.to_vec();
        shared.handle_network(peer(B4_A), &mut pa, now);
        shared.handle_network(peer(B4_B), &mut pb, now);
        assert_ne!(endpoints(&pa).1, endpoints(&pb).1);

        // Replies go back to the right B4, to 192.0.0.2:5000 in both.
        for (i, b4) in [B4_A, B4_B].into_iter().enumerate() {
            let (addr, port, ..) = endpoints(&out[i]);
            let mut reply = udp(SERVER, 53, addr, port, 4);
            assert_eq!(
                aftr.handle_tun(&mut reply, now),
                Verdict::ToNetwork(peer(b4))
            );
            assert_eq!(endpoints(&reply), (SERVER, 53, B4_SOFTWIRE_ADDR, 5000));
            assert_checksums(&reply);
        }
    }

    #[test]
    fn mapping_is_endpoint_independent_and_per_protocol() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut a = udp(LAN_HOST, 6000, SERVER, 53, 0);
        let mut b = udp(LAN_HOST, 6000, Ipv4Addr::new(192, 0, 2, 77), 123, 0);
        aftr.handle_network(peer(B4_A), &mut a, now);
        aftr.handle_network(peer(B4_A), &mut b, now);
        assert_eq!(endpoints(&a).0, endpoints(&b).0);
        assert_eq!(endpoints(&a).1, endpoints(&b).1);
        assert_eq!(aftr.mappings(), 1);
        // Any remote may answer (endpoint-independent filtering, RFC 4787 REQ-8's
        // most open choice, which a benchmark wants).
        let mut from_other = udp(Ipv4Addr::new(192, 0, 2, 99), 9, POOL, 6000, 0);
        assert_eq!(
            aftr.handle_tun(&mut from_other, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        // TCP port 6000 is a different mapping.
        let mut t = tcp(LAN_HOST, 6000, SERVER, 80, l4::TCP_FLAG_SYN, 1400, false);
        aftr.handle_network(peer(B4_A), &mut t, now);
        assert_eq!(aftr.mappings(), 2);
        assert_eq!(endpoints(&t).1, 6000);
    }

    #[test]
    fn b4_and_aftr_in_memory_pair() {
        let mut b4 = b4();
        let mut aftr = aftr();
        let t0 = Instant::now();

        // LAN host -> B4 -> AFTR -> internet.
        let mut syn = tcp(LAN_HOST, 40000, SERVER, 443, l4::TCP_FLAG_SYN, 1460, false);
        let Verdict::ToNetwork(to) = b4.handle_tun(&mut syn, t0) else {
            panic!("B4 did not send the SYN");
        };
        assert_eq!(to, peer(AFTR6));
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut syn, t0),
            Verdict::ToTun
        );
        let (ext_addr, ext_port, dst, dport) = endpoints(&syn);
        assert_eq!((ext_addr, dst, dport), (POOL, SERVER, 443));
        assert_eq!(mss_of(&syn), 1420);
        assert_checksums(&syn);

        // The server answers with a SYN-ACK and its own MSS.
        let t1 = t0 + Duration::from_millis(30);
        let flags = l4::TCP_FLAG_SYN | l4::TCP_FLAG_ACK;
        let mut syn_ack = tcp(SERVER, 443, ext_addr, ext_port, flags, 1460, false);
        let Verdict::ToNetwork(to) = aftr.handle_tun(&mut syn_ack, t1) else {
            panic!("AFTR did not send the SYN-ACK");
        };
        assert_eq!(to, peer(B4_A));
        assert_eq!(
            b4.handle_network(peer(AFTR6), &mut syn_ack, t1),
            Verdict::ToTun
        );
        assert_eq!(endpoints(&syn_ack), (SERVER, 443, LAN_HOST, 40000));
        assert_eq!(mss_of(&syn_ack), 1420);
        assert_checksums(&syn_ack);

        // A ping goes out and its reply comes back by identifier.
        let mut ping = echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 77);
        assert!(matches!(
            b4.handle_tun(&mut ping, t1),
            Verdict::ToNetwork(_)
        ));
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut ping, t1),
            Verdict::ToTun
        );
        assert_checksums(&ping);
        let (src, id, ..) = endpoints(&ping);
        let mut pong = echo(SERVER, src, icmp_echo::Kind::Reply, id);
        assert_eq!(
            aftr.handle_tun(&mut pong, t1),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(
            b4.handle_network(peer(AFTR6), &mut pong, t1),
            Verdict::ToTun
        );
        assert_eq!(endpoints(&pong).2, LAN_HOST);
        assert_eq!(endpoints(&pong).3, 77);
        assert_checksums(&pong);
    }

    #[test]
    fn aftr_too_big_toward_a_b4() {
        let mut aftr = aftr();
        let now = Instant::now();
        let mut p = LAN_UDP.to_vec();
        aftr.handle_network(peer(B4_A), &mut p, now);
        let big = udp(SERVER, 53, POOL, 5000, 1500 - 28);
        let mut p = big.clone();
        assert_eq!(
            aftr.handle_tun(&mut p, now),
            Verdict::Drop(DropReason::TooBig)
        );
        let (v, icmp) = aftr.poll(now).unwrap();
        assert_eq!(v, Verdict::ToTun);
        let ip = ipv4::Packet::new_checked(&icmp[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!((ip.src_addr(), ip.dst_addr()), (POOL, SERVER));
        let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
        assert!(e.verify_checksum());
        assert_eq!((e.msg_type(), e.code(), e.next_hop_mtu()), (3, 4, 1460));
        assert_eq!(
            e.quoted(),
            &big[..28],
            "quotes the packet as the sender sent it"
        );
        assert_eq!(aftr.stats().icmp_errors_sent, 1);

        let mut no_df = big;
        ipv4::Packet::new_unchecked(&mut no_df[..]).set_dont_frag(false);
        fix_checksums(&mut no_df);
        assert_eq!(
            aftr.handle_tun(&mut no_df, now),
            Verdict::ToNetwork(peer(B4_A))
        );
        assert_eq!(aftr.poll(now), None);
    }

    #[test]
    fn aftr_translates_icmp_errors_about_mapped_packets() {
        let mut aftr = aftr();
        let now = Instant::now();
        let original = udp(Ipv4Addr::new(192, 168, 7, 7), 33434, SERVER, 33435, 12);
        let mut out = original.clone();
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut out, now),
            Verdict::ToTun
        );
        let router = Ipv4Addr::new(192, 0, 2, 254);
        for (msg_type, code) in [(11, 0), (3, 3), (3, 4)] {
            let o = ipv4::Packet::new_checked(&out[..]).unwrap();
            let repr = icmpv4_error::Repr {
                msg_type,
                code,
                rest_of_header: 1400,
                quoted_len: icmpv4_error::quote_len(&o),
            };
            let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
            let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
            err.truncate(n);
            assert_eq!(
                aftr.handle_tun(&mut err, now),
                Verdict::ToNetwork(peer(B4_A))
            );
            let ip = ipv4::Packet::new_checked(&err[..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(
                (ip.src_addr(), ip.dst_addr()),
                (router, Ipv4Addr::new(192, 168, 7, 7))
            );
            let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
            assert!(e.verify_checksum(), "ICMP checksum follows the quote");
            assert_eq!(e.msg_type(), msg_type);
            // The quote is now what the LAN host sent, checksums and all.
            assert_eq!(e.quoted(), &original[..28]);
        }
        assert_eq!(aftr.stats().icmp_errors_translated, 3);
        // About a packet that has no mapping: dropped.
        let mut stray = out.clone();
        stray[20..22].copy_from_slice(&999u16.to_be_bytes());
        fix_checksums(&mut stray);
        let o = ipv4::Packet::new_checked(&stray[..]).unwrap();
        let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
        let repr = icmpv4_error::Repr::frag_needed(1400, 28);
        let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
        err.truncate(n);
        assert_eq!(
            aftr.handle_tun(&mut err, now),
            Verdict::Drop(DropReason::NoRoute)
        );
        // A broken ICMP checksum is not laundered by the translation.
        let o = ipv4::Packet::new_checked(&out[..]).unwrap();
        let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
        err.truncate(n);
        err[30] ^= 1;
        assert_eq!(
            aftr.handle_tun(&mut err, now),
            Verdict::Drop(DropReason::Malformed)
        );
    }

    #[test]
    fn aftr_translates_icmp_errors_about_tcp_and_echo() {
        let mut aftr = aftr();
        let now = Instant::now();
        let router = Ipv4Addr::new(192, 0, 2, 254);
        for original in [
            tcp(LAN_HOST, 40001, SERVER, 443, l4::TCP_FLAG_SYN, 1400, false),
            echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 4242),
        ] {
            let mut out = original.clone();
            assert_eq!(
                aftr.handle_network(peer(B4_A), &mut out, now),
                Verdict::ToTun
            );
            let o = ipv4::Packet::new_checked(&out[..]).unwrap();
            let mut err = vec![0u8; icmpv4_error::MAX_PACKET_LEN];
            let repr = icmpv4_error::Repr {
                msg_type: 11,
                code: 0,
                rest_of_header: 0,
                quoted_len: 28,
            };
            let n = icmpv4_error::emit_packet(&repr, &o, router, 1, &mut err);
            err.truncate(n);
            assert_eq!(
                aftr.handle_tun(&mut err, now),
                Verdict::ToNetwork(peer(B4_A))
            );
            let ip = ipv4::Packet::new_checked(&err[..]).unwrap();
            let e = icmpv4_error::Packet::new_checked(ip.payload()).unwrap();
            assert!(ip.verify_checksum() && e.verify_checksum());
            assert_eq!(e.quoted(), &original[..28]);
        }
    }

    #[test]
    fn nat_exhaustion() {
        let now = Instant::now();
        let mut c = aftr_config();
        c.max_mappings = 2;
        let mut aftr = Aftr::new(c).unwrap();
        for port in [1, 2] {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        }
        let mut p = udp(LAN_HOST, 3, SERVER, 53, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut p, now),
            Verdict::Drop(DropReason::NatExhausted)
        );
        // Existing mappings still pass.
        let mut p = udp(LAN_HOST, 1, SERVER, 53, 0);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);

        // Out of ports: two ports for three flows.
        let mut c = aftr_config();
        c.ports = 2000..=2001;
        let mut aftr = Aftr::new(c).unwrap();
        let mut got = Vec::new();
        for port in [2000, 7, 8] {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            let v = aftr.handle_network(peer(B4_A), &mut p, now);
            if v == Verdict::ToTun {
                got.push(endpoints(&p).1);
            } else {
                assert_eq!(v, Verdict::Drop(DropReason::NatExhausted));
            }
        }
        assert_eq!(got, [2000, 2001]);
    }

    #[test]
    fn one_b4_cannot_take_the_whole_nat_table() {
        let now = Instant::now();
        let mut c = aftr_config();
        c.max_mappings = 100;
        c.max_mappings_per_b4 = 3;
        c.timeouts.udp = Duration::from_secs(60);
        let mut aftr = Aftr::new(c).unwrap();
        // B4 A floods new flows: three mappings, the rest refused and counted.
        let mut passed = 0;
        for port in 1000..1050 {
            let mut p = udp(LAN_HOST, port, SERVER, 53, 0);
            match aftr.handle_network(peer(B4_A), &mut p, now) {
                Verdict::ToTun => passed += 1,
                v => assert_eq!(v, Verdict::Drop(DropReason::MappingLimit)),
            }
        }
        assert_eq!(passed, 3);
        assert_eq!(aftr.stats().mappings_over_b4_limit, 47);
        // Its existing flows still pass, and so do B4 B's new ones.
        let mut p = udp(LAN_HOST, 1000, SERVER, 53, 0);
        assert_eq!(aftr.handle_network(peer(B4_A), &mut p, now), Verdict::ToTun);
        for port in [1, 2, 3] {
            let mut p = udp(Ipv4Addr::new(10, 0, 0, 9), port, SERVER, 53, 0);
            assert_eq!(aftr.handle_network(peer(B4_B), &mut p, now), Verdict::ToTun);
        }
        assert_eq!(aftr.mappings(), 6);
        // Once A's mappings expire it may open new flows again.
        let later = now + Duration::from_secs(61);
        for _ in 0..10 {
            aftr.tick(later);
        }
        let mut p = udp(LAN_HOST, 2000, SERVER, 53, 0);
        assert_eq!(
            aftr.handle_network(peer(B4_A), &mut p, later),
            Verdict::ToTun
        );
        let mut c = aftr_config();
        c.max_mappings_per_b4 = 0;
        assert_eq!(Aftr::new(c).unwrap_err(), AftrConfigError::NoMappingsPerB4);
        assert_eq!(
            AftrConfig::new(AFTR6, vec![POOL]).max_mappings_per_b4,
            DEFAULT_MAX_MAPPINGS_PER_B4
        );
    }

    #[test]
    fn mappings_expire_with_the_clock() {
        let mut c = aftr_config();
        c.timeouts.udp = Duration::from_secs(60);
        let mut aftr = Aftr::new(c).unwrap();
        let t0 = Instant::now();
        let send = |aftr: &mut Aftr, mut p: Vec<u8>, t: Instant| {
            aftr.handle_network(peer(B4_A), &mut p, t)
        };
        send(&mut aftr, udp(LAN_HOST, 5000, SERVER, 53, 0), t0);
        send(
            &mut aftr,
            tcp(LAN_HOST, 5001, SERVER, 80, l4::TCP_FLAG_SYN, 1400, false),
            t0,
        );
        send(
            &mut aftr,
            echo(LAN_HOST, SERVER, icmp_echo::Kind::Request, 9),
            t0,
        );
        assert_eq!(aftr.mappings(), 3);

        aftr.tick(t0 + Duration::from_secs(30));
        assert_eq!(aftr.mappings(), 3, "nothing idle long enough yet");
        aftr.tick(t0 + Duration::from_secs(31));
        assert_eq!(aftr.mappings(), 2, "ICMP after 30 s");
        // Traffic keeps the UDP mapping alive.
        send(
            &mut aftr,
            udp(LAN_HOST, 5000, SERVER, 53, 0),
            t0 + Duration::from_secs(50),
        );
        aftr.tick(t0 + Duration::from_secs(100));
        assert_eq!(aftr.mappings(), 2);
        aftr.tick(t0 + Duration::from_secs(111));
        assert_eq!(aftr.mappings(), 1, "UDP after 60 s idle");
        let mut reply = udp(SERVER, 53, POOL, 5000, 0);
        assert_eq!(
            aftr.handle_tun(&mut reply, t0 + Duration::from_secs(111)),
            Verdict::Drop(DropReason::NoRoute)
        );
        // A reply after the timeout but before any tick finds nothing either.
        let mut reply = tcp(SERVER, 80, POOL, 5001, l4::TCP_FLAG_ACK, 1400, false);
        assert_eq!(
            aftr.handle_tun(&mut reply, t0 + Duration::from_secs(301)),
            Verdict::Drop(DropReason::NoRoute)
        );
        assert_eq!(aftr.mappings(), 0);
        assert_eq!(aftr.stats().mappings_expired, 3);
        assert_eq!(aftr.stats().mappings_created, 3);
        // The freed slot and port are used again.
        send(
            &mut aftr,
            udp(LAN_HOST, 5000, SERVER, 53, 0),
            t0 + Duration::from_secs(400),
        );
        assert_eq!(
            aftr.external(B4_A, protocol::UDP, LAN_HOST, 5000),
            Some((POOL, 5000))
        );
    }

    #[test]
    fn config_errors() {
        let mut c = aftr_config();
        c.pool.clear();
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::EmptyPool));
        let mut c = aftr_config();
        c.pool.push(POOL);
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::DuplicatePoolAddress(POOL))
        );
        let mut c = aftr_config();
        c.softwires.push(c.softwires[0].clone());
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::DuplicateSoftwire(B4_A))
        );
        let mut c = aftr_config();
        c.max_mappings = 0;
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::NoMappings));
        let mut c = aftr_config();
        c.inner_mtu = 60;
        assert_eq!(Aftr::new(c).err(), Some(AftrConfigError::MtuTooSmall(60)));
        #[allow(clippy::reversed_empty_ranges)]
        let ports = 2000..=1000;
        let mut c = aftr_config();
        c.ports = ports;
        assert_eq!(
            Aftr::new(c).err(),
            Some(AftrConfigError::EmptyPortRange(2000, 1000))
        );
    }

    #[test]
    fn codecs_are_send() {
        fn send<T: Send>() {}
        send::<B4>();
        send::<Aftr>();
    }

    #[test]
    fn fuzz_entries_take_records() {
        fuzz::b4(&[0, 0, 32]);
        let mut rec = vec![0x02, 0, 32];
        rec.extend_from_slice(&LAN_UDP);
        fuzz::b4(&rec);
        let mut rec = vec![0x03, 0, 32];
        rec.extend_from_slice(&LAN_UDP);
        rec.extend_from_slice(&[0x10, 0, 32]);
        rec.extend_from_slice(&NATED_UDP);
        fuzz::aftr(&rec);
    }
}
