//! The server driver: one listener for control and TCP data connections (as iperf3
//! has it), one test at a time; a second client gets ACCESS_DENIED. Every failure
//! ends only that test: the server keeps serving.

use super::client::{IntervalClock, VERSION, local_results, stream_id};
use super::control::{IDLE_TIMEOUT, ServerAction, ServerSession};
use super::cpu::{CpuSample, CpuUtil, utilization};
use super::params::{Protocol, TestParams};
use super::protocol::{self, COOKIE_LEN, State};
use super::report::TestReport;
use super::stream::{self, StreamPlan, StreamShared};
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
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
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: None,
            port: protocol::DEFAULT_PORT,
            one_off: false,
            idle_timeout: IDLE_TIMEOUT,
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
        s.listen(128)?;
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
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let port = self.local_addr()?.port();
        self.listener.set_nonblocking(true)?;
        let mut accepted: u64 = 0;
        loop {
            if self.opts.one_off && done_rx.try_recv().is_ok() {
                return Ok(());
            }
            let conn = match self.listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                // A connection that died in the backlog is no reason to stop serving.
                Err(_) => continue,
            };
            let _ = conn.set_nonblocking(false);
            accepted += 1;
            let seq = accepted;
            let (slot, report, opts, done_tx) = (
                slot.clone(),
                report.clone(),
                self.opts.clone(),
                done_tx.clone(),
            );
            // Reading the cookie must not hold up the accept loop.
            std::thread::spawn(move || {
                let mut conn = conn;
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut cookie = [0u8; COOKIE_LEN];
                if conn.read_exact(&mut cookie).is_err() {
                    return;
                }
                let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
                match guard.as_ref() {
                    Some(b) if b.cookie == cookie => {
                        let _ = b.data.send((seq, conn));
                    }
                    Some(_) => {
                        drop(guard);
                        let _ = conn.write_all(&[State::AccessDenied.byte()]);
                    }
                    None => {
                        let (tx, rx) = mpsc::channel();
                        *guard = Some(Busy { cookie, data: tx });
                        drop(guard);
                        let outcome = run_test(conn, cookie, rx, &opts, port);
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
                        report(outcome);
                        let _ = done_tx.send(());
                    }
                }
            });
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
    let mut s = ServerSession::with_idle_timeout(Instant::now(), opts.idle_timeout);
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
                    if let Err(e) = ctl.write_all(&b) {
                        s.handle_eof();
                        let _ = e;
                    }
                }
                ServerAction::AcceptStreams(p) => {
                    let mut announce = || -> io::Result<()> {
                        s.listening();
                        while let Some(a) = s.poll_action() {
                            if let ServerAction::Send(b) = a {
                                (&ctl).write_all(&b)?;
                            }
                        }
                        Ok(())
                    };
                    match accept_streams(&p, &data, &ctl, opts, port, &mut announce) {
                        Ok(v) => sockets = v,
                        Err(e) => {
                            let _ =
                                ctl.write_all(&[State::ServerError.byte(), 0, 0, 0, 0, 0, 0, 0, 0]);
                            break_with(&mut s);
                            stream::stop_all(Vec::new());
                            return Err(format!("accepting data streams: {e}"));
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
                        let h = stream::spawn(
                            sock,
                            StreamPlan::for_test(p, id, sending, start),
                            sh.clone(),
                        );
                        running.push((id, sending, sh, h));
                    }
                    clock = Some(IntervalClock::new(start, p.omit, running.len()));
                }
                ServerAction::StopTest => {
                    if let Some(c) = clock.as_mut() {
                        let view: Vec<_> = running
                            .iter()
                            .map(|(id, snd, sh, _)| (*id, *snd, sh.clone()))
                            .collect();
                        c.tick(Instant::now(), &view, true);
                    }
                    outcomes =
                        stream::stop_all(running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect());
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
                    stream::stop_all(running.drain(..).map(|(_, _, sh, h)| (sh, h)).collect());
                    return Err(format!("test from {peer}: {why}"));
                }
            }
        }
        match protocol::read_control(&ctl, &mut buf) {
            Ok(protocol::ControlRead::Data(n)) => s.handle_input(Instant::now(), &buf[..n]),
            Ok(protocol::ControlRead::Idle) => s.handle_timeout(Instant::now()),
            Ok(protocol::ControlRead::Eof) | Err(_) => s.handle_eof(),
        }
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
                v.push(Socket::from(c));
            }
        }
        Protocol::Udp => {
            // Each stream: a UDP socket on the server's port takes the client's connect
            // datagram, connects back to it and replies; the next stream gets a new one.
            let local = ctl.local_addr()?;
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
                super::gso::set_buffers(&s, super::gso::UDP_SOCKET_BUFFER);
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
                s.connect(&from)?;
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
