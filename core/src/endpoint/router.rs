//! A userspace router's slow path as a process (`tunbench datapath --router`,
//! started by `up` inside the router's namespace): the shared driver on the
//! slow-path TUN, with no socket, until SIGTERM.

use crate::codec::slowpath::SlowPath;
use crate::driver::{DriverConfig, Transport};
use crate::endpoint::{Who, serve};
use crate::plan::datapath::Job;
use crate::plan::router::SLOWPATH_TUN;
use anyhow::{Result, bail};

/// Runs the slow path of router `node` of lab `lab`, built from `t`.
pub fn run(lab: &str, t: &crate::topology::Topology, node: &str) -> Result<()> {
    let Some(n) = t.nodes.iter().find(|n| n.name == node) else {
        bail!("lab {lab} has no node named {node}");
    };
    if n.datapath != crate::topology::tunnel::Datapath::Userspace {
        bail!("{node} in lab {lab} is no router with datapath = \"userspace\"");
    }
    let config = DriverConfig::new(SLOWPATH_TUN, Transport::TunOnly);
    let stats = crate::plan::datapath::stats_path(lab, &Job::Router, node);
    let who = Who {
        tunnel: "-",
        node,
        role: "router",
    };
    let codec = match &n.model {
        Some(m) => SlowPath::with_model(m, std::time::Instant::now()),
        None => SlowPath::new(),
    };
    serve(config, codec, &stats, who)?;
    Ok(())
}
