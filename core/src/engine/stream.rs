//! Data streams: one thread per stream, so streams use every core (iperf3 3.12 runs
//! all of them on one). TCP writes and reads blocks; UDP sends and receives in
//! batches (sendmmsg / recvmmsg, with UDP GSO and GRO where the kernel has them, see
//! `gso`) with iperf3's datagram header. docs/benchmarks/engine-vs-iperf3.md
//! has the measurements behind the sizes chosen here.

use super::params::{Protocol, TestParams};
use super::protocol;
use super::udp_stats::UdpReceiverStats;
use crate::socket::gso::{self, RecvBatch, SendBatch};
use crate::wire::iperf_udp::{Packet as UdpPacket, Repr as UdpRepr};
use socket2::Socket;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a blocked stream looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);
/// How long a stopped TCP receiver goes on reading what is still arriving: long
/// enough for what was in flight at TEST_END, short enough that a peer that keeps
/// sending cannot hold the test.
const STOP_DRAIN: Duration = Duration::from_millis(500);
/// How long `stop_all` waits for the streams before it shuts their sockets down,
/// and again after that before it leaves a stream behind.
pub const STOP_BOUND: Duration = Duration::from_secs(2);

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
    /// Streams this host sends on in the test (-P), which share the write budget.
    pub streams: u32,
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
            streams: p.parallel,
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
    /// UDP receiver: datagrams too short for the iperf3 header, dropped.
    pub short_datagrams: u64,
    /// TCP sender: segments retransmitted, from TCP_INFO.
    pub retransmits: Option<u64>,
    /// Seconds from the test start to the stream's last byte.
    pub seconds: f64,
    /// UDP receiver: seconds from the first datagram's arrival to the last's
    /// (after the omit period), when two or more arrived: the time what it
    /// received took to arrive, without the wait before the first.
    pub arrival_span: Option<f64>,
    /// Why the stream ended early, if it did.
    pub error: Option<String>,
}

/// Starts a stream's thread; an error (no thread to be had) is the caller's to
/// handle: a server must not die of it.
pub fn spawn(
    sock: Socket,
    plan: StreamPlan,
    shared: Arc<StreamShared>,
) -> io::Result<JoinHandle<StreamOutcome>> {
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

/// How long to wait before `sent` more bytes are allowed at the plan's rate,
/// by the stream's clock.
fn pace(plan: &StreamPlan, sent: u64) -> Option<Duration> {
    pace_at(plan.rate, sent, plan.start.elapsed())
}

/// How long after `elapsed` (since the stream's start) `sent` bytes are due at
/// `rate` bit/s; None when they are due already, or the rate is unlimited (0).
/// A sender that waits for this never gets ahead of the rate, and one that
/// fell behind is let through at once, until it has caught up.
fn pace_at(rate: u64, sent: u64, elapsed: Duration) -> Option<Duration> {
    if rate == 0 {
        return None;
    }
    let due = Duration::from_secs_f64(sent as f64 * 8.0 / rate as f64);
    (due > elapsed).then(|| due - elapsed)
}

/// Datagrams of `len` bytes that `rate` bit/s allows by `elapsed` since the
/// stream's start, counted from the first: a sender that sends no more than
/// this never gets ahead of the rate, and one that fell behind catches up.
fn datagrams_due(rate: u64, len: usize, elapsed: Duration) -> u64 {
    (elapsed.as_secs_f64() * rate as f64 / 8.0 / len as f64) as u64
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

/// Bytes written per TCP write call, shared by the streams a host sends on, when the
/// rate is not limited: one stream writes 512 KiB (four of iperf3's 128 KiB blocks)
/// per call, four streams 128 KiB each. Fewer, larger writes cost less, until the
/// buffers the streams copy from, and the data in flight, no longer stay in the CPU's
/// cache.
const TCP_WRITE_BUDGET: usize = 512 * 1024;
/// Unsent bytes a TCP sender queues at most (TCP_NOTSENT_LOWAT), rather than the
/// whole send buffer (the default), which moved more with several streams.
const TCP_NOTSENT_LOWAT: usize = 64 * 1024;

/// Blocks of `len` bytes per write: one when paced, so -b stays smooth; with -n / -k,
/// no more than the test still needs, as iperf3 stops after the block that reaches it.
fn blocks_per_write(plan: &StreamPlan) -> usize {
    if plan.rate != 0 || plan.len == 0 {
        return 1;
    }
    let per_stream = TCP_WRITE_BUDGET / plan.streams.max(1) as usize;
    let most = (per_stream / plan.len).max(1);
    match &plan.byte_limit {
        Some((total, limit)) => {
            let left = limit.saturating_sub(total.load(Ordering::Relaxed));
            (left.div_ceil(plan.len as u64) as usize).clamp(1, most)
        }
        None => most,
    }
}

fn tcp_send(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    // Queue little beyond what TCP can send now: the write then waits until the
    // queue has drained to this, instead of filling a send buffer of megabytes whose
    // bytes have left the cache by the time they are sent and read. Bytes in flight
    // are not limited (unlike a small SO_SNDBUF), so long paths keep their window.
    set_int_option(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        TCP_NOTSENT_LOWAT,
    );
    let most = blocks_per_write(plan);
    let buf = filler(plan.len * most);
    let mut w: &Socket = sock;
    let mut total = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        if let Some(wait) = pace(plan, total) {
            std::thread::sleep(wait.min(POLL));
            continue;
        }
        let blocks = if plan.byte_limit.is_some() {
            blocks_per_write(plan)
        } else {
            most
        };
        match w.write(&buf[..blocks * plan.len]) {
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
    // No SO_RCVLOWAT: Linux clamps the receive window to it, which held one
    // stream to 128 KiB per round trip on any path longer than a veth.
    let mut r: &Socket = sock;
    let mut stopped_at: Option<Instant> = None;
    loop {
        // A peer that keeps sending after the stop never lets a read time out empty:
        // the drain ends by the clock too.
        if shared.stop.load(Ordering::Relaxed)
            && stopped_at.get_or_insert_with(Instant::now).elapsed() >= STOP_DRAIN
        {
            return Ok(());
        }
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

fn set_int_option(sock: &Socket, level: libc::c_int, name: libc::c_int, value: usize) {
    // Best effort: a kernel without the option keeps its default.
    let _ = crate::socket::gso::setsockopt_int(
        sock,
        level,
        name,
        value.min(i32::MAX as usize) as libc::c_int,
    );
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
    if len < UdpRepr::header_len(plan.wide_counters) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("UDP datagrams of {len} bytes cannot hold the iperf3 header"),
        ));
    }
    // Datagrams back to back in one buffer; with GSO the kernel cuts each message
    // into datagrams, so a batch costs one syscall and one trip down the stack per
    // message rather than per datagram.
    let mut batch = SendBatch::new(sock, len, true, &filler(len));
    let mut counter: u64 = 0;
    let mut total = 0u64;
    let mut hello_checked = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        if hello_checked.elapsed() >= HELLO_CHECK {
            answer_hello_again(sock);
            hello_checked = Instant::now();
        }
        // As many datagrams as the rate allows now, at most a batch.
        let cap = batch.capacity();
        let n = if plan.rate == 0 {
            cap
        } else {
            let allowed = datagrams_due(plan.rate, len, plan.start.elapsed());
            let n = allowed.saturating_sub(counter).min(cap as u64) as usize;
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
        stamp(
            batch.datagrams_mut(n),
            counter + 1,
            plan.wide_counters,
            monotonic,
        );
        match batch.send(sock, n) {
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

/// How often a sending stream looks for a repeated hello.
const HELLO_CHECK: Duration = Duration::from_millis(50);

/// A sending stream (-R, the server) reads nothing, so a client whose reply
/// was lost on the way would wait in vain: look for its hello now and then.
fn answer_hello_again(sock: &Socket) {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16];
    while let Ok(n) = sock.recv_with_flags(&mut buf, libc::MSG_DONTWAIT) {
        // SAFETY: recv initialised the first n bytes.
        let got: Vec<u8> = buf[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        if got == protocol::UDP_CONNECT_MSG {
            let _ = sock.send(&protocol::UDP_CONNECT_REPLY);
        }
    }
}

/// Writes the iperf3 header into each datagram, numbered from `first`, each
/// stamped by its own read of `clock`, as iperf3 stamps every datagram it sends:
/// the receiver's jitter compares each datagram's transit with the one before,
/// so one stamp shared by a whole batch would hide the spacing within it.
fn stamp<'a>(
    datagrams: impl Iterator<Item = &'a mut [u8]>,
    first: u64,
    wide: bool,
    mut clock: impl FnMut() -> Duration,
) {
    for (i, d) in datagrams.enumerate() {
        let now = clock();
        UdpRepr {
            sec: now.as_secs() as u32,
            usec: now.subsec_micros(),
            counter: first + i as u64,
            wide,
        }
        .emit(&mut UdpPacket::new_unchecked(d, wide));
    }
}

fn udp_recv(
    sock: &Socket,
    plan: &StreamPlan,
    shared: &StreamShared,
    out: &mut StreamOutcome,
) -> io::Result<()> {
    let cap = plan.len.max(UdpRepr::header_len(true)).max(2048);
    // With GRO a peer's GSO trains arrive whole: one copy to us per train.
    let mut batch = RecvBatch::new(cap, gso::enable_gro(sock));
    let mut stats = UdpReceiverStats::new();
    let mut omitted = plan.omit.is_zero();
    // The first and the last arrival counted.
    let mut span: (Option<Duration>, Option<Duration>) = (None, None);
    while !shared.stop.load(Ordering::Relaxed) {
        match batch.recv(sock) {
            Ok(_) => {}
            Err(e) if blocked(&e) || e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        }
        let arrived = monotonic();
        if !omitted && plan.start.elapsed() >= plan.omit {
            stats.end_omit_period();
            omitted = true;
            span = (None, None);
        }
        span = (span.0.or(Some(arrived)), Some(arrived));
        let mut bytes = 0u64;
        for d in batch.datagrams() {
            bytes += d.len() as u64;
            // A datagram too short for the header is dropped (iperf3 counts it
            // neither as received nor as lost).
            let Some(r) = UdpPacket::new_checked(d, plan.wide_counters)
                .ok()
                .and_then(|p| UdpRepr::parse(&p).ok())
            else {
                // The client says hello again when our reply was lost on the
                // way (a lossy link): answer it, again.
                if d == protocol::UDP_CONNECT_MSG {
                    let _ = sock.send(&protocol::UDP_CONNECT_REPLY);
                } else {
                    out.short_datagrams += 1;
                }
                continue;
            };
            stats.on_datagram(
                r.counter,
                Duration::new(r.sec as u64, r.usec.min(999_999) * 1000),
                arrived,
                d.len(),
            );
        }
        shared.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    out.bytes = stats.bytes();
    out.packets = stats.packets();
    out.lost = stats.lost();
    out.out_of_order = stats.out_of_order();
    out.jitter = stats.jitter_seconds();
    out.omitted_packets = stats.omitted_packets();
    out.omitted_lost = stats.omitted_errors();
    if let ((Some(first), Some(last)), true) = (span, stats.datagrams() >= 2) {
        out.arrival_span = Some((last - first).as_secs_f64());
    }
    Ok(())
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

/// The streams of a test under way, as either end keeps them: id, whether
/// this end sends on it, its shared counters, its thread.
pub type RunningStreams = Vec<(u32, bool, Arc<StreamShared>, JoinHandle<StreamOutcome>)>;

/// Stops every stream of `running` (see [`stop_all`]), leaving it empty.
pub fn stop_running(running: &mut RunningStreams, sockets: &[Socket]) -> Vec<StreamOutcome> {
    stop_all(
        running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect(),
        sockets,
    )
}

/// Asks every stream to stop and collects them, in bounded time whatever the peer
/// does: after `STOP_BOUND` the streams' `sockets` are shut down, which wakes a
/// thread blocked on one, and a stream still running `STOP_BOUND` after that is
/// left behind with an error instead of its totals.
pub fn stop_all(
    streams: Vec<(Arc<StreamShared>, JoinHandle<StreamOutcome>)>,
    sockets: &[Socket],
) -> Vec<StreamOutcome> {
    for (s, _) in &streams {
        s.stop.store(true, Ordering::Relaxed);
    }
    let all_done = |streams: &[(Arc<StreamShared>, JoinHandle<StreamOutcome>)]| {
        streams.iter().all(|(_, h)| h.is_finished())
    };
    if !wait_until(STOP_BOUND, || all_done(&streams)) {
        for s in sockets {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        wait_until(STOP_BOUND, || all_done(&streams));
    }
    streams
        .into_iter()
        .map(|(_, h)| {
            if h.is_finished() {
                h.join().unwrap_or_default()
            } else {
                StreamOutcome {
                    error: Some("the stream did not stop; left behind".into()),
                    ..Default::default()
                }
            }
        })
        .collect()
}

/// Polls `done` until it holds or `limit` has passed; whether it held.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_waits_for_the_rate() {
        let ms = Duration::from_millis;
        // 1 MB at 8 Mbit/s is due one second after the start.
        assert_eq!(pace_at(8_000_000, 1_000_000, ms(250)), Some(ms(750)));
        assert_eq!(
            pace_at(8_000_000, 1_000_000, Duration::ZERO),
            Some(ms(1000))
        );
        assert_eq!(pace_at(8_000_000, 1_000_000, ms(1000)), None);
        // Behind the schedule (a stall): due at once, until caught up.
        assert_eq!(pace_at(8_000_000, 1_000_000, ms(3000)), None);
        assert_eq!(pace_at(8_000_000, 0, Duration::ZERO), None);
        // Unlimited.
        assert_eq!(pace_at(0, u64::MAX / 16, Duration::ZERO), None);
    }

    /// A TCP sender writing a block whenever `pace_at` lets it, on a clock
    /// that ticks by 100 us, stalled from 1 s to 1.4 s: by every tick it has
    /// written no more than the rate allows plus the block in hand; before
    /// the stall and at the end no less than the rate less one block (after
    /// the stall it caught up).
    #[test]
    fn a_paced_writer_keeps_the_rate_and_catches_up_after_a_stall() {
        const RATE: u64 = 80_000_000;
        const BLOCK: u64 = 128 * 1024;
        let step = Duration::from_micros(100);
        let stall = Duration::from_secs(1)..Duration::from_millis(1400);
        // What the rate allows by `t`, and a byte: a due time is rounded to
        // the nanosecond.
        let allowed = |t: Duration| t.as_secs_f64() * RATE as f64 / 8.0 + 1.0;
        let mut sent = 0u64;
        let mut t = Duration::ZERO;
        let mut before_stall = 0;
        while t < Duration::from_secs(3) {
            if t == stall.start {
                before_stall = sent;
            }
            if !stall.contains(&t) && pace_at(RATE, sent, t).is_none() {
                sent += BLOCK;
            }
            assert!(sent as f64 <= allowed(t) + BLOCK as f64, "{sent} at {t:?}");
            t += step;
        }
        assert!(before_stall as f64 >= allowed(stall.start) - 1.0 - BLOCK as f64);
        assert!(
            sent as f64 >= allowed(t) - 1.0 - BLOCK as f64,
            "{sent} by {t:?}"
        );
    }

    /// The UDP sender's allowance: every datagram the rate allows by then,
    /// counted from the start, none before its time.
    #[test]
    fn datagrams_are_due_at_the_rate_from_the_start() {
        let ms = Duration::from_millis;
        // 80 Mbit/s of 1000-byte datagrams: 10 per millisecond.
        assert_eq!(datagrams_due(80_000_000, 1000, Duration::ZERO), 0);
        assert_eq!(
            datagrams_due(80_000_000, 1000, Duration::from_micros(99)),
            0
        );
        assert_eq!(
            datagrams_due(80_000_000, 1000, Duration::from_micros(100)),
            1
        );
        assert_eq!(datagrams_due(80_000_000, 1000, ms(1000)), 10_000);
        // After a stall, all that fell due meanwhile: the sender catches up.
        assert_eq!(datagrams_due(80_000_000, 1000, ms(3000)), 30_000);
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
            streams: 1,
            start: Instant::now(),
            omit: Duration::ZERO,
            byte_limit: Some((total.clone(), 25)),
        };
        assert!(!over_limit(&plan, 10));
        assert!(!over_limit(&plan, 10));
        assert!(over_limit(&plan, 10));
        assert_eq!(total.load(Ordering::Relaxed), 30);
    }

    #[test]
    fn writes_take_several_blocks_unless_paced_or_near_the_limit() {
        let plan = StreamPlan {
            id: 1,
            sending: true,
            protocol: Protocol::Tcp,
            len: 128 * 1024,
            rate: 0,
            wide_counters: false,
            streams: 1,
            start: Instant::now(),
            omit: Duration::ZERO,
            byte_limit: None,
        };
        assert_eq!(blocks_per_write(&plan), 4);
        assert_eq!(
            blocks_per_write(&StreamPlan {
                streams: 4,
                ..plan.clone()
            }),
            1
        );
        assert_eq!(
            blocks_per_write(&StreamPlan {
                streams: 2,
                ..plan.clone()
            }),
            2
        );
        assert_eq!(
            blocks_per_write(&StreamPlan {
                len: 1024,
                streams: 128,
                ..plan.clone()
            }),
            4
        );
        assert_eq!(
            blocks_per_write(&StreamPlan {
                len: 1 << 20,
                ..plan.clone()
            }),
            1
        );
        assert_eq!(
            blocks_per_write(&StreamPlan {
                rate: 100_000_000,
                ..plan.clone()
            }),
            1
        );
        let total = Arc::new(AtomicU64::new(0));
        let limited = StreamPlan {
            byte_limit: Some((total.clone(), 300 * 1024)),
            ..plan
        };
        // 300 KiB left: three blocks, the last of which passes the limit, as iperf3's
        // whole blocks do.
        assert_eq!(blocks_per_write(&limited), 3);
        total.store(290 * 1024, Ordering::Relaxed);
        assert_eq!(blocks_per_write(&limited), 1);
        total.store(400 * 1024, Ordering::Relaxed);
        assert_eq!(blocks_per_write(&limited), 1);
    }

    #[test]
    fn every_datagram_carries_its_own_send_time() {
        let len = 64;
        let mut buf = vec![0u8; 4 * len];
        // A clock that moves 250 us per read: four datagrams, four stamps.
        let mut t = Duration::from_secs(7) + Duration::from_micros(1);
        stamp(buf.chunks_exact_mut(len), 10, false, || {
            t += Duration::from_micros(250);
            t
        });
        let got: Vec<(u64, u32, u32)> = buf
            .chunks_exact(len)
            .map(|d| {
                let r = UdpRepr::parse(&UdpPacket::new_checked(d, false).unwrap()).unwrap();
                (r.counter, r.sec, r.usec)
            })
            .collect();
        assert_eq!(
            got,
            vec![(10, 7, 251), (11, 7, 501), (12, 7, 751), (13, 7, 1001)]
        );
    }

    /// A sending stream answers a hello said again (its first reply lost) and
    /// leaves other datagrams alone.
    #[test]
    fn a_sending_stream_answers_a_repeated_hello() {
        // A datagram socket pair: send() queues at the peer before it returns,
        // so both datagrams wait when the stream looks.
        let (server, client) =
            Socket::pair(socket2::Domain::UNIX, socket2::Type::DGRAM, None).unwrap();
        client.send(b"junk-datagram").unwrap();
        client.send(&protocol::UDP_CONNECT_MSG).unwrap();
        answer_hello_again(&server);
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16];
        let n = client
            .recv_with_flags(&mut buf, libc::MSG_DONTWAIT)
            .unwrap();
        // SAFETY: recv initialised the first n bytes.
        let got: Vec<u8> = buf[..n]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(got, protocol::UDP_CONNECT_REPLY);
        assert!(
            client
                .recv_with_flags(&mut buf, libc::MSG_DONTWAIT)
                .is_err(),
            "one reply per hello"
        );
    }
}
