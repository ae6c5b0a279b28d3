//! The latency probes' sockets: the echo responder that `tunbench server
//! --echo-port` runs beside the iperf3 port, and the probing loop that drives a
//! [`Prober`] on a UDP socket. The logic is `engine::latency`'s; this file only
//! owns the socket, the clock and the waiting.

use super::latency::{Prober, Probes, echo_in_place};
use super::stream::monotonic;
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
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Answers every probe that reaches `sock` until `stop` is set (checked every
/// 200 ms), stamping its arrival and departure. Anything else is dropped
/// unanswered, so the port reflects nothing it was not asked.
pub fn serve_echo(sock: UdpSocket, stop: &AtomicBool) -> io::Result<()> {
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
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
        let received = now_ns();
        if let Some(len) = echo_in_place(&mut buf[..n], received, now_ns()) {
            // A peer gone or unreachable is its loss, not the responder's end.
            let _ = sock.send_to(&buf[..len], from);
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
/// echoes still on their way. Runs in the calling thread's namespace.
pub fn probe(target: SocketAddr, rate: f64, stop: &AtomicBool) -> io::Result<Phase> {
    let local: SocketAddr = match target {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local)?;
    sock.connect(target)?;
    sock.set_nonblocking(true)?;
    let mut prober = Prober::new(rate, now_ns());
    let start_ns = prober.start_ns();
    let mut buf = [0u8; 2048];
    let mut stopped_at: Option<u64> = None;
    loop {
        let now = now_ns();
        if stopped_at.is_none() && stop.load(Ordering::Relaxed) {
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
                let end = at + grace_of(&prober);
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
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let _ = prober.handle_echo(now_ns(), &buf[..n]);
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

fn grace_of(p: &Prober) -> u64 {
    grace(p.probes()).as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Loopback, both ends in this process: every probe answered, a round trip
    /// well under a millisecond, one-way delays that add up to about it.
    #[test]
    fn the_responder_answers_the_prober_over_loopback() {
        let echo = bind_echo(Some("127.0.0.1".parse().unwrap()), 0).unwrap();
        let at = echo.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let server = std::thread::spawn(move || serve_echo(echo, &s));
        let halt = Arc::new(AtomicBool::new(false));
        let h = halt.clone();
        let client = std::thread::spawn(move || probe(at, 200.0, &h));
        std::thread::sleep(Duration::from_millis(300));
        halt.store(true, Ordering::Relaxed);
        let phase = client.join().unwrap().unwrap();
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
        let l = phase.probes.latency(200.0, phase.start_ns, true).unwrap();
        assert!((50..=70).contains(&l.sent), "{} sent", l.sent);
        assert_eq!(l.received, l.sent);
        assert!(l.rtt_ms.median < 1.0, "{:?}", l.rtt_ms);
        let (f, r) = (l.forward_ms.unwrap(), l.reverse_ms.unwrap());
        assert!(f.min >= 0.0 && r.min >= 0.0);
        assert!(f.median + r.median < l.rtt_ms.median * 1.5 + 0.05);
    }

    /// Nothing listening: every probe is lost, and the loop still ends.
    #[test]
    fn probes_to_nobody_are_all_lost() {
        let free = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = free.local_addr().unwrap();
        drop(free);
        let halt = Arc::new(AtomicBool::new(false));
        let h = halt.clone();
        let client = std::thread::spawn(move || probe(at, 100.0, &h));
        std::thread::sleep(Duration::from_millis(100));
        halt.store(true, Ordering::Relaxed);
        let phase = client.join().unwrap().unwrap();
        let l = phase.probes.latency(100.0, phase.start_ns, true).unwrap();
        assert!(l.sent >= 5 && l.received == 0, "{l:?}");
        assert_eq!(l.lost_percent, 100.0);
    }
}
