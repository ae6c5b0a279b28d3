//! What a driver is told to run: the TUN, the tunnel socket's transport, the
//! batch and buffer sizes; the errors starting one can give; and the faults
//! the tests inject. Kept apart from the threads so a caller (an endpoint)
//! sees the whole configuration surface in one place.

use super::tun::TunError;
use super::tun_rs_backend::TunBackend;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

pub const DEFAULT_BATCH: usize = 64;
/// wireguard-go's IdealBatchSize.
pub const MAX_BATCH: usize = 128;
pub const MAX_QUEUES: usize = 16;
/// Socket buffers each way: 8 MiB holds about 7 ms at 10 Gbit/s.
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;
/// How often the codec's `tick` runs.
pub const TICK: Duration = Duration::from_millis(250);

/// The tunnel socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Transport {
    /// An IP protocol straight over IP (4 for IPv4-in-IPv6, 50 for ESP): a raw
    /// socket of the family of `local`, bound to it. The kernel adds the outer
    /// header on sending and reassembles fragments on receiving. IPV6_DONTFRAG
    /// stays off: a packet that no longer fits the link once encapsulated is
    /// fragmented after encapsulation (RFC 2473 section 7.2, the inner packet
    /// is never touched). IPv4 raw sockets hand over the outer header too; the
    /// receiver strips it, so codecs always see the payload. Over IPv6, what
    /// fits the path MTU goes out as Ethernet frames on a packet socket instead
    /// (`packet_tx`, `DriverConfig::frames`); the raw socket still sends what
    /// must be fragmented or has no resolved next hop, and receives all.
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
    /// A TCP packet from the network longer than this goes into the TUN with
    /// a TSO header that cuts it into packets of at most this length (a raw
    /// socket hands over a kernel peer's GSO super-packets whole); None: as it
    /// is. Our TUN path only, not tun-rs's.
    #[serde(default)]
    pub segment_into_tun: Option<usize>,
    /// Which code reads and coalesces on the TUN; None: as TUNBENCH_TUN says
    /// (`TunBackend::from_env`).
    #[serde(default)]
    pub tun_backend: Option<TunBackend>,
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
    pub(super) fn strike(fault: &Option<Fault>, started: Instant) -> bool {
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
            segment_into_tun: None,
            tun_backend: None,
            fault: None,
        }
    }

    pub(super) fn validate(&self) -> Result<(), DriverError> {
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
