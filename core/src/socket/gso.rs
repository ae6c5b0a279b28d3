//! UDP segmentation offload on the sending side (GSO, `UDP_SEGMENT`) and receive
//! offload on the receiving side (GRO, `UDP_GRO`), with batched syscalls (udp(7),
//! Linux 4.18 / 5.0; the approach of wireguard-go's conn/ package).
//!
//! Sending: the datagrams of a batch lie back to back in one buffer, each `len` bytes
//! with its own iperf3 header. With GSO on, one message carries up to 64 of them (the
//! kernel's UDP_MAX_SEGMENTS, and at most a maximum-size UDP payload) and the kernel
//! cuts it into datagrams of `len` bytes; several such messages go out with one
//! sendmmsg. The wire sees exactly the datagrams a plain send of each would give.
//! A path that cannot segment (no checksum offload: EIO; a datagram plus headers
//! bigger than the MTU: EINVAL) turns GSO off for the stream, and the batch goes out
//! again one datagram per message.
//!
//! Receiving: with GRO on, the kernel may hand over several datagrams of one flow as
//! one buffer and says in a `UDP_GRO` control message how long each is (the last may
//! be shorter). Every buffer is therefore as large as a UDP payload can be, so nothing
//! is ever truncated; `Datagrams` splits them again.

use socket2::Socket;
use std::io;
use std::os::fd::AsRawFd;

/// The kernel's UDP_MAX_SEGMENTS: datagrams one GSO send may carry.
pub const MAX_SEGMENTS: usize = 64;
/// Largest UDP payload over IPv4 (65535 - 20 - 8); over IPv6 it is 65527, and the
/// smaller figure serves both.
pub const MAX_UDP_PAYLOAD: usize = 65507;
/// Socket buffer per UDP stream, each way: 32 MiB holds about 30 ms at 10 Gbit/s, so
/// a receiver that loses the CPU for a moment on a busy machine does not lose data.
pub const UDP_SOCKET_BUFFER: usize = 32 << 20;
/// Messages per sendmmsg / recvmmsg call at most.
pub const MAX_MESSAGES: usize = 64;
/// Messages per sendmmsg call with GSO on: 8 x 45 datagrams of 1448 bytes is about
/// 0.5 MB per syscall, well within the socket buffers.
const GSO_MESSAGES: usize = 8;
/// Messages per recvmmsg call with GRO on; each has a 64 KiB buffer.
const GRO_MESSAGES: usize = 16;
/// A receive buffer that holds the largest coalesced datagram train.
const GRO_BUFFER: usize = 65536;

pub(crate) fn setsockopt_int(
    sock: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> bool {
    // SAFETY: passes a pointer to one int and its size.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Socket buffers of `bytes` each way: beyond net.core.{r,w}mem_max when the process
/// may (CAP_NET_ADMIN, SO_*BUFFORCE), else up to that limit. At several Gbit/s the
/// kernel's default holds a millisecond or less, and every burst beyond it is loss.
pub fn set_buffers(sock: &Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if !setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v) {
        let _ = sock.set_recv_buffer_size(bytes);
    }
    if !setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v) {
        let _ = sock.set_send_buffer_size(bytes);
    }
}

/// Turns GRO on for a UDP socket; false where the kernel lacks it.
pub fn enable_gro(sock: &Socket) -> bool {
    setsockopt_int(sock, libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// Datagrams of `len` bytes one GSO message can carry (1 means GSO is no use).
pub fn segments_per_message(len: usize) -> usize {
    if len == 0 {
        return 1;
    }
    (MAX_UDP_PAYLOAD / len).clamp(1, MAX_SEGMENTS)
}

fn gso_failed(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO) | Some(libc::EINVAL) | Some(libc::EMSGSIZE) | Some(libc::ENOPROTOOPT)
    )
}

/// A sending stream's reusable batch: datagram `i` is bytes `i*len .. (i+1)*len` of
/// one buffer, filled once with filler; the caller writes each header.
pub struct SendBatch {
    buf: Vec<u8>,
    len: usize,
    /// Datagrams per message: the GSO segment count, or 1 without GSO.
    per_message: usize,
    messages: usize,
    gso: bool,
}

impl SendBatch {
    /// A batch for datagrams of `len` bytes, with GSO when `try_gso` and the socket
    /// takes UDP_SEGMENT. `fill` gives each datagram's initial bytes.
    pub fn new(sock: &Socket, len: usize, try_gso: bool, fill: &[u8]) -> SendBatch {
        let per = segments_per_message(len);
        let gso = try_gso
            && per > 1
            && len <= u16::MAX as usize
            && setsockopt_int(sock, libc::SOL_UDP, libc::UDP_SEGMENT, len as libc::c_int);
        let (per_message, messages) = if gso {
            (per, GSO_MESSAGES)
        } else {
            (1, MAX_MESSAGES)
        };
        let total = (per_message * messages).max(MAX_MESSAGES);
        let mut buf = vec![0u8; total * len];
        if len > 0 {
            for d in buf.chunks_mut(len) {
                let n = d.len().min(fill.len());
                d[..n].copy_from_slice(&fill[..n]);
            }
        }
        SendBatch {
            buf,
            len,
            per_message,
            messages,
            gso,
        }
    }

    /// Whether the kernel segments our messages.
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Datagrams one `send` may carry.
    pub fn capacity(&self) -> usize {
        self.per_message * self.messages
    }

    /// Datagram `i` of the batch, `len` bytes.
    pub fn datagram_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.buf[i * self.len..(i + 1) * self.len]
    }

    /// Datagrams `0..n` of the batch, in order.
    pub fn datagrams_mut(&mut self, n: usize) -> std::slice::ChunksExactMut<'_, u8> {
        self.buf[..n * self.len].chunks_exact_mut(self.len)
    }

    /// Sends datagrams `0..n` (n <= capacity) and says how many went out; they go in
    /// order, so those are the first ones. A path that refuses GSO turns it off and
    /// the datagrams go again without it.
    pub fn send(&mut self, sock: &Socket, n: usize) -> io::Result<usize> {
        let n = n.min(self.capacity());
        match self.send_messages(sock, n) {
            Err(e) if self.gso && gso_failed(&e) => {
                self.gso = false;
                let _ = setsockopt_int(sock, libc::SOL_UDP, libc::UDP_SEGMENT, 0);
                self.per_message = 1;
                self.messages = MAX_MESSAGES;
                self.send_messages(sock, n.min(self.capacity()))
            }
            r => r,
        }
    }

    fn send_messages(&mut self, sock: &Socket, n: usize) -> io::Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        let per = self.per_message;
        let count = n.div_ceil(per);
        // SAFETY: zeroed iovec and mmsghdr are valid (null pointers, no name or control).
        let mut iov: [libc::iovec; MAX_MESSAGES] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; MAX_MESSAGES] = unsafe { std::mem::zeroed() };
        let base = self.buf.as_mut_ptr();
        for m in 0..count {
            let first = m * per;
            let dgrams = per.min(n - first);
            iov[m] = libc::iovec {
                // SAFETY: first + dgrams <= n <= capacity datagrams fit in buf.
                iov_base: unsafe { base.add(first * self.len) } as *mut libc::c_void,
                iov_len: dgrams * self.len,
            };
            msgs[m].msg_hdr.msg_iov = &mut iov[m];
            msgs[m].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs, iov and buf outlive the call; count <= MAX_MESSAGES.
        let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), count as u32, 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let sent_msgs = r as usize;
        // Every message but the last is full.
        Ok(if sent_msgs == count {
            n
        } else {
            sent_msgs * per
        })
    }
}

/// Control-message space per received message: one cmsghdr and an int, with room.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 64]);

/// A receiving stream's reusable batch of buffers.
pub struct RecvBatch {
    buf: Vec<u8>,
    cap: usize,
    messages: usize,
    /// Per message received: bytes, and the GRO segment size (0: one datagram).
    got: Vec<(usize, usize)>,
    control: Vec<Control>,
    gro: bool,
}

impl RecvBatch {
    /// Buffers for datagrams of up to `max_datagram` bytes; with `gro`, buffers that
    /// take a whole coalesced train.
    pub fn new(max_datagram: usize, gro: bool) -> RecvBatch {
        let (cap, messages) = if gro {
            (GRO_BUFFER.max(max_datagram), GRO_MESSAGES)
        } else {
            (max_datagram, MAX_MESSAGES)
        };
        RecvBatch {
            buf: vec![0u8; cap * messages],
            cap,
            messages,
            got: Vec::with_capacity(messages),
            control: vec![Control([0; 64]); messages],
            gro,
        }
    }

    /// One recvmmsg: waits for the first message (bounded by the socket's receive
    /// timeout), then takes what else is queued. Returns the number of messages.
    pub fn recv(&mut self, sock: &Socket) -> io::Result<usize> {
        // SAFETY: zeroed iovec and mmsghdr are valid.
        let mut iov: [libc::iovec; MAX_MESSAGES] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; MAX_MESSAGES] = unsafe { std::mem::zeroed() };
        let base = self.buf.as_mut_ptr();
        for m in 0..self.messages {
            iov[m] = libc::iovec {
                // SAFETY: m < messages, and buf holds messages * cap bytes.
                iov_base: unsafe { base.add(m * self.cap) } as *mut libc::c_void,
                iov_len: self.cap,
            };
            msgs[m].msg_hdr.msg_iov = &mut iov[m];
            msgs[m].msg_hdr.msg_iovlen = 1;
            if self.gro {
                msgs[m].msg_hdr.msg_control = self.control[m].0.as_mut_ptr() as *mut libc::c_void;
                msgs[m].msg_hdr.msg_controllen = std::mem::size_of::<Control>() as _;
            }
        }
        // MSG_WAITFORONE: block for the first message only.
        // SAFETY: msgs, iov, buf and control outlive the call.
        let r = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                self.messages as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.got.clear();
        for m in &msgs[..r as usize] {
            let n = (m.msg_len as usize).min(self.cap);
            let seg = if self.gro {
                gro_segment_size(&m.msg_hdr)
            } else {
                0
            };
            self.got.push((n, seg));
        }
        Ok(self.got.len())
    }

    /// The datagrams of the last `recv`, coalesced ones split again, in order.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.got.iter().enumerate().flat_map(move |(m, &(n, seg))| {
            let data = &self.buf[m * self.cap..m * self.cap + n];
            split(data, seg)
        })
    }
}

/// A coalesced buffer cut into datagrams of `seg` bytes (the last may be shorter);
/// `seg` 0 means the buffer is one datagram. An empty buffer gives nothing.
pub fn split(data: &[u8], seg: usize) -> std::slice::Chunks<'_, u8> {
    let step = if seg == 0 { data.len().max(1) } else { seg };
    data.chunks(step)
}

/// The segment size from a received message's UDP_GRO control message, 0 if none.
fn gro_segment_size(h: &libc::msghdr) -> usize {
    if h.msg_control.is_null() || h.msg_controllen == 0 {
        return 0;
    }
    // SAFETY: the kernel filled msg_control up to msg_controllen; the CMSG_* helpers
    // stay within that length, and the data is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            let hdr = &*c;
            if hdr.cmsg_level == libc::SOL_UDP && hdr.cmsg_type == libc::UDP_GRO {
                let data_len = hdr.cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let p = libc::CMSG_DATA(c);
                return if data_len >= 4 {
                    (p as *const i32).read_unaligned().max(0) as usize
                } else if data_len >= 2 {
                    (p as *const u16).read_unaligned() as usize
                } else {
                    0
                };
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, SockAddr, Type};
    use std::net::SocketAddr;
    use std::time::Duration;

    #[test]
    fn split_cuts_at_the_segment_size() {
        let data: Vec<u8> = (0..10).collect();
        let parts: Vec<&[u8]> = split(&data, 4).collect();
        assert_eq!(parts, vec![&[0, 1, 2, 3][..], &[4, 5, 6, 7], &[8, 9]]);
        assert_eq!(split(&data, 0).count(), 1);
        assert_eq!(split(&data, 10).count(), 1);
        assert_eq!(split(&data, 100).count(), 1);
        assert_eq!(split(&[], 0).count(), 0);
        assert_eq!(split(&[], 4).count(), 0);
    }

    #[test]
    fn segments_fit_one_udp_payload() {
        assert_eq!(segments_per_message(1448), 45);
        assert_eq!(segments_per_message(1000), 64);
        assert_eq!(segments_per_message(65507), 1);
        assert_eq!(segments_per_message(0), 1);
        assert!(segments_per_message(1448) * 1448 <= MAX_UDP_PAYLOAD);
    }

    /// How long one read waits for the next datagram: only a bound, since a
    /// datagram on loopback is either there at once or lost.
    const READ_BOUND: Duration = Duration::from_secs(10);

    fn pair() -> (Socket, Socket) {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let rx = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        rx.bind(&SockAddr::from(any)).unwrap();
        rx.set_read_timeout(Some(READ_BOUND)).unwrap();
        set_buffers(&rx, 4 << 20);
        let tx = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        tx.connect(&rx.local_addr().unwrap()).unwrap();
        (tx, rx)
    }

    /// Datagrams the kernel dropped at `sock` (its receive buffer full), from
    /// SO_MEMINFO.
    fn socket_drops(sock: &Socket) -> u32 {
        const SK_MEMINFO_DROPS: usize = 8;
        let mut info = [0u32; 9];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: a buffer of `len` bytes and its length, as getsockopt wants.
        let r = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(r, 0, "SO_MEMINFO: {}", io::Error::last_os_error());
        info[SK_MEMINFO_DROPS]
    }

    /// Reads from `rx` until `got` holds `n` datagrams, failing with what is
    /// missing (and whether the socket dropped any) when one does not come.
    fn drain(rx: &Socket, r: &mut RecvBatch, got: &mut Vec<Vec<u8>>, n: usize) {
        while got.len() < n {
            if let Err(e) = r.recv(rx) {
                panic!(
                    "{} of {n} datagrams arrived; the next did not within {READ_BOUND:?} ({e}); \
                     the receiving socket dropped {}",
                    got.len(),
                    socket_drops(rx)
                );
            }
            got.extend(r.datagrams().map(|d| d.to_vec()));
        }
    }

    /// Sends `n` numbered datagrams of `len` bytes, one batch at a time, each
    /// read back before the next is sent (so no more than a batch waits in the
    /// kernel), and returns what arrived, in order.
    fn roundtrip(len: usize, n: usize, gso: bool, gro: bool) -> (bool, Vec<Vec<u8>>) {
        let (tx, rx) = pair();
        let gro = gro && enable_gro(&rx);
        let mut b = SendBatch::new(&tx, len, gso, &vec![0xab; len]);
        let used_gso = b.gso();
        let mut r = RecvBatch::new(len.max(2048), gro);
        let mut got = Vec::new();
        while got.len() < n {
            let k = b.capacity().min(n - got.len());
            for i in 0..k {
                b.datagram_mut(i)[..4].copy_from_slice(&((got.len() + i) as u32).to_be_bytes());
            }
            let want = got.len() + b.send(&tx, k).unwrap();
            drain(&rx, &mut r, &mut got, want);
        }
        assert_eq!(
            socket_drops(&rx),
            0,
            "the receiving socket dropped datagrams"
        );
        (used_gso, got)
    }

    fn check(got: &[Vec<u8>], len: usize, n: usize) {
        assert_eq!(got.len(), n, "datagrams arrived");
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), len, "datagram {i}");
            assert_eq!(&d[..4], &(i as u32).to_be_bytes(), "datagram {i}");
            assert!(d[4..].iter().all(|&x| x == 0xab), "datagram {i} filler");
        }
    }

    #[test]
    fn gso_to_a_plain_receiver_gives_single_datagrams() {
        let (used, got) = roundtrip(1448, 500, true, false);
        // Loopback offers GSO on any kernel since 4.18 (this one is 6.x).
        assert!(used);
        check(&got, 1448, 500);
    }

    #[test]
    fn gso_to_a_gro_receiver_is_split_back() {
        let (_, got) = roundtrip(1448, 777, true, true);
        check(&got, 1448, 777);
    }

    #[test]
    fn plain_to_a_gro_receiver() {
        let (used, got) = roundtrip(100, 300, false, true);
        assert!(!used);
        check(&got, 100, 300);
    }

    #[test]
    fn a_path_that_refuses_gso_falls_back_to_plain_sends() {
        // Without UDP checksums the kernel refuses to segment (EINVAL), as a path
        // without checksum offload (EIO) or a segment over the MTU (EINVAL) would:
        // the batch goes out again datagram by datagram and nothing is lost.
        let (tx, rx) = pair();
        assert!(setsockopt_int(&tx, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1));
        let mut b = SendBatch::new(&tx, 1448, true, &[0xab; 1448]);
        let k = b.capacity().min(100);
        for i in 0..k {
            b.datagram_mut(i)[..4].copy_from_slice(&(i as u32).to_be_bytes());
        }
        let sent = b.send(&tx, k).unwrap();
        assert!(!b.gso());
        assert!(sent >= 1);
        let mut r = RecvBatch::new(2048, enable_gro(&rx));
        let mut got = Vec::new();
        drain(&rx, &mut r, &mut got, sent);
        check(&got, 1448, sent);
    }
}
