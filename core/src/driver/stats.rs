//! The driver's counters: the snapshot callers read ([`StatsSnapshot`]), the
//! shared atomics behind it, and each thread's local counts, flushed into those
//! atomics once per batch so a packet costs no atomic operation of its own.

use super::tun::Offloads;
use super::tun_rs_backend::TunBackend;
use crate::codec::DropReason;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a thread records its CPU time.
const CPU_EVERY: Duration = Duration::from_millis(100);

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
    /// TUN reads that were super-packets handed to the codec whole, and the
    /// packets they stand for.
    #[serde(default)]
    pub whole: Offloaded,
    pub batches: Batches,
    /// CPU time of the driver's threads (CLOCK_THREAD_CPUTIME_ID, summed).
    pub cpu_seconds: f64,
    pub uptime_seconds: f64,
    pub threads: usize,
    pub offloads: Offloads,
    /// Which code reads and coalesces on the TUN (TUNBENCH_TUN).
    #[serde(default)]
    pub tun_backend: TunBackend,
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
pub(super) enum Ctr {
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
    WholeSupers,
    WholePackets,
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

pub(super) struct Stats {
    pub(super) c: [AtomicU64; COUNTERS],
    pub(super) drops: [AtomicU64; REASONS],
    pub(super) cpu_ns: Vec<AtomicU64>,
}

/// A thread's counts since its last flush into the shared atomics.
pub(super) struct Local {
    c: [u64; COUNTERS],
    drops: [u64; REASONS],
}

impl Local {
    pub(super) fn new() -> Local {
        Local {
            c: [0; COUNTERS],
            drops: [0; REASONS],
        }
    }

    pub(super) fn add(&mut self, c: Ctr, n: u64) {
        self.c[c as usize] += n;
    }

    pub(super) fn packet(&mut self, packets: Ctr, bytes: Ctr, len: usize) {
        self.c[packets as usize] += 1;
        self.c[bytes as usize] += len as u64;
    }

    #[cfg(test)]
    pub(super) fn get(&self, c: Ctr) -> u64 {
        self.c[c as usize]
    }

    #[cfg(test)]
    pub(super) fn drops_of(&self, r: DropReason) -> u64 {
        let i = DropReason::ALL.iter().position(|x| *x == r).unwrap();
        self.drops[i]
    }

    pub(super) fn dropped(&mut self, r: DropReason) {
        let i = DropReason::ALL
            .iter()
            .position(|x| *x == r)
            .unwrap_or(REASONS - 1);
        self.drops[i] += 1;
    }

    pub(super) fn flush(&mut self, s: &Stats) {
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

pub(super) fn record_cpu(
    stats: &Stats,
    slot: usize,
    last: &mut Instant,
    now: Instant,
    force: bool,
) {
    if force || now.duration_since(*last) >= CPU_EVERY {
        stats.cpu_ns[slot].store(thread_cpu_ns(), Ordering::Relaxed);
        *last = now;
    }
}
