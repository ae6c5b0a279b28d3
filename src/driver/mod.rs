//! The one datapath every userspace tunnel runs on: a TUN device on one side, a
//! raw IP or UDP socket on the other, a sans-IO [`Codec`] in between. The driver
//! knows nothing of any tunnel's packets; the codec does no IO.
//!
//! Per TUN queue, two threads:
//! - TUN -> network: nonblocking reads drained until the queue is empty or a batch
//!   is full; each read is one packet or a TSO/USO super-packet, cut here into
//!   wire-size packets with complete checksums (`offload`); the codec takes the
//!   batch under one lock; what it sends goes out with one `sendmmsg` (UDP: runs
//!   of equal-size datagrams to one peer as one UDP_SEGMENT message).
//! - network -> TUN: one `recvmmsg` of up to a batch (UDP: with UDP_GRO, split
//!   again by the segment size the kernel reports); the codec takes the batch
//!   under one lock; consecutive TCP segments of one flow are written into the TUN
//!   as one super-packet (one `writev`, payloads not copied), everything else one
//!   packet per write.
//!
//! Both threads drain the codec's `poll()` after every batch, call `tick()` about
//! every 250 ms (waiting in poll(2) no longer than that), and see `stop` at once
//! through an eventfd. Buffers are allocated when a thread starts and reused; a
//! packet costs no allocation, lock or syscall of its own on the fast path.
//!
//! A datapath process uses it like this (`tunnel::endpoint` does):
//! ```ignore
//! let mut config = DriverConfig::new("tun0", Transport::RawIp { local, protocol: 4 });
//! config.queues = 2;
//! let last = run_until(config, codec, &STOP, Duration::from_secs(1), |s| write_stats(s))?;
//! ```
//! or holds a [`Driver`] (`Driver::start`, `stats`, `stop`) to watch it itself.
//! Everything is opened on the calling thread, or on a thread inside
//! `config.namespace`; the threads that move packets can run anywhere after that.
//!
//! Raw IP transport: socket(AF_INET6 or AF_INET, SOCK_RAW, protocol) bound to the
//! local address; the kernel adds the outer header on sending and reassembles
//! fragments on receiving. IPV6_DONTFRAG stays off: a packet that no longer fits
//! the link once encapsulated is fragmented after encapsulation (RFC 2473 section
//! 7.2, the inner packet is never touched). IPv4 raw sockets hand over the outer
//! header too; it is stripped here, so codecs always see the payload.
//! Over IPv6, what fits the path MTU is sent as Ethernet frames on a packet
//! socket instead, past the kernel's per-packet IPv6 output path
//! (`packet_tx`, `DriverConfig::frames`); the raw socket still sends what must
//! be fragmented and whatever has no resolved next hop, and still receives all.

pub mod offload;
pub mod packet_tx;
pub mod process_log;
pub mod tun;

use crate::codec::{Codec, DropReason, Verdict};
use crate::driver::offload::{Coalescer, Group, TunRead, VNET_HDR_LEN, split_tun_read};
use crate::driver::packet_tx::{FrameSender, PacketTx};
use crate::socket::gso::{enable_gro, set_buffers};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tun::{Offloads, Tun, TunError};

pub const DEFAULT_BATCH: usize = 64;
/// wireguard-go's IdealBatchSize.
pub const MAX_BATCH: usize = 128;
pub const MAX_QUEUES: usize = 16;
/// Socket buffers each way: 8 MiB holds about 7 ms at 10 Gbit/s.
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;
/// How often the codec's `tick` runs.
pub const TICK: Duration = Duration::from_millis(250);

/// A TUN read holds a virtio header and at most a 64 KiB packet.
const TUN_READ_BUF: usize = VNET_HDR_LEN + 65536;
/// Room per received datagram without GRO (a reassembled one may reach 64 KiB).
const DATAGRAM_BUF: usize = 65536;
/// Room per received message with GRO: a whole train of datagrams.
const GRO_BUF: usize = 65536;
/// The kernel's UDP_MAX_SEGMENTS.
const UDP_MAX_SEGMENTS: usize = 64;
/// A UDP GSO message's payload at most (IPv4's 65507, rounded down for headroom).
const UDP_GSO_MAX_BYTES: usize = 65000;
/// Packet buffers start this large and grow once if a packet needs more.
const PACKET_BUF: usize = 2048;
/// How many times a thread that found nothing to do yields the CPU and looks
/// again before it sleeps in poll(2). Waking a sleeping reader costs its writer
/// more than a packet does on a busy machine (on a VM above all, where a
/// cross-CPU wakeup is an exit); after a few yields the reader mostly finds the
/// next packets queued. Measured with the toy tunnel on 2 busy cores: a hundred
/// times fewer sleeps, socket batches of ~54 packets instead of ~15, about 15 %
/// less CPU per GB. With a core to spare the yields return at once and cost
/// next to nothing.
const IDLE_YIELDS: u32 = 4;
/// How often a thread records its CPU time.
const CPU_EVERY: Duration = Duration::from_millis(100);

/// The tunnel socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    /// An IP protocol straight over IP (4 for IPv4-in-IPv6, 50 for ESP): a raw
    /// socket of the family of `local`, bound to it.
    RawIp { local: IpAddr, protocol: u8 },
    /// Datagrams over UDP, from `bind`.
    Udp { bind: SocketAddr },
    /// No socket: the codec writes what it keeps back into the TUN (a router's
    /// slow path). Its `ToNetwork` verdicts are dropped as `NoRoute`.
    TunOnly,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Transport::RawIp { local, protocol } => {
                write!(f, "raw IP protocol {protocol} at {local}")
            }
            Transport::Udp { bind } => write!(f, "UDP at {bind}"),
            Transport::TunOnly => write!(f, "the TUN itself"),
        }
    }
}

/// What a driver runs: which TUN, which socket, how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverConfig {
    /// The persistent TUN device, made beforehand in the same namespace.
    pub tun: String,
    /// TUN queues, each with its two threads (default 1).
    pub queues: usize,
    /// TSO/USO/checksum offloads on the TUN, and coalescing into it (default on).
    pub offloads: bool,
    /// Packets per batch: per sendmmsg, per recvmmsg, per codec lock (default 64,
    /// at most 128).
    pub batch: usize,
    pub transport: Transport,
    /// Socket buffer bytes each way (SO_SNDBUFFORCE / SO_RCVBUFFORCE).
    pub socket_buffer: usize,
    /// Open the TUN queues and the socket inside this namespace (from a thread
    /// that enters it); None: the calling thread's namespace.
    pub namespace: Option<String>,
    /// Raw IPv6 transport: send what fits the path MTU as Ethernet frames on a
    /// packet socket, past the kernel's IPv6 output path (`packet_tx`);
    /// the raw socket still sends the rest (default on).
    #[serde(default = "yes")]
    pub frames: bool,
    /// The device is a TAP: the codec sees Ethernet frames (a link's relay).
    #[serde(default)]
    pub tap: bool,
    /// Test-only: a fault to inject into one thread (see [`Fault`]).
    #[doc(hidden)]
    #[serde(skip)]
    pub fault: Option<Fault>,
}

/// A fault the tests inject into a driver thread, so they can check that a
/// dead thread takes the datapath down loudly: no input can kill a thread
/// (the codec's panics are caught), so nothing else would reach that path.
/// tunbench never sets one itself.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The thread of this name panics on its first wait for work once the
    /// driver has run for [`Fault::AFTER`].
    Panic(String),
    /// The thread of this name returns then instead.
    Exit(String),
}

impl Fault {
    /// `panic:THREAD` or `exit:THREAD`.
    pub fn parse(s: &str) -> Option<Fault> {
        match s.split_once(':')? {
            ("panic", t) => Some(Fault::Panic(t.to_string())),
            ("exit", t) => Some(Fault::Exit(t.to_string())),
            _ => None,
        }
    }

    /// Long enough for `up` to have seen the datapath start.
    pub const AFTER: Duration = Duration::from_secs(2);

    /// Whether the calling thread is to stop now (on `Exit`); panics on
    /// `Panic`. Called once per wait, off the per-packet path.
    fn strike(fault: &Option<Fault>, started: Instant) -> bool {
        if started.elapsed() < Fault::AFTER {
            return false;
        }
        let me = std::thread::current();
        let me = me.name().unwrap_or("");
        match fault {
            Some(Fault::Panic(t)) if t == me => panic!("injected fault"),
            Some(Fault::Exit(t)) if t == me => true,
            _ => false,
        }
    }
}

fn yes() -> bool {
    true
}

impl DriverConfig {
    /// The defaults: one queue, offloads on, batches of 64, 8 MiB buffers, the
    /// calling thread's namespace.
    pub fn new(tun: impl Into<String>, transport: Transport) -> DriverConfig {
        DriverConfig {
            tun: tun.into(),
            queues: 1,
            offloads: true,
            batch: DEFAULT_BATCH,
            transport,
            socket_buffer: DEFAULT_SOCKET_BUFFER,
            namespace: None,
            frames: true,
            tap: false,
            fault: None,
        }
    }

    fn validate(&self) -> Result<(), DriverError> {
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(DriverError::Config(format!(
                "batch {} is outside 1..={MAX_BATCH}",
                self.batch
            )));
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(DriverError::Config(format!(
                "queues {} is outside 1..={MAX_QUEUES}",
                self.queues
            )));
        }
        if self.tun.is_empty() {
            return Err(DriverError::Config("no TUN device named".into()));
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("driver configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Tun(#[from] TunError),
    #[error("{what} for the tunnel socket ({transport}): {source}")]
    Socket {
        what: &'static str,
        transport: Transport,
        source: io::Error,
    },
    #[error("opening the datapath in namespace {ns}: {source}")]
    Namespace { ns: String, source: io::Error },
    #[error("starting a driver thread: {0}")]
    Thread(io::Error),
    /// A thread ended while the driver ran: the datapath is half dead.
    #[error("datapath thread {thread} {how}; stopping the datapath")]
    ThreadDied { thread: String, how: String },
}

// ----------------------------------------------------------------- statistics

/// Packets and bytes one way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flow {
    pub packets: u64,
    pub bytes: u64,
}

/// Failures of the driver itself (not a codec's verdict).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    /// TUN reads that failed.
    pub tun_read: u64,
    /// Packets the TUN refused (counted per packet, coalesced ones too).
    pub tun_write: u64,
    /// Datagrams the socket refused.
    pub net_send: u64,
    /// Receives that failed or came truncated.
    pub net_recv: u64,
    /// TUN reads whose virtio header or super-packet made no sense.
    pub offload: u64,
    /// Panics caught in the codec: each dropped its one packet (counted as
    /// the `panicked` drop too), or cut a tick or `poll` short.
    pub codec_panic: u64,
    /// UDP GSO sends the kernel refused (after which GSO is off).
    pub gso_refused: u64,
}

/// Super-packets and the packets they stand for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloaded {
    pub super_packets: u64,
    pub packets: u64,
}

/// How the work came in: codec batches each way, and how often a thread slept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batches {
    /// Batches from the TUN (packets per batch: `tun_rx.packets / tun_to_net`).
    pub tun_to_net: u64,
    /// Batches from the socket (`net_rx.packets / net_to_tun`).
    pub net_to_tun: u64,
    /// Waits in poll(2) for work.
    pub waits: u64,
}

/// Raw IPv6 packets sent as Ethernet frames on a packet socket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frames {
    /// Whether the packet socket is open (raw IPv6 transport, `frames` on).
    pub enabled: bool,
    /// Packets sent as frames.
    pub packets: u64,
    /// Packets that went through the raw socket instead: larger than the path
    /// MTU, no usable neighbour, or the one per peer and second that keeps the
    /// kernel's neighbour entry confirmed.
    pub fallbacks: u64,
    /// Next-hop lookups over rtnetlink.
    pub lookups: u64,
}

/// A driver's counters at one moment. Packets are IP packets on the TUN side
/// (after segmentation, before coalescing) and datagrams (payload bytes) on the
/// network side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub tun_rx: Flow,
    pub net_tx: Flow,
    pub net_rx: Flow,
    pub tun_tx: Flow,
    /// The codec's drops, by `DropReason::name`; every reason is present.
    pub drops: BTreeMap<String, u64>,
    pub errors: Errors,
    /// TUN reads that were super-packets, and the packets cut from them.
    pub segmented: Offloaded,
    /// Coalesced TUN writes, and the packets they carried.
    pub coalesced: Offloaded,
    pub batches: Batches,
    /// CPU time of the driver's threads (CLOCK_THREAD_CPUTIME_ID, summed).
    pub cpu_seconds: f64,
    pub uptime_seconds: f64,
    pub threads: usize,
    pub offloads: Offloads,
    pub udp_gso: bool,
    pub udp_gro: bool,
    #[serde(default)]
    pub frames: Frames,
}

impl StatsSnapshot {
    /// All drops by the codec.
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }

    pub fn drops_of(&self, r: DropReason) -> u64 {
        self.drops.get(r.name()).copied().unwrap_or(0)
    }
}

#[derive(Clone, Copy)]
enum Ctr {
    TunRxPackets,
    TunRxBytes,
    NetTxPackets,
    NetTxBytes,
    NetRxPackets,
    NetRxBytes,
    TunTxPackets,
    TunTxBytes,
    SegmentedSupers,
    SegmentedPackets,
    CoalescedSupers,
    CoalescedPackets,
    TunReadErr,
    TunWriteErr,
    NetSendErr,
    NetRecvErr,
    OffloadErr,
    CodecPanic,
    GsoRefused,
    FramePackets,
    FrameFallbacks,
    FrameLookups,
    TunBatches,
    NetBatches,
    Waits,
}
const COUNTERS: usize = Ctr::Waits as usize + 1;
const REASONS: usize = DropReason::ALL.len();

struct Stats {
    c: [AtomicU64; COUNTERS],
    drops: [AtomicU64; REASONS],
    cpu_ns: Vec<AtomicU64>,
}

/// A thread's counts since its last flush into the shared atomics.
struct Local {
    c: [u64; COUNTERS],
    drops: [u64; REASONS],
}

impl Local {
    fn new() -> Local {
        Local {
            c: [0; COUNTERS],
            drops: [0; REASONS],
        }
    }

    fn add(&mut self, c: Ctr, n: u64) {
        self.c[c as usize] += n;
    }

    fn packet(&mut self, packets: Ctr, bytes: Ctr, len: usize) {
        self.c[packets as usize] += 1;
        self.c[bytes as usize] += len as u64;
    }

    fn dropped(&mut self, r: DropReason) {
        let i = DropReason::ALL
            .iter()
            .position(|x| *x == r)
            .unwrap_or(REASONS - 1);
        self.drops[i] += 1;
    }

    fn flush(&mut self, s: &Stats) {
        for (i, v) in self.c.iter_mut().enumerate() {
            if *v != 0 {
                s.c[i].fetch_add(*v, Ordering::Relaxed);
                *v = 0;
            }
        }
        for (i, v) in self.drops.iter_mut().enumerate() {
            if *v != 0 {
                s.drops[i].fetch_add(*v, Ordering::Relaxed);
                *v = 0;
            }
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec on this stack frame.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

// ----------------------------------------------------------------- the driver

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SockKind {
    Raw4,
    Raw6,
    Udp4,
    Udp6,
}

impl SockKind {
    fn is_udp(self) -> bool {
        matches!(self, SockKind::Udp4 | SockKind::Udp6)
    }

    fn is_v6(self) -> bool {
        matches!(self, SockKind::Raw6 | SockKind::Udp6)
    }
}

struct CodecSlot<C> {
    codec: C,
    next_tick: Instant,
}

struct Shared<C> {
    codec: Mutex<CodecSlot<C>>,
    stats: Stats,
    stop: AtomicBool,
    /// An eventfd that becomes readable on stop, so waiting threads see it at once.
    wake: OwnedFd,
    /// None for `Transport::TunOnly`.
    sock: Option<Socket>,
    kind: SockKind,
    /// Raw IPv6 only: the packet socket frames go out on.
    packet_tx: Option<PacketTx>,
    gso: AtomicBool,
    gro: bool,
    offloads: Offloads,
    batch: usize,
    started: Instant,
    /// When the next tick is due, in ns since `started` (read without the lock).
    next_tick_ns: AtomicU64,
    /// The codec's deadline, in ns since `started`; u64::MAX for none.
    next_due_ns: AtomicU64,
    fault: Option<Fault>,
}

impl<C: Codec> Shared<C> {
    fn lock(&self) -> MutexGuard<'_, CodecSlot<C>> {
        self.codec.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Runs `tick` when due; the caller holds the lock.
    fn tick_if_due(&self, slot: &mut CodecSlot<C>, now: Instant) {
        if now >= slot.next_tick {
            slot.codec.tick(now);
            slot.next_tick = now + TICK;
            let due = slot.next_tick.saturating_duration_since(self.started);
            self.next_tick_ns
                .store(due.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Records the codec's deadline; the caller holds the lock.
    fn note_deadline(&self, codec: &C) {
        let due = codec.deadline().map_or(u64::MAX, |d| {
            d.saturating_duration_since(self.started).as_nanos() as u64
        });
        self.next_due_ns.store(due, Ordering::Relaxed);
    }

    /// How long a thread may sleep in poll(2): until the next tick is due, or
    /// the codec's deadline (a held packet's time) if sooner.
    fn until_tick(&self) -> Duration {
        let now = self.started.elapsed().as_nanos() as u64;
        let tick = self.next_tick_ns.load(Ordering::Relaxed);
        let due = self.next_due_ns.load(Ordering::Relaxed);
        if due < tick {
            return Duration::from_nanos(due.saturating_sub(now))
                .clamp(Duration::from_micros(10), TICK);
        }
        Duration::from_nanos(tick.saturating_sub(now)).clamp(Duration::from_micros(100), TICK)
    }

    /// Waits until `fd` is readable, the next tick is due, or stop.
    fn wait(&self, fd: BorrowedFd<'_>) {
        let t = self.until_tick();
        let ts = libc::timespec {
            tv_sec: t.as_secs() as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        };
        let mut fds = [
            libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds and a timespec on this stack frame, no signal mask.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if r > 0 && fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            // A queue or socket in a lasting error state: do not spin on it.
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn snapshot(&self) -> StatsSnapshot {
        let c = |x: Ctr| self.stats.c[x as usize].load(Ordering::Relaxed);
        let cpu: u64 = self
            .stats
            .cpu_ns
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum();
        StatsSnapshot {
            tun_rx: Flow {
                packets: c(Ctr::TunRxPackets),
                bytes: c(Ctr::TunRxBytes),
            },
            net_tx: Flow {
                packets: c(Ctr::NetTxPackets),
                bytes: c(Ctr::NetTxBytes),
            },
            net_rx: Flow {
                packets: c(Ctr::NetRxPackets),
                bytes: c(Ctr::NetRxBytes),
            },
            tun_tx: Flow {
                packets: c(Ctr::TunTxPackets),
                bytes: c(Ctr::TunTxBytes),
            },
            drops: DropReason::ALL
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        r.name().to_string(),
                        self.stats.drops[i].load(Ordering::Relaxed),
                    )
                })
                .collect(),
            errors: Errors {
                tun_read: c(Ctr::TunReadErr),
                tun_write: c(Ctr::TunWriteErr),
                net_send: c(Ctr::NetSendErr),
                net_recv: c(Ctr::NetRecvErr),
                offload: c(Ctr::OffloadErr),
                codec_panic: c(Ctr::CodecPanic),
                gso_refused: c(Ctr::GsoRefused),
            },
            segmented: Offloaded {
                super_packets: c(Ctr::SegmentedSupers),
                packets: c(Ctr::SegmentedPackets),
            },
            coalesced: Offloaded {
                super_packets: c(Ctr::CoalescedSupers),
                packets: c(Ctr::CoalescedPackets),
            },
            batches: Batches {
                tun_to_net: c(Ctr::TunBatches),
                net_to_tun: c(Ctr::NetBatches),
                waits: c(Ctr::Waits),
            },
            cpu_seconds: cpu as f64 / 1e9,
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            threads: self.stats.cpu_ns.len(),
            offloads: self.offloads,
            udp_gso: self.kind.is_udp() && self.gso.load(Ordering::Relaxed),
            udp_gro: self.gro,
            frames: Frames {
                enabled: self.packet_tx.is_some(),
                packets: c(Ctr::FramePackets),
                fallbacks: c(Ctr::FrameFallbacks),
                lookups: c(Ctr::FrameLookups),
            },
        }
    }
}

/// A running datapath. Dropping it stops it too.
pub struct Driver<C: Codec + 'static> {
    shared: Arc<Shared<C>>,
    threads: Vec<JoinHandle<()>>,
    local_addr: Option<SocketAddr>,
}

/// What `start` opens inside the namespace.
struct Opened {
    tun: Tun,
    sock: Option<Socket>,
    kind: SockKind,
    packet_tx: Option<PacketTx>,
    gso: bool,
    gro: bool,
}

fn open(config: &DriverConfig) -> Result<Opened, DriverError> {
    let tun = Tun::attach(&config.tun, config.queues, config.offloads, config.tap)?;
    let t = config.transport;
    let err = |what: &'static str| {
        move |source| DriverError::Socket {
            what,
            transport: t,
            source,
        }
    };
    let (sock, kind, bind) = match t {
        Transport::TunOnly => {
            return Ok(Opened {
                tun,
                sock: None,
                kind: SockKind::Raw4,
                packet_tx: None,
                gso: false,
                gro: false,
            });
        }
        Transport::RawIp { local, protocol } => {
            let (domain, kind) = match local {
                IpAddr::V4(_) => (Domain::IPV4, SockKind::Raw4),
                IpAddr::V6(_) => (Domain::IPV6, SockKind::Raw6),
            };
            let s = Socket::new(domain, Type::RAW, Some(Protocol::from(protocol as i32)))
                .map_err(err("creating a raw socket"))?;
            (s, kind, SocketAddr::new(local, 0))
        }
        Transport::Udp { bind } => {
            let (domain, kind) = match bind {
                SocketAddr::V4(_) => (Domain::IPV4, SockKind::Udp4),
                SocketAddr::V6(_) => (Domain::IPV6, SockKind::Udp6),
            };
            let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))
                .map_err(err("creating a UDP socket"))?;
            (s, kind, bind)
        }
    };
    sock.set_cloexec(true)
        .map_err(err("setting close-on-exec"))?;
    sock.bind(&SockAddr::from(bind))
        .map_err(err("binding the local address"))?;
    set_buffers(&sock, config.socket_buffer);
    let (gso, gro) = if kind.is_udp() {
        // A kernel that knows UDP_SEGMENT takes it as a socket option too; each
        // message still carries its own size.
        let gso = crate::socket::gso::setsockopt_int(&sock, libc::SOL_UDP, libc::UDP_SEGMENT, 0);
        (gso, enable_gro(&sock))
    } else {
        (false, false)
    };
    let packet_tx = match t {
        // Without a packet socket (no CAP_NET_RAW for it, no rtnetlink) the
        // raw socket sends everything, as before.
        Transport::RawIp {
            local: IpAddr::V6(local),
            protocol,
        } if config.frames => {
            let hops = sock.unicast_hops_v6().unwrap_or(64).min(255) as u8;
            PacketTx::open(local, protocol, hops, config.socket_buffer).ok()
        }
        _ => None,
    };
    Ok(Opened {
        tun,
        sock: Some(sock),
        kind,
        packet_tx,
        gso,
        gro,
    })
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we own from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl<C: Codec + 'static> Driver<C> {
    /// Attaches to the TUN, opens the socket (inside `config.namespace` when
    /// set), and starts the threads.
    pub fn start(config: DriverConfig, codec: C) -> Result<Driver<C>, DriverError> {
        config.validate()?;
        let opened = match &config.namespace {
            None => open(&config)?,
            Some(ns) => {
                let cfg = config.clone();
                netns::namespace::run_in(ns, move || Ok(open(&cfg))).map_err(|source| {
                    DriverError::Namespace {
                        ns: ns.clone(),
                        source,
                    }
                })??
            }
        };
        let local_addr = (opened.sock.as_ref())
            .and_then(|s| s.local_addr().ok())
            .and_then(|a| a.as_socket());
        // Without a socket nothing comes from the network: one thread per queue.
        let directions = if opened.sock.is_some() { 2 } else { 1 };
        let offloads = opened.tun.offloads();
        let queues = opened.tun.into_queues();
        let threads_n = queues.len() * directions;
        let wake = eventfd().map_err(DriverError::Thread)?;
        let now = Instant::now();
        let shared = Arc::new(Shared {
            codec: Mutex::new(CodecSlot {
                codec,
                next_tick: now + TICK,
            }),
            stats: Stats {
                c: std::array::from_fn(|_| AtomicU64::new(0)),
                drops: std::array::from_fn(|_| AtomicU64::new(0)),
                cpu_ns: (0..threads_n).map(|_| AtomicU64::new(0)).collect(),
            },
            stop: AtomicBool::new(false),
            wake,
            sock: opened.sock,
            kind: opened.kind,
            packet_tx: opened.packet_tx,
            gso: AtomicBool::new(opened.gso),
            gro: opened.gro,
            offloads,
            batch: config.batch,
            started: now,
            next_tick_ns: AtomicU64::new(TICK.as_nanos() as u64),
            next_due_ns: AtomicU64::new(u64::MAX),
            fault: config.fault.clone(),
        });
        let mut d = Driver {
            shared,
            threads: Vec::with_capacity(threads_n),
            local_addr,
        };
        let queues: Vec<Arc<OwnedFd>> = queues.into_iter().map(Arc::new).collect();
        for (q, fd) in queues.iter().enumerate() {
            for dir in 0..directions {
                let sh = d.shared.clone();
                let fd = fd.clone();
                let slot = q * directions + dir;
                let name = if dir == 0 {
                    format!("tb-tun{q}-to-net")
                } else {
                    format!("tb-net-to-tun{q}")
                };
                let h = std::thread::Builder::new()
                    .name(name)
                    .spawn(move || {
                        if dir == 0 {
                            TunToNet::new(&sh).run(&sh, fd.as_fd(), slot)
                        } else {
                            NetToTun::new(&sh).run(&sh, fd.as_fd(), slot)
                        }
                    })
                    .map_err(DriverError::Thread);
                match h {
                    Ok(h) => d.threads.push(h),
                    Err(e) => {
                        d.halt();
                        return Err(e);
                    }
                }
            }
        }
        Ok(d)
    }

    /// The counters now.
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.snapshot()
    }

    /// The socket's local address (a UDP port the kernel chose, for one).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Runs `f` on the codec, between batches.
    pub fn with_codec<R>(&self, f: impl FnOnce(&mut C) -> R) -> R {
        f(&mut self.shared.lock().codec)
    }

    /// Whether every thread is still running.
    pub fn is_running(&self) -> bool {
        !self.threads.is_empty() && self.threads.iter().all(|t| !t.is_finished())
    }

    /// When a thread has ended though the driver was not stopped: stops the
    /// others and says which one ended and how (its panic's message). A
    /// datapath with a dead thread is half a datapath: better none, loudly.
    pub fn check_threads(&mut self) -> Result<(), DriverError> {
        let Some(i) = self.threads.iter().position(|t| t.is_finished()) else {
            return Ok(());
        };
        let t = self.threads.remove(i);
        let thread = t.thread().name().unwrap_or("(unnamed)").to_string();
        let how = match t.join() {
            Ok(()) => "exited".to_string(),
            Err(payload) => format!("panicked: {}", panic_message(payload.as_ref())),
        };
        self.halt();
        Err(DriverError::ThreadDied { thread, how })
    }

    /// Stops the threads, waits for them, and returns the final counters.
    pub fn stop(mut self) -> StatsSnapshot {
        self.halt();
        self.shared.snapshot()
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes to our eventfd.
        unsafe {
            libc::write(
                self.shared.wake.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What a panic said, when it said it with a string.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

impl<C: Codec + 'static> Drop for Driver<C> {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs a driver until `stop` is set, handing its counters to `on_stats` every
/// `interval` and once more at the end (for a datapath process that writes a
/// stats file every second). Returns the final counters.
pub fn run_until<C: Codec + 'static>(
    config: DriverConfig,
    codec: C,
    stop: &AtomicBool,
    interval: Duration,
    on_stats: impl FnMut(&StatsSnapshot),
) -> Result<StatsSnapshot, DriverError> {
    run_until_with(config, codec, stop, interval, on_stats, |_| {})
}

/// `run_until`, also handing the running driver to `each` every `interval`
/// (a relay process takes new settings into its codec this way).
pub fn run_until_with<C: Codec + 'static>(
    config: DriverConfig,
    codec: C,
    stop: &AtomicBool,
    interval: Duration,
    mut on_stats: impl FnMut(&StatsSnapshot),
    mut each: impl FnMut(&Driver<C>),
) -> Result<StatsSnapshot, DriverError> {
    let mut d = Driver::start(config, codec)?;
    let mut next = Instant::now() + interval;
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = d.check_threads() {
            // The last counters first: they show what the datapath had done.
            on_stats(&d.stats());
            return Err(e);
        }
        let now = Instant::now();
        if now >= next {
            each(&d);
            on_stats(&d.stats());
            next = now + interval;
        }
        std::thread::sleep(
            next.saturating_duration_since(now)
                .min(Duration::from_millis(50)),
        );
    }
    let s = d.stop();
    on_stats(&s);
    Ok(s)
}

// ------------------------------------------------------------ socket plumbing

/// A socket address as the kernel takes and gives it.
#[derive(Clone, Copy)]
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
}

impl RawAddr {
    fn zeroed() -> RawAddr {
        // SAFETY: all-zero is a valid sockaddr_in6 (and sockaddr_in).
        unsafe { std::mem::zeroed() }
    }

    /// `a` in the socket's family (an IPv4 peer on an IPv6 UDP socket becomes
    /// v4-mapped); None when it cannot be expressed. Raw sockets take port 0.
    fn from(a: SocketAddr, kind: SockKind) -> Option<(RawAddr, libc::socklen_t)> {
        let port = if kind.is_udp() { a.port() } else { 0 };
        let mut r = RawAddr::zeroed();
        match (a, kind.is_v6()) {
            (SocketAddr::V4(v4), false) => {
                r.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*v4.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                Some((r, std::mem::size_of::<libc::sockaddr_in>() as _))
            }
            (SocketAddr::V6(v6), true) => {
                r.v6 = sockaddr_in6(*v6.ip(), port, v6.scope_id());
                Some((r, std::mem::size_of::<libc::sockaddr_in6>() as _))
            }
            (SocketAddr::V4(v4), true) if kind.is_udp() => {
                r.v6 = sockaddr_in6(v4.ip().to_ipv6_mapped(), port, 0);
                Some((r, std::mem::size_of::<libc::sockaddr_in6>() as _))
            }
            (SocketAddr::V6(v6), false) => {
                let v4 = v6.ip().to_ipv4_mapped()?;
                r.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(v4).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                Some((r, std::mem::size_of::<libc::sockaddr_in>() as _))
            }
            _ => None,
        }
    }

    /// The address the kernel wrote; v4-mapped IPv6 comes back as IPv4.
    fn to_socket_addr(self) -> Option<SocketAddr> {
        // SAFETY: the family field lies at the same place in both, and the kernel
        // filled the variant it names.
        unsafe {
            match self.v4.sin_family as libc::c_int {
                libc::AF_INET => Some(SocketAddr::V4(SocketAddrV4::new(
                    u32::from_be(self.v4.sin_addr.s_addr).into(),
                    u16::from_be(self.v4.sin_port),
                ))),
                libc::AF_INET6 => {
                    let ip = Ipv6Addr::from(self.v6.sin6_addr.s6_addr);
                    let port = u16::from_be(self.v6.sin6_port);
                    Some(match ip.to_ipv4_mapped() {
                        Some(v4) => SocketAddr::V4(SocketAddrV4::new(v4, port)),
                        None => SocketAddr::V6(SocketAddrV6::new(
                            ip,
                            port,
                            self.v6.sin6_flowinfo,
                            self.v6.sin6_scope_id,
                        )),
                    })
                }
                _ => None,
            }
        }
    }
}

fn sockaddr_in6(ip: Ipv6Addr, port: u16, scope: u32) -> libc::sockaddr_in6 {
    libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr {
            s6_addr: ip.octets(),
        },
        sin6_scope_id: scope,
    }
}

/// Control-message room per message: one cmsghdr and an int, aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Cmsg([u8; 32]);

fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EMSGSIZE) | Some(libc::ENOPROTOOPT)
    )
}

/// One sendmmsg message being built: which packets, to whom.
#[derive(Clone, Copy)]
struct Msg {
    /// Index in the caller's items of the first datagram.
    first_item: usize,
    /// First entry in `Sender::iov`, and how many.
    iov: usize,
    count: usize,
    bytes: usize,
    /// The UDP_SEGMENT size when it carries several datagrams, else 0.
    segment: usize,
    addr: RawAddr,
    addr_len: libc::socklen_t,
}

/// Sends batches on the tunnel socket, reusing its arrays.
struct Sender {
    msgs: Vec<Msg>,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    cmsgs: Vec<Cmsg>,
    /// With a packet socket: this thread's next hops, and per item the next
    /// hop's slot it goes out with as a frame (None: the raw socket).
    frames: Option<FrameSender>,
    ways: Vec<Option<usize>>,
}

impl Sender {
    fn new<C: Codec>(sh: &Shared<C>) -> Sender {
        let batch = sh.batch;
        Sender {
            msgs: Vec::with_capacity(batch),
            iov: Vec::with_capacity(batch),
            hdrs: Vec::with_capacity(batch),
            cmsgs: Vec::with_capacity(batch),
            frames: sh.packet_tx.as_ref().map(|_| FrameSender::new(batch)),
            ways: Vec::with_capacity(batch),
        }
    }

    /// Sends `bufs[i]` to `peer` for each `(i, peer)` of `items`, in order.
    fn send<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        local: &mut Local,
    ) {
        if sh.sock.is_none() {
            // TunOnly: there is no network to send to.
            for _ in items {
                local.dropped(DropReason::NoRoute);
            }
            return;
        }
        if let Some(tx) = &sh.packet_tx {
            self.send_framed(sh, tx, bufs, items, local);
            return;
        }
        let mut from = 0;
        while from < items.len() {
            let gso = sh.kind.is_udp() && sh.gso.load(Ordering::Relaxed);
            match self.send_from(sh, bufs, &items[from..], gso, local) {
                None => return,
                // GSO refused: the rest goes again without it.
                Some(done) => from += done,
            }
        }
    }

    /// Raw IPv6 with a packet socket: what can go as frames does, the rest
    /// through the raw socket, each run of either in order.
    fn send_framed<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        tx: &PacketTx,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        local: &mut Local,
    ) {
        let Some(frames) = self.frames.as_mut() else {
            let _ = self.send_from(sh, bufs, items, false, local);
            return;
        };
        frames.begin();
        let now = Instant::now();
        self.ways.clear();
        for &(b, peer) in items {
            self.ways.push(match peer {
                SocketAddr::V6(p) => frames.route(tx, *p.ip(), bufs[b].len(), now),
                SocketAddr::V4(_) => None,
            });
        }
        local.add(Ctr::FrameLookups, std::mem::take(&mut frames.lookups));
        let mut i = 0;
        while i < items.len() {
            let framed = self.ways[i].is_some();
            let end = (i..items.len())
                .find(|&k| self.ways[k].is_some() != framed)
                .unwrap_or(items.len());
            if let (true, Some(frames)) = (framed, self.frames.as_mut()) {
                let ways = &self.ways;
                let s = frames.send(
                    tx,
                    (i..end).filter_map(|k| Some((ways[k]?, bufs[items[k].0].as_slice()))),
                );
                local.add(Ctr::FramePackets, s.packets);
                local.add(Ctr::NetTxPackets, s.packets);
                local.add(Ctr::NetTxBytes, s.bytes);
                local.add(Ctr::NetSendErr, s.failed);
            } else {
                local.add(Ctr::FrameFallbacks, (end - i) as u64);
                // No GSO on a raw socket: one pass sends them all.
                let _ = self.send_from(sh, bufs, &items[i..end], false, local);
            }
            i = end;
        }
    }

    /// Sends items until done (None), or until a GSO message is refused: then
    /// GSO is off and the number of items dealt with is returned.
    fn send_from<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        bufs: &[Vec<u8>],
        items: &[(usize, SocketAddr)],
        gso: bool,
        local: &mut Local,
    ) -> Option<usize> {
        self.msgs.clear();
        self.iov.clear();
        // Messages: runs of datagrams to one peer, all of one size but a shorter
        // last one, become one UDP_SEGMENT message.
        let mut i = 0;
        while i < items.len() {
            let (b, peer) = items[i];
            let Some((addr, addr_len)) = RawAddr::from(peer, sh.kind) else {
                local.add(Ctr::NetSendErr, 1);
                i += 1;
                continue;
            };
            let size = bufs[b].len();
            let first_item = i;
            let iov_at = self.iov.len();
            self.iov.push(libc::iovec {
                iov_base: bufs[b].as_ptr() as *mut libc::c_void,
                iov_len: size,
            });
            let mut count = 1;
            let mut bytes = size;
            i += 1;
            if gso && size > 0 {
                while i < items.len()
                    && count < UDP_MAX_SEGMENTS
                    && items[i].1 == peer
                    && bufs[items[i].0].len() <= size
                    && !bufs[items[i].0].is_empty()
                    && bytes + bufs[items[i].0].len() <= UDP_GSO_MAX_BYTES
                {
                    let len = bufs[items[i].0].len();
                    self.iov.push(libc::iovec {
                        iov_base: bufs[items[i].0].as_ptr() as *mut libc::c_void,
                        iov_len: len,
                    });
                    count += 1;
                    bytes += len;
                    i += 1;
                    if len < size {
                        break;
                    }
                }
            }
            self.msgs.push(Msg {
                first_item,
                iov: iov_at,
                count,
                bytes,
                segment: if count > 1 { size } else { 0 },
                addr,
                addr_len,
            });
        }
        let n = self.msgs.len();
        // SAFETY: zeroed mmsghdr and Cmsg are valid (null pointers, zero lengths).
        self.hdrs.resize(n, unsafe { std::mem::zeroed() });
        self.cmsgs.resize(n, Cmsg([0; 32]));
        for m in 0..n {
            let msg = &mut self.msgs[m];
            let h = &mut self.hdrs[m];
            // SAFETY: as above.
            *h = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = &mut msg.addr as *mut RawAddr as *mut libc::c_void;
            h.msg_hdr.msg_namelen = msg.addr_len;
            h.msg_hdr.msg_iov = self.iov[msg.iov..].as_mut_ptr();
            h.msg_hdr.msg_iovlen = msg.count as _;
            if msg.segment > 0 {
                let c = &mut self.cmsgs[m];
                h.msg_hdr.msg_control = c.0.as_mut_ptr() as *mut libc::c_void;
                // SAFETY: CMSG_* on a control buffer of 32 bytes, which holds
                // CMSG_SPACE(2) = 24; the data is written unaligned.
                unsafe {
                    h.msg_hdr.msg_controllen = libc::CMSG_SPACE(2) as _;
                    let cm = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                    (*cm).cmsg_level = libc::SOL_UDP;
                    (*cm).cmsg_type = libc::UDP_SEGMENT;
                    (*cm).cmsg_len = libc::CMSG_LEN(2) as _;
                    (libc::CMSG_DATA(cm) as *mut u16).write_unaligned(msg.segment as u16);
                }
            }
        }
        let fd = (sh.sock.as_ref())
            .expect("send() keeps TunOnly away")
            .as_raw_fd();
        let mut m = 0;
        while m < n {
            let left = (n - m).min(1024);
            // SAFETY: hdrs[m..m+left] point into iov, msgs (addresses) and cmsgs,
            // which live until the call returns, and into `bufs`, borrowed.
            let r = unsafe { libc::sendmmsg(fd, self.hdrs[m..].as_mut_ptr(), left as u32, 0) };
            if r > 0 {
                for msg in &self.msgs[m..m + r as usize] {
                    local.add(Ctr::NetTxPackets, msg.count as u64);
                    local.add(Ctr::NetTxBytes, msg.bytes as u64);
                }
                m += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            let msg = self.msgs[m];
            if msg.segment > 0 && gso_refused(&e) {
                // The path cannot segment (no checksum offload, a segment over the
                // MTU): plain datagrams from now on, for this socket.
                sh.gso.store(false, Ordering::Relaxed);
                local.add(Ctr::GsoRefused, 1);
                return Some(msg.first_item);
            }
            local.add(Ctr::NetSendErr, msg.count as u64);
            m += 1;
        }
        None
    }
}

/// Writes one packet into the TUN with an all-zero virtio header.
/// A packet from the tunnel socket into the TUN: its TCP/UDP checksum may be a
/// kernel sender's partial one, so the kernel is asked to complete it.
fn write_from_network(fd: BorrowedFd<'_>, p: &mut [u8], local: &mut Local) {
    match crate::driver::offload::partial_checksum_for_tun(p) {
        Some(hdr) => write_with_header(fd, &hdr.to_bytes(), p, local),
        None => write_single(fd, p, local),
    }
}

fn write_single(fd: BorrowedFd<'_>, p: &[u8], local: &mut Local) {
    static ZERO: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];
    write_with_header(fd, &ZERO, p, local)
}

/// One packet into the TUN behind its virtio-net header.
fn write_with_header(fd: BorrowedFd<'_>, hdr: &[u8; VNET_HDR_LEN], p: &[u8], local: &mut Local) {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: VNET_HDR_LEN,
        },
        libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        },
    ];
    match tun::write_iov(fd, &iov) {
        Ok(_) => local.packet(Ctr::TunTxPackets, Ctr::TunTxBytes, p.len()),
        Err(_) => local.add(Ctr::TunWriteErr, 1),
    }
}

/// Buffers `Extras` keeps for reuse at most.
const SPARE_BUFFERS: usize = 256;

/// Outputs of `poll()` and their sending, shared by both directions.
struct Extras {
    bufs: Vec<Vec<u8>>,
    to_net: Vec<(usize, SocketAddr)>,
    to_tun: Vec<usize>,
    /// Sent buffers kept for reuse: a codec that holds packets (`Queued`)
    /// takes the driver's buffers and gives them back through `poll`, so
    /// the batch slots it emptied are refilled from here, not allocated.
    spare: Vec<Vec<u8>>,
}

impl Extras {
    fn new() -> Extras {
        Extras {
            bufs: Vec::new(),
            to_net: Vec::new(),
            to_tun: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Drains the codec's own packets; the caller holds the lock.
    fn collect<C: Codec>(&mut self, codec: &mut C, now: Instant, local: &mut Local) {
        while let Some((v, buf)) = codec.poll(now) {
            match v {
                Verdict::ToNetwork(a) => {
                    self.to_net.push((self.bufs.len(), a));
                    self.bufs.push(buf);
                }
                Verdict::ToTun => {
                    self.to_tun.push(self.bufs.len());
                    self.bufs.push(buf);
                }
                Verdict::Drop(r) => local.dropped(r),
                Verdict::Queued | Verdict::Consumed => {}
            }
        }
    }

    fn flush<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        sender: &mut Sender,
        tun: BorrowedFd<'_>,
        local: &mut Local,
    ) {
        if self.bufs.is_empty() {
            return;
        }
        for &i in &self.to_tun {
            write_single(tun, &self.bufs[i], local);
        }
        sender.send(sh, &self.bufs, &self.to_net, local);
        self.to_net.clear();
        self.to_tun.clear();
        for mut b in self.bufs.drain(..) {
            if self.spare.len() < SPARE_BUFFERS {
                b.clear();
                self.spare.push(b);
            }
        }
    }
}

fn record_cpu(stats: &Stats, slot: usize, last: &mut Instant, now: Instant, force: bool) {
    if force || now.duration_since(*last) >= CPU_EVERY {
        stats.cpu_ns[slot].store(thread_cpu_ns(), Ordering::Relaxed);
        *last = now;
    }
}

// ----------------------------------------------------------- TUN -> network

struct TunToNet {
    read: Vec<u8>,
    pkts: Vec<Vec<u8>>,
    verdicts: Vec<Verdict>,
    to_net: Vec<(usize, SocketAddr)>,
    sender: Sender,
    extras: Extras,
    local: Local,
}

impl TunToNet {
    fn new<C: Codec>(sh: &Shared<C>) -> TunToNet {
        TunToNet {
            read: vec![0; TUN_READ_BUF],
            pkts: (0..sh.batch)
                .map(|_| Vec::with_capacity(PACKET_BUF))
                .collect(),
            verdicts: Vec::with_capacity(sh.batch),
            to_net: Vec::with_capacity(sh.batch),
            sender: Sender::new(sh),
            extras: Extras::new(),
            local: Local::new(),
        }
    }

    fn run<C: Codec>(mut self, sh: &Shared<C>, tun: BorrowedFd<'_>, slot: usize) {
        let mut cpu_at = Instant::now();
        let batch = sh.batch;
        let mut idle = 0;
        while !sh.stopping() {
            let mut n = 0;
            // Whether the queue was found empty (else the batch filled up).
            let mut empty = false;
            loop {
                let len = match tun::read(tun, &mut self.read) {
                    Ok(Some(len)) => len,
                    Ok(None) => {
                        empty = true;
                        break;
                    }
                    Err(_) => {
                        self.local.add(Ctr::TunReadErr, 1);
                        std::thread::sleep(Duration::from_millis(10));
                        empty = true;
                        break;
                    }
                };
                if len >= self.read.len() {
                    // Larger than any packet may be: something is off.
                    self.local.add(Ctr::OffloadErr, 1);
                    continue;
                }
                match split_tun_read(&mut self.read[..len]) {
                    Ok(TunRead::Packet(p)) => {
                        let b = &mut self.pkts[n];
                        b.clear();
                        b.extend_from_slice(p);
                        self.local
                            .packet(Ctr::TunRxPackets, Ctr::TunRxBytes, p.len());
                        n += 1;
                    }
                    Ok(TunRead::Gso(s)) => {
                        self.local.add(Ctr::SegmentedSupers, 1);
                        self.local.add(Ctr::SegmentedPackets, s.count() as u64);
                        for i in 0..s.count() {
                            if n == batch {
                                Self::flush(
                                    &mut self.pkts,
                                    &mut self.verdicts,
                                    &mut self.to_net,
                                    &mut self.sender,
                                    &mut self.extras,
                                    &mut self.local,
                                    sh,
                                    tun,
                                    n,
                                );
                                n = 0;
                            }
                            s.segment_into(i, &mut self.pkts[n]);
                            self.local.packet(
                                Ctr::TunRxPackets,
                                Ctr::TunRxBytes,
                                self.pkts[n].len(),
                            );
                            n += 1;
                        }
                    }
                    Err(_) => self.local.add(Ctr::OffloadErr, 1),
                }
                if n >= batch {
                    break;
                }
            }
            if n > 0 || empty {
                Self::flush(
                    &mut self.pkts,
                    &mut self.verdicts,
                    &mut self.to_net,
                    &mut self.sender,
                    &mut self.extras,
                    &mut self.local,
                    sh,
                    tun,
                    n,
                );
            }
            let now = Instant::now();
            record_cpu(&sh.stats, slot, &mut cpu_at, now, false);
            if empty {
                if n > 0 {
                    idle = 0;
                }
                if idle < IDLE_YIELDS {
                    idle += 1;
                    std::thread::yield_now();
                    continue;
                }
                self.local.add(Ctr::Waits, 1);
                self.local.flush(&sh.stats);
                sh.wait(tun);
                if sh.fault.is_some() && Fault::strike(&sh.fault, sh.started) {
                    return;
                }
            }
        }
        self.local.flush(&sh.stats);
        record_cpu(&sh.stats, slot, &mut cpu_at, Instant::now(), true);
    }

    /// Runs the codec over `pkts[..n]` and sends what it says; with n = 0 it
    /// only ticks and drains `poll` when due.
    #[allow(clippy::too_many_arguments)]
    fn flush<C: Codec>(
        pkts: &mut [Vec<u8>],
        verdicts: &mut Vec<Verdict>,
        to_net: &mut Vec<(usize, SocketAddr)>,
        sender: &mut Sender,
        extras: &mut Extras,
        local: &mut Local,
        sh: &Shared<C>,
        tun: BorrowedFd<'_>,
        n: usize,
    ) {
        let now = Instant::now();
        if n == 0 && now < sh_due(sh) {
            local.flush(&sh.stats);
            return;
        }
        if n > 0 {
            local.add(Ctr::TunBatches, 1);
        }
        verdicts.clear();
        {
            let mut slot = sh.lock();
            let slot = &mut *slot;
            // One catch_unwind per batch; a verdict is pushed as each packet
            // is decided, so after a panic the packet at `verdicts.len()` is
            // the one that panicked: it alone is dropped, and the batch goes
            // on after it (never again over the packets already handled, which
            // the codec may have rewritten or counted).
            loop {
                let from = verdicts.len();
                let r = catch_unwind(AssertUnwindSafe(|| {
                    for p in pkts[from..n].iter_mut() {
                        verdicts.push(slot.codec.handle_tun(p, now));
                    }
                }));
                if r.is_ok() {
                    break;
                }
                local.add(Ctr::CodecPanic, 1);
                verdicts.push(Verdict::Drop(DropReason::Panicked));
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                sh.tick_if_due(slot, now);
                extras.collect(&mut slot.codec, now, local);
                sh.note_deadline(&slot.codec);
            }));
            if r.is_err() {
                local.add(Ctr::CodecPanic, 1);
            }
        }
        to_net.clear();
        for (i, v) in verdicts.iter().enumerate() {
            match *v {
                Verdict::ToNetwork(a) => to_net.push((i, a)),
                Verdict::ToTun => write_single(tun, &pkts[i], local),
                Verdict::Drop(r) => local.dropped(r),
                Verdict::Queued => {
                    if let Some(b) = extras.spare.pop() {
                        pkts[i] = b;
                    }
                }
                Verdict::Consumed => {}
            }
        }
        sender.send(sh, pkts, to_net, local);
        extras.flush(sh, sender, tun, local);
        local.flush(&sh.stats);
    }
}

/// When a thread with nothing to read must still run the codec: the next tick,
/// or the codec's deadline if sooner.
fn sh_due<C>(sh: &Shared<C>) -> Instant {
    let tick = sh.next_tick_ns.load(Ordering::Relaxed);
    let due = sh.next_due_ns.load(Ordering::Relaxed);
    sh.started + Duration::from_nanos(tick.min(due))
}

// ----------------------------------------------------------- network -> TUN

/// Receives batches from the tunnel socket.
struct Receiver {
    hdrs: Vec<libc::mmsghdr>,
    /// Per message: the packet buffer's room, then the overflow area's.
    iov: Vec<[libc::iovec; 2]>,
    names: Vec<RawAddr>,
    cmsgs: Vec<Cmsg>,
    /// With GRO: the receive area, one GRO_BUF per message. Without: where
    /// the rest of a datagram longer than a packet buffer lands, DATAGRAM_BUF
    /// per message (the pages are touched only if a datagram needs them).
    area: Vec<u8>,
    messages: usize,
}

impl Receiver {
    fn new<C: Codec>(sh: &Shared<C>) -> Receiver {
        // With GRO each message can be a train of up to 64 datagrams: a few
        // messages make a batch.
        let messages = if sh.gro {
            (sh.batch / 16).max(2)
        } else {
            sh.batch
        };
        Receiver {
            // SAFETY: zeroed mmsghdr is valid (null pointers).
            hdrs: vec![unsafe { std::mem::zeroed() }; messages],
            iov: vec![
                [libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                }; 2];
                messages
            ],
            names: vec![RawAddr::zeroed(); messages],
            cmsgs: vec![Cmsg([0; 32]); messages],
            area: vec![0; messages * if sh.gro { GRO_BUF } else { DATAGRAM_BUF }],
            messages,
        }
    }

    /// One recvmmsg without waiting: fills `pkts[..k]` and `peers[..k]` and
    /// returns k (0 when nothing was queued).
    #[allow(clippy::needless_range_loop)] // m indexes five arrays alike
    fn recv<C: Codec>(
        &mut self,
        sh: &Shared<C>,
        pkts: &mut Vec<Vec<u8>>,
        peers: &mut Vec<Option<SocketAddr>>,
        local: &mut Local,
    ) -> usize {
        let gro = sh.gro;
        while pkts.len() < self.messages {
            pkts.push(Vec::with_capacity(PACKET_BUF));
        }
        for m in 0..self.messages {
            // Packets land in their own small buffers, not in 64 KiB ones at a
            // 64 KiB stride, whose first bytes all fall in the same cache sets.
            let step = if gro { GRO_BUF } else { DATAGRAM_BUF };
            // SAFETY: m < messages and the area holds messages * step bytes.
            let area = unsafe { self.area.as_mut_ptr().add(m * step) };
            let parts = if gro {
                self.iov[m][0] = libc::iovec {
                    iov_base: area as *mut libc::c_void,
                    iov_len: GRO_BUF,
                };
                1
            } else {
                let b = &mut pkts[m];
                b.clear();
                b.reserve(PACKET_BUF);
                self.iov[m] = [
                    libc::iovec {
                        iov_base: b.as_mut_ptr() as *mut libc::c_void,
                        iov_len: b.capacity(),
                    },
                    libc::iovec {
                        iov_base: area as *mut libc::c_void,
                        iov_len: DATAGRAM_BUF,
                    },
                ];
                2
            };
            let h = &mut self.hdrs[m].msg_hdr;
            h.msg_name = &mut self.names[m] as *mut RawAddr as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<RawAddr>() as _;
            h.msg_iov = self.iov[m].as_mut_ptr();
            h.msg_iovlen = parts;
            h.msg_flags = 0;
            if gro {
                h.msg_control = self.cmsgs[m].0.as_mut_ptr() as *mut libc::c_void;
                h.msg_controllen = std::mem::size_of::<Cmsg>() as _;
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
            self.hdrs[m].msg_len = 0;
        }
        let r = loop {
            // SAFETY: hdrs point at iov, names and cmsgs of this struct and at
            // buffers (the area, pkts' spare capacity) that outlive the call.
            let r = unsafe {
                libc::recvmmsg(
                    sh.sock
                        .as_ref()
                        .expect("only run with a socket")
                        .as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    self.messages as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return 0,
                _ => {
                    // ICMP errors reported on the socket (ECONNREFUSED, ...)
                    // are not the receiver's concern.
                    local.add(Ctr::NetRecvErr, 1);
                    return 0;
                }
            }
        };
        peers.clear();
        let mut k = 0;
        for m in 0..r {
            let h = &self.hdrs[m];
            let room = if gro {
                GRO_BUF
            } else {
                self.iov[m][0].iov_len + DATAGRAM_BUF
            };
            let len = (h.msg_len as usize).min(room);
            let peer = self.names[m].to_socket_addr();
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 || peer.is_none() {
                local.add(Ctr::NetRecvErr, 1);
                if !gro {
                    // Keep the slot (k == m without GRO); no peer: skipped.
                    pkts[k].clear();
                    peers.push(None);
                    k += 1;
                }
                continue;
            }
            if gro {
                let seg = gro_segment(&h.msg_hdr);
                let data = &self.area[m * GRO_BUF..m * GRO_BUF + len];
                let step = if seg == 0 { data.len().max(1) } else { seg };
                for d in data.chunks(step) {
                    if k == pkts.len() {
                        pkts.push(Vec::with_capacity(PACKET_BUF));
                    }
                    let b = &mut pkts[k];
                    b.clear();
                    b.extend_from_slice(d);
                    peers.push(peer);
                    local.packet(Ctr::NetRxPackets, Ctr::NetRxBytes, d.len());
                    k += 1;
                }
            } else {
                // SAFETY: the kernel wrote the first `first` bytes into the
                // spare capacity of pkts[m], which is pkts[k] (k == m here), and
                // the rest into the overflow area.
                let b = &mut pkts[k];
                let first = len.min(self.iov[m][0].iov_len);
                unsafe { b.set_len(first) };
                if len > first {
                    let rest = &self.area[m * DATAGRAM_BUF..m * DATAGRAM_BUF + len - first];
                    b.extend_from_slice(rest);
                }
                if sh.kind == SockKind::Raw4 {
                    // IPv4 raw sockets deliver the outer header too.
                    let ihl = b.first().map_or(0, |x| (x & 0x0f) as usize * 4);
                    if ihl < 20 || ihl > b.len() {
                        local.add(Ctr::NetRecvErr, 1);
                        b.clear();
                        peers.push(None);
                        k += 1;
                        continue;
                    }
                    b.drain(..ihl);
                }
                local.packet(Ctr::NetRxPackets, Ctr::NetRxBytes, b.len());
                peers.push(peer);
                k += 1;
            }
        }
        k
    }
}

/// The segment size from a message's UDP_GRO control message, 0 if none.
fn gro_segment(h: &libc::msghdr) -> usize {
    if h.msg_control.is_null() || h.msg_controllen < std::mem::size_of::<libc::cmsghdr>() {
        return 0;
    }
    // SAFETY: the kernel filled msg_control up to msg_controllen; CMSG_* stay
    // within it, and the data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let data = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c);
                return if data >= 4 {
                    (p as *const i32).read_unaligned().max(0) as usize
                } else if data >= 2 {
                    (p as *const u16).read_unaligned() as usize
                } else {
                    0
                };
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

struct NetToTun {
    pkts: Vec<Vec<u8>>,
    peers: Vec<Option<SocketAddr>>,
    verdicts: Vec<Option<Verdict>>,
    to_tun: Vec<usize>,
    to_net: Vec<(usize, SocketAddr)>,
    receiver: Receiver,
    sender: Sender,
    coalescer: Coalescer,
    iov: Vec<libc::iovec>,
    extras: Extras,
    local: Local,
}

impl NetToTun {
    fn new<C: Codec>(sh: &Shared<C>) -> NetToTun {
        let receiver = Receiver::new(sh);
        let n = sh.batch.max(receiver.messages);
        NetToTun {
            pkts: (0..n).map(|_| Vec::with_capacity(PACKET_BUF)).collect(),
            peers: Vec::with_capacity(n),
            verdicts: Vec::with_capacity(n),
            to_tun: Vec::with_capacity(n),
            to_net: Vec::with_capacity(n),
            receiver,
            sender: Sender::new(sh),
            coalescer: Coalescer::new(),
            iov: Vec::with_capacity(2 + crate::driver::offload::MAX_COALESCED_SEGMENTS),
            extras: Extras::new(),
            local: Local::new(),
        }
    }

    fn run<C: Codec>(mut self, sh: &Shared<C>, tun: BorrowedFd<'_>, slot: usize) {
        let mut cpu_at = Instant::now();
        let sock = sh.sock.as_ref().expect("only run with a socket").as_fd();
        let mut idle = 0;
        while !sh.stopping() {
            let n = self
                .receiver
                .recv(sh, &mut self.pkts, &mut self.peers, &mut self.local);
            let now = Instant::now();
            if n > 0 || now >= sh_due(sh) {
                self.batch(sh, tun, n, now);
            }
            record_cpu(&sh.stats, slot, &mut cpu_at, now, false);
            if n > 0 {
                idle = 0;
            } else if idle < IDLE_YIELDS {
                idle += 1;
                std::thread::yield_now();
            } else {
                self.local.add(Ctr::Waits, 1);
                self.local.flush(&sh.stats);
                sh.wait(sock);
                if sh.fault.is_some() && Fault::strike(&sh.fault, sh.started) {
                    return;
                }
            }
        }
        self.local.flush(&sh.stats);
        record_cpu(&sh.stats, slot, &mut cpu_at, Instant::now(), true);
    }

    /// Runs the codec over `pkts[..n]`, then writes and sends what it says.
    fn batch<C: Codec>(&mut self, sh: &Shared<C>, tun: BorrowedFd<'_>, n: usize, now: Instant) {
        if n > 0 {
            self.local.add(Ctr::NetBatches, 1);
        }
        self.verdicts.clear();
        {
            let mut guard = sh.lock();
            let slot = &mut *guard;
            let (pkts, peers, verdicts, extras, local) = (
                &mut self.pkts,
                &self.peers,
                &mut self.verdicts,
                &mut self.extras,
                &mut self.local,
            );
            // As in TunToNet::flush: a panic drops its own packet only.
            loop {
                let from = verdicts.len();
                let r = catch_unwind(AssertUnwindSafe(|| {
                    for (p, &peer) in pkts[from..n].iter_mut().zip(peers[from..].iter()) {
                        // No peer: a receive error, counted already.
                        verdicts.push(peer.map(|peer| slot.codec.handle_network(peer, p, now)));
                    }
                }));
                if r.is_ok() {
                    break;
                }
                local.add(Ctr::CodecPanic, 1);
                verdicts.push(Some(Verdict::Drop(DropReason::Panicked)));
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                sh.tick_if_due(slot, now);
                extras.collect(&mut slot.codec, now, local);
                sh.note_deadline(&slot.codec);
            }));
            if r.is_err() {
                local.add(Ctr::CodecPanic, 1);
            }
        }
        self.to_tun.clear();
        self.to_net.clear();
        for (i, v) in self.verdicts.iter().enumerate() {
            match *v {
                Some(Verdict::ToTun) => self.to_tun.push(i),
                Some(Verdict::ToNetwork(a)) => self.to_net.push((i, a)),
                Some(Verdict::Drop(r)) => self.local.dropped(r),
                Some(Verdict::Queued) | Some(Verdict::Consumed) | None => {}
            }
        }
        if sh.offloads.tso && self.to_tun.len() > 1 {
            self.coalescer
                .plan(&self.pkts[..n], self.to_tun.iter().copied());
            for gi in 0..self.coalescer.groups().len() {
                let g = self.coalescer.groups()[gi];
                self.write_group(tun, &g);
            }
        } else {
            for &i in &self.to_tun {
                write_from_network(tun, &mut self.pkts[i], &mut self.local);
            }
        }
        self.sender
            .send(sh, &self.pkts, &self.to_net, &mut self.local);
        self.extras
            .flush(sh, &mut self.sender, tun, &mut self.local);
        self.local.flush(&sh.stats);
    }

    /// One TUN write: a packet alone, or a coalesced group gathered with writev
    /// (the head, then each member's payload; nothing is copied).
    fn write_group(&mut self, tun: BorrowedFd<'_>, g: &Group) {
        if g.segments() == 1 {
            write_from_network(tun, &mut self.pkts[g.head()], &mut self.local);
            return;
        }
        let hdr = Coalescer::finish_head(g, &mut self.pkts[g.head()]).to_bytes();
        self.iov.clear();
        self.iov.push(libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: VNET_HDR_LEN,
        });
        let head = &self.pkts[g.head()];
        self.iov.push(libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        });
        let off = g.payload_offset();
        let mut bytes = head.len();
        for m in self.coalescer.members(g) {
            let p = &self.pkts[m];
            self.iov.push(libc::iovec {
                // SAFETY: members are candidates, longer than their headers.
                iov_base: unsafe { p.as_ptr().add(off) } as *mut libc::c_void,
                iov_len: p.len() - off,
            });
            bytes += p.len();
        }
        match tun::write_iov(tun, &self.iov) {
            Ok(_) => {
                self.local.add(Ctr::TunTxPackets, g.segments() as u64);
                self.local.add(Ctr::TunTxBytes, bytes as u64);
                self.local.add(Ctr::CoalescedSupers, 1);
                self.local.add(Ctr::CoalescedPackets, g.segments() as u64);
            }
            Err(_) => self.local.add(Ctr::TunWriteErr, g.segments() as u64),
        }
    }
}
