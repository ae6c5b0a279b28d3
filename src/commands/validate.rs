//! `tunbench validate`: topology files checked without touching the kernel; exit
//! 2 when any is wrong.

use crate::topology;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub fn validate(a: ValidateArgs) -> Result<i32> {
    let ValidateArgs { files } = a;
    let mut bad = 0;
    for f in &files {
        match topology::load(f) {
            Ok(t) => {
                println!(
                    "{}: ok ({} nodes, {} links)",
                    f.display(),
                    t.nodes.len(),
                    t.links.len()
                );
                // What `run` will ask someone to do by hand, in its order.
                let text = std::fs::read_to_string(f).unwrap_or_default();
                for s in topology::scenario::scenarios_str(&text, f).unwrap_or_default() {
                    if let Some(step) = &s.manual {
                        println!("  scenario {}, manual step: {step}", s.name);
                    }
                }
            }
            Err(e) => {
                bad += 1;
                eprintln!("{e}");
            }
        }
    }
    Ok(if bad > 0 { 2 } else { 0 })
}
