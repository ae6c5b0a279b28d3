//! A lab's life end to end, as root in namespaces: up, down, status, check,
//! faults and recovery, host interfaces, manual steps, `tunbench test`, the
//! Rust API, the command line, and every shipped topology.

#[path = "../common/mod.rs"]
mod common;

// Machines emulated on this one, shared with netns's tests; this binary uses
// part of it.
#[allow(dead_code)]
#[path = "../../netns/tests/emulated/mod.rs"]
mod emulated;

mod ansible;
mod api;
mod cli;
mod cross_host;
mod cross_host_check;
mod cross_host_run;
mod cross_host_tunnels;
mod doctor;
mod host_links;
mod lab;
mod lab_faults;
mod lifecycle;
mod manual_steps;
mod parts;
mod same_lab;
mod shipped;
mod support;
mod test_command;
