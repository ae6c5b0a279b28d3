//! One test on the server, from its control connection: the session's actions
//! carried out (the data streams accepted, started and stopped), the results
//! exchanged, the report.

use super::super::client::{IntervalClock, VERSION, local_results, stream_id};
use super::super::control::{ServerAction, ServerSession};
use super::super::cpu::{CpuSample, CpuUtil, utilization};
use super::super::exchanged_results::ExchangedResults;
use super::super::params::TestParams;
use super::super::protocol::{self, COOKIE_LEN, State};
use super::super::report::TestReport;
use super::super::stream::{self, RunningStreams, StreamOutcome, StreamPlan, StreamShared};
use super::data_streams::accept_streams;
use super::{ServerOptions, SlotGuard, TestOutcome};
use socket2::Socket;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// Serves the test whose control connection `ctl` sent `cookie`; its data
/// connections come through `data`. `slot` is freed as the test ends, before
/// the client hears that it has.
pub(super) fn run_test(
    ctl: TcpStream,
    cookie: [u8; COOKIE_LEN],
    data: Receiver<(u64, TcpStream)>,
    slot: SlotGuard,
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
    let mut t = ServerTest::new(ctl, data, opts, port, peer, local);
    t.slot = Some(slot);
    t.session.handle_input(Instant::now(), &cookie);
    let mut buf = [0u8; 65536];
    let report = loop {
        if let Some(report) = t.act_on_session()? {
            break report;
        }
        t.read_control(&mut buf);
        t.tick(false);
    };
    // Wait briefly for IPERF_DONE so the client is not reset mid-read.
    let _ = t.ctl.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = t.ctl.read(&mut buf);
    Ok(report)
}

/// One test under way on the server.
struct ServerTest<'a> {
    ctl: TcpStream,
    /// The server's one test slot, held until the test ends.
    slot: Option<SlotGuard>,
    data: Receiver<(u64, TcpStream)>,
    opts: &'a ServerOptions,
    port: u16,
    /// The client's address and ours, for the report.
    peer: String,
    local: String,
    session: ServerSession,
    params: Option<TestParams>,
    /// Data sockets accepted and not started yet.
    sockets: Vec<Socket>,
    /// Data sockets stay open until the test is over, as iperf3 keeps them: a UDP
    /// peer still sending at TEST_END would otherwise get ICMP errors, which stock
    /// iperf3 treats as fatal.
    keep_open: Vec<Socket>,
    running: RunningStreams,
    clock: Option<IntervalClock>,
    cpu0: Option<CpuSample>,
    outcomes: Vec<StreamOutcome>,
    cpu: CpuUtil,
}

impl<'a> ServerTest<'a> {
    fn new(
        ctl: TcpStream,
        data: Receiver<(u64, TcpStream)>,
        opts: &'a ServerOptions,
        port: u16,
        peer: String,
        local: String,
    ) -> Self {
        ServerTest {
            session: ServerSession::with_limits(
                Instant::now(),
                opts.idle_timeout,
                opts.limits.clone(),
            ),
            ctl,
            slot: None,
            data,
            opts,
            port,
            peer,
            local,
            params: None,
            sockets: Vec::new(),
            keep_open: Vec::new(),
            running: Vec::new(),
            clock: None,
            cpu0: None,
            outcomes: Vec::new(),
            cpu: CpuUtil::default(),
        }
    }

    /// Does everything the session asks for now; the report once the results
    /// are exchanged, an error when the test ends without one.
    fn act_on_session(&mut self) -> Result<Option<TestReport>, String> {
        let actions: Vec<ServerAction> =
            std::iter::from_fn(|| self.session.poll_action()).collect();
        // The slot is free before the client hears that the test is over:
        // a client that starts its next test at once is not turned away as
        // busy by a server thread that has not yet come back from its write.
        let ends =
            |a: &ServerAction| matches!(a, ServerAction::Finished(_) | ServerAction::Fail(_));
        if actions.iter().any(ends) {
            self.slot = None;
        }
        for a in actions {
            match a {
                ServerAction::Send(b) => {
                    // A client that stops reading must not hold the server: the
                    // whole message goes within the idle timeout or the test ends.
                    if let Err(e) = write_within(&self.ctl, &b, self.opts.idle_timeout) {
                        stream::stop_running(&mut self.running, &self.keep_open);
                        return Err(format!(
                            "test from {}: writing to the client: {e}",
                            self.peer
                        ));
                    }
                }
                ServerAction::AcceptStreams(p) => self
                    .accept(p)
                    .map_err(|e| format!("test from {}: accepting data streams: {e}", self.peer))?,
                ServerAction::StartTest => self.start_streams()?,
                ServerAction::StopTest => self.stop_test(),
                ServerAction::Finished(client) => return Ok(Some(self.report(&client))),
                ServerAction::Fail(why) => {
                    stream::stop_running(&mut self.running, &self.keep_open);
                    return Err(format!("test from {}: {why}", self.peer));
                }
            }
        }
        Ok(None)
    }

    /// The data streams `p` asks for, announced to the client once this end
    /// listens.
    fn accept(&mut self, p: TestParams) -> io::Result<()> {
        let (s, ctl, opts) = (&mut self.session, &self.ctl, self.opts);
        let mut announce = || -> io::Result<()> {
            s.listening();
            while let Some(a) = s.poll_action() {
                if let ServerAction::Send(b) = a {
                    write_within(ctl, &b, opts.idle_timeout)?;
                }
            }
            Ok(())
        };
        match accept_streams(&p, &self.data, ctl, opts, self.port, &mut announce) {
            Ok(v) => self.sockets = v,
            Err(e) => {
                self.slot = None;
                send_server_error(ctl, opts);
                break_with(&mut self.session);
                return Err(e);
            }
        }
        self.params = Some(p);
        self.session.streams_ready(Instant::now());
        Ok(())
    }

    /// A thread for each accepted socket, the test's clock started.
    fn start_streams(&mut self) -> Result<(), String> {
        let p = self.params.as_ref().expect("params");
        let start = Instant::now();
        self.cpu0 = Some(CpuSample::now());
        for (i, sock) in self.sockets.drain(..).enumerate() {
            if let Ok(c) = sock.try_clone() {
                self.keep_open.push(c);
            }
            let id = stream_id(i as u32);
            let sending = !p.client_sends_on(i as u32);
            let sh = Arc::new(StreamShared::default());
            let plan = StreamPlan::for_test(p, id, sending, start);
            match stream::spawn(sock, plan, sh.clone()) {
                Ok(h) => self.running.push((id, sending, sh, h)),
                Err(e) => {
                    stream::stop_running(&mut self.running, &self.keep_open);
                    self.slot = None;
                    send_server_error(&self.ctl, self.opts);
                    return Err(format!(
                        "test from {}: starting stream {id}: {e}",
                        self.peer
                    ));
                }
            }
        }
        self.clock = Some(
            IntervalClock::new(start, p.omit, self.running.len())
                .limited(self.opts.limits.max_interval_records),
        );
        Ok(())
    }

    /// The streams stopped and this end's results handed to the session.
    fn stop_test(&mut self) {
        self.tick(true);
        self.outcomes = stream::stop_running(&mut self.running, &self.keep_open);
        self.cpu = self
            .cpu0
            .as_ref()
            .map(|c0| utilization(c0, &CpuSample::now()))
            .unwrap_or_default();
        let p = self.params.as_ref().expect("params");
        self.session.local_results(
            Instant::now(),
            local_results(&self.outcomes, &self.cpu, p.omit),
        );
    }

    fn report(&mut self, client: &ExchangedResults) -> TestReport {
        let p = self.params.clone().expect("params");
        let pairs = TestReport::build(false, &p, &self.outcomes, client);
        TestReport {
            client: false,
            protocol: p.protocol,
            params: p,
            local: self.local.clone(),
            remote: self.peer.clone(),
            pairs,
            cpu_local: self.cpu,
            cpu_remote: CpuUtil {
                total: client.cpu_util_total,
                user: client.cpu_util_user,
                system: client.cpu_util_system,
            },
            intervals: self.clock.take().map(|c| c.intervals).unwrap_or_default(),
            version: VERSION.into(),
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// What the control connection brings (or its end) into the session.
    fn read_control(&mut self, buf: &mut [u8]) {
        match protocol::read_control(&self.ctl, buf) {
            Ok(protocol::ControlRead::Data(n)) => {
                self.session.handle_input(Instant::now(), &buf[..n])
            }
            Ok(protocol::ControlRead::Idle) => {}
            Ok(protocol::ControlRead::Eof) | Err(_) => self.session.handle_eof(),
        }
        // After data too: a client trickling bytes never lets a read come back idle.
        self.session.handle_timeout(Instant::now());
    }

    /// Records an interval when one is due (or, `last`, the rest of one).
    fn tick(&mut self, last: bool) {
        if let Some(c) = self.clock.as_mut() {
            let view: Vec<_> = self
                .running
                .iter()
                .map(|(id, snd, sh, _)| (*id, *snd, sh.clone()))
                .collect();
            c.tick(Instant::now(), &view, last);
        }
    }
}

/// Tells the client the server failed (SERVER_ERROR, no error numbers), as
/// far as it still listens.
fn send_server_error(ctl: &TcpStream, opts: &ServerOptions) {
    let _ = write_within(
        ctl,
        &[State::ServerError.byte(), 0, 0, 0, 0, 0, 0, 0, 0],
        opts.idle_timeout,
    );
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

/// Ends the session at once, its last actions dropped.
fn break_with(s: &mut ServerSession) {
    s.handle_eof();
    while s.poll_action().is_some() {}
}
