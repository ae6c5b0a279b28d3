//! Debian's reference clients for the kernel interfaces whose netlink formats
//! are their own (nftables rulesets, tc classifiers and actions), run inside a
//! lab namespace with their input on stdin.

use crate::namespace;
use std::io::Write;
use std::process::{Command, Stdio};

/// A program reading its commands from stdin, and what to say when it is missing.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub program: &'static str,
    pub args: &'static [&'static str],
    /// The Debian package that has it.
    pub package: &'static str,
    /// What the input is, for messages ("the ruleset", "the batch").
    pub input: &'static str,
}

impl Tool {
    /// Runs the tool in namespace `ns` with `text` on stdin. The error carries the
    /// tool's own message.
    pub fn run_in(&self, ns: &str, text: &str) -> Result<(), String> {
        let (tool, text) = (*self, text.to_string());
        namespace::run_in(ns, move || Ok(tool.run(&text)))
            .map_err(|e| format!("entering namespace {ns}: {e}"))?
    }

    fn run(&self, text: &str) -> Result<(), String> {
        self.run_here(text).map_err(|f| f.to_string())
    }

    /// Runs the tool in the calling thread's namespace (a child inherits it).
    pub fn run_here(&self, text: &str) -> Result<(), ToolFailure> {
        let p = self.program;
        let mut child = Command::new(p)
            .args(self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    ToolFailure::NotInstalled(format!(
                        "{p} is not installed: install Debian's {} package (scripts/setup.sh does)",
                        self.package
                    ))
                } else {
                    ToolFailure::Failed(format!("starting {p}: {e}"))
                }
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| ToolFailure::Failed(format!("writing {} to {p}: {e}", self.input)))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| ToolFailure::Failed(format!("waiting for {p}: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(ToolFailure::Refused(format!(
                "{p} refused {}: {}",
                self.input,
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }
}

/// Why a tool did not do what it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolFailure {
    /// Not on PATH; what to install.
    NotInstalled(String),
    /// It ran and refused its input; its own message.
    Refused(String),
    /// Starting it or talking to it failed.
    Failed(String),
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            ToolFailure::NotInstalled(m) | ToolFailure::Refused(m) | ToolFailure::Failed(m) => {
                f.write_str(m)
            }
        }
    }
}
