//! `tunbench test`: each file (each scenario in turn) brought up, its
//! `[[assert]]` entries checked, the lab taken down; a line per assertion,
//! TAP 13 on standard output (`--tap`), JUnit XML to a file (`--junit`).
//! Exit 0 when every assertion holds, 1 when any fails, 2 on bad input.

use super::{bad_input, on_signals, runtime};
use crate::plan::Naming;
use crate::topology::{self, Topology};
use crate::verify::{self, Outcome, Suite, SuiteRun, Tap};
use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// Topology files with [[assert]] entries, tested one after another.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Only these scenarios of the files that declare them (repeatable).
    #[arg(long)]
    pub scenario: Vec<String>,
    /// Lab name of the first file; the next ones are LAB-2, LAB-3, ...
    /// (default: each file's `name`, made distinct the same way).
    #[arg(long)]
    pub name: Option<String>,
    /// Write JUnit XML here (a testsuite per file and scenario).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// TAP 13 on standard output (the lines go to standard error).
    #[arg(long)]
    pub tap: bool,
    /// Print each scenario's manual step and go on without waiting for Enter.
    #[arg(long)]
    pub yes: bool,
    /// As `up --force`: take host interfaces that carry this machine's
    /// default route or addresses.
    #[arg(long)]
    pub force: bool,
}

struct Planned {
    file: PathBuf,
    lab: String,
    topology: Topology,
    text: String,
    scenarios: Vec<topology::scenario::Scenario>,
}

pub fn test(a: TestArgs) -> Result<i32> {
    // Every file read and checked before anything is built.
    let mut planned: Vec<Planned> = Vec::new();
    let mut bad = false;
    for f in &a.files {
        let t = match verify::load(f, crate::lab::this_kernel()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{e}");
                bad = true;
                continue;
            }
        };
        if t.assertions.is_empty() {
            eprintln!(
                "{}: no [[assert]] entries; add one (docs/topology.md, Assertions)",
                f.display()
            );
            bad = true;
            continue;
        }
        let text = std::fs::read_to_string(f)
            .map_err(|e| bad_input(format!("reading {}: {e}", f.display())))?;
        let mut scenarios = topology::scenario::scenarios_str(&text, f, crate::lab::this_kernel())
            .map_err(|e| bad_input(e.to_string()))?;
        if !a.scenario.is_empty() && !scenarios.is_empty() {
            let mut picked = Vec::new();
            for want in &a.scenario {
                if let Some(i) = scenarios.iter().position(|s| &s.name == want) {
                    picked.push(scenarios.remove(i));
                }
            }
            if picked.is_empty() {
                eprintln!("{}: none of the scenarios asked for; skipped", f.display());
                continue;
            }
            scenarios = picked;
        }
        let base = match &a.name {
            Some(n) => n.clone(),
            None => t.name.clone(),
        };
        let mut lab = base.clone();
        let mut k = 1;
        while planned.iter().any(|p| p.lab == lab) {
            k += 1;
            lab = format!("{base}-{k}");
        }
        if !topology::valid_name(&lab) {
            return Err(bad_input(format!(
                "lab name \"{lab}\" must be 1-32 letters, digits, '-' or '_'"
            )));
        }
        planned.push(Planned {
            file: f.clone(),
            lab,
            topology: t,
            text,
            scenarios,
        });
    }
    if bad {
        return Ok(2);
    }
    for want in &a.scenario {
        let known = planned
            .iter()
            .any(|p| p.scenarios.iter().any(|s| &s.name == want));
        if !known {
            return Err(bad_input(format!("no file has a scenario \"{want}\"")));
        }
    }
    if !a.yes && !std::io::stdin().is_terminal() {
        if let Some(s) = planned
            .iter()
            .flat_map(|p| p.scenarios.iter())
            .find(|s| s.manual.is_some())
        {
            return Err(bad_input(format!(
                "scenario {} has a manual step (\"{}\") and standard input is not a terminal to confirm it on: run from a terminal, or give --yes to print each step and go on",
                s.name,
                s.manual.as_deref().unwrap_or_default()
            )));
        }
    }

    let rt = runtime()?;
    let (cancel, flag) = on_signals(&rt);
    let mut manual = super::measure::manual_step(a.yes, flag.clone());
    let mut tap = Tap::default();
    let tap_on = a.tap;
    let say = |s: &str| {
        if tap_on {
            eprint!("{s}");
        } else {
            print!("{s}");
            let _ = std::io::stdout().flush();
        }
    };
    if tap_on {
        print!("{}", Tap::header());
    }
    let mut suites: Vec<Suite> = Vec::new();
    'files: for p in &planned {
        let naming = Naming::new(&p.lab, None);
        let runs: Vec<(Option<&topology::scenario::Scenario>, &Topology, &str)> =
            if p.scenarios.is_empty() {
                vec![(None, &p.topology, p.text.as_str())]
            } else {
                p.scenarios
                    .iter()
                    .map(|s| (Some(s), &s.topology, s.text.as_str()))
                    .collect()
            };
        for (scenario, t, text) in runs {
            let count = t
                .assertions
                .iter()
                .filter(|x| verify::runs_in(x, scenario.map(|s| s.name.as_str())))
                .count();
            if count == 0 {
                continue;
            }
            let name = Suite {
                file: p.file.clone(),
                scenario: scenario.map(|s| s.name.clone()),
                lab: p.lab.clone(),
                verdicts: Vec::new(),
                seconds: 0.0,
                error: None,
            }
            .name();
            say(&format!("# {name} (lab {})\n", p.lab));
            if tap_on {
                print!("{}", tap.suite(&name, &p.lab));
            }
            let mut on_verdict = |v: &verify::Verdict| {
                say(&format!("{}\n", v.line()));
                if tap_on {
                    print!("{}", tap.verdict(&name, v));
                    let _ = std::io::stdout().flush();
                }
            };
            let suite = rt.block_on(verify::run_suite(
                SuiteRun {
                    topology: t,
                    file: &p.file,
                    text,
                    scenario,
                    naming: &naming,
                    force: a.force,
                },
                &cancel,
                &flag,
                &mut manual,
                &mut on_verdict,
            ));
            if let Some(e) = &suite.error {
                eprintln!("{name}: {e}");
            }
            suites.push(suite);
            if flag.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("interrupted: the lab was taken down; no further files run");
                break 'files;
            }
        }
    }
    if tap_on {
        print!("{}", tap.plan());
    }
    let all: Vec<&verify::Verdict> = suites.iter().flat_map(|s| s.verdicts.iter()).collect();
    let failed = all.iter().filter(|v| v.outcome != Outcome::Pass).count();
    let seconds: f64 = suites.iter().map(|s| s.seconds).sum();
    say(&format!(
        "{} assertions in {} suite{}: {} passed, {failed} failed ({seconds:.1} s)\n",
        all.len(),
        suites.len(),
        if suites.len() == 1 { "" } else { "s" },
        all.len() - failed
    ));
    if let Some(path) = &a.junit {
        let xml = verify::junit(&suites)?;
        std::fs::write(path, xml)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    let interrupted = flag.load(std::sync::atomic::Ordering::SeqCst);
    Ok(
        if failed > 0 || interrupted || suites.iter().any(|s| s.error.is_some()) {
            1
        } else {
            0
        },
    )
}
