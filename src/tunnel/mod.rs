//! Userspace tunnel datapaths: one sans-IO codec per tunnel kind (bytes in, a
//! verdict out, the way boringtun's `TunnResult` works) and one shared driver
//! that owns the TUN device and the tunnel socket and moves packets between them.
//!
//! The driver never looks inside a tunnel's packets; a codec never does IO.

pub mod codec;
pub mod driver;
pub mod dslite;
pub mod endpoint;
pub mod esp;
pub mod esp_endpoint;
pub mod esp_transport;
pub mod external;
pub mod ikev2_endpoint;
pub mod l2tp;
pub mod offload;
pub mod overhead;
pub mod packet_tx;
pub mod process_log;
pub mod strongswan;
pub mod tun;
pub mod wg_endpoint;
pub mod wg_external;
pub mod wireguard;

pub use codec::{Codec, DropReason, Verdict};
