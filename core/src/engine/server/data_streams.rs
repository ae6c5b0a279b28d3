//! The data streams of a test, as the server takes them: TCP connections that
//! came to the control listener with the test's cookie, or UDP sockets each
//! opened by a client's hello on the server's port.

use super::super::params::{Protocol, TestParams};
use super::super::protocol;
use super::ServerOptions;
use socket2::{Domain, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

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

/// The data streams, in the client's opening order.
pub(super) fn accept_streams(
    p: &TestParams,
    data: &Receiver<(u64, TcpStream)>,
    ctl: &TcpStream,
    opts: &ServerOptions,
    port: u16,
    announce: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<Vec<Socket>> {
    let deadline = Instant::now() + opts.idle_timeout;
    match p.protocol {
        Protocol::Tcp => {
            // The listener is the control one, already there.
            announce()?;
            accept_tcp_streams(p, data, deadline)
        }
        Protocol::Udp => accept_udp_streams(p, ctl, opts, port, deadline, announce),
    }
}

/// The TCP connections that came with the test's cookie, by `deadline`.
fn accept_tcp_streams(
    p: &TestParams,
    data: &Receiver<(u64, TcpStream)>,
    deadline: Instant,
) -> io::Result<Vec<Socket>> {
    let n = p.total_streams() as usize;
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
    let mut v = Vec::with_capacity(n);
    for (_, c) in arrived {
        let _ = c.set_nodelay(true);
        let c = Socket::from(c);
        apply_window(&c, p.window);
        v.push(c);
    }
    Ok(v)
}

/// Each stream: a UDP socket on the server's port takes the client's connect
/// datagram, connects back to it and replies; the next stream gets a new one.
fn accept_udp_streams(
    p: &TestParams,
    ctl: &TcpStream,
    opts: &ServerOptions,
    port: u16,
    deadline: Instant,
    announce: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<Vec<Socket>> {
    let n = p.total_streams() as usize;
    let mut v = Vec::with_capacity(n);
    let local = ctl.local_addr()?;
    let client_ip = ctl.peer_addr()?.ip().to_canonical();
    let bind = SocketAddr::new(
        opts.bind.unwrap_or(match local.ip() {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        }),
        port,
    );
    let listener = || udp_stream_socket(bind, opts);
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
        if !opens_a_stream(len, &from, client_ip) {
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
    Ok(v)
}

/// A UDP socket on the server's port, for the next stream's hello.
fn udp_stream_socket(bind: SocketAddr, opts: &ServerOptions) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(bind), Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if bind.is_ipv6() && opts.bind.is_none() {
        s.set_only_v6(false)?;
    }
    crate::socket::gso::set_buffers(&s, crate::socket::gso::UDP_SOCKET_BUFFER);
    s.bind(&SockAddr::from(bind))?;
    Ok(s)
}

/// Whether a datagram of `len` bytes from `from` is a hello that opens a
/// stream.
fn opens_a_stream(len: usize, from: &SockAddr, client_ip: IpAddr) -> bool {
    // Only a client's 4-byte hello opens a stream (iperf3's, or an
    // old iperf3's 123456789): the tail of an earlier test, still
    // arriving from a queue on the path, would otherwise take the
    // stream's place and leave the client waiting for a reply that
    // went to a closed socket.
    if len != protocol::UDP_CONNECT_MSG.len() {
        return false;
    }
    // Only the control connection's peer opens a stream: a hello from
    // anywhere else (spoofed, say) would aim the server's datagrams,
    // with -R a flood, at a third party.
    from.as_socket().map(|a| a.ip().to_canonical()) == Some(client_ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

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
