//! The one datapath every userspace tunnel runs on: a TUN device on one side, a
//! raw IP or UDP socket on the other, a sans-IO [`Codec`] in between. The driver
//! knows nothing of any tunnel's packets; the codec does no IO.
//!
//! Per TUN queue, two threads (`tun_to_net`, `net_to_tun`) move a batch at a
//! time through the codec under one lock, drain its `poll()` after every batch,
//! call `tick()` about every 250 ms and see `stop` at once through an eventfd.
//! Buffers are allocated when a thread starts and reused: a packet costs no
//! allocation, lock or syscall of its own on the fast path.
//!
//! `config` says what to run, `open` opens it, `shared` is what the threads
//! share, `stats` their counters; `receiver`, `sender`, `tun_write`, `extras`
//! and `mmsg` do their IO, [`offload`] cuts and coalesces super-packets
//! (`split` cuts one a codec that takes them whole cannot take),
//! [`packet_tx`] sends raw IPv6 as Ethernet frames, and [`tun_rs_backend`] is
//! the same TUN through the tun-rs crate (TUNBENCH_TUN=tun-rs).

mod config;
mod extras;
mod mmsg;
mod net_to_tun;
pub mod offload;
mod open;
pub mod packet_tx;
pub mod process_log;
mod receiver;
mod sender;
mod shared;
mod split;
mod stats;
pub mod tun;
pub mod tun_rs_backend;
mod tun_to_net;
mod tun_write;

pub use config::{
    DEFAULT_BATCH, DEFAULT_SOCKET_BUFFER, DriverConfig, DriverError, Fault, MAX_BATCH, MAX_QUEUES,
    TICK, Transport,
};
pub use stats::{Batches, Errors, Flow, Frames, Offloaded, StatsSnapshot};

use crate::codec::Codec;
use net_to_tun::NetToTun;
use open::{TunQueue, eventfd, open};
use shared::{CodecSlot, Shared};
use stats::Stats;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tun_to_net::TunToNet;

/// A running datapath. Dropping it stops it too.
pub struct Driver<C: Codec + 'static> {
    shared: Arc<Shared<C>>,
    threads: Vec<JoinHandle<()>>,
    local_addr: Option<SocketAddr>,
}

impl<C: Codec + 'static> Driver<C> {
    /// Attaches to the TUN, opens the socket (inside `config.namespace` when
    /// set), and starts the threads, which can run anywhere after that.
    pub fn start(config: DriverConfig, codec: C) -> Result<Driver<C>, DriverError> {
        config.validate()?;
        let whole = codec.takes_super_packets();
        if whole && !matches!(config.transport, Transport::TunOnly) {
            return Err(DriverError::Config(
                "a codec that takes super-packets whole runs on the TUN alone (Transport::TunOnly)"
                    .into(),
            ));
        }
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
        let offloads = opened.tun.offloads;
        let tun_backend = opened.tun.backend;
        let queues = opened.tun.queues;
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
            tun_backend,
            batch: config.batch,
            segment_into_tun: config.segment_into_tun,
            whole,
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
        let queues: Vec<Arc<TunQueue>> = queues.into_iter().map(Arc::new).collect();
        for (q, tq) in queues.iter().enumerate() {
            for dir in 0..directions {
                let sh = d.shared.clone();
                let tq = tq.clone();
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
                            TunToNet::new(&sh, &tq).run(&sh, &tq, slot)
                        } else {
                            NetToTun::new(&sh, &tq).run(&sh, &tq, slot)
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
///
/// A datapath process uses it like this (`crate::endpoint` does), or holds a
/// [`Driver`] to watch it itself:
/// ```ignore
/// let mut config = DriverConfig::new("tun0", Transport::RawIp { local, protocol: 4 });
/// config.queues = 2;
/// let last = run_until(config, codec, &STOP, Duration::from_secs(1), |s| write_stats(s))?;
/// ```
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
