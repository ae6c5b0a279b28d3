//! Processes a lab owns, identified by pid and start time so that a recycled pid
//! is never signalled.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: i32,
    /// Field 22 of /proc/PID/stat: clock ticks since boot.
    pub start_time: u64,
}

impl ProcessId {
    pub fn of(pid: i32) -> Option<ProcessId> {
        Some(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    pub fn current() -> ProcessId {
        ProcessId::of(std::process::id() as i32).unwrap_or(ProcessId {
            pid: std::process::id() as i32,
            start_time: 0,
        })
    }

    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }

    /// SIGTERM, then SIGKILL after `grace`. True when it was running.
    pub fn stop(&self, grace: Duration) -> bool {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        if !self.alive() || self.pid == std::process::id() as i32 {
            return false;
        }
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGTERM);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.alive() {
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
            let until = Instant::now() + Duration::from_secs(2);
            while self.alive() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        true
    }
}

/// Stop every process of `ids` at once: SIGTERM to all, SIGKILL to those still
/// running after `grace`. How many were running.
pub fn stop_all(ids: &[ProcessId], grace: Duration) -> usize {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let me = std::process::id() as i32;
    let running: Vec<ProcessId> = ids
        .iter()
        .filter(|p| p.pid != me && p.alive())
        .copied()
        .collect();
    let signal_all = |sig| {
        for p in running.iter().filter(|p| p.alive()) {
            let _ = kill(Pid::from_raw(p.pid), sig);
        }
    };
    let wait = |d: Duration| {
        let until = Instant::now() + d;
        while running.iter().any(|p| p.alive()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    signal_all(Signal::SIGTERM);
    wait(grace);
    signal_all(Signal::SIGKILL);
    wait(Duration::from_secs(2));
    running.len()
}

fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); a zombie counts as gone.
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessId::current();
        assert!(me.start_time > 0);
        assert!(me.alive());
        let recycled = ProcessId {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(
            !recycled.alive(),
            "a pid with another start time is another process"
        );
        // Stopping ourselves is refused.
        assert!(!me.stop(Duration::from_millis(1)));
    }

    #[test]
    fn a_finished_child_is_gone_and_a_running_one_is_stopped() {
        let mut c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let id = ProcessId::of(c.id() as i32).unwrap();
        assert!(id.alive());
        let waiter = std::thread::spawn(move || c.wait());
        assert!(id.stop(Duration::from_secs(2)));
        waiter.join().unwrap().unwrap();
        assert!(!id.alive());
    }
}
