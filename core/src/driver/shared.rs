//! What the threads of one driver share: the codec under its lock, the tunnel
//! socket, the counters, when the codec's tick and deadline are due, and the
//! wait in poll(2) that a stop interrupts at once.

use super::config::{Fault, TICK};
use super::packet_tx::PacketTx;
use super::stats::{Batches, Ctr, Errors, Flow, Frames, Offloaded, Stats, StatsSnapshot};
use super::tun::Offloads;
use super::tun_rs_backend::TunBackend;
use crate::codec::{Codec, DropReason};
use socket2::Socket;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Packet buffers start this large and grow once if a packet needs more.
pub(super) const PACKET_BUF: usize = 2048;
/// How many times a thread that found nothing to do yields the CPU and looks
/// again before it sleeps in poll(2). Waking a sleeping reader costs its writer
/// more than a packet does on a busy machine (on a VM above all, where a
/// cross-CPU wakeup is an exit); after a few yields the reader mostly finds the
/// next packets queued, in larger batches. With a core to spare the yields
/// return at once and cost next to nothing.
pub(super) const IDLE_YIELDS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SockKind {
    Raw4,
    Raw6,
    Udp4,
    Udp6,
}

impl SockKind {
    pub(super) fn is_udp(self) -> bool {
        matches!(self, SockKind::Udp4 | SockKind::Udp6)
    }

    pub(super) fn is_v6(self) -> bool {
        matches!(self, SockKind::Raw6 | SockKind::Udp6)
    }
}

pub(super) struct CodecSlot<C> {
    pub(super) codec: C,
    pub(super) next_tick: Instant,
}

pub(super) struct Shared<C> {
    pub(super) codec: Mutex<CodecSlot<C>>,
    pub(super) stats: Stats,
    pub(super) stop: AtomicBool,
    /// An eventfd that becomes readable on stop, so waiting threads see it at once.
    pub(super) wake: OwnedFd,
    /// None for `Transport::TunOnly`.
    pub(super) sock: Option<Socket>,
    pub(super) kind: SockKind,
    /// Raw IPv6 only: the packet socket frames go out on.
    pub(super) packet_tx: Option<PacketTx>,
    pub(super) gso: AtomicBool,
    pub(super) gro: bool,
    pub(super) offloads: Offloads,
    pub(super) tun_backend: TunBackend,
    pub(super) batch: usize,
    /// `DriverConfig::segment_into_tun`.
    pub(super) segment_into_tun: Option<usize>,
    /// The codec takes the TUN's reads whole, virtio header and all
    /// (`Codec::takes_super_packets`).
    pub(super) whole: bool,
    pub(super) started: Instant,
    /// When the next tick is due, in ns since `started` (read without the lock).
    pub(super) next_tick_ns: AtomicU64,
    /// The codec's deadline, in ns since `started`; u64::MAX for none.
    pub(super) next_due_ns: AtomicU64,
    pub(super) fault: Option<Fault>,
}

impl<C: Codec> Shared<C> {
    pub(super) fn lock(&self) -> MutexGuard<'_, CodecSlot<C>> {
        self.codec.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Runs `tick` when due; the caller holds the lock.
    pub(super) fn tick_if_due(&self, slot: &mut CodecSlot<C>, now: Instant) {
        if now >= slot.next_tick {
            slot.codec.tick(now);
            slot.next_tick = now + TICK;
            let due = slot.next_tick.saturating_duration_since(self.started);
            self.next_tick_ns
                .store(due.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Records the codec's deadline; the caller holds the lock.
    pub(super) fn note_deadline(&self, codec: &C) {
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
    pub(super) fn wait(&self, fd: BorrowedFd<'_>) {
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

    pub(super) fn snapshot(&self) -> StatsSnapshot {
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
            whole: Offloaded {
                super_packets: c(Ctr::WholeSupers),
                packets: c(Ctr::WholePackets),
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
            tun_backend: self.tun_backend,
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

/// When a thread with nothing to read must still run the codec: the next tick,
/// or the codec's deadline if sooner.
pub(super) fn sh_due<C>(sh: &Shared<C>) -> Instant {
    let tick = sh.next_tick_ns.load(Ordering::Relaxed);
    let due = sh.next_due_ns.load(Ordering::Relaxed);
    sh.started + Duration::from_nanos(tick.min(due))
}
