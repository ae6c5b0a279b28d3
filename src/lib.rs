//! tunbench: network-namespace labs from topology files, and throughput measured
//! through them.
//!
//! One layer per folder; a module imports only from its own layer and those
//! below it (tests/architecture.rs keeps it so). Lowest first: vocab, wire,
//! socket, codec, topology, routing, predict, plan, keys, engine, driver, endpoint, lab,
//! measure, report, verify, commands, api.
//!
//! For tests of your own against real namespaces, [`api::Lab`] brings a
//! topology up and takes it down when dropped.

#[deny(missing_docs)]
pub mod api;
pub mod codec;
pub mod commands;
pub mod driver;
pub mod endpoint;
pub mod engine;
pub mod keys;
pub mod lab;
pub mod measure;
pub mod plan;
pub mod predict;
pub mod report;
pub mod routing;
pub mod socket;
pub mod topology;
pub mod verify;
pub mod vocab;
pub mod wire;
