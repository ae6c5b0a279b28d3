//! A pseudo-terminal for a child's standard input, so a test can be the
//! person at the terminal that `tunbench run` waits for (a manual step), and
//! the child's standard error read line by line as it comes.

use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

pub struct Pty {
    master: File,
    slave: Option<OwnedFd>,
}

impl Pty {
    pub fn open() -> Pty {
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: two out-pointers to ints; no name, default terminal settings.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here alone.
        unsafe {
            Pty {
                master: File::from_raw_fd(master),
                slave: Some(OwnedFd::from_raw_fd(slave)),
            }
        }
    }

    /// The terminal's end for a child's standard input (once).
    pub fn stdin(&mut self) -> Stdio {
        Stdio::from(self.slave.take().expect("the terminal's end is given once"))
    }

    /// What a person pressing Enter sends.
    pub fn press_enter(&mut self) {
        self.master
            .write_all(b"\n")
            .expect("writing to the terminal");
    }
}

/// A child whose standard input is a terminal and whose standard error
/// arrives line by line.
pub struct AtTerminal {
    pub child: Child,
    pub pty: Pty,
    lines: Receiver<String>,
    /// Every line of standard error so far.
    pub stderr: Vec<String>,
}

impl AtTerminal {
    /// `tunbench ARGS` with a terminal for standard input; standard output is
    /// piped (read it with `finish`).
    pub fn spawn(args: &[&str]) -> AtTerminal {
        let mut pty = Pty::open();
        let mut child = Command::new(super::bin())
            .args(args)
            .stdin(pty.stdin())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting tunbench");
        let err = child.stderr.take().expect("piped stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(err).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        AtTerminal {
            child,
            pty,
            lines,
            stderr: Vec::new(),
        }
    }

    /// Waits up to `within` for a line of standard error containing `what`.
    pub fn wait_for(&mut self, what: &str, within: Duration) {
        let t0 = Instant::now();
        while !self.stderr.iter().any(|l| l.contains(what)) {
            let left = within.saturating_sub(t0.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.stderr.push(l),
                Err(_) => panic!(
                    "no \"{what}\" on stderr within {within:?}; so far:\n{}",
                    self.stderr.join("\n")
                ),
            }
        }
    }

    /// Waits up to `within` for the child to end: its status, standard output
    /// and all of standard error.
    pub fn finish(mut self, within: Duration) -> (std::process::ExitStatus, String, String) {
        let child = &mut self.child;
        let Some(status) =
            super::wait::poll(within, || child.try_wait().expect("waiting for tunbench"))
        else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "tunbench did not end within {within:?}; stderr:\n{}",
                self.stderr.join("\n")
            );
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut o, &mut out);
        }
        // Every line up to the end of the pipe, which the reader thread's end
        // (dropping its sender) marks.
        let t0 = Instant::now();
        loop {
            let left = super::wait::BOUND.saturating_sub(t0.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.stderr.push(l),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "tunbench's stderr did not end within {:?} of its exit; so far:\n{}",
                    super::wait::BOUND,
                    self.stderr.join("\n")
                ),
            }
        }
        (status, out, self.stderr.join("\n"))
    }
}
