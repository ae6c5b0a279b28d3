//! Runs a measurement in a running lab: a tunbench server in the target node's
//! namespace (a child process the lab owns, so its CPU is its own), the client on
//! a thread inside the source node's namespace, cell after cell. A target outside
//! the lab is an iperf3 server someone else runs: no server is started, and one
//! connection from the source node before the first cell says whether it answers.

use super::results::*;
use super::search::{Confirmation, RateSearch};
use crate::engine::client::{self, ClientOptions};
use crate::engine::latency::sockets::Phase;
use crate::engine::params::{Protocol, TestParams};
use crate::engine::report::TestReport;
use crate::lab::Running;
use crate::lab::spawn::{enter_before_exec, tunbench_exe};
use crate::topology::routing::Router;
use crate::vocab::target::MeasureTarget;
use crate::vocab::{Cell, Direction, Family, Proto};
use anyhow::{Context, Result, anyhow, bail};
use netns::process::ProcessId;
use netns::state::{LabState, OwnedProcess};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the measurement server listens inside the target namespace.
pub const SERVER_PORT: u16 = 5201;

/// What to measure between two nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureSpec {
    /// The path's name in reports ("raw" for the plain underlay).
    pub path: String,
    pub scenario: Option<String>,
    pub from: String,
    /// A node of the lab, or an iperf3 server outside it.
    pub to: MeasureTarget,
    pub ipv4: Option<IpAddr>,
    pub ipv6: Option<IpAddr>,
    pub families: Vec<Family>,
    pub protocols: Vec<Proto>,
    pub directions: Vec<Direction>,
    pub streams: Vec<u32>,
    pub runs: u32,
    /// Seconds per run (and per confirmation of a UDP search).
    pub duration: f64,
    /// Seconds per UDP search trial.
    pub trial_duration: f64,
    pub udp_loss_percent: f64,
    pub udp_len: u32,
    /// Trials of the UDP rate search, confirmation runs not counted.
    pub udp_max_trials: usize,
    pub udp_start_bps: f64,
    pub udp_ceiling_bps: f64,
    /// The tunbench binary that serves in the target namespace (default: this
    /// executable, when it is tunbench).
    pub server_exe: Option<std::path::PathBuf>,
    /// Latency probes: idle before the cells, then under every cell's runs;
    /// `None` measures none.
    pub latency: Option<LatencySpec>,
}

/// How the latency probes run.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySpec {
    /// Probes per second.
    pub rate: f64,
    /// Seconds of probes alone, per family, before the cells.
    pub idle_seconds: f64,
    /// The echo responder's UDP port.
    pub port: u16,
}

impl Default for LatencySpec {
    fn default() -> Self {
        LatencySpec {
            rate: crate::engine::latency::sockets::DEFAULT_RATE,
            idle_seconds: DEFAULT_IDLE_SECONDS,
            port: crate::engine::latency::sockets::ECHO_PORT,
        }
    }
}

pub use crate::vocab::LATENCY_IDLE_SECONDS as DEFAULT_IDLE_SECONDS;

impl MeasureSpec {
    /// The seed's method: both families, both protocols, both directions, one
    /// stream, best of 5 runs of 10 s, UDP loss within 10 %.
    pub fn seed(from: &str, to: impl Into<MeasureTarget>) -> Self {
        let to: MeasureTarget = to.into();
        MeasureSpec {
            // A server outside the lab runs no tunbench echo responder unless
            // someone started one: probes there only when asked.
            latency: to.node().map(|_| LatencySpec::default()),
            path: "raw".into(),
            scenario: None,
            from: from.into(),
            to,
            ipv4: None,
            ipv6: None,
            families: vec![Family::Ipv4, Family::Ipv6],
            protocols: vec![Proto::Tcp, Proto::Udp],
            directions: vec![Direction::Sender, Direction::Receiver],
            streams: vec![1],
            runs: 5,
            duration: 10.0,
            trial_duration: 2.0,
            udp_loss_percent: 10.0,
            udp_len: 1448,
            udp_max_trials: 8,
            udp_start_bps: 500e6,
            udp_ceiling_bps: 100e9,
            server_exe: None,
        }
    }

    /// The addresses measured to: the ones given for a node target, the
    /// target's own for an address.
    pub fn target_ips(&self) -> Vec<IpAddr> {
        match &self.to {
            MeasureTarget::Node(_) => [self.ipv4, self.ipv6].into_iter().flatten().collect(),
            MeasureTarget::Address { address, .. } => vec![*address],
        }
    }

    /// Every cell, in the seed's order: family, protocol, direction, then streams.
    pub fn cells(&self) -> Vec<Cell> {
        let mut v = Vec::new();
        for &streams in &self.streams {
            for &family in &self.families {
                for &protocol in &self.protocols {
                    for &direction in &self.directions {
                        v.push(Cell {
                            family,
                            protocol,
                            direction,
                            streams,
                        });
                    }
                }
            }
        }
        v
    }

    /// Seconds the whole measurement should take, for progress estimates.
    pub fn estimated_seconds(&self) -> f64 {
        let idle = self
            .latency
            .as_ref()
            .map_or(0.0, |l| (l.idle_seconds + 0.3) * self.families.len() as f64);
        idle + self
            .cells()
            .iter()
            .map(|c| match c.protocol {
                Proto::Tcp => self.runs as f64 * (self.duration + 0.3),
                Proto::Udp => {
                    self.runs as f64 * (self.duration + 0.3)
                        + self.udp_max_trials as f64 * 0.75 * (self.trial_duration + 0.3)
                }
            })
            .sum::<f64>()
    }
}

/// Where the measurement is, for a progress display.
#[derive(Debug, Clone)]
pub struct Progress {
    pub path: String,
    pub cell: Cell,
    pub cell_index: usize,
    pub cells: usize,
    /// "run 2/5" or "search trial 3 at 850 Mbit/s".
    pub step: String,
    pub elapsed: Duration,
    pub estimated_total: Duration,
    /// The cell's result once it is done (the step then says "done"): what a
    /// display without a terminal prints, one line a cell.
    pub finished: Option<CellResult>,
}

/// The target address of each family: for a node, the one given, or the first
/// address of the target node that routing says the source reaches; for an
/// address outside the lab, that address, its family's only one.
pub fn target_addresses(
    lab: &Running,
    spec: &MeasureSpec,
) -> Result<(Option<IpAddr>, Option<IpAddr>)> {
    let t = &lab.topology;
    let from = t
        .node_index(&spec.from)
        .ok_or_else(|| anyhow!("lab {} has no node \"{}\"", lab.naming.lab, spec.from))?;
    let to_name = match &spec.to {
        MeasureTarget::Node(n) => n,
        MeasureTarget::Address { address, .. } => {
            if spec.ipv4.is_some() || spec.ipv6.is_some() {
                bail!(
                    "a target address is given for {}, which is an address itself",
                    spec.to
                );
            }
            let own = Family::of(*address);
            if let Some(f) = spec.families.iter().find(|f| **f != own) {
                bail!(
                    "{} cannot be measured to {}, an {} address",
                    f.word(),
                    spec.to,
                    own.title()
                );
            }
            return Ok(if address.is_ipv4() {
                (Some(*address), None)
            } else {
                (None, Some(*address))
            });
        }
    };
    let to = t
        .node_index(to_name)
        .ok_or_else(|| anyhow!("lab {} has no node \"{to_name}\"", lab.naming.lab))?;
    if from == to {
        bail!("--from and --to are the same node \"{}\"", spec.from);
    }
    let router = Router::new(t);
    let owned = t.node_addresses(to);
    let pick = |v4: bool, given: Option<IpAddr>| -> Result<Option<IpAddr>> {
        if let Some(a) = given {
            if !owned.iter().any(|(_, n)| n.ip() == a) {
                bail!("{a} is not an address of node \"{to_name}\"");
            }
            return Ok(Some(a));
        }
        Ok(owned
            .iter()
            .map(|(_, n)| n.ip())
            .filter(|a| a.is_ipv4() == v4)
            .find(|a| router.echo_works(from, *a).is_ok()))
    };
    Ok((pick(true, spec.ipv4)?, pick(false, spec.ipv6)?))
}

struct ServerProcess {
    child: Child,
    id: Option<ProcessId>,
    lab: String,
    // Held for its drop: the cap stops with the server.
    _log_cap: LogCap,
}

impl ServerProcess {
    fn start(
        lab: &Running,
        node: &str,
        exe: Option<&std::path::Path>,
        echo_port: Option<u16>,
    ) -> Result<ServerProcess> {
        let ns = lab.naming.namespace(node);
        let nsfile =
            netns::namespace::open(&ns).with_context(|| format!("opening namespace {ns}"))?;
        let logs = LabState::log_dir(&lab.naming.lab);
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log_path = logs.join(format!("server-{node}.log"));
        let log = open_server_log(&log_path)?;
        let exe = match exe {
            Some(e) => e.to_path_buf(),
            None => tunbench_exe()?,
        };
        let mut cmd = Command::new(exe);
        cmd.args([
            "server",
            "-p",
            &SERVER_PORT.to_string(),
            "--idle-timeout",
            "10",
        ]);
        if let Some(port) = echo_port {
            cmd.args(["--echo-port", &port.to_string()]);
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        enter_before_exec(&mut cmd, &nsfile, false);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting the measurement server in {ns}"))?;
        let id = ProcessId::of(child.id() as i32);
        if let Some(id) = id {
            LabState::add_process(
                &lab.naming.lab,
                OwnedProcess {
                    id,
                    what: format!("measurement server on {node}"),
                },
            )?;
        }
        Ok(ServerProcess {
            child,
            id,
            lab: lab.naming.lab.clone(),
            _log_cap: LogCap::start(log_path),
        })
    }
}

/// The server's log, fresh and in append mode: a cut-back by [`LogCap`] then
/// makes the server's next line land at the new end, not at its old offset
/// (which would leave a sparse file as long as before).
fn open_server_log(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.set_len(0)?;
    Ok(f)
}

/// Holds the server's log under /run to the datapaths' cap while `measure` runs:
/// a client that fails test after test makes the server log a line each time.
struct LogCap {
    stop: std::sync::Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LogCap {
    fn start(path: std::path::PathBuf) -> LogCap {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("server-log-cap".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    crate::driver::process_log::cap_file(
                        &path,
                        crate::driver::process_log::LOG_CAP,
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
            .ok();
        LogCap { stop, thread }
    }
}

impl Drop for LogCap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(id) = self.id {
            let _ = LabState::remove_process(&self.lab, id);
        }
    }
}

/// How often a running client's path is checked for a dead datapath.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Run the client on a thread inside `ns`. The server is still closing the previous
/// test for a moment after the client has finished it, and answers "busy" meanwhile:
/// try again then, for up to two seconds. A stock iperf3 server (one outside the
/// lab) instead resets the connections that reach it in that moment, or refuses
/// them while it listens afresh: those are tried again too. Meanwhile `dead` is asked every
/// WATCH_EVERY whether a datapath on the path has died: then the client stops at
/// once (the caller names the datapath), instead of waiting out its timeouts.
fn run_client(
    ns: &str,
    mut opts: ClientOptions,
    probes: Option<(SocketAddr, f64)>,
    dead: &dyn Fn() -> Option<String>,
) -> Result<(TestReport, Option<Phase>)> {
    let abort = Arc::new(AtomicBool::new(false));
    opts.abort = Some(abort.clone());
    let ns = ns.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = (|| -> Result<(TestReport, Option<Phase>)> {
            netns::namespace::enter(&ns).with_context(|| format!("entering namespace {ns}"))?;
            // The probes run beside the client for as long as it does; a thread
            // made here is in the namespace too.
            let (report, phase) = while_probing(probes, || {
                let until = Instant::now() + Duration::from_secs(2);
                loop {
                    match client::run(&opts) {
                        Err(e) if between_tests(&e) && Instant::now() < until => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        r => return r,
                    }
                }
            });
            Ok((report?, phase))
        })();
        let _ = tx.send(r);
    });
    let r = loop {
        match rx.recv_timeout(WATCH_EVERY) {
            Ok(r) => break r,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if !abort.load(Ordering::Relaxed) && dead().is_some() {
                    abort.store(true, Ordering::Relaxed);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                break Err(anyhow!("the client thread panicked"));
            }
        }
    };
    let _ = h.join();
    r
}

/// Runs `work` with latency probes to `probes` (echo address, rate) going on
/// beside it, in the calling thread's namespace; the probes stop when it ends.
/// A probe thread that failed is no figure, never the work's failure.
fn while_probing<T>(
    probes: Option<(SocketAddr, f64)>,
    work: impl FnOnce() -> T,
) -> (T, Option<Phase>) {
    let Some((at, rate)) = probes else {
        return (work(), None);
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("probes".into())
            .spawn_scoped(s, || {
                crate::engine::latency::sockets::probe(at, rate, &stop)
            });
        let out = work();
        stop.store(true, Ordering::Relaxed);
        let phase = h.ok().and_then(|h| h.join().ok()).and_then(|r| r.ok());
        (out, phase)
    })
}

/// Probes alone from `ns` to `at` for `seconds` (stopping early on `cancel`):
/// the path's idle latency.
pub fn idle_probes(
    ns: &str,
    at: SocketAddr,
    rate: f64,
    seconds: f64,
    cancel: &AtomicBool,
) -> Result<Phase> {
    let ns = ns.to_string();
    std::thread::scope(|s| {
        s.spawn(|| {
            netns::namespace::enter(&ns).with_context(|| format!("entering namespace {ns}"))?;
            let end = Instant::now() + Duration::from_secs_f64(seconds);
            let (_, phase) = while_probing(Some((at, rate)), || {
                while Instant::now() < end && !cancel.load(Ordering::Relaxed) {
                    std::thread::sleep(
                        end.saturating_duration_since(Instant::now())
                            .min(Duration::from_millis(50)),
                    );
                }
            });
            phase.ok_or_else(|| anyhow!("the probes to {at} could not run"))
        })
        .join()
        .map_err(|_| anyhow!("the probe thread panicked"))?
    })
}

/// Whether a client's failure is the server still ending the test before.
fn between_tests(e: &client::RunError) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionRefused, ConnectionReset};
    match e {
        client::RunError::Protocol(crate::engine::control::ClientError::Busy) => true,
        client::RunError::Connect { source, .. } => {
            matches!(
                source.kind(),
                ConnectionReset | ConnectionRefused | BrokenPipe
            )
        }
        _ => false,
    }
}

/// Wait until the server answers in its namespace (a probe connection is harmless:
/// it sends no cookie). A refusal (not listening yet) is tried again at once;
/// an attempt may take the rest of the wait, since a path's round trip can be
/// long (a link delayed 100 ms each way answers a SYN after 200 ms).
fn wait_for_server(ns: &str, addr: SocketAddr) -> Result<()> {
    let ns = ns.to_string();
    std::thread::spawn(move || -> Result<()> {
        netns::namespace::enter(&ns)?;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(200));
            match std::net::TcpStream::connect_timeout(&addr, left) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    bail!("the measurement server at {addr} does not answer: {e}")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
    .join()
    .map_err(|_| anyhow!("probe thread panicked"))?
}

/// How long an outside server has to accept the probe connection: it is
/// expected to be running already, so this is the path's round trip with room.
const OUTSIDE_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// One connection from `from`'s namespace to a server outside the lab, before
/// the first cell: nothing answering there is said once, plainly, instead of as
/// a failed connection in every cell. (iperf3 logs the probe as a client that
/// sent no parameters, and goes on serving.)
fn probe_outside_server(ns: &str, from: &str, addr: SocketAddr) -> Result<()> {
    let ns = ns.to_string();
    let from = from.to_string();
    std::thread::spawn(move || -> Result<()> {
        netns::namespace::enter(&ns).with_context(|| format!("entering namespace {ns}"))?;
        match std::net::TcpStream::connect_timeout(&addr, OUTSIDE_PROBE_TIMEOUT) {
            Ok(_) => Ok(()),
            Err(e) => bail!(
                "nothing answers on {addr} from node {from} ({}); the server outside the lab must be running first (iperf3 -s -p {port}, or tunbench server -p {port}) and reachable from {from}",
                if e.kind() == std::io::ErrorKind::TimedOut {
                    format!("no answer within {} s", OUTSIDE_PROBE_TIMEOUT.as_secs())
                } else {
                    e.to_string()
                },
                port = addr.port()
            ),
        }
    })
    .join()
    .map_err(|_| anyhow!("probe thread panicked"))?
}

/// The receiver's loss, except that a run in which datagrams were sent and none
/// arrived is 100 % lost (the receiver, seeing no sequence numbers, counts no
/// gaps): a path that swallows every datagram, like one whose MTU they exceed,
/// must fail the search, not pass it.
fn udp_loss(d: &crate::engine::report::DirectionSum) -> f64 {
    if d.received_bytes == 0 && d.sent_bps > 0.0 {
        100.0
    } else {
        d.lost_percent
    }
}

/// A UDP run at `asked` bit/s as the search and the confirmation judge it. A
/// sender that could not offer the rate asked (under 95 % of it) is said to be
/// limited, and what it did send is the run's offered rate.
fn udp_trial(r: &TestReport, asked: f64) -> Trial {
    let d = r.forward();
    let sender_limited = d.sent_bps > 0.0 && d.sent_bps < 0.95 * asked;
    Trial {
        offered_bps: if sender_limited { d.sent_bps } else { asked },
        received_bps: d.arrived_bps(),
        lost_percent: udp_loss(&d),
        out_of_order: d.out_of_order,
        remeasured: false,
        sender_limited,
        reordered: false,
    }
}

fn to_run(r: &TestReport, offered: Option<f64>, sender_limited: bool) -> Run {
    let d = r.forward();
    let intervals = receiving_intervals(r);
    let udp = r.protocol == Protocol::Udp;
    Run {
        bits_per_second: d.arrived_bps(),
        bytes: d.received_bytes,
        seconds: d.seconds,
        retransmits: if udp { None } else { d.retransmits },
        offered_bps: offered,
        lost_percent: udp.then_some(udp_loss(&d)),
        jitter_ms: udp.then_some(d.jitter_ms),
        out_of_order: udp.then_some(d.out_of_order),
        sender_limited,
        cpu_client: r.cpu_local.total,
        cpu_server: r.cpu_remote.total,
        interval_seconds: (!intervals.is_empty()).then_some(1.0),
        intervals_bps: intervals,
    }
}

/// The rate per one-second interval at the receiving end, as the client
/// recorded it: a download's (the client receives) or a TCP upload's (what the
/// client sent, which TCP holds to what arrives, give or take the socket
/// buffers). A UDP upload's would be the offered rate, not what arrived: none.
fn receiving_intervals(r: &TestReport) -> Vec<f64> {
    if r.protocol == Protocol::Udp && !r.params.reverse {
        return Vec::new();
    }
    // An interval that begins once a timed test's time is up is a late stop's
    // remainder (the control thread woke after the streams had finished): no
    // second of the test, and a rate of nothing on a chart.
    let over = match r.params.time {
        0 => f64::INFINITY,
        t => f64::from(r.params.omit) + f64::from(t),
    };
    r.intervals
        .iter()
        .filter(|iv| !iv.omitted && iv.end > iv.start && iv.start < over)
        .map(|iv| {
            let bytes: u64 = iv.streams.iter().map(|&(_, b, _)| b).sum();
            bytes as f64 * 8.0 / (iv.end - iv.start)
        })
        .collect()
}

/// Measure every cell of `spec` in the running lab.
pub fn measure(
    lab: &Running,
    spec: &MeasureSpec,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PathResult> {
    let (v4, v6) = target_addresses(lab, spec)?;
    let client_ns = lab.naming.namespace(&spec.from);
    // A node's server is ours to start and stop; one outside is only asked
    // whether it answers.
    let (_server, port) = match &spec.to {
        MeasureTarget::Node(node) => (
            Some(ServerProcess::start(
                lab,
                node,
                spec.server_exe.as_deref(),
                spec.latency.as_ref().map(|l| l.port),
            )?),
            SERVER_PORT,
        ),
        MeasureTarget::Address { address, port } => {
            probe_outside_server(&client_ns, &spec.from, SocketAddr::new(*address, *port))?;
            (None, *port)
        }
    };
    let cells = spec.cells();
    let from = lab.topology.node_index(&spec.from);
    let started = Instant::now();
    let estimate = Duration::from_secs_f64(spec.estimated_seconds());
    let mut out = PathResult {
        path: spec.path.clone(),
        scenario: spec.scenario.clone(),
        from: spec.from.clone(),
        to: spec.to.to_string(),
        ipv4: v4.map(|a| a.to_string()),
        ipv6: v6.map(|a| a.to_string()),
        cells: Vec::new(),
        idle_latency: Vec::new(),
        tunnel: None,
    };
    let mut waited = std::collections::BTreeSet::new();
    let label = out.label_for(spec);
    let done = |out: &PathResult, i: usize| Progress {
        path: label.clone(),
        cell: cells[i],
        cell_index: i,
        cells: cells.len(),
        step: "done".into(),
        elapsed: started.elapsed(),
        estimated_total: estimate,
        finished: out.cells.last().cloned(),
    };
    // Idle latency per family, probes alone, before any load (RRUL's order).
    // The server outside the lab, if asked for, gives round trips only: its
    // clock is not ours.
    let one_way = spec.to.node().is_some();
    if let Some(l) = &spec.latency {
        for &family in &spec.families {
            let Some(addr) = (match family {
                Family::Ipv4 => v4,
                Family::Ipv6 => v6,
            }) else {
                continue;
            };
            if crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr).is_some() {
                continue;
            }
            if cancel.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            let server = SocketAddr::new(addr, port);
            if one_way && waited.insert(server) {
                wait_for_server(&client_ns, server)?;
            }
            progress(&Progress {
                path: label.clone(),
                cell: cells.first().copied().unwrap_or(Cell {
                    family,
                    protocol: Proto::Tcp,
                    direction: Direction::Sender,
                    streams: 1,
                }),
                cell_index: 0,
                cells: cells.len(),
                // Before this cell: the family's probes alone.
                step: format!(
                    "first {} idle latency, probes alone for {} s",
                    family.title(),
                    l.idle_seconds
                ),
                elapsed: started.elapsed(),
                estimated_total: estimate,
                finished: None,
            });
            let echo = SocketAddr::new(addr, l.port);
            if let Ok(phase) = idle_probes(&client_ns, echo, l.rate, l.idle_seconds, cancel) {
                if let Some(lat) = phase.probes.latency(l.rate, phase.start_ns, one_way) {
                    out.idle_latency.push((family, lat));
                }
            }
        }
    }
    for (i, cell) in cells.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let addr = match cell.family {
            Family::Ipv4 => v4,
            Family::Ipv6 => v6,
        };
        let Some(addr) = addr else {
            out.cells.push(CellResult::failed(
                *cell,
                format!(
                    "node \"{}\" has no {} address that \"{}\" reaches",
                    spec.to,
                    cell.family.word(),
                    spec.from
                ),
            ));
            progress(&done(&out, i));
            continue;
        };
        // What the lab's device models predict for the cell, whatever the
        // measurement makes of it.
        let model_limit = from.and_then(|f| {
            crate::topology::limit::model_limit(&lab.topology, f, addr, cell).map(|l| ModelLimit {
                what: l.what,
                bps: l.bps,
            })
        });
        // What the shaped links let through of the cell's packets: physics'
        // prediction, beside the models'.
        let wire_limit = from.and_then(|f| {
            crate::topology::wire::wire_limit(&lab.topology, f, addr, cell, spec.udp_len).map(|l| {
                ModelLimit {
                    what: l.what,
                    bps: l.bps,
                }
            })
        });
        // A dead datapath on the way fails the cell by name, before the client
        // would meet it as a timeout (or, after the cell, as a suspect figure).
        let dead_datapath =
            || crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr);
        if let Some(why) = dead_datapath() {
            out.cells.push(CellResult {
                model_limit,
                wire_limit,
                ..CellResult::failed(*cell, why)
            });
            progress(&done(&out, i));
            continue;
        }
        let server = SocketAddr::new(addr, port);
        if spec.to.node().is_some() && waited.insert(server) {
            wait_for_server(&client_ns, server)?;
        }
        let mut report = |step: String| {
            progress(&Progress {
                path: label.clone(),
                cell: *cell,
                cell_index: i,
                cells: cells.len(),
                step,
                elapsed: started.elapsed(),
                estimated_total: estimate,
                finished: None,
            })
        };
        let base = TestParams {
            protocol: if cell.protocol == Proto::Udp {
                Protocol::Udp
            } else {
                Protocol::Tcp
            },
            time: spec.duration.ceil().max(1.0) as u32,
            parallel: cell.streams,
            reverse: cell.direction == Direction::Receiver,
            len: if cell.protocol == Proto::Udp {
                spec.udp_len
            } else {
                crate::engine::protocol::DEFAULT_TCP_BLOCK
            },
            ..Default::default()
        };
        // Probes during the cell's runs (not its search trials), pooled.
        let probes = spec
            .latency
            .as_ref()
            .map(|l| (SocketAddr::new(addr, l.port), l.rate));
        let pooled = std::cell::RefCell::new(None::<Phase>);
        let pool = |phase: Option<Phase>| {
            if let Some(p) = phase {
                let mut all = pooled.borrow_mut();
                match all.as_mut() {
                    Some(a) => a.probes.pool(p.probes),
                    None => *all = Some(p),
                }
            }
        };
        let opts = |params: TestParams| ClientOptions {
            server,
            bind: None,
            params,
            connect_timeout: Duration::from_secs(5),
            // Per-second records, for the reports' charts over time.
            intervals: true,
            abort: None,
        };
        let result = (|| -> Result<CellResult> {
            match cell.protocol {
                Proto::Tcp => {
                    let mut runs = Vec::new();
                    for n in 1..=spec.runs {
                        if cancel.load(Ordering::Relaxed) {
                            bail!("interrupted");
                        }
                        report(format!("run {n}/{}", spec.runs));
                        let (r, phase) =
                            run_client(&client_ns, opts(base.clone()), probes, &dead_datapath)?;
                        pool(phase);
                        runs.push(to_run(&r, None, false));
                    }
                    Ok(CellResult::from_runs(*cell, runs, None))
                }
                Proto::Udp => {
                    let mut search = RateSearch::new(
                        spec.udp_start_bps,
                        spec.udp_ceiling_bps,
                        spec.udp_loss_percent,
                        spec.udp_max_trials,
                    );
                    let trial_time = spec.trial_duration.ceil().max(1.0) as u32;
                    while let Some(rate) = search.next_rate() {
                        if cancel.load(Ordering::Relaxed) {
                            bail!("interrupted");
                        }
                        report(format!(
                            "search trial {} at {:.0} Mbit/s",
                            search.trials().len() + 1,
                            rate / 1e6
                        ));
                        let p = TestParams {
                            time: trial_time,
                            rate: (rate / cell.streams as f64) as u64,
                            ..base.clone()
                        };
                        let (r, _) = run_client(&client_ns, opts(p), None, &dead_datapath)?;
                        let t = udp_trial(&r, rate);
                        // A sender that cannot offer the rate asked: what it did send
                        // is the trial's rate, and the search goes no higher.
                        if t.sender_limited {
                            search.cap(t.offered_bps);
                        }
                        search.record_trial(t);
                    }
                    let failed = |search: &RateSearch, confirmations: Vec<Trial>, why: String| {
                        Ok(CellResult {
                            search: Some(UdpSearch {
                                loss_threshold_percent: spec.udp_loss_percent,
                                trials: search.trials().to_vec(),
                                rate_bps: 0.0,
                                confirmations,
                            }),
                            ..CellResult::failed(*cell, why)
                        })
                    };
                    let Some(found) = search.result() else {
                        return failed(
                            &search,
                            Vec::new(),
                            format!("loss above {} % at every rate tried", spec.udp_loss_percent),
                        );
                    };
                    // Full-length runs at that rate, each within the threshold or
                    // stepped down until one is.
                    let mut confirm =
                        Confirmation::new(found, spec.runs as usize, spec.udp_loss_percent);
                    let mut runs = Vec::new();
                    while let Some(rate) = confirm.next_rate() {
                        if cancel.load(Ordering::Relaxed) {
                            bail!("interrupted");
                        }
                        let step_down = if rate < found { " (stepped down)" } else { "" };
                        report(format!(
                            "run {}/{} at {:.0} Mbit/s{step_down}",
                            confirm.passing().count() + 1,
                            spec.runs,
                            rate / 1e6
                        ));
                        let p = TestParams {
                            rate: (rate / cell.streams as f64) as u64,
                            ..base.clone()
                        };
                        let (r, phase) = run_client(&client_ns, opts(p), probes, &dead_datapath)?;
                        pool(phase);
                        let t = udp_trial(&r, rate);
                        runs.push(to_run(&r, Some(t.offered_bps), t.sender_limited));
                        confirm.record(t);
                    }
                    let confirmations = confirm.runs().to_vec();
                    let Some(rate) = confirm.result() else {
                        let tried: Vec<String> = confirmations
                            .iter()
                            .map(|t| {
                                format!(
                                    "{:.0} Mbit/s lost {:.1} %",
                                    t.offered_bps / 1e6,
                                    t.lost_percent
                                )
                            })
                            .collect();
                        return failed(
                            &search,
                            confirmations,
                            format!(
                                "no full-length run kept the loss within {} % (the search's trials did, at {:.0} Mbit/s): {}",
                                spec.udp_loss_percent,
                                found / 1e6,
                                tried.join(", ")
                            ),
                        );
                    };
                    // Only the runs that count: within the rule, not made again.
                    let kept: Vec<Run> = runs
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| confirm.counts(*i))
                        .map(|(_, r)| r)
                        .collect();
                    Ok(CellResult::from_runs(
                        *cell,
                        kept,
                        Some(UdpSearch {
                            loss_threshold_percent: spec.udp_loss_percent,
                            trials: search.trials().to_vec(),
                            rate_bps: rate,
                            confirmations,
                        }),
                    ))
                }
            }
        })();
        let latency = pooled.into_inner().and_then(|p| {
            let rate = spec.latency.as_ref().map_or(0.0, |l| l.rate);
            p.probes.latency(rate, p.start_ns, one_way)
        });
        let result = result.map(|r| CellResult { latency, ..r });
        match result {
            Err(e) if e.to_string() == "interrupted" => return Err(e),
            result => out.cells.push(CellResult {
                model_limit,
                wire_limit,
                ..match (dead_datapath(), result) {
                    (Some(why), _) => CellResult::failed(*cell, format!("during this cell, {why}")),
                    (None, Ok(r)) => r,
                    // One cell failing (a refused connection, say) is that cell's result.
                    (None, Err(e)) => CellResult::failed(*cell, format!("{e:#}")),
                }
            }),
        }
        progress(&done(&out, i));
    }
    Ok(out)
}

impl PathResult {
    fn label_for(&self, spec: &MeasureSpec) -> String {
        match &spec.scenario {
            Some(s) => format!("{s}/{}", spec.path),
            None => spec.path.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The server writes through its own descriptor while the cap cuts the file
    /// back: its next lines land at the new end, so the file stays small.
    #[test]
    fn a_flooded_server_log_stays_under_the_cap_for_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server-b.log");
        std::fs::write(&path, "an old run's log\n").unwrap();
        let mut server = open_server_log(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "a fresh log");
        let cap = LogCap::start(path.clone());
        let line = format!("{}\n", "x".repeat(1023));
        let cap_bytes = crate::driver::process_log::LOG_CAP;
        for _ in 0..3 * cap_bytes / 1024 {
            server.write_all(line.as_bytes()).unwrap();
        }
        let t0 = std::time::Instant::now();
        while std::fs::metadata(&path).unwrap().len() > cap_bytes + 1024 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the cap never cut the log back"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(cap);
        server.write_all(b"last line\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.len() <= cap_bytes + 1024, "{} bytes", meta.len());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("last line\n"));
        assert!(
            !text.contains('\0'),
            "a sparse file: the writer kept its offset"
        );
    }
}
