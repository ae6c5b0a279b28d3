//! Every topology shipped in topologies/ is tested and checked: a file the
//! docs offer (docs/topology.md lists every one; tests/docs.rs keeps that
//! list whole) must carry `[[assert]]` entries that say what it is for, and
//! `tunbench test` must pass them all in every scenario (its JUnit report read
//! back with an XML parser); then the file comes up again, every address that
//! its routing says is reachable must answer (`tunbench check`), and `down`
//! must leave nothing behind. New files are picked up without listing them.

mod common;
use common::*;

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
        // and the router are namespaces of the test's own (tests/host_links.rs).
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
            eprintln!(
                "{name}: tunbench test in {:.1} s\n{}",
                started.elapsed().as_secs_f64(),
                text(&o)
            );
            assert!(
                o.status.success(),
                "{name}: tunbench test failed\n{}",
                text(&o)
            );
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
