//! Latency: box plots of the round trips, idle (paler) and under each
//! cell's load, per path; a log scale where idle and loaded lie decades
//! apart.

use super::super::draw::axis::Scale;
use super::super::draw::frame::Frame;
use super::super::draw::grouped::{Grouped, Slots};
use super::super::draw::marks::{BoxYs, boxplot};
use super::super::views::{Metric, Series, View, ms};
use super::{Chart, ChartKind, finish, series_colour};
use crate::measure::results::Spread;

const PLOT_H: f64 = 260.0;

/// A box to draw: its legend label, its colour, the round trips' spread.
type Boxed = (String, String, Spread);
/// Each legend entry and its colour.
type Legend = Vec<(String, String)>;

pub(super) fn chart(v: &View, keys: &[String]) -> Option<Chart> {
    let (legend, groups) = boxes(v, keys)?;
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
    let frame = Frame::new(
        "Round trips, idle and under each cell's load".into(),
        subtitle,
        legend.clone(),
        scale.labels_width(),
    );
    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let layout = Grouped::new(
        &frame,
        &v.categories,
        &counts,
        Slots {
            least: 12.0,
            most: 28.0,
            fill: false,
        },
        PLOT_H,
    );
    let (mut c, area) = layout.start(&frame, &scale, "ms");
    let bottom = area.bottom;
    let y_of = |ms: f64| bottom - scale.frac(ms) * PLOT_H;
    for (k, x0) in layout.groups() {
        for (j, (label, colour, s)) in groups[k].iter().enumerate() {
            let tip = format!(
                "{label}, {}: min {}, median {}, p90 {}, p99 {}, max {} ms",
                v.categories[k],
                ms(s.min),
                ms(s.median),
                ms(s.p90),
                ms(s.p99),
                ms(s.max)
            );
            let ys = BoxYs {
                min: y_of(s.min),
                median: y_of(s.median),
                p90: y_of(s.p90),
                p99: y_of(s.p99),
                max: y_of(s.max),
            };
            let x = x0 + j as f64 * layout.slot;
            boxplot(&mut c, x, layout.slot, ys, colour, &tip);
        }
    }
    let height = layout.label(&mut c, &v.categories, bottom);
    Some(finish(
        c,
        ChartKind::Latency,
        &format!("{}: latency", v.title),
        (layout.width, height),
        legend,
    ))
}

/// The legend, and per category the boxes to draw there: each path's idle
/// round trips (where measured) and those under the cell's load. None where
/// no series has round trips under load.
fn boxes(v: &View, keys: &[String]) -> Option<(Legend, Vec<Vec<Boxed>>)> {
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
    let mut legend: Legend = Vec::new();
    let mut groups: Vec<Vec<Boxed>> = vec![Vec::new(); v.categories.len()];
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
    Some((legend, groups))
}
