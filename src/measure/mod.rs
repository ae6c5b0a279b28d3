//! The NVR500 study's method as one command: the matrix of cells, N runs each, the UDP rate
//! search, between two nodes of a running lab.

mod cell;
mod client_thread;
mod idle;
pub mod memo;
pub mod part;
mod reading;
pub mod results;
pub mod runner;
pub mod same_lab;
pub mod search;
pub mod server;
pub mod session;
pub mod spec;
