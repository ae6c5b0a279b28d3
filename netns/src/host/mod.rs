//! Interfaces of the namespace tunbench runs in ("the host") given to a lab's
//! nodes (`Op::HostLink`): the checks made before anything is recorded or built
//! (reads only), the snapshot of a moved interface, and its return by `down`
//! and `clean`.
//!
//! A macvlan, ipvlan or VLAN device is made directly in the node's namespace and
//! is destroyed with it. A moved interface is not: deleting a namespace destroys
//! a veth and sends a real NIC to the init namespace without its addresses, so
//! `down` moves it back, under its own name, before the namespace goes.

mod check;
mod dump;
mod give_back;
mod preflight;
mod restore;
mod snapshot;

pub use check::{HostIf, HostView, OtherLab, check};
pub use give_back::{NotGiven, give_back};
pub use preflight::{Refused, other_labs, preflight, read_view};
pub use snapshot::read_interface;
