//! `tunbench up`, `down` and `clean`: a lab built from a topology file, and
//! removed again (by name, or every lab's leftovers).

use super::{bad_input, on_signals, runtime};
use crate::lab;
use crate::plan::Naming;
use crate::topology;
use crate::topology::hosts::{HostLookup, HostPart};
use crate::vocab::count::counted;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    pub file: PathBuf,
    /// Lab name (default: the topology's `name`); namespaces are LAB-NODE.
    #[arg(long)]
    pub name: Option<String>,
    /// Namespace name prefix instead of "LAB-".
    #[arg(long)]
    pub prefix: Option<String>,
    /// Print the operations as ip(8) commands and build nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Build this `[scenarios.NAME]` variant of the file.
    #[arg(long)]
    pub scenario: Option<String>,
    /// Take a host interface (`host = ...` on a link) even when it carries this
    /// machine's default route or addresses of its own.
    #[arg(long)]
    pub force: bool,
    /// Build only this `[hosts.NAME]`'s part of a lab placed on several hosts
    /// (default: the host whose underlay address is this machine's).
    #[arg(long)]
    pub host: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct DownArgs {
    /// A lab name, or the topology file it was built from.
    pub lab: String,
}

#[derive(clap::Args, Debug)]
pub struct CleanArgs {
    pub labs: Vec<String>,
}

pub fn up(a: UpArgs) -> Result<i32> {
    let UpArgs {
        file,
        name,
        prefix,
        dry_run,
        scenario,
        force,
        host,
    } = a;
    let t = topology::load(&file, crate::lab::this_kernel())?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let (t, text, manual) = match &scenario {
        Some(want) => {
            let s = scenario_of(&file, &text, want)?;
            let manual = s.manual.map(|m| (s.name, m));
            (s.topology, s.text, manual)
        }
        None => (t, text, None),
    };
    let lab_name = name.unwrap_or_else(|| t.name.clone());
    check_names(&lab_name, prefix.as_deref())?;
    let naming = Naming::new(&lab_name, prefix.as_deref());
    let rt = runtime()?;
    let part = host_part(&t, &file, host, &rt)?;
    if dry_run {
        if let Some((scenario, step)) = &manual {
            let step = step.replace('\n', "\n#   ");
            println!("# scenario {scenario}, manual step (`run` waits for it): {step}");
        }
        for op in crate::plan::plan_part(&t, &naming, part.as_ref()).ops {
            println!("{op}");
        }
        return Ok(0);
    }
    for n in t.tunnels.iter().filter_map(|t| t.auto_fallback()) {
        eprintln!("tunbench: {n}");
    }
    let (cancel, _) = on_signals(&rt);
    let s = rt.block_on(lab::up_part(
        &t,
        &file,
        &text,
        &naming,
        part.as_ref(),
        &cancel,
        force,
    ))?;
    println!(
        "lab {}{} is up: {}, {}, {}, {} in {:.3} s",
        s.lab,
        part.as_ref()
            .map(|p| format!(" (host {}'s part)", p.host))
            .unwrap_or_default(),
        counted(s.namespaces as u64, "namespace"),
        counted(s.links as u64, "link"),
        counted(s.addresses as u64, "address"),
        counted(s.routes as u64, "route"),
        s.elapsed.as_secs_f64()
    );
    Ok(0)
}

/// The part of `t` this machine builds: `--host`'s, or on a file with
/// `[hosts]` the host whose underlay address is one of this machine's; None
/// for a file without `[hosts]` (the whole lab). A tunnel across hosts needs
/// every key in the file.
fn host_part(
    t: &topology::Topology,
    file: &Path,
    host: Option<String>,
    rt: &tokio::runtime::Runtime,
) -> Result<Option<HostPart>> {
    let Some(pl) = &t.placement else {
        return match host {
            Some(h) => Err(bad_input(format!(
                "--host {h}: {} declares no [hosts]; it is one machine's lab, built without --host",
                file.display()
            ))),
            None => Ok(None),
        };
    };
    let declared = || {
        pl.hosts
            .iter()
            .map(|h| format!("{} ({})", h.underlay, h.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = match host {
        Some(h) => h,
        None => {
            let local = rt
                .block_on(netns::inspect::local_addresses())
                .context("reading this machine's addresses to find its host")?;
            match t.host_for_addresses(&local) {
                Ok(h) => h.to_string(),
                Err(HostLookup::Several(names)) => {
                    return Err(bad_input(format!(
                        "{}: this machine has the underlay addresses of several hosts ({}); pass --host NAME",
                        file.display(),
                        names.join(", ")
                    )));
                }
                Err(_) => {
                    return Err(bad_input(format!(
                        "{}: this machine has none of the underlay addresses {}; pass --host NAME",
                        file.display(),
                        declared()
                    )));
                }
            }
        }
    };
    let Some(part) = t.host_part(&name) else {
        return Err(bad_input(format!(
            "--host {name}: {} declares no such host; its hosts: {}",
            file.display(),
            pl.hosts
                .iter()
                .map(|h| format!("{} ({})", h.name, h.underlay))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let unkeyed = crate::keys::LabKeys::made_across_hosts(t);
    if !unkeyed.is_empty() {
        return Err(bad_input(format!(
            "{}: {}",
            file.display(),
            unkeyed.join("; ")
        )));
    }
    Ok(Some(part))
}

/// The scenario `want` of `file`, whose text is `text`.
fn scenario_of(file: &Path, text: &str, want: &str) -> Result<topology::scenario::Scenario> {
    let mut all = topology::scenario::scenarios_str(text, file, crate::lab::this_kernel())
        .map_err(|e| bad_input(e.to_string()))?;
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    let Some(i) = all.iter().position(|s| s.name == want) else {
        return Err(bad_input(format!(
            "{} has no scenario \"{want}\"{}",
            file.display(),
            if names.is_empty() {
                String::new()
            } else {
                format!("; its scenarios: {}", names.join(", "))
            }
        )));
    };
    Ok(all.swap_remove(i))
}

/// A lab name of 1-32 letters, digits, '-' or '_'; a namespace prefix of at
/// most 32 letters, digits, '-', '_' or '.'.
fn check_names(lab_name: &str, prefix: Option<&str>) -> Result<()> {
    if !topology::valid_name(lab_name) {
        return Err(bad_input(format!(
            "lab name \"{lab_name}\" must be 1-32 letters, digits, '-' or '_'"
        )));
    }
    if let Some(p) = prefix {
        if !p
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c))
            || p.len() > 32
        {
            return Err(bad_input(format!(
                "prefix \"{p}\" must be at most 32 letters, digits, '-', '_' or '.'"
            )));
        }
    }
    Ok(())
}

pub fn down(a: DownArgs) -> Result<i32> {
    let DownArgs { lab: arg } = a;
    let name = lab::lab_name_of(&arg)?;
    let r = runtime()?.block_on(netns::down(&name))?;
    if r.found {
        println!(
            "lab {name} is down: removed {} namespaces, stopped {} processes{}",
            r.namespaces.len(),
            r.processes,
            returned(&r)
        );
        left_set(&r);
    } else {
        println!("lab {name} is not up; nothing to remove");
    }
    Ok(report_problems(std::slice::from_ref(&r)))
}

pub fn clean(a: CleanArgs) -> Result<i32> {
    let CleanArgs { labs } = a;
    let rt = runtime()?;
    let removed = if labs.is_empty() {
        rt.block_on(netns::clean())
    } else {
        labs.iter()
            .map(|l| {
                rt.block_on(netns::down(l))
                    .unwrap_or_else(|e| netns::Removed {
                        lab: l.clone(),
                        found: true,
                        problems: vec![e.to_string()],
                        ..Default::default()
                    })
            })
            .collect()
    };
    let mut any = false;
    for r in removed.iter().filter(|r| r.found) {
        any = true;
        println!(
            "{}: removed {} namespaces, stopped {} processes{}",
            r.lab,
            r.namespaces.len(),
            r.processes,
            returned(r)
        );
        left_set(r);
    }
    if !any {
        println!("nothing to clean");
    }
    Ok(report_problems(&removed))
}

/// ", gave back host interfaces enp1s0, enp2s0" when there were any.
fn returned(r: &netns::Removed) -> String {
    if r.returned.is_empty() {
        String::new()
    } else {
        format!(", gave back host interfaces {}", r.returned.join(", "))
    }
}

/// The machine-wide settings a lab made that outlive it, one a line.
fn left_set(r: &netns::Removed) {
    for s in &r.left_set {
        println!("  left set on this machine: {s}");
    }
}

/// Each lab's problems on stderr, one a line naming the lab; exit code 1 if any.
fn report_problems(removed: &[netns::Removed]) -> i32 {
    let mut code = 0;
    for r in removed {
        for p in &r.problems {
            eprintln!("tunbench: lab {}: {p}", r.lab);
            code = 1;
        }
    }
    code
}
