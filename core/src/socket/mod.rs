//! Socket helpers both the measurement engine and the datapath driver use:
//! buffer sizes, UDP GSO and GRO (`gso`); raw ICMP sockets for echo replies
//! only (`icmp`).

pub mod gso;
pub mod icmp;
