//! Views: the results organised by the question a set of paths answers, the
//! way a person reads a study, instead of one matrix of every path by every
//! cell (eleven paths of five columns made the main job's table about 900
//! characters wide).
//!
//! [`views`] is pure: results in, views out. Each [`View`] carries its title,
//! its question in a sentence, its rows of typed figures ([`Figures`]), the
//! columns worth showing ([`Column`], each able to write its own text), and
//! the series a chart should draw ([`Series`]). The text report lays them out
//! (`table::view_text`); the HTML page draws them.
//!
//! Which views a run gets is recognised from its paths' labels, scenarios and
//! ends, never from a topology's particular names:
//!
//! - **Published** ([`ViewKind::Published`]): the topology's `[reference]`
//!   figures beside the measured ones (the seed's table), per path and cell,
//!   with the ratio and the verdict against the tolerance.
//!   Where the reference marks calibration, each row is also `calibrated` or
//!   `predicted` ([`Column::Basis`]).
//! - **Predictions** ([`ViewKind::Predictions`]): where the reference marks
//!   calibration (the lab has a model), every measured cell nobody published
//!   a figure for: the model's prediction, untested, with the device-model
//!   ceiling that limits it where the run recorded one ([`Column::LimitedBy`]).
//! - **Scenarios** ([`ViewKind::Scenarios`]): a path name measured in two
//!   scenarios or more (`raw` in `none`, `fast` and `normal`), each scenario
//!   against the first; path names measured in the same scenarios share a view.
//! - **Tunnels** ([`ViewKind::Tunnels`]): in one scenario, every path with the
//!   same ends (`from`, `to`) as the path named `raw` (the underlay, and
//!   `measure --path`'s default name), against it: rate, ratio, the tunnel's
//!   bytes per packet where the run's notes say them, latency.
//! - **Families** ([`ViewKind::Families`]): in one scenario, a path that
//!   measures only IPv4 against one with the same ends that measures only IPv6
//!   (IPv4 over DS-Lite against native IPv6, the seed's question), cell by cell
//!   of the same protocol, direction and streams.
//! - **Paths** ([`ViewKind::Paths`]): every path no view above covers, against
//!   the first of them; or, with an explicit baseline, every path against it.
//!   With nothing recognised at all, this is the one view: all paths.
//!
//! A topology cannot name its own views yet; these rules decide.

use super::reference::{Basis, Outcome, compare, measured_bps, unpublished};
use super::{UdpFigure, mbit, percent, seed_order, udp_figure};
use crate::measure::results::{CellResult, Latency, ModelLimit, PathResult, Results, Spread};
use crate::vocab::{Cell, Family};

/// Which question a view answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    Published,
    Predictions,
    Scenarios,
    Tunnels,
    Families,
    Paths,
}

/// One question of a path set, its figures, and what to chart.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub kind: ViewKind,
    /// Unique among a run's views, usable as an HTML id: "published",
    /// "scenarios-raw", "tunnels-fast", "families-fast-dslite", "paths".
    pub id: String,
    pub title: String,
    /// The question, one sentence.
    pub question: String,
    /// The columns worth showing, in order; every row has a value for each
    /// (possibly empty).
    pub columns: Vec<Column>,
    /// The chart's groups along its axis, in order (cell titles, or
    /// "TCP Sender" where the rows compare families); rows point into it.
    pub categories: Vec<String>,
    pub rows: Vec<Row>,
    /// What a chart draws: one bar series per path (and per published path),
    /// two latency series (idle, loaded) per path that has latency.
    pub series: Vec<Series>,
    /// Rate and round trips over time for one category (the first that has
    /// them), one per path: what a chart over time draws. Empty in the
    /// published view and in results without per-interval rates or probes.
    pub timelines: Vec<Timeline>,
    /// What the figures are, one sentence a line.
    pub legend: Vec<String>,
    /// Lines under the table (a UDP figure's step-downs, several streams
    /// against one, a tunnel's costs, a summary).
    pub notes: Vec<String>,
}

/// One row: a path's cell, its figures, and what its ratio divides by.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Index into [`View::categories`].
    pub category: usize,
    /// Index into `Results::paths`; `None` for a published path the run did
    /// not measure.
    pub path: Option<usize>,
    /// The path's full label ("fast/wireguard").
    pub label: String,
    /// What the text report prints in the path column: the label without the
    /// scenario where the view is of one scenario.
    pub short: String,
    pub cell: Cell,
    /// The row the ratio divides by: its label and cell.
    pub baseline: Option<(String, Cell)>,
    pub figures: Figures,
}

/// A row's figures; what the run did not measure is `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    /// Why the cell has no figure.
    pub failed: Option<String>,
    /// Bits per second: the median of the runs; in the published view the
    /// seed's figure (TCP the best run, UDP the searched rate).
    pub rate_bps: Option<f64>,
    pub min_bps: Option<f64>,
    pub max_bps: Option<f64>,
    pub published_bps: Option<f64>,
    /// Rate over the baseline's (or over the published figure).
    pub ratio: Option<f64>,
    /// The ratio divides by a cell of the other family.
    pub across_family: bool,
    pub verdict: Option<Verdict>,
    /// UDP: the offered rate, what arrived and the loss.
    pub udp: Option<UdpFigure>,
    /// Bytes per packet the path's tunnel adds (least, most: padding and
    /// options make a range), where the run's notes say.
    pub overhead_bytes: Option<(u32, u32)>,
    /// Whether the lab's models were calibrated from the published figure,
    /// where the reference says.
    pub basis: Option<Basis>,
    /// The tightest device-model ceiling on the cell's traffic, where the run
    /// recorded one (the predictions view).
    pub model_limit: Option<ModelLimit>,
    /// What the shaped links' line rates let through of the cell's payload,
    /// where the run recorded it.
    pub wire_limit: Option<ModelLimit>,
    /// The baseline row's wire limit, bit/s (the tunnels view's raw path).
    pub baseline_wire_bps: Option<f64>,
    /// The wire limit, where the line rate alone predicts the figure
    /// (`report::wire::line_rate`).
    pub line_rate: Option<f64>,
    /// Round-trip time with the path idle (this cell's family), ms.
    pub idle_rtt: Option<Spread>,
    /// Round-trip time under this cell's load, ms.
    pub loaded_rtt: Option<Spread>,
    /// One-way delays under load (forward = toward the target), ms.
    pub loaded_forward: Option<Spread>,
    pub loaded_reverse: Option<Spread>,
}

impl Figures {
    /// What a chart plots for the row: what arrived, a UDP figure's received
    /// rate and never the rate offered (the table keeps that beside it).
    pub fn plotted_bps(&self) -> Option<f64> {
        self.udp.map(|u| u.received).or(self.rate_bps)
    }

    /// Median round trip under load minus idle, ms.
    pub fn increase_ms(&self) -> Option<f64> {
        Some(self.loaded_rtt.as_ref()?.median - self.idle_rtt.as_ref()?.median)
    }
}

/// A published figure against the tolerance.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Within,
    /// Outside, by this many percent ("+23").
    Out(String),
    NotMeasured,
    Failed,
}

/// A column of a view's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// The cell's title ("IPv4 TCP Sender"), printed where it changes.
    Cell,
    /// The path, printed where it changes in the published view.
    Path,
    Published,
    /// The seed's figure, UDP with what its run received and lost.
    Measured,
    /// Median Mbit/s.
    Rate,
    Ratio,
    Verdict,
    /// `calibrated` or `predicted`.
    Basis,
    /// The device-model ceiling that limits the cell: what it is and its rate.
    LimitedBy,
    /// The wire limit's Mbit/s.
    WireLimit,
    /// The rate over the wire limit: what the datapath costs.
    OfWire,
    /// The wire limit over the baseline's: what a tunnel's bytes cost.
    WireOfRaw,
    /// UDP: offered rate (loss).
    Udp,
    Overhead,
    IdleMs,
    LoadedMs,
    LoadedP99Ms,
    IncreaseMs,
}

impl Column {
    pub fn header(self) -> &'static str {
        match self {
            Column::Cell => "cell",
            Column::Path => "path",
            Column::Published => "published",
            Column::Measured => "measured",
            Column::Rate => "Mbit/s",
            Column::Ratio => "ratio",
            Column::Verdict => "tolerance",
            Column::Basis => "basis",
            Column::LimitedBy => "limited by",
            Column::WireLimit => "wire limit",
            Column::OfWire => "/wire",
            Column::WireOfRaw => "wire/raw",
            Column::Udp => "-b (loss)",
            Column::Overhead => "B/pkt",
            Column::IdleMs => "idle",
            Column::LoadedMs => "load",
            Column::LoadedP99Ms => "p99",
            Column::IncreaseMs => "+load",
        }
    }

    /// Text columns are left-aligned; figures right-aligned.
    pub fn left(self) -> bool {
        matches!(
            self,
            Column::Cell | Column::Path | Column::Verdict | Column::Basis | Column::LimitedBy
        )
    }

    /// The row's value in this column as the text report writes it; a failed
    /// cell's rate is "failed" (the layout adds its footnote).
    pub fn text(self, row: &Row) -> String {
        let f = &row.figures;
        let opt = |v: Option<String>| v.unwrap_or_default();
        match self {
            Column::Cell => row.cell.title(),
            Column::Path => row.short.clone(),
            Column::Published => opt(f.published_bps.map(|b| plain(b / 1e6))),
            Column::Measured => match (&f.verdict, f.rate_bps) {
                (Some(Verdict::NotMeasured | Verdict::Failed), _) | (_, None) => "-".into(),
                (_, Some(bps)) => match &f.udp {
                    Some(u) => format!(
                        "{}{} ({} rcvd, {} % lost)",
                        mbit(bps),
                        if u.sender_limited {
                            " sender-limited"
                        } else {
                            ""
                        },
                        mbit(u.received),
                        percent(u.loss)
                    ),
                    None => mbit(bps),
                },
            },
            Column::Rate => match (&f.failed, f.rate_bps) {
                (Some(_), _) => "failed".into(),
                (None, Some(b)) => mbit(b),
                (None, None) => "-".into(),
            },
            Column::Ratio => match f.ratio {
                Some(x) if x.is_finite() => {
                    format!("{x:.2}{}", if f.across_family { "*" } else { "" })
                }
                Some(_) => "?".into(),
                None if row.baseline.is_some() || f.published_bps.is_some() => "-".into(),
                None => String::new(),
            },
            Column::Verdict => match &f.verdict {
                None => String::new(),
                Some(Verdict::Within) => "ok".into(),
                Some(Verdict::Out(d)) => format!("OUT ({d} %)"),
                Some(Verdict::NotMeasured) => "not measured".into(),
                Some(Verdict::Failed) => "failed".into(),
            },
            Column::Basis => match (f.basis, f.line_rate) {
                (Some(Basis::Calibrated), _) | (_, None) => opt(f.basis.map(|b| b.word().into())),
                (_, Some(w)) => format!("predicted (line rate {})", mbit(w)),
            },
            Column::LimitedBy => opt(f
                .model_limit
                .as_ref()
                .map(|l| format!("{} {}", l.what, ceiling(l.bps)))),
            Column::WireLimit => opt(f.wire_limit.as_ref().map(|l| mbit(l.bps))),
            Column::OfWire => opt(f.wire_limit.as_ref().and_then(|l| {
                let rate = f.rate_bps.filter(|_| f.failed.is_none())?;
                Some(format!("{:.2}", rate / l.bps))
            })),
            Column::WireOfRaw => opt(f
                .wire_limit
                .as_ref()
                .and_then(|l| Some(format!("{:.2}", l.bps / f.baseline_wire_bps?)))),
            Column::Udp => opt(f.udp.filter(|_| f.failed.is_none()).map(|u| {
                format!(
                    "{}{} ({} %)",
                    mbit(u.offered),
                    if u.sender_limited { "s" } else { "" },
                    percent(u.loss)
                )
            })),
            Column::Overhead => opt(f.overhead_bytes.map(|(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })),
            Column::IdleMs => opt(f.idle_rtt.as_ref().map(|s| ms(s.median))),
            Column::LoadedMs => opt(f.loaded_rtt.as_ref().map(|s| ms(s.median))),
            Column::LoadedP99Ms => opt(f.loaded_rtt.as_ref().map(|s| ms(s.p99))),
            Column::IncreaseMs => opt(f.increase_ms().map(|d| {
                let s = ms(d.abs());
                if d < 0.0 {
                    format!("-{s}")
                } else {
                    format!("+{s}")
                }
            })),
        }
    }
}

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Median rate in bit/s, whiskers min-max (the seed's figure in the
    /// published view, without whiskers).
    Rate,
    /// Published figures, bit/s.
    Published,
    /// Round-trip time under load, ms: value the median, whiskers min and p99.
    LoadedRtt,
    /// Round-trip time with the path idle, ms, for the category's family:
    /// what the loaded round trips grew from.
    IdleRtt,
}

/// One series of a view's chart: a value per category, or none.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's label: a path, with " published" for published figures.
    pub label: String,
    /// Index into `Results::paths`.
    pub path: Option<usize>,
    pub metric: Metric,
    /// One per [`View::categories`].
    pub points: Vec<Option<Point>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// The latency's whole spread, for box plots.
    pub spread: Option<Spread>,
}

/// One path's cell over time: its runs' per-interval rates laid one after
/// another, and the round trips its probes saw under that load.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The path's label, as in [`Series::label`].
    pub label: String,
    /// Index into `Results::paths`.
    pub path: usize,
    /// Index into [`View::categories`]: the same for every timeline of a view.
    pub category: usize,
    pub cell: Cell,
    /// (seconds from the first run's start, bit/s) at each interval's end.
    pub rate_bps: Vec<(f64, f64)>,
    /// (seconds since the load began, round trip in ms) per probe, thinned.
    pub rtt_ms: Vec<(f64, f64)>,
}

impl Timeline {
    fn of(label: String, path: usize, category: usize, c: &CellResult) -> Timeline {
        let mut rate_bps = Vec::new();
        let mut t = 0.0;
        for run in &c.runs {
            let step = run.interval_seconds.unwrap_or(1.0);
            for &bps in &run.intervals_bps {
                t += step;
                rate_bps.push((t, bps));
            }
        }
        let rtt_ms = c
            .latency
            .iter()
            .flat_map(|l| &l.series)
            .map(|&(s, ms)| (f64::from(s), f64::from(ms)))
            .collect();
        Timeline {
            label,
            path,
            category,
            cell: c.cell,
            rate_bps,
            rtt_ms,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rate_bps.is_empty() && self.rtt_ms.is_empty()
    }
}

/// The run's views, in the order a reader takes them: published figures,
/// scenarios, tunnels, families, then the paths no view covers.
pub fn views(r: &Results) -> Vec<View> {
    views_with_baseline(r, None)
}

/// As [`views`]; with `baseline` (a path's label, `--baseline`) the last view
/// holds every path against that one, whatever the others cover.
pub fn views_with_baseline(r: &Results, baseline: Option<&str>) -> Vec<View> {
    let mut out = Vec::new();
    if let Some(v) = published(r) {
        out.push(v);
    }
    if let Some(v) = predictions(r) {
        out.push(v);
    }
    let mut covered = vec![false; r.paths.len()];
    let mut compared = Vec::new();
    compared.extend(scenarios(r));
    compared.extend(tunnels(r));
    compared.extend(families(r));
    for v in &compared {
        for row in &v.rows {
            if let Some(p) = row.path {
                covered[p] = true;
            }
        }
    }
    out.extend(compared);
    let base = baseline.and_then(|b| r.paths.iter().position(|p| p.label() == b));
    let rest: Vec<usize> = match base {
        Some(_) => (0..r.paths.len()).collect(),
        None => (0..r.paths.len()).filter(|&i| !covered[i]).collect(),
    };
    if !rest.is_empty() {
        let all = rest.len() == r.paths.len();
        out.push(paths_view(r, &rest, base.unwrap_or(rest[0]), all));
    }
    out
}

// ---- the views ----

fn published(r: &Results) -> Option<View> {
    let reference = r.reference.as_ref()?;
    let comparisons = compare(r, reference);
    let mut categories: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for c in &comparisons {
        let f = c.figure;
        let title = f.cell.title();
        let category = index_of(&mut categories, title);
        let path = r.paths.iter().position(|p| p.label() == f.path);
        let cell = path.and_then(|i| r.paths[i].cell(&f.cell));
        let mut figures = Figures {
            published_bps: Some(f.published_bps),
            basis: c.basis,
            wire_limit: cell.and_then(|x| x.wire_limit.clone()),
            line_rate: path
                .zip(cell)
                .and_then(|(i, x)| super::wire::line_rate(&r.paths[i], x)),
            ..Figures::default()
        };
        match &c.outcome {
            Outcome::NotMeasured => figures.verdict = Some(Verdict::NotMeasured),
            Outcome::Failed(e) => {
                figures.verdict = Some(Verdict::Failed);
                figures.failed = Some(e.clone());
            }
            Outcome::Measured { bps, ratio, within } => {
                figures.rate_bps = Some(*bps);
                figures.ratio = Some(*ratio);
                figures.udp = cell.and_then(udp_figure);
                figures.verdict = Some(if *within {
                    Verdict::Within
                } else {
                    Verdict::Out(super::reference::deviation(
                        *ratio,
                        reference.tolerance.of(f.cell.protocol),
                    ))
                });
            }
        }
        rows.push(Row {
            category,
            path,
            label: f.path.clone(),
            short: f.path.clone(),
            cell: f.cell,
            baseline: None,
            figures,
        });
    }
    // Categories in the seed's order, as the chart's axis reads them.
    let mut order: Vec<(Cell, usize)> = rows.iter().map(|r| (r.cell, r.category)).collect();
    order.sort_by_key(|(c, _)| seed_order(c));
    order.dedup_by_key(|(_, i)| *i);
    let remap: Vec<usize> = (0..categories.len())
        .map(|old| order.iter().position(|(_, i)| *i == old).unwrap_or(old))
        .collect();
    let categories: Vec<String> = order.iter().map(|(_, i)| categories[*i].clone()).collect();
    for row in &mut rows {
        row.category = remap[row.category];
    }

    let mut series = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for row in &rows {
        if !labels.contains(&row.label) {
            labels.push(row.label.clone());
        }
    }
    for label in &labels {
        let path = r.paths.iter().position(|p| &p.label() == label);
        let point = |v: Option<f64>| {
            v.map(|value| Point {
                value,
                low: value,
                high: value,
                spread: None,
            })
        };
        let mut measured = vec![None; categories.len()];
        let mut publ = vec![None; categories.len()];
        for row in rows.iter().filter(|x| &x.label == label) {
            measured[row.category] = point(row.figures.plotted_bps());
            publ[row.category] = point(row.figures.published_bps);
        }
        series.push(Series {
            label: format!("{label} published"),
            path,
            metric: Metric::Published,
            points: publ,
        });
        series.push(Series {
            label: label.clone(),
            path,
            metric: Metric::Rate,
            points: measured,
        });
    }

    let mut notes = vec![super::reference::summary(r, reference)];
    notes.extend(super::reference::unpredicted_lines(reference));
    notes.extend(super::reference::streams_lines(r));
    let mut columns = vec![
        Column::Path,
        Column::Cell,
        Column::Published,
        Column::Measured,
        Column::Ratio,
        Column::Verdict,
    ];
    let mut legend = super::reference::legend(r, reference);
    if rows.iter().any(|x| x.figures.wire_limit.is_some()) {
        columns.push(Column::WireLimit);
        legend.push(super::wire::LEGEND.into());
        notes.extend(super::wire::notes(
            rows.iter().filter_map(|x| x.figures.wire_limit.as_ref()),
        ));
    }
    let line_rate = rows.iter().any(|x| x.figures.line_rate.is_some());
    if reference.marks_calibration || line_rate {
        columns.push(Column::Basis);
    }
    if line_rate {
        legend.push(super::wire::LINE_RATE_LEGEND.into());
    }
    Some(View {
        kind: ViewKind::Published,
        id: "published".into(),
        title: super::reference::title(reference),
        question: "Does each measured figure agree with the published one?".into(),
        columns,
        categories,
        rows,
        series,
        legend,
        notes,
        timelines: Vec::new(),
    })
}

/// Every measured cell nobody published a figure for, where the reference
/// marks calibration: the lab model's predictions, each with the ceiling that
/// limits it where the run recorded one. `None` where there are none.
pub(crate) fn predictions(r: &Results) -> Option<View> {
    let cells = unpublished(r);
    if cells.is_empty() {
        return None;
    }
    let mut categories: Vec<String> = Vec::new();
    let mut order: Vec<Cell> = cells.iter().map(|(_, c)| c.cell).collect();
    order.sort_by_key(seed_order);
    order.dedup();
    for c in &order {
        index_of(&mut categories, c.title());
    }
    let mut rows = Vec::new();
    for &(i, c) in &cells {
        let label = r.paths[i].label();
        rows.push(Row {
            category: index_of(&mut categories, c.cell.title()),
            path: Some(i),
            short: label.clone(),
            label,
            cell: c.cell,
            baseline: None,
            figures: Figures {
                rate_bps: Some(measured_bps(c)),
                udp: udp_figure(c),
                model_limit: c.model_limit.clone(),
                wire_limit: c.wire_limit.clone(),
                ..Figures::default()
            },
        });
    }
    let mut series: Vec<Series> = Vec::new();
    for row in &rows {
        let s = match series.iter_mut().find(|s| s.label == row.label) {
            Some(s) => s,
            None => {
                series.push(Series {
                    label: row.label.clone(),
                    path: row.path,
                    metric: Metric::Rate,
                    points: vec![None; categories.len()],
                });
                series.last_mut().expect("just pushed")
            }
        };
        s.points[row.category] = row.figures.plotted_bps().map(|value| Point {
            value,
            low: value,
            high: value,
            spread: None,
        });
    }
    let mut columns = vec![Column::Path, Column::Cell, Column::Measured];
    let limited = rows.iter().any(|x| x.figures.model_limit.is_some());
    if limited {
        columns.push(Column::LimitedBy);
    }
    let wired = rows.iter().any(|x| x.figures.wire_limit.is_some());
    if wired {
        columns.push(Column::WireLimit);
    }
    let mut legend = vec![format!(
        "Mbit/s; measured: TCP the best run, UDP the highest offered rate at which a full-length run kept its loss{} \
         (the best run where there was no search), with what that run received (what the chart plots) and lost. Nobody published these cells: each figure is the lab model's \
         prediction, not tested against a published one.",
        super::loss_within(r)
    )];
    if limited {
        legend.push(
            "limited by: the tightest ceiling the lab's device models put on the cell's traffic, as the run \
             recorded it; empty where it recorded none."
                .to_string(),
        );
    }
    let mut notes = Vec::new();
    if wired {
        legend.push(super::wire::LEGEND.into());
        notes = super::wire::notes(rows.iter().filter_map(|x| x.figures.wire_limit.as_ref()));
    }
    Some(View {
        kind: ViewKind::Predictions,
        id: "predictions".into(),
        title: "Predictions for cells nobody published".into(),
        question: "What does the lab's model predict where no figure was published?".into(),
        columns,
        categories,
        rows,
        series,
        timelines: Vec::new(),
        legend,
        notes,
    })
}

/// Path names measured in two scenarios or more; names measured in the same
/// scenarios share a view.
fn scenarios(r: &Results) -> Vec<View> {
    // (path name, its scenarios in the results' order)
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    for p in &r.paths {
        let Some(s) = &p.scenario else { continue };
        match names.iter_mut().find(|(n, _)| *n == p.path) {
            Some((_, v)) => {
                if !v.contains(s) {
                    v.push(s.clone());
                }
            }
            None => names.push((p.path.clone(), vec![s.clone()])),
        }
    }
    let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new(); // (scenarios, names)
    for (n, s) in names.into_iter().filter(|(_, s)| s.len() >= 2) {
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, v)) => v.push(n),
            None => groups.push((s, vec![n])),
        }
    }
    groups
        .into_iter()
        .map(|(scen, names)| {
            let find = |n: &str, s: &str| {
                r.paths
                    .iter()
                    .position(|p| p.path == n && p.scenario.as_deref() == Some(s))
            };
            let mut members = Vec::new(); // (path index, baseline index)
            for n in &names {
                let Some(first) = scen.iter().find_map(|s| find(n, s)) else {
                    continue;
                };
                for s in &scen {
                    if let Some(i) = find(n, s) {
                        members.push((i, (i != first).then_some(first)));
                    }
                }
            }
            let id = format!("scenarios-{}", names.join("-"));
            let title = format!("{} across scenarios {}", names.join(", "), words(&scen));
            let question = format!(
                "How does {} change from scenario {} to {}?",
                match names.len() {
                    1 => format!("path {}", names[0]),
                    _ => format!("each of the paths {}", words(&names)),
                },
                scen[0],
                words(&scen[1..])
            );
            let legend = vec![format!(
                "Ratios: a path's median divided by its median in scenario {}.",
                scen[0]
            )];
            compared(r, id, title, question, &members, false, legend)
        })
        .collect()
}

/// Per scenario, the paths with the same ends as the one named `raw`, against it.
fn tunnels(r: &Results) -> Vec<View> {
    let mut out = Vec::new();
    for (b, raw) in r.paths.iter().enumerate().filter(|(_, p)| p.path == "raw") {
        let others: Vec<usize> = (0..r.paths.len())
            .filter(|&i| {
                let p = &r.paths[i];
                i != b && p.scenario == raw.scenario && p.from == raw.from && p.to == raw.to
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        let mut members = vec![(b, None)];
        members.extend(others.iter().map(|&i| (i, Some(b))));
        let names: Vec<String> = others.iter().map(|&i| r.paths[i].path.clone()).collect();
        let (id, title, in_scenario) = match &raw.scenario {
            Some(s) => (
                format!("tunnels-{s}"),
                format!("Tunnels against the raw path, scenario {s}"),
                format!(", in scenario {s}"),
            ),
            None => (
                "tunnels".to_string(),
                "Tunnels against the raw path".to_string(),
                String::new(),
            ),
        };
        let question = format!(
            "What does {} cost against the raw path from {} to {}{in_scenario}?",
            if names.len() == 1 {
                format!("path {}", names[0])
            } else {
                format!("each of {}", words(&names))
            },
            raw.from,
            raw.to
        );
        let legend = vec![format!(
            "Ratios: a path's median divided by {}'s.",
            raw.label()
        )];
        let mut v = compared(
            r,
            id,
            title,
            question,
            &members,
            raw.scenario.is_some(),
            legend,
        );
        v.kind = ViewKind::Tunnels;
        // What the tunnel's bytes cost and what its datapath costs, apart.
        if let Some(at) = v.columns.iter().position(|c| *c == Column::WireLimit) {
            v.columns
                .splice(at + 1..at + 1, [Column::OfWire, Column::WireOfRaw]);
            v.legend.push(super::wire::TUNNEL_LEGEND.into());
        }
        out.push(v);
    }
    out
}

/// Per scenario and ends, each path of only IPv4 against the path of only
/// IPv6 that shares the most protocol, direction and stream cells with it.
fn families(r: &Results) -> Vec<View> {
    let only = |p: &PathResult, f: Family| {
        !p.cells.is_empty() && p.cells.iter().all(|c| c.cell.family == f)
    };
    let shape = |c: &Cell| (c.protocol, c.direction, c.streams);
    let mut pairs: Vec<(usize, Vec<usize>)> = Vec::new(); // (IPv6 path, IPv4 paths)
    for (a, p4) in r.paths.iter().enumerate() {
        if !only(p4, Family::Ipv4) {
            continue;
        }
        let best = r
            .paths
            .iter()
            .enumerate()
            .filter(|(_, p6)| {
                only(p6, Family::Ipv6)
                    && p6.scenario == p4.scenario
                    && p6.from == p4.from
                    && p6.to == p4.to
            })
            .map(|(i, p6)| {
                let shared = p4
                    .cells
                    .iter()
                    .filter(|c| p6.cells.iter().any(|d| shape(&d.cell) == shape(&c.cell)))
                    .count();
                (i, shared)
            })
            .filter(|(_, n)| *n > 0)
            // The most shared cells; the first such path on a tie.
            .fold(None, |acc: Option<(usize, usize)>, (i, n)| match acc {
                Some((_, m)) if m >= n => acc,
                _ => Some((i, n)),
            });
        if let Some((b, _)) = best {
            match pairs.iter_mut().find(|(x, _)| *x == b) {
                Some((_, v)) => v.push(a),
                None => pairs.push((b, vec![a])),
            }
        }
    }
    pairs
        .into_iter()
        .map(|(b, fours)| {
            let base = &r.paths[b];
            let names: Vec<String> = fours.iter().map(|&i| r.paths[i].path.clone()).collect();
            let mut members = vec![(b, None)];
            members.extend(fours.iter().map(|&i| (i, Some(b))));
            let in_scenario = match &base.scenario {
                Some(s) => format!(", scenario {s}"),
                None => String::new(),
            };
            let id = match &base.scenario {
                Some(s) => format!("families-{s}-{}", names.join("-")),
                None => format!("families-{}", names.join("-")),
            };
            let title = format!(
                "IPv4 on {} against IPv6 on {}{in_scenario}",
                words(&names),
                base.path
            );
            let question = format!(
                "What does IPv4 on {} cost against IPv6 on {}, both from {} to {}{}?",
                words(&names),
                base.path,
                base.from,
                base.to,
                in_scenario.replace(", scenario", " in scenario")
            );
            let legend = vec![format!(
                "Ratios (*): an IPv4 cell's median divided by {}'s IPv6 cell of the same protocol, direction and streams.",
                base.label()
            )];
            let mut v = compared(
                r,
                id,
                title,
                question,
                &members,
                base.scenario.is_some(),
                legend,
            );
            v.kind = ViewKind::Families;
            v
        })
        .collect()
}

/// The paths no other view covers (or all, against an explicit baseline).
fn paths_view(r: &Results, paths: &[usize], base: usize, all: bool) -> View {
    let members: Vec<(usize, Option<usize>)> = paths
        .iter()
        .map(|&i| (i, (i != base).then_some(base)))
        .collect();
    let title = if all {
        "All paths".to_string()
    } else {
        "Other paths".to_string()
    };
    let labels: Vec<String> = paths.iter().map(|&i| r.paths[i].label()).collect();
    let question = if paths.len() == 1 {
        format!("What did path {} carry?", labels[0])
    } else {
        format!(
            "How do {} compare with {}?",
            words(&labels[..]),
            r.paths[base].label()
        )
    };
    let mut legend = Vec::new();
    if paths.len() > 1 {
        legend.push(format!(
            "Ratios: a path's median divided by {}'s; * where {} measures only the other family (its cell of the same protocol and direction).",
            r.paths[base].label(),
            r.paths[base].label()
        ));
    }
    let mut v = compared(r, "paths".into(), title, question, &members, false, legend);
    v.kind = ViewKind::Paths;
    let own: Vec<String> = labels.iter().map(|l| format!("{l} ")).collect();
    v.notes.extend(
        super::reference::streams_lines(r)
            .into_iter()
            .filter(|l| own.iter().any(|o| l.starts_with(o))),
    );
    v
}

/// A view of `members` (path, the path its ratios divide by): rows per cell in
/// the seed's order, the members in the given order within a cell; a cell of
/// the other family where the baseline measures only that one.
fn compared(
    r: &Results,
    id: String,
    title: String,
    question: String,
    members: &[(usize, Option<usize>)],
    one_scenario: bool,
    mut legend: Vec<String>,
) -> View {
    let mut cells: Vec<Cell> = Vec::new();
    for &(i, _) in members {
        for c in &r.paths[i].cells {
            if !cells.contains(&c.cell) {
                cells.push(c.cell);
            }
        }
    }
    cells.sort_by_key(seed_order);
    let across = members
        .iter()
        .any(|&(i, b)| b.is_some_and(|b| !same_families(&r.paths[i], &r.paths[b])));
    // Families compared across: categories by protocol, direction, streams.
    let category_of = |c: &Cell| {
        if across {
            let t = c.title();
            t.split_once(' ')
                .map(|(_, rest)| rest.to_string())
                .unwrap_or(t)
        } else {
            c.title()
        }
    };
    let mut categories: Vec<String> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut ordered: Vec<Cell> = cells.clone();
    if across {
        // Both families of a protocol and direction side by side: IPv6 (the
        // baseline's) first.
        ordered.sort_by_key(|c| (c.streams, c.protocol, c.direction, c.family != Family::Ipv6));
    }
    for c in &ordered {
        let category = index_of(&mut categories, category_of(c));
        for &(i, b) in members {
            let p = &r.paths[i];
            let Some(cr) = p.cell(c) else { continue };
            let base = b.and_then(|b| baseline_cell(&r.paths[b], c).map(|(bc, x)| (b, bc, x)));
            let mut figures = figures(r, p, cr);
            if let Some((_, bc, _)) = &base {
                figures.baseline_wire_bps = bc.wire_limit.as_ref().map(|l| l.bps);
            }
            if let Some((_, bc, x)) = &base {
                if cr.error.is_none() && bc.error.is_none() && bc.median_bps > 0.0 {
                    figures.ratio = Some(cr.median_bps / bc.median_bps);
                    figures.across_family = *x;
                }
            }
            let short = match (&p.scenario, one_scenario) {
                (Some(_), true) => p.path.clone(),
                _ => p.label(),
            };
            rows.push(Row {
                category,
                path: Some(i),
                label: p.label(),
                short,
                cell: *c,
                baseline: base.map(|(b, bc, _)| (r.paths[b].label(), bc.cell)),
                figures,
            });
        }
    }
    // Categories follow the rows; the seed's order already holds.
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
    let wired = has(&|f| f.wire_limit.is_some());
    if wired {
        columns.push(Column::WireLimit);
    }
    let latency = has(&|f| f.loaded_rtt.is_some() || f.idle_rtt.is_some());
    if latency {
        columns.extend([
            Column::IdleMs,
            Column::LoadedMs,
            Column::LoadedP99Ms,
            Column::IncreaseMs,
        ]);
    }

    let runs = r.runs_per_cell;
    legend.insert(
        0,
        format!(
            "Mbit/s: median of {runs} run{}{}.",
            if runs == 1 { "" } else { "s" },
            if has(&|f| f.udp.is_some()) {
                format!(
                    "; UDP what arrived, at -b: the highest offered rate at which a full-length run kept its loss{}, with that run's loss",
                    super::loss_within(r)
                )
            } else {
                String::new()
            }
        ),
    );
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
    if wired {
        legend.push(super::wire::LEGEND.into());
    }
    if latency {
        legend.push(
            "Round trips in ms: idle median; under the cell's load median, p99, and the median's increase over idle."
                .into(),
        );
    }
    let mut notes = super::wire::notes(rows.iter().filter_map(|x| x.figures.wire_limit.as_ref()));
    for &(i, _) in members {
        for c in &r.paths[i].cells {
            let steps = super::step_down_notes(c);
            if !steps.is_empty() {
                notes.push(format!(
                    "{} {}: {}",
                    r.paths[i].label(),
                    c.cell.title(),
                    steps.join("; ")
                ));
            }
        }
    }

    let mut series = Vec::new();
    for &(i, _) in members {
        let mut rate = vec![None; categories.len()];
        let mut rtt = vec![None; categories.len()];
        let mut idle = vec![None; categories.len()];
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
            let spread = |s: &Spread| Point {
                value: s.median,
                low: s.min,
                high: s.p99,
                spread: Some(s.clone()),
            };
            rtt[row.category] = f.loaded_rtt.as_ref().map(spread);
            idle[row.category] = f.idle_rtt.as_ref().map(spread);
        }
        let label = r.paths[i].label();
        series.push(Series {
            label: label.clone(),
            path: Some(i),
            metric: Metric::Rate,
            points: rate,
        });
        if rtt.iter().any(Option::is_some) {
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
    let timelines = timelines(r, members, &rows, categories.len());
    View {
        kind: ViewKind::Scenarios,
        id,
        title,
        question,
        columns,
        categories,
        rows,
        series,
        legend,
        notes,
        timelines,
    }
}

/// The members' timelines for the first category in which one of them has
/// per-interval rates or probes.
fn timelines(
    r: &Results,
    members: &[(usize, Option<usize>)],
    rows: &[Row],
    categories: usize,
) -> Vec<Timeline> {
    let of_category = |k: usize| -> Vec<Timeline> {
        members
            .iter()
            .filter_map(|&(i, _)| {
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

/// A path's figures for one cell.
fn figures(r: &Results, p: &PathResult, c: &CellResult) -> Figures {
    let idle = p
        .idle_latency
        .iter()
        .find(|(f, _)| *f == c.cell.family)
        .map(|(_, l)| l);
    let loaded: Option<&Latency> = c.latency.as_ref();
    Figures {
        failed: c.error.clone(),
        rate_bps: c.error.is_none().then_some(c.median_bps),
        min_bps: c.error.is_none().then_some(c.min_bps),
        max_bps: c.error.is_none().then_some(c.max_bps),
        udp: c.error.is_none().then(|| udp_figure(c)).flatten(),
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
        line_rate: super::wire::line_rate(p, c),
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

fn index_of(v: &mut Vec<String>, s: String) -> usize {
    match v.iter().position(|x| *x == s) {
        Some(i) => i,
        None => {
            v.push(s);
            v.len() - 1
        }
    }
}

/// "a", "a and b", "a, b and c".
fn words(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Milliseconds to three significant digits at most, two decimals at most:
/// "0.05", "3.50", "41.2", "120".
pub(crate) fn ms(x: f64) -> String {
    if !x.is_finite() {
        "?".into()
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// A model's ceiling as its profile would write it: four significant digits
/// without trailing zeros ("29.43 Mbit/s", "824 Mbit/s").
fn ceiling(bps: f64) -> String {
    let (v, unit) = super::rate_unit(bps.abs());
    let n = super::sig(bps / v, 4);
    let n = if n.contains('.') {
        n.trim_end_matches('0').trim_end_matches('.')
    } else {
        &n
    };
    format!("{n} {unit}")
}

/// A published figure as written: no trailing zeros ("941", "656.69").
fn plain(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::WIDTH;
    use crate::report::{Format, fixture, render};

    fn ids(v: &[View]) -> Vec<&str> {
        v.iter().map(|v| v.id.as_str()).collect()
    }

    fn row<'a>(v: &'a View, label: &str, key: &str) -> &'a Row {
        v.rows
            .iter()
            .find(|r| r.label == label && r.cell.key() == key)
            .unwrap_or_else(|| panic!("no row {label} {key} in {}", v.id))
    }

    #[test]
    fn the_main_jobs_questions() {
        let r = fixture::main_job();
        let v = views(&r);
        assert_eq!(
            ids(&v),
            [
                "published",
                "scenarios-raw",
                "scenarios-native-ipv6-dslite",
                "tunnels-fast",
                "families-fast-dslite",
                "families-softwire-userspace-dslite",
                "paths",
            ]
        );
        let kinds: Vec<ViewKind> = v.iter().map(|v| v.kind).collect();
        use ViewKind::*;
        assert_eq!(
            kinds,
            [
                Published, Scenarios, Scenarios, Tunnels, Families, Families, Paths
            ]
        );
        // Fast and normal against no router, cell by cell.
        let s = &v[1];
        assert_eq!(s.title, "raw across scenarios none, fast and normal");
        assert_eq!(
            s.question,
            "How does path raw change from scenario none to fast and normal?"
        );
        let normal = row(s, "normal/raw", "ipv4.tcp.sender");
        assert_eq!(
            normal.baseline,
            Some((
                "none/raw".into(),
                Cell::parse_key("ipv4.tcp.sender").unwrap()
            ))
        );
        let ratio = normal.figures.ratio.unwrap();
        assert!(
            (ratio - 384.0 * 0.99 / (941.0 * 0.99)).abs() < 1e-9,
            "{ratio}"
        );
        assert_eq!(row(s, "none/raw", "ipv4.tcp.sender").figures.ratio, None);
        assert_eq!(s.rows.len(), 24, "3 scenarios x 8 cells");
        assert_eq!(s.categories.len(), 8);

        // Each tunnel against raw in the same scenario, with its bytes per
        // packet where the notes say them.
        let t = &v[3];
        let labels: Vec<&str> = t
            .rows
            .iter()
            .filter(|r| r.cell.key() == "ipv4.tcp.sender")
            .map(|r| r.short.as_str())
            .collect();
        assert_eq!(labels, ["raw", "wireguard", "l2tp-ipsec", "ikev2"]);
        let wg = row(t, "fast/wireguard", "ipv4.tcp.sender");
        assert_eq!(wg.figures.overhead_bytes, Some((60, 60)));
        assert_eq!(
            row(t, "fast/ikev2", "ipv4.tcp.sender")
                .figures
                .overhead_bytes,
            None
        );
        assert!((wg.figures.ratio.unwrap() - 610.0 / 824.0).abs() < 1e-9);
        // Latency: idle 0.08 ms, 14 ms under load.
        assert!((wg.figures.increase_ms().unwrap() - (14.0 - 0.08)).abs() < 1e-9);
        assert!(t.columns.contains(&Column::Overhead));
        assert!(t.columns.contains(&Column::IncreaseMs));
        // TCP only beside raw's UDP: raw's UDP rows stay, with no ratio.
        assert!(t.columns.contains(&Column::Udp));

        // IPv4 over the softwire against native IPv6, across families.
        let f = &v[4];
        assert_eq!(
            f.title,
            "IPv4 on dslite against IPv6 on native-ipv6, scenario fast"
        );
        assert_eq!(f.categories[0], "TCP Sender");
        let d = row(f, "fast/dslite", "ipv4.tcp.sender");
        assert!(d.figures.across_family);
        assert_eq!(
            d.baseline,
            Some((
                "fast/native-ipv6".into(),
                Cell::parse_key("ipv6.tcp.sender").unwrap()
            ))
        );
        assert_eq!(Column::Ratio.text(d), "0.98*");
        assert_eq!(d.figures.overhead_bytes, Some((40, 40)));
        assert_eq!(
            f.rows[0].cell.key(),
            "ipv6.tcp.sender",
            "the baseline first"
        );

        // What no view covers: the speed test's path, 6 streams against one.
        let p = &v[6];
        assert_eq!(p.title, "Other paths");
        assert!(p.rows.iter().all(|r| r.label == "fast/speedtest"));
        assert_eq!(
            p.notes,
            ["fast/speedtest IPv6 TCP Receiver: 6 streams 650 Mbit/s = 2.61x one stream (249)"]
        );

        // The seed's table: every published figure, in the file's order.
        let pb = &v[0];
        assert_eq!(pb.rows.len(), 25);
        assert_eq!(Column::Verdict.text(&pb.rows[0]), "ok");
        assert_eq!(
            Column::Measured.text(row(pb, "fast/raw", "ipv4.udp.sender")),
            "32.7 (32.4 rcvd, 1.0 % lost)"
        );
        assert_eq!(
            Column::Verdict.text(row(pb, "fast/raw", "ipv4.tcp.receiver")),
            "OUT (-25 %)"
        );
        assert_eq!(
            pb.notes,
            [
                "24 of 25 cells within tolerance (TCP +-15 %, UDP +-25 %)",
                "fast/speedtest IPv6 TCP Receiver: 6 streams 650 Mbit/s = 2.61x one stream (249)"
            ]
        );
    }

    #[test]
    fn predictions_for_the_cells_nobody_published() {
        let r = fixture::calibrated();
        let v = views(&r);
        // The predictions right after the published figures; the other views
        // as without marks.
        let mut without = ids(&views(&fixture::main_job()))
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        without.insert(1, "predictions".into());
        assert_eq!(ids(&v), without);
        let p = &v[1];
        assert_eq!(p.kind, ViewKind::Predictions);
        assert_eq!(
            p.columns,
            [
                Column::Path,
                Column::Cell,
                Column::Measured,
                Column::LimitedBy
            ]
        );
        // Every measured cell without a published figure, none with one.
        let published = r.reference.as_ref().unwrap();
        let want: usize = r
            .paths
            .iter()
            .map(|x| {
                x.cells
                    .iter()
                    .filter(|c| {
                        !published
                            .figures
                            .iter()
                            .any(|f| f.path == x.label() && f.cell == c.cell)
                    })
                    .count()
            })
            .sum();
        assert_eq!(p.rows.len(), want);
        assert_eq!(want, 28, "the fixture's unpublished cells");
        let dslite = row(p, "fast/dslite", "ipv4.udp.sender");
        assert_eq!(dslite.figures.rate_bps, Some(30e6), "the searched rate");
        assert_eq!(
            Column::LimitedBy.text(dslite),
            "nvr500 fast path ipv4 udp upload ceiling 30.12 Mbit/s"
        );
        assert_eq!(
            Column::LimitedBy.text(row(p, "fast/wireguard", "ipv4.tcp.sender")),
            "nvr500 fast path ipv4 tcp upload ceiling 824 Mbit/s"
        );
        assert_eq!(
            Column::LimitedBy.text(row(p, "fast/ikev2", "ipv4.tcp.sender")),
            ""
        );
        // One bar series per path.
        assert_eq!(p.series.len(), 7);
        assert!(p.series.iter().all(|s| s.metric == Metric::Rate));

        // The published view says the basis of each row.
        let pb = &v[0];
        assert_eq!(pb.columns.last(), Some(&Column::Basis));
        assert_eq!(
            Column::Basis.text(row(pb, "fast/raw", "ipv4.tcp.sender")),
            "calibrated"
        );
        assert_eq!(
            Column::Basis.text(row(pb, "fast/raw", "ipv4.udp.sender")),
            "predicted"
        );

        // No calibration marks, no predictions: a cell's ceiling alone says
        // nothing about a model it was predicted by.
        let mut unmarked = r.clone();
        unmarked.reference.as_mut().unwrap().marks_calibration = false;
        let v = views(&unmarked);
        assert!(!ids(&v).contains(&"predictions"));
        assert!(!v[0].columns.contains(&Column::Basis));
    }

    #[test]
    fn every_line_of_the_main_jobs_text_fits_120_columns() {
        let calibrated = render(&fixture::calibrated(), Format::Text, None);
        for l in calibrated.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} chars: {l}",
                l.chars().count()
            );
        }
        let r = fixture::main_job();
        let text = render(&r, Format::Text, None);
        for l in text.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} chars: {l}",
                l.chars().count()
            );
        }
        // Every view, also with the widest labels a topology might give.
        let mut wide = r.clone();
        for p in &mut wide.paths {
            p.path = format!("{}-with-a-rather-long-name", p.path);
            p.scenario = p
                .scenario
                .as_ref()
                .map(|s| format!("{s}-and-a-long-scenario"));
        }
        for v in views(&wide) {
            for l in super::super::table::view_text(&v).lines() {
                assert!(l.chars().count() <= WIDTH, "{}: {l}", v.id);
            }
        }
        // Latency columns are there when the results have latency, not otherwise.
        assert!(text.contains("  idle  load"), "{text}");
        let mut bare = r.clone();
        for p in &mut bare.paths {
            p.idle_latency.clear();
            for c in &mut p.cells {
                c.latency = None;
            }
        }
        let text = render(&bare, Format::Text, None);
        assert!(!text.contains("idle"), "{text}");
        assert!(!text.contains("Round trips"), "{text}");
    }

    #[test]
    fn a_tunnel_view_as_text() {
        let text = render(&fixture::main_job(), Format::Text, None);
        let start = text
            .find("Tunnels against the raw path, scenario fast\n")
            .unwrap();
        let view: Vec<&str> = text[start..].lines().take(16).collect();
        assert_eq!(
            view,
            [
                "Tunnels against the raw path, scenario fast",
                "===========================================",
                "What does each of wireguard, l2tp-ipsec and ikev2 cost against the raw path from pc to server, in scenario fast?",
                "Mbit/s: median of 3 runs; UDP what arrived, at -b: the highest offered rate at which a full-length run kept its loss",
                "within 10 %, with that run's loss.",
                "Ratios: a path's median divided by fast/raw's.",
                "B/pkt: bytes per packet the path's tunnel adds.",
                "Round trips in ms: idle median; under the cell's load median, p99, and the median's increase over idle.",
                "",
                "cell               path        Mbit/s  ratio     -b (loss)  B/pkt  idle  load   p99  +load",
                "IPv4 TCP Sender    raw            816                              0.08  12.5  22.5  +12.4",
                "                   wireguard      604   0.74                   60  0.08  14.0  25.2  +13.9",
                "                   l2tp-ipsec     398   0.49                       0.08  15.0  27.0  +14.9",
                "                   ikev2          248   0.30                       0.08  22.0  39.6  +21.9",
                "IPv4 TCP Receiver  raw            693                              0.08  12.5  22.5  +12.4",
                "                   wireguard      634   0.91                   60  0.08  14.0  25.2  +13.9",
            ]
        );
    }

    #[test]
    fn the_small_fixture_and_a_chosen_baseline() {
        let r = fixture::results();
        // raw and wg share their ends: one tunnel view covers both.
        assert_eq!(ids(&views(&r)), ["tunnels"]);
        // A baseline asked for: every path against it as well.
        let v = views_with_baseline(&r, Some("wg"));
        assert_eq!(ids(&v), ["tunnels", "paths"]);
        assert_eq!(v[1].title, "All paths");
        let raw = row(&v[1], "raw", "ipv4.tcp.sender");
        assert_eq!(Column::Ratio.text(raw), "3.24");
        // One path: all paths, no ratio column.
        let mut one = r.clone();
        one.paths.truncate(1);
        let v = views(&one);
        assert_eq!(ids(&v), ["paths"]);
        assert_eq!(v[0].question, "What did path raw carry?");
        assert!(!v[0].columns.contains(&Column::Ratio));
        assert!(
            views(&Results {
                paths: Vec::new(),
                ..r
            })
            .is_empty()
        );
    }

    #[test]
    fn series_for_charts() {
        let r = fixture::main_job();
        let v = views(&r);
        let t = &v[3];
        // A rate series and a latency series per path, a point per category.
        let labels: Vec<(&str, Metric)> = t
            .series
            .iter()
            .map(|s| (s.label.as_str(), s.metric))
            .collect();
        assert_eq!(
            labels,
            [
                ("fast/raw", Metric::Rate),
                ("fast/raw", Metric::IdleRtt),
                ("fast/raw", Metric::LoadedRtt),
                ("fast/wireguard", Metric::Rate),
                ("fast/wireguard", Metric::IdleRtt),
                ("fast/wireguard", Metric::LoadedRtt),
                ("fast/l2tp-ipsec", Metric::Rate),
                ("fast/l2tp-ipsec", Metric::IdleRtt),
                ("fast/l2tp-ipsec", Metric::LoadedRtt),
                ("fast/ikev2", Metric::Rate),
                ("fast/ikev2", Metric::IdleRtt),
                ("fast/ikev2", Metric::LoadedRtt),
            ]
        );
        for s in &t.series {
            assert_eq!(s.points.len(), t.categories.len());
        }
        let wg = &t.series[3];
        let idle = t.series[4].points[0].as_ref().unwrap();
        assert_eq!(idle.spread.as_ref().unwrap().median, 0.08);
        // Over time: IPv4 TCP Sender of each path, three runs of ten
        // intervals one after another, and its probes under that load.
        assert_eq!(t.timelines.len(), 4);
        let tl = &t.timelines[1];
        assert_eq!(
            (tl.label.as_str(), tl.cell.key()),
            ("fast/wireguard", "ipv4.tcp.sender".into())
        );
        assert_eq!(tl.rate_bps.len(), 30);
        assert_eq!(tl.rate_bps[29].0, 30.0);
        assert_eq!(tl.rtt_ms.len(), 150);
        assert!(v[0].timelines.is_empty(), "the published view has none");
        let udp = t
            .categories
            .iter()
            .position(|c| c == "IPv4 UDP Sender")
            .unwrap();
        assert_eq!(wg.points[udp], None, "wireguard measured no UDP");
        let p = wg.points[0].as_ref().unwrap();
        assert_eq!(
            (p.value, p.low, p.high),
            (610.0 * 0.99e6, 610.0 * 0.98e6, 610.0e6)
        );
        // The published view: published and measured per path.
        assert_eq!(v[0].series[0].label, "none/raw published");
        assert_eq!(v[0].series[0].metric, Metric::Published);
        assert_eq!(v[0].categories[0], "IPv4 TCP Sender");
        assert_eq!(v[0].categories.last().unwrap(), "IPv6 TCP Receiver x6");
    }

    #[test]
    fn a_failed_cell_is_footnoted() {
        let text = render(&fixture::results(), Format::Text, None);
        assert!(
            text.contains("\n                    wg    failed [1]      -\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n[1] wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused\n"
            ),
            "{text}"
        );
    }

    #[test]
    #[ignore]
    fn print_the_main_job() {
        println!("{}", render(&fixture::main_job(), Format::Text, None));
    }
}
