//! Command-line arguments and the dispatch to the library. Exit codes: 0 ok,
//! 1 a step, check or expectation failed, 2 bad input (arguments or topology).

use crate::plan::Naming;
use crate::topology::{self, LoadError};
use crate::{check, generate, graph, lab};
use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "tunbench",
    version,
    about = "Build network-namespace labs from a topology file and measure raw vs tunneled throughput"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check topology files without touching the kernel. Exit 2 on any error.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Build a lab: namespaces, links, bridges, addresses, routes, sysctls.
    Up {
        file: PathBuf,
        /// Lab name (default: the topology's `name`); namespaces are LAB-NODE.
        #[arg(long)]
        name: Option<String>,
        /// Namespace name prefix instead of "LAB-".
        #[arg(long)]
        prefix: Option<String>,
        /// Print the operations as ip(8) commands and build nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove exactly what a lab created. Idempotent.
    Down {
        /// A lab name, or the topology file it was built from.
        lab: String,
    },
    /// Remove the leftovers of every lab (or of the named ones), even after kill -9.
    Clean { labs: Vec<String> },
    /// Labs, nodes, interfaces, addresses and link state.
    Status {
        lab: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node's namespace; its exit code passes through.
    Exec {
        lab: String,
        node: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// ICMP reachability matrix; exit 1 when an address routing says is reachable is not.
    Check {
        lab: String,
        #[arg(long)]
        json: bool,
    },
    /// The topology as a diagram.
    Graph {
        file: PathBuf,
        #[arg(long, value_enum, default_value = "dot")]
        format: graph::Format,
    },
    /// Write a generated topology.
    Gen {
        #[command(subcommand)]
        what: GenWhat,
    },
}

#[derive(Subcommand, Debug)]
pub enum GenWhat {
    /// A chain: host - router - ... - host, IPv4 and IPv6, routes end to end.
    Chain {
        #[arg(long)]
        nodes: usize,
        /// The topology's (and so the lab's) name.
        #[arg(long, default_value = "chain")]
        name: String,
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

/// A failure with its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Exit {
    pub code: i32,
    pub message: String,
}

fn bad_input(message: impl Into<String>) -> anyhow::Error {
    Exit {
        code: 2,
        message: message.into(),
    }
    .into()
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e.downcast_ref::<Exit>().map(|x| x.code).unwrap_or_else(|| {
                if e.downcast_ref::<LoadError>().is_some() {
                    2
                } else {
                    1
                }
            });
            let mut msg = format!("tunbench: {e}");
            for cause in e.chain().skip(1) {
                msg += &format!(": {cause}");
            }
            eprintln!("{msg}");
            code
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Validate { files } => {
            let mut bad = 0;
            for f in &files {
                match topology::load(f) {
                    Ok(t) => println!(
                        "{}: ok ({} nodes, {} links)",
                        f.display(),
                        t.nodes.len(),
                        t.links.len()
                    ),
                    Err(e) => {
                        bad += 1;
                        eprintln!("{e}");
                    }
                }
            }
            Ok(if bad > 0 { 2 } else { 0 })
        }
        Command::Up {
            file,
            name,
            prefix,
            dry_run,
        } => {
            let t = topology::load(&file)?;
            let lab_name = name.unwrap_or_else(|| t.name.clone());
            if !topology::valid_name(&lab_name) {
                return Err(bad_input(format!(
                    "lab name \"{lab_name}\" must be 1-32 letters, digits, '-' or '_'"
                )));
            }
            if let Some(p) = &prefix {
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
            let naming = Naming::new(&lab_name, prefix.as_deref());
            if dry_run {
                for op in crate::plan::plan(&t, &naming).ops {
                    println!("{op}");
                }
                return Ok(0);
            }
            let rt = runtime()?;
            let s = rt.block_on(async {
                let cancel = netns::Cancel::new();
                let c = cancel.clone();
                tokio::spawn(async move {
                    use tokio::signal::unix::{SignalKind, signal};
                    let (Ok(mut i), Ok(mut te), Ok(mut h)) = (
                        signal(SignalKind::interrupt()),
                        signal(SignalKind::terminate()),
                        signal(SignalKind::hangup()),
                    ) else {
                        return;
                    };
                    tokio::select! { _ = i.recv() => {}, _ = te.recv() => {}, _ = h.recv() => {} }
                    c.cancel();
                });
                lab::up(&t, &file, &naming, &cancel).await
            })?;
            println!(
                "lab {} is up: {} namespaces, {} links, {} addresses, {} routes in {:.3} s",
                s.lab,
                s.namespaces,
                s.links,
                s.addresses,
                s.routes,
                s.elapsed.as_secs_f64()
            );
            Ok(0)
        }
        Command::Down { lab: arg } => {
            let name = lab::lab_name_of(&arg)?;
            let r = runtime()?.block_on(netns::down(&name))?;
            if r.found {
                println!(
                    "lab {name} is down: removed {} namespaces, stopped {} processes",
                    r.namespaces.len(),
                    r.processes
                );
            } else {
                println!("lab {name} is not up; nothing to remove");
            }
            Ok(0)
        }
        Command::Clean { labs } => {
            let rt = runtime()?;
            let removed = if labs.is_empty() {
                rt.block_on(netns::clean())?
            } else {
                let mut v = Vec::new();
                for l in &labs {
                    v.push(rt.block_on(netns::down(l))?);
                }
                v
            };
            let mut any = false;
            for r in removed.iter().filter(|r| r.found) {
                any = true;
                println!(
                    "{}: removed {} namespaces, stopped {} processes",
                    r.lab,
                    r.namespaces.len(),
                    r.processes
                );
            }
            if !any {
                println!("nothing to clean");
            }
            Ok(0)
        }
        Command::Status { lab: which, json } => status(which, json),
        Command::Exec {
            lab: l,
            node,
            command,
        } => exec(&l, &node, &command),
        Command::Check { lab: l, json } => {
            let running = lab::find(&l)?;
            let report = check::run(&running.topology, &running.naming).context("probing")?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", check::render(&running.topology, &report));
            }
            Ok(if report.failures().next().is_some() {
                1
            } else {
                0
            })
        }
        Command::Graph { file, format } => {
            let t = topology::load(&file)?;
            print!("{}", graph::render(&t, format));
            Ok(0)
        }
        Command::Gen {
            what:
                GenWhat::Chain {
                    nodes,
                    name,
                    output,
                },
        } => {
            if !topology::valid_name(&name) {
                return Err(bad_input(format!(
                    "--name \"{name}\" must be 1-32 letters, digits, '-' or '_'"
                )));
            }
            let text = generate::chain(nodes, &name).map_err(bad_input)?;
            match output {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => print!("{text}"),
            }
            Ok(0)
        }
    }
}

fn status(which: Option<String>, json: bool) -> Result<i32> {
    let labs = match which {
        Some(l) => vec![l],
        None => netns::LabState::lab_names(),
    };
    let rt = runtime()?;
    let mut out = Vec::new();
    for l in &labs {
        let state =
            netns::LabState::load(l)?.ok_or_else(|| anyhow::anyhow!("no lab named {l} is up"))?;
        let mut nodes = Vec::new();
        for n in &state.nodes {
            let devices = if netns::namespace::exists(&n.namespace) {
                rt.block_on(netns::inspect::devices(&n.namespace))
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            nodes.push(serde_json::json!({ "node": n.node, "namespace": n.namespace, "kind": n.kind, "present": netns::namespace::exists(&n.namespace), "devices": devices }));
        }
        out.push(serde_json::json!({ "lab": l, "status": state.status, "topology": state.topology, "created": state.created, "nodes": nodes, "processes": state.processes }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    if out.is_empty() {
        println!("no labs are up");
    }
    for l in &out {
        println!(
            "lab {} ({}), {} nodes, from {}",
            l["lab"].as_str().unwrap_or(""),
            l["status"].as_str().unwrap_or(""),
            l["nodes"].as_array().map(|a| a.len()).unwrap_or(0),
            l["topology"].as_str().unwrap_or("?")
        );
        for n in l["nodes"].as_array().into_iter().flatten() {
            let present = if n["present"].as_bool() == Some(true) {
                ""
            } else {
                "  (namespace missing)"
            };
            println!(
                "  {} [{}] ns {}{present}",
                n["node"].as_str().unwrap_or(""),
                n["kind"].as_str().unwrap_or(""),
                n["namespace"].as_str().unwrap_or("")
            );
            for d in n["devices"].as_array().into_iter().flatten() {
                let addrs: Vec<&str> = d["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str())
                    .filter(|a| !a.starts_with("fe80:") && *a != "127.0.0.1/8" && *a != "::1/128")
                    .collect();
                let master = d["master"]
                    .as_str()
                    .map(|m| format!(" master {m}"))
                    .unwrap_or_default();
                println!(
                    "    {:<15} {:<8} {:<14} mtu {:<5}{master} {}",
                    d["name"].as_str().unwrap_or(""),
                    d["kind"].as_str().unwrap_or(""),
                    format!(
                        "{}{}",
                        if d["up"].as_bool() == Some(true) {
                            "UP/"
                        } else {
                            "DOWN/"
                        },
                        d["state"].as_str().unwrap_or("")
                    ),
                    d["mtu"],
                    addrs.join(" ")
                );
            }
        }
    }
    Ok(0)
}

/// Enter the node's namespace (and a private mount namespace with the node's own
/// /sys, as `ip netns exec` does), then become the command.
fn exec(l: &str, node: &str, command: &[String]) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    let state =
        netns::LabState::load(l)?.ok_or_else(|| anyhow::anyhow!("no lab named {l} is up"))?;
    let Some(rec) = state.nodes.iter().find(|n| n.node == node) else {
        let names: Vec<&str> = state.nodes.iter().map(|n| n.node.as_str()).collect();
        return Err(bad_input(format!(
            "lab {l} has no node \"{node}\"; its nodes: {}",
            names.join(", ")
        )));
    };
    netns::namespace::enter(&rec.namespace)
        .with_context(|| format!("entering namespace {}", rec.namespace))?;
    remount_sys();
    let err = std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec();
    Err(Exit {
        code: 127,
        message: format!("running {}: {err}", command[0]),
    }
    .into())
}

/// Best effort: a /sys that shows the namespace's devices. Failure leaves the host's.
fn remount_sys() {
    use nix::mount::{MntFlags, MsFlags, mount, umount2};
    if nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).is_err() {
        return;
    }
    let _ = mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_SLAVE | MsFlags::MS_REC,
        None::<&str>,
    );
    if umount2("/sys", MntFlags::MNT_DETACH).is_ok() {
        let _ = mount(
            Some("sysfs"),
            "/sys",
            Some("sysfs"),
            MsFlags::empty(),
            None::<&str>,
        );
    }
}
