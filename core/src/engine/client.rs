//! The client driver: owns the control and data sockets, feeds the control state
//! machine, and starts and stops the streams it asks for.

use super::control::{ClientAction, ClientError, ClientSession};
use super::cpu::{CpuSample, CpuUtil, utilization};
use super::exchanged_results::{ExchangedResults, StreamResult};
use super::params::{Protocol, TestParams};
use super::protocol::{self, COOKIE_LEN};
use super::report::{Interval, TestReport};
use super::stream::{self, RunningStreams, StreamOutcome, StreamPlan, StreamShared};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const VERSION: &str = concat!("tunbench ", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub server: SocketAddr,
    pub bind: Option<IpAddr>,
    pub params: TestParams,
    pub connect_timeout: Duration,
    /// Per-second interval records (kept in the report).
    pub intervals: bool,
    /// Set by the caller to stop the test now (a datapath on the path died):
    /// the streams stop and `run` returns `RunError::Aborted`.
    pub abort: Option<Arc<AtomicBool>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot reach the server at {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("{0}")]
    Protocol(#[from] ClientError),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("stopped by the caller before the test ended")]
    Aborted,
}

fn aborted(o: &ClientOptions) -> bool {
    o.abort.as_ref().is_some_and(|a| a.load(Ordering::Relaxed))
}

/// Whether writing to a control connection failed because the server closed
/// it at once: iperf3 does that to connections reaching it between tests.
fn never_taken(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RunError {
    let what = what.into();
    move |source| RunError::Io { what, source }
}

fn socket_for(addr: &SocketAddr, ty: Type, bind: Option<IpAddr>) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(*addr), ty, None)?;
    if let Some(b) = bind {
        s.bind(&SockAddr::from(SocketAddr::new(b, 0)))?;
    }
    Ok(s)
}

fn open_tcp_stream(o: &ClientOptions, cookie: &[u8; COOKIE_LEN]) -> Result<Socket, RunError> {
    let s = socket_for(&o.server, Type::STREAM, o.bind).map_err(io_err("making a data socket"))?;
    s.connect_timeout(&o.server.into(), o.connect_timeout)
        .map_err(|source| RunError::Connect {
            addr: o.server,
            source,
        })?;
    let _ = s.set_tcp_nodelay(true);
    let mut w: &Socket = &s;
    w.write_all(cookie)
        .map_err(io_err("sending the cookie on a data stream"))?;
    Ok(s)
}

/// How long a UDP stream waits for the server's reply before saying hello
/// again, and in all.
const HELLO_INTERVAL: Duration = Duration::from_secs(1);
const HELLO_PATIENCE: Duration = Duration::from_secs(10);

fn open_udp_stream(o: &ClientOptions) -> Result<Socket, RunError> {
    let s = socket_for(&o.server, Type::DGRAM, o.bind).map_err(io_err("making a UDP socket"))?;
    s.connect(&o.server.into())
        .map_err(|source| RunError::Connect {
            addr: o.server,
            source,
        })?;
    // Room for bursts: the kernel default drops datagrams at high rates.
    crate::socket::gso::set_buffers(&s, crate::socket::gso::UDP_SOCKET_BUFFER);
    // The hello or its reply can be lost on a lossy path (a link's `loss`):
    // say hello again every second; the server answers each one.
    s.set_read_timeout(Some(HELLO_INTERVAL))
        .map_err(io_err("setting a timeout"))?;
    let mut w: &Socket = &s;
    w.write_all(&protocol::UDP_CONNECT_MSG)
        .map_err(io_err("sending the UDP connect datagram"))?;
    // With -R the server's first data may overtake its reply on a path that
    // reorders (a link's `reorder`): only a 4-byte datagram is the reply.
    // Its data also keeps the read from timing out: with -R a server whose
    // reply was lost is already sending, so the hello is said again once a
    // second whatever arrives meanwhile.
    let mut buf = vec![0u8; 65536];
    let mut r: &Socket = &s;
    let asked = std::time::Instant::now();
    let mut said = asked;
    let n = loop {
        let read = r.read(&mut buf);
        if let Ok(n) = read {
            if n == protocol::UDP_CONNECT_REPLY.len() {
                break n;
            }
        }
        let waiting = match &read {
            Ok(_) => true,
            Err(e) => matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        };
        if !waiting || asked.elapsed() >= HELLO_PATIENCE {
            let e = read.err().unwrap_or_else(|| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    "data arrived, but no reply to the hello",
                )
            });
            return Err(io_err("waiting for the server's UDP connect reply")(e));
        }
        if said.elapsed() >= HELLO_INTERVAL {
            w.write_all(&protocol::UDP_CONNECT_MSG)
                .map_err(io_err("sending the UDP connect datagram again"))?;
            said = std::time::Instant::now();
        }
    };
    s.set_read_timeout(Some(HELLO_PATIENCE))
        .map_err(io_err("setting a timeout"))?;
    let reply = &buf[..n];
    if reply != protocol::UDP_CONNECT_REPLY && reply != protocol::UDP_CONNECT_REPLY_LEGACY {
        return Err(RunError::Protocol(ClientError::Protocol(format!(
            "unexpected UDP connect reply {reply:02x?}"
        ))));
    }
    Ok(s)
}

/// Waits until the kernel has no unacknowledged bytes queued on any of `socks`
/// (SIOCOUTQ), or `limit` has passed.
fn drain_send_queues(socks: &[&Socket], limit: Duration) {
    use std::os::fd::AsRawFd;
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let queued: i64 = socks
            .iter()
            .map(|s| {
                let mut n: libc::c_int = 0;
                // SAFETY: SIOCOUTQ writes one int.
                let r = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
                if r == 0 { n as i64 } else { 0 }
            })
            .sum();
        if queued == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Stream ids as iperf3 numbers them: 1, then 3, 4, 5, ...
pub fn stream_id(i: u32) -> u32 {
    if i == 0 { 1 } else { i + 2 }
}

/// This end's totals in the shape exchanged at the end of a test.
pub fn local_results(outcomes: &[StreamOutcome], cpu: &CpuUtil, omit: u32) -> ExchangedResults {
    let any_tcp_sender = outcomes
        .iter()
        .any(|o| o.sending && o.retransmits.is_some());
    ExchangedResults {
        cpu_util_total: cpu.total,
        cpu_util_user: cpu.user,
        cpu_util_system: cpu.system,
        sender_has_retransmits: if any_tcp_sender { 1 } else { -1 },
        congestion_used: None,
        streams: outcomes
            .iter()
            .map(|o| StreamResult {
                id: o.id,
                bytes: o.bytes,
                retransmits: o.retransmits.map(|r| r as i64).unwrap_or(-1),
                jitter: o.jitter,
                errors: o.lost as i64,
                omitted_errors: o.omitted_lost as i64,
                packets: o.packets as i64,
                omitted_packets: o.omitted_packets as i64,
                start_time: 0.0,
                end_time: o.arrival_span.unwrap_or((o.seconds - omit as f64).max(0.0)),
            })
            .collect(),
    }
}

/// Samples every stream's byte counter once a second.
pub struct IntervalClock {
    start: Instant,
    next: Instant,
    last: Vec<u64>,
    omit: f64,
    /// Stream records (one per stream per interval) kept at most; later intervals
    /// are not recorded (the totals still count them).
    max_records: u64,
    pub intervals: Vec<Interval>,
}

impl IntervalClock {
    pub fn new(start: Instant, omit: u32, streams: usize) -> Self {
        IntervalClock {
            start,
            next: start + Duration::from_secs(1),
            last: vec![0; streams],
            omit: omit as f64,
            max_records: u64::MAX,
            intervals: Vec::new(),
        }
    }

    /// Keeps at most `max_records` stream records.
    pub fn limited(mut self, max_records: u64) -> Self {
        self.max_records = max_records;
        self
    }

    pub fn tick(&mut self, now: Instant, streams: &[(u32, bool, Arc<StreamShared>)], last: bool) {
        if now < self.next && !last {
            return;
        }
        let end = now.duration_since(self.start).as_secs_f64();
        let begin = self.intervals.last().map(|i| i.end).unwrap_or(0.0);
        if end - begin < 0.05 {
            return;
        }
        let records = (self.intervals.len() as u64 + 1).saturating_mul(streams.len() as u64);
        if records > self.max_records {
            return;
        }
        let mut v = Vec::new();
        for (k, (id, sending, sh)) in streams.iter().enumerate() {
            let b = sh.bytes.load(Ordering::Relaxed);
            v.push((*id, b - self.last[k], *sending));
            self.last[k] = b;
        }
        self.intervals.push(Interval {
            start: begin,
            end,
            streams: v,
            omitted: (begin + end) / 2.0 < self.omit,
        });
        while self.next <= now {
            self.next += Duration::from_secs(1);
        }
    }
}

/// Runs one test against `o.server`: the control connection, the streams the
/// session asks for, and the results exchanged at the end.
pub fn run(o: &ClientOptions) -> Result<TestReport, RunError> {
    let cookie = protocol::make_cookie(protocol::random_seed());
    let (ctl, local_addr) = connect_control(o)?;
    let mut test = ClientTest::new(o, cookie, ctl, local_addr);
    let mut buf = [0u8; 4096];
    loop {
        // The control read below times out every 20 ms, so this is seen soon.
        if aborted(o) {
            test.stop_streams();
            return Err(RunError::Aborted);
        }
        while let Some(a) = test.session.poll_action() {
            if let Some(report) = test.act(a)? {
                return Ok(report);
            }
        }
        let now = Instant::now();
        test.check_volume(now);
        test.tick(now, false);
        test.read_control(&mut buf)?;
    }
}

/// The control connection to `o.server`, and this end's address on it.
fn connect_control(o: &ClientOptions) -> Result<(Socket, String), RunError> {
    let ctl =
        socket_for(&o.server, Type::STREAM, o.bind).map_err(io_err("making the control socket"))?;
    ctl.connect_timeout(&o.server.into(), o.connect_timeout)
        .map_err(|source| RunError::Connect {
            addr: o.server,
            source,
        })?;
    let _ = ctl.set_tcp_nodelay(true);
    ctl.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(io_err("setting a timeout"))?;
    let local_addr = ctl
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    Ok((ctl, local_addr))
}

/// One test under way on the client: the control connection and its session,
/// and the streams the session asked for.
struct ClientTest<'a> {
    o: &'a ClientOptions,
    p: TestParams,
    cookie: [u8; COOKIE_LEN],
    ctl: Socket,
    local_addr: String,
    session: ClientSession,
    /// Data sockets opened and not started yet.
    sockets: Vec<Socket>,
    /// Data sockets stay open until the test is over, as iperf3 keeps them: a UDP
    /// peer still sending at TEST_END would otherwise get ICMP errors, which stock
    /// iperf3 treats as fatal.
    keep_open: Vec<Socket>,
    running: RunningStreams,
    clock: Option<IntervalClock>,
    /// Whether the server has sent anything on the control connection yet.
    heard: bool,
    cpu0: Option<CpuSample>,
    /// What the sending streams have sent, for a test of a set volume.
    volume: Arc<AtomicU64>,
    /// The volume (-n, -k), if the test has one.
    limit: Option<u64>,
}

impl<'a> ClientTest<'a> {
    fn new(
        o: &'a ClientOptions,
        cookie: [u8; COOKIE_LEN],
        ctl: Socket,
        local_addr: String,
    ) -> Self {
        let session = ClientSession::new(Instant::now(), o.params.clone(), cookie, VERSION);
        let p = o.params.clone();
        let limit = if p.bytes > 0 {
            Some(p.bytes)
        } else if p.blocks > 0 {
            Some(p.blocks * p.len as u64)
        } else {
            None
        };
        ClientTest {
            o,
            p,
            cookie,
            ctl,
            local_addr,
            session,
            sockets: Vec::new(),
            keep_open: Vec::new(),
            running: Vec::new(),
            clock: None,
            heard: false,
            cpu0: None,
            volume: Arc::new(AtomicU64::new(0)),
            limit,
        }
    }

    /// Does what the session asks; the report once the test is over.
    fn act(&mut self, a: ClientAction) -> Result<Option<TestReport>, RunError> {
        match a {
            ClientAction::Send(b) => self.send_control(&b)?,
            ClientAction::OpenStreams => {
                for _ in 0..self.p.total_streams() {
                    self.sockets.push(match self.p.protocol {
                        Protocol::Tcp => open_tcp_stream(self.o, &self.cookie)?,
                        Protocol::Udp => open_udp_stream(self.o)?,
                    });
                }
            }
            ClientAction::StartTest => self.start_streams()?,
            ClientAction::StopSending => self.stop_sending(),
            ClientAction::StopTest => return self.stop_test().map(Some),
            ClientAction::Finished(_) => {
                return Err(ClientError::Protocol("results before the test ended".into()).into());
            }
            ClientAction::Fail(e) => {
                self.stop_streams();
                return Err(e.into());
            }
        }
        Ok(None)
    }

    fn send_control(&self, b: &[u8]) -> Result<(), RunError> {
        let mut w: &Socket = &self.ctl;
        match w.write_all(b) {
            // Reset before the server said a word, as a read below
            // can find it: a connection it never took.
            Err(source) if !self.heard && never_taken(&source) => Err(RunError::Connect {
                addr: self.o.server,
                source,
            }),
            r => r.map_err(io_err("writing to the control connection")),
        }
    }

    /// A thread for each opened socket, the test's clock started.
    fn start_streams(&mut self) -> Result<(), RunError> {
        let start = Instant::now();
        self.cpu0 = Some(CpuSample::now());
        let p = &self.p;
        for (i, s) in std::mem::take(&mut self.sockets).into_iter().enumerate() {
            if let Ok(c) = s.try_clone() {
                self.keep_open.push(c);
            }
            let id = stream_id(i as u32);
            let sending = p.client_sends_on(i as u32);
            let mut plan = StreamPlan::for_test(p, id, sending, start);
            if sending {
                plan.byte_limit = self.limit.map(|l| (self.volume.clone(), l));
            }
            let sh = Arc::new(StreamShared::default());
            let h = match stream::spawn(s, plan, sh.clone()) {
                Ok(h) => h,
                Err(e) => {
                    self.stop_streams();
                    return Err(io_err("starting a stream thread")(e));
                }
            };
            self.running.push((id, sending, sh, h));
        }
        self.clock = Some(IntervalClock::new(start, p.omit, self.running.len()));
        Ok(())
    }

    fn stop_sending(&mut self) {
        for (_, sending, sh, _) in &self.running {
            if *sending {
                sh.stop.store(true, Ordering::Relaxed);
            }
        }
        // Let what is queued reach the server before TEST_END (which
        // follows this action) makes it stop counting, so both ends
        // count the same bytes.
        let senders: Vec<&Socket> = self
            .keep_open
            .iter()
            .zip(&self.running)
            .filter(|(_, r)| r.1)
            .map(|(s, _)| s)
            .collect();
        drain_send_queues(&senders, Duration::from_millis(300));
    }

    /// The streams stopped, this end's results sent, the server's awaited:
    /// the report.
    fn stop_test(&mut self) -> Result<TestReport, RunError> {
        self.tick(Instant::now(), true);
        let outcomes = self.stop_streams();
        let cpu = self
            .cpu0
            .as_ref()
            .map(|c0| utilization(c0, &CpuSample::now()))
            .unwrap_or_default();
        let mine = local_results(&outcomes, &cpu, self.p.omit);
        self.session.local_results(Instant::now(), &mine);
        // Keep what the report needs until the server's results arrive.
        finish(
            self.o,
            &mut self.session,
            &self.ctl,
            outcomes,
            cpu,
            self.clock.take().map(|c| c.intervals).unwrap_or_default(),
            std::mem::take(&mut self.local_addr),
        )
    }

    fn stop_streams(&mut self) -> Vec<StreamOutcome> {
        stream::stop_running(&mut self.running, &self.keep_open)
    }

    /// Tells the session when a test of a set volume has moved it.
    fn check_volume(&mut self, now: Instant) {
        let Some(l) = self.limit else {
            return;
        };
        // What the client sends, or, when it only receives (-R), what it
        // received: the server's senders stop at the count and wait for
        // TEST_END, as iperf3's do.
        let moved = if self.running.iter().any(|r| r.1) {
            self.volume.load(Ordering::Relaxed)
        } else {
            self.running
                .iter()
                .map(|r| r.2.bytes.load(Ordering::Relaxed))
                .sum()
        };
        if !self.running.is_empty() && moved >= l {
            self.session.volume_reached(now);
        }
    }

    /// Records an interval when one is due (or, `last`, the rest of one).
    fn tick(&mut self, now: Instant, last: bool) {
        if let Some(c) = self.clock.as_mut() {
            let view: Vec<_> = self
                .running
                .iter()
                .map(|(id, s, sh, _)| (*id, *s, sh.clone()))
                .collect();
            c.tick(now, &view, last);
        }
    }

    /// What the control connection brings (or its silence) into the session.
    fn read_control(&mut self, buf: &mut [u8]) -> Result<(), RunError> {
        let read = match protocol::read_control(&self.ctl, buf) {
            // Reset before the server said a word: it never took this
            // connection (iperf3 reopens its listener between tests), so the
            // caller may try again, as after a refused connect.
            Err(source) if !self.heard && source.kind() == io::ErrorKind::ConnectionReset => {
                return Err(RunError::Connect {
                    addr: self.o.server,
                    source,
                });
            }
            r => r.map_err(io_err("reading the control connection"))?,
        };
        match read {
            protocol::ControlRead::Data(n) => {
                self.heard = true;
                self.session.handle_input(Instant::now(), &buf[..n])
            }
            protocol::ControlRead::Eof => self.session.handle_eof(),
            protocol::ControlRead::Idle => self.session.handle_timeout(Instant::now()),
        }
        Ok(())
    }
}

/// After the streams stopped: exchange results and build the report.
fn finish(
    o: &ClientOptions,
    session: &mut ClientSession,
    ctl: &Socket,
    outcomes: Vec<StreamOutcome>,
    cpu: CpuUtil,
    intervals: Vec<Interval>,
    local: String,
) -> Result<TestReport, RunError> {
    let mut buf = [0u8; 65536];
    let r: &Socket = ctl;
    loop {
        if aborted(o) {
            return Err(RunError::Aborted);
        }
        while let Some(a) = session.poll_action() {
            match a {
                ClientAction::Send(b) => {
                    let mut w: &Socket = ctl;
                    w.write_all(&b)
                        .map_err(io_err("writing to the control connection"))?;
                }
                ClientAction::Finished(server) => {
                    let p = &o.params;
                    return Ok(TestReport {
                        client: true,
                        params: p.clone(),
                        protocol: p.protocol,
                        local,
                        remote: o.server.ip().to_string(),
                        pairs: TestReport::build(true, p, &outcomes, &server),
                        cpu_local: cpu,
                        cpu_remote: CpuUtil {
                            total: server.cpu_util_total,
                            user: server.cpu_util_user,
                            system: server.cpu_util_system,
                        },
                        intervals: if o.intervals { intervals } else { Vec::new() },
                        version: VERSION.into(),
                        timestamp: std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_secs())
                            .unwrap_or(0),
                    });
                }
                ClientAction::Fail(e) => return Err(e.into()),
                _ => {}
            }
        }
        match protocol::read_control(r, &mut buf)
            .map_err(io_err("reading the control connection"))?
        {
            protocol::ControlRead::Data(n) => session.handle_input(Instant::now(), &buf[..n]),
            protocol::ControlRead::Eof => session.handle_eof(),
            protocol::ControlRead::Idle => session.handle_timeout(Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that resets the control connection before saying anything
    /// (iperf3 between two tests) is "cannot reach", which callers retry;
    /// not a failed test.
    #[test]
    fn a_reset_before_the_server_speaks_is_a_connect_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            // Linger 0: close sends RST, once the client's cookie is in.
            socket2::SockRef::from(&c)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            let mut cookie = [0u8; protocol::COOKIE_LEN];
            io::Read::read_exact(&mut c, &mut cookie).unwrap();
            drop(c);
        });
        let o = ClientOptions {
            server,
            bind: None,
            params: TestParams::default(),
            connect_timeout: Duration::from_secs(2),
            intervals: false,
            abort: None,
        };
        let e = run(&o).unwrap_err();
        t.join().unwrap();
        match e {
            RunError::Connect { source, .. } => {
                assert_eq!(source.kind(), io::ErrorKind::ConnectionReset)
            }
            other => panic!("not a connect error: {other}"),
        }
    }

    /// A client's options toward `server`, a UDP socket standing in for one.
    fn udp_options(server: &std::net::UdpSocket) -> ClientOptions {
        ClientOptions {
            server: server.local_addr().unwrap(),
            bind: None,
            params: TestParams::default(),
            connect_timeout: Duration::from_secs(2),
            intervals: false,
            abort: None,
        }
    }

    /// A server's UDP port standing in for one whose first reply was lost:
    /// it answers no hello until the second, then every one (a reply lost on
    /// the way costs another second, never the test), until `done`. With
    /// `data`, it sends a datagram of test data every 10 ms meanwhile, as a
    /// server under -R does. Returns the hellos it heard.
    fn losing_the_first_reply(
        server: std::net::UdpSocket,
        data: bool,
        done: Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            server
                .set_read_timeout(Some(Duration::from_millis(10)))
                .unwrap();
            let (mut buf, mut hellos, mut client) = ([0u8; 64], 0, None);
            while !done.load(Ordering::Relaxed) {
                match server.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        assert_eq!(&buf[..n], &protocol::UDP_CONNECT_MSG);
                        hellos += 1;
                        client = Some(from);
                        if hellos >= 2 {
                            server.send_to(&protocol::UDP_CONNECT_REPLY, from).unwrap();
                        }
                    }
                    Err(_) => {
                        if let Some(to) = client.filter(|_| data) {
                            server.send_to(&[0u8; 100], to).unwrap();
                        }
                    }
                }
            }
            hellos
        })
    }

    /// With -R a server whose reply was lost is already sending: its data
    /// must not keep the client from saying hello again (it did: every read
    /// returned data, no timeout fired, and the client gave up after 10 s).
    #[test]
    fn a_hello_is_said_again_while_the_servers_data_arrives() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let o = udp_options(&server);
        let done = Arc::new(AtomicBool::new(false));
        let t = losing_the_first_reply(server, true, done.clone());
        let opened = open_udp_stream(&o);
        done.store(true, Ordering::Relaxed);
        let hellos = t.join().unwrap();
        opened.expect("the hello said again is answered");
        assert!(hellos >= 2, "{hellos} hellos");
    }

    /// A hello or its reply lost on the way (a lossy link) costs a second, not
    /// the cell: the client says hello again and takes the second reply.
    #[test]
    fn a_lost_udp_hello_is_said_again() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let o = udp_options(&server);
        let done = Arc::new(AtomicBool::new(false));
        let t = losing_the_first_reply(server, false, done.clone());
        let started = std::time::Instant::now();
        let opened = open_udp_stream(&o);
        let waited = started.elapsed();
        done.store(true, Ordering::Relaxed);
        let hellos = t.join().unwrap();
        opened.expect("the second hello is answered");
        assert!(hellos >= 2, "{hellos} hellos");
        // Said again only once the first went unanswered for an interval (a
        // timer never fires early); answered within the client's patience, or
        // open_udp_stream would have failed.
        assert!(waited >= HELLO_INTERVAL, "{waited:?}");
    }
}
