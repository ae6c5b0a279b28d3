//! The charts of one view ([`View`]), drawn from its chart series and
//! timelines and nothing else, as hand-written SVG 1.1 (no script, no font
//! file, no stylesheet), for the HTML page:
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
//! every chart of the view. Text is laid out from a width estimate
//! (`text_width`) and every label's box is recorded ([`Chart::labels`]), so
//! the tests can check that labels stay inside the chart and do not overlap.

use super::svg::{esc, nice_axis, tick};
use super::views::{Metric, Series, View};
use super::{rate_unit, sig};
use crate::measure::results::Spread;
use std::fmt::Write;

pub(super) const FONT: &str = "Helvetica, Arial, sans-serif";
/// Estimated advance of a character in units of the font size: wider than
/// Helvetica's average, so an estimate errs toward room to spare.
const CHAR_EM: f64 = 0.6;
const PLOT_H: f64 = 260.0;
const PANEL_H: f64 = 170.0;
const MIN_PLOT_W: f64 = 560.0;
pub(super) const RIGHT: f64 = 24.0;
pub(super) const LABEL_ANGLE: f64 = 40.0;

/// Okabe-Ito's colours (told apart by colour-blind readers; yellow left out,
/// it vanishes on white), then Paul Tol's muted ones; beyond those, hues a
/// golden angle apart.
const PALETTE: [&str; 12] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#555555", "#882255",
    "#44AA99", "#999933", "#332288", "#AA4499",
];

/// The `i`th colour of a chart: a different one for every `i`.
pub(crate) fn colour(i: usize) -> String {
    match PALETTE.get(i) {
        Some(c) => (*c).to_string(),
        None => {
            let k = i - PALETTE.len();
            let hue = (k as f64 * 137.508) % 360.0;
            let light = [0.36, 0.5, 0.62][k % 3];
            hsl(hue, 0.6 + 0.1 * ((k / 3) % 3) as f64, light)
        }
    }
}

/// `c` mixed half with white: the paler twin a published figure or an idle
/// round trip takes beside its path's own colour.
fn pale(c: &str) -> String {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap_or(0);
    let mix = |shift: u32| {
        let x = f64::from((v >> shift) & 0xff);
        (x + (255.0 - x) * 0.55).round() as u32
    };
    format!("#{:02X}{:02X}{:02X}", mix(16), mix(8), mix(0))
}

fn hsl(h: f64, s: f64, l: f64) -> String {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let x = c * (1.0 - ((h / 60.0) % 2.0 - 1.0).abs());
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let byte = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u32;
    format!("#{:02X}{:02X}{:02X}", byte(r), byte(g), byte(b))
}

/// The estimated width of `t` at `size` px.
pub(crate) fn text_width(t: &str, size: f64) -> f64 {
    t.chars().count() as f64 * size * CHAR_EM
}

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

/// The box a text is estimated to cover, in the chart's coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
    pub text: String,
    /// Rotated texts' boxes are the rotated box's bounds: neighbours'
    /// bounds overlap where the texts do not, so only straight ones are
    /// checked against each other.
    pub rotated: bool,
}

impl TextBox {
    pub fn overlaps(&self, o: &TextBox) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// The charts of a view: throughput where it has rates, latency where it has
/// round trips, over time where it has timelines.
pub fn charts(v: &View) -> Vec<Chart> {
    let keys = path_keys(v);
    let mut out = Vec::new();
    if let Some(c) = throughput(v, &keys) {
        out.push(c);
    }
    if let Some(c) = latency(v, &keys) {
        out.push(c);
    }
    if let Some(c) = over_time(v, &keys) {
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

// ---- the canvas: SVG text and the boxes of its labels ----

#[derive(Clone, Copy)]
enum Anchor {
    Start,
    Middle,
    End,
}

struct Canvas {
    body: String,
    labels: Vec<TextBox>,
}

impl Canvas {
    fn new() -> Canvas {
        Canvas {
            body: String::new(),
            labels: Vec::new(),
        }
    }

    fn raw(&mut self, s: &str) {
        self.body.push_str(s);
        self.body.push('\n');
    }

    #[allow(clippy::too_many_arguments)]
    fn text(&mut self, x: f64, y: f64, size: f64, anchor: Anchor, fill: &str, bold: bool, t: &str) {
        self.text_at(x, y, size, anchor, fill, bold, t, 0.0);
    }

    /// Text at (x, y), turned `angle` degrees counter-clockwise about it.
    #[allow(clippy::too_many_arguments)]
    fn text_at(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        fill: &str,
        bold: bool,
        t: &str,
        angle: f64,
    ) {
        let w = text_width(t, size) * if bold { 1.1 } else { 1.0 };
        let (s0, s1) = match anchor {
            Anchor::Start => (0.0, w),
            Anchor::Middle => (-w / 2.0, w / 2.0),
            Anchor::End => (-w, 0.0),
        };
        // The box in the text's own frame (x along the baseline, y down),
        // turned and moved into the chart's.
        let (sin, cos) = (-angle).to_radians().sin_cos();
        let corners = [
            (s0, -0.8 * size),
            (s1, -0.8 * size),
            (s0, 0.25 * size),
            (s1, 0.25 * size),
        ]
        .map(|(a, b)| (x + a * cos - b * sin, y + a * sin + b * cos));
        let fold = |f: fn(f64, f64) -> f64, pick: fn(&(f64, f64)) -> f64, init: f64| {
            corners.iter().map(pick).fold(init, f)
        };
        self.labels.push(TextBox {
            x0: fold(f64::min, |c| c.0, f64::INFINITY),
            x1: fold(f64::max, |c| c.0, f64::NEG_INFINITY),
            y0: fold(f64::min, |c| c.1, f64::INFINITY),
            y1: fold(f64::max, |c| c.1, f64::NEG_INFINITY),
            text: t.to_string(),
            rotated: angle != 0.0,
        });
        let anchor = match anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        let weight = if bold { r#" font-weight="bold""# } else { "" };
        let place = if angle == 0.0 {
            format!(r#"x="{x:.1}" y="{y:.1}""#)
        } else {
            format!(
                r#"transform="translate({x:.1} {y:.1}) rotate({:.0})""#,
                -angle
            )
        };
        let _ = writeln!(
            self.body,
            r#"<text {place} font-size="{size}" text-anchor="{anchor}" fill="{fill}"{weight}>{}</text>"#,
            esc(t)
        );
    }
}

/// Title, subtitle and legend over a plot area; axes and the finished SVG.
struct Frame {
    title: String,
    subtitle: Vec<String>,
    legend: Vec<(String, String)>,
    /// Width of the y axis' tick labels, px.
    ticks_w: f64,
}

impl Frame {
    /// Left edge of the plot.
    fn left(&self) -> f64 {
        (self.ticks_w + 40.0).max(64.0)
    }

    /// The chart's width for a plot `plot_w` wide.
    fn width(&self, plot_w: f64) -> f64 {
        let legend_w = self
            .legend
            .iter()
            .map(|(l, _)| legend_item_w(l))
            .fold(0.0, f64::max);
        let text_w = self
            .subtitle
            .iter()
            .map(|s| text_width(s, 12.0))
            .chain([text_width(&self.title, 15.0) * 1.1])
            .fold(legend_w, f64::max)
            .min(900.0);
        (self.left() + plot_w.max(text_w) + RIGHT).ceil()
    }

    /// Draws the title, the subtitle (wrapped to the width) and the legend;
    /// returns the y where the plot may start.
    fn head(&self, c: &mut Canvas, width: f64) -> f64 {
        let left = self.left();
        c.text(
            left,
            24.0,
            15.0,
            Anchor::Start,
            "#222222",
            true,
            &self.title,
        );
        let chars = ((width - left - RIGHT) / (12.0 * CHAR_EM)) as usize;
        let mut y = 24.0;
        for line in super::svg::wrap(&self.subtitle, chars) {
            y += 16.0;
            c.text(left, y, 12.0, Anchor::Start, "#555555", false, &line);
        }
        y += 12.0;
        let mut x = left;
        let mut row_y = y;
        for (label, colour) in &self.legend {
            let w = legend_item_w(label);
            if x + w > width - RIGHT && x > left {
                x = left;
                row_y += 20.0;
            }
            let _ = writeln!(
                c.body,
                r#"<rect x="{x:.1}" y="{row_y:.1}" width="12" height="12" fill="{colour}" stroke="{colour}"/>"#
            );
            c.text(
                x + 17.0,
                row_y + 10.5,
                12.0,
                Anchor::Start,
                "#222222",
                false,
                label,
            );
            x += w;
        }
        row_y + if self.legend.is_empty() { 0.0 } else { 20.0 } + 16.0
    }
}

fn legend_item_w(label: &str) -> f64 {
    17.0 + text_width(label, 12.0) + 18.0
}

fn finish(
    c: Canvas,
    kind: ChartKind,
    title: &str,
    width: f64,
    height: f64,
    colours: Vec<(String, String)>,
) -> Chart {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" class="chart" data-chart="{}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT}" role="img"><title>{}</title><rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>"##,
        kind.name(),
        esc(title)
    );
    s.push_str(&c.body);
    s.push_str("</svg>\n");
    Chart {
        kind,
        svg: s,
        width,
        height,
        colours,
        labels: c.labels,
    }
}

/// A y axis: where a value goes, and the ticks to draw.
enum Scale {
    Linear {
        top: f64,
        step: f64,
    },
    /// Decades from 10^lo to 10^hi.
    Log {
        lo: i32,
        hi: i32,
    },
}

impl Scale {
    fn linear(max: f64) -> Scale {
        let (step, top) = nice_axis(max);
        Scale::Linear { top, step }
    }

    /// Linear, or logarithmic where the figures lie more than `spread`
    /// times apart.
    fn for_values(values: &[f64], spread: f64) -> Scale {
        let max = values.iter().copied().fold(0.0, f64::max);
        let min = values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        if min.is_finite() && max / min > spread {
            Scale::Log {
                lo: min.log10().floor() as i32,
                hi: (max.log10().ceil() as i32).max(min.log10().floor() as i32 + 1),
            }
        } else {
            Scale::linear(max)
        }
    }

    /// 0 at the axis' foot, 1 at its top.
    fn frac(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { top, .. } => (v / top).clamp(0.0, 1.0),
            Scale::Log { lo, hi } => {
                let v = v.max(10f64.powi(lo));
                ((v.log10() - f64::from(lo)) / f64::from(hi - lo)).clamp(0.0, 1.0)
            }
        }
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        match *self {
            Scale::Linear { top, step } => {
                let n = (top / step).round() as usize;
                (0..=n)
                    .map(|i| {
                        let v = i as f64 * step;
                        (v, tick(v, step))
                    })
                    .collect()
            }
            Scale::Log { lo, hi } => (lo..=hi)
                .map(|e| {
                    let v = 10f64.powi(e);
                    (v, sig(v, 1))
                })
                .collect(),
        }
    }

    fn is_log(&self) -> bool {
        matches!(self, Scale::Log { .. })
    }
}

/// Gridlines and tick labels from `left` to `right`, the axis' foot at
/// `bottom`, and the unit along the side.
fn y_axis(c: &mut Canvas, s: &Scale, left: f64, right: f64, top: f64, bottom: f64, unit: &str) {
    for (v, label) in s.ticks() {
        let y = bottom - s.frac(v) * (bottom - top);
        let stroke = if y == bottom { "#888888" } else { "#e3e3e3" };
        let _ = writeln!(
            c.body,
            r#"<line x1="{left:.1}" y1="{y:.1}" x2="{right:.1}" y2="{y:.1}" stroke="{stroke}" stroke-width="1"/>"#
        );
        c.text(
            left - 6.0,
            y + 4.0,
            11.0,
            Anchor::End,
            "#444444",
            false,
            &label,
        );
    }
    c.text_at(
        16.0,
        (top + bottom) / 2.0,
        12.0,
        Anchor::Middle,
        "#222222",
        false,
        unit,
        90.0,
    );
}

fn ticks_width(s: &Scale) -> f64 {
    s.ticks()
        .iter()
        .map(|(_, l)| text_width(l, 11.0))
        .fold(0.0, f64::max)
}

/// Category labels under groups: one line, two, or turned where the
/// widest does not fit its group. Returns the height they take.
fn category_labels(c: &mut Canvas, labels: &[(f64, f64, &str)], bottom: f64) -> f64 {
    let fits = |t: &str, w: f64| text_width(t, 12.0) <= w - 4.0;
    if labels.iter().all(|(_, w, t)| fits(t, *w)) {
        for (x, _, t) in labels {
            c.text(*x, bottom + 18.0, 12.0, Anchor::Middle, "#222222", false, t);
        }
        return 26.0;
    }
    let split: Vec<(String, String)> = labels.iter().map(|(_, _, t)| two_lines(t)).collect();
    if labels
        .iter()
        .zip(&split)
        .all(|((_, w, _), (a, b))| fits(a, *w) && fits(b, *w))
    {
        for ((x, _, _), (a, b)) in labels.iter().zip(&split) {
            c.text(*x, bottom + 18.0, 12.0, Anchor::Middle, "#222222", false, a);
            c.text(*x, bottom + 33.0, 12.0, Anchor::Middle, "#222222", false, b);
        }
        return 42.0;
    }
    let mut h: f64 = 0.0;
    for (x, _, t) in labels {
        c.text_at(
            *x + 4.0,
            bottom + 14.0,
            12.0,
            Anchor::End,
            "#222222",
            false,
            t,
            LABEL_ANGLE,
        );
        h = h.max(text_width(t, 12.0) * LABEL_ANGLE.to_radians().sin() + 24.0);
    }
    h
}

/// The height turned labels would take, and how far left of its group's
/// centre the first one reaches.
fn turned_reach(first: &str) -> f64 {
    text_width(first, 12.0) * LABEL_ANGLE.to_radians().cos()
}

/// "IPv4 TCP Sender" as "IPv4 TCP" over "Sender": split at the space that
/// leaves the longer line shortest.
fn two_lines(t: &str) -> (String, String) {
    let best = t
        .char_indices()
        .filter(|(_, ch)| *ch == ' ')
        .map(|(i, _)| i)
        .min_by_key(|&i| i.max(t.len() - i - 1));
    match best {
        Some(i) => (t[..i].to_string(), t[i + 1..].to_string()),
        None => (t.to_string(), String::new()),
    }
}

/// Groups of slots (bars, boxes) along the x axis: a group per category that
/// has slots, the slots as wide as the plot's least width allows within
/// `(least, most)`, the plot moved right where a turned first label would
/// reach out of the chart.
struct Grouped {
    slot: f64,
    gap: f64,
    group_w: Vec<f64>,
    left: f64,
    plot_w: f64,
    width: f64,
}

impl Grouped {
    fn new(
        frame: &Frame,
        categories: &[String],
        counts: &[usize],
        (least, most): (f64, f64),
    ) -> Grouped {
        let gap = 18.0;
        let slots: usize = counts.iter().sum();
        let used = counts.iter().filter(|n| **n > 0).count() as f64;
        let slot = ((MIN_PLOT_W - used * gap) / slots.max(1) as f64).clamp(least, most);
        let group_w: Vec<f64> = counts
            .iter()
            .map(|&n| if n == 0 { 0.0 } else { n as f64 * slot + gap })
            .collect();
        let plot_w: f64 = group_w.iter().sum();
        let mut left = frame.left();
        if let Some(k) = counts.iter().position(|n| *n > 0) {
            left = left.max(turned_reach(&categories[k]) - group_w[k] / 2.0 + 8.0);
        }
        let width = (frame.width(plot_w) + (left - frame.left())).ceil();
        Grouped {
            slot,
            gap,
            group_w,
            left,
            plot_w,
            width,
        }
    }

    /// The canvas with the head and the y axis drawn; the plot's top and bottom.
    fn start(&self, frame: &Frame, scale: &Scale, unit: &str) -> (Canvas, f64, f64) {
        let mut c = Canvas::new();
        let top = frame.head(&mut c, self.width);
        let bottom = top + PLOT_H;
        y_axis(
            &mut c,
            scale,
            self.left,
            self.left + self.plot_w,
            top,
            bottom,
            unit,
        );
        (c, top, bottom)
    }

    /// (category, x of its first slot) for every group that has slots.
    fn groups(&self) -> Vec<(usize, f64)> {
        let mut x = self.left;
        let mut out = Vec::new();
        for (k, w) in self.group_w.iter().enumerate() {
            if *w > 0.0 {
                out.push((k, x + self.gap / 2.0));
            }
            x += w;
        }
        out
    }

    /// The category labels under the groups, and the finished chart.
    fn finish(
        &self,
        mut c: Canvas,
        categories: &[String],
        bottom: f64,
        kind: ChartKind,
        title: &str,
        colours: Vec<(String, String)>,
    ) -> Chart {
        let labels: Vec<(f64, f64, &str)> = self
            .groups()
            .into_iter()
            .map(|(k, x0)| {
                (
                    x0 - self.gap / 2.0 + self.group_w[k] / 2.0,
                    self.group_w[k],
                    categories[k].as_str(),
                )
            })
            .collect();
        let labels_h = category_labels(&mut c, &labels, bottom);
        let height = (bottom + labels_h + 8.0).ceil();
        finish(c, kind, title, self.width, height, colours)
    }
}

// ---- throughput: grouped bars ----

fn throughput(v: &View, keys: &[String]) -> Option<Chart> {
    let series: Vec<&Series> = v
        .series
        .iter()
        .filter(|s| matches!(s.metric, Metric::Rate | Metric::Published))
        .filter(|s| s.points.iter().any(Option::is_some))
        .collect();
    if series.is_empty() {
        return None;
    }
    // Per category, the series with a point there, in order.
    let groups: Vec<Vec<usize>> = (0..v.categories.len())
        .map(|k| {
            (0..series.len())
                .filter(|&i| series[i].points.get(k).is_some_and(Option::is_some))
                .collect()
        })
        .collect();
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().flatten())
        .map(|p| p.high.max(p.value))
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let scale = Scale::linear(max / div);
    let colours: Vec<(String, String)> = series
        .iter()
        .map(|s| (s.label.clone(), series_colour(keys, s)))
        .collect();
    let published = series.iter().any(|s| s.metric == Metric::Published);
    let mut subtitle = vec![if published {
        "bars: the published figure (paler) and the measured one".to_string()
    } else {
        "bars: the median of the runs".to_string()
    }];
    if series
        .iter()
        .flat_map(|s| s.points.iter().flatten())
        .any(|p| p.high > p.low)
    {
        subtitle.push("whiskers: min-max of the runs".into());
    }
    let frame = Frame {
        title: "Throughput".into(),
        subtitle,
        legend: colours.clone(),
        ticks_w: ticks_width(&scale),
    };

    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let layout = Grouped::new(&frame, &v.categories, &counts, (10.0, 36.0));
    let bar_w = layout.slot;
    // Figures over the bars where every one fits its bar, or none: a chart
    // with some bars labelled and others not reads as if those were missing.
    let figures_fit = series
        .iter()
        .flat_map(|s| s.points.iter().flatten())
        .all(|p| text_width(&sig(p.value / div, 3), 10.0) <= bar_w);
    let (mut c, _, bottom) = layout.start(&frame, &scale, unit);
    let y_of = |bps: f64| bottom - scale.frac(bps / div) * PLOT_H;
    for (k, x0) in layout.groups() {
        let g = &groups[k];
        for (j, &i) in g.iter().enumerate() {
            let s = series[i];
            let p = s.points[k].as_ref().expect("grouped by their points");
            let bx = x0 + j as f64 * bar_w;
            let mid = bx + bar_w / 2.0;
            let (y_v, y_lo, y_hi) = (y_of(p.value), y_of(p.low), y_of(p.high));
            let tip = format!(
                "{}, {}: {} {unit}{}",
                s.label,
                v.categories[k],
                sig(p.value / div, 3),
                if p.high > p.low {
                    format!(", min-max {}-{}", sig(p.low / div, 3), sig(p.high / div, 3))
                } else {
                    String::new()
                }
            );
            let _ = write!(
                c.body,
                r#"<g><title>{}</title><rect x="{:.1}" y="{y_v:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                esc(&tip),
                bx + 1.0,
                (bar_w - 2.0).max(1.0),
                (bottom - y_v).max(0.0),
                colours[i].1
            );
            if p.high > p.low {
                let cap = (bar_w * 0.25).max(2.0);
                let _ = write!(
                    c.body,
                    r##"<path d="M{mid:.1} {y_lo:.1}V{y_hi:.1}M{:.1} {y_lo:.1}H{:.1}M{:.1} {y_hi:.1}H{:.1}" stroke="#222222" stroke-width="1.2" fill="none"/>"##,
                    mid - cap,
                    mid + cap,
                    mid - cap,
                    mid + cap
                );
            }
            c.raw("</g>");
            let figure = sig(p.value / div, 3);
            if figures_fit {
                c.text(
                    mid,
                    y_hi.min(y_v) - 4.0,
                    10.0,
                    Anchor::Middle,
                    "#333333",
                    false,
                    &figure,
                );
            }
        }
    }
    Some(layout.finish(
        c,
        &v.categories,
        bottom,
        ChartKind::Throughput,
        &format!("{}: throughput", v.title),
        colours,
    ))
}

// ---- latency: box plots, idle and under load ----

fn latency(v: &View, keys: &[String]) -> Option<Chart> {
    let loaded: Vec<&Series> = v
        .series
        .iter()
        .filter(|s| s.metric == Metric::LoadedRtt)
        .filter(|s| s.points.iter().flatten().any(|p| p.spread.is_some()))
        .collect();
    if loaded.is_empty() {
        return None;
    }
    let idle_of = |s: &Series| {
        v.series
            .iter()
            .find(|x| x.metric == Metric::IdleRtt && x.label == s.label)
    };
    // Per category, the boxes: (series, its colour, the spread).
    let mut legend: Vec<(String, String)> = Vec::new();
    let mut groups: Vec<Vec<(String, String, Spread)>> = vec![Vec::new(); v.categories.len()];
    for s in &loaded {
        let solid = series_colour(keys, s);
        let idle = idle_of(s);
        if let Some(i) = idle.filter(|i| i.points.iter().flatten().any(|p| p.spread.is_some())) {
            legend.push((format!("{} idle", s.label), series_colour(keys, i)));
        }
        legend.push((format!("{} under load", s.label), solid.clone()));
        for (k, g) in groups.iter_mut().enumerate() {
            let Some(l) = s.points.get(k).and_then(|p| p.as_ref()?.spread.clone()) else {
                continue;
            };
            if let Some((i, sp)) =
                idle.and_then(|i| Some((i, i.points.get(k)?.as_ref()?.spread.clone()?)))
            {
                g.push((format!("{} idle", s.label), series_colour(keys, i), sp));
            }
            g.push((format!("{} under load", s.label), solid.clone(), l));
        }
    }
    let values: Vec<f64> = groups
        .iter()
        .flatten()
        .flat_map(|(_, _, s)| [s.min, s.max])
        .filter(|x| x.is_finite())
        .collect();
    let scale = Scale::for_values(&values, 30.0);
    let mut subtitle = vec![
        "box: median to p90; whiskers: min-max; tick: p99".to_string(),
        "paler: the path idle (probes alone)".to_string(),
    ];
    if scale.is_log() {
        subtitle.push("log scale".into());
    }
    let frame = Frame {
        title: "Round trips, idle and under each cell's load".into(),
        subtitle,
        legend: legend.clone(),
        ticks_w: ticks_width(&scale),
    };
    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let layout = Grouped::new(&frame, &v.categories, &counts, (12.0, 28.0));
    let box_w = layout.slot;
    let (mut c, _, bottom) = layout.start(&frame, &scale, "ms");
    let y_of = |ms: f64| bottom - scale.frac(ms) * PLOT_H;
    for (k, x0) in layout.groups() {
        let g = &groups[k];
        for (j, (label, colour, s)) in g.iter().enumerate() {
            let bx = x0 + j as f64 * box_w + 1.5;
            let w = box_w - 3.0;
            let mid = bx + w / 2.0;
            let tip = format!(
                "{label}, {}: min {}, median {}, p90 {}, p99 {}, max {} ms",
                v.categories[k],
                super::views::ms(s.min),
                super::views::ms(s.median),
                super::views::ms(s.p90),
                super::views::ms(s.p99),
                super::views::ms(s.max)
            );
            let (y_min, y_med, y_90, y_99, y_max) = (
                y_of(s.min),
                y_of(s.median),
                y_of(s.p90),
                y_of(s.p99),
                y_of(s.max),
            );
            let _ = writeln!(
                c.body,
                r##"<g><title>{}</title><path d="M{mid:.1} {y_min:.1}V{y_max:.1}" stroke="#444444" stroke-width="1"/><rect x="{bx:.1}" y="{y_90:.1}" width="{w:.1}" height="{:.1}" fill="{colour}" stroke="#333333" stroke-width="0.8"/><path d="M{bx:.1} {y_med:.1}H{:.1}" stroke="#111111" stroke-width="2"/><path d="M{:.1} {y_99:.1}H{:.1}" stroke="#111111" stroke-width="1.2"/></g>"##,
                esc(&tip),
                (y_med - y_90).max(1.0),
                bx + w,
                mid - w * 0.35,
                mid + w * 0.35
            );
        }
    }
    Some(layout.finish(
        c,
        &v.categories,
        bottom,
        ChartKind::Latency,
        &format!("{}: latency", v.title),
        legend,
    ))
}

// ---- over time: rate per interval and round trips under that load ----

fn over_time(v: &View, keys: &[String]) -> Option<Chart> {
    let lines: Vec<_> = v.timelines.iter().filter(|t| !t.is_empty()).collect();
    let first = lines.first()?;
    let category = v
        .categories
        .get(first.category)
        .cloned()
        .unwrap_or_default();
    let colours: Vec<(String, String)> = lines
        .iter()
        .map(|t| (t.label.clone(), path_colour(keys, &t.label)))
        .collect();
    let t_max = lines
        .iter()
        .flat_map(|t| t.rate_bps.iter().chain(&t.rtt_ms).map(|p| p.0))
        .fold(0.0, f64::max);
    let rate_max = lines
        .iter()
        .flat_map(|t| &t.rate_bps)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let rtt_max = lines
        .iter()
        .flat_map(|t| &t.rtt_ms)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let has_rate = lines.iter().any(|t| !t.rate_bps.is_empty());
    let has_rtt = lines.iter().any(|t| !t.rtt_ms.is_empty());
    let (div, unit) = rate_unit(rate_max);
    let rate_scale = Scale::linear(rate_max / div);
    let rtt_scale = Scale::linear(rtt_max);
    let (t_step, t_top) = nice_axis(t_max);
    let mut subtitle = Vec::new();
    if has_rate {
        subtitle.push("rate received per interval, the runs one after another".to_string());
    }
    if has_rtt {
        subtitle.push("round trips of the probes under that load".to_string());
    }
    let frame = Frame {
        title: format!("{category} over time"),
        subtitle,
        legend: colours.clone(),
        ticks_w: ticks_width(&rate_scale).max(ticks_width(&rtt_scale)),
    };
    let plot_w = MIN_PLOT_W;
    let left = frame.left();
    let width = frame.width(plot_w);
    let mut c = Canvas::new();
    let mut top = frame.head(&mut c, width);
    let x_of = |t: f64| left + (t / t_top).clamp(0.0, 1.0) * plot_w;
    let panel = |c: &mut Canvas,
                 scale: &Scale,
                 unit: &str,
                 div: f64,
                 pick: &dyn Fn(&super::views::Timeline) -> &Vec<(f64, f64)>,
                 top: f64| {
        let bottom = top + PANEL_H;
        y_axis(c, scale, left, left + plot_w, top, bottom, unit);
        for (t, (label, colour)) in lines.iter().zip(&colours) {
            let pts = pick(t);
            if pts.is_empty() {
                continue;
            }
            let mut d = String::new();
            for (i, (s, y)) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if i == 0 { "M" } else { "L" },
                    x_of(*s),
                    bottom - scale.frac(y / div) * PANEL_H
                );
            }
            let _ = writeln!(
                c.body,
                r#"<g><title>{}</title><path d="{d}" stroke="{colour}" stroke-width="1.6" fill="none" stroke-linejoin="round"/></g>"#,
                esc(label)
            );
        }
        bottom
    };
    // Room between the panels for the lower one's top tick label.
    const BETWEEN: f64 = 24.0;
    if has_rate {
        top = panel(&mut c, &rate_scale, unit, div, &|t| &t.rate_bps, top) + BETWEEN;
    }
    if has_rtt {
        top = panel(&mut c, &rtt_scale, "RTT ms", 1.0, &|t| &t.rtt_ms, top) + BETWEEN;
    }
    let bottom = top - BETWEEN;
    let n = (t_top / t_step).round() as usize;
    for i in 0..=n {
        let s = i as f64 * t_step;
        c.text(
            x_of(s),
            bottom + 16.0,
            11.0,
            Anchor::Middle,
            "#444444",
            false,
            &tick(s, t_step),
        );
    }
    c.text(
        left + plot_w / 2.0,
        bottom + 34.0,
        12.0,
        Anchor::Middle,
        "#222222",
        false,
        "seconds",
    );
    let height = (bottom + 44.0).ceil();
    Some(finish(
        c,
        ChartKind::OverTime,
        &format!("{}: over time", v.title),
        width,
        height,
        colours,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{fixture, views};
    use super::*;

    fn all_charts() -> Vec<(String, Chart)> {
        let mut out = Vec::new();
        for r in [fixture::main_job(), fixture::results()] {
            for v in views::views(&r) {
                for c in charts(&v) {
                    out.push((v.id.clone(), c));
                }
            }
        }
        out
    }

    #[test]
    fn every_view_gets_its_charts() {
        let r = fixture::main_job();
        let kinds: Vec<(String, Vec<ChartKind>)> = views::views(&r)
            .iter()
            .map(|v| (v.id.clone(), charts(v).iter().map(|c| c.kind).collect()))
            .collect();
        use ChartKind::*;
        assert_eq!(kinds[0], ("published".into(), vec![Throughput]));
        for (id, k) in &kinds[1..] {
            assert_eq!(k, &[Throughput, Latency, OverTime], "{id}");
        }
    }

    #[test]
    fn no_two_series_of_a_chart_share_a_colour() {
        for (id, c) in all_charts() {
            let mut seen: Vec<&str> = Vec::new();
            for (label, colour) in &c.colours {
                assert!(
                    !seen.contains(&colour.as_str()),
                    "{id} {:?}: {label} repeats {colour}",
                    c.kind
                );
                assert!(
                    c.svg.contains(&format!("fill=\"{colour}\"")),
                    "{id}: {colour} not drawn"
                );
                seen.push(colour);
            }
        }
        // The main job's published view: six series, published and measured.
        let r = fixture::main_job();
        let v = &views::views(&r)[0];
        let c = &charts(v)[0];
        assert!(c.colours.len() >= 6, "{:?}", c.colours);
        // And far more series than the palette holds.
        let many: Vec<String> = (0..60).map(colour).collect();
        let pales: Vec<String> = many.iter().map(|c| pale(c)).collect();
        for (i, a) in many.iter().chain(&pales).enumerate() {
            for b in many.iter().chain(&pales).skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_path_keeps_its_colour_across_a_views_charts() {
        let r = fixture::main_job();
        let v = views::views(&r)
            .into_iter()
            .find(|v| v.id == "tunnels-fast")
            .unwrap();
        let cs = charts(&v);
        let of = |c: &Chart, label: &str| {
            c.colours
                .iter()
                .find(|(l, _)| l == label)
                .unwrap()
                .1
                .clone()
        };
        let wg = of(&cs[0], "fast/wireguard");
        assert_eq!(of(&cs[1], "fast/wireguard under load"), wg);
        assert_eq!(of(&cs[2], "fast/wireguard"), wg);
        assert_eq!(of(&cs[1], "fast/wireguard idle"), pale(&wg));
    }

    /// Every label inside the chart; no two straight labels overlap.
    fn labels_fit(id: &str, c: &Chart) {
        for l in &c.labels {
            assert!(
                l.x0 >= 0.0 && l.y0 >= 0.0 && l.x1 <= c.width && l.y1 <= c.height,
                "{id} {:?}: {:?} outside {}x{}",
                c.kind,
                l,
                c.width,
                c.height
            );
        }
        let straight: Vec<&TextBox> = c.labels.iter().filter(|l| !l.rotated).collect();
        for (i, a) in straight.iter().enumerate() {
            for b in &straight[i + 1..] {
                assert!(!a.overlaps(b), "{id} {:?}: {a:?} overlaps {b:?}", c.kind);
            }
        }
    }

    #[test]
    fn labels_fit_inside_and_apart() {
        for (id, c) in all_charts() {
            labels_fit(&id, &c);
        }
        // The widest names a topology might give, and many of them.
        let mut r = fixture::main_job();
        for p in &mut r.paths {
            p.path = format!("{}-with-a-rather-long-name", p.path);
        }
        for v in views::views(&r) {
            for c in charts(&v) {
                labels_fit(&v.id, &c);
            }
        }
    }

    #[test]
    fn the_checker_sees_overlap() {
        let a = TextBox {
            x0: 0.0,
            y0: 0.0,
            x1: 10.0,
            y1: 10.0,
            text: "a".into(),
            rotated: false,
        };
        let b = TextBox {
            x0: 9.0,
            y0: 5.0,
            x1: 20.0,
            y1: 12.0,
            ..a.clone()
        };
        let c = TextBox {
            x0: 10.0,
            ..b.clone()
        };
        assert!(a.overlaps(&b) && !a.overlaps(&c));
        // A turned label's box is where the text goes: down and left of its
        // anchor for an end-anchored label turned 40 degrees.
        let mut cv = Canvas::new();
        cv.text_at(
            100.0,
            50.0,
            12.0,
            Anchor::End,
            "#000",
            false,
            "IPv4 TCP Sender",
            40.0,
        );
        let l = &cv.labels[0];
        let w = text_width("IPv4 TCP Sender", 12.0);
        assert!(
            (l.x0 - (100.0 - w * 40f64.to_radians().cos())).abs() < 10.0,
            "{l:?}"
        );
        assert!(l.y1 > 50.0 + w * 40f64.to_radians().sin() - 1.0, "{l:?}");
    }

    #[test]
    fn latency_is_drawn_on_a_log_scale_when_idle_and_loaded_lie_apart() {
        let r = fixture::main_job();
        let v = views::views(&r)
            .into_iter()
            .find(|v| v.id == "tunnels-fast")
            .unwrap();
        let c = charts(&v)
            .into_iter()
            .find(|c| c.kind == ChartKind::Latency)
            .unwrap();
        assert!(c.svg.contains("log scale"), "idle 0.08 ms, loaded 12-40 ms");
        // Idle and loaded box per path and cell: 4 paths x 8 cells, less the
        // tunnels' missing UDP cells (3 x 4), twice.
        assert_eq!(c.svg.matches("<g><title>").count(), (32 - 12) * 2);
        assert!(c.svg.contains("fast/ikev2 under load, IPv4 TCP Sender: min 17.6, median 22.0, p90 28.6, p99 39.6, max 55.0 ms"));
    }

    #[test]
    fn over_time_draws_a_line_per_path_and_panel() {
        let r = fixture::main_job();
        let v = views::views(&r)
            .into_iter()
            .find(|v| v.id == "tunnels-fast")
            .unwrap();
        let c = charts(&v)
            .into_iter()
            .find(|c| c.kind == ChartKind::OverTime)
            .unwrap();
        assert!(c.svg.contains(">IPv4 TCP Sender over time</text>"));
        assert_eq!(c.svg.matches("<g><title>").count(), 4 * 2);
        assert!(c.svg.contains(">RTT ms</text>") && c.svg.contains(">Mbit/s</text>"));
        assert!(c.svg.contains(">30</text>"), "three runs of ten seconds");
    }

    #[test]
    fn scales() {
        let s = Scale::for_values(&[0.06, 40.0], 30.0);
        assert!(s.is_log());
        assert_eq!(
            s.ticks().iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["0.01", "0.1", "1", "10", "100"]
        );
        assert!(!Scale::for_values(&[5.0, 40.0], 30.0).is_log());
        assert_eq!(
            two_lines("IPv6 TCP Receiver x6"),
            ("IPv6 TCP".into(), "Receiver x6".into())
        );
        assert_eq!(pale("#000000"), "#8C8C8C");
    }
}
