//! nftables rulesets, loaded with Debian's `nft` inside a lab namespace. The
//! nftables netlink protocol is large; `nft -f -` is its reference client, and
//! the ruleset text doubles as the dry-run output.

use crate::namespace;
use std::io::Write;
use std::process::{Command, Stdio};

/// Loads `ruleset` in namespace `ns` atomically (nft applies a file as one
/// transaction). The error carries nft's own message.
pub fn load(ns: &str, ruleset: &str) -> Result<(), String> {
    let text = ruleset.to_string();
    namespace::run_in(ns, move || Ok(run_nft(&text)))
        .map_err(|e| format!("entering namespace {ns}: {e}"))?
}

fn run_nft(text: &str) -> Result<(), String> {
    {
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    "nft is not installed: install Debian's nftables package (scripts/setup.sh does)"
                        .to_string()
                } else {
                    format!("starting nft: {e}")
                }
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| format!("writing the ruleset to nft: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("waiting for nft: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "nft refused the ruleset: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}
