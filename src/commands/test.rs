//! `tunbench test`: each file (each scenario in turn) brought up, its
//! `[[assert]]` entries checked, the lab taken down; a line per assertion,
//! TAP 13 on standard output (`--tap`), JUnit XML to a file (`--junit`).
//! With `--host NAME`, each file's lab is host NAME's part, already up
//! (`up FILE --host NAME`): the assertions it holds the nodes of are checked,
//! the others listed as skipped with the host that checks them, and the part
//! stays up (`verify::part`).
//! Exit 0 when every assertion holds, 1 when any fails, 2 on bad input.

use super::{bad_input, on_signals, runtime};
use crate::verify::part;
use crate::verify::suites::{self, Control, Event, Refused, TestFile};
use crate::verify::{self, Outcome, Suite, Tap};
use crate::vocab::count::counted;
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
    /// Check host NAME's part of a lab placed on several hosts, already up
    /// (`up FILE --host NAME`), and leave it up: the assertions whose nodes
    /// it holds; the others are skipped, naming the host that checks them.
    #[arg(long, value_name = "NAME", conflicts_with = "force")]
    pub host: Option<String>,
}

pub fn test(a: TestArgs) -> Result<i32> {
    // Every file read and checked before anything is built.
    let files = match suites::read(&a.files, &a.scenario, a.name.as_deref(), &mut |m| {
        eprintln!("{m}")
    }) {
        Ok(f) => f,
        Err(Refused::Reported) => return Ok(2),
        Err(Refused::Input(m)) => return Err(bad_input(m)),
    };
    if let Some(host) = &a.host {
        return test_part(&files, &a, host);
    }
    if !a.yes && !std::io::stdin().is_terminal() {
        refuse_manual_steps(&files)?;
    }
    let rt = runtime()?;
    let (cancel, flag) = on_signals(&rt);
    let mut manual = super::measure::manual_step(a.yes, flag.clone(), None);
    let mut out = Printer {
        tap: a.tap.then(Tap::default),
    };
    if out.tap.is_some() {
        print!("{}", Tap::header());
    }
    let control = Control {
        force: a.force,
        cancel_up: &cancel,
        cancel: &flag,
        manual: &mut manual,
    };
    let suites = rt.block_on(suites::run(&files, control, &mut |e| out.event(e)));
    finish(&mut out, &suites, &a, &flag)
}

/// `--host NAME`: each file's lab, up as host NAME's part, checked where it
/// holds the nodes and left up. Refused (exit 2) before any check when a
/// file's part is not up here.
fn test_part(files: &[TestFile], a: &TestArgs, host: &str) -> Result<i32> {
    if a.scenario.len() > 1 {
        return Err(bad_input(format!(
            "--host {host}: a part runs one variant of its file; give at most one --scenario (the one `up --scenario` built it in)"
        )));
    }
    let parts =
        part::find(files, a.scenario.first().map(String::as_str), host).map_err(bad_input)?;
    let rt = runtime()?;
    let (_, flag) = on_signals(&rt);
    let mut out = Printer {
        tap: a.tap.then(Tap::default),
    };
    if out.tap.is_some() {
        print!("{}", Tap::header());
    }
    let suites = part::run(&parts, host, &flag, &mut |e| out.event(e));
    finish(&mut out, &suites, a, &flag)
}

/// The summary, the JUnit file, and the exit code: 1 when an assertion
/// failed, could not be checked, or the run was interrupted.
fn finish(
    out: &mut Printer,
    suites: &[Suite],
    a: &TestArgs,
    interrupted: &std::sync::atomic::AtomicBool,
) -> Result<i32> {
    out.summary(suites);
    if let Some(path) = &a.junit {
        let xml = verify::junit(suites)?;
        std::fs::write(path, xml)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    let failed = suites.iter().any(|s| {
        s.error.is_some()
            || s.verdicts
                .iter()
                .any(|v| matches!(v.outcome, Outcome::Fail | Outcome::Error))
    });
    let interrupted = interrupted.load(std::sync::atomic::Ordering::SeqCst);
    Ok(if failed || interrupted { 1 } else { 0 })
}

/// A scenario's manual step waits for Enter on a terminal; without one (and
/// without --yes) the run is refused before anything is built.
fn refuse_manual_steps(files: &[TestFile]) -> Result<()> {
    if let Some(s) = files
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
    Ok(())
}

/// The lines of a run: on standard output, or with TAP on standard output
/// and the lines on standard error.
struct Printer {
    tap: Option<Tap>,
}

impl Printer {
    fn say(&self, s: &str) {
        if self.tap.is_some() {
            eprint!("{s}");
        } else {
            print!("{s}");
            let _ = std::io::stdout().flush();
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Suite { name, lab } => {
                self.say(&format!("# {name} (lab {lab})\n"));
                if let Some(tap) = &mut self.tap {
                    print!("{}", tap.suite(name, lab));
                }
            }
            Event::Verdict { suite, verdict } => {
                self.say(&format!("{}\n", verdict.line()));
                if let Some(tap) = &mut self.tap {
                    print!("{}", tap.verdict(suite, verdict));
                    let _ = std::io::stdout().flush();
                }
            }
            Event::SuiteError { name, error } => eprintln!("{name}: {error}"),
            Event::Interrupted => {
                eprintln!("interrupted: the lab was taken down; no further files run")
            }
        }
    }

    /// The TAP plan and the closing line.
    fn summary(&mut self, suites: &[Suite]) {
        if let Some(tap) = &self.tap {
            print!("{}", tap.plan());
        }
        let all: Vec<&verify::Verdict> = suites.iter().flat_map(|s| s.verdicts.iter()).collect();
        let passed = all.iter().filter(|v| v.outcome == Outcome::Pass).count();
        let skipped: usize = suites.iter().map(Suite::skipped).sum();
        let failed = all.len() - passed - skipped;
        let seconds: f64 = suites.iter().map(|s| s.seconds).sum();
        let skipped = if skipped > 0 {
            format!(", {skipped} skipped (checked on other hosts, or on none)")
        } else {
            String::new()
        };
        self.say(&format!(
            "{} assertions in {}: {passed} passed, {failed} failed{skipped} ({seconds:.1} s)\n",
            all.len(),
            counted(suites.len() as u64, "suite"),
        ));
    }
}
