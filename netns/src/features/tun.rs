//! TUN as tunbench's userspace datapaths use it: a multi-queue device with
//! virtio-net headers (`crate::tun::FLAGS`), TSO and checksum offload on, and
//! UDP segmentation offload where the kernel has it. The probe's device is not
//! persistent: it goes when its descriptor closes, in a namespace that goes too.

use super::Found;
use super::sandbox::in_throwaway_namespace;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// The size of `struct virtio_net_hdr`, which every read and write carries.
const VNET_HDR_LEN: libc::c_int = 10;
const TCP_OFFLOADS: libc::c_uint = libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6;
const UDP_OFFLOADS: libc::c_uint = libc::TUN_F_USO4 | libc::TUN_F_USO6;

/// A TUN with the datapath's flags, its header size and TCP offloads.
pub(super) fn probe_tun() -> Found {
    in_throwaway_namespace(|| match datapath_tun() {
        Ok(_) => Found::Present,
        Err(f) => f,
    })
}

/// The same TUN, asked for UDP offloads too.
pub(super) fn probe_uso() -> Found {
    in_throwaway_namespace(|| {
        let tun = match datapath_tun() {
            Ok(t) => t,
            Err(f) => {
                return Found::Unknown(format!("no TUN to try it on: {}", reason(&f)));
            }
        };
        match set_offload(&tun, TCP_OFFLOADS | UDP_OFFLOADS) {
            Ok(()) => Found::Present,
            Err(e) => refused("TUNSETOFFLOAD with TUN_F_USO4 | TUN_F_USO6", e),
        }
    })
}

fn reason(f: &Found) -> &str {
    match f {
        Found::Present => "present",
        Found::Absent(why) | Found::Unknown(why) => why,
    }
}

/// What the datapath does before it moves a packet: attach, header size, TSO.
fn datapath_tun() -> Result<File, Found> {
    let tun = crate::tun::open_queue("probetun", crate::tun::FLAGS).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENODEV | libc::ENXIO | libc::EINVAL) => {
                Found::Absent(e.to_string())
            }
            _ => Found::Unknown(e.to_string()),
        }
    })?;
    // SAFETY: TUNSETVNETHDRSZ reads one int through the pointer.
    let r = unsafe {
        libc::ioctl(
            tun.as_raw_fd(),
            libc::TUNSETVNETHDRSZ,
            &VNET_HDR_LEN as *const libc::c_int,
        )
    };
    if r < 0 {
        return Err(refused("TUNSETVNETHDRSZ", io::Error::last_os_error()));
    }
    set_offload(&tun, TCP_OFFLOADS).map_err(|e| refused("TUNSETOFFLOAD with TSO", e))?;
    Ok(tun)
}

fn set_offload(tun: &File, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: TUNSETOFFLOAD takes its argument by value.
    if unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETOFFLOAD, flags as libc::c_ulong) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// EINVAL is the TUN driver's answer for a flag it does not know.
fn refused(what: &str, e: io::Error) -> Found {
    if e.raw_os_error() == Some(libc::EINVAL) {
        Found::Absent(format!("the kernel refused {what}: {e}"))
    } else {
        Found::Unknown(format!("{what}: {e}"))
    }
}
