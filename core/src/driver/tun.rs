//! The datapath's side of a TUN device: attach queues to the persistent device
//! the lab made (`netns::tun::create_persistent`), in the calling thread's
//! namespace, and turn its offloads on.
//!
//! Every read and write on a queue starts with the 10-byte virtio-net header
//! (`codec::vnet_header::VirtioNetHdr`). With offloads on the kernel hands over TCP
//! super-packets of up to 64 KiB (TSO4/TSO6), UDP ones where it can (USO4/USO6,
//! Linux 6.2), and packets whose checksum is left to finish (CSUM); it also
//! accepts such packets when written. With offloads off every packet is plain and
//! complete, and the header is all zeros.
//!
//! The tun-rs crate does the same on Linux (virtio-net headers, GSO split, a
//! GRO table, multi-queue); `tun_rs_backend` runs it in place of this module
//! and `offload` when TUNBENCH_TUN=tun-rs (docs/benchmarks/tun-rs.md compares the two).

use netns::tun::{exists, flags, open_queue};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::driver::offload::VNET_HDR_LEN;

/// What the device was told it may hand over (TUNSETOFFLOAD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Offloads {
    /// Packets with a partial checksum (TUN_F_CSUM).
    pub csum: bool,
    /// TCP super-packets (TUN_F_TSO4 | TUN_F_TSO6).
    pub tso: bool,
    /// UDP super-packets (TUN_F_USO4 | TUN_F_USO6).
    pub uso: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TunError {
    #[error(
        "no device {0} in this namespace: the lab's `up` makes the TUN (netns::tun::create_persistent) before the datapath starts"
    )]
    Missing(String),
    #[error("{0}")]
    Attach(io::Error),
    #[error("{what} on TUN device {name}: {source}")]
    Ioctl {
        what: &'static str,
        name: String,
        source: io::Error,
    },
}

/// The queues of one TUN device, open for reading and writing.
#[derive(Debug)]
pub struct Tun {
    name: String,
    queues: Vec<OwnedFd>,
    offloads: Offloads,
}

fn ioctl_int(fd: &OwnedFd, req: libc::Ioctl, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: these TUN ioctls take their argument by value, or (TUNSETVNETHDRSZ)
    // read one int through the pointer passed; see `set_vnet_hdr_size`.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req, arg) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn set_vnet_hdr_size(fd: BorrowedFd<'_>) -> io::Result<()> {
    let size: libc::c_int = VNET_HDR_LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer.
    if unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETVNETHDRSZ,
            &size as *const libc::c_int,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor with integer arguments.
    unsafe {
        let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

const TCP_OFFLOADS: libc::c_uint = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
const UDP_OFFLOADS: libc::c_uint = libc::TUN_F_USO4 | libc::TUN_F_USO6;

/// The TUN the lab made, or `Missing`: both backends attach, never create.
pub(super) fn must_exist(name: &str) -> Result<(), TunError> {
    if exists(name) {
        Ok(())
    } else {
        Err(TunError::Missing(name.to_string()))
    }
}

/// What a failed step of attaching to TUN `name` returns.
pub(super) fn ioctl_error(name: &str, what: &'static str) -> impl FnOnce(io::Error) -> TunError {
    let name = name.to_string();
    move |source| TunError::Ioctl { what, name, source }
}

impl Tun {
    /// Attaches `queues` queues (at least one) to the existing TUN `name` in the
    /// calling thread's namespace, nonblocking, with 10-byte virtio headers, and
    /// offloads on (TSO and checksum; USO too where the kernel has it) or off.
    pub fn attach(name: &str, queues: usize, offloads: bool, tap: bool) -> Result<Tun, TunError> {
        must_exist(name)?;
        let err = |what| ioctl_error(name, what);
        let mut fds = Vec::with_capacity(queues.max(1));
        for _ in 0..queues.max(1) {
            let f = open_queue(name, flags(tap)).map_err(TunError::Attach)?;
            let fd = OwnedFd::from(f);
            set_vnet_hdr_size(fd.as_fd())
                .map_err(err("setting the virtio header size (TUNSETVNETHDRSZ)"))?;
            set_nonblocking(&fd).map_err(err("making the queue nonblocking"))?;
            fds.push(fd);
        }
        // The offload flags are the device's, shared by its queues.
        let first = &fds[0];
        let got = if !offloads {
            ioctl_int(first, libc::TUNSETOFFLOAD, 0)
                .map_err(err("turning offloads off (TUNSETOFFLOAD)"))?;
            Offloads::default()
        } else if ioctl_int(
            first,
            libc::TUNSETOFFLOAD,
            (TCP_OFFLOADS | UDP_OFFLOADS) as _,
        )
        .is_ok()
        {
            Offloads {
                csum: true,
                tso: true,
                uso: true,
            }
        } else {
            // Kernels before 6.2 refuse USO (EINVAL): TCP offloads alone.
            ioctl_int(first, libc::TUNSETOFFLOAD, TCP_OFFLOADS as _)
                .map_err(err("turning TSO and checksum offload on (TUNSETOFFLOAD)"))?;
            Offloads {
                csum: true,
                tso: true,
                uso: false,
            }
        };
        Ok(Tun {
            name: name.to_string(),
            queues: fds,
            offloads: got,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn offloads(&self) -> Offloads {
        self.offloads
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Queue `i`'s descriptor: reads give a virtio header and a packet, writes
    /// take the same.
    pub fn queue(&self, i: usize) -> Option<BorrowedFd<'_>> {
        self.queues.get(i).map(|q| q.as_fd())
    }

    /// The queue descriptors, for threads that own one each.
    pub fn into_queues(self) -> Vec<OwnedFd> {
        self.queues
    }
}

/// One read from a TUN queue into `buf`: Ok(None) when nothing is queued.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: reads at most buf.len() bytes into buf.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// One write of the gathered `iov` (a virtio header, then the packet's parts) to
/// a TUN queue. The device takes a whole packet or nothing.
pub fn write_iov(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> io::Result<usize> {
    loop {
        // SAFETY: the iovecs point at live buffers of the stated lengths (the
        // caller's borrow), and there are iov.len() of them.
        let n = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}
