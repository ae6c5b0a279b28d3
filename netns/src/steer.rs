//! Receive packet steering (RPS) on a lab device: the kernel then queues
//! what the device receives to a CPU chosen by the packet's flow hash, so
//! one flow always lands on the same CPU and keeps its order.
//!
//! Why a lab needs it: a veth hands each packet to the backlog of the CPU
//! that transmits it. Behind a TBF (a link's rate) that CPU is sometimes the
//! sender's and sometimes the one the qdisc's timer fires on, so one flow
//! lands in two CPUs' backlogs and arrives out of order — which a wired
//! link with one NIC queue never does to a flow.
//!
//! RPS is set in sysfs (`queues/rx-N/rps_cpus`), which shows the devices of
//! the namespace that mounted it: the worker thread takes a mount namespace
//! of its own, mounts a sysfs there from inside the lab's namespace, writes
//! and unmounts; nothing is left mounted.

use crate::namespace;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use std::io;
use std::path::Path;

/// Steer what `iface` in namespace `ns` receives over every online CPU by
/// flow hash.
pub fn by_flow(ns: &str, iface: &str) -> Result<(), String> {
    let mask = all_cpus_mask(online_cpus());
    let (dev, m) = (iface.to_string(), mask.clone());
    namespace::run_in(ns, move || write_in_own_sysfs(&dev, &m))
        .map_err(|e| format!("RPS on {iface} in {ns} (rps_cpus {mask}): {e}"))
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|n| *n > 0).unwrap_or(1)
}

/// The kernel's cpumask text for CPUs 0..n: hex, in comma-separated groups
/// of 32 bits, most significant first ("3" for two CPUs, "ffffffff,ffffffff"
/// for 64).
pub fn all_cpus_mask(n: usize) -> String {
    let n = n.max(1);
    let groups = n.div_ceil(32);
    (0..groups)
        .rev()
        .map(|g| {
            let bits = (n - g * 32).min(32);
            let v: u64 = (1u64 << bits) - 1;
            if g == groups - 1 {
                format!("{v:x}")
            } else {
                format!("{v:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn write_in_own_sysfs(iface: &str, mask: &str) -> io::Result<()> {
    unshare(CloneFlags::CLONE_NEWNS)?;
    // Private below /, so the sysfs mounted here is seen by no one else.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    let dir = std::env::temp_dir().join(format!("tunbench-sysfs-{}", std::process::id()));
    let dir = dir.with_extension(format!("{}", nix::unistd::gettid()));
    std::fs::create_dir_all(&dir)?;
    let wrote = mount(
        Some("sysfs"),
        &dir,
        Some("sysfs"),
        MsFlags::empty(),
        None::<&str>,
    )
    .map_err(io::Error::from)
    .and_then(|()| {
        let w = write_masks(&dir, iface, mask);
        let _ = umount2(&dir, MntFlags::MNT_DETACH);
        w
    });
    let _ = std::fs::remove_dir(&dir);
    wrote
}

/// Every receive queue of the device gets the mask.
fn write_masks(sysfs: &Path, iface: &str, mask: &str) -> io::Result<()> {
    let queues = sysfs.join("class/net").join(iface).join("queues");
    let mut any = false;
    for e in std::fs::read_dir(&queues)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with("rx-") {
            std::fs::write(e.path().join("rps_cpus"), mask)?;
            any = true;
        }
    }
    if any {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{} has no receive queue",
            queues.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumask_text_is_hex_in_groups_of_32_bits() {
        assert_eq!(all_cpus_mask(1), "1");
        assert_eq!(all_cpus_mask(2), "3");
        assert_eq!(all_cpus_mask(8), "ff");
        assert_eq!(all_cpus_mask(32), "ffffffff");
        assert_eq!(all_cpus_mask(33), "1,ffffffff");
        assert_eq!(all_cpus_mask(64), "ffffffff,ffffffff");
        assert_eq!(all_cpus_mask(0), "1");
    }
}
