//! The measurement server: a tunbench server started in the target node's
//! namespace (a child process the lab owns, so its CPU is its own) and waited
//! for, or, for a target outside the lab, an iperf3 server someone else runs,
//! asked once whether it answers.

use super::spec::MeasureSpec;
use crate::lab::Running;
use crate::lab::spawn::{enter_before_exec, tunbench_exe};
use crate::vocab::target::MeasureTarget;
use anyhow::{Context, Result, anyhow, bail};
use netns::process::ProcessId;
use netns::state::{LabState, OwnedProcess};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the measurement server listens inside the target namespace.
pub const SERVER_PORT: u16 = crate::vocab::target::DEFAULT_PORT;

/// The server the measurement uses, and its port. A node's server is ours to
/// start and stop (it stops when the returned process drops), unless its
/// part's `up` started it; one outside is only asked, from `client_ns`,
/// whether it answers.
pub(super) fn server_for(
    lab: &Running,
    spec: &MeasureSpec,
    client_ns: &str,
) -> Result<(Option<ServerProcess>, u16)> {
    Ok(match &spec.to {
        MeasureTarget::Node(_) if spec.server_started_by_up => (None, SERVER_PORT),
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
            probe_outside_server(client_ns, &spec.from, SocketAddr::new(*address, *port))?;
            (None, *port)
        }
    })
}

pub(super) struct ServerProcess {
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

/// Wait until the server answers in its namespace (a probe connection is harmless:
/// it sends no cookie). A refusal (not listening yet) is tried again at once;
/// an attempt may take the rest of the wait, since a path's round trip can be
/// long (a link delayed 100 ms each way answers a SYN after 200 ms).
pub(super) fn wait_for_server(ns: &str, addr: SocketAddr) -> Result<()> {
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
