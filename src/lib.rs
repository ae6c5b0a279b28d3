//! tunbench: network-namespace labs from topology files, and throughput measured
//! through them.

pub mod check;
pub mod cli;
pub mod datapath;
pub mod engine;
pub mod generate;
pub mod graph;
pub mod impair;
pub mod lab;
pub mod liveness;
pub mod measure;
pub mod plan;
pub mod relay;
pub mod report;
pub mod router;
pub mod shape;
pub mod topology;
pub mod tunnel;
pub mod wgkey;
pub mod wire;
