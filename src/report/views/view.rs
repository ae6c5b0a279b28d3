//! What a view is: its rows of typed figures, the series a chart draws and
//! the timelines a chart over time draws. [`super::Column`] says how each
//! figure is written.

use super::Column;
use crate::measure::results::{CellResult, ModelLimit, Spread};
use crate::report::UdpFigure;
use crate::report::reference::Basis;
use crate::vocab::Cell;

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
    /// Its best run reached the underlay between two hosts on its way
    /// (`Results::at_underlay_capacity`): its rate is marked.
    pub at_underlay: bool,
    /// Bits per second: the median of the runs; in the published view the
    /// NVR500 study's figure (TCP the best run, UDP the searched rate).
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

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Median rate in bit/s, whiskers min-max (the NVR500 study's figure in the
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

/// One value of a series with its whiskers.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub value: f64,
    pub low: f64,
    pub high: f64,
    /// The latency's whole spread, for box plots.
    pub spread: Option<Spread>,
}

impl Point {
    /// A point without whiskers.
    pub fn flat(value: f64) -> Point {
        Point {
            value,
            low: value,
            high: value,
            spread: None,
        }
    }
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
    pub(super) fn of(label: String, path: usize, category: usize, c: &CellResult) -> Timeline {
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
