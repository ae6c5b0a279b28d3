//! The one ICMP echo prober: a raw, non-blocking ICMP (or ICMPv6) socket in
//! the calling thread's namespace that sends echo requests and reads what
//! comes back about them (a reply, "too big", "unreachable"). The reach
//! matrix (`tunbench check`) and the reach, path MTU and overhead assertions
//! all send and receive through it.

use crate::socket::{gso, icmp};
use crate::wire::icmp_echo::{Family, Kind, Packet, Repr};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};

/// A raw ICMP socket of one family.
pub struct EchoSocket {
    sock: Socket,
    family: Family,
}

/// Something that came back about one of the echoes sent from this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    /// Who sent it: the echoed address, or a router on the way.
    pub from: IpAddr,
    /// The echo it is about: its identifier and sequence number.
    pub ident: u16,
    pub seq: u16,
    pub answer: Answer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The echo reply.
    Reply,
    /// "Fragmentation needed" / "packet too big", with the MTU it names.
    TooBig(Option<u32>),
    /// Another "destination unreachable" (ICMP type, code).
    Unreachable(u8, u8),
}

/// An echo identifier of the calling thread: concurrent probes in one
/// namespace (or concurrent checks of one lab) do not take each other's replies.
pub fn thread_ident() -> u16 {
    (nix::unistd::gettid().as_raw() & 0xffff) as u16
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

impl EchoSocket {
    /// A non-blocking raw socket of `family` that sees every ICMP message of
    /// its namespace.
    pub fn open(family: Family) -> io::Result<EchoSocket> {
        let sock = match family {
            Family::V4 => Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?,
            Family::V6 => Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))?,
        };
        sock.set_nonblocking(true)?;
        Ok(EchoSocket { sock, family })
    }

    /// The socket for `addr`'s family.
    pub fn open_for(addr: IpAddr) -> io::Result<EchoSocket> {
        EchoSocket::open(family_of(addr))
    }

    /// Echoes leave with DF set and the kernel's cached path MTU ignored
    /// (IPv4, `IP_PMTUDISC_PROBE`), or are never fragmented (IPv6,
    /// `IPV6_DONTFRAG` with `IPV6_PMTUDISC_PROBE`).
    pub fn dont_fragment(self) -> io::Result<EchoSocket> {
        match self.family {
            Family::V4 => setsockopt(
                &self.sock,
                libc::IPPROTO_IP,
                IP_MTU_DISCOVER,
                IP_PMTUDISC_PROBE,
            )?,
            Family::V6 => {
                setsockopt(
                    &self.sock,
                    libc::IPPROTO_IPV6,
                    IPV6_MTU_DISCOVER,
                    IPV6_PMTUDISC_PROBE,
                )?;
                setsockopt(&self.sock, libc::IPPROTO_IPV6, IPV6_DONTFRAG, 1)?;
            }
        }
        Ok(self)
    }

    /// For many echoes in flight: only echo replies reach the socket (best
    /// effort: a node that a thousand others probe at once still keeps its
    /// own replies), and its buffers hold `buffer` bytes each way.
    pub fn replies_only(self, buffer: usize) -> EchoSocket {
        icmp::echo_replies_only(&self.sock, self.family == Family::V6);
        gso::set_buffers(&self.sock, buffer);
        self
    }

    /// One echo request to `dst` carrying `payload`. Errors are the kernel's
    /// at once: `WouldBlock` with the send buffer full, `EMSGSIZE` when DF
    /// forbids the size, `ENETUNREACH` without a route.
    pub fn send(&self, dst: IpAddr, ident: u16, seq: u16, payload: &[u8]) -> io::Result<usize> {
        let repr = Repr {
            family: self.family,
            kind: Kind::Request,
            ident,
            seq,
            data_len: payload.len(),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]), payload);
        self.sock
            .send_to(&buf, &SockAddr::from(SocketAddr::new(dst, 0)))
    }

    /// The next message about an echo, if one is waiting; other ICMP traffic
    /// is passed over.
    pub fn recv(&self) -> io::Result<Option<Heard>> {
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
            let message = match self.family {
                Family::V4 => match bytes.first() {
                    Some(b) => bytes.get(((b & 0x0f) as usize) * 4..).unwrap_or(&[]),
                    None => continue,
                },
                Family::V6 => bytes,
            };
            if let Some(heard) = parse(message, self.family, from) {
                return Ok(Some(heard));
            }
        }
    }
}

fn family_of(addr: IpAddr) -> Family {
    if addr.is_ipv4() {
        Family::V4
    } else {
        Family::V6
    }
}

/// An ICMP message read as news of an echo: a reply, or an error that quotes
/// an echo (after its own 8 bytes, the packet that caused it).
fn parse(icmp: &[u8], family: Family, from: IpAddr) -> Option<Heard> {
    if icmp.len() < 8 {
        return None;
    }
    let (ty, code) = (icmp[0], icmp[1]);
    let v4 = family == Family::V4;
    if (v4 && ty == 0) || (!v4 && ty == 129) {
        let r = Repr::parse(&Packet::new_checked(icmp).ok()?, family).ok()?;
        return (r.kind == Kind::Reply).then_some(Heard {
            from,
            ident: r.ident,
            seq: r.seq,
            answer: Answer::Reply,
        });
    }
    let quoted = &icmp[8..];
    let echo = if v4 {
        quoted
            .first()
            .and_then(|b| quoted.get(((b & 0x0f) as usize) * 4..))
    } else {
        quoted.get(40..)
    }
    .filter(|e| e.len() >= 8)?;
    let answer = match (v4, ty) {
        // Fragmentation needed (RFC 1191: next-hop MTU in bytes 6-7).
        (true, 3) if code == 4 => {
            let mtu = u16::from_be_bytes([icmp[6], icmp[7]]) as u32;
            Answer::TooBig((mtu > 0).then_some(mtu))
        }
        (true, 3) | (false, 1) => Answer::Unreachable(ty, code),
        // Packet Too Big (RFC 4443 3.2: MTU in bytes 4-7).
        (false, 2) => Answer::TooBig(Some(u32::from_be_bytes([
            icmp[4], icmp[5], icmp[6], icmp[7],
        ]))),
        _ => return None,
    };
    Some(Heard {
        from,
        ident: u16::from_be_bytes([echo[4], echo[5]]),
        seq: u16::from_be_bytes([echo[6], echo[7]]),
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(family: Family, kind: Kind, ident: u16, seq: u16) -> Vec<u8> {
        let repr = Repr {
            family,
            kind,
            ident,
            seq,
            data_len: 4,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]), b"abcd");
        buf
    }

    #[test]
    fn a_reply_names_its_echo() {
        let from: IpAddr = "198.18.0.2".parse().unwrap();
        let reply = echo(Family::V4, Kind::Reply, 7, 9);
        assert_eq!(
            parse(&reply, Family::V4, from),
            Some(Heard {
                from,
                ident: 7,
                seq: 9,
                answer: Answer::Reply
            })
        );
        let request = echo(Family::V4, Kind::Request, 7, 9);
        assert_eq!(parse(&request, Family::V4, from), None);
    }

    #[test]
    fn an_error_names_the_echo_it_quotes() {
        let from: IpAddr = "2001:db8::1".parse().unwrap();
        // Packet Too Big, MTU 1280, quoting an IPv6 header and our echo.
        let mut msg = vec![2, 0, 0, 0, 0, 0, 0x05, 0x00];
        msg.extend([0u8; 40]);
        msg.extend(echo(Family::V6, Kind::Request, 3, 4));
        let heard = parse(&msg, Family::V6, from).unwrap();
        assert_eq!((heard.ident, heard.seq), (3, 4));
        assert_eq!(heard.answer, Answer::TooBig(Some(1280)));
        // Fragmentation needed without a next-hop MTU, quoting a 20-byte header.
        let mut msg = vec![3, 4, 0, 0, 0, 0, 0, 0, 0x45];
        msg.extend([0u8; 19]);
        msg.extend(echo(Family::V4, Kind::Request, 5, 6));
        let heard = parse(&msg, Family::V4, from).unwrap();
        assert_eq!(heard.answer, Answer::TooBig(None));
        assert_eq!((heard.ident, heard.seq), (5, 6));
    }
}
