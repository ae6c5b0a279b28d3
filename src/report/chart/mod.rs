//! The charts of one view ([`View`]), drawn from its chart series and
//! timelines and nothing else, for the HTML page:
//!
//! - **throughput**: grouped bars, a group per category, a bar per series with
//!   a point there (the median; published figures paler), whiskers from the
//!   runs' min to max;
//! - **latency**: box plots of the round trips, idle (paler) and under each
//!   cell's load, per path: box from the median to p90, whiskers min to max,
//!   a tick at p99; a log scale where idle and loaded lie decades apart;
//! - **over time**: one category's runs one after another, the rate per
//!   interval above and the round trips the probes saw under that load below,
//!   as flent's and crusader's plots show a test.
//!
//! Every series of a chart gets its own colour; a path keeps its colour in
//! every chart of the view. Every label's estimated box is recorded
//! ([`Chart::labels`]), so the tests can check that labels stay inside the
//! chart and do not overlap.

mod latency;
mod over_time;
mod throughput;

use super::draw::Canvas;
pub use super::draw::TextBox;
use super::draw::colour::{colour, pale};
use super::views::{Metric, Series, View};

/// What a chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    Throughput,
    Latency,
    OverTime,
}

impl ChartKind {
    pub fn name(self) -> &'static str {
        match self {
            ChartKind::Throughput => "throughput",
            ChartKind::Latency => "latency",
            ChartKind::OverTime => "over-time",
        }
    }
}

/// One drawn chart.
#[derive(Debug, Clone)]
pub struct Chart {
    pub kind: ChartKind,
    /// An `<svg>` element (no XML declaration: it is meant to be inlined).
    pub svg: String,
    pub width: f64,
    pub height: f64,
    /// Each legend entry and its colour.
    pub colours: Vec<(String, String)>,
    /// Every text's estimated box.
    pub labels: Vec<TextBox>,
}

/// The charts of a view: throughput where it has rates, latency where it has
/// round trips, over time where it has timelines.
pub fn charts(v: &View) -> Vec<Chart> {
    let keys = path_keys(v);
    let mut out = Vec::new();
    if let Some(c) = throughput::chart(v, &keys) {
        out.push(c);
    }
    if let Some(c) = latency::chart(v, &keys) {
        out.push(c);
    }
    if let Some(c) = over_time::chart(v, &keys) {
        out.push(c);
    }
    out
}

/// Each path's label in the order the view's series first name it: a path's
/// colour is the one at its index.
fn path_keys(v: &View) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for s in &v.series {
        let k = key(s).to_string();
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for t in &v.timelines {
        if !keys.contains(&t.label) {
            keys.push(t.label.clone());
        }
    }
    keys
}

/// The path a series belongs to: published figures name it " published".
fn key(s: &Series) -> &str {
    match s.metric {
        Metric::Published => s.label.strip_suffix(" published").unwrap_or(&s.label),
        _ => &s.label,
    }
}

fn path_colour(keys: &[String], label: &str) -> String {
    colour(keys.iter().position(|k| k == label).unwrap_or(keys.len()))
}

fn series_colour(keys: &[String], s: &Series) -> String {
    let c = path_colour(keys, key(s));
    match s.metric {
        Metric::Published | Metric::IdleRtt => pale(&c),
        Metric::Rate | Metric::LoadedRtt => c,
    }
}

/// The chart drawn on `c`, `width` by `height`.
fn finish(
    c: Canvas,
    kind: ChartKind,
    title: &str,
    (width, height): (f64, f64),
    colours: Vec<(String, String)>,
) -> Chart {
    let attributes = format!(r#" class="chart" data-chart="{}""#, kind.name());
    let d = c.finish(&attributes, width, height, title);
    Chart {
        kind,
        svg: d.svg,
        width: d.width,
        height: d.height,
        colours,
        labels: d.labels,
    }
}

#[cfg(test)]
mod tests;
