//! The latency probes' sockets: the echo responder that `tunbench server
//! --echo-port` runs beside the iperf3 port, and the probing loop that drives a
//! [`Prober`] on a UDP socket. The logic is `prober`'s; this file only owns
//! the socket, the clock and the waiting.

use super::prober::{Prober, echo_in_place};
use super::stats::Probes;
use crate::engine::stream::monotonic;
use socket2::{Domain, Protocol as SockProtocol, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use crate::vocab::{ECHO_PORT, LATENCY_RATE as DEFAULT_RATE};

fn now_ns() -> u64 {
    monotonic().as_nanos() as u64
}

/// A UDP socket on `port` of every address, IPv4 and IPv6 alike (or of `bind`).
pub fn bind_echo(bind: Option<IpAddr>, port: u16) -> io::Result<UdpSocket> {
    let addr = SocketAddr::new(bind.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)), port);
    let s = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(SockProtocol::UDP),
    )?;
    if addr.is_ipv6() && bind.is_none() {
        s.set_only_v6(false)?;
        // Each probe's destination address, so the echo leaves from it
        // (`reply`): the kernel's own choice of source can be an address the
        // prober does not expect (a server address on lo behind a tunnel,
        // answered from the LAN address), which the prober's connected socket
        // and a tunnel end's allowed IPs both refuse.
        set_int(&s, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
    }
    set_int(&s, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

fn set_int(s: &impl AsRawFd, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: an int option of the right size on an open socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One datagram received.
struct Received {
    len: usize,
    from: SocketAddr,
    /// The address it was sent to, where the socket asked for it
    /// (IPV6_RECVPKTINFO; IPv4 as v4-mapped).
    to: Option<libc::in6_pktinfo>,
    /// When the kernel took it in (monotonic ns), where the socket asked
    /// (SO_TIMESTAMPNS); else when it was read.
    at_ns: u64,
}

/// The monotonic time of a CLOCK_REALTIME stamp: the stamp less the clocks'
/// offset, read with the monotonic clock between two readings of the real-time
/// one. A reading that a preemption split is read again: an offset off by the
/// length of a stall would move the arrival by as much.
fn monotonic_of_realtime(stamp: &libc::timespec) -> u64 {
    let ns = |t: &libc::timespec| t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128;
    let realtime = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec we pass.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) };
        ns(&t)
    };
    let mut best: Option<(i128, i128)> = None;
    for _ in 0..4 {
        let before = realtime();
        let mono = now_ns() as i128;
        let after = realtime();
        let width = after - before;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, (before + after) / 2 - mono));
        }
        if width < 10_000 {
            break;
        }
    }
    let offset = best.map_or(0, |(_, o)| o);
    (ns(stamp) - offset).clamp(0, now_ns() as i128) as u64
}

fn receive(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Received> {
    use std::os::fd::AsRawFd;
    // SAFETY: recvmsg into buffers this frame owns, sized in the header; the
    // control messages are read within the length the kernel returned.
    unsafe {
        let mut from: libc::sockaddr_storage = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let addr = match i32::from(from.ss_family) {
            libc::AF_INET6 => {
                let a = &*(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                // v4-mapped: the IPv4 peer it stands for.
                let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
                SocketAddr::new(ip, u16::from_be(a.sin6_port))
            }
            libc::AF_INET => {
                let a = &*(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                SocketAddr::new(IpAddr::V4(ip), u16::from_be(a.sin_port))
            }
            _ => return Err(io::Error::other("a datagram from no IP address")),
        };
        let (mut info, mut stamp) = (None, None);
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    info = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(c).cast::<libc::in6_pktinfo>(),
                    ));
                }
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    stamp = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(c).cast::<libc::timespec>(),
                    ));
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        Ok(Received {
            len: n as usize,
            from: addr,
            to: info,
            at_ns: stamp.as_ref().map_or_else(now_ns, monotonic_of_realtime),
        })
    }
}

/// Sends `data` to `to`, from the address `info` names when there is one.
fn reply(
    sock: &UdpSocket,
    data: &[u8],
    to: SocketAddr,
    info: Option<libc::in6_pktinfo>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some(mut info) = info else {
        return sock.send_to(data, to).map(|_| ());
    };
    // The source address only: the route picks the interface.
    info.ipi6_ifindex = 0;
    // A dual-stack socket takes an IPv4 destination as v4-mapped.
    let to = match to {
        SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        v6 => v6,
    };
    let dest = socket2::SockAddr::from(to);
    // SAFETY: sendmsg of buffers this frame owns; one control message sized
    // by CMSG_SPACE in a buffer large enough and aligned for it.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut control = [0u64; 8];
        let space = libc::CMSG_SPACE(std::mem::size_of::<libc::in6_pktinfo>() as u32) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = dest.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = dest.len();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::IPPROTO_IPV6;
        (*c).cmsg_type = libc::IPV6_PKTINFO;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::in6_pktinfo>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::in6_pktinfo>(), info);
        if libc::sendmsg(sock.as_raw_fd(), &msg, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Answers every probe that reaches `sock` until `stop` is set (checked every
/// 200 ms), stamping its arrival and departure. Anything else is dropped
/// unanswered, so the port reflects nothing it was not asked.
pub fn serve_echo(sock: UdpSocket, stop: &AtomicBool) -> io::Result<()> {
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let r = match receive(&sock, &mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        // Held from the kernel's arrival stamp: the time this thread took to
        // wake up is the responder's, not the path's, and the prober subtracts it.
        if let Some(len) = echo_in_place(&mut buf[..r.len], r.at_ns, now_ns()) {
            // A peer gone or unreachable is its loss, not the responder's end.
            let _ = reply(&sock, &buf[..len], r.from, r.to);
        }
    }
    Ok(())
}

/// One phase's probes: what was seen, and when the phase began.
#[derive(Debug, Clone, Default)]
pub struct Phase {
    pub probes: Probes,
    pub start_ns: u64,
}

/// How long after the last probe its echo may still come: three of the
/// slowest round trips seen, within 200 ms to 2 s.
fn grace(p: &Probes) -> Duration {
    let worst = p.samples.iter().map(|s| s.rtt_ns).max().unwrap_or(0);
    Duration::from_nanos(worst.saturating_mul(3))
        .clamp(Duration::from_millis(200), Duration::from_secs(2))
}

/// Waits until `sock` is readable or `timeout` passes (nanosecond timer, not
/// the jiffies of a socket timeout, so the probes keep their schedule).
fn wait_readable(sock: &UdpSocket, timeout: Duration) -> io::Result<bool> {
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(&mut fd, 1, &ts, std::ptr::null()) };
    match r {
        -1 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// Probes `target` at `rate` per second until `stop` is set, then waits out the
/// echoes still on their way (`grace`). Runs in the calling thread's namespace.
pub fn probe(target: SocketAddr, rate: f64, stop: &AtomicBool) -> io::Result<Phase> {
    probe_until(target, rate, |_| stop.load(Ordering::Relaxed), grace)
}

/// Probes `target` at `rate` per second for `seconds` of its own schedule
/// (stopping early on `cancel`), then waits out the echoes still on their
/// way (`grace`): at most `seconds` x `rate` + 1 probes, however late its
/// thread is woken. Runs in the calling thread's namespace.
pub fn probe_for(
    target: SocketAddr,
    rate: f64,
    seconds: Duration,
    cancel: &AtomicBool,
) -> io::Result<Phase> {
    // Taken before the prober's start: no probe is due after it.
    let end = now_ns() + seconds.as_nanos() as u64;
    let over = |_: &Probes| now_ns() >= end || cancel.load(Ordering::Relaxed);
    probe_until(target, rate, over, grace)
}

/// Probes `target` at `rate` per second until `stop` holds of the probes so
/// far, then waits for echoes as long after the stop as `drain` says of the
/// probes seen by then.
fn probe_until(
    target: SocketAddr,
    rate: f64,
    mut stop: impl FnMut(&Probes) -> bool,
    drain: impl Fn(&Probes) -> Duration,
) -> io::Result<Phase> {
    let local: SocketAddr = match target {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local)?;
    sock.connect(target)?;
    sock.set_nonblocking(true)?;
    // Echoes are timed by the kernel's arrival stamp, not this thread's wake-up.
    set_int(&sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    let mut prober = Prober::new(rate, now_ns());
    let start_ns = prober.start_ns();
    let mut buf = [0u8; 2048];
    let mut stopped_at: Option<u64> = None;
    loop {
        let now = now_ns();
        if stopped_at.is_none() && stop(prober.probes()) {
            stopped_at = Some(now);
        }
        let until = match stopped_at {
            None => {
                if let Some(n) = prober.poll_transmit(now, &mut buf) {
                    // A refused or unreachable send is a lost probe.
                    let _ = sock.send(&buf[..n]);
                }
                prober.next_due_ns()
            }
            Some(at) => {
                let end = at + drain(prober.probes()).as_nanos() as u64;
                if now >= end {
                    break;
                }
                end
            }
        };
        // Wake for the next probe, an echo, or (at most every 50 ms) the stop flag.
        let wait =
            Duration::from_nanos(until.saturating_sub(now_ns())).min(Duration::from_millis(50));
        if wait_readable(&sock, wait)? {
            loop {
                match receive(&sock, &mut buf) {
                    Ok(r) => {
                        let _ = prober.handle_echo(r.at_ns, &buf[..r.len]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // ICMP unreachable comes back as an error on a connected socket.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(Phase {
        probes: prober.finish(),
        start_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Probes each test sends: a phase ends once this many are out.
    const PROBES: u64 = 5;
    /// How long an echo may take at most before a test gives up on it: a
    /// bound for a stalled machine, never waited out when every echo came.
    const ECHO_BOUND: Duration = Duration::from_secs(10);

    /// `PROBES` probes to `at` at `rate`, the phase ending once every one has
    /// its echo (or `ECHO_BOUND` after the last), or after the product's
    /// grace when `answered` is false (nobody answers); the phase and the
    /// wall time the prober ran, an upper bound on what its schedule allowed
    /// it to send.
    fn probe_for(at: SocketAddr, rate: f64, answered: bool) -> (Phase, Duration) {
        let t0 = std::time::Instant::now();
        let all_out = |p: &Probes| p.sent >= PROBES;
        let phase = if answered {
            let drain = |p: &Probes| {
                if p.samples.len() as u64 >= p.sent {
                    Duration::ZERO
                } else {
                    ECHO_BOUND
                }
            };
            probe_until(at, rate, all_out, drain)
        } else {
            probe_until(at, rate, all_out, grace)
        };
        (phase.unwrap(), t0.elapsed())
    }

    /// An echo responder on `sock` until the returned guard drops.
    struct Responder(
        Arc<AtomicBool>,
        Option<std::thread::JoinHandle<io::Result<()>>>,
    );

    impl Drop for Responder {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
            if let Some(t) = self.1.take() {
                t.join().unwrap().unwrap();
            }
        }
    }

    fn responder(sock: UdpSocket) -> Responder {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        Responder(stop, Some(std::thread::spawn(move || serve_echo(sock, &s))))
    }

    /// Loopback, both ends in this process: every probe answered, never more
    /// sent than the schedule allows, and each one-way delay (from the one
    /// clock both ends read) no longer than the round trip that holds it.
    #[test]
    fn the_responder_answers_the_prober_over_loopback() {
        let echo = bind_echo(Some("127.0.0.1".parse().unwrap()), 0).unwrap();
        let at = echo.local_addr().unwrap();
        let _r = responder(echo);
        let (phase, ran) = probe_for(at, 200.0, true);
        let l = phase.probes.latency(200.0, phase.start_ns, true).unwrap();
        assert_eq!(l.sent, PROBES, "{l:?}");
        assert!(
            l.sent as f64 <= ran.as_secs_f64() * 200.0 + 1.0,
            "{} sent in {ran:?} at 200/s",
            l.sent
        );
        assert_eq!(l.received, l.sent, "{l:?}");
        // The responder's stamps lie between the probe's send and its echo's
        // arrival, within what mapping a kernel stamp onto the monotonic clock
        // can be off by (half of a reading under 10 us wide).
        let (f, r) = (l.forward_ms.clone().unwrap(), l.reverse_ms.clone().unwrap());
        assert!(f.min >= -0.005 && r.min >= -0.005, "{l:?}");
        // Per probe, forward + reverse <= round trip: so is each median.
        assert!(f.median <= l.rtt_ms.median + 1e-3, "{l:?}");
        assert!(r.median <= l.rtt_ms.median + 1e-3, "{l:?}");
    }

    /// A responder on every address answers from the address each probe was
    /// sent to: probes to 127.0.0.2 come from 127.0.0.1, and an echo the
    /// kernel sourced on its own (from 127.0.0.1) would be refused by the
    /// prober's socket, connected to 127.0.0.2.
    #[test]
    fn the_echo_leaves_from_the_address_the_probe_was_sent_to() {
        let echo = bind_echo(None, 0).unwrap();
        let port = echo.local_addr().unwrap().port();
        let _r = responder(echo);
        let at: SocketAddr = ("127.0.0.2".parse::<IpAddr>().unwrap(), port).into();
        let (phase, _) = probe_for(at, 200.0, true);
        let l = phase.probes.latency(200.0, phase.start_ns, true).unwrap();
        assert_eq!(l.sent, PROBES, "{l:?}");
        assert_eq!(l.received, l.sent, "{l:?}");
    }

    /// Nobody answering (a socket bound and never read, so no other test
    /// can take its port): every probe is lost, and the loop still ends.
    #[test]
    fn probes_to_nobody_are_all_lost() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = silent.local_addr().unwrap();
        let (phase, _) = probe_for(at, 100.0, false);
        drop(silent);
        let l = phase.probes.latency(100.0, phase.start_ns, true).unwrap();
        assert!(l.sent == PROBES && l.received == 0, "{l:?}");
        assert_eq!(l.lost_percent, 100.0);
    }
}
