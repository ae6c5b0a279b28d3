//! Traffic through a path, checked by what arrives, never by how fast: TCP
//! and UDP echoed whole from one namespace to another and back.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{BOUND, getsockopt_int, in_ns, poll, setsockopt_int};

const TCP_BYTES: usize = 2 << 20;
const TCP_BOUND: Duration = Duration::from_secs(60);

/// TCP and UDP pass through a tunnel, for every (client, server, target):
/// from `LAB-CLIENT` to `target` in `LAB-SERVER` (with `lab` empty, the two
/// names are namespaces of their own, outside any lab). The server echoes
/// what it gets, so each pair crosses the tunnel both ways. TCP: 2 MiB of a
/// pattern come back whole within 60 s (a tunnel that drops full-size
/// segments crawls at one per retransmission timeout and cannot). UDP: one
/// datagram at a time, from 1 byte to the largest the client's path MTU lets
/// through, each back intact before the next leaves: no queue can overflow,
/// so none may be lost. IPv4 datagrams go with DF clear: a narrower tunnel
/// further on fragments them. The rates seen go to stderr, never judged.
pub fn traffic_both_ways(lab: &str, pairs: &[(&str, &str, &str)]) {
    let ns = |node: &str| {
        if lab.is_empty() {
            node.to_string()
        } else {
            format!("{lab}-{node}")
        }
    };
    for &(client, server, to) in pairs {
        let (c, s) = (ns(client), ns(server));
        let ip: IpAddr = to.parse().expect("the target is an address");
        let took = tcp_echo(&c, &s, ip).unwrap_or_else(|e| panic!("TCP {c} -> {to} and back: {e}"));
        let sizes =
            udp_echo(&c, &s, ip).unwrap_or_else(|e| panic!("UDP {c} -> {to} and back: {e}"));
        eprintln!(
            "{c} -> {to}: TCP {TCP_BYTES} bytes each way in {:.2} s ({:.0} Mbit/s); UDP {sizes:?} bytes echoed",
            took.as_secs_f64(),
            TCP_BYTES as f64 * 8.0 / took.as_secs_f64() / 1e6
        );
    }
}

fn wildcard(to: IpAddr) -> SocketAddr {
    let any: IpAddr = if to.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(any, 0)
}

/// `len` bytes without a short period, so a shifted, lost or repeated
/// stretch shows; `seed` makes each datagram differ from the others.
fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            ((i + seed) as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(8) as u8
        })
        .collect()
}

/// The server echoes one connection; the client writes the pattern on
/// one thread and reads it back on this one. The time it took.
fn tcp_echo(client: &str, server: &str, to: IpAddr) -> Result<Duration, String> {
    let listener = in_ns(server, move || TcpListener::bind(wildcard(to)))
        .map_err(|e| format!("listening in {server}: {e}"))?;
    let dst = SocketAddr::new(to, listener.local_addr().unwrap().port());
    let t0 = Instant::now();
    let stream = in_ns(client, move || TcpStream::connect_timeout(&dst, BOUND))
        .map_err(|e| format!("connecting to {dst}: {e}"))?;
    listener.set_nonblocking(true).unwrap();
    let (mut conn, _) = poll(BOUND, || match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        r => Some(r),
    })
    .ok_or("the server never saw the connection")?
    .map_err(|e| format!("accepting: {e}"))?;
    conn.set_nonblocking(false).unwrap();
    for s in [&conn, &stream] {
        s.set_read_timeout(Some(BOUND)).unwrap();
        s.set_write_timeout(Some(BOUND)).unwrap();
    }
    std::thread::spawn(move || -> std::io::Result<()> {
        let mut buf = vec![0; 64 << 10];
        loop {
            match conn.read(&mut buf)? {
                0 => return conn.shutdown(Shutdown::Write),
                k => conn.write_all(&buf[..k])?,
            }
        }
    });
    let sent = pattern(0, TCP_BYTES);
    let mut writer = stream.try_clone().unwrap();
    let body = sent.clone();
    std::thread::spawn(move || {
        let _ = writer.write_all(&body);
        let _ = writer.shutdown(Shutdown::Write);
    });
    let mut back = Vec::with_capacity(TCP_BYTES);
    let mut buf = vec![0; 64 << 10];
    while t0.elapsed() < TCP_BOUND {
        match (&stream).read(&mut buf) {
            Ok(0) => break,
            Ok(k) => back.extend_from_slice(&buf[..k]),
            Err(e) => {
                let e = match e.kind() {
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                        format!("nothing for {BOUND:?}")
                    }
                    _ => e.to_string(),
                };
                return Err(format!(
                    "{} of {TCP_BYTES} bytes back, then {e}",
                    back.len()
                ));
            }
        }
    }
    if let Some(at) = back.iter().zip(&sent).position(|(a, b)| a != b) {
        return Err(format!("byte {at} came back changed"));
    }
    if back.len() != TCP_BYTES {
        return Err(format!(
            "{} of {TCP_BYTES} bytes back within {TCP_BOUND:?}",
            back.len()
        ));
    }
    Ok(t0.elapsed())
}

/// Datagrams of several sizes up to the client's path MTU, each echoed
/// before the next; the sizes.
fn udp_echo(client: &str, server: &str, to: IpAddr) -> Result<Vec<usize>, String> {
    let srv = in_ns(server, move || UdpSocket::bind(wildcard(to)))
        .map_err(|e| format!("binding in {server}: {e}"))?;
    let dst = SocketAddr::new(to, srv.local_addr().unwrap().port());
    let cli = in_ns(client, move || {
        let s = UdpSocket::bind(wildcard(to))?;
        s.connect(dst).map(|_| s)
    })
    .map_err(|e| format!("a socket toward {dst}: {e}"))?;
    let (level, headers) = if to.is_ipv4() {
        for s in [&srv, &cli] {
            setsockopt_int(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DONT,
            );
        }
        ((libc::IPPROTO_IP, libc::IP_MTU), 28)
    } else {
        ((libc::IPPROTO_IPV6, libc::IPV6_MTU), 48)
    };
    let largest = getsockopt_int(cli.as_raw_fd(), level.0, level.1) as usize - headers;
    let mut sizes: Vec<usize> = [1, 77, 512, 1001, largest - 1, largest]
        .into_iter()
        .filter(|&n| n <= largest)
        .collect();
    sizes.dedup();
    for s in [&srv, &cli] {
        s.set_read_timeout(Some(BOUND)).unwrap();
    }
    let mut buf = vec![0; 65536];
    for (i, &len) in sizes.iter().enumerate() {
        let sent = pattern(i, len);
        cli.send(&sent)
            .map_err(|e| format!("sending {len} bytes: {e}"))?;
        let (n, from) = srv
            .recv_from(&mut buf)
            .map_err(|e| format!("{len} bytes never arrived within {BOUND:?} ({e})"))?;
        if buf[..n] != sent[..] {
            return Err(format!("{len} bytes sent, {n} other bytes arrived"));
        }
        srv.send_to(&sent, from)
            .map_err(|e| format!("echoing {len} bytes: {e}"))?;
        let n = cli.recv(&mut buf).map_err(|e| {
            format!("the echo of {len} bytes never came back within {BOUND:?} ({e})")
        })?;
        if buf[..n] != sent[..] {
            return Err(format!("{len} bytes echoed, {n} other bytes came back"));
        }
    }
    Ok(sizes)
}
