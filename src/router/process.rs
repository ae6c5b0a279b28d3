//! A userspace router's slow path as a process (`tunbench datapath --router`,
//! started by `up` inside the router's namespace): the shared driver on the
//! slow-path TUN, with no socket, until SIGTERM.

use super::SLOWPATH_TUN;
use super::slowpath::SlowPath;
use crate::datapath::Job;
use crate::tunnel::driver::{DriverConfig, Transport};
use crate::tunnel::endpoint::{Who, serve};
use anyhow::{Result, bail};

pub fn run(lab: &str, node: &str) -> Result<()> {
    let running = crate::lab::find(lab)?;
    let Some(n) = running.topology.nodes.iter().find(|n| n.name == node) else {
        bail!("lab {lab} has no node named {node}");
    };
    if n.datapath != crate::topology::tunnel::Datapath::Userspace {
        bail!("{node} in lab {lab} is no router with datapath = \"userspace\"");
    }
    let config = DriverConfig::new(SLOWPATH_TUN, Transport::TunOnly);
    let stats = crate::datapath::stats_path(lab, &Job::Router, node);
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
