//! One suite: a file (in one scenario) brought up, its assertions run in
//! order, and the lab taken down whatever happened (a failure, an error,
//! Ctrl-C).

use super::probe::{self, Echo, Mtu};
use super::{Outcome, Suite, Verdict, runs_in};
use crate::lab::{self as labs, Running};
use crate::measure::results::Results;
use crate::measure::session::{Overrides, measure_lab, spec_of};
use crate::measure::spec::MeasureSpec;
use crate::plan::Naming;
use crate::report::expect::{Phase, Statistic, Subject, check_with_baseline, latency_figure};
use crate::routing::Router;
use crate::topology::Topology;
use crate::topology::assertion::{AssertTarget, Assertion, Check};
use crate::topology::scenario::Scenario;
use crate::vocab::Family;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    let mut measured = Measured::default();
    let mut out = Vec::new();
    for a in todo {
        let v = if cancel.load(Ordering::SeqCst) {
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
fn expected(a: &Assertion, t: &Topology) -> String {
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
/// What a throughput assertion measures: the paths, the cell, and the runs
/// and duration it asks for.
/// Paths, cell, runs, duration, latency probes, idle phase only.
type Measurement = (
    Vec<String>,
    crate::vocab::Cell,
    Option<u32>,
    Option<f64>,
    bool,
    bool,
);

/// Results of throughput measurements already made in this suite, by what
/// was measured: a floor and a ceiling on one cell measure it once.
#[derive(Default)]
struct Measured(Vec<(Measurement, Results)>);

fn one(
    a: &Assertion,
    r: &Running,
    t: &Topology,
    cancel: &AtomicBool,
    cache: &mut Measured,
) -> Verdict {
    let started = Instant::now();
    let (outcome, measured) = match check(a, r, t, cancel, cache) {
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

/// The address a probe goes to: the one given, or the node's first address
/// of the family that routing says answers from `from` (else its first).
fn target(t: &Topology, from: usize, to: &AssertTarget, family: Family) -> Option<IpAddr> {
    let node = match to {
        AssertTarget::Address(a) => return Some(*a),
        AssertTarget::Node(n) => t.node_index(n)?,
    };
    let router = Router::new(t);
    let all: Vec<IpAddr> = t
        .node_addresses(node)
        .iter()
        .map(|(_, a)| a.ip())
        .filter(|a| Family::of(*a) == family)
        .collect();
    all.iter()
        .find(|a| router.echo_works(from, **a).is_ok())
        .or(all.first())
        .copied()
}

fn check(
    a: &Assertion,
    r: &Running,
    t: &Topology,
    cancel: &AtomicBool,
    cache: &mut Measured,
) -> anyhow::Result<(bool, String)> {
    use anyhow::Context;
    let in_node = |node: &str| r.naming.namespace(node);
    match &a.check {
        Check::Reach {
            from,
            to,
            family,
            expect_ok,
        } => {
            let src = t.node_index(from).context("no such node")?;
            let dst = target(t, src, to, *family).context("no address to probe")?;
            let e = netns::namespace::run_in(&in_node(from), move || probe::reach(dst))
                .with_context(|| format!("probing {dst} from {from}"))?;
            let measured = match e {
                Echo::Reply(d) => format!("a reply from {dst} in {:.1} ms", ms(d)),
                Echo::Silent => format!("no reply from {dst}"),
                Echo::NoRoute => format!("no reply from {dst} ({from} has no route to it)"),
                Echo::TooBig(_) => format!("no reply from {dst} (packet too big)"),
                Echo::Unreachable(by, ty, code) => {
                    format!("no reply from {dst} ({by} said unreachable, ICMP {ty}/{code})")
                }
            };
            Ok((matches!(e, Echo::Reply(_)) == *expect_ok, measured))
        }
        Check::PathMtu {
            from,
            to,
            family,
            equals,
        } => {
            let src = t.node_index(from).context("no such node")?;
            let dst = target(t, src, to, *family).context("no address to probe")?;
            // No packet leaves bigger than the node's largest interface.
            let ceiling = t.nodes[src]
                .interfaces
                .iter()
                .map(|i| i.mtu)
                .max()
                .unwrap_or(1500);
            let m = netns::namespace::run_in(&in_node(from), move || probe::path_mtu(dst, ceiling))
                .with_context(|| format!("probing the path MTU to {dst} from {from}"))?;
            Ok(match m {
                Mtu::Found { mtu, probes } => (
                    mtu == *equals,
                    format!("{mtu} bytes to {dst} ({probes} probes)"),
                ),
                Mtu::NoReply(_) => (false, format!("no reply from {dst} at all")),
            })
        }
        Check::Command { node, run } => {
            let (code, tail) = probe::command(&in_node(node), run, Duration::from_secs(60))
                .with_context(|| format!("running {} in {node}", run[0]))?;
            let tail = if tail.is_empty() {
                String::new()
            } else {
                format!(" ({tail})")
            };
            Ok(match code {
                Some(0) => (true, format!("exit 0{tail}")),
                Some(c) => (false, format!("exit {c}{tail}")),
                None => (false, "no exit within 60 s (killed)".into()),
            })
        }
        Check::Overhead { tunnel, equals } => overhead(t, r, tunnel, *equals),
        Check::Throughput {
            expect,
            runs,
            duration,
        } => {
            let e = super::expectation(expect).map_err(anyhow::Error::msg)?;
            let (paths, cell) = super::paths_of(&e, t);
            // A latency figure needs the probes (also toward a server outside
            // the lab, round trips only); an idle one needs no cell.
            let latency = matches!(e.subject, Subject::Latency { .. });
            let idle_only = matches!(
                e.subject,
                Subject::Latency {
                    phase: Phase::Idle(_),
                    ..
                }
            );
            let o = Overrides {
                runs: *runs,
                duration: *duration,
                latency: Some(latency),
                ..Default::default()
            };
            // Only the cell asked for, on only the paths it names.
            let specs: Vec<MeasureSpec> = paths
                .iter()
                .filter_map(|p| t.measurements.iter().find(|m| &m.name == p))
                .map(|m| MeasureSpec {
                    families: vec![cell.family],
                    protocols: if idle_only {
                        Vec::new()
                    } else {
                        vec![cell.protocol]
                    },
                    directions: vec![cell.direction],
                    streams: vec![cell.streams],
                    ..spec_of(m, &o)
                })
                .collect();
            let key = (paths.clone(), cell, *runs, *duration, latency, idle_only);
            let results = match cache.0.iter().find(|(k, _)| *k == key) {
                Some((_, r)) => r.clone(),
                None => {
                    let fresh = measure_lab(r, &specs, cancel, &mut |_| {})?;
                    cache.0.push((key, fresh.clone()));
                    fresh
                }
            };
            let failures = check_with_baseline(
                &results,
                std::slice::from_ref(&e),
                paths.first().map(String::as_str),
            );
            let figure = |path: &str, stat: Statistic| {
                results
                    .paths
                    .iter()
                    .find(|p| p.label() == path)
                    .and_then(|p| p.cell(&cell))
                    .filter(|c| c.error.is_none())
                    .map(|c| stat.of(c))
            };
            let measured = match &e.subject {
                Subject::Cell { statistic, .. } => {
                    figure(&paths[0], *statistic).map(|bps| format!("{:.1} Mbit/s", bps / 1e6))
                }
                Subject::Latency {
                    phase,
                    way,
                    percentile,
                    ..
                } => results
                    .paths
                    .iter()
                    .find(|p| p.label() == paths[0])
                    .and_then(|p| latency_figure(p, phase, *way, *percentile).ok())
                    .map(|v| format!("{} ms", crate::report::views::ms(v))),
                Subject::Ratio { statistic, .. } => {
                    match (figure(&paths[0], *statistic), figure(&paths[1], *statistic)) {
                        (Some(n), Some(d)) if d > 0.0 => Some(format!(
                            "{:.3} ({:.1} / {:.1} Mbit/s)",
                            n / d,
                            n / 1e6,
                            d / 1e6
                        )),
                        _ => None,
                    }
                }
            };
            let measured = match (measured, failures.first()) {
                (Some(m), _) => m,
                (None, Some(f)) => f.message.clone(),
                (None, None) => "no figure".into(),
            };
            Ok((failures.is_empty(), measured))
        }
    }
}

/// The largest packet of an echo of `inner` bytes encapsulated (at most 200
/// bytes more) that `cap` has seen since it was last read. The echo was
/// answered, so its request crossed the interface; a loaded machine may still
/// be queueing the copy, so this waits for it, up to 2 s.
fn encapsulated(cap: &probe::Capture, inner: usize) -> Option<usize> {
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    loop {
        seen.extend(cap.arrived());
        let outer = seen
            .iter()
            .copied()
            .filter(|&l| l > inner && l <= inner + 200)
            .max();
        if outer.is_some() || started.elapsed() > Duration::from_secs(2) {
            return outer;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Echoes of four inner sizes in a row (every ESP padding length) from the
/// tunnel's first peer to a neighbour's inner address, each outer packet
/// captured on the neighbour's underlay interface: outer minus inner is what
/// the tunnel added.
fn overhead(
    t: &Topology,
    r: &Running,
    tunnel: &str,
    equals: Option<u32>,
) -> anyhow::Result<(bool, String)> {
    use anyhow::Context;
    let tun = t
        .tunnels
        .iter()
        .find(|x| x.name == tunnel)
        .context("no such tunnel")?;
    let w = tun.overlay().context("not a point-to-point tunnel")?;
    let near = &w.peers[0];
    let far = &w.peers[*w
        .neighbours(0)
        .first()
        .context("the first peer has no neighbour")?];
    let inner = far
        .addresses
        .iter()
        .map(|a| a.ip())
        .min_by_key(|a| a.is_ipv6())
        .context("the far peer has no inner address")?;
    let iface = t
        .node_addresses(far.node)
        .into_iter()
        .find(|(_, a)| a.ip() == far.endpoint)
        .map(|(i, _)| i)
        .context("no interface holds the far peer's endpoint")?;
    let (near_node, far_node) = (&t.nodes[near.node].name, &t.nodes[far.node].name);
    let cap_iface = iface.clone();
    let cap = netns::namespace::run_in(&r.naming.namespace(far_node), move || {
        probe::Capture::on(&cap_iface)
    })
    .with_context(|| format!("capturing on {far_node}:{iface}"))?;
    let mut prober = netns::namespace::run_in(&r.naming.namespace(near_node), move || {
        probe::Prober::new(inner.is_ipv4())
    })
    .with_context(|| format!("an ICMP socket in {near_node}"))?;
    let mut seen: Vec<usize> = Vec::new();
    for n in 1000..1004u32 {
        cap.arrived();
        let mut e = Echo::Silent;
        for wait in probe::REACH_TRIES {
            e = prober.echo(inner, n, wait)?;
            if e != Echo::Silent {
                break;
            }
        }
        if !matches!(e, Echo::Reply(_)) {
            return Ok((
                false,
                format!("no reply from {inner} through {tunnel} to a {n}-byte echo"),
            ));
        }
        let outer = encapsulated(&cap, n as usize)
            .with_context(|| format!("no encapsulated packet seen on {far_node}:{iface}"))?;
        seen.push(outer - n as usize);
    }
    let (min, max) = (
        *seen.iter().min().unwrap_or(&0),
        *seen.iter().max().unwrap_or(&0),
    );
    let sizes = tun.sizes();
    let pass = (min, max) == (sizes.overhead_min, sizes.overhead_max)
        && equals.is_none_or(|e| min == e as usize && max == e as usize);
    let figure = if min == max {
        min.to_string()
    } else {
        format!("{min}-{max}")
    };
    Ok((
        pass,
        format!("{figure} bytes per packet on {far_node}:{iface} (inner 1000-1003)"),
    ))
}
