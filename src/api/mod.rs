//! A Rust API for tests against real namespaces: [`Lab`] brings a topology up
//! under a name of its own and takes it down when dropped, even when the test
//! panics.
//!
//! ```
//! use tunbench::api::Lab;
//!
//! let lab = Lab::up_str(r#"
//! name = "pair"
//! [nodes.a]
//! kind = "host"
//! [nodes.b]
//! kind = "host"
//! [[links]]
//! a = { port = "a:eth0", ipv4 = "198.18.0.1/24" }
//! b = { port = "b:eth0", ipv4 = "198.18.0.2/24" }
//! "#).unwrap();
//! assert!(lab.check().unwrap().failures().next().is_none());
//! let out = lab.exec("a", "ip", &["route", "get", "198.18.0.2"]).unwrap();
//! assert!(out.status.success());
//! // Dropped here: the lab is taken down.
//! ```
//!
//! Each method blocks; it may be called from any thread, also inside an
//! async runtime (the lab's work runs on a thread of its own). Root is
//! needed, as for the command line.

use crate::lab::{self as labs, Running};
use crate::measure::results::Results;
use crate::measure::session::{Overrides, measure_lab, spec_of};
use crate::plan::Naming;
use crate::topology::{self, Topology};
use crate::verify::reach_matrix::{self, DEFAULT_SAMPLE, Mode, Report};
use crate::verify::{self, Verdict};
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A lab that is up, and taken down when this value is dropped.
#[derive(Debug)]
pub struct Lab {
    name: String,
    topology: Topology,
    /// Set once [`Lab::down`] has run, so drop does not run it again.
    down: bool,
}

/// A name no other lab of this process or of another has: the topology's
/// name shortened, this process's id and a counter (at most 32 characters).
fn unique_name(base: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tail = format!("-{}-{n}", std::process::id());
    let keep = 32usize.saturating_sub(tail.len()).min(base.len());
    let head: String = base.chars().take(keep).collect();
    format!("{head}{tail}")
}

/// Run `f` on a thread of its own with a runtime of its own: callers may be
/// inside an async runtime already, where blocking on another is refused.
fn blocking<T: Send>(f: impl FnOnce(&tokio::runtime::Runtime) -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("starting a runtime")?;
            f(&rt)
        })
        .join()
        .map_err(|_| anyhow!("the lab's thread panicked"))?
    })
}

impl Lab {
    /// Bring up the topology file `path` (its assertions checked too) under a
    /// unique lab name.
    pub fn up_file(path: impl AsRef<Path>) -> Result<Lab> {
        let path = path.as_ref();
        let t = verify::load(path, crate::lab::this_kernel())?;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::up_topology(t, path, &text)
    }

    /// Bring up a topology given as TOML text; profile paths in it are taken
    /// from the current directory.
    pub fn up_str(toml: &str) -> Result<Lab> {
        let source = PathBuf::from("topology.toml");
        let t = topology::parse_str_for(toml, &source, crate::lab::this_kernel())?;
        let problems = verify::problems(&t);
        if !problems.is_empty() {
            return Err(topology::located(problems, toml, &source).into());
        }
        Self::up_topology(t, &source, toml)
    }

    fn up_topology(t: Topology, source: &Path, text: &str) -> Result<Lab> {
        let name = unique_name(&t.name);
        let naming = Naming::new(&name, None);
        blocking(|rt| {
            rt.block_on(labs::up_text(
                &t,
                source,
                text,
                &naming,
                &netns::Cancel::new(),
                false,
            ))
        })?;
        Ok(Lab {
            name,
            topology: t,
            down: false,
        })
    }

    /// The lab's name (namespaces are `NAME-NODE`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topology the lab was built from.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The namespace of a node, for tools of your own (`ip netns exec`).
    pub fn namespace(&self, node: &str) -> Result<String> {
        match self.topology.node_index(node) {
            Some(i) if self.topology.nodes[i].kind.is_built() => {
                Ok(Naming::new(&self.name, None).namespace(node))
            }
            Some(_) => bail!("node {node} is external: it has no namespace"),
            None => bail!("lab {} has no node {node}", self.name),
        }
    }

    /// Run a program in a node's namespace and wait for it.
    pub fn exec(&self, node: &str, program: &str, args: &[&str]) -> Result<Output> {
        let ns = self.namespace(node)?;
        let file = std::fs::File::open(netns::namespace::path(&ns))
            .with_context(|| format!("opening namespace {ns}"))?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        labs::spawn::enter_before_exec(&mut cmd, &file, false);
        cmd.output()
            .with_context(|| format!("running {program} in {ns}"))
    }

    /// `tunbench check`: every node echoes every address (all pairs up to 100
    /// nodes, a sample above, as `--mode auto`); the report says which replies
    /// the routing model expected and which came.
    pub fn check(&self) -> Result<Report> {
        let built = self
            .topology
            .nodes
            .iter()
            .filter(|n| n.kind.is_built())
            .count();
        let mode = Mode::auto(built, DEFAULT_SAMPLE, 0);
        self.check_with(mode)
    }

    /// `check` in a mode of your choice (all pairs, segments, a sample).
    pub fn check_with(&self, mode: Mode) -> Result<Report> {
        let naming = Naming::new(&self.name, None);
        Ok(reach_matrix::run(&self.topology, &naming, mode)?)
    }

    /// Measure the `[[measure]]` entry named `path` (its method, with
    /// `overrides` for quick runs: runs, duration).
    pub fn measure(&self, path: &str, overrides: &Overrides) -> Result<Results> {
        let m = self
            .topology
            .measurements
            .iter()
            .find(|m| m.name == path)
            .ok_or_else(|| {
                let known: Vec<&str> = self
                    .topology
                    .measurements
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect();
                anyhow!(
                    "no [[measure]] named {path}; the file's: {}",
                    known.join(", ")
                )
            })?;
        let running = self.running()?;
        measure_lab(
            &running,
            &[spec_of(m, overrides)],
            &AtomicBool::new(false),
            &mut |_| {},
        )
    }

    /// Run the file's `[[assert]]` entries (those of no scenario, or of every
    /// scenario) and return their verdicts in order.
    pub fn assert_all(&self) -> Result<Vec<Verdict>> {
        let running = self.running()?;
        let todo: Vec<_> = self
            .topology
            .assertions
            .iter()
            .filter(|a| verify::runs_in(a, None))
            .collect();
        Ok(verify::assertions(
            &running,
            &todo,
            &self.topology,
            &AtomicBool::new(false),
            &mut |_| {},
        ))
    }

    fn running(&self) -> Result<Running> {
        labs::find(&self.name)
    }

    /// Take the lab down now and say what was removed; drop does the same
    /// silently.
    pub fn down(mut self) -> Result<netns::Removed> {
        self.down = true;
        let name = self.name.clone();
        blocking(move |rt| Ok(rt.block_on(netns::down(&name))?))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.down {
            let name = self.name.clone();
            let _ = blocking(move |rt| Ok(rt.block_on(netns::down(&name))?));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_fit_a_namespace() {
        let a = unique_name("a-very-long-topology-name-that-goes-on-and-on");
        let b = unique_name("a-very-long-topology-name-that-goes-on-and-on");
        assert_ne!(a, b);
        assert!(a.len() <= 32, "{a}");
        assert!(topology::valid_name(&a), "{a}");
        assert!(unique_name("x").starts_with("x-"));
    }
}
