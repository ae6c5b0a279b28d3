//! One suite: a file (in one scenario) brought up, its assertions run in
//! order, and the lab taken down whatever happened (a failure, an error,
//! Ctrl-C).

use super::checks::Measured;
use super::{Outcome, Suite, Verdict, runs_in};
use crate::lab::{self as labs, Running};
use crate::plan::Naming;
use crate::topology::Topology;
use crate::topology::assertion::{Assertion, Check};
use crate::topology::scenario::Scenario;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What a suite runs on.
pub struct SuiteRun<'a> {
    pub topology: &'a Topology,
    pub file: &'a Path,
    /// The file's text, or the scenario's merged text.
    pub text: &'a str,
    pub scenario: Option<&'a Scenario>,
    pub naming: &'a Naming,
    pub force: bool,
}

/// Up, every assertion of the scenario, down. `on_verdict` sees each verdict
/// as it is made; `manual` a scenario's manual step once the lab is up.
pub async fn run_suite(
    s: SuiteRun<'_>,
    cancel_up: &netns::Cancel,
    cancel: &AtomicBool,
    manual: &mut (dyn FnMut(&str, &str) -> anyhow::Result<()> + Send),
    on_verdict: &mut (dyn FnMut(&Verdict) + Send),
) -> Suite {
    let started = Instant::now();
    let scenario = s.scenario.map(|x| x.name.clone());
    let todo: Vec<&Assertion> = s
        .topology
        .assertions
        .iter()
        .filter(|a| runs_in(a, scenario.as_deref()))
        .collect();
    let mut suite = Suite {
        file: s.file.to_path_buf(),
        scenario: scenario.clone(),
        lab: s.naming.lab.clone(),
        verdicts: Vec::new(),
        seconds: 0.0,
        error: None,
    };
    let errored = |a: &Assertion, why: &str| Verdict {
        name: a.name.clone(),
        kind: a.check.kind(),
        outcome: Outcome::Error,
        measured: format!("nothing ({why})"),
        expected: expected(a, s.topology),
        seconds: 0.0,
    };
    if let Err(e) = labs::up_text(s.topology, s.file, s.text, s.naming, cancel_up, s.force).await {
        // `up` undoes what it built when it fails.
        let why = format!("lab {} did not come up: {}", s.naming.lab, chain(&e));
        for a in &todo {
            let v = errored(a, "the lab did not come up");
            on_verdict(&v);
            suite.verdicts.push(v);
        }
        suite.error = Some(why);
        suite.seconds = started.elapsed().as_secs_f64();
        return suite;
    }
    let mut stop: Option<String> = None;
    if let Some(sc) = s.scenario {
        if let Some(step) = &sc.manual {
            if let Err(e) = manual(&sc.name, step) {
                stop = Some(chain(&e));
            }
        }
    }
    let running = match labs::find(&s.naming.lab) {
        Ok(r) => Some(r),
        Err(e) => {
            stop = Some(chain(&e));
            None
        }
    };
    match (&stop, &running) {
        (None, Some(r)) => {
            suite.verdicts = assertions(r, &todo, s.topology, cancel, on_verdict);
        }
        (why, _) => {
            for a in &todo {
                let v = errored(a, why.as_deref().unwrap_or("not run"));
                on_verdict(&v);
                suite.verdicts.push(v);
            }
        }
    }
    if let Err(e) = netns::down(&s.naming.lab).await {
        suite.error = Some(format!("taking lab {} down: {e}", s.naming.lab));
    }
    suite.seconds = started.elapsed().as_secs_f64();
    suite
}

/// Run `todo` in order in the running lab; after Ctrl-C (`cancel`) the rest
/// are errors ("interrupted"). Throughput assertions on one cell share one
/// measurement.
pub fn assertions(
    r: &Running,
    todo: &[&Assertion],
    t: &Topology,
    cancel: &AtomicBool,
    on_verdict: &mut (dyn FnMut(&Verdict) + Send),
) -> Vec<Verdict> {
    assertions_where(r, todo, t, cancel, &|_| None, on_verdict)
}

/// `assertions`, but those for which `skip` gives a reason are not checked:
/// their verdicts are skipped, with that reason.
pub(super) fn assertions_where(
    r: &Running,
    todo: &[&Assertion],
    t: &Topology,
    cancel: &AtomicBool,
    skip: &dyn Fn(&Assertion) -> Option<String>,
    on_verdict: &mut (dyn FnMut(&Verdict) + Send),
) -> Vec<Verdict> {
    let mut measured = Measured::default();
    let mut out = Vec::new();
    for a in todo {
        let v = if let Some(why) = skip(a) {
            super::part::skipped(a, t, why)
        } else if cancel.load(Ordering::SeqCst) {
            Verdict {
                name: a.name.clone(),
                kind: a.check.kind(),
                outcome: Outcome::Error,
                measured: "nothing (interrupted)".into(),
                expected: expected(a, t),
                seconds: 0.0,
            }
        } else {
            one(a, r, t, cancel, &mut measured)
        };
        on_verdict(&v);
        out.push(v);
    }
    out
}

fn chain(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

/// What an assertion asks, in words.
pub(super) fn expected(a: &Assertion, t: &Topology) -> String {
    match &a.check {
        Check::Reach { expect_ok, .. } => if *expect_ok { "a reply" } else { "no reply" }.into(),
        Check::PathMtu { equals, .. } => format!("{equals} bytes"),
        Check::Throughput { expect, .. } => expect.clone(),
        Check::Command { .. } => "exit 0".into(),
        Check::Overhead { tunnel, equals } => {
            let stated = t
                .tunnels
                .iter()
                .find(|x| &x.name == tunnel)
                .map(|x| x.sizes().overhead)
                .unwrap_or_else(|| "?".into());
            match equals {
                Some(e) => format!("{e} bytes per packet, as tunbench states ({stated})"),
                None => format!("{stated} bytes per packet, as tunbench states"),
            }
        }
    }
}

/// Run one assertion in the running lab.
fn one(
    a: &Assertion,
    r: &Running,
    t: &Topology,
    cancel: &AtomicBool,
    cache: &mut Measured,
) -> Verdict {
    let started = Instant::now();
    let (outcome, measured) = match super::checks::check(a, r, t, cancel, cache) {
        Ok((pass, m)) => (if pass { Outcome::Pass } else { Outcome::Fail }, m),
        Err(e) => (Outcome::Error, format!("nothing ({})", chain(&e))),
    };
    Verdict {
        name: a.name.clone(),
        kind: a.check.kind(),
        outcome,
        measured,
        expected: expected(a, t),
        seconds: started.elapsed().as_secs_f64(),
    }
}
