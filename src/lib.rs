//! tunbench: network-namespace labs from topology files, and throughput measured
//! through them.
//!
//! One layer per folder; a module imports only from its own layer and those
//! below it (tests/architecture.rs keeps it so). Lowest first: vocab, wire,
//! socket, codec, topology, routing, predict, plan, keys, engine, driver, endpoint, lab,
//! measure, report, verify, commands, api. The layers up to endpoint are the
//! crate `tunbench-core`, re-exported here under the same names.
//!
//! For tests of your own against real namespaces, [`api::Lab`] brings a
//! topology up and takes it down when dropped.

pub use tunbench_core::{
    codec, driver, endpoint, engine, keys, plan, predict, routing, socket, topology, vocab, wire,
};

#[deny(missing_docs)]
pub mod api;
pub mod commands;
pub mod lab;
pub mod measure;
pub mod report;
pub mod verify;
