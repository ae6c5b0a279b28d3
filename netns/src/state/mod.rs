//! The record of what a lab owns: one JSON file per lab under /run/tunbench/LAB/.
//! It is written before the first object is made (write-ahead), so a lab killed
//! at any point can still be removed exactly by `down` or `clean`.

mod host_link;

pub(crate) use host_link::INIT;
pub use host_link::{
    HostInterface, HostLinkRecord, HostNetns, SavedAddress, SavedRoute, host_links,
};

use crate::process::ProcessId;
use serde::{Deserialize, Serialize};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub const DEFAULT_RUN_DIR: &str = "/run/tunbench";

/// The state directory; `TUNBENCH_RUN_DIR` moves it (tests of the state logic;
/// ignored under sudo, see `test_env`).
pub fn run_dir() -> PathBuf {
    crate::test_env::var_os("TUNBENCH_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUN_DIR))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// `up` is building it (or was killed while building).
    Building,
    Up,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnedProcess {
    pub id: ProcessId,
    /// What it is, for status and logs: "userspace router r1".
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub node: String,
    pub namespace: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub lab: String,
    /// The host whose part of a lab placed on several hosts this machine
    /// holds; None: the whole lab is here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub topology: Option<PathBuf>,
    pub status: Status,
    /// Unix seconds when `up` started.
    pub created: u64,
    /// The `tunbench up` that builds it, while it builds.
    pub builder: Option<ProcessId>,
    /// Every namespace the lab owns (planned ones included while building).
    pub nodes: Vec<NodeRecord>,
    pub processes: Vec<OwnedProcess>,
    /// The namespace `up` ran in (the host), when the lab has host links.
    #[serde(default)]
    pub host_netns: Option<HostNetns>,
    /// Every `Op::HostLink` of the plan; a moved interface with the host's state
    /// of it, read before anything was made. `down` drops one only once it is
    /// back in the host.
    #[serde(default)]
    pub host_links: Vec<HostLinkRecord>,
    /// Machine-wide sysctls the lab's namespaces set ("key=value"), which
    /// stay after `down` (crate::sysctl::MACHINE_WIDE).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_wide: Vec<String>,
}

impl LabState {
    pub fn dir(lab: &str) -> PathBuf {
        run_dir().join(lab)
    }

    fn file(lab: &str) -> PathBuf {
        Self::dir(lab).join("state.json")
    }

    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.nodes.iter().map(|n| n.namespace.as_str())
    }

    /// Write the record, creating the lab's directory if need be. Holds the lab's
    /// lock while it writes.
    pub fn save(&self) -> io::Result<()> {
        let _lock = LabLock::create(&self.lab)?;
        self.write()
    }

    /// Write the record under a lock the caller already holds.
    pub fn save_locked(&self, _lock: &LabLock) -> io::Result<()> {
        self.write()
    }

    /// Write atomically (a temp file of this writer's own, then rename): a reader
    /// never sees half a record. The caller holds the lab's lock.
    fn write(&self) -> io::Result<()> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let dir = Self::dir(&self.lab);
        let tmp = dir.join(format!(
            "state.json.{}.{}.tmp",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(self).map_err(io::Error::other)?)?;
            std::fs::rename(&tmp, Self::file(&self.lab))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    pub fn load(lab: &str) -> io::Result<Option<LabState>> {
        match std::fs::read(Self::file(lab)) {
            Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", Self::file(lab).display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Change the lab's record under its lock: no other command's change made in
    /// the meantime is lost. Err(NotFound) when the lab has no record.
    pub fn update(lab: &str, change: impl FnOnce(&mut LabState)) -> io::Result<()> {
        let no_lab =
            || io::Error::new(io::ErrorKind::NotFound, format!("no lab named {lab} is up"));
        let _lock = LabLock::existing(lab)?.ok_or_else(no_lab)?;
        let mut s = Self::load(lab)?.ok_or_else(no_lab)?;
        change(&mut s);
        s.write()
    }

    /// Record a process the lab now owns, so `down` and `clean` stop it.
    pub fn add_process(lab: &str, p: OwnedProcess) -> io::Result<()> {
        Self::update(lab, |s| s.processes.push(p))
    }

    /// Forget a process that has ended.
    pub fn remove_process(lab: &str, id: ProcessId) -> io::Result<()> {
        match Self::update(lab, |s| s.processes.retain(|p| p.id != id)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => r,
        }
    }

    /// Where a lab's processes write their logs.
    pub fn log_dir(lab: &str) -> PathBuf {
        Self::dir(lab).join("logs")
    }

    /// Remove the lab's state directory (logs included). Idempotent.
    pub fn remove(lab: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(Self::dir(lab)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every lab with a state directory, readable or not (a torn directory still
    /// names a lab that `clean` must look at).
    pub fn lab_names() -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(run_dir())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().is_dir())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// The lab's lock: an exclusive flock on its state directory, held by every
/// read-modify-write of the record (and by `down` while it removes the lab), so two
/// commands never lose each other's changes. Released on drop.
#[derive(Debug)]
pub struct LabLock {
    _dir: File,
}

impl LabLock {
    /// Lock the lab's directory, creating it (0700, under a run directory that is
    /// not world-writable) when it is missing.
    pub fn create(lab: &str) -> io::Result<LabLock> {
        loop {
            make_private_dir(&run_dir(), lab)?;
            match Self::lock(&LabState::dir(lab)) {
                // `down` removed the directory while we waited: make it anew.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                r => return r,
            }
        }
    }

    /// Lock the lab's directory if it exists; None when there is no such lab.
    pub fn existing(lab: &str) -> io::Result<Option<LabLock>> {
        match Self::lock(&LabState::dir(lab)) {
            Ok(l) => Ok(Some(l)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn lock(dir: &Path) -> io::Result<LabLock> {
        let f = File::open(dir)?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                // The lock holder before us may have been `down`, which removes the
                // directory: a lock on a directory no longer there guards nothing.
                use std::os::unix::fs::MetadataExt;
                let held = f.metadata()?;
                return match std::fs::metadata(dir) {
                    Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                        Ok(LabLock { _dir: f })
                    }
                    Ok(_) => Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("{} was replaced", dir.display()),
                    )),
                    Err(e) => Err(e),
                };
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io::Error::new(
                    e.kind(),
                    format!("locking {}: {e}", dir.display()),
                ));
            }
        }
    }
}

/// A lab's directory holds keys and the record: only root may read or enter it.
/// The run directory above it must not be writable by others, or they could
/// swap a lab's directory for their own.
fn make_private_dir(run: &Path, lab: &str) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o755).create(run)?;
    let mode = std::fs::metadata(run)?.permissions().mode();
    if mode & 0o002 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the run directory {} is writable by every user (mode {:o}); make it 0755 or 0700",
                run.display(),
                mode & 0o7777
            ),
        ));
    }
    let dir = run.join(lab);
    match DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        // The mode given at creation is cut by the umask; set it outright, which
        // also tightens a directory made with a looser mode.
        _ => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)),
    }
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_json() {
        let s = LabState {
            lab: "home".into(),
            host: Some("pc".into()),
            topology: Some("/x/home.toml".into()),
            status: Status::Building,
            created: 1,
            builder: Some(ProcessId {
                pid: 42,
                start_time: 7,
            }),
            nodes: vec![NodeRecord {
                node: "pc".into(),
                namespace: "home-pc".into(),
                kind: "host".into(),
            }],
            processes: vec![OwnedProcess {
                id: ProcessId {
                    pid: 43,
                    start_time: 8,
                },
                what: "userspace router r1".into(),
            }],
            host_netns: None,
            host_links: Vec::new(),
            machine_wide: Vec::new(),
        };
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"status\":\"building\""), "{j}");
        let back: LabState = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.namespaces().collect::<Vec<_>>(), ["home-pc"]);
        // A record without the host-link fields still loads.
        let old = j
            .replace(",\"host_netns\":null", "")
            .replace(",\"host_links\":[]", "");
        assert!(!old.contains("host_"), "{old}");
        assert_eq!(serde_json::from_str::<LabState>(&old).unwrap(), s);
    }

    /// Every test here shares one run directory of its own: the variable is read
    /// by every thread of the test process.
    fn test_run_dir() -> &'static Path {
        static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        DIR.get_or_init(|| {
            // The directories of earlier runs whose process has ended.
            let prefix = "tunbench-state-test-";
            for e in std::fs::read_dir(std::env::temp_dir())
                .into_iter()
                .flatten()
            {
                let Ok(e) = e else { continue };
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.parse().ok()) {
                    if ProcessId::of(pid).is_none() {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
            let d = std::env::temp_dir().join(format!("{prefix}{}", std::process::id()));
            // SAFETY: set once, before any test reads it.
            unsafe { std::env::set_var("TUNBENCH_RUN_DIR", &d) };
            d
        })
    }

    /// Waits until a thread blocks on the lock of `dir`: /proc/locks lists a
    /// blocked flock as "-> FLOCK ..." with the inode it waits for.
    fn wait_for_a_waiter_on(dir: &Path) {
        use std::os::unix::fs::MetadataExt;
        let ino = format!(":{} ", std::fs::metadata(dir).unwrap().ino());
        let t0 = std::time::Instant::now();
        while !std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|l| l.contains("-> FLOCK") && l.contains(&ino))
        {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "no thread ever waited for the lock of {}",
                dir.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn empty(lab: &str) -> LabState {
        LabState {
            lab: lab.into(),
            host: None,
            topology: None,
            status: Status::Up,
            created: 1,
            builder: None,
            nodes: Vec::new(),
            processes: Vec::new(),
            host_netns: None,
            host_links: Vec::new(),
            machine_wide: Vec::new(),
        }
    }

    #[test]
    fn concurrent_writers_lose_no_record() {
        test_run_dir();
        let lab = "nsconcurrent";
        empty(lab).save().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    for k in 0..25 {
                        let id = ProcessId {
                            pid: 1000 + t * 100 + k,
                            start_time: 1,
                        };
                        let what = format!("writer {t} record {k}");
                        LabState::add_process(lab, OwnedProcess { id, what }).unwrap();
                        if k % 5 == 0 {
                            // Removals interleave with additions and touch only their own.
                            LabState::remove_process(lab, id).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = LabState::load(lab).unwrap().unwrap();
        assert_eq!(s.processes.len(), 8 * 20, "records lost");
        let left: Vec<_> = std::fs::read_dir(LabState::dir(lab))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        assert_eq!(left, ["state.json"], "temp files left behind");
        LabState::remove(lab).unwrap();
    }

    #[test]
    fn the_lab_directory_is_0700_and_its_record_0600() {
        test_run_dir();
        let lab = "nsmodes";
        empty(lab).save().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&LabState::dir(lab)), 0o700);
        assert_eq!(mode(&LabState::dir(lab).join("state.json")), 0o600);
        // A directory left open (0755) is tightened on the next write.
        std::fs::set_permissions(LabState::dir(lab), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        empty(lab).save().unwrap();
        assert_eq!(mode(&LabState::dir(lab)), 0o700);
        assert!(
            mode(&run_dir()) & 0o022 == 0,
            "run dir mode {:o}",
            mode(&run_dir())
        );
        LabState::remove(lab).unwrap();
    }

    #[test]
    fn a_record_saved_while_down_removes_the_lab_lands_in_a_new_directory() {
        test_run_dir();
        let lab = "nsrace";
        empty(lab).save().unwrap();
        // `down` holds the lock and removes the directory while `up` waits for it.
        let held = LabLock::existing(lab).unwrap().unwrap();
        let up = std::thread::spawn(move || empty(lab).save());
        wait_for_a_waiter_on(&LabState::dir(lab));
        LabState::remove(lab).unwrap();
        drop(held);
        up.join().unwrap().unwrap();
        assert_eq!(LabState::load(lab).unwrap(), Some(empty(lab)));
        // add_process in the same spot finds no lab and makes no directory.
        let held = LabLock::existing(lab).unwrap().unwrap();
        let id = ProcessId {
            pid: 1,
            start_time: 1,
        };
        let add = std::thread::spawn(move || {
            let what = "x".to_string();
            LabState::add_process(lab, OwnedProcess { id, what })
        });
        wait_for_a_waiter_on(&LabState::dir(lab));
        LabState::remove(lab).unwrap();
        drop(held);
        let e = add.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(!LabState::dir(lab).exists());
    }

    #[test]
    fn a_world_writable_run_directory_is_refused() {
        let run = test_run_dir().join("open-to-all");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = make_private_dir(&run, "lab").unwrap_err();
        assert!(e.to_string().contains("writable by every user"), "{e}");
        assert!(!run.join("lab").exists());
        std::fs::remove_dir_all(&run).unwrap();
    }

    #[test]
    fn no_process_is_recorded_for_a_lab_without_a_record() {
        test_run_dir();
        let id = ProcessId {
            pid: 1,
            start_time: 1,
        };
        let what = "x".to_string();
        let e = LabState::add_process("nsnone", OwnedProcess { id, what }).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            !LabState::dir("nsnone").exists(),
            "no directory made for it"
        );
        LabState::remove_process("nsnone", id).unwrap();
    }
}
