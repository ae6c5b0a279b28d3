//! Writing one packet into the TUN behind its virtio-net header: all zero, or,
//! for a packet from the network, one that asks the kernel to complete its
//! TCP/UDP checksum, or the one a codec that takes super-packets whole kept
//! in front of it.

use super::offload::VNET_HDR_LEN;
use super::offload::vnet_header::VirtioNetHdr;
use super::stats::{Ctr, Local};
use super::tun;
use std::os::fd::BorrowedFd;

/// A packet from the tunnel socket into the TUN: its TCP/UDP checksum may be a
/// kernel sender's partial one, so the kernel is asked to complete it; a TCP
/// one longer than `cut` is cut by the kernel into packets of that length.
pub(super) fn write_from_network(
    fd: BorrowedFd<'_>,
    p: &mut [u8],
    cut: Option<usize>,
    local: &mut Local,
) {
    match crate::driver::offload::partial_checksum_for_tun(p) {
        Some(mut hdr) => {
            if let Some(max) = cut {
                crate::driver::offload::cut_for_tun(p, &mut hdr, max);
            }
            write_with_header(fd, &hdr.to_bytes(), p, local)
        }
        None => write_single(fd, p, local),
    }
}

/// Writes one packet into the TUN with an all-zero virtio header.
#[inline]
pub(super) fn write_single(fd: BorrowedFd<'_>, p: &[u8], local: &mut Local) {
    static ZERO: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];
    write_with_header(fd, &ZERO, p, local)
}

/// Writes a buffer that starts with its own virtio-net header (from a codec
/// that takes super-packets whole) in one write: a super-packet goes back to
/// the kernel as one. Counted as the wire packets it carries.
#[inline]
pub(super) fn write_framed(fd: BorrowedFd<'_>, buf: &[u8], local: &mut Local) {
    let Ok(hdr) = VirtioNetHdr::parse(buf) else {
        local.add(Ctr::TunWriteErr, 1);
        return;
    };
    let packet = &buf[VNET_HDR_LEN..];
    let iov = [libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    }];
    match tun::write_iov(fd, &iov) {
        Ok(_) => {
            let frames = hdr.frames(packet).unwrap_or(1);
            local.add(Ctr::TunTxPackets, frames as u64);
            local.add(Ctr::TunTxBytes, packet.len() as u64);
        }
        Err(_) => local.add(Ctr::TunWriteErr, 1),
    }
}

/// One packet into the TUN behind its virtio-net header.
#[inline]
fn write_with_header(fd: BorrowedFd<'_>, hdr: &[u8; VNET_HDR_LEN], p: &[u8], local: &mut Local) {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: VNET_HDR_LEN,
        },
        libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        },
    ];
    match tun::write_iov(fd, &iov) {
        Ok(_) => local.packet(Ctr::TunTxPackets, Ctr::TunTxBytes, p.len()),
        Err(_) => local.add(Ctr::TunWriteErr, 1),
    }
}
