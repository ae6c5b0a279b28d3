//! A lab's life: `up` records before it builds and undoes everything on failure or
//! interruption; `down` removes what the record names and the marker on each
//! namespace's lo confirms, and every process inside those namespaces; `clean`
//! removes every lab's leftovers, by record and by marker.

use crate::apply::{self, ApplyError, Cancel, Progress};
use crate::host;
use crate::ops::{HostAttach, Op, Plan};
use crate::process::{self, ProcessId};
use crate::state::{
    HostLinkRecord, HostNetns, LabLock, LabState, NodeRecord, Status, host_links, now_unix,
};
use crate::{inspect, namespace};
use std::collections::BTreeSet;
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
    /// Host interfaces the plan may not take, every one with its reason.
    #[error(transparent)]
    HostRefused(#[from] crate::host::Refused),
    /// The plan needs something this kernel lacks, named as `tunbench doctor` names it.
    #[error("{0} (nothing was built)")]
    Lacking(String),
    /// Links between hosts that cannot work here, every one with its reason.
    #[error("links to other hosts refused (nothing was built):\n  {}", .0.join("\n  "))]
    CrossHost(Vec<String>),
    #[error("reading host interface {iface} before moving it (nothing was built): {source}")]
    HostRead { iface: String, source: io::Error },
}

fn state_err(lab: &str) -> impl FnOnce(io::Error) -> LabError + '_ {
    move |source| LabError::State {
        dir: LabState::dir(lab),
        source,
    }
}

/// Build a lab from its plan. On error or cancellation nothing of it remains.
/// Host links are checked first (`host::preflight`; `force` takes an interface
/// with the host's default route or global addresses anyway) and a moved
/// interface's host state is recorded before anything is made.
pub async fn up(
    plan: &Plan,
    topology: Option<PathBuf>,
    cancel: &Cancel,
    progress: Progress<'_>,
    force: bool,
) -> Result<(), LabError> {
    let lab = plan.lab.as_str();
    let lock = claim(lab)?;
    // Another lab's or someone else's namespace is never taken over, nor removed by
    // our rollback: refuse before recording anything.
    if let Some((_, ns, _)) = plan.nodes.iter().find(|(_, ns, _)| namespace::exists(ns)) {
        return refuse(lock, lab, LabError::NamespaceTaken(ns.clone(), lab.into()));
    }
    if let Some(why) = lacking_vxlan(plan) {
        return refuse(lock, lab, LabError::Lacking(why));
    }
    if let Err(problems) = apply::vxlan_preflight(plan).await {
        return refuse(lock, lab, LabError::CrossHost(problems));
    }
    let (host_netns, host_links) = match read_host_links(plan, force).await {
        Ok(h) => h,
        Err(e) => return refuse(lock, lab, e),
    };
    let state = building_record(plan, topology, host_netns, host_links);
    // Write-ahead: the record names every namespace before the first one exists.
    state.save_locked(&lock).map_err(state_err(lab))?;
    drop(lock);
    match apply::apply(plan, cancel, progress).await {
        Ok(()) => LabState::update(lab, |s| {
            s.status = Status::Up;
            s.builder = None;
        })
        .map_err(state_err(lab)),
        Err(e) => roll_back(lab, e).await,
    }
}

/// Why a plan with cross-host (VXLAN) links cannot be built on this kernel,
/// if it cannot: a probe that could not tell refuses nothing (the kernel's
/// own answer is named the same way when the device is made).
fn lacking_vxlan(plan: &Plan) -> Option<String> {
    let needs = plan
        .ops
        .iter()
        .any(|o| matches!(o, crate::ops::Op::Vxlan { .. }));
    let feature = crate::features::Feature::Vxlan;
    // Probed on a thread of its own: no runtime of this one's is entered.
    let absent = needs
        && std::thread::spawn(move || feature.known_absent())
            .join()
            .unwrap_or(false);
    absent.then(|| feature.refusal("place the nodes of every link that crosses hosts on one host"))
}

/// The lab's lock, held by `up` from this check to the record: two `up`s of
/// one lab never both go ahead. Refused when the lab has a record already.
fn claim(lab: &str) -> Result<LabLock, LabError> {
    let lock = LabLock::create(lab).map_err(state_err(lab))?;
    if let Some(s) = LabState::load(lab).map_err(state_err(lab))? {
        let building = s.builder.is_some_and(|b| b.alive());
        return Err(if s.status == Status::Up || building {
            LabError::AlreadyUp(lab.into())
        } else {
            LabError::Stale(lab.into())
        });
    }
    Ok(lock)
}

/// Refuse `up` before anything is recorded: the directory made just now for
/// the lock holds nothing.
fn refuse(lock: LabLock, lab: &str, e: LabError) -> Result<(), LabError> {
    drop(lock);
    let _ = std::fs::remove_dir(LabState::dir(lab));
    Err(e)
}

/// Host interfaces: refused before anything is recorded or made; a moved
/// one's host state read now, while the host still has it. The host's
/// namespace (None without host links) and the records.
async fn read_host_links(
    plan: &Plan,
    force: bool,
) -> Result<(Option<HostNetns>, Vec<HostLinkRecord>), LabError> {
    let mut links = host_links(plan);
    if links.is_empty() {
        return Ok((None, links));
    }
    host::preflight(plan, force).await?;
    let (id, file) = HostNetns::current().map_err(|source| LabError::HostRead {
        iface: links[0].host.clone(),
        source,
    })?;
    for l in links.iter_mut().filter(|l| l.attach == HostAttach::Move) {
        match host::read_interface(&file, &l.host).await {
            Ok(i) => l.moved = Some(i),
            Err(source) => {
                let iface = l.host.clone();
                return Err(LabError::HostRead { iface, source });
            }
        }
    }
    Ok((Some(id), links))
}

/// The record of a lab `up` is building, written before anything is made.
fn building_record(
    plan: &Plan,
    topology: Option<PathBuf>,
    host_netns: Option<HostNetns>,
    host_links: Vec<HostLinkRecord>,
) -> LabState {
    LabState {
        lab: plan.lab.clone(),
        host: plan.host.clone(),
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
        host_netns,
        host_links,
        machine_wide: machine_wide_sysctls(plan),
    }
}

/// "key=value" of each machine-wide sysctl the plan's namespaces write, once.
fn machine_wide_sysctls(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for op in &plan.ops {
        if let Op::Namespace { sysctls, .. } = op {
            for (k, v) in sysctls {
                let kv = format!("{k}={v}");
                if crate::sysctl::machine_wide(k).is_some() && !out.contains(&kv) {
                    out.push(kv);
                }
            }
        }
    }
    out
}

/// `up` failed: remove everything built so far, and say whether that worked.
async fn roll_back(lab: &str, e: ApplyError) -> Result<(), LabError> {
    // Lost a race for a name: that namespace is someone else's; forget it.
    if let ApplyError::Taken(ns) = &e {
        LabState::update(lab, |s| s.nodes.retain(|n| &n.namespace != ns))
            .map_err(state_err(lab))?;
    }
    match down(lab).await {
        // A host interface that could not be given back keeps its
        // namespace and the record: not everything was removed.
        Ok(r) if LabState::dir(lab).exists() => Err(LabError::RollbackFailed(
            e,
            io::Error::other(format!(
                "{}; see `tunbench down {lab}`",
                r.problems.join("; ")
            )),
        )),
        Ok(_) => Err(LabError::RolledBack(e)),
        Err(r) => Err(LabError::RollbackFailed(e, r)),
    }
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Removed {
    pub lab: String,
    pub namespaces: Vec<String>,
    pub processes: usize,
    /// Whether there was anything of the lab at all.
    pub found: bool,
    /// What was wrong or left alone, each naming the object and why: an unreadable
    /// record, a recorded namespace without the lab's marker, a failed removal,
    /// a host interface that could not be given back.
    pub problems: Vec<String>,
    /// Host interfaces moved back into the host with their state restored.
    pub returned: Vec<String>,
    /// Machine-wide settings the lab made that stay: "key=value: why".
    pub left_set: Vec<String>,
}

/// Remove what the lab owns: the processes its record names, every process inside
/// its namespaces, the namespaces that carry its marker (named by the record or
/// found by the marker), then the record. Idempotent: a lab that is gone is success.
pub async fn down(lab: &str) -> io::Result<Removed> {
    let mut r = Removed {
        lab: lab.to_string(),
        ..Default::default()
    };
    // Held to the end, so no record is added to a lab while it is removed.
    let lock = LabLock::existing(lab).map_err(state_err_io(lab))?;
    r.found = lock.is_some();
    let state = match LabState::load(lab) {
        Ok(s) => s,
        Err(e) => {
            // An unreadable record: the markers still say which namespaces are the lab's.
            r.problems.push(format!("unreadable record: {e}"));
            None
        }
    };
    let mut namespaces: Vec<String> = Vec::new();
    if let Some(s) = &state {
        // An `up` still building (another process) is stopped first, or it would go on
        // making objects after we removed them.
        let mut owned: Vec<ProcessId> = s.processes.iter().map(|p| p.id).collect();
        owned.extend(s.builder.filter(|b| b.pid != std::process::id() as i32));
        r.processes += process::stop_all(&owned, Duration::from_secs(2));
        namespaces = recorded_namespaces(lab, s, &mut r).await;
        r.left_set = s
            .machine_wide
            .iter()
            .map(|kv| {
                let key = kv.split('=').next().unwrap_or(kv);
                format!(
                    "{kv} stays: {}",
                    crate::sysctl::machine_wide(key).unwrap_or("machine-wide")
                )
            })
            .collect();
    }
    for ns in marked(Some(lab)).await {
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    r.processes += stop_inside(&namespaces);
    // Moved interfaces go back to the host before their namespace is deleted
    // (which would destroy a veth, and send a NIC to the init namespace bare).
    // One that cannot keeps its namespace and its record, for a later retry.
    let mut kept: Vec<HostLinkRecord> = Vec::new();
    if let Some(s) = &state {
        kept = give_back_all(s, &mut r).await;
    }
    let keep: BTreeSet<&str> = kept.iter().map(|l| l.ns.as_str()).collect();
    namespaces.retain(|ns| !keep.contains(ns.as_str()));
    for ns in namespaces {
        // Its VXLAN devices first: see remove_all_in.
        if namespace::exists(&ns) && !namespace::is_placeholder(&ns) {
            if let Err(e) = apply::vxlan::remove_all_in(&ns).await {
                r.problems
                    .push(format!("removing the VXLAN devices of {ns}: {e}"));
            }
        }
        match namespace::delete(&ns) {
            Ok(true) => {
                r.namespaces.push(ns);
                r.found = true;
            }
            Ok(false) => {}
            Err(e) => r.problems.push(format!("removing namespace {ns}: {e}")),
        }
    }
    match (&state, &lock) {
        (Some(s), Some(lock)) if !kept.is_empty() => {
            // What is left: the namespaces holding what was not given back.
            let mut left = s.clone();
            left.nodes.retain(|n| keep.contains(n.namespace.as_str()));
            left.processes.clear();
            left.builder = None;
            left.host_links = kept;
            left.save_locked(lock).map_err(state_err_io(lab))?;
        }
        _ => LabState::remove(lab).map_err(state_err_io(lab))?,
    }
    drop(lock);
    Ok(r)
}

/// The namespaces `lab`'s record names that exist and are the lab's; each
/// one left alone is named in `r.problems`, with why.
async fn recorded_namespaces(lab: &str, s: &LabState, r: &mut Removed) -> Vec<String> {
    let mut namespaces = Vec::new();
    for ns in s.namespaces().filter(|ns| namespace::exists(ns)) {
        // An `up` killed while making this one left only its empty file.
        if namespace::is_placeholder(ns) {
            namespaces.push(ns.to_string());
            continue;
        }
        // A record is only a file: the kernel object's marker says whose it is.
        match inspect::marker_of(ns).await {
            Ok(Some(m)) if m == lab => namespaces.push(ns.to_string()),
            Ok(Some(m)) => r.problems.push(format!(
                "left namespace {ns} alone: the record names it but it carries lab {m}'s marker"
            )),
            Ok(None) => r.problems.push(format!(
                "left namespace {ns} alone: the record names it but it carries no tunbench marker"
            )),
            Err(e) => r.problems.push(format!(
                "left namespace {ns} alone: reading its marker: {e}"
            )),
        }
    }
    namespaces
}

/// Give back every interface the lab moved; the records of those that could
/// not be (each named in `r.problems`, with why).
async fn give_back_all(s: &LabState, r: &mut Removed) -> Vec<HostLinkRecord> {
    let moved: Vec<&HostLinkRecord> = s.host_links.iter().filter(|l| l.moved.is_some()).collect();
    if moved.is_empty() {
        return Vec::new();
    }
    let host = s.host_netns.as_ref().and_then(|h| h.find());
    let mut kept = Vec::new();
    for l in moved {
        let Some(file) = &host else {
            let whose = s
                .host_netns
                .as_ref()
                .map(|h| h.describe())
                .unwrap_or_else(|| "(not recorded)".into());
            r.problems.push(format!(
                "cannot give back host interface {}: the host's namespace ({whose}) is gone; left {} and the record in place",
                l.describe(),
                l.ns
            ));
            kept.push(l.clone());
            continue;
        };
        match host::give_back(file, l, &s.lab).await {
            Ok((from, warnings)) => {
                r.returned.push(format!("{} (from {from})", l.host));
                r.problems.extend(warnings);
            }
            Err(host::NotGiven::NotOurs(why)) => r.problems.push(format!(
                "host interface {} not given back: {why}",
                l.describe()
            )),
            Err(why) => {
                r.problems.push(format!(
                    "giving back host interface {}: {why}; left {} and the record in place",
                    l.describe(),
                    l.ns
                ));
                kept.push(l.clone());
            }
        }
        r.found = true;
    }
    kept
}

fn state_err_io(lab: &str) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| {
        io::Error::new(
            e.kind(),
            format!("lab state in {}: {e}", LabState::dir(lab).display()),
        )
    }
}

/// Stop every process inside the namespaces (recorded or not: one started by hand
/// with `ip netns exec` too), so none outlives them. How many there were.
fn stop_inside(namespaces: &[String]) -> usize {
    let ids: Vec<ProcessId> = namespaces
        .iter()
        .flat_map(|ns| namespace::pids(ns))
        .filter_map(ProcessId::of)
        .collect();
    process::stop_all(&ids, Duration::from_secs(2))
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

/// Remove every lab: each record, then every marked namespace no record named. A
/// lab that cannot be removed is reported in its entry and the others go on.
pub async fn clean() -> Vec<Removed> {
    let mut out = Vec::new();
    for lab in LabState::lab_names() {
        out.push(down(&lab).await.unwrap_or_else(|e| Removed {
            lab: lab.clone(),
            found: true,
            problems: vec![e.to_string()],
            ..Default::default()
        }));
    }
    // A namespace a lab's record still names (kept for a host interface that
    // could not be given back) is that lab's, not an orphan.
    let recorded: BTreeSet<String> = LabState::lab_names()
        .iter()
        .filter_map(|l| LabState::load(l).ok().flatten())
        .flat_map(|s| s.nodes.into_iter().map(|n| n.namespace))
        .collect();
    let orphans: Vec<String> = marked(None)
        .await
        .into_iter()
        .filter(|ns| !recorded.contains(ns))
        .collect();
    if !orphans.is_empty() {
        let mut r = Removed {
            lab: "(no record)".into(),
            found: true,
            ..Default::default()
        };
        r.processes += stop_inside(&orphans);
        for ns in orphans {
            match namespace::delete(&ns) {
                Ok(true) => r.namespaces.push(ns),
                Ok(false) => {}
                Err(e) => r.problems.push(format!("removing namespace {ns}: {e}")),
            }
        }
        out.push(r);
    }
    out
}
