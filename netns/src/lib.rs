//! The only code in tunbench that changes kernel state: network namespaces, links,
//! addresses, routes, sysctls, over netlink, each owned by a lab and removed by it.

pub mod apply;
pub mod features;
pub mod host;
pub mod inspect;
pub mod lab;
pub mod module;
pub mod namespace;
mod netlink;
pub mod nft;
pub mod ops;
pub mod process;
mod socket;
pub mod state;
pub mod steer;
pub mod sysctl;
pub mod tc;
pub mod test_env;
pub mod tool;
pub mod tun;
pub mod wireguard;

pub use apply::{ApplyError, Cancel};
pub use host::{Refused, preflight};
pub use lab::{LabError, Removed, clean, down, up};
pub use ops::{HostAttach, Op, Phase, Plan};
pub use socket::handle_in;
pub use state::{HostLinkRecord, HostNetns, LabState};
