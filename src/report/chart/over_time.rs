//! Over time: one category's runs one after another, the rate per interval
//! above and the round trips the probes saw under that load below, as
//! flent's and crusader's plots show a test.

use super::super::draw::axis::{Area, Scale, x_axis, y_axis};
use super::super::draw::frame::Frame;
use super::super::draw::{Canvas, MIN_PLOT_W, esc};
use super::super::rate_unit;
use super::super::views::{Timeline, View};
use super::{Chart, ChartKind, finish, path_colour};
use std::fmt::Write;

const PANEL_H: f64 = 170.0;
/// Room between the panels for the lower one's top tick label.
const BETWEEN: f64 = 24.0;

/// One panel: a y axis and a line per timeline.
struct Panel<'a> {
    scale: Scale,
    unit: &'a str,
    /// What the figures are divided by for the scale.
    div: f64,
    pick: fn(&Timeline) -> &Vec<(f64, f64)>,
}

pub(super) fn chart(v: &View, keys: &[String]) -> Option<Chart> {
    let lines: Vec<&Timeline> = v.timelines.iter().filter(|t| !t.is_empty()).collect();
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
    let most = |pick: fn(&Timeline) -> &Vec<(f64, f64)>| {
        lines
            .iter()
            .flat_map(|t| pick(t))
            .map(|p| p.1)
            .fold(0.0, f64::max)
    };
    let t_max = lines
        .iter()
        .flat_map(|t| t.rate_bps.iter().chain(&t.rtt_ms).map(|p| p.0))
        .fold(0.0, f64::max);
    let rate_max = most(|t| &t.rate_bps);
    let (div, unit) = rate_unit(rate_max);
    let rate = Panel {
        scale: Scale::linear(rate_max / div),
        unit,
        div,
        pick: |t| &t.rate_bps,
    };
    let rtt = Panel {
        scale: Scale::linear(most(|t| &t.rtt_ms)),
        unit: "RTT ms",
        div: 1.0,
        pick: |t| &t.rtt_ms,
    };
    let has = |p: &Panel| lines.iter().any(|t| !(p.pick)(t).is_empty());
    let mut subtitle = Vec::new();
    if has(&rate) {
        subtitle.push("rate received per interval, the runs one after another".to_string());
    }
    if has(&rtt) {
        subtitle.push("round trips of the probes under that load".to_string());
    }
    let frame = Frame::new(
        format!("{category} over time"),
        subtitle,
        colours.clone(),
        rate.scale.labels_width().max(rtt.scale.labels_width()),
    );
    let left = frame.left();
    let width = frame.width(MIN_PLOT_W);
    let mut c = Canvas::new();
    let mut area = Area {
        left,
        right: left + MIN_PLOT_W,
        top: frame.head(&mut c, width),
        bottom: 0.0,
    };
    let time = Scale::linear(t_max);
    for p in [rate, rtt].iter().filter(|p| has(p)) {
        area.bottom = area.top + PANEL_H;
        panel(&mut c, p, area, &time, &lines, &colours);
        area.top = area.bottom + BETWEEN;
    }
    x_axis(&mut c, &time, area, "seconds");
    Some(finish(
        c,
        ChartKind::OverTime,
        &format!("{}: over time", v.title),
        (width, (area.bottom + 44.0).ceil()),
        colours,
    ))
}

/// The panel's y axis over `a` and a line per timeline, x by `time`.
fn panel(
    c: &mut Canvas,
    p: &Panel,
    a: Area,
    time: &Scale,
    lines: &[&Timeline],
    colours: &[(String, String)],
) {
    y_axis(c, &p.scale, a, p.unit);
    for (t, (label, colour)) in lines.iter().zip(colours) {
        let pts = (p.pick)(t);
        if pts.is_empty() {
            continue;
        }
        let mut d = String::new();
        for (i, (s, y)) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1} {:.1}",
                if i == 0 { "M" } else { "L" },
                a.left + time.frac(*s) * (a.right - a.left),
                a.bottom - p.scale.frac(y / p.div) * a.height()
            );
        }
        let _ = writeln!(
            c.body,
            r#"<g><title>{}</title><path d="{d}" stroke="{colour}" stroke-width="1.6" fill="none" stroke-linejoin="round"/></g>"#,
            esc(label)
        );
    }
}
