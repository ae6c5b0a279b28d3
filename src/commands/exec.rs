//! `tunbench exec`: a command run inside a node's namespace, which it becomes
//! (its exit code passes through).

use super::{Exit, bad_input};
use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    pub lab: String,
    pub node: String,
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Enter the node's namespace (and a private mount namespace with the node's own
/// /sys, as `ip netns exec` does), then become the command.
pub fn exec(a: ExecArgs) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    let (l, node, command) = (a.lab.as_str(), a.node.as_str(), a.command.as_slice());
    let state =
        netns::LabState::load(l)?.ok_or_else(|| anyhow::anyhow!("no lab named {l} is up"))?;
    let Some(rec) = state.nodes.iter().find(|n| n.node == node) else {
        let names: Vec<&str> = state.nodes.iter().map(|n| n.node.as_str()).collect();
        let external = crate::lab::find(l).ok().is_some_and(|r| {
            r.topology
                .nodes
                .iter()
                .any(|n| n.name == node && !n.kind.is_built())
        });
        if external {
            return Err(bad_input(format!(
                "\"{node}\" is an external device of lab {l}: tunbench has no namespace for it; run commands on the device itself"
            )));
        }
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
