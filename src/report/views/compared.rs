//! A view of paths against a baseline, the shape the scenarios, tunnels,
//! families and other-paths views share: rows per cell in the NVR500 study's order,
//! each path's median, its ratio to the baseline's, the UDP figure, the
//! tunnel's bytes, the wire limit and the round trips, as the rows have them.

use super::{Column, Figures, Metric, Point, Row, Series, Timeline, View, ViewKind, index_of};
use crate::measure::results::{CellResult, PathResult, Results, Spread};
use crate::report::cells::{loss_within, step_down_notes, study_order, udp_figure};
use crate::report::wire;
use crate::vocab::{Cell, Family};

/// A path of a compared view and the path its ratios divide by (`None` for
/// the baseline itself).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Member {
    pub(super) path: usize,
    pub(super) baseline: Option<usize>,
}

/// What a compared view compares, and what it is called.
pub(super) struct Compared {
    pub(super) kind: ViewKind,
    pub(super) id: String,
    pub(super) title: String,
    pub(super) question: String,
    /// The paths in the order their rows take within a cell.
    pub(super) members: Vec<Member>,
    /// All members are of one scenario: rows name a path without it.
    pub(super) one_scenario: bool,
    /// The legend's lines after the one about the rates.
    pub(super) legend: Vec<String>,
}

impl Compared {
    /// The view: rows per cell in the NVR500 study's order, the members in their
    /// order within a cell; a cell of the other family where the baseline
    /// measures only that one.
    pub(super) fn view(self, r: &Results) -> View {
        let (categories, rows) = self.rows(r);
        let columns = columns(&rows);
        let notes = self.notes(r, &rows);
        let series = self.series(r, &rows, categories.len());
        let timelines = self.timelines(r, &rows, categories.len());
        let legend = legend(r, self.legend, &rows, &columns);
        View {
            kind: self.kind,
            id: self.id,
            title: self.title,
            question: self.question,
            columns,
            categories,
            rows,
            series,
            legend,
            notes,
            timelines,
        }
    }

    /// The chart's categories and the rows that point into them.
    fn rows(&self, r: &Results) -> (Vec<String>, Vec<Row>) {
        let across = self.members.iter().any(|m| {
            m.baseline
                .is_some_and(|b| !same_families(&r.paths[m.path], &r.paths[b]))
        });
        let mut categories: Vec<String> = Vec::new();
        let mut rows = Vec::new();
        for c in self.cells(r, across) {
            let category = index_of(&mut categories, category_of(&c, across));
            for m in &self.members {
                rows.extend(self.row(r, m, c, category));
            }
        }
        (categories, rows)
    }

    /// The members' cells in the NVR500 study's order; where families are compared
    /// across, both families of a protocol and direction side by side, IPv6
    /// (the baseline's) first.
    fn cells(&self, r: &Results, across: bool) -> Vec<Cell> {
        let mut cells: Vec<Cell> = Vec::new();
        for m in &self.members {
            for c in &r.paths[m.path].cells {
                if !cells.contains(&c.cell) {
                    cells.push(c.cell);
                }
            }
        }
        cells.sort_by_key(study_order);
        if across {
            cells.sort_by_key(|c| (c.streams, c.protocol, c.direction, c.family != Family::Ipv6));
        }
        cells
    }

    /// A member's row for cell `c`, with its ratio to the baseline's cell;
    /// `None` where the member did not measure `c`.
    fn row(&self, r: &Results, m: &Member, c: Cell, category: usize) -> Option<Row> {
        let p = &r.paths[m.path];
        let cr = p.cell(&c)?;
        let base = m
            .baseline
            .and_then(|b| baseline_cell(&r.paths[b], &c).map(|(bc, x)| (b, bc, x)));
        let mut figures = figures(r, p, cr);
        if let Some((_, bc, across)) = &base {
            figures.baseline_wire_bps = bc.wire_limit.as_ref().map(|l| l.bps);
            if cr.error.is_none() && bc.error.is_none() && bc.median_bps > 0.0 {
                figures.ratio = Some(cr.median_bps / bc.median_bps);
                figures.across_family = *across;
            }
        }
        let short = match (&p.scenario, self.one_scenario) {
            (Some(_), true) => p.path.clone(),
            _ => p.label(),
        };
        Some(Row {
            category,
            path: Some(m.path),
            label: p.label(),
            short,
            cell: c,
            baseline: base.map(|(b, bc, _)| (r.paths[b].label(), bc.cell)),
            figures,
        })
    }

    /// The wire limits' notes, then each member's UDP step-downs.
    fn notes(&self, r: &Results, rows: &[Row]) -> Vec<String> {
        let mut notes = wire::notes(rows.iter().filter_map(|x| x.figures.wire_limit.as_ref()));
        for m in &self.members {
            let p = &r.paths[m.path];
            for c in &p.cells {
                let steps = step_down_notes(c);
                if !steps.is_empty() {
                    notes.push(format!(
                        "{} {}: {}",
                        p.label(),
                        c.cell.title(),
                        steps.join("; ")
                    ));
                }
            }
        }
        notes
    }

    /// Per member a rate series, and where it has round trips an idle and a
    /// loaded one.
    fn series(&self, r: &Results, rows: &[Row], categories: usize) -> Vec<Series> {
        let mut series = Vec::new();
        for m in &self.members {
            let i = m.path;
            let mut rate = vec![None; categories];
            let mut rtt = vec![None; categories];
            let mut idle = vec![None; categories];
            for row in rows.iter().filter(|x| x.path == Some(i)) {
                let f = &row.figures;
                if f.failed.is_none() {
                    rate[row.category] = f.rate_bps.map(|v| Point {
                        value: v,
                        low: f.min_bps.unwrap_or(v),
                        high: f.max_bps.unwrap_or(v),
                        spread: None,
                    });
                }
                rtt[row.category] = f.loaded_rtt.as_ref().map(latency_point);
                idle[row.category] = f.idle_rtt.as_ref().map(latency_point);
            }
            let label = r.paths[i].label();
            let has_rtt = rtt.iter().any(Option::is_some);
            series.push(Series {
                label: label.clone(),
                path: Some(i),
                metric: Metric::Rate,
                points: rate,
            });
            if has_rtt {
                series.push(Series {
                    label: label.clone(),
                    path: Some(i),
                    metric: Metric::IdleRtt,
                    points: idle,
                });
                series.push(Series {
                    label,
                    path: Some(i),
                    metric: Metric::LoadedRtt,
                    points: rtt,
                });
            }
        }
        series
    }

    /// The members' timelines for the first category in which one of them
    /// has per-interval rates or probes.
    fn timelines(&self, r: &Results, rows: &[Row], categories: usize) -> Vec<Timeline> {
        let of_category = |k: usize| -> Vec<Timeline> {
            self.members
                .iter()
                .filter_map(|m| {
                    let i = m.path;
                    let row = rows.iter().find(|x| x.path == Some(i) && x.category == k)?;
                    let c = r.paths[i].cell(&row.cell)?;
                    let t = Timeline::of(row.label.clone(), i, k, c);
                    (!t.is_empty()).then_some(t)
                })
                .collect()
        };
        (0..categories)
            .map(of_category)
            .find(|t| !t.is_empty())
            .unwrap_or_default()
    }
}

/// A cell's title as a category; without its family where families are
/// compared across ("TCP Sender").
fn category_of(c: &Cell, across: bool) -> String {
    let t = c.title();
    if !across {
        return t;
    }
    t.split_once(' ')
        .map(|(_, rest)| rest.to_string())
        .unwrap_or(t)
}

/// A latency spread as a point: the median, whiskers min and p99.
fn latency_point(s: &Spread) -> Point {
    Point {
        value: s.median,
        low: s.min,
        high: s.p99,
        spread: Some(s.clone()),
    }
}

/// The columns the rows have figures for, in order.
fn columns(rows: &[Row]) -> Vec<Column> {
    let has = |f: &dyn Fn(&Figures) -> bool| rows.iter().any(|x| f(&x.figures));
    let mut columns = vec![Column::Cell, Column::Path, Column::Rate];
    if rows.iter().any(|x| x.baseline.is_some()) {
        columns.push(Column::Ratio);
    }
    if has(&|f| f.udp.is_some()) {
        columns.push(Column::Udp);
    }
    if has(&|f| f.overhead_bytes.is_some()) {
        columns.push(Column::Overhead);
    }
    if has(&|f| f.wire_limit.is_some()) {
        columns.push(Column::WireLimit);
    }
    if has(&|f| f.loaded_rtt.is_some() || f.idle_rtt.is_some()) {
        columns.extend([
            Column::IdleMs,
            Column::LoadedMs,
            Column::LoadedP99Ms,
            Column::IncreaseMs,
        ]);
    }
    columns
}

/// The legend: what the rates are, `own` (the view's ratio sentence), then a
/// sentence per column that needs one.
fn legend(r: &Results, own: Vec<String>, rows: &[Row], columns: &[Column]) -> Vec<String> {
    let runs = r.runs_per_cell;
    let udp = if columns.contains(&Column::Udp) {
        format!(
            "; UDP what arrived, at -b: the highest offered rate at which a full-length run kept its loss{}, with that run's loss",
            loss_within(r)
        )
    } else {
        String::new()
    };
    let mut legend = vec![format!(
        "Mbit/s: median of {runs} run{}{udp}.",
        if runs == 1 { "" } else { "s" },
    )];
    legend.extend(own);
    if rows
        .iter()
        .any(|x| x.figures.udp.is_some_and(|u| u.sender_limited))
    {
        legend.push(
            "s: the sender could not offer more; that figure is the sending end's limit, not the path's."
                .into(),
        );
    }
    if columns.contains(&Column::Overhead) {
        legend.push("B/pkt: bytes per packet the path's tunnel adds.".into());
    }
    if columns.contains(&Column::WireLimit) {
        legend.push(wire::LEGEND.into());
    }
    if columns.contains(&Column::IdleMs) {
        legend.push(
            "Round trips in ms: idle median; under the cell's load median, p99, and the median's increase over idle."
                .into(),
        );
    }
    legend
}

/// A path's figures for one cell.
fn figures(r: &Results, p: &PathResult, c: &CellResult) -> Figures {
    let idle = p
        .idle_latency
        .iter()
        .find(|(f, _)| *f == c.cell.family)
        .map(|(_, l)| l);
    let loaded = c.latency.as_ref();
    let ok = c.error.is_none();
    Figures {
        failed: c.error.clone(),
        at_underlay: crate::report::hosts::marked(r, p, c),
        rate_bps: ok.then_some(c.median_bps),
        min_bps: ok.then_some(c.min_bps),
        max_bps: ok.then_some(c.max_bps),
        udp: ok.then(|| udp_figure(c)).flatten(),
        overhead_bytes: p
            .tunnel
            .as_ref()
            .map(|t| (t.bytes_min, t.bytes_max))
            .or_else(|| overhead(r, &p.path)),
        idle_rtt: idle.map(|l| l.rtt_ms.clone()),
        loaded_rtt: loaded.map(|l| l.rtt_ms.clone()),
        loaded_forward: loaded.and_then(|l| l.forward_ms.clone()),
        loaded_reverse: loaded.and_then(|l| l.reverse_ms.clone()),
        wire_limit: c.wire_limit.clone(),
        line_rate: wire::line_rate(p, c),
        ..Figures::default()
    }
}

/// The baseline path's cell for `c`: the same cell, or, where the baseline
/// measures only the other family, that family's cell (`true`).
fn baseline_cell<'a>(b: &'a PathResult, c: &Cell) -> Option<(&'a CellResult, bool)> {
    if let Some(x) = b.cell(c) {
        return Some((x, false));
    }
    if b.cells.iter().any(|x| x.cell.family == c.family) {
        return None;
    }
    let other = Cell {
        family: match c.family {
            Family::Ipv4 => Family::Ipv6,
            Family::Ipv6 => Family::Ipv4,
        },
        ..*c
    };
    b.cell(&other).map(|x| (x, true))
}

/// Whether two paths measure a family in common.
fn same_families(a: &PathResult, b: &PathResult) -> bool {
    let fams = |p: &PathResult| {
        let mut v: Vec<Family> = p.cells.iter().map(|c| c.cell.family).collect();
        v.sort();
        v.dedup();
        v
    };
    fams(a).iter().any(|f| fams(b).contains(f))
}

/// Bytes per packet of the tunnel a path crosses, from the run's note
/// ("path wireguard crosses WireGuard tunnel vpn ...: 60 bytes per packet
/// over IPv4 ...", or "62-65 bytes"): results saved before paths carried
/// `tunnel` say it only there.
fn overhead(r: &Results, path: &str) -> Option<(u32, u32)> {
    let prefix = format!("path {path} crosses ");
    r.notes
        .iter()
        .filter(|n| n.starts_with(&prefix))
        .find_map(|n| {
            let (before, _) = n.split_once(" bytes per packet")?;
            let figure = before.rsplit(' ').next()?;
            match figure.split_once('-') {
                Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
                None => figure.parse().ok().map(|b| (b, b)),
            }
        })
}
