//! The home topology the predictions are checked on.

use crate::topology::Topology;
use crate::topology::scenario::scenarios_str;
use std::path::Path;

/// topologies/nvr500-home.toml as scenario `scenario` builds it.
pub(super) fn home(scenario: &str) -> Topology {
    let file = Path::new(repo_file!("topologies/nvr500-home.toml"));
    let text = std::fs::read_to_string(file).unwrap();
    scenarios_str(&text, file, crate::topology::kernel::KernelFacts::FULL)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .find(|s| s.name == scenario)
        .unwrap_or_else(|| panic!("no scenario {scenario}"))
        .topology
}
