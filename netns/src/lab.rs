//! A lab's life: `up` records before it builds and undoes everything on failure or
//! interruption; `down` removes exactly what the record names; `clean` removes every
//! lab's leftovers, by record and by the marker on each namespace's lo.

use crate::apply::{self, ApplyError, Cancel, Progress};
use crate::ops::Plan;
use crate::process::ProcessId;
use crate::state::{LabState, NodeRecord, Status, now_unix};
use crate::{inspect, namespace};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("lab {0} is already up; take it down first with `tunbench down {0}`")]
    AlreadyUp(String),
    #[error(
        "lab {0} has a record from an `up` that did not finish; remove it with `tunbench down {0}` (or `tunbench clean`)"
    )]
    Stale(String),
    #[error(
        "namespace {0} already exists and does not belong to lab {1}; pick another lab name or --prefix (nothing was built)"
    )]
    NamespaceTaken(String, String),
    #[error("{0} (everything built so far was removed)")]
    RolledBack(ApplyError),
    #[error("{0}; rolling back also failed: {1}")]
    RollbackFailed(ApplyError, io::Error),
    #[error("lab state in {dir}: {source}")]
    State { dir: PathBuf, source: io::Error },
}

fn state_err(lab: &str) -> impl FnOnce(io::Error) -> LabError + '_ {
    move |source| LabError::State {
        dir: LabState::dir(lab),
        source,
    }
}

/// Build a lab from its plan. On error or cancellation nothing of it remains.
pub async fn up(
    plan: &Plan,
    topology: Option<PathBuf>,
    cancel: &Cancel,
    progress: Progress<'_>,
) -> Result<(), LabError> {
    let lab = plan.lab.as_str();
    if let Some(s) = LabState::load(lab).map_err(state_err(lab))? {
        let building = s.builder.is_some_and(|b| b.alive());
        return Err(if s.status == Status::Up || building {
            LabError::AlreadyUp(lab.into())
        } else {
            LabError::Stale(lab.into())
        });
    }
    // Another lab's or someone else's namespace is never taken over, nor removed by
    // our rollback: refuse before recording anything.
    if let Some((_, ns, _)) = plan.nodes.iter().find(|(_, ns, _)| namespace::exists(ns)) {
        return Err(LabError::NamespaceTaken(ns.clone(), lab.into()));
    }
    let mut state = LabState {
        lab: lab.to_string(),
        topology,
        status: Status::Building,
        created: now_unix(),
        builder: Some(ProcessId::current()),
        nodes: plan
            .nodes
            .iter()
            .map(|(node, ns, kind)| NodeRecord {
                node: node.clone(),
                namespace: ns.clone(),
                kind: kind.clone(),
            })
            .collect(),
        processes: Vec::new(),
    };
    // Write-ahead: the record names every namespace before the first one exists.
    state.save().map_err(state_err(lab))?;
    match apply::apply(plan, lab, cancel, progress).await {
        Ok(()) => {
            state.status = Status::Up;
            state.builder = None;
            state.save().map_err(state_err(lab))?;
            Ok(())
        }
        Err(e) => {
            // Lost a race for a name: that namespace is someone else's; forget it.
            if let ApplyError::Taken(ns) = &e {
                state.nodes.retain(|n| &n.namespace != ns);
                state.save().map_err(state_err(lab))?;
            }
            match down(lab).await {
                Ok(_) => Err(LabError::RolledBack(e)),
                Err(r) => Err(LabError::RollbackFailed(e, r)),
            }
        }
    }
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Removed {
    pub lab: String,
    pub namespaces: Vec<String>,
    pub processes: usize,
    /// Whether there was anything of the lab at all.
    pub found: bool,
}

/// Remove what the lab's record names. Idempotent: a lab that is gone is success.
pub async fn down(lab: &str) -> io::Result<Removed> {
    let mut r = Removed {
        lab: lab.to_string(),
        ..Default::default()
    };
    // An unreadable record: fall back to the markers.
    let state = LabState::load(lab).unwrap_or_default();
    r.found = state.is_some() || LabState::dir(lab).exists();
    let mut namespaces: Vec<String> = Vec::new();
    if let Some(s) = &state {
        // An `up` still building (another process) is stopped first, or it would go on
        // making objects after we removed them.
        if let Some(b) = s.builder {
            if b.pid != std::process::id() as i32 && b.stop(Duration::from_secs(2)) {
                r.processes += 1;
            }
        }
        for p in &s.processes {
            if p.id.stop(Duration::from_secs(2)) {
                r.processes += 1;
            }
        }
        namespaces.extend(s.namespaces().map(String::from));
    } else {
        namespaces.extend(marked(Some(lab)).await);
    }
    for ns in namespaces {
        if namespace::delete(&ns)? {
            r.namespaces.push(ns);
            r.found = true;
        }
    }
    LabState::remove(lab)?;
    Ok(r)
}

/// Namespaces whose lo carries a tunbench marker (of `lab`, or of any lab).
pub async fn marked(lab: Option<&str>) -> Vec<String> {
    let mut v = Vec::new();
    for ns in namespace::list() {
        if let Ok(Some(m)) = inspect::marker_of(&ns).await {
            if lab.is_none_or(|l| l == m) {
                v.push(ns);
            }
        }
    }
    v
}

/// Remove every lab: each record, then every marked namespace no record named.
pub async fn clean() -> io::Result<Vec<Removed>> {
    let mut out = Vec::new();
    for lab in LabState::lab_names() {
        out.push(down(&lab).await?);
    }
    let orphans = marked(None).await;
    if !orphans.is_empty() {
        let mut r = Removed {
            lab: "(no record)".into(),
            found: true,
            ..Default::default()
        };
        for ns in orphans {
            if namespace::delete(&ns)? {
                r.namespaces.push(ns);
            }
        }
        out.push(r);
    }
    Ok(out)
}
