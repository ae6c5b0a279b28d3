//! Bad input to the server: each case gets iperf3's answer where it has one, and
//! the server keeps serving afterwards. The client's own errors are clear.
//! Loopback only.

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server() -> Server {
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-p", &port.to_string(), "--idle-timeout", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    });
    Server { child, port }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s
}

const COOKIE: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";

/// A cookie of its own per connection, as iperf3 clients make them: a server
/// still finishing the previous test takes a connection with that test's cookie
/// for one of its data streams.
fn fresh_cookie() -> [u8; 37] {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut c = *COOKIE;
    c[..8].copy_from_slice(format!("{n:08}").as_bytes());
    c
}

/// Cookie sent, PARAM_EXCHANGE read.
fn to_params(port: u16) -> TcpStream {
    to_params_with(port, &fresh_cookie())
}

/// As `to_params`, with `cookie`. A server still ending the previous client's
/// test turns a new one away (ACCESS_DENIED): tried again until it takes it.
fn to_params_with(port: u16, cookie: &[u8; 37]) -> TcpStream {
    wait_for(
        "the server took a new client (PARAM_EXCHANGE)",
        BOUND,
        || {
            let mut s = connect(port);
            s.write_all(cookie).unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            match b[0] {
                9 => Some(s),
                0xff => None,
                x => panic!("{x:#x} instead of PARAM_EXCHANGE or ACCESS_DENIED"),
            }
        },
    )
}

fn send_json(s: &mut TcpStream, text: &str) {
    s.write_all(&(text.len() as u32).to_be_bytes()).unwrap();
    s.write_all(text.as_bytes()).unwrap();
}

/// SERVER_ERROR and its i_errno.
fn expect_server_error(s: &mut TcpStream) -> i32 {
    let mut b = [0u8; 9];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 0xfe, "SERVER_ERROR");
    i32::from_be_bytes([b[1], b[2], b[3], b[4]])
}

/// Whether a read says the peer closed the connection.
fn closed(r: &std::io::Result<usize>) -> bool {
    match r {
        Ok(n) => *n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// Whether nothing has arrived on `sock` by now (it is not read from).
fn nothing_waiting(sock: &std::net::UdpSocket) -> bool {
    sock.set_nonblocking(true).unwrap();
    let mut b = [0u8; 2048];
    let r = sock.peek(&mut b);
    sock.set_nonblocking(false).unwrap();
    matches!(r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A real test still works: the server may first have to give up on the bad
/// client at its idle timeout, and turns the client away as busy until then.
fn still_serves(port: u16) {
    let port = port.to_string();
    let j = wait_for("a real test served after the bad client", BOUND, || {
        let o = tunbench(&["client", "127.0.0.1", "-p", &port, "-t", "1", "-J"]);
        if o.status.success() {
            return Some(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap());
        }
        assert!(text(&o).contains("busy"), "{}", text(&o));
        None
    });
    assert!(j["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn absurd_parameters_get_server_error_with_iperf3_codes() {
    let srv = server();
    for (params, ierr) in [
        (r#"{"tcp":true,"parallel":100000,"len":131072,"time":1}"#, 6),
        (r#"{"tcp":true,"parallel":1,"len":0,"time":1}"#, 7),
        (r#"{"tcp":true,"parallel":1,"len":1024,"time":-1}"#, 5),
    ] {
        let mut s = to_params(srv.port);
        send_json(&mut s, params);
        assert_eq!(expect_server_error(&mut s), ierr, "{params}");
    }
    still_serves(srv.port);
}

#[test]
fn oversized_zero_truncated_and_non_json_parameters() {
    let srv = server();
    let mut s = to_params(srv.port);
    s.write_all(&(1u32 << 20).to_be_bytes()).unwrap();
    expect_server_error(&mut s);
    let mut s = to_params(srv.port);
    s.write_all(&0u32.to_be_bytes()).unwrap();
    expect_server_error(&mut s);
    let mut s = to_params(srv.port);
    send_json(&mut s, "this is not json");
    expect_server_error(&mut s);
    // Truncated: the length promises more than ever comes.
    let mut s = to_params(srv.port);
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(b"{\"tcp\":").unwrap();
    drop(s);
    still_serves(srv.port);
}

#[test]
fn unknown_parameters_are_ignored() {
    let srv = server();
    let mut s = to_params(srv.port);
    send_json(
        &mut s,
        r#"{"tcp":true,"time":1,"parallel":1,"len":1024,"gso":1,"mptcp":true,"frobnicate":[1,2]}"#,
    );
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 10, "CREATE_STREAMS");
    drop(s);
    still_serves(srv.port);
}

#[test]
fn client_vanishing_mid_test_and_a_wrong_data_cookie() {
    let srv = server();
    let mut s = to_params_with(srv.port, COOKIE);
    send_json(
        &mut s,
        r#"{"tcp":true,"time":30,"parallel":1,"len":131072}"#,
    );
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 10);
    // A data connection with the wrong cookie is turned away...
    let mut wrong = connect(srv.port);
    wrong
        .write_all(b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\0")
        .unwrap();
    let mut d = [0u8; 1];
    wrong.read_exact(&mut d).unwrap();
    assert_eq!(d[0], 0xff, "ACCESS_DENIED for a foreign cookie");
    // ...the right one is taken, the test starts, and then the client disappears.
    let mut data = connect(srv.port);
    data.write_all(COOKIE).unwrap();
    let mut st = [0u8; 2];
    s.read_exact(&mut st).unwrap();
    assert_eq!(st, [1, 2], "TEST_START, TEST_RUNNING");
    data.write_all(&[0u8; 65536]).unwrap();
    drop(data);
    drop(s);
    still_serves(srv.port);
}

#[test]
fn a_data_connection_without_a_control_connection() {
    let srv = server();
    // Looks like a data stream, but no test is running: the server treats it as a
    // client, waits for parameters that never come, and gives up after its idle time.
    let mut s = connect(srv.port);
    s.write_all(COOKIE).unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 9, "PARAM_EXCHANGE: taken for a client");
    still_serves(srv.port);
    // By then the server has given up on it.
    s.set_read_timeout(Some(BOUND)).unwrap();
    let r = s.read(&mut b);
    assert!(closed(&r), "the connection is closed: {r:?}");
}

/// Established IPv4 TCP connections whose remote port is `port`: a client's
/// control and data connections to a server on loopback.
fn client_connections_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let remote = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[2].ends_with(&remote) && f[3] == "01"
        })
        .count()
}

#[test]
fn a_second_client_is_busy_and_the_client_says_so() {
    let srv = server();
    let port = srv.port.to_string();
    struct Reap(Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let start = || {
        Reap(
            Command::new(bin())
                .args(["client", "127.0.0.1", "-p", &port, "-t", "60", "-b", "10M"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    // The server is busy once the first client's control and data connections
    // are up. The first client may itself be turned away (it then exits): it
    // starts again. Its test (60 s, then killed) outlasts the checks below.
    let mut first = start();
    wait_until("the first client started its test", BOUND, || {
        if first.0.try_wait().unwrap().is_some() {
            first = start();
        }
        client_connections_to(srv.port) >= 2
    });
    // Raw: ACCESS_DENIED, as iperf3 gives it.
    let mut s = connect(srv.port);
    s.write_all(b"0123456789012345678901234567890123456\0"[..37].as_ref())
        .unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 0xff);
    // Our client says it in words and fails.
    let o = tunbench(&["client", "127.0.0.1", "-p", &port, "-t", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("the server is busy"), "{}", text(&o));
    // The first client's test goes on undisturbed, its connections up.
    drop(s);
    assert!(
        first.0.try_wait().unwrap().is_none() && client_connections_to(srv.port) >= 2,
        "the first client's test was disturbed"
    );
}

#[test]
fn client_errors_are_clear() {
    // Nothing listens on this port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let o = tunbench(&["client", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains(&format!(
            "cannot reach the server at 127.0.0.1:{port}: Connection refused"
        )),
        "{}",
        text(&o)
    );
    // Out-of-range arguments are refused before any connection.
    let o = tunbench(&["client", "127.0.0.1", "-p", &port.to_string(), "-P", "0"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "bad arguments never reach a server: {}",
        text(&o)
    );
}

#[test]
fn server_error_code_is_reported_in_words() {
    // A fake server that takes the parameters and answers SERVER_ERROR with
    // i_errno 6 (IENUMSTREAMS in 3.12), as iperf3 does for too many streams.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut cookie = [0u8; 37];
        c.read_exact(&mut cookie).unwrap();
        c.write_all(&[9]).unwrap();
        let mut len = [0u8; 4];
        c.read_exact(&mut len).unwrap();
        let mut p = vec![0u8; u32::from_be_bytes(len) as usize];
        c.read_exact(&mut p).unwrap();
        c.write_all(&[0xfe, 0, 0, 0, 6, 0, 0, 0, 0]).unwrap();
    });
    let o = tunbench(&["client", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]);
    t.join().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("the server refused the test: too many parallel streams"),
        "{}",
        text(&o)
    );
}

/// The tail of an earlier UDP test, still arriving from a queue on the path
/// when the next test opens its stream, is not taken for the client's hello:
/// only a 4-byte datagram opens a stream, and the hello gets the reply.
#[test]
fn a_stray_datagram_before_the_udp_hello_does_not_open_the_stream() {
    use std::net::UdpSocket;
    let srv = server();
    let mut s = to_params(srv.port);
    send_json(
        &mut s,
        r#"{"udp":true,"time":1,"parallel":1,"len":1400,"bandwidth":1000000}"#,
    );
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 10, "CREATE_STREAMS");
    // Sent one after the other from this thread, over loopback the stray
    // reaches the server's socket first.
    let stray = UdpSocket::bind("127.0.0.1:0").unwrap();
    stray
        .send_to(&[7u8; 1400], ("127.0.0.1", srv.port))
        .unwrap();
    let hello = UdpSocket::bind("127.0.0.1:0").unwrap();
    hello.connect(("127.0.0.1", srv.port)).unwrap();
    hello.send(&[0x39, 0x38, 0x37, 0x36]).unwrap();
    hello.set_read_timeout(Some(BOUND)).unwrap();
    let mut r = [0u8; 64];
    let n = hello.recv(&mut r).expect("the hello gets the reply");
    assert_eq!(&r[..n], &[0x36, 0x37, 0x38, 0x39]);
    // An answer to the stray would have been sent before the hello's.
    assert!(nothing_waiting(&stray), "nothing goes to the stray's port");
}

/// Control and data connections of a TCP test up to TEST_RUNNING; the data
/// connections are returned open.
fn running_tcp_test(port: u16, params: &str, streams: usize) -> (TcpStream, Vec<TcpStream>) {
    let cookie = fresh_cookie();
    let mut s = to_params_with(port, &cookie);
    send_json(&mut s, params);
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 10, "CREATE_STREAMS");
    let data: Vec<TcpStream> = (0..streams)
        .map(|_| {
            let mut d = connect(port);
            d.write_all(&cookie).unwrap();
            d
        })
        .collect();
    let mut st = [0u8; 2];
    s.read_exact(&mut st).unwrap();
    assert_eq!(st, [1, 2], "TEST_START, TEST_RUNNING");
    (s, data)
}

/// A client that keeps a data socket busy after TEST_END (writing to it for as
/// long as it can, so the server's read never times out empty) still gets
/// EXCHANGE_RESULTS: stopping a stream waits a bounded time, whatever its
/// socket does. The writing stops only once the results have come.
#[test]
fn a_data_socket_trickling_after_test_end_does_not_hold_the_results() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let srv = server();
    let (mut s, mut data) = running_tcp_test(
        srv.port,
        r#"{"tcp":true,"time":1,"parallel":1,"len":1024}"#,
        1,
    );
    let mut d = data.pop().unwrap();
    d.write_all(&[0u8; 4096]).unwrap();
    // A write blocked on a full socket gives up now and then to look at `stop`.
    d.set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match d.write(&[0u8; 1024]) {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(_) => break,
                }
            }
        })
    };
    s.write_all(&[4]).unwrap(); // TEST_END
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut b = [0u8; 1];
    let got = s.read_exact(&mut b);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    got.unwrap_or_else(|e| panic!("no EXCHANGE_RESULTS within {BOUND:?} of TEST_END: {e}"));
    assert_eq!(b[0], 13, "EXCHANGE_RESULTS");
}

/// A client trickling its parameters (a byte each time it looks whether the
/// server has closed, more often than the server's reads time out, of a
/// promised 8000) is cut off at the idle timeout (2 s), not before: a steady
/// trickle must not stop the server from looking at the clock.
#[test]
fn a_client_trickling_its_parameters_is_cut_off_at_the_idle_timeout() {
    let srv = server();
    let t0 = Instant::now();
    let mut s = to_params(srv.port);
    s.write_all(&8000u32.to_be_bytes()).unwrap();
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 16];
    wait_until(
        "the server closed a client trickling its parameters",
        BOUND,
        || {
            let r = s.read(&mut b);
            if closed(&r) {
                return true;
            }
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    // The 8000 bytes would take far longer than the bound.
                    let _ = s.write(b" ");
                    false
                }
                other => panic!("the server answered a trickle: {other:?}"),
            }
        },
    );
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "closed after {waited:?}, before the idle timeout"
    );
    still_serves(srv.port);
}

/// Only the control connection's peer may open a UDP stream: a hello from
/// another address (127.0.0.2 here, standing for a spoofed source) gets no
/// reply, which with -R would have aimed the server's flood at it; the real
/// client's hello still opens the stream.
#[test]
fn a_udp_hello_from_another_address_is_ignored() {
    use std::net::UdpSocket;
    let srv = server();
    let mut s = to_params(srv.port);
    send_json(
        &mut s,
        r#"{"udp":true,"reverse":true,"time":1,"parallel":1,"len":1400,"bandwidth":1000000}"#,
    );
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 10, "CREATE_STREAMS");
    // Sent one after the other from this thread, over loopback the spoofed
    // hello reaches the server first: an answer to it would come before the
    // real one's.
    let spoofed = UdpSocket::bind("127.0.0.2:0").unwrap();
    spoofed.connect(("127.0.0.1", srv.port)).unwrap();
    spoofed.send(&[0x39, 0x38, 0x37, 0x36]).unwrap();
    let mut r = [0u8; 2048];
    let hello = UdpSocket::bind("127.0.0.1:0").unwrap();
    hello.connect(("127.0.0.1", srv.port)).unwrap();
    hello.send(&[0x39, 0x38, 0x37, 0x36]).unwrap();
    hello.set_read_timeout(Some(BOUND)).unwrap();
    let n = hello
        .recv(&mut r)
        .expect("the client's hello gets the reply");
    assert_eq!(&r[..n], &[0x36, 0x37, 0x38, 0x39]);
    assert!(
        nothing_waiting(&spoofed),
        "nothing goes to a hello from another address"
    );
    let mut st = [0u8; 2];
    s.read_exact(&mut st).unwrap();
    assert_eq!(st, [1, 2], "TEST_START, TEST_RUNNING");
    // The test's traffic (-R: the server sends) reaches the client, and none
    // of it went to the other address.
    let n = hello.recv(&mut r).expect("the test's traffic");
    assert!(n > 4, "a test datagram, {n} bytes");
    assert!(
        nothing_waiting(&spoofed),
        "nor does the test's traffic go there"
    );
}

/// Limits a server sets: each request over one is refused with iperf3's
/// SERVER_ERROR code, the client says why in words, and the server goes on.
#[test]
fn requests_over_the_servers_limits_are_refused_clearly() {
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-p", &port.to_string(), "--idle-timeout", "2"])
            .args(["--max-streams", "4", "--max-duration", "10"])
            .args(["--max-interval-records", "30", "--max-window", "1M"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    });
    let srv = Server { child, port };
    for (params, ierr) in [
        // iperf3 3.12's codes: IENUMSTREAMS, IEDURATION, IEBUFSIZE.
        (r#"{"tcp":true,"parallel":5,"time":1}"#, 6),
        (r#"{"tcp":true,"parallel":1,"time":8,"omit":3}"#, 5),
        // 4 streams each way for 4 s: 40 records.
        (
            r#"{"tcp":true,"parallel":4,"bidirectional":true,"time":4}"#,
            5,
        ),
        (r#"{"tcp":true,"parallel":1,"time":1,"window":2097152}"#, 8),
    ] {
        let mut s = to_params(srv.port);
        send_json(&mut s, params);
        assert_eq!(expect_server_error(&mut s), ierr, "{params}");
    }
    let port = srv.port.to_string();
    let o = tunbench(&["client", "127.0.0.1", "-p", &port, "-t", "1", "-P", "5"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("the server refused the test: too many parallel streams"),
        "{}",
        text(&o)
    );
    // Debian's iperf3 says the same in its words.
    for (args, words) in [
        (["-P", "5"], "number of parallel streams too large"),
        (["-t", "11"], "test duration too long"),
    ] {
        let o = Command::new(program("iperf3"))
            .args(["-c", "127.0.0.1", "-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(text(&o).contains(words), "iperf3 {args:?}: {}", text(&o));
    }
    // Within every limit: 4 streams each way for 2 s make 24 records.
    let o = tunbench(&[
        "client",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "2",
        "-P",
        "4",
        "--bidir",
        "-b",
        "10M",
    ]);
    assert!(o.status.success(), "{}", text(&o));
}

/// The server's --help states its limits and their defaults.
#[test]
fn server_help_states_the_limits() {
    let o = tunbench(&["server", "--help"]);
    let t = text(&o);
    for flag in [
        "--max-streams <MAX_STREAMS>",
        "--max-duration <MAX_DURATION>",
        "--max-interval-records <MAX_INTERVAL_RECORDS>",
        "--max-window <MAX_WINDOW>",
        "[default: 128]",
        "[default: 86400]",
        "[default: 250000]",
    ] {
        assert!(t.contains(flag), "{flag} missing from:\n{t}");
    }
}

/// A network namespace of the test's own, removed on drop.
struct OwnNetns(String);

impl OwnNetns {
    fn new(tag: &str) -> OwnNetns {
        let ns = OwnNetns(lab_name(tag));
        let ip = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().unwrap();
            assert!(o.status.success(), "ip {args:?}: {}", text(&o));
        };
        ip(&["netns", "add", &ns.0]);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }

    fn exec(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(args);
        c
    }
}

impl Drop for OwnNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A client that stops reading while the server writes its results (-P 128
/// --bidir, some 40 KB of JSON) holds the server no longer than the idle
/// timeout: the test ends and the next client is served. Small TCP buffers in a
/// namespace of the test's own make that JSON more than the path holds.
#[test]
fn a_client_that_stops_reading_the_results_does_not_hold_the_server() {
    use socket2::{Domain, SockAddr, Socket, Type};
    let ns = OwnNetns::new("svwr");
    let o = ns
        .exec(&["sysctl", "-w", "net.ipv4.tcp_wmem=4096 4096 4096"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let mut server = ns.exec(&[bin(), "server", "-p", "5201", "--idle-timeout", "2"]);
    server.stdout(Stdio::null()).stderr(Stdio::null());
    let mut srv = Server {
        child: server.spawn().unwrap(),
        port: 5201,
    };
    wait_listening(&mut srv.child, 5201, "tunbench server in its namespace");
    let port = srv.port;
    in_ns(&ns.0, move || {
        // The control connection, with a receive buffer too small for the results.
        let ctl = || {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            s.set_recv_buffer_size(2048).unwrap();
            s.connect(&SockAddr::from(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                port,
            ))))
            .unwrap();
            let s: TcpStream = s.into();
            s.set_read_timeout(Some(BOUND)).unwrap();
            s
        };
        let cookie = fresh_cookie();
        let mut s = ctl();
        s.write_all(&cookie).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 9, "PARAM_EXCHANGE");
        send_json(
            &mut s,
            r#"{"tcp":true,"time":1,"parallel":128,"bidirectional":true,"len":1024,"bandwidth":8000}"#,
        );
        s.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 10, "CREATE_STREAMS");
        let _data: Vec<TcpStream> = (0..256)
            .map(|_| {
                let mut d = connect(port);
                d.write_all(&cookie).unwrap();
                d
            })
            .collect();
        let mut st = [0u8; 2];
        s.read_exact(&mut st).unwrap();
        assert_eq!(st, [1, 2], "TEST_START, TEST_RUNNING");
        s.write_all(&[4]).unwrap(); // TEST_END
        s.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 13, "EXCHANGE_RESULTS");
        send_json(&mut s, r#"{"cpu_util_total":1,"streams":[]}"#);
        // ...and reads no more. The next client is turned away until the server
        // gives up on this one, at its idle timeout.
        wait_until(
            "the server gave up on a client that reads nothing",
            BOUND,
            || {
                let mut n = ctl();
                n.write_all(&fresh_cookie()).unwrap();
                n.read_exact(&mut b).unwrap();
                assert!(b[0] == 9 || b[0] == 0xff, "PARAM_EXCHANGE or ACCESS_DENIED");
                b[0] == 9
            },
        );
    });
    drop(srv);
}

/// Thousands of idle connections (5000, to a server with 1024 descriptors)
/// neither crash the server nor keep a real client out: pending connections
/// are capped, the oldest closed for newer ones.
#[test]
fn thousands_of_idle_connections_do_not_lock_out_a_client() {
    use socket2::{Domain, SockAddr, Socket, Type};
    use std::os::unix::process::CommandExt;
    const IDLE: usize = 5000;
    // Room for this process's own end of every connection.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a valid rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_cur < IDLE as u64 + 1000 {
        lim.rlim_cur = lim.rlim_max.min(IDLE as u64 + 1000);
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    }
    assert!(
        lim.rlim_cur >= IDLE as u64 + 1000,
        "{} descriptors",
        lim.rlim_cur
    );
    let (child, port) = spawn_listening(|port| {
        let mut c = Command::new(bin());
        c.args(["server", "-p", &port.to_string(), "--idle-timeout", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only setrlimit, async-signal-safe, between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let l = libc::rlimit {
                    rlim_cur: 1024,
                    rlim_max: 1024,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        c
    });
    let mut srv = Server { child, port };
    let to = SockAddr::from(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let mut idle = Vec::with_capacity(IDLE);
    // In batches, each connected before the next, so the backlog takes them.
    for _ in 0..IDLE / 250 {
        let batch: Vec<Socket> = (0..250)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                s.set_nonblocking(true).unwrap();
                match s.connect(&to) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                    Err(e) => panic!("connection {}: {e}", idle.len()),
                }
                s
            })
            .collect();
        wait_until("a batch of 250 idle connections made", BOUND, || {
            batch
                .iter()
                .all(|s| s.peer_addr().is_ok() || s.take_error().is_ok_and(|e| e.is_some()))
        });
        idle.extend(batch);
    }
    // Served within the bound: a server that waited out each idle connection
    // in turn would keep the client out far longer.
    let mut client = Command::new(bin())
        .args(["client", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_exit(
        &mut client,
        "the client's test, past the idle connections",
        BOUND,
    );
    assert!(status.success(), "the client: {status}");
    assert!(
        srv.child.try_wait().unwrap().is_none(),
        "the server is still running"
    );
    drop(idle);
}

/// A client's -w becomes the server's socket buffers, as with iperf3 (the
/// kernel doubles what it is asked for, and caps it at the namespace's
/// rmem_max): 16 KiB asked, 32 KiB of receive buffer on the server's end.
#[test]
fn the_clients_window_sets_the_servers_socket_buffers() {
    let srv = server();
    let (_s, data) = running_tcp_test(
        srv.port,
        r#"{"tcp":true,"time":2,"parallel":1,"len":1024,"window":16384,"bandwidth":8000}"#,
        1,
    );
    let client_port = data[0].local_addr().unwrap().port();
    // The server's end: local port the server's, peer port the client's.
    let o = Command::new("ss")
        .args(["-tmnH", "state", "established"])
        .arg(format!(
            "( sport = :{} and dport = :{client_port} )",
            srv.port
        ))
        .output()
        .unwrap();
    let t = text(&o);
    assert!(t.contains("rb32768"), "{t}");
}
