//! `tunbench test`'s suites: every file read and checked before anything is
//! built (its lab's name, the scenarios asked for), then each file in each of
//! its scenarios run as one suite, one after another.

use super::{Suite, SuiteRun, Verdict, runs_in};
use crate::plan::Naming;
use crate::topology::scenario::Scenario;
use crate::topology::{self, Topology};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// A file to test: its lab, its topology and text, the scenarios to run
/// (none: the file as it is).
pub struct TestFile {
    pub file: PathBuf,
    pub lab: String,
    pub topology: Topology,
    pub text: String,
    pub scenarios: Vec<Scenario>,
}

/// Why the files are not run.
#[derive(Debug)]
pub enum Refused {
    /// Files that do not load or have no assertion, each already told.
    Reported,
    /// Input that cannot be used, in words.
    Input(String),
}

/// Reads and checks `files`, keeping of each only the `scenarios` asked for
/// (all when none are). The first file's lab is `name` (default: its own
/// name), the next ones NAME-2, NAME-3, ... when names repeat. `tell` gets a
/// line for each file that is refused or skipped.
pub fn read(
    files: &[PathBuf],
    scenarios: &[String],
    name: Option<&str>,
    tell: &mut dyn FnMut(String),
) -> Result<Vec<TestFile>, Refused> {
    let mut read: Vec<TestFile> = Vec::new();
    let mut bad = false;
    for f in files {
        let t = match super::load(f, crate::lab::this_kernel()) {
            Ok(t) => t,
            Err(e) => {
                tell(e.to_string());
                bad = true;
                continue;
            }
        };
        if t.assertions.is_empty() {
            tell(format!(
                "{}: no [[assert]] entries; add one (docs/topology.md, Assertions)",
                f.display()
            ));
            bad = true;
            continue;
        }
        let text = std::fs::read_to_string(f)
            .map_err(|e| Refused::Input(format!("reading {}: {e}", f.display())))?;
        let all = topology::scenario::scenarios_str(&text, f, crate::lab::this_kernel())
            .map_err(|e| Refused::Input(e.to_string()))?;
        let Some(scenarios) = pick_scenarios(all, scenarios) else {
            tell(format!(
                "{}: none of the scenarios asked for; skipped",
                f.display()
            ));
            continue;
        };
        let lab = distinct_lab_name(name.unwrap_or(&t.name), &read);
        if !topology::valid_name(&lab) {
            return Err(Refused::Input(format!(
                "lab name \"{lab}\" must be 1-32 letters, digits, '-' or '_'"
            )));
        }
        read.push(TestFile {
            file: f.clone(),
            lab,
            topology: t,
            text,
            scenarios,
        });
    }
    if bad {
        return Err(Refused::Reported);
    }
    for want in scenarios {
        let known = read
            .iter()
            .any(|p| p.scenarios.iter().any(|s| &s.name == want));
        if !known {
            return Err(Refused::Input(format!("no file has a scenario \"{want}\"")));
        }
    }
    Ok(read)
}

/// The scenarios of a file among those `wanted`, in the order asked; all of
/// them when none are asked for or the file has none. None when the file has
/// scenarios and none of them is wanted.
fn pick_scenarios(mut all: Vec<Scenario>, wanted: &[String]) -> Option<Vec<Scenario>> {
    if wanted.is_empty() || all.is_empty() {
        return Some(all);
    }
    let mut picked = Vec::new();
    for want in wanted {
        if let Some(i) = all.iter().position(|s| &s.name == want) {
            picked.push(all.remove(i));
        }
    }
    (!picked.is_empty()).then_some(picked)
}

/// `base`, or `base-2`, `base-3`, ... when a file before has it.
fn distinct_lab_name(base: &str, before: &[TestFile]) -> String {
    let mut lab = base.to_string();
    let mut k = 1;
    while before.iter().any(|p| p.lab == lab) {
        k += 1;
        lab = format!("{base}-{k}");
    }
    lab
}

/// What a run of suites tells its caller as it goes.
pub enum Event<'a> {
    /// A suite starts: its name and lab.
    Suite { name: &'a str, lab: &'a str },
    /// An assertion of the suite `suite` has its verdict.
    Verdict {
        suite: &'a str,
        verdict: &'a Verdict,
    },
    /// Bringing the suite's lab up or down failed.
    SuiteError { name: &'a str, error: &'a str },
    /// Ctrl-C: the lab was taken down and no further file runs.
    Interrupted,
}

/// How the suites run: `force` as `up --force`, `cancel_up` and `cancel`
/// set on Ctrl-C, `manual` a scenario's manual step once its lab is up.
pub struct Control<'a> {
    pub force: bool,
    pub cancel_up: &'a netns::Cancel,
    pub cancel: &'a AtomicBool,
    pub manual: &'a mut (dyn FnMut(&str, &str) -> anyhow::Result<()> + Send),
}

/// Every file in each of its scenarios with an assertion to run, one suite
/// after another, until the end or Ctrl-C.
pub async fn run(
    files: &[TestFile],
    c: Control<'_>,
    on: &mut (dyn FnMut(Event) + Send),
) -> Vec<Suite> {
    let mut suites: Vec<Suite> = Vec::new();
    for p in files {
        let naming = Naming::new(&p.lab, None);
        let runs: Vec<(Option<&Scenario>, &Topology, &str)> = if p.scenarios.is_empty() {
            vec![(None, &p.topology, p.text.as_str())]
        } else {
            p.scenarios
                .iter()
                .map(|s| (Some(s), &s.topology, s.text.as_str()))
                .collect()
        };
        for (scenario, t, text) in runs {
            let scenario_name = scenario.map(|s| s.name.as_str());
            if !t.assertions.iter().any(|x| runs_in(x, scenario_name)) {
                continue;
            }
            let name = Suite::name_of(&p.file, scenario_name);
            on(Event::Suite {
                name: &name,
                lab: &p.lab,
            });
            let mut on_verdict = |v: &Verdict| {
                on(Event::Verdict {
                    suite: &name,
                    verdict: v,
                })
            };
            let suite = super::run_suite(
                SuiteRun {
                    topology: t,
                    file: &p.file,
                    text,
                    scenario,
                    naming: &naming,
                    force: c.force,
                },
                c.cancel_up,
                c.cancel,
                c.manual,
                &mut on_verdict,
            )
            .await;
            if let Some(e) = &suite.error {
                on(Event::SuiteError {
                    name: &name,
                    error: e,
                });
            }
            suites.push(suite);
            if c.cancel.load(Ordering::SeqCst) {
                on(Event::Interrupted);
                return suites;
            }
        }
    }
    suites
}
