//! A router's device model in the slow path, measured with tunbench's own
//! engine: a per-flow ceiling F with an aggregate A gives about F to one flow
//! and about min(A, n x F) to n flows; an aggregate UDP ceiling holds offered
//! load above it to the ceiling; what no ceiling names is not held back.
//! Ceilings meter transport payload, which is what the engine reports.

mod common;

use common::*;
use std::path::PathBuf;

use std::time::Duration;

/// One engine test from left to right (or back with -R) to `to`, 3 s: the
/// receiver's bit/s.
fn measure(lab: &str, to: &str, port: u16, args: &[&str]) -> f64 {
    let mut a = vec!["-t", "3"];
    a.extend_from_slice(args);
    engine_bps(lab, "left", "right", to, port, &a)
}

/// Within 10 % of the ceiling, as many as four times (see `on_a_noisy_machine`).
fn about(measure: impl Fn() -> f64, expected: f64, what: &str) {
    on_a_noisy_machine(4, what, || rate_within(measure(), expected, 0.10));
}

#[test]
fn flow_and_aggregate_ceilings_hold_per_direction_and_protocol() {
    let lab = lab_name("rmod");
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/router/model.toml");
    let (_g, o) = up(&file, &lab);
    assert!(o.status.success(), "up: {}", text(&o));
    for (to, fam) in [("198.18.63.2", "IPv4"), ("2001:2:0:63::2", "IPv6")] {
        // Download: flow 40M, aggregate 100M.
        about(
            || measure(&lab, to, 5401, &["-R"]),
            40e6,
            &format!("{fam} TCP download, 1 flow"),
        );
        about(
            || measure(&lab, to, 5402, &["-R", "-P", "2"]),
            80e6,
            &format!("{fam} TCP download, 2 flows"),
        );
        about(
            || measure(&lab, to, 5403, &["-R", "-P", "4"]),
            100e6,
            &format!("{fam} TCP download, 4 flows"),
        );
    }
    // UDP upload: 60M offered into a 30M aggregate.
    about(
        || {
            measure(
                &lab,
                "198.18.63.2",
                5404,
                &["-u", "-b", "60M", "-l", "1400"],
            )
        },
        30e6,
        "IPv4 UDP upload at twice the ceiling",
    );
    // TCP upload has no ceiling: well above every one above.
    let free = measure(&lab, "198.18.63.2", 5405, &[]);
    assert!(
        free > 300e6,
        "TCP upload is not held back: {:.0} Mbit/s",
        free / 1e6
    );
    // The model's drops are counted as such in the slow path's stats (written
    // each second).
    std::thread::sleep(Duration::from_millis(1200));
    let p = state_dir(&lab).join("datapath-router.r1.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default()).unwrap_or_default();
    let full = v["drops"]["queue_full"].as_u64().unwrap_or(0);
    assert!(full > 0, "queue_full drops in {p:?}: {v}");
}
