//! Whole measurements as library calls: measure a running lab, or bring a topology
//! up, measure everything its `[[measure]]` entries ask for, and take it down again
//! whatever happens.

use super::results::{LabPhase, PathResult, Results};
use super::runner::{self, Progress};
use super::spec::{LatencySpec, MeasureSpec};
use crate::lab::{self as labs, Running};
use crate::plan::Naming;
use crate::topology::scenario::Scenario;
use crate::topology::{Measurement, Topology};
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Overrides from the command line for quick runs.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub runs: Option<u32>,
    pub duration: Option<f64>,
    pub trial_duration: Option<f64>,
    /// Only these scenarios, in this order (empty: every one).
    pub scenarios: Vec<String>,
    /// Take host interfaces with the host's default route or addresses anyway.
    pub force: bool,
    /// `--latency` / `--no-latency`: every measurement's probes on or off.
    pub latency: Option<bool>,
    /// `--latency-rate`: probes per second.
    pub latency_rate: Option<f64>,
}

/// The spec for one `[[measure]]` entry.
pub fn spec_of(m: &Measurement, o: &Overrides) -> MeasureSpec {
    MeasureSpec {
        path: m.name.clone(),
        scenario: None,
        from: m.from.clone(),
        to: m.to.clone(),
        ipv4: m.ipv4,
        ipv6: m.ipv6,
        families: m.families.clone(),
        protocols: m.protocols.clone(),
        directions: m.directions.clone(),
        streams: m.streams.clone(),
        runs: o.runs.unwrap_or(m.runs),
        duration: o.duration.unwrap_or(m.duration),
        trial_duration: o.trial_duration.unwrap_or(m.trial_duration),
        udp_loss_percent: m.udp_loss,
        udp_len: m.udp_len,
        latency: latency_of(m, o),
        ..MeasureSpec::seed(&m.from, m.to.clone())
    }
}

/// A measurement's latency probes: as the entry says (on toward a node, off
/// toward a server outside the lab, by default), unless the command line says
/// otherwise.
fn latency_of(m: &Measurement, o: &Overrides) -> Option<LatencySpec> {
    let on = o.latency.or(m.latency).unwrap_or(m.to.node().is_some());
    on.then(|| LatencySpec {
        rate: o.latency_rate.unwrap_or(m.latency_rate),
        idle_seconds: m.latency_idle,
        ..Default::default()
    })
}

/// Measure `specs` one after the other in a running lab.
pub fn measure_lab(
    lab: &Running,
    specs: &[MeasureSpec],
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Results> {
    let started = Instant::now();
    let mut paths: Vec<PathResult> = Vec::new();
    let mut memo = super::memo::LabMemo::default();
    let idle_seconds = idle_phase(lab, specs, &mut memo, cancel, progress)?;
    for s in specs {
        paths.push(
            runner::measure(lab, s, &mut memo, cancel, progress).with_context(|| {
                format!("measuring path {} from {} to {}", s.path, s.from, s.to)
            })?,
        );
    }
    let notes = model_notes(&lab.topology)
        .into_iter()
        .chain(
            lab.topology
                .tunnels
                .iter()
                .filter_map(|t| t.auto_fallback())
                .map(|n| n + "."),
        )
        .chain(tunnel_notes(&lab.topology, specs, &mut paths))
        .chain(outside_notes(specs))
        .chain(latency_notes(specs, &mut paths))
        .chain(shared_cell_notes(&paths))
        .collect();
    Ok(Results {
        tool: crate::engine::client::VERSION.into(),
        lab: lab.naming.lab.clone(),
        topology: lab.state.topology.as_ref().map(|p| p.display().to_string()),
        started: netns::state::now_unix(),
        seconds: started.elapsed().as_secs_f64(),
        runs_per_cell: specs.first().map(|s| s.runs).unwrap_or(0),
        duration_per_run: specs.first().map(|s| s.duration).unwrap_or(0.0),
        paths,
        reference: None,
        notes,
        host: None,
        underlays: Vec::new(),
        phases: idle_seconds
            .map(|seconds| LabPhase {
                scenario: specs.first().and_then(|s| s.scenario.clone()),
                what: "idle latency".into(),
                seconds,
            })
            .into_iter()
            .collect(),
    })
}

/// Every path's idle latency toward the lab's own nodes at once, per
/// family (`idle`); its wall seconds, None when no path has probes.
fn idle_phase(
    lab: &Running,
    specs: &[MeasureSpec],
    memo: &mut super::memo::LabMemo,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Option<f64>> {
    let Some(first) = specs.iter().find(|s| s.latency.is_some()) else {
        return Ok(None);
    };
    let cells = first.cells();
    let Some(&cell) = cells.first() else {
        return Ok(None);
    };
    let mut say = |step: String| {
        progress(&Progress {
            path: first.label(),
            cell,
            cell_index: 0,
            cells: cells.len(),
            step,
            elapsed: std::time::Duration::ZERO,
            estimated_total: std::time::Duration::from_secs_f64(first.estimated_seconds()),
            finished: None,
        })
    };
    super::idle::measure_idle_at_once(lab, specs, memo, cancel, &mut say)
        .map(Some)
        .context("measuring idle latency")
}

/// For every measured path into a tunnel (WireGuard, ESP, L2TP, IKEv2, or
/// a DS-Lite softwire its IPv4 crosses): what the tunnel adds per packet, and
/// the MTU and MSS that leaves, as a note and in the path's `tunnel`.
/// `paths[i]` is what `specs[i]` measured.
fn tunnel_notes(t: &Topology, specs: &[MeasureSpec], paths: &mut [PathResult]) -> Vec<String> {
    use crate::measure::results::TunnelCost;
    use crate::topology::tunnel::TunnelKind;
    let routes = crate::routing::Router::new(t);
    let mut out = Vec::new();
    for (s, path) in specs.iter().zip(paths.iter_mut()) {
        let targets = s.target_ips();
        let from = t.nodes.iter().position(|n| n.name == s.from);
        for (ti, tun) in t.tunnels.iter().enumerate() {
            let crosses = match tun.overlay() {
                Some(w) => targets.iter().any(|a| {
                    (0..w.peers.len()).any(|i| {
                        w.neighbours(i)
                            .into_iter()
                            .any(|j| w.allowed_for(i, j).iter().any(|n| n.contains(*a)))
                    })
                }),
                // A softwire carries IPv4 only: the path's IPv4 target, when
                // routing takes it through this one.
                None => {
                    let v4 = targets.iter().find(|a| a.is_ipv4());
                    match (from, v4) {
                        (Some(from), Some(v4)) => routes.softwire_on_the_way(from, *v4) == Some(ti),
                        _ => false,
                    }
                }
            };
            if !crosses {
                continue;
            }
            let by = match &tun.kind {
                TunnelKind::Wireguard(_) => {
                    let w = tun.overlay().expect("WireGuard is an overlay");
                    let mut imps: Vec<&str> = w.peers.iter().map(|p| p.runs()).collect();
                    imps.dedup();
                    format!(" ({})", imps.join("/"))
                }
                TunnelKind::Ikev2(e) => format!(" ({})", e.datapath.describe()),
                TunnelKind::Dslite(d) => {
                    let mut dps: Vec<&str> = std::iter::once(&d.aftr)
                        .filter(|a| !a.external)
                        .map(|a| a.datapath.as_str())
                        .chain(d.b4s.iter().map(|b| b.datapath.as_str()))
                        .collect();
                    dps.sort();
                    dps.dedup();
                    format!(" ({})", dps.join("/"))
                }
                _ => String::new(),
            };
            let sizes = tun.sizes();
            if path.tunnel.is_none() {
                path.tunnel = Some(TunnelCost {
                    name: tun.name.clone(),
                    encapsulation: sizes.encapsulation.to_string(),
                    outer: sizes.outer.to_string(),
                    bytes_min: sizes.overhead_min as u32,
                    bytes_max: sizes.overhead_max as u32,
                    inner_mtu: sizes.inner_mtu,
                });
            }
            let note = format!(
                "path {} crosses {} tunnel {}{by}: {}.",
                s.path,
                sizes.encapsulation,
                tun.name,
                sizes.describe()
            );
            if !out.contains(&note) {
                out.push(note);
            }
        }
    }
    out
}

/// How latency was measured, once, and what a path toward a server outside
/// the lab has of it: nothing unless asked, round trips only when asked, and
/// nothing (said so, figures dropped) when no echo came back from there.
/// `paths[i]` is what `specs[i]` measured.
fn latency_notes(specs: &[MeasureSpec], paths: &mut [PathResult]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(l) = specs
        .iter()
        .filter(|s| s.to.node().is_some())
        .find_map(|s| s.latency.as_ref())
    {
        let clocks = if specs.iter().any(|s| s.server_started_by_up) {
            "one-way delays where both ends share a clock or declare theirs synchronised, round trips only elsewhere (each path's note says)"
        } else {
            "one-way delays are exact, every lab namespace sharing the host's clock"
        };
        out.push(format!(
            "latency: {} probes/s of {} bytes over UDP to an echo responder beside the server (port {}), alone for {} s per family before the cells (every path of a lab at once, each to its own target), then during every cell's runs; {clocks}.",
            l.rate,
            crate::wire::probe::PACKET_LEN,
            l.port,
            l.idle_seconds
        ));
    }
    for (s, p) in specs.iter().zip(paths.iter_mut()) {
        let label = s.label();
        if s.to.node().is_some() {
            continue;
        }
        let Some(l) = &s.latency else {
            out.push(format!(
                "path {label}: no latency measured; a server outside the lab answers no latency probes unless it is `tunbench server --echo-port {}` (then --latency measures round trips to it).",
                crate::vocab::ECHO_PORT
            ));
            continue;
        };
        let answered = p.idle_latency.iter().any(|(_, x)| x.received > 0)
            || p.cells
                .iter()
                .any(|c| c.latency.as_ref().is_some_and(|x| x.received > 0));
        if answered {
            out.push(format!(
                "path {label}: latency to the server outside the lab is round trips only (its clock is not the lab's), from probes to its UDP port {}.",
                l.port
            ));
        } else {
            p.idle_latency.clear();
            for c in &mut p.cells {
                c.latency = None;
            }
            out.push(format!(
                "path {label}: no latency: no probe to {} port {} came back (is `tunbench server --echo-port {}` running there?); the throughput figures stand.",
                s.target_ips().first().map_or(s.to.to_string(), |a| a.to_string()),
                l.port,
                l.port
            ));
        }
    }
    out
}

/// Says which cells one path showed from another's measurement of the same
/// thing (`memo`): measured once, shown under both paths.
fn shared_cell_notes(paths: &[PathResult]) -> Vec<String> {
    let mut out = Vec::new();
    for p in paths {
        let label = p.label();
        for c in &p.cells {
            if let Some(by) = &c.measured_with {
                out.push(format!(
                    "path {label}: its {} cell is the one {by} measured (the same source, target address, runs, durations and rules), measured once and shown under both.",
                    c.cell.title()
                ));
            }
        }
    }
    out
}

/// Says which paths ended at a server outside the lab: tunbench neither
/// started it nor knows what it runs on, and its CPU figure is what it reported.
fn outside_notes(specs: &[MeasureSpec]) -> Vec<String> {
    let mut out = Vec::new();
    for s in specs {
        if s.to.node().is_some() {
            continue;
        }
        let label = s.label();
        out.push(format!(
            "path {label}: the server was outside the lab, at {} (an iperf3 server tunbench did not start; its CPU figure is what it reported).",
            s.to
        ));
    }
    out
}

/// Says plainly which nodes are models rather than devices: their figures come
/// from a profile's ceilings, not from anything measured here.
fn model_notes(t: &Topology) -> Vec<String> {
    let mut out = Vec::new();
    for n in &t.nodes {
        if let Some(h) = &n.host_model {
            out.push(format!(
                "{} has the UDP receive limits of host profile {} (a model calibrated from published figures, applied in its userspace slow path).",
                n.name, h.profile
            ));
        } else if let Some(m) = &n.model {
            out.push(format!(
                "{} is a model, not the device: profile {} in mode {}, ceilings calibrated from published figures, applied by tunbench's userspace slow path.",
                n.name, m.profile, m.mode
            ));
        }
    }
    for tun in &t.tunnels {
        for (role, node, _) in tun.endpoints() {
            if let Some(m) = crate::plan::datapath::termination(t, tun, role) {
                out.push(format!(
                    "{} terminates tunnel {} as a model: profile {}'s [terminations.{}] ceilings ({}), calibrated from published figures, applied by tunbench's userspace datapath at that end.",
                    t.nodes[node].name,
                    tun.name,
                    m.profile,
                    m.kind,
                    crate::codec::profile::describe_ceilings(&m.ceilings)
                ));
            }
        }
    }
    out
}

/// The scenarios `run` measures, in the order it measures them: the ones
/// `names` asks for, in that order, or every one the file declares when `names`
/// is empty (none, for a file without scenarios).
pub fn selected_scenarios(text: &str, file: &Path, names: &[String]) -> Result<Vec<Scenario>> {
    let mut scenarios =
        crate::topology::scenario::scenarios_str(text, file, crate::lab::this_kernel())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    if names.is_empty() {
        return Ok(scenarios);
    }
    let declared: Vec<String> = scenarios.iter().map(|s| s.name.clone()).collect();
    for want in names {
        if !declared.contains(want) {
            anyhow::bail!(
                "{} has no scenario \"{want}\"; its scenarios: {}",
                file.display(),
                if declared.is_empty() {
                    "none".to_string()
                } else {
                    declared.join(", ")
                }
            );
        }
    }
    let mut picked = Vec::new();
    for want in names {
        if let Some(i) = scenarios.iter().position(|s| &s.name == want) {
            picked.push(scenarios.remove(i));
        }
    }
    Ok(picked)
}

/// What `run` does when a scenario has a manual step: called with the
/// scenario's name and the step once its lab is up, before its measurements;
/// an error (the user interrupted) takes the lab down and ends the run.
pub type ManualStep<'a> = dyn FnMut(&str, &str) -> Result<()> + Send + 'a;

/// up -> every `[[measure]]` -> down. The lab is taken down even when a
/// measurement fails or `cancel` is set (Ctrl-C).
#[allow(clippy::too_many_arguments)]
pub async fn run_topology(
    t: &Topology,
    file: &Path,
    naming: &Naming,
    o: &Overrides,
    cancel_up: &netns::Cancel,
    cancel: &AtomicBool,
    progress: &mut (dyn FnMut(&Progress) + Send),
    manual: &mut ManualStep<'_>,
) -> Result<Results> {
    if t.measurements.is_empty() {
        anyhow::bail!(
            "{} has no [[measure]] entries; add one, or use `tunbench measure` on a running lab",
            file.display()
        );
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let scenarios = selected_scenarios(&text, file, &o.scenarios)?;
    if scenarios.is_empty() {
        let r = measure_once(
            t,
            file,
            &text,
            None,
            &[],
            naming,
            o,
            cancel_up,
            cancel,
            progress,
            manual,
        )
        .await?;
        return Ok(with_reference(r, t));
    }
    // Every lab is built, measured and taken down in turn; scenarios that
    // resolve to the same lab share one.
    let mut all: Option<Results> = None;
    for same in super::same_lab::group(&scenarios) {
        let built_as = &scenarios[same.built_as];
        let also: Vec<&Scenario> = same.also.iter().map(|&i| &scenarios[i]).collect();
        let mut r = measure_once(
            &built_as.topology,
            file,
            &built_as.text,
            Some(built_as),
            &also,
            naming,
            o,
            cancel_up,
            cancel,
            progress,
            manual,
        )
        .await
        .with_context(|| format!("scenario {}", built_as.name))?;
        match &mut all {
            None => all = Some(r),
            Some(a) => {
                a.seconds += r.seconds;
                a.paths.append(&mut r.paths);
                a.phases.append(&mut r.phases);
                for n in r.notes.drain(..) {
                    if !a.notes.contains(&n) {
                        a.notes.push(n);
                    }
                }
            }
        }
    }
    Ok(with_reference(all.expect("at least one scenario"), t))
}

/// The file's published figures, once for the whole run (a scenario's lab is
/// built without them).
fn with_reference(mut r: Results, t: &Topology) -> Results {
    r.reference = t.reference.clone();
    r.notes.extend(super::results::time_note(&r));
    r
}

/// Builds the lab of `scenario` (the file's own, None), measures it for it
/// and for the scenarios `also` that resolve to the same lab, and takes it
/// down whatever happens.
#[allow(clippy::too_many_arguments)]
async fn measure_once(
    t: &Topology,
    file: &Path,
    text: &str,
    scenario: Option<&Scenario>,
    also: &[&Scenario],
    naming: &Naming,
    o: &Overrides,
    cancel_up: &netns::Cancel,
    cancel: &AtomicBool,
    progress: &mut (dyn FnMut(&Progress) + Send),
    manual: &mut ManualStep<'_>,
) -> Result<Results> {
    let started = Instant::now();
    labs::up_text(t, file, text, naming, cancel_up, o.force).await?;
    let up_seconds = started.elapsed().as_secs_f64();
    let result = (|| -> Result<Results> {
        if let Some(s) = scenario {
            if let Some(step) = &s.manual {
                manual(&s.name, step)?;
            }
        }
        let name = scenario.map(|s| s.name.as_str());
        let running = labs::find(&naming.lab)?;
        let mut specs = specs_for(t, name, o);
        // What only a scenario of the same lab asks for, measured here too.
        for a in also {
            for spec in specs_for(&a.topology, Some(&a.name), o) {
                if !specs.iter().any(|s| s.path == spec.path) {
                    specs.push(spec);
                }
            }
        }
        let mut r = measure_lab(&running, &specs, cancel, progress)?;
        for a in also {
            shown_again(&mut r, name.unwrap_or_default(), a, o);
        }
        Ok(r)
    })();
    let started = Instant::now();
    let down = netns::down(&naming.lab).await;
    let down_seconds = started.elapsed().as_secs_f64();
    let mut r = result?;
    down.with_context(|| format!("taking lab {} down", naming.lab))?;
    let scenario = scenario.map(|s| s.name.clone());
    for (what, seconds) in [("up", up_seconds), ("down", down_seconds)] {
        r.phases.push(LabPhase {
            scenario: scenario.clone(),
            what: what.into(),
            seconds,
        });
    }
    Ok(r)
}

/// The specs of the `[[measure]]` entries `scenario` selects (every one
/// without a scenario).
fn specs_for(t: &Topology, scenario: Option<&str>, o: &Overrides) -> Vec<MeasureSpec> {
    t.measurements
        .iter()
        .filter(|m| match (&m.scenarios, scenario) {
            (Some(only), Some(s)) => only.iter().any(|o| o == s),
            _ => true,
        })
        .map(|m| MeasureSpec {
            scenario: scenario.map(String::from),
            ..spec_of(m, o)
        })
        .collect()
}

/// `also`'s paths in results measured in `built_as`'s lab: each path
/// `built_as` measured too is shown again under `also`'s name, marked as
/// `built_as`'s; one only `also` asks for was measured under its own name.
/// A note says why.
fn shown_again(r: &mut Results, built_as: &str, also: &Scenario, o: &Overrides) {
    let mut again = Vec::new();
    let (also, topology) = (also.name.as_str(), &also.topology);
    for spec in specs_for(topology, Some(also), o) {
        let measured = r.paths.iter().find(|p| {
            p.path == spec.path
                && p.scenario.as_deref() == Some(built_as)
                && p.same_lab_as.is_none()
        });
        if let Some(p) = measured {
            again.push(PathResult {
                scenario: Some(also.to_string()),
                same_lab_as: Some(built_as.to_string()),
                ..p.clone()
            });
        }
    }
    r.paths.extend(again);
    r.notes.push(super::same_lab::note(built_as, also));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty(s: &MeasureSpec) -> PathResult {
        PathResult {
            path: s.path.clone(),
            scenario: None,
            from: s.from.clone(),
            to: s.to.to_string(),
            ipv4: None,
            ipv6: None,
            cells: Vec::new(),
            idle_latency: Vec::new(),
            tunnel: None,
            hosts: Vec::new(),
            idle_latency_seconds: None,
            same_lab_as: None,
        }
    }

    /// Latency is on toward a node and off toward an address by default; the
    /// file's `latency` and the command line's switch override it, the file's
    /// rate and idle seconds carry over; a path outside the lab whose probes
    /// never came back loses its figures and says so.
    #[test]
    fn latency_defaults_switches_and_notes() {
        let text = r#"
name = "l"
[nodes.a]
kind = "host"
[nodes.b]
kind = "host"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.86.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.86.2/24" }
[[measure]]
name = "in"
from = "a"
to = "b"
latency_rate = 50
latency_idle = 1
[[measure]]
name = "off"
from = "a"
to = "b"
latency = false
[[measure]]
name = "far"
from = "a"
to = { address = "198.18.200.2" }
"#;
        let t = crate::topology::parse_str(text, Path::new("l.toml")).unwrap();
        let spec = |i: usize, o: &Overrides| spec_of(&t.measurements[i], o);
        let none = Overrides::default();
        let l = spec(0, &none).latency.unwrap();
        assert_eq!((l.rate, l.idle_seconds, l.port), (50.0, 1.0, 5202));
        assert_eq!(spec(1, &none).latency, None);
        assert_eq!(spec(2, &none).latency, None);
        let on = Overrides {
            latency: Some(true),
            latency_rate: Some(20.0),
            ..Default::default()
        };
        assert_eq!(spec(1, &on).latency.unwrap().rate, 20.0);
        assert!(spec(2, &on).latency.is_some());
        let off = Overrides {
            latency: Some(false),
            ..Default::default()
        };
        assert_eq!(spec(0, &off).latency, None);

        // Notes: how it was measured, and the outside path's two cases.
        let specs = vec![spec(0, &none), spec(2, &none), spec(2, &on)];
        let mut paths: Vec<PathResult> = specs.iter().map(empty).collect();
        let lost = crate::engine::latency::stats::Probes {
            sent: 10,
            ..Default::default()
        };
        paths[2].idle_latency = vec![(
            crate::vocab::Family::Ipv4,
            lost.latency(20.0, 0, false).unwrap(),
        )];
        let notes = latency_notes(&specs, &mut paths);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("latency: 50 probes/s of 64 bytes"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("path far: no latency measured"),
            "{notes:?}"
        );
        assert!(
            notes[2]
                .starts_with("path far: no latency: no probe to 198.18.200.2 port 5202 came back"),
            "{notes:?}"
        );
        assert!(paths[2].idle_latency.is_empty(), "figures of nothing kept");
    }

    /// The DS-Lite file: IPv4 to the server crosses the softwire (40 bytes,
    /// inner MTU 1460); native IPv6 crosses nothing.
    #[test]
    fn a_path_through_a_softwire_carries_its_cost() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies/dslite.toml");
        let t = crate::topology::load(&file, crate::topology::kernel::KernelFacts::FULL).unwrap();
        let specs: Vec<MeasureSpec> = t
            .measurements
            .iter()
            .map(|m| spec_of(m, &Overrides::default()))
            .collect();
        let mut paths: Vec<PathResult> = specs.iter().map(empty).collect();
        let notes = tunnel_notes(&t, &specs, &mut paths);
        let cost = |name: &str| {
            paths
                .iter()
                .find(|p| p.path == name)
                .unwrap()
                .tunnel
                .clone()
        };
        let d = cost("dslite").expect("dslite crosses the softwire");
        assert_eq!(
            (d.encapsulation.as_str(), d.outer.as_str()),
            ("DS-Lite (IPv4 in IPv6)", "IPv6")
        );
        assert_eq!((d.bytes_min, d.bytes_max, d.inner_mtu), (40, 40, 1460));
        assert_eq!(cost("native-ipv6"), None);
        assert!(
            notes.iter().any(|n| n.starts_with(
                "path dslite crosses DS-Lite (IPv4 in IPv6) tunnel sw (kernel): 40 bytes"
            )),
            "{notes:?}"
        );
    }
}
