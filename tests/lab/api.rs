//! The Rust API for tests (`tunbench::api::Lab`): up under a unique name,
//! exec, check, assertions, a measurement, and down on drop — also when the
//! test panics.

use crate::common::*;
use tunbench::api::Lab;
use tunbench::measure::session::Overrides;
use tunbench::verify::Outcome;

const PAIR: &str = r#"
name = "apipair"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.0.1/24", ipv6 = "2001:2::1/64" }
b = { port = "b:eth0", ipv4 = "198.18.0.2/24", ipv6 = "2001:2::2/64" }
mtu = 1450
[[measure]]
name = "raw"
from = "a"
to = "b"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
[[assert]]
name = "b-answers"
kind = "reach"
from = "a"
to = "b"
family = "ipv6"
[[assert]]
name = "mtu"
kind = "path_mtu"
from = "a"
to = "b"
family = "ipv4"
equals = 1400
"#;

/// The measurement servers the lab starts are this build's tunbench.
fn use_this_build() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: set once, before any lab of this test binary measures.
    ONCE.call_once(|| unsafe { std::env::set_var("TUNBENCH_EXE", bin()) });
}

#[test]
fn a_lab_answers_exec_check_asserts_and_measures_then_goes_when_dropped() {
    use_this_build();
    let name;
    {
        let lab = Lab::up_str(PAIR).unwrap();
        name = lab.name().to_string();
        assert!(name.starts_with("apipair-"), "{name}");
        assert_eq!(namespaces(&format!("{name}-")).len(), 2);

        let out = lab
            .exec("b", "ip", &["-br", "addr", "show", "eth0"])
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("198.18.0.2/24"));

        let report = lab.check().unwrap();
        assert!(report.probes.len() >= 4, "{report:?}");
        assert_eq!(report.failures().count(), 0, "{report:?}");

        // The file says 1400; the link is 1450: one passes, one fails.
        let v = lab.assert_all().unwrap();
        let by = |n: &str| v.iter().find(|x| x.name == n).unwrap();
        assert_eq!(by("b-answers").outcome, Outcome::Pass, "{v:?}");
        assert_eq!(by("mtu").outcome, Outcome::Fail, "{v:?}");
        assert!(by("mtu").measured.contains("1450"), "{v:?}");

        // One short run; no latency probes, which nothing here looks at.
        let quick = Overrides {
            runs: Some(1),
            duration: Some(1.0),
            latency: Some(false),
            ..Default::default()
        };
        // The cell's one run moved data, and the cell's figure is that run's.
        let r = lab.measure("raw", &quick).unwrap();
        let cell = &r.paths[0].cells[0];
        assert!(cell.error.is_none() && cell.runs.len() == 1, "{cell:?}");
        let run = &cell.runs[0];
        assert!(
            run.bytes > 0 && cell.best_bps == run.bits_per_second,
            "{cell:?}"
        );
        assert!(lab.measure("nosuch", &quick).is_err());
    }
    assert_gone(&name);
}

#[test]
fn a_test_that_panics_leaves_no_lab() {
    let made = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let seen = made.clone();
    let r = std::thread::spawn(move || {
        let lab = Lab::up_str(&PAIR.replace("apipair", "apipanic")).unwrap();
        *seen.lock().unwrap() = lab.name().to_string();
        panic!("the test's own assertion failed");
    })
    .join();
    assert!(r.is_err(), "the thread panicked");
    let name = made.lock().unwrap().clone();
    assert!(name.starts_with("apipanic-"), "{name}");
    assert_gone(&name);
}

#[test]
fn two_labs_of_one_file_get_their_own_names_and_down_says_what_went() {
    let a = Lab::up_file(topo("two-hosts.toml")).unwrap();
    let b = Lab::up_file(topo("two-hosts.toml")).unwrap();
    assert_ne!(a.name(), b.name());
    let name = a.name().to_string();
    let removed = a.down().unwrap();
    assert_eq!(removed.namespaces.len(), 2, "{removed:?}");
    assert_gone(&name);
    assert!(b.namespace("h1").is_ok());
    assert!(b.namespace("nosuch").is_err());
}

#[test]
fn a_bad_topology_is_an_error_and_builds_nothing() {
    let bad = PAIR
        .replace("apipair", "apibad")
        .replace("equals = 1400", "equals = 1400\nbogus = 1");
    let e = Lab::up_str(&bad).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    assert_eq!(namespaces("apibad-"), Vec::<String>::new());
}
