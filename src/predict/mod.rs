//! The performance model: what a lab should let through on each measured
//! cell, before anything is measured. Two limits, each named for a reader:
//! the device models' tightest ceiling on the cell's way (`device_limit`) and
//! what the links' line rates and framing let through (`wire_limit`). Pure:
//! both follow the routing model over the resolved topology.

pub mod device_limit;
pub mod wire_limit;
