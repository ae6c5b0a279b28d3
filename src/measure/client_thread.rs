//! The engine's client on a thread inside the source node's namespace, with
//! the latency probes beside it; and the probes alone, for idle latency.

use crate::engine::client::{self, ClientOptions};
use crate::engine::latency::sockets::Phase;
use crate::engine::report::TestReport;
use anyhow::{Context, Result, anyhow};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a running client's path is checked for a dead datapath.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Run the client on a thread inside `ns`. The server is still closing the previous
/// test for a moment after the client has finished it, and answers "busy" meanwhile:
/// try again then, for up to two seconds. A stock iperf3 server (one outside the
/// lab) instead resets the connections that reach it in that moment, or refuses
/// them while it listens afresh: those are tried again too. Meanwhile `dead` is asked every
/// WATCH_EVERY whether a datapath on the path has died: then the client stops at
/// once (the caller names the datapath), instead of waiting out its timeouts.
pub(super) fn run_client(
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
pub(super) fn idle_probes(
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
            let seconds = Duration::from_secs_f64(seconds);
            crate::engine::latency::sockets::probe_for(at, rate, seconds, cancel)
                .with_context(|| format!("probing {at}"))
        })
        .join()
        .map_err(|_| anyhow!("the probe thread panicked"))?
    })
}

/// Whether a client's failure is the server still ending the test before.
pub(super) fn between_tests(e: &client::RunError) -> bool {
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
