//! Idle latency once per lab and family: before any path's cells, every
//! path's probes run at once, alone in the lab, for the idle seconds; each
//! path keeps its own figure (its own source, target address and way
//! through the lab). Probes are a few small packets a second per path, so
//! together they load no ceiling; one family after the other, as before.
//! Paths to a server outside the lab keep their own idle phase: tunbench
//! starts nothing there.

use super::client_thread::idle_probes;
use super::memo::{LabMemo, same_method};
use super::server::{ServerProcess, server_for, wait_for_server};
use super::spec::{MeasureSpec, target_addresses};
use crate::lab::Running;
use crate::vocab::Family;
use anyhow::Result;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;

/// One path's probes in the shared idle phase.
struct Prober<'a> {
    spec: &'a MeasureSpec,
    client_ns: String,
    addr: IpAddr,
}

/// Measures the idle latency of every path of `specs` toward a node of the
/// lab, family by family, all paths at once, into `memo` (where each path's
/// measurement finds it). `say` tells what is under way. Returns the wall
/// seconds it took.
pub fn measure_idle_at_once(
    lab: &Running,
    specs: &[MeasureSpec],
    memo: &mut LabMemo,
    cancel: &AtomicBool,
    say: &mut dyn FnMut(String),
) -> Result<f64> {
    let started = std::time::Instant::now();
    let servers = start_servers(lab, specs)?;
    for family in [Family::Ipv4, Family::Ipv6] {
        let probers = probers(lab, specs, memo, family)?;
        if probers.is_empty() {
            continue;
        }
        let seconds = probers[0]
            .spec
            .latency
            .as_ref()
            .map_or(0.0, |l| l.idle_seconds);
        say(format!(
            "{} idle latency of {} path(s) at once, probes alone for {seconds} s",
            family.title(),
            probers.len()
        ));
        for (p, latency) in probe_all(&probers, cancel) {
            if let Some(l) = latency {
                memo.keep_idle(p.spec, p.addr, family, &l);
            }
        }
    }
    drop(servers);
    Ok(started.elapsed().as_secs_f64())
}

/// The lab's own servers (with their echo responders) the idle phase
/// probes, one per target node, waited for.
fn start_servers(lab: &Running, specs: &[MeasureSpec]) -> Result<Vec<ServerProcess>> {
    let mut started: Vec<String> = Vec::new();
    let mut servers = Vec::new();
    for s in specs.iter().filter(|s| shares_the_idle_phase(s)) {
        let node = s.to.to_string();
        if started.contains(&node) {
            continue;
        }
        let client_ns = lab.naming.namespace(&s.from);
        let (server, port) = server_for(lab, s, &client_ns)?;
        let (v4, v6) = target_addresses(lab, s)?;
        for addr in [v4, v6].into_iter().flatten() {
            if crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr).is_none() {
                wait_for_server(&client_ns, SocketAddr::new(addr, port))?;
            }
        }
        servers.extend(server);
        started.push(node);
    }
    Ok(servers)
}

/// Paths toward a node of this lab with latency probes, whose server this
/// run starts (not one a part's `up` started on another host).
fn shares_the_idle_phase(s: &MeasureSpec) -> bool {
    s.latency.is_some() && s.to.node().is_some() && !s.server_started_by_up
}

/// One prober per path and target address of `family` not measured yet and
/// not behind a dead datapath.
fn probers<'a>(
    lab: &Running,
    specs: &'a [MeasureSpec],
    memo: &LabMemo,
    family: Family,
) -> Result<Vec<Prober<'a>>> {
    let mut out: Vec<Prober> = Vec::new();
    for spec in specs.iter().filter(|s| shares_the_idle_phase(s)) {
        if !spec.families.contains(&family) {
            continue;
        }
        let (v4, v6) = target_addresses(lab, spec)?;
        let Some(addr) = (match family {
            Family::Ipv4 => v4,
            Family::Ipv6 => v6,
        }) else {
            continue;
        };
        let client_ns = lab.naming.namespace(&spec.from);
        let twice = out
            .iter()
            .any(|p| p.addr == addr && same_method(p.spec, spec));
        let dead = crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr);
        if twice || dead.is_some() || memo.idle(spec, addr, family).is_some() {
            continue;
        }
        out.push(Prober {
            spec,
            client_ns,
            addr,
        });
    }
    Ok(out)
}

/// Every prober's probes at once; each one's latency, None where its probes
/// could not run or none came back.
fn probe_all<'p, 'a>(
    probers: &'p [Prober<'a>],
    cancel: &AtomicBool,
) -> Vec<(&'p Prober<'a>, Option<crate::measure::results::Latency>)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = probers
            .iter()
            .map(|p| {
                s.spawn(move || {
                    let l = p.spec.latency.as_ref()?;
                    let echo = SocketAddr::new(p.addr, l.port);
                    let phase =
                        idle_probes(&p.client_ns, echo, l.rate, l.idle_seconds, cancel).ok()?;
                    phase
                        .probes
                        .latency(l.rate, phase.start_ns, p.spec.one_way())
                })
            })
            .collect();
        probers
            .iter()
            .zip(handles)
            .map(|(p, h)| (p, h.join().ok().flatten()))
            .collect()
    })
}
