//! Tests that need no root and build no namespace: the docs' examples, the
//! corpus of broken topologies, fuzz regressions, the VPN codecs' wire bytes
//! against tshark, and the benchmark scripts' own checks.

#[path = "../common/mod.rs"]
mod common;

mod bench_assertions;
mod bench_before_after;
mod bench_scale;
mod bench_soak;
mod docs;
mod docs_flags;
mod fuzz_regressions;
mod validate;
mod vpn_wire;
