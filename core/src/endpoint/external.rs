//! External programs a datapath process runs as a tunnel end (wireguard-go,
//! boringtun-cli, strongSwan's charon): found on disk, started with a /run of
//! their own (two labs' sockets and pid files of the same name never meet),
//! tied to this process's life, and stopped by their pid.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Where a program is on PATH.
pub fn find_program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What the program sees as /run.
pub enum PrivateRun<'a> {
    /// An empty tmpfs.
    Empty,
    /// This directory, bound onto /run (its files are the program's /run/*).
    Directory(&'a Path),
}

/// Makes `cmd` run in a mount namespace of its own with a private /run, and
/// get SIGTERM when this process ends.
pub fn isolate(cmd: &mut Command, run: PrivateRun) -> std::io::Result<()> {
    // Allocated here: between fork and exec only syscalls run.
    let bind = match run {
        PrivateRun::Empty => None,
        PrivateRun::Directory(d) => Some(
            CString::new(d.as_os_str().as_bytes())
                .map_err(|_| std::io::Error::other(format!("{} holds a NUL", d.display())))?,
        ),
    };
    // SAFETY: only async-signal-safe syscalls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let none = c"none".as_ptr();
            if libc::mount(
                none,
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let rc = match &bind {
                None => libc::mount(
                    none,
                    c"/run".as_ptr(),
                    c"tmpfs".as_ptr(),
                    0,
                    std::ptr::null(),
                ),
                Some(dir) => libc::mount(
                    dir.as_ptr(),
                    c"/run".as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ),
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    Ok(())
}

/// Stops a child: SIGTERM, then SIGKILL after `grace`.
pub fn stop(child: &mut Child, grace: Duration) {
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// CPU seconds a process has used (user + system), from /proc.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime); `rest` starts at field 3.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}
