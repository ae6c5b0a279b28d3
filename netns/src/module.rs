//! Kernel modules loaded on demand. A stock kernel builds most of what labs use
//! as modules and loads one when a program first asks for it, except where the
//! asking goes through a file that appears only once the module is in: the
//! net.netfilter.* sysctls before nf_conntrack (Debian 12's 6.1), or
//! /dev/net/tun on a system without udev's static device nodes. There
//! tunbench loads the module itself, with modprobe, as the kernel would.

use std::process::Command;

/// `modprobe MODULE`: a no-op where it is loaded or built in; what failed.
pub fn load(module: &str) -> Result<(), String> {
    let out = Command::new("modprobe").arg(module).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "modprobe is not installed (Debian's kmod)".to_string()
        } else {
            format!("running modprobe: {e}")
        }
    })?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "modprobe {module}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}
