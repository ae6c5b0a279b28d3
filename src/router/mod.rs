//! Virtual routers' userspace datapath (the slow path): every forwarded packet
//! passes through tunbench's own process in the router's namespace.
//!
//! The bump in the wire: tc on each of the router's interfaces redirects
//! arriving IPv4 and IPv6 (not ARP, not link-local or multicast IPv6, not
//! neighbour discovery) into a TUN, the process reads each packet and writes it
//! back, and the kernel takes it in from the TUN and forwards it as usual. So
//! the kernel still does the router's own work once per packet (route lookup,
//! TTL / hop limit, ICMP time exceeded, fragmentation needed, packet too big),
//! and the per-packet work a device model adds lives in the process.

pub mod model;
pub mod process;
pub mod slowpath;

/// The slow path's TUN in a userspace router's namespace.
pub const SLOWPATH_TUN: &str = "slowpath";
