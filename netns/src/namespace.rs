//! Named network namespaces, bound under /run/netns like `ip netns add` makes them,
//! so `ip netns list` and `ip netns exec` see them too.
//!
//! A network namespace is per thread: `create_here` and `enter` move the calling
//! thread, so call them only on a thread of your own, never on an async runtime's.

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, setns, unshare};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Once;

pub const NETNS_RUN_DIR: &str = "/run/netns";

pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(name)
}

/// Make /run/netns a shared mount point, as iproute2 does, so bind mounts made
/// here propagate to other mount namespaces.
fn ensure_run_dir() -> io::Result<()> {
    static ONCE: Once = Once::new();
    let mut res = Ok(());
    ONCE.call_once(|| {
        res = (|| {
            std::fs::create_dir_all(NETNS_RUN_DIR)?;
            let shared = || {
                mount(
                    Some(""),
                    NETNS_RUN_DIR,
                    Some("none"),
                    MsFlags::MS_SHARED | MsFlags::MS_REC,
                    None::<&str>,
                )
            };
            match shared() {
                Ok(()) => Ok(()),
                Err(nix::errno::Errno::EINVAL) => {
                    mount(
                        Some(NETNS_RUN_DIR),
                        NETNS_RUN_DIR,
                        Some("none"),
                        MsFlags::MS_BIND | MsFlags::MS_REC,
                        None::<&str>,
                    )?;
                    shared()?;
                    Ok(())
                }
                Err(e) => Err(io::Error::from(e)),
            }
        })();
    });
    res
}

/// Create namespace `name`, leaving the calling thread inside it.
pub fn create_here(name: &str) -> io::Result<()> {
    create_here_with(name, || Ok(()))
}

/// `create_here`, with `before_mount` run inside the new namespace before it
/// is bound under its name: what it does (a lab's marker on lo) is there
/// before anyone can see the namespace. A process killed before the mount
/// leaves only the empty placeholder file; the namespace dies with it.
pub fn create_here_with<T>(
    name: &str,
    before_mount: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    ensure_run_dir()?;
    let p = path(name);
    // O_EXCL: an existing namespace of that name (another lab, a leftover) is an error,
    // never something to take over.
    OpenOptions::new().write(true).create_new(true).open(&p).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            io::Error::new(io::ErrorKind::AlreadyExists, format!("namespace {name} already exists (a lab of that name is up, or a leftover: see `tunbench clean`)"))
        } else {
            e
        }
    })?;
    let made = (|| -> io::Result<T> {
        unshare(CloneFlags::CLONE_NEWNET)?;
        let out = before_mount()?;
        mount(
            Some("/proc/thread-self/ns/net"),
            &p,
            Some("none"),
            MsFlags::MS_BIND,
            None::<&str>,
        )?;
        Ok(out)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&p);
    }
    made
}

/// Remove namespace `name`. Ok(false) when it was already gone. The kernel frees
/// the namespace, and every device in it, once no process or mount holds it.
pub fn delete(name: &str) -> io::Result<bool> {
    let p = path(name);
    if !p.exists() {
        return Ok(false);
    }
    match umount2(&p, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether /run/netns/NAME is the empty file `create_here` makes before it binds
/// the new namespace onto it: an `up` killed between the two leaves one, which
/// holds no kernel object (it is not a namespace, so it carries no marker).
pub fn is_placeholder(name: &str) -> bool {
    let p = path(name);
    let empty_file = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.len() == 0);
    let nsfs = nix::sys::statfs::statfs(&p)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::NSFS_MAGIC);
    empty_file && !nsfs
}

pub fn exists(name: &str) -> bool {
    path(name).exists()
}

pub fn open(name: &str) -> io::Result<File> {
    File::open(path(name)).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("namespace {name} does not exist"),
            )
        } else {
            e
        }
    })
}

/// Move the calling thread into namespace `name`.
pub fn enter(name: &str) -> io::Result<()> {
    let f = open(name)?;
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET)?;
    Ok(())
}

/// Names under /run/netns.
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_RUN_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Run `f` on a fresh thread inside namespace `name`.
pub fn run_in<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let name = name.to_string();
    std::thread::spawn(move || {
        enter(&name)?;
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace worker thread panicked"))?
}

/// Processes whose network namespace is `name`, as `ip netns pids` finds them: the
/// namespace of each process's main thread compared (device and inode) with the
/// namespace's bind mount.
pub fn pids(name: &str) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(ns) = std::fs::metadata(path(name)) else {
        return Vec::new();
    };
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.dev() == ns.dev() && m.ino() == ns.ino())
        })
        .collect()
}

/// Run `f` on a fresh thread inside the namespace `ns` is a descriptor of (a
/// /run/netns file, /proc/PID/ns/net, /proc/thread-self/ns/net).
pub fn run_in_file<T: Send + 'static>(
    ns: &File,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let ns = ns.try_clone()?;
    std::thread::spawn(move || {
        setns(ns.as_fd(), CloneFlags::CLONE_NEWNET)?;
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace worker thread panicked"))?
}
