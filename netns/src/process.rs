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
