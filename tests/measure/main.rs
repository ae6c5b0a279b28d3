//! The measurement engine and the NVR500 study's method, end to end: the iperf3
//! protocol against Debian's iperf3, the server's input handling, the matrix
//! and UDP search, servers outside the lab, and latency.

#[path = "../common/mod.rs"]
mod common;

mod engine;
mod interop;
mod latency;
mod measure;
mod measure_external;
mod server_input;
