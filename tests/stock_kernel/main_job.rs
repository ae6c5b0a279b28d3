//! The main job's four scenarios on the kernel its users run: there `fast`
//! puts the AFTR's softwire end in the kernel and `softwire-userspace` in
//! tunbench's own datapath, so they are different labs (on a kernel without
//! seg6 both are userspace). Short runs of one TCP cell per scenario, on
//! topologies/nvr500-home.toml with its measurements cut to those cells.

use crate::common::*;
use crate::kernel::stock_kernel;
use std::path::Path;

const SHORT_MEASURES: &str = r#"
[[measure]]
name = "raw"
from = "pc"
to = "server"
scenarios = ["none", "fast", "normal"]
ipv4 = "198.18.1.10"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1

[[measure]]
name = "dslite"
from = "pc"
to = "inet"
scenarios = ["fast", "softwire-userspace"]
ipv4 = "198.18.20.10"
families = ["ipv4"]
protocols = ["tcp"]
directions = ["sender"]
runs = 1
duration = 1
"#;

/// nvr500-home.toml up to its first `[[measure]]`, then SHORT_MEASURES.
fn short_main_job(dir: &Path) -> String {
    let full = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/nvr500-home.toml"),
    )
    .expect("reading topologies/nvr500-home.toml");
    let cut = full
        .find("\n[[measure]]")
        .expect("the main job measures something");
    // Emulation runs charon many times slower than a machine: the IKEv2 SAs
    // get two minutes to come up instead of the default 20 s.
    let ikev2 = "[tunnels.ikev2]\nkind = \"ikev2\"\n";
    assert!(full.contains(ikev2), "the main job has an IKEv2 tunnel");
    let base = full[..cut].replace(ikev2, &format!("{ikev2}timeout = 120\n"));
    let file = dir.join("nvr500-home-short.toml");
    std::fs::write(&file, format!("{base}\n{SHORT_MEASURES}")).unwrap();
    file.display().to_string()
}

#[test]
fn the_main_jobs_four_scenarios_run_with_the_kernel_aftr_in_fast_only() {
    stock_kernel();
    let dir = tempfile::tempdir().unwrap();
    let file = short_main_job(dir.path());
    let plan = |scenario: &str| {
        let o = tunbench(&["up", &file, "--scenario", scenario, "--dry-run"]);
        assert!(
            o.status.success(),
            "up --dry-run of {scenario}: {}",
            text(&o)
        );
        text(&o)
    };
    assert!(
        plan("fast").contains("seg6"),
        "fast's AFTR is the kernel's softwire here"
    );
    assert!(
        !plan("softwire-userspace").contains("seg6"),
        "softwire-userspace runs no kernel softwire"
    );
    let lab = lab_name("skm");
    let _g = LabGuard(lab.clone());
    let run = tunbench(&[
        "run",
        &file,
        "--name",
        &lab,
        "--no-latency",
        "--format",
        "json",
    ]);
    assert!(run.status.success(), "the short main job: {}", text(&run));
    let results: serde_json::Value = serde_json::from_slice(&run.stdout).expect("run's JSON");
    let said = results.to_string();
    for scenario in ["none", "fast", "normal", "softwire-userspace"] {
        assert!(
            said.contains(&format!("\"{scenario}\"")),
            "no results of {scenario}: {said}"
        );
    }
    assert_gone(&lab);
}
