//! Starting tunbench's own processes (datapaths, measurement servers) inside
//! a lab's namespaces.

use anyhow::{Context, Result, bail};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// A `tunbench server` in the target namespace, owned by the lab and stopped on drop.
/// Make `cmd` enter the namespace `ns` (an open /run/netns file, kept open by
/// the caller until after spawn) before it runs; with `own_session`, also start
/// a session of its own, so it outlives its parent and ignores the terminal's
/// Ctrl-C (the lab's `down` stops it).
pub fn enter_before_exec(cmd: &mut Command, ns: &std::fs::File, own_session: bool) {
    let fd = ns.as_raw_fd();
    // SAFETY: setns and setsid are async-signal-safe, and fd stays open until
    // after spawn.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if own_session {
                libc::setsid();
            }
            Ok(())
        });
    }
}

/// The tunbench executable, for the processes a lab starts in its namespaces
/// (measurement servers, datapaths): this process when it is tunbench, else
/// the tunbench on PATH. `TUNBENCH_EXE` overrides it: library callers such as
/// the integration tests are not tunbench themselves (a test-only variable:
/// ignored under sudo, where it would choose what root runs).
pub fn tunbench_exe() -> Result<std::path::PathBuf> {
    if let Some(p) = netns::test_env::var_os("TUNBENCH_EXE") {
        return Ok(p.into());
    }
    let me = std::env::current_exe().context("finding the tunbench executable")?;
    if me
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("tunbench"))
    {
        return Ok(me);
    }
    // A library caller (a Rust test using api::Lab): the tunbench on PATH.
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("tunbench"))
            .find(|p| p.is_file())
    });
    match on_path {
        Some(p) => Ok(p),
        None => bail!(
            "{} is not tunbench and no tunbench is on PATH; install it or set TUNBENCH_EXE (or MeasureSpec::server_exe) to the tunbench binary",
            me.display()
        ),
    }
}
