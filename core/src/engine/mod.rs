//! The measurement engine: an iperf3-compatible client and server. The control
//! protocol is a sans-IO state machine (`control`); `client` and `server` are thin
//! drivers that own the sockets; `stream` moves the data, a thread per stream.

pub mod client;
pub mod control;
pub mod cpu;
pub mod exchanged_results;
pub mod latency;
pub mod params;
pub mod protocol;
pub mod report;
pub mod server;
pub mod stream;
pub mod udp_stats;
