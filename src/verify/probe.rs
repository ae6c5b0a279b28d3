//! Probes from inside a node's namespace: an ICMP echo (reach), the largest
//! echo that crosses with DF set and comes back (path MTU), a command.
//!
//! Path MTU is found the way RFC 4821 packetization-layer probing does it,
//! with ICMP echoes as the probes: each is sent with the Don't Fragment bit
//! (IPv4, `IP_PMTUDISC_PROBE`: DF set and the kernel's cached path MTU
//! ignored) or without fragmentation (IPv6, `IPV6_DONTFRAG` with
//! `IPV6_PMTUDISC_PROBE`); a size that gets its reply fits both ways, a size
//! that meets "fragmentation needed" / "packet too big" (or, from a link that
//! drops silently, nothing) does not. The search bisects between the two, and
//! jumps to the MTU an ICMP error names.

use crate::wire::icmp_echo::{Family as IcmpFamily, Kind, Packet, Repr};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What became of one echo.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Echo {
    /// The reply came back after this long.
    Reply(Duration),
    /// A router (or this node's own interface) said it is too big; the MTU it
    /// named, when it named one.
    TooBig(Option<u32>),
    /// A router said the destination is unreachable (ICMP type, code).
    Unreachable(IpAddr, u8, u8),
    /// Nothing within the wait.
    Silent,
    /// This node has no route to the destination (said by its own kernel).
    NoRoute,
}

/// A raw ICMP socket of one family in the calling thread's namespace.
pub struct Prober {
    sock: Socket,
    v4: bool,
    ident: u16,
    seq: u16,
}

// Linux's values (linux/in.h, linux/in6.h), which libc does not all export.
const IP_MTU_DISCOVER: i32 = 10;
const IP_PMTUDISC_PROBE: i32 = 3;
const IPV6_MTU_DISCOVER: i32 = 23;
const IPV6_PMTUDISC_PROBE: i32 = 3;
const IPV6_DONTFRAG: i32 = 62;

fn setsockopt(s: &Socket, level: i32, opt: i32, v: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd and a pointer to an int that outlives the call.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Prober {
    /// `v4`: IPv4 or IPv6. Probes leave with DF set (IPv6: never fragmented).
    pub fn new(v4: bool) -> io::Result<Prober> {
        let sock = if v4 {
            let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
            setsockopt(&s, libc::IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)?;
            s
        } else {
            let s = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?;
            setsockopt(
                &s,
                libc::IPPROTO_IPV6,
                IPV6_MTU_DISCOVER,
                IPV6_PMTUDISC_PROBE,
            )?;
            setsockopt(&s, libc::IPPROTO_IPV6, IPV6_DONTFRAG, 1)?;
            s
        };
        sock.set_nonblocking(true)?;
        // The thread's id: concurrent probes in one namespace do not mix.
        let ident = (nix::unistd::gettid().as_raw() & 0xffff) as u16;
        Ok(Prober {
            sock,
            v4,
            ident,
            seq: 0,
        })
    }

    /// One echo of `size` bytes of IP packet (header included) to `dst`,
    /// waiting `wait` for what comes back.
    pub fn echo(&mut self, dst: IpAddr, size: u32, wait: Duration) -> io::Result<Echo> {
        let ip_header = if self.v4 { 20 } else { 40 };
        let data_len = (size as usize).saturating_sub(ip_header + 8);
        self.seq = self.seq.wrapping_add(1);
        let repr = Repr {
            family: if self.v4 {
                IcmpFamily::V4
            } else {
                IcmpFamily::V6
            },
            kind: Kind::Request,
            ident: self.ident,
            seq: self.seq,
            data_len,
        };
        let payload = vec![0xa5u8; data_len];
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]), &payload);
        let started = Instant::now();
        match self
            .sock
            .send_to(&buf, &SockAddr::from(SocketAddr::new(dst, 0)))
        {
            Ok(_) => {}
            // Bigger than this node's own interface allows with DF.
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                return Ok(Echo::TooBig(None));
            }
            // No route: the kernel says so at once.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENETUNREACH | libc::EHOSTUNREACH)
                ) =>
            {
                return Ok(Echo::NoRoute);
            }
            Err(e) => return Err(e),
        }
        while started.elapsed() < wait {
            match self.recv()? {
                Some(e) => return Ok(e.with_time(started.elapsed())),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        Ok(Echo::Silent)
    }

    /// What arrived about our current echo, if anything yet.
    fn recv(&self) -> io::Result<Option<Echo>> {
        loop {
            let mut buf = [MaybeUninit::<u8>::uninit(); 65536];
            let (n, from) = match self.sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) => return Err(e),
            };
            // SAFETY: recv_from initialised the first n bytes.
            let bytes: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, n) };
            let Some(from) = from.as_socket().map(|s| s.ip()) else {
                continue;
            };
            // Raw IPv4 sockets deliver the IP header too (IHL words).
            let icmp = if self.v4 {
                match bytes.first() {
                    Some(b) => bytes.get(((b & 0x0f) as usize) * 4..).unwrap_or(&[]),
                    None => continue,
                }
            } else {
                bytes
            };
            if icmp.len() < 8 {
                continue;
            }
            let (ty, code) = (icmp[0], icmp[1]);
            let ours = |inner_echo: Option<&[u8]>| {
                inner_echo.is_some_and(|e| {
                    e.len() >= 8
                        && u16::from_be_bytes([e[4], e[5]]) == self.ident
                        && u16::from_be_bytes([e[6], e[7]]) == self.seq
                })
            };
            // An ICMP error quotes the packet that caused it after its 8 bytes.
            let quoted = &icmp[8..];
            let inner_echo = if self.v4 {
                quoted
                    .first()
                    .and_then(|b| quoted.get(((b & 0x0f) as usize) * 4..))
            } else {
                quoted.get(40..)
            };
            match (self.v4, ty) {
                (true, 0) | (false, 129) => {
                    let Ok(p) = Packet::new_checked(icmp) else {
                        continue;
                    };
                    let family = if self.v4 {
                        IcmpFamily::V4
                    } else {
                        IcmpFamily::V6
                    };
                    match Repr::parse(&p, family) {
                        Ok(r)
                            if r.kind == Kind::Reply
                                && r.ident == self.ident
                                && r.seq == self.seq =>
                        {
                            return Ok(Some(Echo::Reply(Duration::ZERO)));
                        }
                        _ => continue,
                    }
                }
                // Fragmentation needed (RFC 1191: next-hop MTU in bytes 6-7).
                (true, 3) if code == 4 && ours(inner_echo) => {
                    let mtu = u16::from_be_bytes([icmp[6], icmp[7]]) as u32;
                    return Ok(Some(Echo::TooBig((mtu > 0).then_some(mtu))));
                }
                (true, 3) if ours(inner_echo) => {
                    return Ok(Some(Echo::Unreachable(from, ty, code)));
                }
                // Packet Too Big (RFC 4443 3.2: MTU in bytes 4-7).
                (false, 2) if ours(inner_echo) => {
                    let mtu = u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]);
                    return Ok(Some(Echo::TooBig(Some(mtu))));
                }
                (false, 1) if ours(inner_echo) => {
                    return Ok(Some(Echo::Unreachable(from, ty, code)));
                }
                _ => continue,
            }
        }
    }
}

impl Echo {
    fn with_time(self, d: Duration) -> Echo {
        match self {
            Echo::Reply(_) => Echo::Reply(d),
            other => other,
        }
    }
}

/// Waits of the tries of a reach probe: the first packets toward a
/// neighbour wait for ARP / ND.
pub const REACH_TRIES: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_millis(700),
    Duration::from_millis(1500),
];

/// Echo until a reply, an ICMP error or the last try's silence.
pub fn reach(dst: IpAddr) -> io::Result<Echo> {
    let mut p = Prober::new(dst.is_ipv4())?;
    let size = if dst.is_ipv4() { 84 } else { 104 };
    let mut last = Echo::Silent;
    for wait in REACH_TRIES {
        last = p.echo(dst, size, wait)?;
        if last != Echo::Silent {
            break;
        }
    }
    Ok(last)
}

/// The outcome of a path MTU search.
#[derive(Debug, Clone, PartialEq)]
pub enum Mtu {
    /// The largest size that came back, and how many probes it took.
    Found { mtu: u32, probes: u32 },
    /// Not even the smallest probe came back.
    NoReply(Echo),
}

/// The largest IP packet, at most `ceiling` bytes, that reaches `dst` with
/// DF set and whose reply comes back.
pub fn path_mtu(dst: IpAddr, ceiling: u32) -> io::Result<Mtu> {
    let v4 = dst.is_ipv4();
    let mut p = Prober::new(v4)?;
    let floor = if v4 { 68 } else { 1280 };
    // The smallest first: it shows the path works at all, and settles ARP/ND.
    let mut first = Echo::Silent;
    for wait in REACH_TRIES {
        first = p.echo(dst, floor, wait)?;
        if first != Echo::Silent {
            break;
        }
    }
    if !matches!(first, Echo::Reply(_)) {
        return Ok(Mtu::NoReply(first));
    }
    let (mut good, mut bad) = (floor, ceiling.max(floor) + 1);
    let mut next = bad - 1;
    let mut probes = 1;
    while bad - good > 1 {
        probes += 1;
        // A silent drop may be one lost packet: a size is bad after two.
        let mut e = p.echo(dst, next, Duration::from_millis(400))?;
        if e == Echo::Silent {
            e = p.echo(dst, next, Duration::from_millis(800))?;
        }
        let hint = match e {
            Echo::Reply(_) => {
                good = next;
                None
            }
            Echo::TooBig(h) => {
                bad = next;
                h
            }
            _ => {
                bad = next;
                None
            }
        };
        next = match hint {
            Some(h) if h > good && h < bad => h,
            _ => good + (bad - good) / 2,
        };
    }
    Ok(Mtu::Found { mtu: good, probes })
}

/// Run a program in the namespace `ns` (entered by the child alone, so the
/// caller's thread stays where it is): its exit status (None: killed after
/// `timeout`) and a line of what it printed. Meant for short commands: its
/// output is read once it has ended.
pub fn command(ns: &str, run: &[String], timeout: Duration) -> io::Result<(Option<i32>, String)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let file = netns::namespace::open(ns)?;
    let fd = file.as_raw_fd();
    let mut c = std::process::Command::new(&run[0]);
    c.args(&run[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setns is async-signal-safe; `file` stays open until spawn returns.
    unsafe {
        c.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn()?;
    drop(file);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    use std::io::Read;
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let code = status.map(|s| s.code().unwrap_or(-1));
    let line = |t: &str, first: bool| {
        let mut lines = t.lines().map(str::trim).filter(|l| !l.is_empty());
        if first {
            lines.next()
        } else {
            lines.next_back()
        }
        .unwrap_or("")
        .to_string()
    };
    // What it said: its first line when it worked, its last complaint when not.
    let tail = if code == Some(0) {
        line(&out, true)
    } else if !err.trim().is_empty() {
        line(&err, false)
    } else {
        line(&out, false)
    };
    Ok((code, tail))
}

/// A packet socket on one interface (`AF_PACKET`, `SOCK_DGRAM`: each packet
/// from its network header on, as the wire carries it), made in the calling
/// thread's namespace and readable from any thread.
pub struct Capture {
    fd: std::os::fd::OwnedFd,
}

impl Capture {
    pub fn on(iface: &str) -> io::Result<Capture> {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(iface).map_err(io::Error::other)?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        let all = (libc::ETH_P_ALL as u16).to_be() as i32;
        // SAFETY: plain socket(2); the fd is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                all,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a new fd no one else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: zeroed sockaddr_ll is valid; the fields set are its own.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = all as u16;
        sll.sll_ifindex = index as i32;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid fd and a sockaddr_ll of its size.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Capture { fd })
    }

    /// The lengths of the packets that arrived for this host since the last
    /// call (outgoing ones left out).
    pub fn arrived(&self) -> Vec<usize> {
        use std::os::fd::AsRawFd;
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: zeroed sockaddr_ll is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // MSG_TRUNC: the packet's real length, whatever the buffer.
            // SAFETY: valid fd, buffer and address of the sizes given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_TRUNC,
                    &mut sll as *mut libc::sockaddr_ll as *mut libc::sockaddr,
                    &mut len,
                )
            };
            if n < 0 {
                return out;
            }
            if sll.sll_pkttype != libc::PACKET_OUTGOING {
                out.push(n as usize);
            }
        }
    }
}
