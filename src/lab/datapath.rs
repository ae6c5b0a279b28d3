//! Userspace datapath processes: one per userspace tunnel endpoint and one per
//! userspace router (its slow path), started by `up` inside the node's
//! namespace, recorded in the lab's state (pid + start time) so `down` and
//! `clean` stop them, with their log and a stats file in the lab's state
//! directory.
//!
//! No datapath runs unrecorded (write-ahead, as the lab's own record is): each
//! process is started behind a start gate, a pipe whose write end only `up`
//! holds. The process waits on the gate before doing anything; `up` records its
//! pid and start time in the lab's state and only then opens the gate. If `up`
//! dies first (kill -9 included), the kernel closes the write end, the process
//! reads end-of-file and exits without having touched the lab: `down` and
//! `clean` never meet a datapath they do not know of.

pub use crate::endpoint::state_files;
use crate::lab::Running;
use crate::plan::Naming;
pub use crate::plan::datapath::{Job, jobs, log_path, stats_path, userspace_endpoints};
use crate::topology::Topology;
use crate::topology::tunnel::{Role, Tunnel};
use anyhow::{Context, Result, bail};
use netns::process::ProcessId;
use netns::state::{LabState, OwnedProcess};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
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

/// How far `up` got with a lab's datapaths, so `status` can tell a lab still
/// starting them (or whose `up` died doing so) from one that runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartRecord {
    /// The `tunbench up` starting them.
    pub starter: ProcessId,
    /// Every datapath attached to its TUN (an IKEv2 end: has its child SA).
    pub ready: bool,
}

impl StartRecord {
    fn path(lab: &str) -> PathBuf {
        LabState::dir(lab).join("datapaths-start.json")
    }

    fn save(&self, lab: &str) -> Result<()> {
        let path = Self::path(lab);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(self)?)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn load(lab: &str) -> Option<StartRecord> {
        serde_json::from_slice(&std::fs::read(Self::path(lab)).ok()?).ok()
    }
}

/// Start the datapath processes of a lab that `netns::up` has just built, and
/// wait until each has attached to its TUN (an IKEv2 end: until its child SA
/// is installed). On error or `cancel` the caller takes the lab down (which
/// stops whatever was started).
pub fn start_all(
    t: &Topology,
    naming: &Naming,
    part: Option<&crate::topology::hosts::HostPart>,
    exe: Option<&std::path::Path>,
    cancel: &netns::Cancel,
) -> Result<usize> {
    let jobs = crate::plan::datapath::jobs_on(t, part);
    let mut record = StartRecord {
        starter: ProcessId::current(),
        ready: false,
    };
    record.save(&naming.lab)?;
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
    record.ready = true;
    record.save(&naming.lab)?;
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
        None => crate::lab::spawn::tunbench_exe()?,
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
    let (gate_read, gate_write) =
        pass_start_gate(&mut cmd).context("making a datapath's start gate")?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // A session of its own: the datapath outlives `up`.
    crate::lab::spawn::enter_before_exec(&mut cmd, &nsfile, true);
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {what} in {ns}"))?;
    drop(gate_read);
    let Some(id) = ProcessId::of(child.id() as i32) else {
        bail!("{what} in {ns} exited at once");
    };
    // Test hook: widen the window between start and record, where a test kills `up`.
    if let Some(ms) = netns::test_env::var_os("TUNBENCH_TEST_RECORD_DELAY_MS")
        .and_then(|v| v.to_str()?.parse().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    // On error the gate closes unopened (dropped), and the process exits.
    LabState::add_process(&naming.lab, OwnedProcess { id, what })?;
    open_gate(gate_write).with_context(|| format!("letting {} start", job.label(node)))?;
    // Reap it in the background when it ends while we still run (tunbench run).
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(id)
}

/// Gives `cmd` a start gate: `--start-gate FD`, the read end of a pipe that
/// only the child keeps across exec (the write end stays close-on-exec, so no
/// process but this one holds it). Both ends are returned; the read end must
/// stay open until after spawn.
pub(crate) fn pass_start_gate(cmd: &mut Command) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = start_gate()?;
    let fd = read.as_raw_fd();
    cmd.args(["--start-gate", &fd.to_string()]);
    // SAFETY: fcntl is async-signal-safe; the caller keeps `read` open until
    // after spawn.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((read, write))
}

/// A pipe, both ends close-on-exec: (read, write).
fn start_gate() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills both fds on success; each is then owned once.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

pub(crate) fn open_gate(write: OwnedFd) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::File::from(write).write_all(b"go")
}

/// In the datapath process, before anything else: wait until `up` has
/// recorded this process and opens the gate; end-of-file means `up` died
/// first, and nothing would ever stop this process, so it does not start.
pub fn wait_at_start_gate(fd: RawFd) -> Result<()> {
    if fd < 3 {
        bail!("--start-gate {fd}: not a start gate (it is one of stdin, stdout, stderr)");
    }
    // SAFETY: `up` passes the read end of the gate, open for this process only;
    // it is owned (and closed) here once.
    let mut gate = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut byte = [0u8; 1];
    loop {
        match std::io::Read::read(&mut gate, &mut byte) {
            Ok(1..) => return Ok(()),
            Ok(0) => bail!(
                "`tunbench up` ended before it recorded this datapath in the lab's state; not starting (nothing would stop it)"
            ),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context(format!("waiting at start gate {fd}")),
        }
    }
}

/// The `tunbench datapath` process (started by `up` in the node's namespace):
/// waits at the start gate, reads the lab's record, then runs the endpoint of
/// `tunnel` on `node`, the relay of one `way` of link `node`, or router
/// `node`'s slow path, until a stop signal.
pub fn run(
    lab: &str,
    tunnel: Option<&str>,
    way: Option<crate::plan::link::Way>,
    node: &str,
    start_gate: Option<RawFd>,
) -> Result<()> {
    if let Some(fd) = start_gate {
        wait_at_start_gate(fd)?;
    }
    let running = crate::lab::find(lab)?;
    match (tunnel, way) {
        (Some(t), _) => {
            let (tun, role) = endpoint(&running, t, node)?;
            crate::endpoint::run(lab, &running.topology, tun, role, node)
        }
        (None, Some(w)) => crate::endpoint::relay::run(lab, &running.topology, node, w),
        (None, None) => crate::endpoint::router::run(lab, &running.topology, node),
    }
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
