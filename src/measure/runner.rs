//! Runs a measurement in a running lab: the server (`server`), then the
//! client on a thread inside the source node's namespace (`client_thread`):
//! idle latency first, then cell after cell (`cell`).

use super::cell::{CellRun, PredictedLimits, base_params};
use super::client_thread::idle_probes;
use super::memo::LabMemo;
use super::results::{CellResult, Latency, PathResult};
use super::server::{server_for, wait_for_server};
use super::spec::{LatencySpec, MeasureSpec, target_addresses};
use crate::lab::Running;
use crate::vocab::{Cell, Direction, Family, Proto};
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where the measurement is, for a progress display.
#[derive(Debug, Clone)]
pub struct Progress {
    pub path: String,
    pub cell: Cell,
    pub cell_index: usize,
    pub cells: usize,
    /// "run 2/5" or "search trial 3 at 850 Mbit/s".
    pub step: String,
    pub elapsed: Duration,
    pub estimated_total: Duration,
    /// The cell's result once it is done (the step then says "done"): what a
    /// display without a terminal prints, one line a cell.
    pub finished: Option<CellResult>,
}

/// Measure every cell of `spec` in the running lab; a cell or an idle
/// latency `memo` already holds (another path measured it the same way) is
/// taken from there, and what is measured here is kept in it.
pub fn measure(
    lab: &Running,
    spec: &MeasureSpec,
    memo: &mut LabMemo,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<PathResult> {
    let (v4, v6) = target_addresses(lab, spec)?;
    let client_ns = lab.naming.namespace(&spec.from);
    let (_server, port) = server_for(lab, spec, &client_ns)?;
    let mut path = PathRun {
        lab,
        spec,
        cancel,
        client_ns,
        port,
        v4,
        v6,
        from: lab.topology.node_index(&spec.from),
        cells: spec.cells(),
        label: spec.label(),
        started: Instant::now(),
        estimate: Duration::from_secs_f64(spec.estimated_seconds()),
        waited: BTreeSet::new(),
    };
    let mut out = unmeasured(spec, v4, v6);
    if let Some(l) = &spec.latency {
        let started = Instant::now();
        out.idle_latency = path.idle_latency(l, memo, progress)?;
        out.idle_latency_seconds = Some(started.elapsed().as_secs_f64());
    }
    for i in 0..path.cells.len() {
        path.interrupted()?;
        let cell = path.cells[i];
        let addr = path.address_of(cell.family);
        let result = match addr.and_then(|a| memo.cell(spec, a, &cell)) {
            Some(shared) => shared,
            None => {
                let started = Instant::now();
                let mut result = path.cell(i, progress)?;
                result.seconds = Some(started.elapsed().as_secs_f64());
                if let Some(a) = addr {
                    memo.keep_cell(spec, a, &result, &path.label);
                }
                result
            }
        };
        out.cells.push(result);
        progress(&path.progress(cell, i, "done".into(), out.cells.last().cloned()));
    }
    Ok(out)
}

/// One path's measurement under way: what each step needs.
struct PathRun<'a> {
    lab: &'a Running,
    spec: &'a MeasureSpec,
    cancel: &'a AtomicBool,
    /// The source node's namespace, where the client runs.
    client_ns: String,
    port: u16,
    v4: Option<IpAddr>,
    v6: Option<IpAddr>,
    /// The source node in the lab's topology.
    from: Option<usize>,
    cells: Vec<Cell>,
    /// The path's name in progress reports.
    label: String,
    started: Instant,
    estimate: Duration,
    /// The lab's servers already known to answer.
    waited: BTreeSet<SocketAddr>,
}

impl PathRun<'_> {
    fn interrupted(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        Ok(())
    }

    fn address_of(&self, family: Family) -> Option<IpAddr> {
        match family {
            Family::Ipv4 => self.v4,
            Family::Ipv6 => self.v6,
        }
    }

    /// Whether the probes give one-way delays besides round trips.
    fn one_way(&self) -> bool {
        self.spec.one_way()
    }

    /// Waits for the lab's own server at `server` the first time it is used.
    fn wait_for(&mut self, server: SocketAddr) -> Result<()> {
        if self.spec.to.node().is_some() && self.waited.insert(server) {
            wait_for_server(&self.client_ns, server)?;
        }
        Ok(())
    }

    fn progress(
        &self,
        cell: Cell,
        cell_index: usize,
        step: String,
        finished: Option<CellResult>,
    ) -> Progress {
        Progress {
            path: self.label.clone(),
            cell,
            cell_index,
            cells: self.cells.len(),
            step,
            elapsed: self.started.elapsed(),
            estimated_total: self.estimate,
            finished,
        }
    }

    /// Idle latency per family, probes alone, before any load (RRUL's order).
    /// The server outside the lab, if asked for, gives round trips only: its
    /// clock is not ours.
    fn idle_latency(
        &mut self,
        l: &LatencySpec,
        memo: &mut LabMemo,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Vec<(Family, Latency)>> {
        let mut idle = Vec::new();
        let lab = self.lab;
        for &family in &self.spec.families {
            let Some(addr) = self.address_of(family) else {
                continue;
            };
            if let Some(shared) = memo.idle(self.spec, addr, family) {
                idle.push((family, shared));
                continue;
            }
            if crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr).is_some() {
                continue;
            }
            self.interrupted()?;
            self.wait_for(SocketAddr::new(addr, self.port))?;
            let cell = self.cells.first().copied().unwrap_or(Cell {
                family,
                protocol: Proto::Tcp,
                direction: Direction::Sender,
                streams: 1,
            });
            // Before this cell: the family's probes alone.
            let step = format!(
                "first {} idle latency, probes alone for {} s",
                family.title(),
                l.idle_seconds
            );
            progress(&self.progress(cell, 0, step, None));
            let echo = SocketAddr::new(addr, l.port);
            if let Ok(phase) =
                idle_probes(&self.client_ns, echo, l.rate, l.idle_seconds, self.cancel)
            {
                if let Some(lat) = phase.probes.latency(l.rate, phase.start_ns, self.one_way()) {
                    memo.keep_idle(self.spec, addr, family, &lat);
                    idle.push((family, lat));
                }
            }
        }
        Ok(idle)
    }

    /// The `i`th cell's result; an error only for what stops the whole
    /// measurement (an interruption, the lab's server not answering).
    fn cell(&mut self, i: usize, progress: &mut dyn FnMut(&Progress)) -> Result<CellResult> {
        let (lab, spec, cell) = (self.lab, self.spec, self.cells[i]);
        let Some(addr) = self.address_of(cell.family) else {
            return Ok(CellResult::failed(
                cell,
                format!(
                    "node \"{}\" has no {} address that \"{}\" reaches",
                    spec.to,
                    cell.family.word(),
                    spec.from
                ),
            ));
        };
        let limits = PredictedLimits::of(lab, self.from, addr, &cell, spec.udp_len);
        // A dead datapath on the way fails the cell by name, before the client
        // would meet it as a timeout (or, after the cell, as a suspect figure).
        let dead_datapath =
            || crate::lab::liveness::dead_on_path(&lab.naming.lab, &lab.topology, addr);
        if let Some(why) = dead_datapath() {
            return Ok(limits.on(CellResult::failed(cell, why)));
        }
        let server = SocketAddr::new(addr, self.port);
        self.wait_for(server)?;
        let mut run = CellRun {
            spec,
            cancel: self.cancel,
            client_ns: &self.client_ns,
            cell,
            server,
            base: base_params(spec, &cell),
            // Probes during the cell's runs (not its search trials), pooled.
            probes: spec
                .latency
                .as_ref()
                .map(|l| (SocketAddr::new(addr, l.port), l.rate)),
            predicted: &limits,
            dead: &dead_datapath,
            one_way: self.one_way(),
            pooled: None,
        };
        let result = run.measure(&mut |step| progress(&self.progress(cell, i, step, None)));
        let latency = run.latency();
        let result = result.map(|r| CellResult { latency, ..r });
        match result {
            Err(e) if e.to_string() == "interrupted" => Err(e),
            result => Ok(limits.on(match (dead_datapath(), result) {
                (Some(why), _) => CellResult::failed(cell, format!("during this cell, {why}")),
                (None, Ok(r)) => r,
                // One cell failing (a refused connection, say) is that cell's result.
                (None, Err(e)) => CellResult::failed(cell, format!("{e:#}")),
            })),
        }
    }
}

/// The path's result before anything is measured.
fn unmeasured(spec: &MeasureSpec, v4: Option<IpAddr>, v6: Option<IpAddr>) -> PathResult {
    PathResult {
        path: spec.path.clone(),
        scenario: spec.scenario.clone(),
        from: spec.from.clone(),
        to: spec.to.to_string(),
        ipv4: v4.map(|a| a.to_string()),
        ipv6: v6.map(|a| a.to_string()),
        cells: Vec::new(),
        idle_latency: Vec::new(),
        tunnel: None,
        hosts: Vec::new(),
        idle_latency_seconds: None,
        same_lab_as: None,
    }
}
