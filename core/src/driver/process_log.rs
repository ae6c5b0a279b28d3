//! A datapath process's log: its stderr (and stdout), a file under /run that
//! `up` opened for it. Bounded in size, since a datapath runs for as long as
//! the lab and anything that logs per packet (a codec panicking on every
//! packet of a flood) would otherwise fill /run: past [`LOG_CAP`] the file is
//! cut back to nothing but one note saying so, and then goes on. Panics are
//! logged through it with the thread's name, the first [`PANICS_LOGGED`] in
//! full and the rest only counted (the stats file has every one).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most a datapath's log holds.
pub const LOG_CAP: u64 = 1 << 20;
/// Panics logged in full; later ones are counted, not logged.
pub const PANICS_LOGGED: u64 = 10;

/// A log file that never grows past its cap: a write that would cross it
/// first truncates the file and starts it with a note.
pub struct BoundedLog {
    file: File,
    cap: u64,
    truncations: u64,
}

impl BoundedLog {
    /// Over `file`, which this puts in append mode, so writes land at the end
    /// after a truncation (also through other descriptors of the same open file,
    /// stdout's for one).
    pub fn new(file: File, cap: u64) -> BoundedLog {
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we hold; no pointers.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_APPEND);
            }
        }
        BoundedLog {
            file,
            cap,
            truncations: 0,
        }
    }

    /// Truncates the file when `more` bytes would take it past the cap (also
    /// what others wrote to it meanwhile, which is why the size is asked of the
    /// file, not counted here).
    pub fn make_room(&mut self, more: u64) {
        let Ok(meta) = self.file.metadata() else {
            return;
        };
        if !meta.is_file() || meta.len() + more <= self.cap {
            return;
        }
        if self.file.set_len(0).is_ok() {
            self.truncations += 1;
            let _ = writeln!(
                self.file,
                "tunbench datapath: log reached {} bytes; cut back (cut {} times), earlier lines are gone",
                self.cap, self.truncations
            );
        }
    }

    /// Writes one line (a newline is added), within the cap.
    pub fn line(&mut self, text: &str) {
        // A line longer than a tenth of the cap is cut: one line cannot fill it.
        let keep = (self.cap / 10) as usize;
        let text = if text.len() > keep {
            let mut end = keep;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            &text[..end]
        } else {
            text
        };
        self.make_room(text.len() as u64 + 1);
        let _ = writeln!(self.file, "{text}");
    }
}

/// Holds a file another program appends to (charon's log) to `cap` the same
/// way: past it, cut back to one note. Called every second.
pub fn cap_file(path: &std::path::Path, cap: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > cap) {
        if let Ok(f) = std::fs::OpenOptions::new().append(true).open(path) {
            BoundedLog::new(f, cap).make_room(0);
        }
    }
}

/// This process's log, once `install` has run.
static LOG: Mutex<Option<BoundedLog>> = Mutex::new(None);
/// Panics seen by the hook.
static PANICS: AtomicU64 = AtomicU64::new(0);

/// Makes stderr a bounded log and installs the panic hook. Called once when a
/// datapath process starts.
pub fn install() {
    // SAFETY: a new descriptor for stderr's open file, which we then own.
    let fd = unsafe { libc::dup(libc::STDERR_FILENO) };
    if fd >= 0 {
        // SAFETY: `fd` is ours alone.
        let file = unsafe { File::from_raw_fd(fd) };
        *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Some(BoundedLog::new(file, LOG_CAP));
    }
    std::panic::set_hook(Box::new(|info| {
        let n = PANICS.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(text) = panic_line(n, info) {
            line(&text);
        }
    }));
}

/// What the hook logs for the `n`th panic (None: counted only).
fn panic_line(n: u64, info: &std::panic::PanicHookInfo) -> Option<String> {
    let thread = std::thread::current();
    let at = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    panic_text(
        n,
        thread.name().unwrap_or("(unnamed)"),
        &at,
        crate::driver::panic_message(info.payload()),
    )
}

/// The `n`th panic's line, from its parts: the first [`PANICS_LOGGED`] in
/// full, then one line saying the rest are only counted, then nothing.
fn panic_text(n: u64, thread: &str, at: &str, message: &str) -> Option<String> {
    match n {
        n if n <= PANICS_LOGGED => Some(format!(
            "tunbench datapath: thread {thread} panicked{at}: {message}"
        )),
        n if n == PANICS_LOGGED + 1 => Some(format!(
            "tunbench datapath: {PANICS_LOGGED} panics logged; further ones are counted in the stats file (errors.codec_panic), not logged"
        )),
        _ => None,
    }
}

/// Logs a line: through the bounded log once installed, else plain stderr.
pub fn line(text: &str) {
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    match log.as_mut() {
        Some(l) => l.line(text),
        None => eprintln!("{text}"),
    }
}

/// Keeps the cap against what was written to stderr around the log (an
/// `eprintln!`, the final error): called every second.
pub fn enforce() {
    if let Some(l) = LOG.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        l.make_room(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_flood_stays_within_the_cap_with_one_note() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let mut log = BoundedLog::new(f.reopen().unwrap(), 64 * 1024);
        let line = "x".repeat(299);
        // 3 MB of lines, about 48 times the cap.
        for i in 0..10_000 {
            log.line(&format!("{i:05} {line}"));
            assert!(f.as_file().metadata().unwrap().len() <= 64 * 1024);
        }
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(text.starts_with("tunbench datapath: log reached 65536 bytes; cut back"));
        assert_eq!(text.matches("cut back").count(), 1, "one note at a time");
        assert!(
            text.ends_with(&format!("09999 {line}\n")),
            "the newest lines are kept"
        );
        // Another writer of the same file (stderr's own descriptor) is held too.
        let mut other = f.reopen().unwrap();
        other.write_all(&vec![b'y'; 100_000]).unwrap();
        log.make_room(0);
        assert!(f.as_file().metadata().unwrap().len() < 1000);
        // One huge line is cut to a tenth of the cap.
        log.line(&"z".repeat(1 << 20));
        assert!(f.as_file().metadata().unwrap().len() <= 64 * 1024);
    }

    #[test]
    fn a_panic_flood_logs_ten_panics_and_one_line_more() {
        let lines: Vec<String> = (1..=1000)
            .filter_map(|n| panic_text(n, "tb-net-to-tun0", " at x.rs:1", "boom"))
            .collect();
        assert_eq!(lines.len(), PANICS_LOGGED as usize + 1);
        assert_eq!(
            lines[0],
            "tunbench datapath: thread tb-net-to-tun0 panicked at x.rs:1: boom"
        );
        assert!(
            lines[10].contains("further ones are counted"),
            "{}",
            lines[10]
        );
    }

    #[test]
    fn another_programs_log_is_cut_back_past_the_cap() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), vec![b'c'; 100_000]).unwrap();
        cap_file(f.path(), 200_000);
        assert_eq!(std::fs::metadata(f.path()).unwrap().len(), 100_000);
        std::fs::write(f.path(), vec![b'c'; 300_000]).unwrap();
        cap_file(f.path(), 200_000);
        let text = std::fs::read_to_string(f.path()).unwrap();
        assert!(
            text.starts_with("tunbench datapath: log reached 200000 bytes"),
            "{text}"
        );
        assert!(text.len() < 200, "{text}");
    }
}
