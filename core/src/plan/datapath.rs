//! The datapath processes a lab runs (one per userspace tunnel endpoint, per
//! userspace router's slow path, per impaired link direction) and where each
//! keeps its stats file and log in the lab's state directory.

use crate::topology::Topology;
use crate::topology::tunnel::{Datapath, Role, Tunnel};
use netns::state::LabState;
use std::path::PathBuf;

/// What one datapath process runs on its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// One endpoint of this tunnel.
    Tunnel(String),
    /// The node's slow path (a router with datapath = "userspace").
    Router,
    /// One impaired direction of a link, in its relay namespace (node `link.N`).
    Link(crate::plan::link::Way),
}

impl Job {
    /// The file name part: `TUNNEL-NODE`, or `router.NODE` (names have no dots,
    /// so no tunnel's file can be taken for a router's).
    pub fn file_stem(&self, node: &str) -> String {
        match self {
            Job::Tunnel(t) => format!("datapath-{t}-{node}"),
            Job::Router => format!("datapath-router.{node}"),
            Job::Link(w) => format!("datapath-{node}.{}", w.name()),
        }
    }

    /// The short name of the process in errors: `datapath wg@b`.
    pub fn label(&self, node: &str) -> String {
        match self {
            Job::Tunnel(t) => format!("datapath {t}@{node}"),
            Job::Router => format!("datapath router@{node}"),
            Job::Link(w) => format!("datapath relay {}@{node}", w.name()),
        }
    }

    /// What the lab's record calls the process (`OwnedProcess::what`).
    pub fn describe(&self, node: &str) -> String {
        match self {
            Job::Tunnel(t) => format!("the {t} datapath on {node}"),
            Job::Router => format!("the slow path of router {node}"),
            Job::Link(w) => format!("the relay of {node} ({})", w.name()),
        }
    }
}

/// The stats file a datapath process rewrites every second.
pub fn stats_path(lab: &str, job: &Job, node: &str) -> PathBuf {
    LabState::dir(lab).join(format!("{}.json", job.file_stem(node)))
}

pub fn log_path(lab: &str, job: &Job, node: &str) -> PathBuf {
    LabState::log_dir(lab).join(format!("{}.log", job.file_stem(node)))
}

/// Every userspace endpoint of every tunnel: (tunnel, role, node name).
pub fn userspace_endpoints(t: &Topology) -> Vec<(&Tunnel, Role, String)> {
    let mut out = Vec::new();
    for tun in &t.tunnels {
        for (role, node, dp) in tun.endpoints() {
            if dp == Datapath::Userspace {
                out.push((tun, role, t.nodes[node].name.clone()));
            }
        }
    }
    out
}

/// The termination ceilings end `role` of `tun` applies to its inner
/// packets: its node's profile's `[terminations.KIND]` for the tunnel's kind
/// (none for an AFTR, or a node without them).
pub fn termination<'t>(
    t: &'t Topology,
    tun: &Tunnel,
    role: Role,
) -> Option<&'t crate::codec::profile::TerminationModel> {
    let node = tun.endpoints().into_iter().find(|(r, _, _)| *r == role)?.1;
    crate::topology::tunnel::termination::of(tun, role, &t.nodes[node])
}

/// Every datapath process a lab runs: (job, node name).
pub fn jobs(t: &Topology) -> Vec<(Job, String)> {
    let mut out: Vec<(Job, String)> = userspace_endpoints(t)
        .into_iter()
        .map(|(tun, _, node)| (Job::Tunnel(tun.name.clone()), node))
        .collect();
    for n in &t.nodes {
        if n.datapath == Datapath::Userspace {
            out.push((Job::Router, n.name.clone()));
        }
    }
    use crate::plan::link::{Way, relay_node, relayed};
    for (i, l) in relayed(t) {
        for w in [Way::AToB, Way::BToA] {
            if w.impairment(l).needs_relay() {
                out.push((Job::Link(w), relay_node(i)));
            }
        }
    }
    out
}

/// The datapath processes of `jobs` that run on `part`'s host (all of them
/// on one machine, `part` None).
pub fn jobs_on(
    t: &Topology,
    part: Option<&crate::topology::hosts::HostPart>,
) -> Vec<(Job, String)> {
    jobs(t)
        .into_iter()
        .filter(|(_, node)| crate::plan::host::runs_here(t, part, node))
        .collect()
}
