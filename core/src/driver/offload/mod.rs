//! TUN offloads in userspace (the approach of wireguard-go's tun/ package,
//! written anew here): with TUNSETOFFLOAD the kernel hands over TCP and UDP
//! super-packets of up to 64 KiB, and packets whose checksum is left to finish,
//! and takes such packets back. [`vnet_header`] (the codecs', which read it
//! too) is the header that says so; [`segment`] turns a TUN read into packets
//! with complete checksums, cut to wire size (TUN -> network); [`coalesce`]
//! joins consecutive in-order TCP segments of one flow into one super-packet,
//! written with writev, payloads not copied (network -> TUN); [`checksum`] has
//! the checksums both need.

pub mod checksum;
pub mod coalesce;
mod layout;
pub mod segment;
#[cfg(test)]
pub(crate) mod test_packets;
pub use crate::codec::vnet_header;

pub use checksum::{cut_for_tun, partial_checksum_for_tun};
pub use coalesce::{Coalescer, Group, MAX_COALESCED_SEGMENTS};
pub use segment::{Segmenter, TunRead, check_whole_read, split_tun_read};
pub use vnet_header::VNET_HDR_LEN;
