//! The performance model: what a lab should let through on each measured
//! cell, before anything is measured. Two limits, each named for a reader:
//! the device models' tightest ceiling on the cell's way (`device_limit`) and
//! what the links' line rates and framing let through (`wire_limit`). Pure:
//! both follow the routing model over the resolved topology (`path`).

pub mod device_limit;
mod path;
pub mod wire_limit;

#[cfg(test)]
mod test_home;

/// Tunnels in tunnels followed at most this deep.
const MAX_NESTING: usize = 4;
/// TCP's header with the timestamps option Linux sends by default.
const TCP_HEADER: usize = 32;
const UDP_HEADER: usize = 8;
