//! The record of what a lab owns: one JSON file per lab under /run/tunbench/LAB/.
//! It is written before the first object is made (write-ahead), so a lab killed
//! at any point can still be removed exactly by `down` or `clean`.

use crate::process::ProcessId;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::PathBuf;

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
    pub topology: Option<PathBuf>,
    pub status: Status,
    /// Unix seconds when `up` started.
    pub created: u64,
    /// The `tunbench up` that builds it, while it builds.
    pub builder: Option<ProcessId>,
    /// Every namespace the lab owns (planned ones included while building).
    pub nodes: Vec<NodeRecord>,
    pub processes: Vec<OwnedProcess>,
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

    /// Write atomically (temp file + rename): a reader never sees half a record.
    pub fn save(&self) -> io::Result<()> {
        let dir = Self::dir(&self.lab);
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join("state.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(io::Error::other)?,
        )?;
        std::fs::rename(&tmp, Self::file(&self.lab))
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

    /// Record a process the lab now owns, so `down` and `clean` stop it.
    pub fn add_process(lab: &str, p: OwnedProcess) -> io::Result<()> {
        let mut s = Self::load(lab)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no lab named {lab} is up"))
        })?;
        s.processes.push(p);
        s.save()
    }

    /// Forget a process that has ended.
    pub fn remove_process(lab: &str, id: ProcessId) -> io::Result<()> {
        if let Some(mut s) = Self::load(lab)? {
            s.processes.retain(|p| p.id != id);
            s.save()?;
        }
        Ok(())
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
        };
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"status\":\"building\""), "{j}");
        let back: LabState = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.namespaces().collect::<Vec<_>>(), ["home-pc"]);
    }
}
