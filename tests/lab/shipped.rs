//! Every topology shipped in topologies/ is tested and checked: a file the
//! docs offer (docs/topology.md lists every one; tests/offline/docs.rs keeps that
//! list whole) must carry `[[assert]]` entries that say what it is for, and
//! `tunbench test` must pass them all in every scenario (its JUnit report read
//! back with an XML parser); then the file comes up again, every address that
//! its routing says is reachable must answer (`tunbench check`), and `down`
//! must leave nothing behind. One test per file, so they run side by side; a
//! new file fails `every_shipped_topology_has_its_test` until it has one.

use crate::common::*;
use std::path::Path;

/// The files of topologies/, each tested by the test of the same name below.
const SHIPPED: &[&str] = &[
    "dslite.toml",
    "home-split.toml",
    "ikev2.toml",
    "nvr500-home.toml",
    "nvr500-real.toml",
    "router-datapaths.toml",
    "router.toml",
    "two-hosts.toml",
    "vpn.toml",
    "wireguard.toml",
];

#[test]
fn every_shipped_topology_has_its_test() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files, SHIPPED,
        "topologies/ and the files tested in tests/lab/shipped.rs differ: give each file a test"
    );
}

macro_rules! shipped {
    ($($test:ident: $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                passes_its_assertions_checks_and_goes($file);
            }
        )*
    };
}

shipped! {
    dslite_passes_its_assertions_checks_and_goes: "dslite.toml",
    home_split_passes_its_assertions_checks_and_goes: "home-split.toml",
    ikev2_passes_its_assertions_checks_and_goes: "ikev2.toml",
    nvr500_home_passes_its_assertions_checks_and_goes: "nvr500-home.toml",
    nvr500_real_passes_its_assertions_checks_and_goes: "nvr500-real.toml",
    router_datapaths_passes_its_assertions_checks_and_goes: "router-datapaths.toml",
    router_passes_its_assertions_checks_and_goes: "router.toml",
    two_hosts_passes_its_assertions_checks_and_goes: "two-hosts.toml",
    vpn_passes_its_assertions_checks_and_goes: "vpn.toml",
    wireguard_passes_its_assertions_checks_and_goes: "wireguard.toml",
}

/// `tunbench test` of topologies/NAME passes, its JUnit report says so, and
/// the lab then comes up again, checks and goes.
fn passes_its_assertions_checks_and_goes(name: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies")
        .join(name);
    // Distinct per file: under `cargo test` the files share one process.
    let index = SHIPPED.iter().position(|f| *f == name).unwrap();
    let lab = lab_name(&format!("sh{index}"));
    // A file with real devices in it runs on emulated hardware: the machine
    // and the router are namespaces of the test's own (tests/lab/host_links.rs).
    let hardware = std::fs::read_to_string(&file)
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
    let _guard = LabGuard(lab.clone());
    let out = tempfile::tempdir().unwrap();
    let junit = out.path().join("junit.xml");
    let o = tunbench(&[
        "test",
        file.to_str().unwrap(),
        "--name",
        &lab,
        "--yes",
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{name}: tunbench test failed\n{}",
        text(&o)
    );
    assert_gone(&lab);
    junit_has_cases_and_no_failure(name, &junit);
    // A file placed on several hosts comes up one host's part at a time
    // (tests/lab/cross_host.rs builds home-split.toml so); `test` above built
    // and checked it whole on this machine.
    let text_of_file = std::fs::read_to_string(&file).unwrap();
    if text_of_file.contains("\n[hosts.") {
        assert_eq!(
            name, "home-split.toml",
            "a placed file needs its cross-host test"
        );
        return;
    }

    let o = tunbench(&["up", file.to_str().unwrap(), "--name", &lab]);
    assert!(o.status.success(), "{name}: up failed\n{}", text(&o));
    let o = tunbench(&["check", &lab, "--json"]);
    assert!(o.status.success(), "{name}: check failed\n{}", text(&o));
    every_reachable_address_answered(name, &o.stdout);
    let o = tunbench(&["down", &lab]);
    assert!(o.status.success(), "{name}: down failed\n{}", text(&o));
    assert_gone(&lab);
}

/// The JUnit report at `junit` parses, has test cases, and none failed.
fn junit_has_cases_and_no_failure(name: &str, junit: &Path) {
    let xml = std::fs::read_to_string(junit).unwrap();
    let doc = roxmltree::Document::parse(&xml)
        .unwrap_or_else(|e| panic!("{name}: JUnit XML does not parse: {e}\n{xml}"));
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .count();
    assert!(cases > 0, "{name}: no test cases\n{xml}");
    let bad = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure") || n.has_tag_name("error"))
        .count();
    assert_eq!(bad, 0, "{name}: failures in\n{xml}");
}

/// `check --json`: some address is expected to answer, and every one that
/// routing says is reachable did.
fn every_reachable_address_answered(name: &str, json: &[u8]) {
    let j: serde_json::Value = serde_json::from_slice(json).unwrap_or_else(|e| {
        panic!(
            "{name}: check --json: {e}\n{}",
            String::from_utf8_lossy(json)
        )
    });
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
