//! One userspace tunnel endpoint as a process: read the lab's topology, build the
//! codec for this endpoint, run the shared driver, write stats every second.

use anyhow::Result;

pub fn run(_lab: &str, _tunnel: &str, _node: &str) -> Result<()> {
    anyhow::bail!("userspace datapath not built yet")
}
