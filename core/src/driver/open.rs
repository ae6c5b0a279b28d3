//! Opening what a driver runs on, before its threads start: the TUN queues,
//! the tunnel socket of the configured transport with its UDP offloads, the
//! packet socket for raw IPv6 frames, and the eventfd that wakes the threads.

use super::config::{DriverConfig, DriverError, Transport};
use super::packet_tx::PacketTx;
use super::shared::SockKind;
use super::tun::{Offloads, Tun};
use super::tun_rs_backend::{self, TunBackend};
use crate::socket::gso::{enable_gro, set_buffers};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

/// One TUN queue, on the backend the driver runs.
pub(super) enum TunQueue {
    Tunbench(OwnedFd),
    TunRs(tun_rs::SyncDevice),
}

impl TunQueue {
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        match self {
            TunQueue::Tunbench(fd) => fd.as_fd(),
            TunQueue::TunRs(dev) => dev.as_fd(),
        }
    }

    /// The tun-rs device, when tun-rs reads and coalesces on this queue.
    pub(super) fn tun_rs(&self) -> Option<&tun_rs::SyncDevice> {
        match self {
            TunQueue::Tunbench(_) => None,
            TunQueue::TunRs(dev) => Some(dev),
        }
    }
}

/// The TUN's queues, what offloads they have, and which backend runs them.
pub(super) struct OpenedTun {
    pub(super) queues: Vec<TunQueue>,
    pub(super) offloads: Offloads,
    pub(super) backend: TunBackend,
}

/// The tun-rs backend (`config.tun_backend`, else TUNBENCH_TUN) attaches
/// through tun-rs, except for a TAP or with offloads off, which keep our path
/// (see `tun_rs_backend`).
fn open_tun(config: &DriverConfig) -> Result<OpenedTun, DriverError> {
    let backend = match config.tun_backend {
        Some(b) => b,
        None => TunBackend::from_env()?,
    };
    if backend == TunBackend::TunRs && config.offloads && !config.tap {
        let (devs, offloads) = tun_rs_backend::attach(&config.tun, config.queues)?;
        return Ok(OpenedTun {
            queues: devs.into_iter().map(TunQueue::TunRs).collect(),
            offloads,
            backend: TunBackend::TunRs,
        });
    }
    let tun = Tun::attach(&config.tun, config.queues, config.offloads, config.tap)?;
    Ok(OpenedTun {
        offloads: tun.offloads(),
        queues: tun
            .into_queues()
            .into_iter()
            .map(TunQueue::Tunbench)
            .collect(),
        backend: TunBackend::Tunbench,
    })
}

/// What `start` opens inside the namespace.
pub(super) struct Opened {
    pub(super) tun: OpenedTun,
    pub(super) sock: Option<Socket>,
    pub(super) kind: SockKind,
    pub(super) packet_tx: Option<PacketTx>,
    pub(super) gso: bool,
    pub(super) gro: bool,
}

pub(super) fn open(config: &DriverConfig) -> Result<Opened, DriverError> {
    let tun = open_tun(config)?;
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
        // raw socket sends everything.
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

pub(super) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we own from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
