//! `tunbench graph`: the topology as Graphviz dot, a Mermaid flowchart, or an
//! SVG drawing of its own ([`crate::report::graph`]).

use crate::report::graph::{GraphFormat, render};
use crate::topology;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct GraphArgs {
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "dot")]
    pub format: GraphFormat,
}

/// The command: load the file, print the diagram.
pub fn graph(a: GraphArgs) -> anyhow::Result<i32> {
    let GraphArgs { file, format } = a;
    let t = topology::load(&file, crate::lab::this_kernel())?;
    print!("{}", render(&t, format));
    Ok(0)
}
