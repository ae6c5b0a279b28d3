//! Socket helpers both the measurement engine and the datapath driver use:
//! buffer sizes, UDP GSO and GRO (`gso`).

pub mod gso;
