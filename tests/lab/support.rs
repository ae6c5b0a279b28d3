//! Helpers of the lab tests: a child's output, and whether it waits for input.

use std::process::Child;

/// All the standard output and error of a child that has ended (both piped).
pub fn output_of(child: &mut Child) -> String {
    use std::io::Read;
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    out
}

/// Whether a thread of process `pid` is blocked reading its standard input:
/// /proc/PID/task/*/syscall says `read` on descriptor 0.
pub fn reading_stdin(pid: u32) -> bool {
    let want = format!("{} 0x0 ", libc::SYS_read);
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()).any(|t| {
                std::fs::read_to_string(t.path().join("syscall"))
                    .is_ok_and(|s| s.starts_with(&want))
            })
        })
        .unwrap_or(false)
}
