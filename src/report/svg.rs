//! `--format svg`: a grouped bar chart for a blog post: one group per cell
//! (in the NVR500 study's order), one bar per path, bar height = the median,
//! whiskers from min to max, the y axis in the unit that suits the figures.
//! Drawn with the charts' own SVG ([`super::draw`]), as a file of its own.

use super::draw::axis::{Area, Scale};
use super::draw::colour::colour;
use super::draw::frame::Frame;
use super::draw::grouped::{Grouped, Slots};
use super::draw::marks::{Bar, bar, figures_fit};
use super::draw::{Anchor, Canvas, Drawing, MIN_PLOT_W, Text};
use super::{ordered_cells, rate_unit, sig, utc};
use crate::measure::results::{CellResult, PathResult, Results};
use crate::vocab::Cell;
use crate::vocab::count::counted;

const PLOT_H: f64 = 320.0;
/// Slots at least 24 px wide, room for a bar's figure ("27.6"); groups
/// spread over the plot's least width, as in a figure of its own.
const SLOTS: Slots = Slots {
    least: 24.0,
    most: 36.0,
    fill: true,
};

pub(crate) fn render(r: &Results) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}",
        drawing(r).svg
    )
}

/// The chart as an `<svg>` element.
fn drawing(r: &Results) -> Drawing {
    let cells = ordered_cells(r);
    let figures: Vec<f64> = r
        .paths
        .iter()
        .flat_map(|p| &p.cells)
        .filter(|c| c.error.is_none())
        .flat_map(|c| [c.median_bps, c.max_bps])
        .filter(|v| v.is_finite())
        .collect();
    let max = figures.iter().copied().fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let scale = Scale::linear(max / div);
    let title = format!(
        "Throughput in lab {}: median of {} per cell",
        r.lab,
        runs(r.runs_per_cell)
    );
    let legend = r
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| (p.label(), colour(i)))
        .collect();
    let mut frame = Frame::new(title, subtitle(r), legend, scale.labels_width());
    frame.title_size = 18.0;
    if cells.is_empty() || figures.is_empty() {
        nothing_to_plot(&frame)
    } else {
        bars(r, &cells, &frame, &scale, (div, unit))
    }
}

/// The chart: a group of bars per cell, a slot per path.
fn bars(r: &Results, cells: &[Cell], frame: &Frame, scale: &Scale, unit: (f64, &str)) -> Drawing {
    let categories: Vec<String> = cells.iter().map(Cell::title).collect();
    let counts = vec![r.paths.len(); cells.len()];
    let layout = Grouped::new(frame, &categories, &counts, SLOTS, PLOT_H);
    let (mut c, area) = layout.start(frame, scale, unit.1);
    let figures: Vec<String> = r
        .paths
        .iter()
        .flat_map(|p| &p.cells)
        .filter(|c| c.error.is_none())
        .map(|c| sig(c.median_bps / unit.0, 3))
        .collect();
    let plot = Plot {
        area,
        scale,
        div: unit.0,
        unit: unit.1,
        figures: figures_fit(figures.iter().map(String::as_str), layout.slot),
    };
    for (k, x0) in layout.groups() {
        for (i, p) in r.paths.iter().enumerate() {
            let x = x0 + i as f64 * layout.slot;
            slot(&mut c, &plot, (x, layout.slot), p, &cells[k], i);
        }
    }
    let height = layout.label(&mut c, &categories, area.bottom);
    c.finish("", layout.width, height, &frame.title)
}

/// The plot: its area, its y axis (bit/s divided by `div` are `unit`),
/// whether its bars carry their figures.
#[derive(Clone, Copy)]
struct Plot<'a> {
    area: Area,
    scale: &'a Scale,
    div: f64,
    unit: &'a str,
    figures: bool,
}

/// Path `p` (the `i`th) in cell `cell`, in the slot from `x`, `w` wide: its
/// bar, or a note that it has none or that it failed.
fn slot(c: &mut Canvas, plot: &Plot, (x, w): (f64, f64), p: &PathResult, cell: &Cell, i: usize) {
    let Plot {
        area,
        scale,
        div,
        unit,
        figures,
    } = *plot;
    let mid = x + w / 2.0;
    let note = |t| Text::new(t, mid + 3.5, area.bottom - 4.0, 10.0).turned(90.0);
    let Some(cr) = p.cell(cell) else {
        c.text(note("n/a").fill("#888888"));
        return;
    };
    if let Some(e) = &cr.error {
        let tip = format!(
            "{}, {}: failed: {}",
            p.label(),
            cell.title(),
            super::one_line(e)
        );
        c.text(note("failed").fill("#b00020").tip(&tip));
        return;
    }
    let y_of = |bps: f64| area.bottom - scale.frac(bps / div) * area.height();
    let tip = tip(p, cell, cr, div, unit);
    let figure = sig(cr.median_bps / div, 3);
    let fill = colour(i);
    let b = Bar {
        x,
        w,
        y: y_of(cr.median_bps),
        lo: y_of(cr.min_bps),
        hi: y_of(cr.max_bps),
        whisker: true,
        fill: &fill,
        tip: &tip,
        figure: figures.then_some(figure.as_str()),
    };
    bar(c, area.bottom, b);
}

/// "wg, IPv4 TCP Sender: median 444 Mbit/s, best 446 Mbit/s, min-max 440-446 Mbit/s".
fn tip(p: &PathResult, cell: &Cell, cr: &CellResult, div: f64, unit: &str) -> String {
    let shown = |bps: f64| format!("{} {unit}", sig(bps / div, 3));
    format!(
        "{}, {}: median {}, best {}, min-max {}-{}",
        p.label(),
        cell.title(),
        shown(cr.median_bps),
        shown(cr.best_bps),
        sig(cr.min_bps / div, 3),
        shown(cr.max_bps)
    )
}

/// The head, and a line saying there is nothing to plot.
fn nothing_to_plot(frame: &Frame) -> Drawing {
    let width = frame.width(MIN_PLOT_W);
    let mut c = Canvas::new();
    let top = frame.head(&mut c, width);
    c.text(
        Text::new(
            "no results to plot",
            frame.left() + MIN_PLOT_W / 2.0,
            top + PLOT_H / 2.0,
            14.0,
        )
        .anchor(Anchor::Middle)
        .fill("#555555"),
    );
    c.finish("", width, (top + PLOT_H + 54.0).ceil(), &frame.title)
}

fn runs(n: u32) -> String {
    counted(n, "run")
}

/// What the chart shows, in pieces that the frame joins into lines.
fn subtitle(r: &Results) -> Vec<String> {
    let mut t = vec!["whiskers: min-max".to_string()];
    let threshold = r
        .paths
        .iter()
        .flat_map(|p| &p.cells)
        .find_map(|c| c.search.as_ref())
        .map(|s| s.loss_threshold_percent);
    if let Some(th) = threshold {
        t.push(format!(
            "UDP: received at the highest rate with loss within {th} %"
        ));
    }
    if let Some(topo) = &r.topology {
        t.push(topo.clone());
    }
    if r.started == 0 {
        t.push(r.tool.clone());
    } else {
        t.push(format!("{}, {}", r.tool, utc(r.started)));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::super::draw::checks::{misplaced, well_formed};
    use super::super::{Format, fixture, render};
    use super::*;

    #[test]
    fn chart_is_well_formed_and_complete() {
        let svg = render(&fixture::results(), Format::Svg, None);
        let tags = well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert_eq!(tags[0], "svg");
        assert!(svg.contains("Throughput in lab home: median of 3 runs per cell"));
        assert!(svg.contains("whiskers: min-max"));
        // One bar per measured (path, cell); the legend's two swatches are rects too.
        let bars = svg.matches("<g><title>").count();
        assert_eq!(bars, 6 + 4);
        assert!(svg.contains(">failed<") || svg.contains("</title>failed</text>"));
        assert!(svg.contains(">n/a</text>"));
        for colour in [colour(0), colour(1)] {
            assert!(svg.contains(&colour), "{colour}");
        }
        // Mbit/s axis, gridlines to 1000.
        assert!(svg.contains(">Mbit/s</text>"));
        assert!(svg.contains(">1000</text>"));
        // The first cell's title under its group, on one line or two.
        assert!(svg.contains(">IPv4 TCP</text>") || svg.contains(">IPv4 TCP Sender</text>"));
        // Layout stays inside the canvas.
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn hostile_labels_are_escaped() {
        let mut r = fixture::results();
        r.lab = "a<b>&\"c\"".into();
        r.paths[1].path = "w&g".into();
        r.paths[1].cells[4].error = Some("<oops> & \"x\"\u{1}".into());
        let svg = render(&r, Format::Svg, None);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
    }

    #[test]
    fn many_cells_rotate_labels_and_gbits_change_the_unit() {
        let mut r = fixture::results();
        for p in &mut r.paths {
            for c in &mut p.cells {
                for v in [
                    &mut c.best_bps,
                    &mut c.median_bps,
                    &mut c.min_bps,
                    &mut c.max_bps,
                ] {
                    *v *= 14.0;
                }
            }
        }
        // Eight paths: narrow groups.
        let wg = r.paths[1].clone();
        for i in 0..6 {
            let mut p = wg.clone();
            p.path = format!("tunnel{i}");
            r.paths.push(p);
        }
        let svg = render(&r, Format::Svg, None);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains(">Gbit/s</text>"), "{svg}");
        assert!(
            !svg.contains("rotate(-40)"),
            "wide groups keep labels level"
        );
    }

    /// One path, all sixteen cells of streams {1, 6}.
    fn full_matrix() -> Results {
        use crate::measure::results::CellResult;
        use crate::vocab::{Direction, Family, Proto};
        let mut r = fixture::results();
        r.paths.truncate(1);
        let template = r.paths[0].cells[5].clone();
        r.paths[0].cells.clear();
        for streams in [1, 6] {
            for family in [Family::Ipv4, Family::Ipv6] {
                for protocol in [Proto::Tcp, Proto::Udp] {
                    for direction in [Direction::Sender, Direction::Receiver] {
                        r.paths[0].cells.push(CellResult {
                            cell: Cell {
                                family,
                                protocol,
                                direction,
                                streams,
                            },
                            ..template.clone()
                        });
                    }
                }
            }
        }
        for (i, c) in r.paths[0].cells.iter_mut().enumerate() {
            let k = 1.0 - 0.05 * i as f64;
            for v in [
                &mut c.best_bps,
                &mut c.median_bps,
                &mut c.min_bps,
                &mut c.max_bps,
            ] {
                *v *= k;
            }
        }
        r
    }

    #[test]
    fn a_full_matrix_rotates_its_labels() {
        let svg = render(&full_matrix(), Format::Svg, None);
        well_formed(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(svg.contains("rotate(-40)"));
        assert_eq!(svg.matches("<g><title>").count(), 16);
    }

    /// The main job's eleven paths: every legend swatch differs.
    #[test]
    fn every_path_of_the_main_job_has_its_own_colour() {
        let svg = render(&fixture::main_job(), Format::Svg, None);
        let swatches: Vec<&str> = svg
            .split(r#"width="12" height="12" fill=""#)
            .skip(1)
            .map(|s| &s[..7])
            .collect();
        assert_eq!(swatches.len(), 11);
        for (i, a) in swatches.iter().enumerate() {
            assert!(!swatches[i + 1..].contains(a), "{a} twice: {swatches:?}");
        }
    }

    #[test]
    fn labels_fit_inside_and_apart() {
        let mut long = fixture::main_job();
        for p in &mut long.paths {
            p.path = format!("{}-with-a-rather-long-name", p.path);
        }
        for (name, r) in [
            ("paths", fixture::results()),
            ("matrix", full_matrix()),
            ("main job", fixture::main_job()),
            ("long names", long),
        ] {
            let d = drawing(&r);
            let faults = misplaced(&d.labels, d.width, d.height);
            assert!(faults.is_empty(), "{name}: {faults:#?}");
        }
    }

    #[test]
    fn empty_results_still_draw() {
        let mut r = fixture::results();
        r.paths.clear();
        let svg = render(&r, Format::Svg, None);
        well_formed(&svg).unwrap();
        assert!(svg.contains("no results to plot"));
    }

    /// Writes two charts for a look: `REPORT_SVG_OUT=PREFIX cargo test
    /// --lib report::svg -- --ignored` writes PREFIX-paths.svg and
    /// PREFIX-matrix.svg; render them with `rsvg-convert x.svg -o x.png`.
    #[test]
    #[ignore]
    fn write_charts_for_a_look() {
        let out = std::env::var("REPORT_SVG_OUT").unwrap_or("/tmp/tunbench-chart".into());
        let paths = render(&fixture::results(), Format::Svg, None);
        std::fs::write(format!("{out}-paths.svg"), paths).unwrap();
        let matrix = render(&full_matrix(), Format::Svg, None);
        std::fs::write(format!("{out}-matrix.svg"), matrix).unwrap();
    }
}
