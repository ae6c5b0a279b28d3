//! Throughput: grouped bars, a group per category, a bar per series with a
//! point there, whiskers from the runs' min to max.

use super::super::draw::axis::Scale;
use super::super::draw::frame::Frame;
use super::super::draw::grouped::{Grouped, Slots};
use super::super::draw::marks::{Bar, bar, figures_fit};
use super::super::views::{Metric, Point, Series, View};
use super::super::{rate_unit, sig};
use super::{Chart, ChartKind, finish, series_colour};

const PLOT_H: f64 = 260.0;

pub(super) fn chart(v: &View, keys: &[String]) -> Option<Chart> {
    let series: Vec<&Series> = v
        .series
        .iter()
        .filter(|s| matches!(s.metric, Metric::Rate | Metric::Published))
        .filter(|s| s.points.iter().any(Option::is_some))
        .collect();
    if series.is_empty() {
        return None;
    }
    let groups = groups(v.categories.len(), &series);
    let points = || series.iter().flat_map(|s| s.points.iter().flatten());
    let max = points()
        .map(|p| p.high.max(p.value))
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let scale = Scale::linear(max / div);
    let colours: Vec<(String, String)> = series
        .iter()
        .map(|s| (s.label.clone(), series_colour(keys, s)))
        .collect();
    let frame = Frame::new(
        "Throughput".into(),
        subtitle(&series),
        colours.clone(),
        scale.labels_width(),
    );

    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let layout = Grouped::new(
        &frame,
        &v.categories,
        &counts,
        Slots {
            least: 10.0,
            most: 36.0,
            fill: false,
        },
        PLOT_H,
    );
    let figures: Vec<String> = points().map(|p| sig(p.value / div, 3)).collect();
    let figures_fit = figures_fit(figures.iter().map(String::as_str), layout.slot);
    let (mut c, area) = layout.start(&frame, &scale, unit);
    let bottom = area.bottom;
    let y_of = |bps: f64| bottom - scale.frac(bps / div) * PLOT_H;
    for (k, x0) in layout.groups() {
        for (j, &i) in groups[k].iter().enumerate() {
            let s = series[i];
            let p = s.points[k].as_ref().expect("grouped by their points");
            let tip = tip(s, p, &v.categories[k], div, unit);
            let figure = sig(p.value / div, 3);
            let b = Bar {
                x: x0 + j as f64 * layout.slot,
                w: layout.slot,
                y: y_of(p.value),
                lo: y_of(p.low),
                hi: y_of(p.high),
                whisker: p.high > p.low,
                fill: &colours[i].1,
                tip: &tip,
                figure: figures_fit.then_some(figure.as_str()),
            };
            bar(&mut c, bottom, b);
        }
    }
    let height = layout.label(&mut c, &v.categories, bottom);
    Some(finish(
        c,
        ChartKind::Throughput,
        &format!("{}: throughput", v.title),
        (layout.width, height),
        colours,
    ))
}

/// Per category, the series with a point there, in order.
fn groups(categories: usize, series: &[&Series]) -> Vec<Vec<usize>> {
    (0..categories)
        .map(|k| {
            (0..series.len())
                .filter(|&i| series[i].points.get(k).is_some_and(Option::is_some))
                .collect()
        })
        .collect()
}

fn subtitle(series: &[&Series]) -> Vec<String> {
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
    subtitle
}

/// "fast/raw, IPv4 TCP Sender: 804 Mbit/s, min-max 803-808".
fn tip(s: &Series, p: &Point, category: &str, div: f64, unit: &str) -> String {
    format!(
        "{}, {category}: {} {unit}{}",
        s.label,
        sig(p.value / div, 3),
        if p.high > p.low {
            format!(", min-max {}-{}", sig(p.low / div, 3), sig(p.high / div, 3))
        } else {
            String::new()
        }
    )
}
