//! Shared by the tunnel tests.

use crate::common::*;

/// Whether a ping from `LAB-NODE` (`args`, the target last) is answered
/// within `BOUND`: one echo at a time, each given 1 s, until one is. A first
/// packet may wait for a handshake or a neighbour, and a loaded machine may
/// answer late; only a path that never carries the echo fails.
pub fn reaches(lab: &str, node: &str, args: &[&str]) -> bool {
    poll(BOUND, || ping_from(lab, node, args).then_some(())).is_some()
}
