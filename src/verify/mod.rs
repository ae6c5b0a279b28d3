//! `[[assert]]` entries checked in a running lab (`tunbench test`): reach and
//! path MTU probed from a node's namespace, a throughput cell measured with
//! the file's `[[measure]]` method and held to its `--expect` expression, a
//! command's exit status. Verdicts are written as lines, TAP 13 or JUnit XML.
//!
//! The topology layer reads and checks the entries; the throughput kind's
//! expression belongs to `report::expect`, a layer above it, so [`load`] adds
//! those checks to the file's own (located like every topology error).

pub mod capture;
mod checks;
pub mod command;
pub mod icmp;
mod junit;
pub mod part;
pub mod probe;
pub mod reach_matrix;
mod run;
pub mod suites;
mod tap;

pub use junit::junit;
pub use run::{SuiteRun, assertions, run_suite};
pub use tap::Tap;

use crate::report::expect::{self, Expectation, Phase, Subject};
use crate::topology::assertion::{Assertion, Check};
use crate::topology::kernel::KernelFacts;
use crate::topology::{KeyPath, LoadError, Problem, Topology};
use std::path::{Path, PathBuf};

/// How one assertion came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// Measured, and not what was expected.
    Fail,
    /// Could not be measured (the lab did not come up, a probe failed to run,
    /// the run was interrupted).
    Error,
    /// Not checked here: on one host's part of a lab placed on several
    /// hosts, an assertion another host checks (`measured` says which), or
    /// none ([`part`]). Neither passed nor failed.
    Skipped,
}

/// One assertion's verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub name: String,
    pub kind: &'static str,
    pub outcome: Outcome,
    /// What was found: "1460 bytes", "reply in 0.2 ms", "941.2 Mbit/s".
    pub measured: String,
    /// What the file asks: "1460 bytes", "a reply", "ipv4.tcp.sender >= 500M".
    pub expected: String,
    pub seconds: f64,
}

impl Verdict {
    /// `ok name: measured X, expected Y (0.8 s)`; `skip name: why`.
    pub fn line(&self) -> String {
        if self.outcome == Outcome::Skipped {
            return format!("skip {}: {}", self.name, self.measured);
        }
        format!(
            "{} {}: measured {}, expected {} ({:.1} s)",
            match self.outcome {
                Outcome::Pass => "ok",
                Outcome::Fail | Outcome::Error | Outcome::Skipped => "FAIL",
            },
            self.name,
            self.measured,
            self.expected,
            self.seconds
        )
    }
}

/// One file in one scenario: its lab, its verdicts.
#[derive(Debug, Clone)]
pub struct Suite {
    pub file: PathBuf,
    pub scenario: Option<String>,
    pub lab: String,
    pub verdicts: Vec<Verdict>,
    pub seconds: f64,
    /// Bringing the lab up or down failed (its assertions are errors).
    pub error: Option<String>,
}

impl Suite {
    /// `dslite.toml` or `dslite.toml:kernel`: the suite's name in reports.
    pub fn name(&self) -> String {
        Suite::name_of(&self.file, self.scenario.as_deref())
    }

    /// The name of the suite of `file` in `scenario`.
    pub fn name_of(file: &Path, scenario: Option<&str>) -> String {
        let f = file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.display().to_string());
        match scenario {
            Some(s) => format!("{f}:{s}"),
            None => f,
        }
    }

    pub fn failures(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Fail)
            .count()
    }

    pub fn errors(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Error)
            .count()
    }

    pub fn skipped(&self) -> usize {
        self.verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Skipped)
            .count()
    }
}

/// Whether an assertion runs in a scenario (`None`: a file without any).
pub fn runs_in(a: &Assertion, scenario: Option<&str>) -> bool {
    match (&a.scenarios, scenario) {
        (Some(only), Some(s)) => only.iter().any(|o| o == s),
        _ => true,
    }
}

/// A throughput assertion's expression, read; it names one figure.
pub fn expectation(text: &str) -> Result<Expectation, String> {
    let e = expect::parse(text).map_err(|m| m.lines().next().unwrap_or("").to_string())?;
    match &e.subject {
        Subject::Cell { .. } | Subject::Ratio { cell: Some(_), .. } | Subject::Latency { .. } => {
            Ok(e)
        }
        Subject::Ratio { .. } => Err(format!(
            "\"{text}\" compares every cell of two paths; a throughput assertion names one cell: PATH/BASELINE:CELL OP RATIO, e.g. wg/raw:ipv4.tcp.sender >= 0.2"
        )),
    }
}

/// The `[[measure]]` names a throughput expectation reads, and its cell; a
/// cell without a path reads the first `[[measure]]`.
pub fn paths_of(e: &Expectation, t: &Topology) -> (Vec<String>, crate::vocab::Cell) {
    let first = || t.measurements.first().map(|m| m.name.clone());
    match &e.subject {
        Subject::Cell { path, cell, .. } => {
            (path.clone().or_else(first).into_iter().collect(), *cell)
        }
        // Idle latency needs no cell; the family's TCP upload stands for it
        // (the run measures only the idle phase, see `run`).
        Subject::Latency { path, phase, .. } => (
            path.clone().or_else(first).into_iter().collect(),
            match phase {
                Phase::Loaded(c) => *c,
                Phase::Idle(family) => crate::vocab::Cell {
                    family: *family,
                    protocol: crate::vocab::Proto::Tcp,
                    direction: crate::vocab::Direction::Sender,
                    streams: 1,
                },
            },
        ),
        Subject::Ratio {
            numerator,
            denominator,
            cell,
            ..
        } => (
            vec![numerator.clone(), denominator.clone()],
            cell.expect("expectation() keeps ratios with a cell"),
        ),
    }
}

/// Problems of throughput assertions: the expression, the paths and the cell
/// it names against the file's `[[measure]]` entries.
pub fn problems(t: &Topology) -> Vec<Problem> {
    let mut p = Vec::new();
    for a in &t.assertions {
        let Check::Throughput { expect, .. } = &a.check else {
            continue;
        };
        let at: KeyPath = a.at.key("expect");
        let e = match expectation(expect) {
            Ok(e) => e,
            Err(m) => {
                p.push(Problem::new(&at, m));
                continue;
            }
        };
        if t.measurements.is_empty() {
            p.push(Problem::new(
                &at,
                "a throughput assertion reads a [[measure]] path; the file has none",
            ));
            continue;
        }
        let (paths, cell) = paths_of(&e, t);
        let names: Vec<&str> = t.measurements.iter().map(|m| m.name.as_str()).collect();
        for path in &paths {
            let Some(m) = t.measurements.iter().find(|m| &m.name == path) else {
                p.push(Problem::new(
                    &at,
                    format!(
                        "no [[measure]] path \"{path}\"; paths: {} (a path is a [[measure]] name; the scenario is the assertion's own)",
                        names.join(", ")
                    ),
                ));
                continue;
            };
            let covers = m.families.contains(&cell.family)
                && m.protocols.contains(&cell.protocol)
                && m.directions.contains(&cell.direction)
                && m.streams.contains(&cell.streams);
            if !covers {
                p.push(Problem::new(
                    &at,
                    format!(
                        "[[measure]] \"{path}\" has no cell {}: it measures {} x {} x {}, streams {}",
                        cell.key(),
                        words(m.families.iter().map(|f| f.word())),
                        words(m.protocols.iter().map(|x| x.word())),
                        words(m.directions.iter().map(|d| d.word())),
                        words(m.streams.iter().map(|s| s.to_string()))
                    ),
                ));
            }
            if let Some(only) = &m.scenarios {
                let outside: Vec<&String> = match &a.scenarios {
                    Some(mine) => mine.iter().filter(|s| !only.contains(s)).collect(),
                    None => Vec::new(),
                };
                if a.scenarios.is_none() || !outside.is_empty() {
                    p.push(Problem::new(
                        &at,
                        format!(
                            "[[measure]] \"{path}\" runs only in scenarios {}; give the assertion scenarios = [...] among them",
                            only.join(", ")
                        ),
                    ));
                }
            }
        }
    }
    p
}

fn words<S: ToString>(i: impl Iterator<Item = S>) -> String {
    i.map(|s| s.to_string()).collect::<Vec<_>>().join(",")
}

/// `topology::load` and the throughput assertions' checks, every problem
/// located in the file.
pub fn load(path: &Path, kernel: KernelFacts) -> Result<Topology, LoadError> {
    let t = crate::topology::load(path, kernel)?;
    let problems = problems(&t);
    if problems.is_empty() {
        return Ok(t);
    }
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Err(LoadError::Invalid(crate::topology::located(
        problems, &text, path,
    )))
}
