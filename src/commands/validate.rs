//! `tunbench validate`: topology files checked, creating nothing (kernel
//! features a file needs are tried in throwaway namespaces); exit 2 when any is
//! wrong. A file whose links leave by host interfaces is also
//! checked against this machine (read only): the interfaces must exist and be
//! free for the lab to take.

use super::runtime;
use crate::plan::{Naming, plan};
use crate::topology::{self, Topology};
use crate::vocab::count::counted;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Check the files alone, not the host interfaces they name on this machine
    /// (for a file meant for another machine).
    #[arg(long)]
    pub file_only: bool,
    /// As `up --force`: accept host interfaces that carry this machine's default
    /// route or addresses of its own.
    #[arg(long)]
    pub force: bool,
}

pub fn validate(a: ValidateArgs) -> Result<i32> {
    let ValidateArgs {
        files,
        file_only,
        force,
    } = a;
    // A file meant for another machine (--file-only) is resolved for a kernel
    // with everything, so nothing of this one's is held against it.
    let kernel = if file_only {
        crate::topology::kernel::KernelFacts::FULL
    } else {
        crate::lab::this_kernel()
    };
    let mut bad = 0;
    for f in &files {
        match crate::verify::load(f, kernel) {
            Ok(t) => {
                println!(
                    "{}: ok ({}, {})",
                    f.display(),
                    counted(t.nodes.len() as u64, "node"),
                    counted(t.links.len() as u64, "link")
                );
                // What `run` will ask someone to do by hand, in its order.
                let text = std::fs::read_to_string(f).unwrap_or_default();
                let scenarios =
                    topology::scenario::scenarios_str(&text, f, kernel).unwrap_or_default();
                for s in &scenarios {
                    if let Some(step) = &s.manual {
                        println!("  scenario {}, manual step: {step}", s.name);
                    }
                }
                // What "auto" takes on this kernel, where that is not the kernel's.
                let mut notes: Vec<String> = std::iter::once(&t)
                    .chain(scenarios.iter().map(|s| &s.topology))
                    .flat_map(|t| t.tunnels.iter().filter_map(|x| x.auto_fallback()))
                    .collect();
                notes.dedup();
                for n in notes {
                    println!("  note: {n}");
                }
                for line in t.placement_lines() {
                    println!("  {line}");
                }
                if !file_only {
                    let all = std::iter::once(&t).chain(scenarios.iter().map(|s| &s.topology));
                    let problems = host_problems(all, force)?;
                    if !problems.is_empty() {
                        bad += 1;
                        for p in problems {
                            eprintln!("{}: on this machine: {p}", f.display());
                        }
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

/// What `up` would refuse about the host interfaces of these topologies (the
/// file and its scenarios), each once.
fn host_problems<'a>(ts: impl Iterator<Item = &'a Topology>, force: bool) -> Result<Vec<String>> {
    let plans: Vec<_> = ts
        .filter(|t| t.links.iter().any(|l| l.host.is_some()))
        .map(|t| plan(t, &Naming::new(&t.name, None)))
        .collect();
    if plans.is_empty() {
        return Ok(Vec::new());
    }
    let rt = runtime()?;
    let mut out: Vec<String> = Vec::new();
    for p in &plans {
        if let Err(r) = rt.block_on(netns::preflight(p, force)) {
            for line in r.problems {
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    Ok(out)
}
