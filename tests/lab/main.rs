//! A lab's life end to end, as root in namespaces: up, down, status, check,
//! faults and recovery, host interfaces, manual steps, `tunbench test`, the
//! Rust API, the command line, and every shipped topology.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod cli;
mod doctor;
mod host_links;
mod lab;
mod lab_faults;
mod lifecycle;
mod manual_steps;
mod shipped;
mod support;
mod test_command;
