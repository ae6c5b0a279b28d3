//! tunbench's layers below a lab's life: what a datapath process runs and
//! what a lab is planned from. The `tunbench` crate builds on it and
//! re-exports every module, so `tunbench::wire` is this crate's `wire`.
//!
//! One layer per folder; a module imports only from its own layer and those
//! below it (tests/architecture.rs keeps it so). Lowest first: vocab, wire,
//! socket, codec, topology, routing, predict, plan, keys, engine, driver,
//! endpoint.

/// A file of the repository, for tests: the shipped topologies and the
/// fixtures sit beside this crate's folder, not in it.
#[cfg(test)]
macro_rules! repo_file {
    ($path:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../", $path)
    };
}

pub mod codec;
pub mod driver;
pub mod endpoint;
pub mod engine;
pub mod keys;
pub mod plan;
pub mod predict;
pub mod routing;
pub mod socket;
pub mod topology;
pub mod vocab;
pub mod wire;
