//! Replays every input under fuzz/regressions/<target>/ (what scripts/fuzz.sh once
//! found, and hand-made nasty inputs) through the entry points the cargo-fuzz
//! targets call, so a plain `cargo test` keeps them fixed without libFuzzer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use tunbench::codec::{dslite, esp as esp_codec, esp_transport, l2tp as l2tp_codec};
use tunbench::engine::control;
use tunbench::wire::{esp, ipv4, ipv6, l2tp};

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// What a fuzz target calls with libFuzzer's bytes.
type Entry = fn(&[u8]);

fn replay(target: &str, entry: Entry) {
    let files = inputs(target);
    assert!(!files.is_empty(), "no inputs for {target}");
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("readable input");
            catch_unwind(AssertUnwindSafe(|| entry(&data))).is_err()
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target} panics on: {failed:#?}");
}

#[test]
fn wire_ipv4() {
    replay("wire_ipv4", ipv4::fuzz);
}

#[test]
fn wire_ipv6() {
    replay("wire_ipv6", ipv6::fuzz);
}

#[test]
fn dslite_b4() {
    replay("dslite_b4", dslite::fuzz::b4);
}

#[test]
fn dslite_aftr() {
    replay("dslite_aftr", dslite::fuzz::aftr);
}

#[test]
fn wire_esp() {
    replay("wire_esp", esp::fuzz);
}

#[test]
fn wire_l2tp() {
    replay("wire_l2tp", l2tp::fuzz);
}

#[test]
fn esp_codec() {
    replay("esp_codec", esp_codec::fuzz::codec);
}

#[test]
fn l2tp_codec() {
    replay("l2tp_codec", l2tp_codec::fuzz);
}

#[test]
fn l2tp_ipsec_codec() {
    replay("l2tp_ipsec_codec", esp_transport::fuzz::codec);
}

#[test]
fn control_server() {
    replay("control_server", control::fuzz_server);
}

/// Every prefix of every input: truncation anywhere must not panic either.
#[test]
fn every_prefix_of_every_input() {
    let targets: [(&str, Entry); 10] = [
        ("wire_ipv4", ipv4::fuzz),
        ("wire_ipv6", ipv6::fuzz),
        ("dslite_b4", dslite::fuzz::b4),
        ("dslite_aftr", dslite::fuzz::aftr),
        ("wire_esp", esp::fuzz),
        ("wire_l2tp", l2tp::fuzz),
        ("esp_codec", esp_codec::fuzz::codec),
        ("l2tp_codec", l2tp_codec::fuzz),
        ("l2tp_ipsec_codec", esp_transport::fuzz::codec),
        ("control_server", control::fuzz_server),
    ];
    for (target, entry) in targets {
        for path in inputs(target) {
            let data = std::fs::read(&path).expect("readable input");
            for n in 0..data.len().min(512) {
                entry(&data[..n]);
            }
        }
    }
}
