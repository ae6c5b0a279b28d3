//! The seed's method as one command: the matrix of cells, N runs each, the UDP rate
//! search, between two nodes of a running lab.

pub mod results;
pub mod runner;
pub mod search;
pub mod session;
