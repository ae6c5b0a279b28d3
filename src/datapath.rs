//! Userspace datapath processes: one per userspace tunnel endpoint and one per
//! userspace router (its slow path), started by `up` inside the node's
//! namespace, recorded in the lab's state (pid + start time) so `down` and
//! `clean` stop them, with their log and a stats file in the lab's state
//! directory.

use crate::lab::Running;
use crate::plan::Naming;
use crate::topology::Topology;
use crate::topology::tunnel::{Datapath, Role, Tunnel};
use anyhow::{Context, Result, bail};
use netns::process::ProcessId;
use netns::state::{LabState, OwnedProcess};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long `up` waits for a datapath process to attach to its TUN.
const READY_WAIT: Duration = Duration::from_secs(10);

/// How long `up` waits for this job: an IKEv2 end is ready once its child SA
/// is installed, which the tunnel's own timeout bounds.
fn ready_wait(t: &Topology, job: &Job) -> Duration {
    use crate::topology::tunnel::TunnelKind;
    let ikev2 = match job {
        Job::Tunnel(name) => {
            t.tunnels
                .iter()
                .find(|x| &x.name == name)
                .and_then(|x| match &x.kind {
                    TunnelKind::Ikev2(e) => Some(e.timeout_secs),
                    _ => None,
                })
        }
        _ => None,
    };
    READY_WAIT + Duration::from_secs(ikev2.unwrap_or(0) as u64)
}

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
    fn file_stem(&self, node: &str) -> String {
        match self {
            Job::Tunnel(t) => format!("datapath-{t}-{node}"),
            Job::Router => format!("datapath-router.{node}"),
            Job::Link(w) => format!("datapath-{node}.{}", w.name()),
        }
    }

    fn describe(&self, node: &str) -> String {
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

fn log_path(lab: &str, job: &Job, node: &str) -> PathBuf {
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

/// Start the datapath processes of a lab that `netns::up` has just built, and
/// wait until each has attached to its TUN (an IKEv2 end: until its child SA
/// is installed). On error or `cancel` the caller takes the lab down (which
/// stops whatever was started).
pub fn start_all(
    t: &Topology,
    naming: &Naming,
    exe: Option<&std::path::Path>,
    cancel: &netns::Cancel,
) -> Result<usize> {
    let jobs = jobs(t);
    let mut started = Vec::new();
    for (job, node) in &jobs {
        let stats = stats_path(&naming.lab, job, node);
        let _ = std::fs::remove_file(&stats);
        let pid = spawn(naming, job, node, exe)?;
        started.push((pid, stats, job, node));
    }
    let t0 = Instant::now();
    for (pid, stats, job, node) in started {
        let what = job.describe(node);
        let wait = ready_wait(t, job);
        let deadline = t0 + wait;
        loop {
            if stats.exists() {
                break;
            }
            if !pid.alive() {
                let log =
                    std::fs::read_to_string(log_path(&naming.lab, job, node)).unwrap_or_default();
                bail!("{what} stopped while starting: {}", log.trim());
            }
            // Ctrl-C: an IKEv2 end may take the tunnel's whole timeout.
            if cancel.is_cancelled() {
                bail!("interrupted while waiting for {what}");
            }
            if Instant::now() > deadline {
                bail!(
                    "{what} did not start within {} s (log: {})",
                    wait.as_secs(),
                    log_path(&naming.lab, job, node).display()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(jobs.len())
}

fn spawn(
    naming: &Naming,
    job: &Job,
    node: &str,
    exe: Option<&std::path::Path>,
) -> Result<ProcessId> {
    let ns = naming.namespace(node);
    let nsfile = netns::namespace::open(&ns).with_context(|| format!("opening namespace {ns}"))?;
    let logs = LabState::log_dir(&naming.lab);
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let log = std::fs::File::create(log_path(&naming.lab, job, node))?;
    let exe = match exe {
        Some(e) => e.to_path_buf(),
        None => crate::measure::runner::tunbench_exe()?,
    };
    let mut cmd = Command::new(exe);
    cmd.args(["datapath", "--lab", &naming.lab, "--node", node]);
    match job {
        Job::Tunnel(t) => {
            cmd.args(["--tunnel", t]);
        }
        Job::Link(w) => {
            cmd.args(["--way", w.name()]);
        }
        Job::Router => {}
    }
    let what = job.describe(node);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // A session of its own: the datapath outlives `up`.
    crate::measure::runner::enter_before_exec(&mut cmd, &nsfile, true);
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {what} in {ns}"))?;
    let Some(id) = ProcessId::of(child.id() as i32) else {
        bail!("{what} in {ns} exited at once");
    };
    LabState::add_process(&naming.lab, OwnedProcess { id, what })?;
    // Reap it in the background when it ends while we still run (tunbench run).
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(id)
}

/// The endpoint of `tunnel` on `node` in a running lab.
pub fn endpoint<'a>(lab: &'a Running, tunnel: &str, node: &str) -> Result<(&'a Tunnel, Role)> {
    let t = &lab.topology;
    let Some(tun) = t.tunnels.iter().find(|x| x.name == tunnel) else {
        bail!("lab {} has no tunnel named {tunnel}", lab.naming.lab);
    };
    let Some(ni) = t.node_index(node) else {
        bail!("lab {} has no node named {node}", lab.naming.lab);
    };
    let Some((role, _, _)) = tun.endpoints().into_iter().find(|(_, n, _)| *n == ni) else {
        bail!("node {node} is no endpoint of tunnel {tunnel}");
    };
    Ok((tun, role))
}

/// Files in a lab's state directory named `PREFIX*.json`, sorted.
pub fn state_files(lab: &str, prefix: &str) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(LabState::dir(lab)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    files
}

/// The stats files of a lab's datapaths, as JSON values.
pub fn stats_of(lab: &str) -> Vec<serde_json::Value> {
    state_files(lab, "datapath-")
        .iter()
        .filter_map(|f| serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok())
        .collect()
}

/// One line per datapath for `status`: who, packets each way, drops, CPU.
pub fn describe(d: &serde_json::Value) -> String {
    let n = |a: &str, b: &str| d[a][b].as_u64().unwrap_or(0);
    let drops: Vec<String> = d["drops"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let drops = if drops.is_empty() {
        "none".to_string()
    } else {
        drops.join(", ")
    };
    let cpu = format!(
        "cpu {:.2} s in {:.0} s",
        d["cpu_seconds"].as_f64().unwrap_or(0.0),
        d["uptime_seconds"].as_f64().unwrap_or(0.0)
    );
    let node = d["node"].as_str().unwrap_or("?");
    if d["role"] == "router" {
        return format!(
            "slow path of router {node} (pid {}): {} pkts {} B forwarded, drops: {drops}, {cpu}",
            d["pid"],
            n("tun_rx", "packets"),
            n("tun_rx", "bytes"),
        );
    }
    format!(
        "datapath {} {} on {node} (pid {}): tun->net {} pkts {} B, net->tun {} pkts {} B, drops: {drops}, {cpu}",
        d["tunnel"].as_str().unwrap_or("?"),
        d["role"].as_str().unwrap_or("?"),
        d["pid"],
        n("tun_rx", "packets"),
        n("tun_rx", "bytes"),
        n("net_rx", "packets"),
        n("net_rx", "bytes"),
    )
}
