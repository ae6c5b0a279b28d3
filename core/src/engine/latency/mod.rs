//! Latency probes: small isochronous UDP datagrams echoed by the server.
//! `prober` is the sans-IO probing logic, `stats` what the probes saw and the
//! figures made from it, `sockets` the echo responder and the probing loop.

pub mod prober;
pub mod sockets;
pub mod stats;
