//! A netlink handle that acts in a given namespace: the socket is made on a thread
//! inside it (a netlink socket stays in the namespace it was created in).

use crate::namespace;
use rtnetlink::Handle;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd};

/// Must be called inside a tokio runtime (the connection task is spawned on it).
pub fn handle_in(ns: &str) -> io::Result<Handle> {
    let fd = namespace::run_in(ns, || {
        Ok(netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?.into_raw_fd())
    })?;
    connect(fd)
}

/// A handle in the namespace `ns` is a descriptor of (the host's, found by its
/// identity rather than a name).
pub fn handle_in_file(ns: &std::fs::File) -> io::Result<Handle> {
    let fd = namespace::run_in_file(ns, || {
        Ok(netlink_sys::Socket::new(netlink_sys::protocols::NETLINK_ROUTE)?.into_raw_fd())
    })?;
    connect(fd)
}

fn connect(fd: std::os::fd::RawFd) -> io::Result<Handle> {
    // SAFETY: fd is a netlink socket handed over by the worker thread, owned by nobody else.
    let sock = unsafe { netlink_sys::TokioSocket::from_raw_fd(fd) };
    let (conn, handle, _) = rtnetlink::from_socket(sock);
    tokio::spawn(conn);
    Ok(handle)
}
