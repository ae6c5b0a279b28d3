//! Every topology shipped in topologies/ is tested and checked: a file the
//! docs offer (docs/topology.md lists every one; tests/offline/docs.rs keeps that
//! list whole) must carry `[[assert]]` entries that say what it is for, and
//! `tunbench test` must pass them all in every scenario (its JUnit report read
//! back with an XML parser); then the file comes up again, every address that
//! its routing says is reachable must answer (`tunbench check`), and `down`
//! must leave nothing behind. New files are picked up without listing them.

use crate::common::*;

#[test]
fn every_shipped_topology_passes_its_assertions_checks_and_goes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "topologies/ holds {files:?}");
    let out = tempfile::tempdir().unwrap();
    for (i, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let lab = lab_name(&format!("sh{i}"));
        // A file with real devices in it runs on emulated hardware: the machine
        // and the router are namespaces of the test's own (tests/lab/host_links.rs).
        let hardware = std::fs::read_to_string(file)
            .unwrap()
            .contains("kind = \"external\"")
            .then(|| {
                assert_eq!(
                    name, "nvr500-real.toml",
                    "a shipped file with external nodes needs its emulated hardware here"
                );
                EmulatedHost::new("sh")
            });
        let tunbench = |args: &[&str]| match &hardware {
            Some(h) => h.tunbench(args),
            None => tunbench(args),
        };
        {
            let _guard = LabGuard(lab.clone());
            let junit = out.path().join(format!("{name}.xml"));
            // A throughput floor is the one assertion noise can fail (a busy
            // machine makes figures short, never too good): such a run is made
            // again; any other failure fails at once.
            on_a_noisy_machine(3, &format!("{name}: tunbench test"), || {
                let started = std::time::Instant::now();
                let o = tunbench(&[
                    "test",
                    file.to_str().unwrap(),
                    "--name",
                    &lab,
                    "--yes",
                    "--junit",
                    junit.to_str().unwrap(),
                ]);
                let out = text(&o);
                eprintln!(
                    "{name}: tunbench test in {:.1} s\n{out}",
                    started.elapsed().as_secs_f64(),
                );
                assert_gone(&lab);
                let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL ")).collect();
                if o.status.success() {
                    Judged::Pass
                } else if !failed.is_empty() && failed.iter().all(|l| is_floor(l)) {
                    Judged::Short(failed.join("; "))
                } else {
                    Judged::Wrong(format!("tunbench test failed\n{out}"))
                }
            });
            let xml = std::fs::read_to_string(&junit).unwrap();
            let doc = roxmltree::Document::parse(&xml)
                .unwrap_or_else(|e| panic!("{name}: JUnit XML does not parse: {e}\n{xml}"));
            let cases: Vec<_> = doc
                .descendants()
                .filter(|n| n.has_tag_name("testcase"))
                .collect();
            assert!(!cases.is_empty(), "{name}: no test cases\n{xml}");
            let bad = doc
                .descendants()
                .filter(|n| n.has_tag_name("failure") || n.has_tag_name("error"))
                .count();
            assert_eq!(bad, 0, "{name}: failures in\n{xml}");
            assert_gone(&lab);

            let o = tunbench(&["up", file.to_str().unwrap(), "--name", &lab]);
            assert!(o.status.success(), "{name}: up failed\n{}", text(&o));
            let o = tunbench(&["check", &lab, "--json"]);
            assert!(o.status.success(), "{name}: check failed\n{}", text(&o));
            let j: serde_json::Value = serde_json::from_slice(&o.stdout)
                .unwrap_or_else(|e| panic!("{name}: check --json: {e}\n{}", text(&o)));
            let probes = j["probes"].as_array().unwrap();
            let expected = probes
                .iter()
                .filter(|p| p["unreachable_because"].is_null())
                .count();
            let silent: Vec<String> = probes
                .iter()
                .filter(|p| p["unreachable_because"].is_null() && p["replied"] != true)
                .map(|p| format!("{} -> {} {}", p["from"], p["to"], p["addr"]))
                .collect();
            assert!(expected > 0, "{name}: routing expects no address to answer");
            assert!(silent.is_empty(), "{name}: silent: {silent:?}");
            let o = tunbench(&["down", &lab]);
            assert!(o.status.success(), "{name}: down failed\n{}", text(&o));
        }
        assert_gone(&lab);
    }
}

/// A test that needs a program setup.sh installs names its package when the
/// program is missing, rather than failing as "no ping through the tunnel".
#[test]
fn a_missing_program_is_named_with_its_package() {
    let nowhere = std::ffi::OsString::from("/nonexistent");
    assert_eq!(
        find_program("ping", &nowhere),
        Err("ping is not installed, and this test runs it: install Debian's iputils-ping (bash scripts/setup.sh does)".to_string())
    );
    assert!(
        find_program("tshark", &nowhere)
            .unwrap_err()
            .contains("Debian's tshark")
    );
    // Where setup.sh has run, every program the tests use is there.
    let path = std::env::var_os("PATH").unwrap();
    for name in [
        "ip",
        "ping",
        "tshark",
        "iperf3",
        "wg",
        "wireguard-go",
        "swanctl",
    ] {
        assert_eq!(find_program(name, &path), Ok(()), "{name}");
    }
}

/// `FAIL name: measured 205.5 Mbit/s, expected raw:ipv6.tcp.receiver >= 212M`:
/// a throughput assertion's lower bound.
fn is_floor(line: &str) -> bool {
    line.split_once(", expected ")
        .is_some_and(|(measured, expected)| {
            measured.ends_with("bit/s") && expected.contains(" >= ")
        })
}

#[test]
fn a_floor_is_told_from_other_failures() {
    assert!(is_floor(
        "FAIL fast-ipv6-download-floor: measured 205.5 Mbit/s, expected raw:ipv6.tcp.receiver >= 212M (2.3 s)"
    ));
    assert!(!is_floor(
        "FAIL fast-ipv6-download-ceiling: measured 300.1 Mbit/s, expected raw:ipv6.tcp.receiver <= 287M (2.3 s)"
    ));
    assert!(!is_floor(
        "FAIL softwire-mtu: measured 1400 bytes to 198.18.20.10 (8 probes), expected 1460 bytes (0.0 s)"
    ));
}
