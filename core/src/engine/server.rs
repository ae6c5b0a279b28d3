//! The server driver: one listener for control and TCP data connections (as iperf3
//! has it), one test at a time; a second client gets ACCESS_DENIED. Every failure
//! ends only that test: the server keeps serving.

mod data_streams;
mod test_run;

use super::control::IDLE_TIMEOUT;
use super::params::ServerLimits;
use super::protocol::{self, COOKIE_LEN, State};
use super::report::TestReport;
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use test_run::run_test;

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
            let outcome = run_test(conn, cookie, rx, SlotGuard(slot), opts, port);
            report(outcome);
        }
    }
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

    /// A refused test frees the slot before the client hears of it: a client
    /// that tries again at once finds the server free, however late the
    /// server's thread runs on after its write. Here the test holds the slot's
    /// lock, so the server cannot free it: the refusal must wait.
    #[test]
    fn a_refused_client_hears_so_only_once_the_slot_is_free() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (server_end, mut client) = pair(&l);
        let slot: Arc<Mutex<Option<Busy>>> = Arc::new(Mutex::new(None));
        let opts = ServerOptions {
            limits: ServerLimits {
                max_streams: 4,
                ..ServerLimits::default()
            },
            ..ServerOptions::default()
        };
        let (done_tx, _done_rx) = mpsc::channel();
        let s = slot.clone();
        let server = std::thread::spawn(move || {
            serve_connection(
                server_end,
                [3; COOKIE_LEN],
                1,
                s,
                Arc::new(|_| {}),
                &opts,
                5201,
                done_tx,
            );
        });
        client
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut state = [0u8; 1];
        client.read_exact(&mut state).unwrap();
        assert_eq!(state[0], State::ParamExchange.byte());
        let held = slot.lock().unwrap();
        let params = serde_json::json!({"tcp": true, "parallel": 5, "time": 1});
        client.write_all(&protocol::frame_json(&params)).unwrap();
        client
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let early = client.read(&mut state);
        assert!(
            early.is_err(),
            "the client heard {early:?} while the server still held the slot"
        );
        drop(held);
        client
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        client.read_exact(&mut state).unwrap();
        assert_eq!(state[0], State::ServerError.byte());
        assert!(slot.lock().unwrap().is_none(), "the slot is free");
        server.join().unwrap();
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
        // The oldest was shut down by the newcomer: its client reads the end
        // (a timeout there would be an error, not the end), and its reader
        // gives up without a cookie.
        clients[0]
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let end = clients[0].read(&mut [0u8; 1]);
        assert!(
            matches!(end, Ok(0)),
            "the oldest was not shut down: {end:?}"
        );
        assert!(read_cookie(waiting.remove(0)).is_none());
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
}
