//! The iperf3 control protocol as two state machines, one per role. They take
//! received bytes and `now`, and say what to do: bytes to send, streams to open or
//! accept, the test to start or stop. They open no socket and read no clock, so a
//! client and a server can be run against each other in memory (see the tests).

use super::exchanged_results::ExchangedResults;
use super::params::{ParamError, ServerLimits, TestParams};
use super::protocol::{self, COOKIE_LEN, ControlBuffer, State};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Extra time the server allows beyond duration + omit before giving up on a
/// client (iperf3's watchdog).
pub const SERVER_GRACE: Duration = Duration::from_secs(40);
/// How long a side waits for the peer between messages outside the test proper.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq)]
pub enum ServerAction {
    Send(Vec<u8>),
    /// Parameters accepted: make the data listener, call `listening`, send what it
    /// queues, then accept `total_streams`.
    AcceptStreams(TestParams),
    /// All streams are there and TEST_START/TEST_RUNNING are on their way.
    StartTest,
    /// The client ended the test: stop the streams and hand over local results.
    StopTest,
    /// The exchange is complete; the client's results are attached.
    Finished(Box<ExchangedResults>),
    /// The test cannot go on; close the connection.
    Fail(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    Cookie,
    Params,
    Streams,
    Running,
    LocalResults,
    ClientResults,
    Done,
    Closed,
}

#[derive(Debug)]
pub struct ServerSession {
    state: ServerState,
    rx: ControlBuffer,
    actions: VecDeque<ServerAction>,
    cookie: Option<[u8; COOKIE_LEN]>,
    params: Option<TestParams>,
    local: Option<ExchangedResults>,
    deadline: Instant,
    idle: Duration,
    limits: ServerLimits,
}

impl ServerSession {
    pub fn new(now: Instant) -> Self {
        Self::with_idle_timeout(now, IDLE_TIMEOUT)
    }

    /// `idle`: how long to wait for each message outside the test proper.
    pub fn with_idle_timeout(now: Instant, idle: Duration) -> Self {
        Self::with_limits(now, idle, ServerLimits::default())
    }

    /// `limits`: the most a test may ask for; more is refused with SERVER_ERROR.
    pub fn with_limits(now: Instant, idle: Duration, limits: ServerLimits) -> Self {
        ServerSession {
            limits,
            state: ServerState::Cookie,
            rx: ControlBuffer::default(),
            actions: VecDeque::new(),
            cookie: None,
            params: None,
            local: None,
            deadline: now + idle,
            idle,
        }
    }

    pub fn cookie(&self) -> Option<&[u8; COOKIE_LEN]> {
        self.cookie.as_ref()
    }

    pub fn params(&self) -> Option<&TestParams> {
        self.params.as_ref()
    }

    pub fn poll_action(&mut self) -> Option<ServerAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        (self.state != ServerState::Closed).then_some(self.deadline)
    }

    fn fail(&mut self, why: String) {
        self.state = ServerState::Closed;
        self.actions.push_back(ServerAction::Fail(why));
    }

    fn send_state(&mut self, s: State) {
        self.actions.push_back(ServerAction::Send(vec![s.byte()]));
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state != ServerState::Closed && now >= self.deadline {
            self.fail(format!(
                "client went silent ({:?} without the next message)",
                self.state
            ));
        }
    }

    /// The connection closed from the client's side.
    pub fn handle_eof(&mut self) {
        match self.state {
            ServerState::Done | ServerState::Closed => self.state = ServerState::Closed,
            s => self.fail(format!("client closed the control connection during {s:?}")),
        }
    }

    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        self.rx.push(bytes);
        loop {
            let before = (self.state, self.actions.len());
            self.step(now);
            if (self.state, self.actions.len()) == before || self.state == ServerState::Closed {
                break;
            }
        }
    }

    fn step(&mut self, now: Instant) {
        match self.state {
            ServerState::Cookie => {
                if let Some(c) = self.rx.take_bytes::<COOKIE_LEN>() {
                    self.cookie = Some(c);
                    self.state = ServerState::Params;
                    self.deadline = now + self.idle;
                    self.send_state(State::ParamExchange);
                }
            }
            ServerState::Params => match self.rx.take_json(protocol::MAX_PARAMS_JSON) {
                None => {}
                Some(Err(e)) => self.refuse(ParamError {
                    ierr: protocol::ierr::RECV_PARAMS,
                    message: e.to_string(),
                }),
                Some(Ok(v)) => match TestParams::from_json(&v)
                    .and_then(|p| p.check_limits(&self.limits).map(|()| p))
                {
                    Err(e) => self.refuse(e),
                    Ok(p) => {
                        self.params = Some(p.clone());
                        self.state = ServerState::Streams;
                        self.deadline = now + self.idle;
                        // CREATE_STREAMS waits for `listening`: the driver must have its
                        // UDP socket bound before the client's first hello can arrive.
                        self.actions.push_back(ServerAction::AcceptStreams(p));
                    }
                },
            },
            ServerState::Running | ServerState::Streams => {
                if let Some(b) = self.rx.take_byte() {
                    match State::from_byte(b) {
                        Some(State::TestEnd) if self.state == ServerState::Running => {
                            self.state = ServerState::LocalResults;
                            self.deadline = now + self.idle;
                            self.actions.push_back(ServerAction::StopTest);
                        }
                        Some(State::ClientTerminate) => {
                            self.fail("client terminated the test".into())
                        }
                        _ => self.fail(format!(
                            "unexpected control byte {b} from the client during {:?}",
                            self.state
                        )),
                    }
                }
            }
            ServerState::LocalResults => {}
            ServerState::ClientResults => match self.rx.take_json(protocol::MAX_RESULTS_JSON) {
                None => {}
                Some(Err(e)) => self.fail(format!("client results: {e}")),
                Some(Ok(v)) => match serde_json::from_value::<ExchangedResults>(v) {
                    Err(e) => self.fail(format!("client results: {e}")),
                    Ok(r) => {
                        let local = self.local.take().unwrap_or_default();
                        let json = serde_json::to_value(&local).unwrap_or_default();
                        self.actions
                            .push_back(ServerAction::Send(protocol::frame_json(&json)));
                        self.send_state(State::DisplayResults);
                        self.state = ServerState::Done;
                        self.deadline = now + self.idle;
                        self.actions.push_back(ServerAction::Finished(Box::new(r)));
                    }
                },
            },
            ServerState::Done => {
                if let Some(b) = self.rx.take_byte() {
                    // IPERF_DONE, or anything: the test is over either way.
                    let _ = b;
                    self.state = ServerState::Closed;
                }
            }
            ServerState::Closed => {}
        }
    }

    fn refuse(&mut self, e: ParamError) {
        let mut msg = vec![State::ServerError.byte()];
        msg.extend_from_slice(&e.ierr.to_be_bytes());
        msg.extend_from_slice(&0i32.to_be_bytes());
        self.actions.push_back(ServerAction::Send(msg));
        self.fail(format!("refused the client's parameters: {e}"));
    }

    /// The driver is ready for data streams: tell the client to open them.
    pub fn listening(&mut self) {
        if self.state == ServerState::Streams {
            self.send_state(State::CreateStreams);
        }
    }

    /// The driver accepted every data stream.
    pub fn streams_ready(&mut self, now: Instant) {
        if self.state != ServerState::Streams {
            return;
        }
        let Some(p) = self.params.as_ref() else {
            return;
        };
        // Tests that end by bytes or blocks have no duration of their own: the
        // server's limits bound them.
        self.deadline = now + Duration::from_secs(p.seconds_allowed(&self.limits));
        if p.time > 0 {
            self.deadline += SERVER_GRACE;
        }
        self.state = ServerState::Running;
        self.send_state(State::TestStart);
        self.send_state(State::TestRunning);
        self.actions.push_back(ServerAction::StartTest);
    }

    /// The driver stopped the streams; these are the server's own results.
    pub fn local_results(&mut self, now: Instant, r: ExchangedResults) {
        if self.state != ServerState::LocalResults {
            return;
        }
        self.local = Some(r);
        self.state = ServerState::ClientResults;
        self.deadline = now + self.idle;
        self.send_state(State::ExchangeResults);
        // The client's results may already be buffered.
        self.handle_input(now, &[]);
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    #[error("the server is busy running a test for another client; try again later")]
    Busy,
    #[error("the server refused the test: {}", describe_ierr(*.ierr))]
    Server { ierr: i32, errno: i32 },
    #[error("the server ended the test (SERVER_TERMINATE)")]
    ServerTerminated,
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the server went silent ({0})")]
    Timeout(String),
}

fn describe_ierr(ierr: i32) -> String {
    match ierr {
        protocol::ierr::DURATION => "test duration out of range".into(),
        protocol::ierr::NUM_STREAMS => "too many parallel streams".into(),
        protocol::ierr::BLOCK_SIZE => "block size out of range".into(),
        protocol::ierr::BUF_SIZE => "socket buffer (window) too large".into(),
        protocol::ierr::RECV_PARAMS => "it could not read the parameters".into(),
        n => format!("iperf3 error code {n}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ClientAction {
    Send(Vec<u8>),
    /// Open the data streams, one after the other.
    OpenStreams,
    /// TEST_RUNNING: start sending and receiving.
    StartTest,
    /// The test time is over (TEST_END is on its way): stop sending.
    StopSending,
    /// The server wants results: stop everything and hand them over.
    StopTest,
    Finished(Box<ExchangedResults>),
    Fail(ClientError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientState {
    ParamExchange,
    CreateStreams,
    TestStart,
    TestRunning,
    Running,
    Ending,
    LocalResults,
    ServerResults,
    Display,
    Closed,
}

#[derive(Debug)]
pub struct ClientSession {
    state: ClientState,
    params: TestParams,
    version: String,
    rx: ControlBuffer,
    actions: VecDeque<ClientAction>,
    /// When the test ends by time; None for byte/block-bounded tests.
    end_at: Option<Instant>,
    deadline: Instant,
    server: Option<ExchangedResults>,
}

impl ClientSession {
    pub fn new(now: Instant, params: TestParams, cookie: [u8; COOKIE_LEN], version: &str) -> Self {
        let mut actions = VecDeque::new();
        actions.push_back(ClientAction::Send(cookie.to_vec()));
        ClientSession {
            state: ClientState::ParamExchange,
            params,
            version: version.into(),
            rx: ControlBuffer::default(),
            actions,
            end_at: None,
            deadline: now + IDLE_TIMEOUT,
            server: None,
        }
    }

    pub fn params(&self) -> &TestParams {
        &self.params
    }

    pub fn poll_action(&mut self) -> Option<ClientAction> {
        self.actions.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            ClientState::Closed => None,
            ClientState::Running => {
                Some(self.end_at.map_or(self.deadline, |e| e.min(self.deadline)))
            }
            _ => Some(self.deadline),
        }
    }

    fn fail(&mut self, e: ClientError) {
        self.state = ClientState::Closed;
        self.actions.push_back(ClientAction::Fail(e));
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == ClientState::Running && self.end_at.is_some_and(|e| now >= e) {
            self.end(now);
        } else if self.state != ClientState::Closed && now >= self.deadline {
            self.fail(ClientError::Timeout(format!("{:?}", self.state)));
        }
    }

    /// The driver saw the byte or block count reached (-n / -k).
    pub fn volume_reached(&mut self, now: Instant) {
        if self.state == ClientState::Running {
            self.end(now);
        }
    }

    /// Ctrl-C: tell the server and give up.
    pub fn terminate(&mut self) {
        if self.state != ClientState::Closed {
            self.actions
                .push_back(ClientAction::Send(vec![State::ClientTerminate.byte()]));
            self.state = ClientState::Closed;
        }
    }

    fn end(&mut self, now: Instant) {
        self.state = ClientState::Ending;
        self.deadline = now + IDLE_TIMEOUT;
        self.actions.push_back(ClientAction::StopSending);
        self.actions
            .push_back(ClientAction::Send(vec![State::TestEnd.byte()]));
    }

    pub fn handle_eof(&mut self) {
        if self.state != ClientState::Closed {
            let s = self.state;
            self.fail(ClientError::Protocol(format!(
                "the server closed the control connection during {s:?}"
            )));
        }
    }

    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        self.rx.push(bytes);
        loop {
            let before = (self.state, self.actions.len());
            self.step(now);
            if (self.state, self.actions.len()) == before || self.state == ClientState::Closed {
                break;
            }
        }
    }

    fn step(&mut self, now: Instant) {
        use ClientState as S;
        match self.state {
            S::ServerResults => match self.rx.take_json(protocol::MAX_RESULTS_JSON) {
                None => {}
                Some(Err(e)) => self.fail(ClientError::Protocol(format!("server results: {e}"))),
                Some(Ok(v)) => match serde_json::from_value::<ExchangedResults>(v) {
                    Ok(r) => {
                        self.server = Some(r);
                        self.state = S::Display;
                    }
                    Err(e) => self.fail(ClientError::Protocol(format!("server results: {e}"))),
                },
            },
            S::LocalResults | S::Closed => {}
            _ => {
                let Some(b) = self.rx.take_byte() else { return };
                self.deadline = now + IDLE_TIMEOUT;
                match (self.state, State::from_byte(b)) {
                    (_, Some(State::AccessDenied)) => self.fail(ClientError::Busy),
                    (_, Some(State::ServerError)) => {
                        // Two int32 follow; wait for them.
                        self.state = S::Closed;
                        self.rx_server_error();
                    }
                    (_, Some(State::ServerTerminate)) => self.fail(ClientError::ServerTerminated),
                    (S::ParamExchange, Some(State::ParamExchange)) => {
                        let v = self.params.to_json(&self.version);
                        self.actions
                            .push_back(ClientAction::Send(protocol::frame_json(&v)));
                        self.state = S::CreateStreams;
                    }
                    (S::CreateStreams, Some(State::CreateStreams)) => {
                        self.actions.push_back(ClientAction::OpenStreams);
                        self.state = S::TestStart;
                    }
                    (S::TestStart, Some(State::TestStart)) => {
                        // Timers start at TEST_START, as iperf3's do.
                        if self.params.time > 0 {
                            self.end_at = Some(
                                now + Duration::from_secs(
                                    self.params.time as u64 + self.params.omit as u64,
                                ),
                            );
                        }
                        self.state = S::TestRunning;
                    }
                    (S::TestRunning, Some(State::TestRunning)) => {
                        self.state = S::Running;
                        self.deadline = self
                            .end_at
                            .map_or(now + Duration::from_secs(protocol::MAX_TIME as u64), |e| {
                                e + SERVER_GRACE
                            });
                        self.actions.push_back(ClientAction::StartTest);
                    }
                    (S::Ending | S::Running, Some(State::ExchangeResults)) => {
                        if self.state == S::Running {
                            self.actions.push_back(ClientAction::StopSending);
                        }
                        self.state = S::LocalResults;
                        self.actions.push_back(ClientAction::StopTest);
                    }
                    (S::Display, Some(State::DisplayResults)) => {
                        self.actions
                            .push_back(ClientAction::Send(vec![State::IperfDone.byte()]));
                        self.state = S::Closed;
                        let r = self.server.take().unwrap_or_default();
                        self.actions.push_back(ClientAction::Finished(Box::new(r)));
                    }
                    (s, _) => self.fail(ClientError::Protocol(format!(
                        "unexpected control byte {b} during {s:?}"
                    ))),
                }
            }
        }
    }

    fn rx_server_error(&mut self) {
        // The error codes may not have arrived yet: keep them pending in the buffer and
        // report what is there; a driver that sees Closed reads no more.
        let codes = self.rx.take_bytes::<8>();
        let (ierr, errno) = codes
            .map(|c| {
                (
                    i32::from_be_bytes([c[0], c[1], c[2], c[3]]),
                    i32::from_be_bytes([c[4], c[5], c[6], c[7]]),
                )
            })
            .unwrap_or((0, 0));
        self.actions
            .push_back(ClientAction::Fail(ClientError::Server { ierr, errno }));
    }

    /// The driver stopped the streams; these are the client's own results.
    pub fn local_results(&mut self, now: Instant, r: &ExchangedResults) {
        if self.state != ClientState::LocalResults {
            return;
        }
        let json = serde_json::to_value(r).unwrap_or_default();
        self.actions
            .push_back(ClientAction::Send(protocol::frame_json(&json)));
        self.state = ClientState::ServerResults;
        self.deadline = now + IDLE_TIMEOUT;
        self.handle_input(now, &[]);
    }
}

/// The fuzz target `control_server` (and tests/offline/fuzz_regressions.rs): a server
/// session fed arbitrary bytes as a client would send them, in pieces, with the
/// clock moving and the driver doing what each action asks. The first byte picks
/// the piece length and the clock step. No input may panic, and a session that
/// has closed must stay quiet.
#[doc(hidden)]
pub fn fuzz_server(data: &[u8]) {
    let Some((&knob, rest)) = data.split_first() else {
        return;
    };
    let piece = (knob & 0x0f) as usize + 1;
    let step = Duration::from_millis(((knob >> 4) as u64) * 700);
    let t0 = Instant::now();
    let mut now = t0;
    let mut s = ServerSession::with_idle_timeout(t0, Duration::from_secs(2));
    let mut closed = false;
    for chunk in rest.chunks(piece) {
        s.handle_input(now, chunk);
        now += step;
        s.handle_timeout(now);
        while let Some(a) = s.poll_action() {
            assert!(!closed, "an action after the session failed: {a:?}");
            match a {
                ServerAction::Send(b) => assert!(!b.is_empty()),
                ServerAction::AcceptStreams(p) => {
                    assert!(p.total_streams() <= 2 * protocol::MAX_STREAMS);
                    s.listening();
                    s.streams_ready(now);
                }
                ServerAction::StopTest => s.local_results(now, ExchangedResults::default()),
                ServerAction::StartTest | ServerAction::Finished(_) => {}
                ServerAction::Fail(_) => closed = true,
            }
        }
    }
    s.handle_eof();
    let _ = s.poll_timeout();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::exchanged_results::StreamResult;

    fn results(bytes: u64) -> ExchangedResults {
        ExchangedResults {
            cpu_util_total: 1.0,
            streams: vec![StreamResult {
                id: 1,
                bytes,
                retransmits: -1,
                jitter: 0.0,
                errors: 0,
                omitted_errors: 0,
                packets: 0,
                omitted_packets: 0,
                start_time: 0.0,
                end_time: 2.0,
            }],
            ..Default::default()
        }
    }

    /// Moves every Send from one side to the other; returns the other actions.
    fn pump(
        c: &mut ClientSession,
        s: &mut ServerSession,
        now: Instant,
    ) -> (Vec<ClientAction>, Vec<ServerAction>) {
        let (mut ca, mut sa) = (Vec::new(), Vec::new());
        loop {
            let mut moved = false;
            while let Some(a) = c.poll_action() {
                match a {
                    ClientAction::Send(b) => {
                        s.handle_input(now, &b);
                        moved = true;
                    }
                    other => ca.push(other),
                }
            }
            while let Some(a) = s.poll_action() {
                match a {
                    ServerAction::Send(b) => {
                        c.handle_input(now, &b);
                        moved = true;
                    }
                    other => sa.push(other),
                }
            }
            if !moved {
                return (ca, sa);
            }
        }
    }

    #[test]
    fn a_whole_test_in_memory_with_a_fake_clock() {
        let t0 = Instant::now();
        let params = TestParams {
            time: 2,
            parallel: 2,
            ..Default::default()
        };
        let mut c = ClientSession::new(
            t0,
            params.clone(),
            protocol::make_cookie(7),
            "tunbench-test",
        );
        let mut s = ServerSession::new(t0);
        let (ca, sa) = pump(&mut c, &mut s, t0);
        assert!(ca.is_empty(), "nothing before the server listens: {ca:?}");
        assert!(
            matches!(&sa[..], [ServerAction::AcceptStreams(p)] if p.parallel == 2 && p.time == 2)
        );
        assert_eq!(s.cookie(), Some(&protocol::make_cookie(7)));
        s.listening();
        let (ca, _) = pump(&mut c, &mut s, t0);
        assert_eq!(ca, vec![ClientAction::OpenStreams]);

        s.streams_ready(t0);
        let (ca, sa) = pump(&mut c, &mut s, t0);
        assert_eq!(ca, vec![ClientAction::StartTest]);
        assert_eq!(sa, vec![ServerAction::StartTest]);

        // Nothing happens before the test time is up...
        let t1 = t0 + Duration::from_millis(1999);
        c.handle_timeout(t1);
        assert_eq!(pump(&mut c, &mut s, t1), (vec![], vec![]));
        assert_eq!(c.poll_timeout(), Some(t0 + Duration::from_secs(2)));
        // ...and then the client ends it.
        let t2 = t0 + Duration::from_secs(2);
        c.handle_timeout(t2);
        let (ca, sa) = pump(&mut c, &mut s, t2);
        assert_eq!(ca, vec![ClientAction::StopSending]);
        assert_eq!(sa, vec![ServerAction::StopTest]);

        s.local_results(t2, results(222));
        let (ca, sa) = pump(&mut c, &mut s, t2);
        assert_eq!(ca, vec![ClientAction::StopTest]);
        assert!(sa.is_empty());
        c.local_results(t2, &results(111));
        let (ca, sa) = pump(&mut c, &mut s, t2);
        assert!(
            matches!(&ca[..], [ClientAction::Finished(r)] if r.streams[0].bytes == 222),
            "{ca:?}"
        );
        assert!(
            matches!(&sa[..], [ServerAction::Finished(r)] if r.streams[0].bytes == 111),
            "{sa:?}"
        );
        assert_eq!(c.poll_timeout(), None);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn busy_server_and_refused_parameters() {
        let t0 = Instant::now();
        let mut c = ClientSession::new(t0, TestParams::default(), protocol::make_cookie(1), "x");
        let _ = c.poll_action();
        c.handle_input(t0, &[0xff]);
        assert_eq!(c.poll_action(), Some(ClientAction::Fail(ClientError::Busy)));

        let mut s = ServerSession::new(t0);
        s.handle_input(t0, &protocol::make_cookie(2));
        let _ = s.poll_action();
        s.handle_input(
            t0,
            &protocol::frame_json(&serde_json::json!({"tcp": true, "parallel": 100000})),
        );
        let ServerAction::Send(err) = s.poll_action().unwrap() else {
            panic!()
        };
        assert_eq!(err[0], 0xfe);
        assert_eq!(
            i32::from_be_bytes([err[1], err[2], err[3], err[4]]),
            protocol::ierr::NUM_STREAMS
        );
        assert!(matches!(s.poll_action(), Some(ServerAction::Fail(m)) if m.contains("parallel")));

        let mut c = ClientSession::new(t0, TestParams::default(), protocol::make_cookie(1), "x");
        let _ = c.poll_action();
        c.handle_input(t0, &[9]);
        let _ = c.poll_action();
        c.handle_input(t0, &err);
        assert_eq!(
            c.poll_action(),
            Some(ClientAction::Fail(ClientError::Server {
                ierr: protocol::ierr::NUM_STREAMS,
                errno: 0
            }))
        );
    }

    #[test]
    fn server_rejects_oversized_or_empty_json_and_times_out_silent_clients() {
        let t0 = Instant::now();
        for len in [0u32, 1 << 20] {
            let mut s = ServerSession::new(t0);
            s.handle_input(t0, &protocol::make_cookie(3));
            let _ = s.poll_action();
            s.handle_input(t0, &len.to_be_bytes());
            assert!(matches!(s.poll_action(), Some(ServerAction::Send(b)) if b[0] == 0xfe));
            assert!(matches!(s.poll_action(), Some(ServerAction::Fail(_))));
        }
        let mut s = ServerSession::new(t0);
        s.handle_input(t0, &protocol::make_cookie(3)[..10]);
        s.handle_timeout(t0 + IDLE_TIMEOUT);
        assert!(matches!(s.poll_action(), Some(ServerAction::Fail(m)) if m.contains("silent")));
    }
}
