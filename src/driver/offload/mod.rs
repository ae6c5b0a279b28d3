//! TUN offloads in userspace: the virtio-net header, TSO/USO segmentation of what
//! the TUN hands over, and GRO-style coalescing of what goes back in (the approach
//! of wireguard-go's tun/ package, written anew here).
//!
//! - Reading (TUN -> network): with TUNSETOFFLOAD the kernel hands over TCP
//!   super-packets of up to 64 KiB (`gso_type` TCPV4/TCPV6, segment payload
//!   `gso_size`) and UDP ones (UDP_L4) whose checksum is left to us
//!   (`NEEDS_CSUM`: the field holds the pseudo-header sum; the sum over
//!   `csum_start..` goes at `csum_start + csum_offset`). [`split_tun_read`] turns
//!   a read into one packet with a complete checksum, or a [`Segmenter`](segment::Segmenter) that cuts
//!   it into wire-size packets, each with its own lengths, IPv4 ident, sequence
//!   number, flags and checksums, as the kernel's tcp_gso_segment would.
//! - Writing (network -> TUN): [`Coalescer`] joins consecutive in-order TCP
//!   segments of one flow into one super-packet with a TCPV4/TCPV6 header and
//!   NEEDS_CSUM (the kernel treats it as CHECKSUM_PARTIAL: locally checked), the
//!   rules of the kernel's tcp_gro_receive. Every segment's checksum is verified
//!   before it joins, since the kernel will not look at it again. The payloads are
//!   not copied: a group is written with writev, the head packet then the
//!   payload of each member.
//!
//! The header's layout is in [`vnet_header`]; reading is [`segment`], writing
//! [`coalesce`], and the checksums both need are in [`checksum`].

pub mod checksum;
pub mod coalesce;
mod layout;
pub mod segment;
#[cfg(test)]
mod test_packets;
pub mod vnet_header;

pub use checksum::{cut_for_tun, partial_checksum_for_tun};
pub use coalesce::{Coalescer, Group, MAX_COALESCED_SEGMENTS};
pub use segment::{TunRead, split_tun_read};
pub use vnet_header::VNET_HDR_LEN;
