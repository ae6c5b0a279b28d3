//! Waiting for a condition, never for a fixed time: every wait here polls what
//! the test needs (a socket listening, a counter moved, a process gone) and
//! fails with what never happened once a generous bound passes. A verdict then
//! depends on what the code did, not on how fast or how loaded the machine is.

use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// How often a condition is looked at again: short against every bound here.
const POLL: Duration = Duration::from_millis(10);

/// The bound of most waits: far above what the slowest machine needs, so only a
/// condition that never comes fails.
pub const BOUND: Duration = Duration::from_secs(20);

/// Polls `f` until it gives a value, for at most `bound`: the value, or None
/// if the bound passed first.
pub fn poll<T>(bound: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() >= bound {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `f` until it gives a value; panics saying `what` never happened
/// within `bound`.
pub fn wait_for<T>(what: &str, bound: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll(bound, f).unwrap_or_else(|| panic!("waited {bound:?} and this never happened: {what}"))
}

/// Polls `f` until it holds; panics saying `what` never happened within `bound`.
pub fn wait_until(what: &str, bound: Duration, mut f: impl FnMut() -> bool) {
    wait_for(what, bound, || f().then_some(()))
}

/// Waits for `child` to end: its status. Kills it and panics naming `what` if
/// it still runs after `bound`.
pub fn wait_exit(child: &mut Child, what: &str, bound: Duration) -> ExitStatus {
    match poll(bound, || child.try_wait().expect("waiting for a child")) {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("waited {bound:?} and this never happened: {what}");
        }
    }
}

/// The sockets (inodes) listening on TCP `port` (or bound to UDP `port`) in
/// the network namespace of process `pid`, from /proc/PID/net: no probe
/// connection, which would use up a one-off server.
fn sockets_on(pid: u32, port: u16, udp: bool) -> Vec<String> {
    let needle = format!(":{port:04X}");
    let (files, state) = if udp {
        (["udp", "udp6"], "07")
    } else {
        (["tcp", "tcp6"], "0A")
    };
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| {
                    let c: Vec<&str> = l.split_whitespace().collect();
                    (c.len() > 9 && c[1].ends_with(&needle) && c[3] == state)
                        .then(|| c[9].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether process `pid` holds one of these sockets.
fn holds_socket(pid: u32, inodes: &[String]) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| e.ok()).any(|e| {
                std::fs::read_link(e.path()).is_ok_and(|t| {
                    let t = t.to_string_lossy();
                    inodes.iter().any(|i| t == format!("socket:[{i}]"))
                })
            })
        })
        .unwrap_or(false)
}

/// Whether `child` (a server, maybe started through `ip netns exec`, which
/// becomes it) listens on TCP `port`.
pub fn listens(child: &Child, port: u16) -> bool {
    holds_socket(child.id(), &sockets_on(child.id(), port, false))
}

/// Whether `child` has a UDP socket bound to `port`.
pub fn bound_udp(child: &Child, port: u16) -> bool {
    holds_socket(child.id(), &sockets_on(child.id(), port, true))
}

/// Waits until `child` listens on TCP `port`; panics if it exits first or
/// never does.
pub fn wait_listening(child: &mut Child, port: u16, what: &str) {
    wait_until(
        &format!("{what} listening on TCP port {port}"),
        BOUND,
        || {
            if let Some(s) = child.try_wait().expect("waiting for a child") {
                panic!("{what} exited ({s}) before it listened on TCP port {port}");
            }
            listens(child, port)
        },
    );
}

/// Waits until `path` exists and `ready` holds for its text (a stats file a
/// datapath rewrites, say); the text.
pub fn wait_for_file(path: &Path, what: &str, mut ready: impl FnMut(&str) -> bool) -> String {
    wait_for(&format!("{what} ({})", path.display()), BOUND, || {
        let t = std::fs::read_to_string(path).ok()?;
        ready(&t).then_some(t)
    })
}
