//! Data streams: one thread per stream, so streams use every core (iperf3 3.12 runs
//! all of them on one). TCP writes and reads blocks; UDP sends and receives in
//! batches (sendmmsg / recvmmsg) with iperf3's datagram header.

use super::params::{Protocol, TestParams};
use super::udp_stats::UdpReceiverStats;
use crate::wire::iperf_udp::{Packet as UdpPacket, Repr as UdpRepr};
use socket2::Socket;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Datagrams per sendmmsg / recvmmsg call.
const BATCH: usize = 64;
/// How often a blocked stream looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Shared between a stream's thread and the driver.
#[derive(Debug, Default)]
pub struct StreamShared {
    /// Bytes moved so far, omitted period included (for interval reports).
    pub bytes: AtomicU64,
    pub stop: AtomicBool,
}

/// What the driver tells every stream of a test.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub id: u32,
    pub sending: bool,
    pub protocol: Protocol,
    pub len: usize,
    /// bit/s for this stream; 0 = as fast as possible.
    pub rate: u64,
    pub wide_counters: bool,
    pub start: Instant,
    pub omit: Duration,
    /// -n / -k on the client: stop when the test's senders reach this many bytes.
    pub byte_limit: Option<(Arc<AtomicU64>, u64)>,
}

impl StreamPlan {
    pub fn for_test(p: &TestParams, id: u32, sending: bool, start: Instant) -> Self {
        StreamPlan {
            id,
            sending,
            protocol: p.protocol,
            len: p.len as usize,
            rate: p.rate,
            wide_counters: p.udp_counters_64bit,
            start,
            omit: Duration::from_secs(p.omit as u64),
            byte_limit: None,
        }
    }
}

/// A stream's totals when it ends.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamOutcome {
    pub id: u32,
    pub sending: bool,
    /// Bytes after the omit period.
    pub bytes: u64,
    /// Datagrams sent (sender) or the highest counter seen (receiver), omit included.
    pub packets: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub jitter: f64,
    pub omitted_packets: u64,
    pub omitted_lost: u64,
    /// TCP sender: segments retransmitted, from TCP_INFO.
    pub retransmits: Option<u64>,
    /// Seconds from the test start to the stream's last byte.
    pub seconds: f64,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
}

pub fn spawn(
    sock: Socket,
    plan: StreamPlan,
    shared: Arc<StreamShared>,
) -> JoinHandle<StreamOutcome> {
    std::thread::Builder::new()
        .name(format!("stream-{}", plan.id))
        .spawn(move || {
            let _ = sock.set_read_timeout(Some(POLL));
            let _ = sock.set_write_timeout(Some(POLL));
            let mut out = StreamOutcome {
                id: plan.id,
                sending: plan.sending,
                ..Default::default()
            };
            let r = match (plan.protocol, plan.sending) {
                (Protocol::Tcp, true) => tcp_send(&sock, &plan, &shared, &mut out),
                (Protocol::Tcp, false) => tcp_recv(&sock, &plan, &shared, &mut out),
                (Protocol::Udp, true) => udp_send(&sock, &plan, &shared, &mut out),
                (Protocol::Udp, false) => udp_recv(&sock, &plan, &shared, &mut out),
            };
            if let Err(e) = r {
                out.error = Some(e.to_string());
            }
            if plan.sending && plan.protocol == Protocol::Tcp {
                out.retransmits = tcp_retransmits(&sock);
                // The receiver sees the end of the stream.
                let _ = sock.shutdown(std::net::Shutdown::Write);
            }
            out.seconds = plan.start.elapsed().as_secs_f64();
            out
        })
        .expect("spawning a stream thread")
}

fn blocked(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Non-repeating filler, as iperf3 sends by default.
fn filler(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// How long to wait before `sent` more bytes are allowed at `rate` bit/s.
fn pace(plan: &StreamPlan, sent: u64) -> Option<Duration> {
    if plan.rate == 0 {
        return None;
    }
    let due = Duration::from_secs_f64(sent as f64 * 8.0 / plan.rate as f64);
    let now = plan.start.elapsed();
    (due > now).then(|| due - now)
}

fn over_limit(plan: &StreamPlan, n: u64) -> bool {
    match &plan.byte_limit {
        Some((total, limit)) => total.fetch_add(n, Ordering::Relaxed) + n >= *limit,
        None => false,
    }
}

fn counted(plan: &StreamPlan, out: &mut StreamOutcome, shared: &StreamShared, n: u64) {
    shared.bytes.fetch_add(n, Ordering::Relaxed);
    if plan.start.elapsed() >= plan.omit {
        out.bytes += n;
    }
}

fn tcp_send(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    let buf = filler(plan.len);
    let mut w: &Socket = sock;
    let mut total = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        if let Some(wait) = pace(plan, total) {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        match w.write(&buf) {
            Ok(n) => {
                total += n as u64;
                counted(plan, out, shared, n as u64);
                if over_limit(plan, n as u64) {
                    break;
                }
            }
            Err(e) if blocked(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn tcp_recv(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    let mut buf = vec![0u8; plan.len.max(128 * 1024)];
    let mut r: &Socket = sock;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => counted(plan, out, shared, n as u64),
            // Stopped and nothing more arrived within a poll: what was in flight when
            // the sender stopped has been read, so both ends count the same bytes.
            Err(e) if blocked(&e) => {
                if shared.stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// CLOCK_MONOTONIC as a Duration: the clock iperf3 stamps datagrams with.
pub fn monotonic() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn udp_send(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    let len = plan.len;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| filler(len)).collect();
    let mut counter: u64 = 0;
    let mut total = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        // As many datagrams as the rate allows now, at most a batch.
        let n = if plan.rate == 0 {
            BATCH
        } else {
            let allowed =
                (plan.start.elapsed().as_secs_f64() * plan.rate as f64 / 8.0 / len as f64) as u64;
            let n = allowed.saturating_sub(counter).min(BATCH as u64) as usize;
            if n == 0 {
                std::thread::sleep(
                    pace(plan, total + len as u64)
                        .unwrap_or(Duration::from_micros(100))
                        .min(POLL),
                );
                continue;
            }
            n
        };
        let now = monotonic();
        for (i, b) in bufs.iter_mut().take(n).enumerate() {
            let repr = UdpRepr {
                sec: now.as_secs() as u32,
                usec: now.subsec_micros(),
                counter: counter + 1 + i as u64,
                wide: plan.wide_counters,
            };
            repr.emit(&mut UdpPacket::new_unchecked(
                &mut b[..],
                plan.wide_counters,
            ));
        }
        match send_batch(sock, &bufs[..n]) {
            Ok(sent) => {
                counter += sent as u64;
                let bytes = (sent * len) as u64;
                total += bytes;
                out.packets = counter;
                counted(plan, out, shared, bytes);
                if over_limit(plan, bytes) {
                    break;
                }
            }
            // A full socket buffer or an ICMP error from the peer: try again.
            Err(e)
                if blocked(&e)
                    || e.kind() == io::ErrorKind::ConnectionRefused
                    || e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn send_batch(sock: &Socket, bufs: &[Vec<u8>]) -> io::Result<usize> {
    let mut iov: Vec<libc::iovec> = bufs
        .iter()
        .map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: zeroed mmsghdr is valid (null name, no control); we point each at one iovec.
    let mut msgs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    // SAFETY: msgs and the buffers they point at outlive the call.
    let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), msgs.len() as u32, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn udp_recv(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    let cap = plan.len.max(UdpRepr::header_len(true)).max(2048);
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; cap]).collect();
    let mut stats = UdpReceiverStats::new();
    let mut omitted = plan.omit.is_zero();
    while !shared.stop.load(Ordering::Relaxed) {
        let lens = match recv_batch(sock, &mut bufs) {
            Ok(l) => l,
            Err(e) if blocked(&e) || e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        let arrived = monotonic();
        if !omitted && plan.start.elapsed() >= plan.omit {
            stats.end_omit_period();
            omitted = true;
        }
        for (b, &n) in bufs.iter().zip(&lens) {
            shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
            // A datagram too short for the header is dropped and counted as an error.
            let Ok(p) = UdpPacket::new_checked(&b[..n], plan.wide_counters) else {
                continue;
            };
            let Ok(r) = UdpRepr::parse(&p) else { continue };
            stats.on_datagram(
                r.counter,
                Duration::new(r.sec as u64, r.usec.min(999_999) * 1000),
                arrived,
                n,
            );
        }
    }
    out.bytes = stats.bytes();
    out.packets = stats.packets();
    out.lost = stats.lost();
    out.out_of_order = stats.out_of_order();
    out.jitter = stats.jitter_seconds();
    out.omitted_packets = stats.omitted_packets();
    out.omitted_lost = stats.omitted_errors();
    Ok(())
}

fn recv_batch(sock: &Socket, bufs: &mut [Vec<u8>]) -> io::Result<Vec<usize>> {
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut _,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: as in send_batch.
    let mut msgs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    // MSG_WAITFORONE: block for the first datagram only, then take what is queued.
    // SAFETY: msgs and buffers outlive the call; the socket's SO_RCVTIMEO bounds it.
    let r = unsafe {
        libc::recvmmsg(
            sock.as_raw_fd(),
            msgs.as_mut_ptr(),
            msgs.len() as u32,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(msgs[..r as usize]
        .iter()
        .map(|m| m.msg_len as usize)
        .collect())
}

fn tcp_retransmits(sock: &Socket) -> Option<u64> {
    // SAFETY: tcp_info is plain data; getsockopt fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(info.tcpi_total_retrans as u64)
}

/// Ask every stream to stop, then collect them.
pub fn stop_all(
    streams: Vec<(Arc<StreamShared>, JoinHandle<StreamOutcome>)>,
) -> Vec<StreamOutcome> {
    for (s, _) in &streams {
        s.stop.store(true, Ordering::Relaxed);
    }
    streams
        .into_iter()
        .map(|(_, h)| h.join().unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_waits_for_the_rate() {
        let plan = StreamPlan {
            id: 1,
            sending: true,
            protocol: Protocol::Tcp,
            len: 1000,
            rate: 8_000_000,
            wide_counters: false,
            start: Instant::now(),
            omit: Duration::ZERO,
            byte_limit: None,
        };
        // 1 MB at 8 Mbit/s is due after one second.
        let w = pace(&plan, 1_000_000).unwrap();
        assert!(
            w > Duration::from_millis(900) && w <= Duration::from_secs(1),
            "{w:?}"
        );
        assert_eq!(pace(&plan, 0), None);
        let unlimited = StreamPlan { rate: 0, ..plan };
        assert_eq!(pace(&unlimited, u64::MAX / 16), None);
    }

    #[test]
    fn byte_limit_is_shared_by_streams() {
        let total = Arc::new(AtomicU64::new(0));
        let plan = StreamPlan {
            id: 1,
            sending: true,
            protocol: Protocol::Tcp,
            len: 10,
            rate: 0,
            wide_counters: false,
            start: Instant::now(),
            omit: Duration::ZERO,
            byte_limit: Some((total.clone(), 25)),
        };
        assert!(!over_limit(&plan, 10));
        assert!(!over_limit(&plan, 10));
        assert!(over_limit(&plan, 10));
        assert_eq!(total.load(Ordering::Relaxed), 30);
    }
}
