//! The servers a host's part of a lab placed on several hosts keeps running
//! while it is up: a measurement server (with its latency echo) in each of
//! its nodes that a `[[measure]]` targets, which `run --host` on other hosts
//! measures to, and one on the host's underlay address, which they measure
//! the underlay between hosts with. Each is a process of the lab, recorded
//! before it starts: `down` and `clean` stop it.

use crate::plan::Naming;
use crate::topology::Topology;
use crate::topology::hosts::HostPart;
use anyhow::{Context, Result, bail};
use netns::process::ProcessId;
use netns::state::{LabState, OwnedProcess};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where a node's measurement server listens (iperf3's port).
pub const NODE_PORT: u16 = crate::vocab::target::DEFAULT_PORT;
/// Where a host's underlay measurement server listens, on its underlay
/// address only: apart from 5201, which a user's own iperf3 may hold.
pub const UNDERLAY_PORT: u16 = 5301;
/// How long a server has to answer once started.
const LISTEN_BOUND: Duration = Duration::from_secs(10);

/// The nodes of `part` that some `[[measure]]` targets, by index.
pub fn targeted_nodes(t: &Topology, part: &HostPart) -> Vec<usize> {
    part.nodes
        .iter()
        .copied()
        .filter(|&n| {
            t.measurements
                .iter()
                .any(|m| m.to.node() == Some(t.nodes[n].name.as_str()))
        })
        .collect()
}

/// Start the part's servers and wait until each answers; the count started.
pub fn start_part_servers(t: &Topology, naming: &Naming, part: &HostPart) -> Result<usize> {
    let nodes = targeted_nodes(t, part);
    for &n in &nodes {
        let node = &t.nodes[n].name;
        let ns = naming.namespace(node);
        let args = [
            "server".to_string(),
            "-p".into(),
            NODE_PORT.to_string(),
            "--echo-port".into(),
            crate::vocab::ECHO_PORT.to_string(),
        ];
        spawn(
            naming,
            Some(&ns),
            &args,
            format!("measurement server on {node}"),
        )?;
        let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), NODE_PORT);
        wait_listening(Some(&ns), local)
            .with_context(|| format!("the measurement server on node {node}"))?;
    }
    let Some(host) = t
        .placement
        .as_ref()
        .and_then(|pl| pl.hosts.iter().find(|h| h.name == part.host))
    else {
        return Ok(nodes.len());
    };
    let at = SocketAddr::new(host.underlay, UNDERLAY_PORT);
    let args = [
        "server".to_string(),
        "-p".into(),
        UNDERLAY_PORT.to_string(),
        "-B".into(),
        host.underlay.to_string(),
    ];
    spawn(
        naming,
        None,
        &args,
        format!("underlay measurement server on {at}"),
    )?;
    wait_listening(None, at).with_context(|| {
        format!(
            "the underlay measurement server of host {} on {at}",
            host.name
        )
    })?;
    Ok(nodes.len() + 1)
}

/// Start `tunbench ARGS` in namespace `ns` (None: this one) in a session of
/// its own, recorded in the lab's state before it may start (a start gate,
/// as the datapaths have), logging to the lab's log directory.
fn spawn(naming: &Naming, ns: Option<&str>, args: &[String], what: String) -> Result<()> {
    let nsfile = match ns {
        Some(ns) => {
            Some(netns::namespace::open(ns).with_context(|| format!("opening namespace {ns}"))?)
        }
        None => None,
    };
    let logs = LabState::log_dir(&naming.lab);
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let log_name = format!("{}.log", what.replace([' ', '/', ':', '[', ']'], "-"));
    let log = std::fs::File::create(logs.join(log_name))?;
    let mut cmd = Command::new(crate::lab::spawn::tunbench_exe()?);
    cmd.args(args);
    let (gate_read, gate_write) =
        crate::lab::datapath::pass_start_gate(&mut cmd).context("making a server's start gate")?;
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    match &nsfile {
        Some(f) => crate::lab::spawn::enter_before_exec(&mut cmd, f, true),
        // SAFETY: setsid is async-signal-safe.
        None => unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        },
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting the {what}"))?;
    drop(gate_read);
    let Some(id) = ProcessId::of(child.id() as i32) else {
        bail!("the {what} exited at once");
    };
    LabState::add_process(
        &naming.lab,
        OwnedProcess {
            id,
            what: what.clone(),
        },
    )?;
    crate::lab::datapath::open_gate(gate_write)
        .with_context(|| format!("letting the {what} start"))?;
    // Reaped in the background should it end while this process runs.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(())
}

/// Wait until something accepts a connection at `at` from namespace `ns`.
fn wait_listening(ns: Option<&str>, at: SocketAddr) -> Result<()> {
    let ns = ns.map(str::to_string);
    std::thread::spawn(move || -> Result<()> {
        if let Some(ns) = &ns {
            netns::namespace::enter(ns).with_context(|| format!("entering namespace {ns}"))?;
        }
        let deadline = Instant::now() + LISTEN_BOUND;
        loop {
            match std::net::TcpStream::connect_timeout(&at, Duration::from_secs(1)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => bail!(
                    "nothing listens on {at} {} s after it started: {e}",
                    LISTEN_BOUND.as_secs()
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the thread waiting for a server panicked"))?
}
