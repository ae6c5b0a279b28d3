//! Persistent TUN devices (Documentation/networking/tuntap.rst), made in the
//! namespace of the calling thread.
//!
//! A lab's `up` makes the device so that routes can point at it before the
//! userspace datapath starts; the datapath later attaches its queues with the
//! same flags (`tunbench::driver::tun`). The device lives until it is made
//! non-persistent or its namespace goes away.
//!
//! Flags, which every later attach must repeat (the kernel refuses a queue whose
//! IFF_MULTI_QUEUE differs, and IFF_VNET_HDR is a per-device flag that the last
//! attach sets for all queues):
//! - IFF_TUN: layer 3, one IP packet per read and write;
//! - IFF_NO_PI: no 4-byte packet-information prefix;
//! - IFF_VNET_HDR: a 10-byte `struct virtio_net_hdr` before every packet, which
//!   carries TSO/checksum offload metadata;
//! - IFF_MULTI_QUEUE: one file descriptor per queue, one datapath thread each.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

/// The clone device.
pub const CLONE_DEVICE: &str = "/dev/net/tun";

/// The flags every tunbench TUN is made and attached with.
pub const FLAGS: libc::c_short =
    (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_MULTI_QUEUE) as libc::c_short;

/// The same for a TAP (layer 2: one Ethernet frame per read and write), which a
/// link's relay uses.
pub const TAP_FLAGS: libc::c_short =
    (libc::IFF_TAP | libc::IFF_NO_PI | libc::IFF_VNET_HDR | libc::IFF_MULTI_QUEUE) as libc::c_short;

/// The flags of a TUN (`tap` false) or a TAP.
pub fn flags(tap: bool) -> libc::c_short {
    if tap { TAP_FLAGS } else { FLAGS }
}

/// `struct ifreq` as TUNSETIFF reads it: the name, then the flags (a short) at
/// the start of the 24-byte union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

fn ifreq(name: &str, flags: libc::c_short) -> io::Result<IfReq> {
    // IFNAMSIZ counts the terminating NUL.
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', '\0', ' ']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "\"{name}\" is not a valid interface name (1 to {} bytes, no '/', space or NUL)",
                libc::IFNAMSIZ - 1
            ),
        ));
    }
    let mut r = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags,
        _pad: [0; 22],
    };
    r.name[..name.len()].copy_from_slice(name.as_bytes());
    Ok(r)
}

fn context(what: String) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Opens the clone device and binds the descriptor to TUN `name` with `flags`
/// (creating the device if it does not exist). The descriptor is a queue of the
/// device until it is closed.
/// /dev/net/tun, with the tun module loaded first where the file is not there
/// (a system without udev's static nodes makes it only with the module).
fn open_clone_device() -> io::Result<File> {
    let open = || OpenOptions::new().read(true).write(true).open(CLONE_DEVICE);
    match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => match crate::module::load("tun") {
            Ok(()) => open(),
            Err(why) => Err(io::Error::new(
                e.kind(),
                format!("{e}, and loading the tun module failed: {why}"),
            )),
        },
        other => other,
    }
}

pub fn open_queue(name: &str, flags: libc::c_short) -> io::Result<File> {
    let mut req = ifreq(name, flags)?;
    let f = open_clone_device().map_err(context(format!(
        "opening {CLONE_DEVICE} for TUN device {name}"
    )))?;
    // SAFETY: TUNSETIFF reads and writes one struct ifreq, which `req` is (40 bytes).
    let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut IfReq) };
    if r < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => {
                " (a device of that name exists with other flags, or is not a TUN)"
            }
            Some(libc::EBUSY) => " (the device exists and is not a multi-queue TUN)",
            Some(libc::EPERM) => " (needs CAP_NET_ADMIN)",
            _ => "",
        };
        return Err(io::Error::new(
            e.kind(),
            format!("attaching to TUN device {name}: {e}{hint}"),
        ));
    }
    Ok(f)
}

fn set_persist(f: &File, name: &str, on: bool) -> io::Result<()> {
    // SAFETY: TUNSETPERSIST takes its argument by value.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::TUNSETPERSIST, on as libc::c_ulong) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "making TUN device {name} {}persistent: {e}",
                if on { "" } else { "non-" }
            ),
        ));
    }
    Ok(())
}

/// Creates persistent TUN device `name` in the calling thread's namespace, with
/// [`FLAGS`]. An existing device of that name with the same flags is taken as
/// made (TUNSETIFF attaches to it), so calling this twice is harmless.
pub fn create_persistent(name: &str) -> io::Result<()> {
    create(name, false)
}

/// Creates persistent TUN (or, with `tap`, TAP) device `name` in the calling
/// thread's namespace.
pub fn create(name: &str, tap: bool) -> io::Result<()> {
    create_with(name, flags(tap))
}

/// A TUN for programs that attach one plain queue (wireguard-go).
pub const SINGLE_QUEUE_FLAGS: libc::c_short = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;

/// Creates a persistent device with these flags.
pub fn create_with(name: &str, flags: libc::c_short) -> io::Result<()> {
    let f = open_queue(name, flags)?;
    set_persist(&f, name, true)
    // Closing `f` detaches the queue; the device stays.
}

/// Removes persistent TUN device `name` from the calling thread's namespace:
/// attach, clear the persist flag, close, and the kernel frees the device once no
/// queue is attached. Ok(false) when there is no such device.
pub fn delete_persistent(name: &str) -> io::Result<bool> {
    if !exists(name) {
        return Ok(false);
    }
    let f = open_queue(name, FLAGS)?;
    set_persist(&f, name, false)?;
    Ok(true)
}

/// Whether a network device `name` exists in the calling thread's namespace.
pub fn exists(name: &str) -> bool {
    // /sys/class/net shows the namespace of the process that mounted /sys, not the
    // thread's; if_nametoindex asks the kernel in the thread's namespace.
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: a NUL-terminated string.
    unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<IfReq>(), 40);
        let r = ifreq("tun0", FLAGS).unwrap();
        assert_eq!(&r.name[..5], b"tun0\0");
        assert_eq!(r.flags as i32, 0x0001 | 0x1000 | 0x4000 | 0x0100);
    }

    #[test]
    fn bad_names_are_refused_before_any_syscall() {
        for bad in ["", "sixteen-bytes-xx", "a/b", "a b"] {
            let e = ifreq(bad, FLAGS).err().expect(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
            assert!(e.to_string().contains("interface name"), "{e}");
        }
        assert!(ifreq("fifteen-bytes-x", FLAGS).is_ok());
    }
}
