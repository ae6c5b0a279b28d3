//! Whether a lab's datapath processes run: what `status` reports, and what a
//! measurement checks before and after each cell, so a dead datapath is named
//! as such instead of surfacing as a zero or a timeout.

use crate::lab::datapath::{Job, StartRecord, jobs, stats_path};
use crate::topology::Topology;
use netns::LabState;
use netns::state::Status;
use std::net::IpAddr;

/// Where one datapath process is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// Not yet started, or started and not yet attached to its TUN.
    Starting,
    Running,
    /// Gone, with the reason if known (its log's last line).
    Dead(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatapathHealth {
    pub job: Job,
    pub node: String,
    pub pid: Option<i32>,
    pub liveness: Liveness,
}

impl DatapathHealth {
    /// "datapath wg@b (pid 42) is not running: REASON", for a dead one.
    pub fn not_running(&self) -> Option<String> {
        let Liveness::Dead(reason) = &self.liveness else {
            return None;
        };
        let pid = self.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        Some(format!(
            "{}{pid} is not running: {reason}",
            self.job.label(&self.node)
        ))
    }
}

/// The last non-empty line of a datapath's log: why it ended, if it said.
fn last_log_line(lab: &str, job: &Job, node: &str) -> String {
    let log =
        std::fs::read_to_string(crate::lab::datapath::log_path(lab, job, node)).unwrap_or_default();
    match log.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        Some(l) => format!("its log ends with \"{l}\""),
        None => "it logged nothing (killed, or ended without a word)".into(),
    }
}

/// The health of the datapaths among `which`, as the lab's record and /proc
/// say now.
pub fn health_of(lab: &str, state: &LabState, which: &[(Job, String)]) -> Vec<DatapathHealth> {
    let ready = StartRecord::load(lab).is_some_and(|r| r.ready);
    which
        .iter()
        .map(|(job, node)| {
            let what = job.describe(node);
            let recorded = state.processes.iter().find(|p| p.what == what);
            let liveness = match recorded {
                // `up` records each process before it lets it start.
                None if !ready => Liveness::Starting,
                None => Liveness::Dead("no process of it is recorded in the lab's state".into()),
                Some(p) if !p.id.alive() => Liveness::Dead(last_log_line(lab, job, node)),
                Some(_) if stats_path(lab, job, node).exists() => Liveness::Running,
                Some(_) => Liveness::Starting,
            };
            DatapathHealth {
                job: job.clone(),
                node: node.clone(),
                pid: recorded.map(|p| p.id.pid),
                liveness,
            }
        })
        .collect()
}

/// Every datapath of the lab (of this host's part, when the record names one).
pub fn health(lab: &str, t: &Topology, state: &LabState) -> Vec<DatapathHealth> {
    let part = state.host.as_deref().and_then(|h| t.host_part(h));
    health_of(
        lab,
        state,
        &crate::plan::datapath::jobs_on(t, part.as_ref()),
    )
}

/// The lab's status in one word: "building" (namespaces and links),
/// "starting" (datapaths), "incomplete" (`up` died while starting them),
/// "degraded" (a datapath died), or "up".
pub fn lab_status(lab: &str, state: &LabState, health: &[DatapathHealth]) -> &'static str {
    if state.status == Status::Building {
        return "building";
    }
    if health.is_empty() {
        return "up";
    }
    match StartRecord::load(lab) {
        Some(r) if r.ready => {}
        Some(r) if !r.starter.alive() => return "incomplete",
        // Not yet written: `up` has just finished the namespaces.
        _ => return "starting",
    }
    if health
        .iter()
        .any(|h| matches!(h.liveness, Liveness::Dead(_)))
    {
        "degraded"
    } else {
        "up"
    }
}

/// The datapaths a packet to `target` may cross. A point-to-point tunnel's
/// only if `target` is inside it; a router's slow path, a link relay and a
/// tunnel without an overlay of its own (DS-Lite) are in the underlay, which
/// this does not trace hop by hop, so they count for every target.
pub fn on_path(t: &Topology, target: IpAddr) -> Vec<(Job, String)> {
    jobs(t)
        .into_iter()
        .filter(|(job, _)| {
            let Job::Tunnel(name) = job else {
                return true;
            };
            let Some(w) = t
                .tunnels
                .iter()
                .find(|x| &x.name == name)
                .and_then(|x| x.overlay())
            else {
                return true;
            };
            (0..w.peers.len()).any(|i| {
                w.neighbours(i)
                    .into_iter()
                    .any(|j| w.allowed_for(i, j).iter().any(|n| n.contains(target)))
            })
        })
        .collect()
}

/// The first datapath toward `target` that is not running, said plainly.
pub fn dead_on_path(lab: &str, t: &Topology, target: IpAddr) -> Option<String> {
    let state = LabState::load(lab).ok().flatten()?;
    // A part of a lab over several hosts watches only the datapaths it runs.
    let part = state.host.as_deref().and_then(|h| t.host_part(h));
    let here: Vec<(Job, String)> = on_path(t, target)
        .into_iter()
        .filter(|(_, node)| crate::plan::host::runs_here(t, part.as_ref(), node))
        .collect();
    health_of(lab, &state, &here)
        .iter()
        .find_map(DatapathHealth::not_running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_datapath_is_named_with_its_pid_and_reason() {
        let h = DatapathHealth {
            job: Job::Tunnel("wg0".into()),
            node: "r1".into(),
            pid: Some(42),
            liveness: Liveness::Dead("its log ends with \"boom\"".into()),
        };
        assert_eq!(
            h.not_running().unwrap(),
            "datapath wg0@r1 (pid 42) is not running: its log ends with \"boom\""
        );
        let running = DatapathHealth {
            liveness: Liveness::Running,
            ..h
        };
        assert_eq!(running.not_running(), None);
    }
}
