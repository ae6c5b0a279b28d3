//! Traffic-control commands, run with iproute2's `tc -batch -` inside a lab
//! namespace: the classifier and action netlink attributes (u32 keys, mirred)
//! are tc's own formats, and the batch text doubles as the dry-run output.

use crate::namespace;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `batch` (one tc command per line, without the leading `tc`) in
/// namespace `ns`. The error carries tc's own message.
pub fn run(ns: &str, batch: &str) -> Result<(), String> {
    let text = batch.to_string();
    namespace::run_in(ns, move || Ok(run_tc(&text)))
        .map_err(|e| format!("entering namespace {ns}: {e}"))?
}

fn run_tc(text: &str) -> Result<(), String> {
    let mut child = Command::new("tc")
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "tc is not installed: install Debian's iproute2 package (scripts/setup.sh does)"
                    .to_string()
            } else {
                format!("starting tc: {e}")
            }
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("writing the batch to tc: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for tc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tc refused the batch: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
