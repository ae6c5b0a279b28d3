//! Echoes from inside a node's namespace, one at a time: reach (does an echo
//! come back) and path MTU (the largest echo that crosses with DF set and
//! comes back).
//!
//! Path MTU is found the way RFC 4821 packetization-layer probing does it,
//! with ICMP echoes as the probes: a size that gets its reply fits both ways,
//! a size that meets "fragmentation needed" / "packet too big" (or, from a
//! link that drops silently, nothing) does not. The search bisects between
//! the two, and jumps to the MTU an ICMP error names.

use super::icmp::{Answer, EchoSocket, thread_ident};
use std::io;
use std::net::IpAddr;
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

/// Echoes of one family sent one at a time, with DF set (IPv6: never
/// fragmented), each waited for.
pub struct DfPinger {
    sock: EchoSocket,
    v4: bool,
    ident: u16,
    seq: u16,
}

impl DfPinger {
    /// `v4`: IPv4 or IPv6.
    pub fn new(v4: bool) -> io::Result<DfPinger> {
        let family = if v4 {
            crate::wire::icmp_echo::Family::V4
        } else {
            crate::wire::icmp_echo::Family::V6
        };
        Ok(DfPinger {
            sock: EchoSocket::open(family)?.dont_fragment()?,
            v4,
            ident: thread_ident(),
            seq: 0,
        })
    }

    /// One echo of `size` bytes of IP packet (header included) to `dst`,
    /// waiting `wait` for what comes back.
    pub fn echo(&mut self, dst: IpAddr, size: u32, wait: Duration) -> io::Result<Echo> {
        let ip_header = if self.v4 { 20 } else { 40 };
        let data_len = (size as usize).saturating_sub(ip_header + 8);
        self.seq = self.seq.wrapping_add(1);
        let started = Instant::now();
        match self
            .sock
            .send(dst, self.ident, self.seq, &vec![0xa5u8; data_len])
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
                Some(Echo::Reply(_)) => return Ok(Echo::Reply(started.elapsed())),
                Some(e) => return Ok(e),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        Ok(Echo::Silent)
    }

    /// What arrived about the current echo, if anything yet.
    fn recv(&self) -> io::Result<Option<Echo>> {
        while let Some(h) = self.sock.recv()? {
            if (h.ident, h.seq) != (self.ident, self.seq) {
                continue;
            }
            return Ok(Some(match h.answer {
                Answer::Reply => Echo::Reply(Duration::ZERO),
                Answer::TooBig(mtu) => Echo::TooBig(mtu),
                Answer::Unreachable(ty, code) => Echo::Unreachable(h.from, ty, code),
            }));
        }
        Ok(None)
    }

    /// Echoes of `size` bytes, one per wait of [`REACH_TRIES`], until one
    /// meets anything but silence.
    pub fn echo_until_heard(&mut self, dst: IpAddr, size: u32) -> io::Result<Echo> {
        self.echo_with_waits(dst, size, &REACH_TRIES)
    }

    /// Echoes of `size` bytes, one per wait of `waits`, until one meets
    /// anything but silence.
    pub fn echo_with_waits(
        &mut self,
        dst: IpAddr,
        size: u32,
        waits: &[Duration],
    ) -> io::Result<Echo> {
        let mut last = Echo::Silent;
        for &wait in waits {
            last = self.echo(dst, size, wait)?;
            if last != Echo::Silent {
                break;
            }
        }
        Ok(last)
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
    let size = if dst.is_ipv4() { 84 } else { 104 };
    DfPinger::new(dst.is_ipv4())?.echo_until_heard(dst, size)
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
    let mut p = DfPinger::new(v4)?;
    let floor = if v4 { 68 } else { 1280 };
    // The smallest first: it shows the path works at all, and settles ARP/ND.
    let first = p.echo_until_heard(dst, floor)?;
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
