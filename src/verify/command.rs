//! A command run in a node's namespace (the `command` assertion).

use std::io;
use std::time::{Duration, Instant};

/// Run a program in the namespace `ns` (entered by the child alone, so the
/// caller's thread stays where it is): its exit status (None: killed after
/// `timeout`) and a line of what it printed. Meant for short commands: its
/// output is read once it has ended.
pub fn command(ns: &str, run: &[String], timeout: Duration) -> io::Result<(Option<i32>, String)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let file = netns::namespace::open(ns)?;
    let fd = file.as_raw_fd();
    let mut c = std::process::Command::new(&run[0]);
    c.args(&run[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setns is async-signal-safe; `file` stays open until spawn returns.
    unsafe {
        c.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = c.spawn()?;
    drop(file);
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    use std::io::Read;
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let code = status.map(|s| s.code().unwrap_or(-1));
    let line = |t: &str, first: bool| {
        let mut lines = t.lines().map(str::trim).filter(|l| !l.is_empty());
        if first {
            lines.next()
        } else {
            lines.next_back()
        }
        .unwrap_or("")
        .to_string()
    };
    // What it said: its first line when it worked, its last complaint when not.
    let tail = if code == Some(0) {
        line(&out, true)
    } else if !err.trim().is_empty() {
        line(&err, false)
    } else {
        line(&out, false)
    };
    Ok((code, tail))
}
