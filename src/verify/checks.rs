//! Each kind of assertion checked in a running lab: reach and path MTU
//! probed from a node's namespace, a command's exit status, a throughput cell
//! measured and held to its expression, a tunnel's overhead captured on the
//! wire. Each gives whether it passed and what it found, in words.

use super::capture::{Arrived, Capture};
use super::probe::{self, Echo, Mtu};
use crate::lab::Running;
use crate::measure::results::Results;
use crate::measure::session::{Overrides, measure_lab, spec_of};
use crate::measure::spec::MeasureSpec;
use crate::report::expect::{
    Expectation, Phase, Statistic, Subject, check_with_baseline, latency_figure,
};
use crate::routing::Router;
use crate::topology::Topology;
use crate::topology::assertion::{AssertTarget, Assertion, Check};
use crate::vocab::{Cell, Family};
use anyhow::Context;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What a throughput assertion measures: the paths, the cell, the runs and
/// duration it asks for, whether it reads latency, whether only the idle phase.
#[derive(Clone, PartialEq)]
struct MeasurementKey {
    paths: Vec<String>,
    cell: Cell,
    runs: Option<u32>,
    duration: Option<f64>,
    latency: bool,
    idle_only: bool,
}

/// Results of throughput measurements already made in this suite, by what
/// was measured: a floor and a ceiling on one cell measure it once.
#[derive(Default)]
pub struct Measured(Vec<(MeasurementKey, Results)>);

/// Checks `a` in the running lab: whether it holds, and what was found.
pub fn check(
    a: &Assertion,
    r: &Running,
    t: &Topology,
    cancel: &AtomicBool,
    cache: &mut Measured,
) -> anyhow::Result<(bool, String)> {
    match &a.check {
        Check::Reach {
            from,
            to,
            family,
            expect_ok,
        } => reach(r, t, from, to, *family, *expect_ok),
        Check::PathMtu {
            from,
            to,
            family,
            equals,
        } => path_mtu(r, t, from, to, *family, *equals),
        Check::Command { node, run } => command(r, node, run),
        Check::Overhead { tunnel, equals } => overhead(t, r, tunnel, *equals),
        Check::Throughput {
            expect,
            runs,
            duration,
        } => throughput(r, t, expect, *runs, *duration, cancel, cache),
    }
}

/// An echo from `from` to `to`: a reply, or none, as expected.
fn reach(
    r: &Running,
    t: &Topology,
    from: &str,
    to: &AssertTarget,
    family: Family,
    expect_ok: bool,
) -> anyhow::Result<(bool, String)> {
    let src = t.node_index(from).context("no such node")?;
    let dst = target(t, src, to, family).context("no address to probe")?;
    let e = netns::namespace::run_in(&r.naming.namespace(from), move || probe::reach(dst))
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
    Ok((matches!(e, Echo::Reply(_)) == expect_ok, measured))
}

/// The path MTU from `from` to `to`, equal to `equals`.
fn path_mtu(
    r: &Running,
    t: &Topology,
    from: &str,
    to: &AssertTarget,
    family: Family,
    equals: u32,
) -> anyhow::Result<(bool, String)> {
    let src = t.node_index(from).context("no such node")?;
    let dst = target(t, src, to, family).context("no address to probe")?;
    // No packet leaves bigger than the node's largest interface.
    let ceiling = t.nodes[src]
        .interfaces
        .iter()
        .map(|i| i.mtu)
        .max()
        .unwrap_or(1500);
    let m = netns::namespace::run_in(&r.naming.namespace(from), move || {
        probe::path_mtu(dst, ceiling)
    })
    .with_context(|| format!("probing the path MTU to {dst} from {from}"))?;
    Ok(match m {
        Mtu::Found { mtu, probes } => (
            mtu == equals,
            format!("{mtu} bytes to {dst} ({probes} probes)"),
        ),
        Mtu::NoReply(_) => (false, format!("no reply from {dst} at all")),
    })
}

/// A command in `node`'s namespace, exiting 0 within a minute.
fn command(r: &Running, node: &str, run: &[String]) -> anyhow::Result<(bool, String)> {
    let (code, tail) =
        super::command::command(&r.naming.namespace(node), run, Duration::from_secs(60))
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

/// A throughput (or latency) figure measured with the file's `[[measure]]`
/// method and held to the expression `expect`.
fn throughput(
    r: &Running,
    t: &Topology,
    expect: &str,
    runs: Option<u32>,
    duration: Option<f64>,
    cancel: &AtomicBool,
    cache: &mut Measured,
) -> anyhow::Result<(bool, String)> {
    let e = super::expectation(expect).map_err(anyhow::Error::msg)?;
    let (paths, cell) = super::paths_of(&e, t);
    // A latency figure needs the probes (also toward a server outside
    // the lab, round trips only); an idle one needs no cell.
    let key = MeasurementKey {
        paths,
        cell,
        runs,
        duration,
        latency: matches!(e.subject, Subject::Latency { .. }),
        idle_only: matches!(
            e.subject,
            Subject::Latency {
                phase: Phase::Idle(_),
                ..
            }
        ),
    };
    let results = match cache.0.iter().find(|(k, _)| *k == key) {
        Some((_, r)) => r.clone(),
        None => {
            let fresh = measure_lab(r, &specs(t, &key), cancel, &mut |_| {})?;
            cache.0.push((key.clone(), fresh.clone()));
            fresh
        }
    };
    let failures = check_with_baseline(
        &results,
        std::slice::from_ref(&e),
        key.paths.first().map(String::as_str),
    );
    let measured = match (figure(&e, &key.paths, cell, &results), failures.first()) {
        (Some(m), _) => m,
        (None, Some(f)) => f.message.clone(),
        (None, None) => "no figure".into(),
    };
    Ok((failures.is_empty(), measured))
}

/// Only the cell asked for, on only the paths it names.
fn specs(t: &Topology, key: &MeasurementKey) -> Vec<MeasureSpec> {
    let o = Overrides {
        runs: key.runs,
        duration: key.duration,
        latency: Some(key.latency),
        ..Default::default()
    };
    let cell = key.cell;
    key.paths
        .iter()
        .filter_map(|p| t.measurements.iter().find(|m| &m.name == p))
        .map(|m| MeasureSpec {
            families: vec![cell.family],
            protocols: if key.idle_only {
                Vec::new()
            } else {
                vec![cell.protocol]
            },
            directions: vec![cell.direction],
            streams: vec![cell.streams],
            ..spec_of(m, &o)
        })
        .collect()
}

/// The figure the expression reads, in words: a rate, a latency, a ratio.
fn figure(e: &Expectation, paths: &[String], cell: Cell, results: &Results) -> Option<String> {
    let rate = |path: &str, stat: Statistic| {
        results
            .paths
            .iter()
            .find(|p| p.label() == path)
            .and_then(|p| p.cell(&cell))
            .filter(|c| c.error.is_none())
            .map(|c| stat.of(c))
    };
    match &e.subject {
        Subject::Cell { statistic, .. } => {
            rate(&paths[0], *statistic).map(|bps| format!("{:.1} Mbit/s", bps / 1e6))
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
            match (rate(&paths[0], *statistic), rate(&paths[1], *statistic)) {
                (Some(n), Some(d)) if d > 0.0 => Some(format!(
                    "{:.3} ({:.1} / {:.1} Mbit/s)",
                    n / d,
                    n / 1e6,
                    d / 1e6
                )),
                _ => None,
            }
        }
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

/// The largest packet of an echo of `inner` bytes encapsulated (at most 200
/// bytes more) that `cap` has seen since it was last read. The echo was
/// answered, so its request crossed the interface; a loaded machine may still
/// be queueing the copy, so this waits for it, up to 2 s.
/// The longest packet on `cap` that can carry an inner one of `inner` bytes
/// (at most 200 more); Err says what was seen instead. The echo was answered,
/// so its request crossed the interface already: the wait is a bound.
fn encapsulated(cap: &mut Capture, inner: usize) -> Result<usize, String> {
    let started = std::time::Instant::now();
    let mut seen = Arrived::default();
    loop {
        let a = cap.arrived();
        seen.lengths.extend(a.lengths);
        seen.undescribed += a.undescribed;
        let outer = seen
            .lengths
            .iter()
            .copied()
            .filter(|&l| l > inner && l <= inner + 200)
            .max();
        if let Some(outer) = outer {
            return Ok(outer);
        }
        if started.elapsed() > Duration::from_secs(2) {
            return Err(match seen.undescribed {
                0 => format!("packets of {:?} bytes", seen.lengths),
                n => format!(
                    "packets of {:?} bytes and {n} super-packet(s) this kernel cannot describe",
                    seen.lengths
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Waits of the tries of one measured echo of the `overhead` check.
const MEASURED_ECHO_WAITS: [Duration; 3] = [
    Duration::from_secs(2),
    Duration::from_secs(2),
    Duration::from_secs(2),
];

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
    let mut cap = netns::namespace::run_in(&r.naming.namespace(far_node), move || {
        Capture::on(&cap_iface)
    })
    .with_context(|| format!("capturing on {far_node}:{iface}"))?;
    let mut prober = netns::namespace::run_in(&r.naming.namespace(near_node), move || {
        probe::DfPinger::new(inner.is_ipv4())
    })
    .with_context(|| format!("an ICMP socket in {near_node}"))?;
    // The first echo waits for neighbours and handshakes; the measured ones
    // are retried only after long silences, so a request and its retry
    // seldom leave together as one super-packet.
    prober.echo_until_heard(inner, 1000)?;
    let mut seen: Vec<usize> = Vec::new();
    for n in 1000..1004u32 {
        cap.arrived();
        let e = prober.echo_with_waits(inner, n, &MEASURED_ECHO_WAITS)?;
        if !matches!(e, Echo::Reply(_)) {
            return Ok((
                false,
                format!("no reply from {inner} through {tunnel} to a {n}-byte echo"),
            ));
        }
        let outer = encapsulated(&mut cap, n as usize).map_err(|seen| {
            anyhow::anyhow!(
                "no encapsulated packet of a {n}-byte echo seen on {far_node}:{iface}, only {seen}"
            )
        })?;
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
