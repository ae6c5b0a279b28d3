//! Replayed without libFuzzer by tests/fuzz_regressions.rs through the same entry point.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tunbench::codec::esp::fuzz::codec(data));
