//! `tunbench datapath` (hidden): one userspace tunnel endpoint, link relay or
//! router slow path, started by `up` inside a node's namespace.

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct DatapathArgs {
    #[arg(long)]
    pub lab: String,
    #[arg(long)]
    pub tunnel: Option<String>,
    #[arg(long)]
    pub node: String,
    /// A link relay's direction (node `link.N`).
    #[arg(long, value_enum)]
    pub way: Option<crate::plan::link::Way>,
    /// The read end of the pipe `up` opens once it has recorded this
    /// process (see datapath.rs); without it the process starts at once.
    #[arg(long)]
    pub start_gate: Option<i32>,
}

pub fn datapath(a: DatapathArgs) -> Result<i32> {
    let DatapathArgs {
        lab,
        tunnel,
        node,
        way,
        start_gate,
    } = a;
    crate::lab::datapath::run(&lab, tunnel.as_deref(), way, &node, start_gate)?;
    Ok(0)
}
