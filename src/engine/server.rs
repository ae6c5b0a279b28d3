//! The server driver: one listener for control and TCP data connections (as iperf3
//! has it), one test at a time; a second client gets ACCESS_DENIED. Every failure
//! ends only that test: the server keeps serving.

use super::client::{IntervalClock, VERSION, local_results, stream_id};
use super::control::{IDLE_TIMEOUT, ServerAction, ServerSession};
use super::cpu::{CpuSample, CpuUtil, utilization};
use super::params::{Protocol, ServerLimits, TestParams};
use super::protocol::{self, COOKIE_LEN, State};
use super::report::TestReport;
use super::stream::{self, StreamPlan, StreamShared};
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Listen on this address only (default: every address, IPv4 and IPv6).
    pub bind: Option<IpAddr>,
    pub port: u16,
    /// Serve one test, then return (-1).
    pub one_off: bool,
    /// How long to wait for each message outside the test proper.
    pub idle_timeout: Duration,
    /// The most a test may ask for.
    pub limits: ServerLimits,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: None,
            port: protocol::DEFAULT_PORT,
            one_off: false,
            idle_timeout: IDLE_TIMEOUT,
            limits: ServerLimits::default(),
        }
    }
}

/// What happened to one client's test.
pub type TestOutcome = Result<TestReport, String>;

/// A test in progress: data connections with its cookie go to it.
struct Busy {
    cookie: [u8; COOKIE_LEN],
    /// Data connections with their accept order: each reads its cookie on its own
    /// thread, so they may arrive here out of order, and with --bidir the order says
    /// which stream sends and which receives.
    data: Sender<(u64, TcpStream)>,
}

pub struct Server {
    listener: TcpListener,
    opts: ServerOptions,
}

impl Server {
    pub fn bind(opts: ServerOptions) -> io::Result<Server> {
        let addr = SocketAddr::new(
            opts.bind.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            opts.port,
        );
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        if addr.is_ipv6() && opts.bind.is_none() {
            s.set_only_v6(false)?;
        }
        s.bind(&SockAddr::from(addr))?;
        // Room for a burst of connections while the accept loop sheds idle ones.
        s.listen(1024)?;
        Ok(Server {
            listener: s.into(),
            opts,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accept clients until one-off is done (or forever); `report` hears of each test.
    pub fn serve(self, report: impl Fn(TestOutcome) + Send + Sync + 'static) -> io::Result<()> {
        let report = Arc::new(report);
        let slot: Arc<Mutex<Option<Busy>>> = Arc::new(Mutex::new(None));
        let pending = Arc::new(Mutex::new(Pending::default()));
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let port = self.local_addr()?.port();
        self.listener.set_nonblocking(true)?;
        let mut accepted: u64 = 0;
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            if self.opts.one_off && done_rx.try_recv().is_ok() {
                return Ok(());
            }
            let conn = match self.listener.accept() {
                Ok((c, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    c
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                // A connection that died in the backlog is no reason to stop serving.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS): the
                // connection stays in the backlog and accept fails again at once, so
                // wait, longer each time, rather than spin.
                Err(_) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            let _ = conn.set_nonblocking(false);
            accepted += 1;
            let seq = accepted;
            let waiting = Pending::admit(&pending, seq, conn);
            let (slot, report, opts, done_tx) = (
                slot.clone(),
                report.clone(),
                self.opts.clone(),
                done_tx.clone(),
            );
            // Reading the cookie must not hold up the accept loop.
            let spawned = std::thread::Builder::new()
                .name(format!("conn-{seq}"))
                .spawn(move || {
                    if let Some((conn, cookie)) = read_cookie(waiting) {
                        serve_connection(conn, cookie, seq, slot, report, &opts, port, done_tx);
                    }
                });
            // No thread to be had: this connection is dropped (its pending entry
            // went with the closure), the server goes on.
            if spawned.is_err() {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// Connections at most waiting for their cookie at once; a new one beyond that
/// closes the oldest. A client sends its cookie as soon as it has connected, so it
/// waits for microseconds, and a burst of iperf3's largest test (257 connections)
/// fits; idle connections, however many, hold at most this many threads and
/// descriptors.
pub const MAX_PENDING: usize = 300;
/// Time a new connection has for its whole cookie, however it trickles in.
pub const COOKIE_DEADLINE: Duration = Duration::from_secs(5);
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Connections that have not yet sent their cookie, oldest first, by accept number
/// and descriptor. A descriptor here is open: its connection leaves the list
/// before it is closed, and only the accept loop shuts one down.
#[derive(Default)]
struct Pending {
    conns: VecDeque<(u64, RawFd)>,
}

/// A connection waiting for its cookie. Fields drop in order: the connection
/// leaves the pending list before its descriptor is closed.
struct PendingConn {
    entry: PendingEntry,
    conn: TcpStream,
}

struct PendingEntry {
    pending: Arc<Mutex<Pending>>,
    seq: u64,
}

impl Drop for PendingEntry {
    fn drop(&mut self) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.conns.retain(|(s, _)| *s != self.seq);
    }
}

impl Pending {
    /// Registers a new connection, first shutting down the oldest pending one if
    /// there are `MAX_PENDING` already (its reader then sees the end and gives up).
    fn admit(pending: &Arc<Mutex<Pending>>, seq: u64, conn: TcpStream) -> PendingConn {
        let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
        while p.conns.len() >= MAX_PENDING {
            if let Some((_, oldest)) = p.conns.pop_front() {
                // SAFETY: the descriptor is open (see `Pending`); shutdown(2) only
                // changes the socket's state.
                unsafe { libc::shutdown(oldest, libc::SHUT_RDWR) };
            }
        }
        p.conns.push_back((seq, conn.as_raw_fd()));
        PendingConn {
            entry: PendingEntry {
                pending: pending.clone(),
                seq,
            },
            conn,
        }
    }
}

/// The connection and its cookie, if the cookie arrives whole within
/// `COOKIE_DEADLINE` and the connection is not shut down for a newer one first.
fn read_cookie(p: PendingConn) -> Option<(TcpStream, [u8; COOKIE_LEN])> {
    // On failure `p` drops whole, in its fields' order.
    let cookie = read_cookie_from(&p.conn)?;
    let PendingConn { entry, conn } = p;
    drop(entry);
    Some((conn, cookie))
}

fn read_cookie_from(mut conn: &TcpStream) -> Option<[u8; COOKIE_LEN]> {
    let deadline = Instant::now() + COOKIE_DEADLINE;
    let mut cookie = [0u8; COOKIE_LEN];
    let mut got = 0;
    while got < COOKIE_LEN {
        let left = deadline.checked_duration_since(Instant::now())?;
        conn.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match conn.read(&mut cookie[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(cookie)
}

/// The test slot, emptied on drop: a test that fails or panics frees it too.
struct SlotGuard(Arc<Mutex<Option<Busy>>>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Tells a one-off server that its test is over, on drop: after a panic too.
struct DoneGuard(Sender<()>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// A connection with its cookie: a data stream of the running test, a client
/// turned away, or the next test.
#[allow(clippy::too_many_arguments)]
fn serve_connection(
    mut conn: TcpStream,
    cookie: [u8; COOKIE_LEN],
    seq: u64,
    slot: Arc<Mutex<Option<Busy>>>,
    report: Arc<impl Fn(TestOutcome) + Send + Sync + 'static>,
    opts: &ServerOptions,
    port: u16,
    done_tx: Sender<()>,
) {
    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(b) if b.cookie == cookie => {
            let _ = b.data.send((seq, conn));
        }
        Some(_) => {
            drop(guard);
            let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = conn.write_all(&[State::AccessDenied.byte()]);
        }
        None => {
            let (tx, rx) = mpsc::channel();
            *guard = Some(Busy { cookie, data: tx });
            drop(guard);
            let _done = DoneGuard(done_tx);
            let taken = SlotGuard(slot);
            let outcome = run_test(conn, cookie, rx, opts, port);
            drop(taken);
            report(outcome);
        }
    }
}

fn run_test(
    mut ctl: TcpStream,
    cookie: [u8; COOKIE_LEN],
    data: Receiver<(u64, TcpStream)>,
    opts: &ServerOptions,
    port: u16,
) -> TestOutcome {
    let peer = ctl
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let local = ctl
        .local_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let _ = ctl.set_nodelay(true);
    ctl.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| e.to_string())?;
    let mut s = ServerSession::with_limits(Instant::now(), opts.idle_timeout, opts.limits.clone());
    s.handle_input(Instant::now(), &cookie);
    let mut params: Option<TestParams> = None;
    let mut sockets: Vec<Socket> = Vec::new();
    // Data sockets stay open until the test is over, as iperf3 keeps them: a UDP
    // peer still sending at TEST_END would otherwise get ICMP errors, which stock
    // iperf3 treats as fatal.
    let mut keep_open: Vec<Socket> = Vec::new();
    let mut running = Vec::new();
    let mut clock: Option<IntervalClock> = None;
    let mut cpu0: Option<CpuSample> = None;
    let mut outcomes = Vec::new();
    let mut cpu = CpuUtil::default();
    let mut buf = [0u8; 65536];
    let result = 'test: loop {
        while let Some(a) = s.poll_action() {
            match a {
                ServerAction::Send(b) => {
                    // A client that stops reading must not hold the server: the
                    // whole message goes within the idle timeout or the test ends.
                    if let Err(e) = write_within(&ctl, &b, opts.idle_timeout) {
                        stream::stop_all(
                            running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect(),
                            &keep_open,
                        );
                        return Err(format!("test from {peer}: writing to the client: {e}"));
                    }
                }
                ServerAction::AcceptStreams(p) => {
                    let mut announce = || -> io::Result<()> {
                        s.listening();
                        while let Some(a) = s.poll_action() {
                            if let ServerAction::Send(b) = a {
                                write_within(&ctl, &b, opts.idle_timeout)?;
                            }
                        }
                        Ok(())
                    };
                    match accept_streams(&p, &data, &ctl, opts, port, &mut announce) {
                        Ok(v) => sockets = v,
                        Err(e) => {
                            let _ = write_within(
                                &ctl,
                                &[State::ServerError.byte(), 0, 0, 0, 0, 0, 0, 0, 0],
                                opts.idle_timeout,
                            );
                            break_with(&mut s);
                            return Err(format!("test from {peer}: accepting data streams: {e}"));
                        }
                    }
                    params = Some(p);
                    s.streams_ready(Instant::now());
                }
                ServerAction::StartTest => {
                    let p = params.as_ref().expect("params");
                    let start = Instant::now();
                    cpu0 = Some(CpuSample::now());
                    for (i, sock) in sockets.drain(..).enumerate() {
                        if let Ok(c) = sock.try_clone() {
                            keep_open.push(c);
                        }
                        let id = stream_id(i as u32);
                        let sending = !p.client_sends_on(i as u32);
                        let sh = Arc::new(StreamShared::default());
                        let plan = StreamPlan::for_test(p, id, sending, start);
                        match stream::spawn(sock, plan, sh.clone()) {
                            Ok(h) => running.push((id, sending, sh, h)),
                            Err(e) => {
                                stream::stop_all(
                                    running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect(),
                                    &keep_open,
                                );
                                let _ = write_within(
                                    &ctl,
                                    &[State::ServerError.byte(), 0, 0, 0, 0, 0, 0, 0, 0],
                                    opts.idle_timeout,
                                );
                                return Err(format!("test from {peer}: starting stream {id}: {e}"));
                            }
                        }
                    }
                    clock = Some(
                        IntervalClock::new(start, p.omit, running.len())
                            .limited(opts.limits.max_interval_records),
                    );
                }
                ServerAction::StopTest => {
                    if let Some(c) = clock.as_mut() {
                        let view: Vec<_> = running
                            .iter()
                            .map(|(id, snd, sh, _)| (*id, *snd, sh.clone()))
                            .collect();
                        c.tick(Instant::now(), &view, true);
                    }
                    outcomes = stream::stop_all(
                        running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect(),
                        &keep_open,
                    );
                    cpu = cpu0
                        .as_ref()
                        .map(|c0| utilization(c0, &CpuSample::now()))
                        .unwrap_or_default();
                    let p = params.as_ref().expect("params");
                    s.local_results(Instant::now(), local_results(&outcomes, &cpu, p.omit));
                }
                ServerAction::Finished(client) => {
                    let p = params.clone().expect("params");
                    let pairs = TestReport::build(false, &p, &outcomes, &client);
                    break 'test Ok(TestReport {
                        client: false,
                        protocol: p.protocol,
                        params: p,
                        local: local.clone(),
                        remote: peer.clone(),
                        pairs,
                        cpu_local: cpu,
                        cpu_remote: CpuUtil {
                            total: client.cpu_util_total,
                            user: client.cpu_util_user,
                            system: client.cpu_util_system,
                        },
                        intervals: clock.take().map(|c| c.intervals).unwrap_or_default(),
                        version: VERSION.into(),
                        timestamp: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_secs())
                            .unwrap_or(0),
                    });
                }
                ServerAction::Fail(why) => {
                    stream::stop_all(
                        running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect(),
                        &keep_open,
                    );
                    return Err(format!("test from {peer}: {why}"));
                }
            }
        }
        match protocol::read_control(&ctl, &mut buf) {
            Ok(protocol::ControlRead::Data(n)) => s.handle_input(Instant::now(), &buf[..n]),
            Ok(protocol::ControlRead::Idle) => {}
            Ok(protocol::ControlRead::Eof) | Err(_) => s.handle_eof(),
        }
        // After data too: a client trickling bytes never lets a read come back idle.
        s.handle_timeout(Instant::now());
        if let Some(c) = clock.as_mut() {
            let view: Vec<_> = running
                .iter()
                .map(|(id, snd, sh, _)| (*id, *snd, sh.clone()))
                .collect();
            c.tick(Instant::now(), &view, false);
        }
    };
    // Wait briefly for IPERF_DONE so the client is not reset mid-read.
    let _ = ctl.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = ctl.read(&mut buf);
    result
}

/// The client's -w as both socket buffers, as iperf3 sets them. Plain SO_SNDBUF
/// and SO_RCVBUF: the kernel grants at most the namespace's net.core.wmem_max and
/// rmem_max, so a client cannot make the server pin more memory than the
/// namespace allows any socket.
fn apply_window(sock: &Socket, window: Option<u32>) {
    if let Some(w) = window {
        let _ = sock.set_send_buffer_size(w as usize);
        let _ = sock.set_recv_buffer_size(w as usize);
    }
}

/// Writes all of `buf` within `limit` in total, however slowly the peer reads.
fn write_within(mut sock: &TcpStream, mut buf: &[u8], limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    while !buf.is_empty() {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the client read nothing for {} s", limit.as_secs()),
                )
            })?;
        sock.set_write_timeout(Some(left))?;
        match sock.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client stopped reading ({} bytes unsent after {} s)",
                        buf.len(),
                        limit.as_secs()
                    ),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn break_with(s: &mut ServerSession) {
    s.handle_eof();
    while s.poll_action().is_some() {}
}

/// The data streams, in the client's opening order.
fn accept_streams(
    p: &TestParams,
    data: &Receiver<(u64, TcpStream)>,
    ctl: &TcpStream,
    opts: &ServerOptions,
    port: u16,
    announce: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<Vec<Socket>> {
    let n = p.total_streams() as usize;
    let mut v = Vec::with_capacity(n);
    let deadline = Instant::now() + opts.idle_timeout;
    match p.protocol {
        Protocol::Tcp => {
            // The listener is the control one, already there.
            announce()?;
            let mut arrived = Vec::with_capacity(n);
            while arrived.len() < n {
                let left = deadline.saturating_duration_since(Instant::now());
                match data.recv_timeout(left) {
                    Ok(c) => arrived.push(c),
                    Err(RecvTimeoutError::Timeout) => {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("{} of {n} TCP streams arrived", arrived.len()),
                        ));
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(io::Error::other("listener gone"));
                    }
                }
            }
            // The client connects its streams one after another: accept order is
            // stream order (with --bidir, its sending streams come first).
            arrived.sort_by_key(|(seq, _)| *seq);
            for (_, c) in arrived {
                let _ = c.set_nodelay(true);
                let c = Socket::from(c);
                apply_window(&c, p.window);
                v.push(c);
            }
        }
        Protocol::Udp => {
            // Each stream: a UDP socket on the server's port takes the client's connect
            // datagram, connects back to it and replies; the next stream gets a new one.
            let local = ctl.local_addr()?;
            let client_ip = ctl.peer_addr()?.ip().to_canonical();
            let bind = SocketAddr::new(
                opts.bind.unwrap_or(match local.ip() {
                    IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                }),
                port,
            );
            let listener = || -> io::Result<Socket> {
                let s = Socket::new(Domain::for_address(bind), Type::DGRAM, None)?;
                s.set_reuse_address(true)?;
                s.set_reuse_port(true)?;
                if bind.is_ipv6() && opts.bind.is_none() {
                    s.set_only_v6(false)?;
                }
                crate::socket::gso::set_buffers(&s, crate::socket::gso::UDP_SOCKET_BUFFER);
                s.bind(&SockAddr::from(bind))?;
                Ok(s)
            };
            let mut s = listener()?;
            announce()?;
            loop {
                s.set_read_timeout(Some(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                ))?;
                let mut hello = [std::mem::MaybeUninit::<u8>::uninit(); 64];
                let (len, from) = s.recv_from(&mut hello).map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("waiting for UDP stream {} of {n}: {e}", v.len() + 1),
                    )
                })?;
                // Only a client's 4-byte hello opens a stream (iperf3's, or an
                // old iperf3's 123456789): the tail of an earlier test, still
                // arriving from a queue on the path, would otherwise take the
                // stream's place and leave the client waiting for a reply that
                // went to a closed socket.
                if len != protocol::UDP_CONNECT_MSG.len() {
                    continue;
                }
                // Only the control connection's peer opens a stream: a hello from
                // anywhere else (spoofed, say) would aim the server's datagrams,
                // with -R a flood, at a third party.
                if from.as_socket().map(|a| a.ip().to_canonical()) != Some(client_ip) {
                    continue;
                }
                s.connect(&from)?;
                apply_window(&s, p.window);
                // The next stream's socket is bound before the reply goes out: the
                // client sends its next hello the moment it has the reply.
                let next = if v.len() + 1 < n {
                    Some(listener()?)
                } else {
                    None
                };
                s.send(&protocol::UDP_CONNECT_REPLY)?;
                v.push(s);
                match next {
                    Some(x) => s = x,
                    None => break,
                }
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connected loopback pair: the accepted end and the client end.
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (s, c)
    }

    #[test]
    fn the_slot_is_freed_when_a_test_panics() {
        let slot: Arc<Mutex<Option<Busy>>> = Arc::new(Mutex::new(None));
        let (done_tx, done_rx) = mpsc::channel();
        let (data, _) = mpsc::channel();
        *slot.lock().unwrap() = Some(Busy {
            cookie: [1; COOKIE_LEN],
            data,
        });
        let s = slot.clone();
        let r = std::thread::spawn(move || {
            let _done = DoneGuard(done_tx);
            let _taken = SlotGuard(s);
            panic!("a bug in a test");
        })
        .join();
        assert!(r.is_err());
        assert!(slot.lock().unwrap_or_else(|e| e.into_inner()).is_none());
        assert!(done_rx.try_recv().is_ok(), "a one-off server hears of it");
    }

    #[test]
    fn a_new_connection_beyond_the_cap_shuts_the_oldest_pending_one_down() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let mut clients = Vec::new();
        let mut waiting = Vec::new();
        for seq in 0..=MAX_PENDING as u64 {
            let (s, c) = pair(&l);
            clients.push(c);
            waiting.push(Pending::admit(&pending, seq, s));
        }
        assert_eq!(pending.lock().unwrap().conns.len(), MAX_PENDING);
        // The oldest reads the end, shut down by the newcomer: had it waited
        // for a cookie instead, no answer could come before the deadline.
        let t0 = Instant::now();
        assert!(read_cookie(waiting.remove(0)).is_none());
        assert!(t0.elapsed() < COOKIE_DEADLINE, "{:?}", t0.elapsed());
        // One whose cookie has come is taken, and leaves the list.
        let last = waiting.pop().unwrap();
        clients
            .last_mut()
            .unwrap()
            .write_all(&[7; COOKIE_LEN])
            .unwrap();
        let (_, cookie) = read_cookie(last).unwrap();
        assert_eq!(cookie, [7; COOKIE_LEN]);
        assert_eq!(pending.lock().unwrap().conns.len(), MAX_PENDING - 1);
        drop(waiting);
        assert!(pending.lock().unwrap().conns.is_empty());
    }

    #[test]
    fn tcp_streams_are_taken_in_accept_order_whatever_order_their_cookies_came_in() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (ctl, _ctl_client) = pair(&l);
        let (first, first_client) = pair(&l);
        let (second, second_client) = pair(&l);
        let (tx, rx) = mpsc::channel();
        // The second stream's cookie reader finished first.
        tx.send((2, second)).unwrap();
        tx.send((1, first)).unwrap();
        let p = TestParams {
            bidir: true,
            parallel: 1,
            ..TestParams::default()
        };
        let v =
            accept_streams(&p, &rx, &ctl, &ServerOptions::default(), 0, &mut || Ok(())).unwrap();
        let peer = |s: &Socket| s.peer_addr().unwrap().as_socket().unwrap();
        assert_eq!(peer(&v[0]), first_client.local_addr().unwrap());
        assert_eq!(peer(&v[1]), second_client.local_addr().unwrap());
    }
}
