//! A grouped bar chart for a blog post: one group per cell (in the seed's
//! order), one bar per path, bar height = the median, whiskers from min to max,
//! the y axis in the unit that suits the figures. Hand-written SVG 1.1: no
//! script, no external font or stylesheet, so it renders the same everywhere.

use super::chart::{FONT, LABEL_ANGLE, RIGHT, colour};
use super::{ordered_cells, rate_unit, sig, utc};
use crate::measure::results::Results;
use crate::vocab::Cell;
use std::fmt::Write;

/// Estimated advance of one character at 12 px, for layout without a font.
const CHAR_PX: f64 = 6.8;
const LEFT: f64 = 76.0;
const PLOT_H: f64 = 320.0;

pub(crate) fn render(r: &Results) -> String {
    let cells = ordered_cells(r);
    let n_paths = r.paths.len().max(1);

    // Horizontal: each group wide enough for its bars, the plot at least 560 px.
    let min_group = n_paths as f64 * 22.0 + 22.0;
    let plot_w = (cells.len() as f64 * min_group).max(560.0);
    let group_w = plot_w / cells.len().max(1) as f64;
    let bar_w = ((group_w - 20.0) / n_paths as f64).min(36.0);

    // The x labels: two lines under the group when they fit, rotated otherwise.
    let two_lines: Vec<(String, String)> = cells.iter().map(split_title).collect();
    let widest_line = two_lines
        .iter()
        .map(|(a, b)| a.len().max(b.len()))
        .max()
        .unwrap_or(0) as f64
        * CHAR_PX;
    let rotate = widest_line > group_w - 6.0;
    let longest = cells.iter().map(|c| c.title().len()).max().unwrap_or(0) as f64 * CHAR_PX;
    let labels_h = if rotate {
        longest * LABEL_ANGLE.to_radians().sin() + 24.0
    } else {
        44.0
    };

    // A rotated first label reaches left of its group: make room for it.
    let first = cells.first().map_or(0, |c| c.title().len()) as f64 * CHAR_PX;
    let left = if rotate {
        LEFT.max(first * LABEL_ANGLE.to_radians().cos() - group_w / 2.0 + 12.0)
    } else {
        LEFT
    };
    let width = (left + plot_w + RIGHT).ceil();
    let sub = wrap(&subtitle(r), ((width - left - RIGHT) / CHAR_PX) as usize);
    let legend_y = 48.0 + (sub.len().max(1) - 1) as f64 * 16.0 + 14.0;
    let legend = legend_rows(r, left, width);
    let top = legend_y + legend.len() as f64 * 20.0 + 12.0;
    let bottom = top + PLOT_H;
    let height = (bottom + labels_h + 10.0).ceil();

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="{FONT}" role="img">"#
    );
    let title = format!(
        "Throughput in lab {}: median of {} per cell",
        r.lab,
        runs(r.runs_per_cell)
    );
    let _ = writeln!(s, "<title>{}</title>", esc(&title));
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{left}" y="28" font-size="18" font-weight="bold" fill="#222222">{}</text>"##,
        esc(&title)
    );
    for (i, line) in sub.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{left}" y="{}" font-size="12" fill="#555555">{}</text>"##,
            48.0 + i as f64 * 16.0,
            esc(line)
        );
    }

    // The legend: a swatch and the label of each path.
    for (row, items) in legend.iter().enumerate() {
        let y = legend_y + row as f64 * 20.0;
        for &(i, x) in items {
            let _ = writeln!(
                s,
                r##"<rect x="{x}" y="{y}" width="12" height="12" fill="{}"/><text x="{}" y="{}" font-size="12" fill="#222222">{}</text>"##,
                colour(i),
                x + 17.0,
                y + 10.5,
                esc(&r.paths[i].label())
            );
        }
    }

    let figures: Vec<f64> = r
        .paths
        .iter()
        .flat_map(|p| &p.cells)
        .filter(|c| c.error.is_none())
        .flat_map(|c| [c.median_bps, c.max_bps])
        .filter(|v| v.is_finite())
        .collect();
    if cells.is_empty() || figures.is_empty() {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="14" text-anchor="middle" fill="#555555">no results to plot</text>"##,
            left + plot_w / 2.0,
            top + PLOT_H / 2.0
        );
        s.push_str("</svg>\n");
        return s;
    }
    let max = figures.iter().copied().fold(0.0, f64::max);
    let (div, unit) = rate_unit(max);
    let (step, top_value) = nice_axis(max / div);
    let y_of = |bps: f64| bottom - (bps / div / top_value).clamp(0.0, 1.0) * PLOT_H;

    // Gridlines and their labels.
    let mut v = 0.0;
    while v <= top_value + step / 2.0 {
        let y = bottom - v / top_value * PLOT_H;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="1"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end" fill="#444444">{}</text>"##,
            left + plot_w,
            if v == 0.0 { "#888888" } else { "#e3e3e3" },
            left - 8.0,
            y + 4.0,
            tick(v, step)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r##"<text transform="translate(18 {:.1}) rotate(-90)" font-size="12" text-anchor="middle" fill="#222222">{unit}</text>"##,
        top + PLOT_H / 2.0
    );

    for (g, c) in cells.iter().enumerate() {
        let x0 = left + g as f64 * group_w + (group_w - bar_w * n_paths as f64) / 2.0;
        for (i, p) in r.paths.iter().enumerate() {
            let x = x0 + i as f64 * bar_w;
            let mid = x + bar_w / 2.0;
            let fill = colour(i);
            let Some(cr) = p.cell(c) else {
                let _ = writeln!(s, "{}", vertical_note(mid, bottom, "n/a", "#888888", None));
                continue;
            };
            if let Some(e) = &cr.error {
                let tip = format!(
                    "{}, {}: failed: {}",
                    p.label(),
                    c.title(),
                    super::one_line(e)
                );
                let _ = writeln!(
                    s,
                    "{}",
                    vertical_note(mid, bottom, "failed", "#b00020", Some(&tip))
                );
                continue;
            }
            let (y_med, y_min, y_max) = (y_of(cr.median_bps), y_of(cr.min_bps), y_of(cr.max_bps));
            let shown = |bps: f64| format!("{} {unit}", sig(bps / div, 3));
            let tip = format!(
                "{}, {}: median {}, best {}, min-max {}-{}",
                p.label(),
                c.title(),
                shown(cr.median_bps),
                shown(cr.best_bps),
                sig(cr.min_bps / div, 3),
                shown(cr.max_bps)
            );
            let cap = (bar_w * 0.25).max(2.0);
            let _ = writeln!(
                s,
                r##"<g><title>{}</title><rect x="{:.1}" y="{y_med:.1}" width="{:.1}" height="{:.1}" fill="{fill}"/><path d="M{mid:.1} {y_min:.1}V{y_max:.1}M{:.1} {y_min:.1}H{:.1}M{:.1} {y_max:.1}H{:.1}" stroke="#222222" stroke-width="1.2" fill="none"/></g>"##,
                esc(&tip),
                x + 1.0,
                (bar_w - 2.0).max(1.0),
                bottom - y_med,
                mid - cap,
                mid + cap,
                mid - cap,
                mid + cap,
            );
            if bar_w >= 20.0 {
                let _ = writeln!(
                    s,
                    r##"<text x="{mid:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#333333">{}</text>"##,
                    y_max.min(y_med) - 4.0,
                    sig(cr.median_bps / div, 3)
                );
            }
        }

        let cx = left + (g as f64 + 0.5) * group_w;
        if rotate {
            let _ = writeln!(
                s,
                r##"<text transform="translate({cx:.1} {:.1}) rotate(-{LABEL_ANGLE})" font-size="12" text-anchor="end" fill="#222222">{}</text>"##,
                bottom + 16.0,
                esc(&c.title())
            );
        } else {
            let (a, b) = &two_lines[g];
            let _ = writeln!(
                s,
                r##"<text x="{cx:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#222222"><tspan x="{cx:.1}">{}</tspan><tspan x="{cx:.1}" dy="15">{}</tspan></text>"##,
                bottom + 18.0,
                esc(a),
                esc(b)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn runs(n: u32) -> String {
    format!("{n} run{}", if n == 1 { "" } else { "s" })
}

/// What the chart shows, in pieces that [`wrap`] keeps whole.
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

/// The pieces joined with "; " into lines of at most about `chars` characters.
pub(super) fn wrap(pieces: &[String], chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for p in pieces {
        match lines.last_mut() {
            Some(l) if l.len() + 2 + p.len() <= chars => {
                l.push_str("; ");
                l.push_str(p);
            }
            _ => lines.push(p.clone()),
        }
    }
    lines
}

/// "IPv4 TCP Sender" as "IPv4 TCP" over "Sender".
fn split_title(c: &Cell) -> (String, String) {
    let t = c.title();
    let mut words = t.splitn(3, ' ');
    let a = [words.next(), words.next()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    (a, words.next().unwrap_or("").to_string())
}

/// The legend laid out in rows that fit `width`: (path index, x) per item.
fn legend_rows(r: &Results, left: f64, width: f64) -> Vec<Vec<(usize, f64)>> {
    let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new()];
    let mut x = left;
    for (i, p) in r.paths.iter().enumerate() {
        let w = 17.0 + p.label().len() as f64 * CHAR_PX + 20.0;
        if x + w > width - RIGHT && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            x = left;
        }
        rows.last_mut().expect("rows is never empty").push((i, x));
        x += w;
    }
    rows
}

/// A tick step of 1, 2, 2.5 or 5 times a power of ten giving about five
/// intervals (four to eight), and the axis top: the first multiple of the step
/// at or above `max`.
pub(super) fn nice_axis(max: f64) -> (f64, f64) {
    if !(max > 0.0 && max.is_finite()) {
        return (0.2, 1.0);
    }
    let intervals = |step: f64| (max / step - 1e-9).ceil().max(1.0);
    let k = (max / 5.0).log10().floor() as i32;
    let mut best = (f64::INFINITY, 0.0);
    for p in [k - 1, k, k + 1] {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * 10f64.powi(p);
            let miss = (intervals(step) - 5.0).abs();
            // Ties go to the larger step: fewer, rounder labels.
            if miss < best.0 || (miss == best.0 && step > best.1) {
                best = (miss, step);
            }
        }
    }
    let step = best.1;
    (step, intervals(step) * step)
}

/// A tick label with the decimals its step needs: "0", "2.5", "200".
pub(super) fn tick(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        if (step * 2.0).fract() != 0.0 || step.fract() != 0.0 {
            1
        } else {
            0
        }
    } else {
        (-step.log10().floor()) as usize + 1
    };
    let s = format!("{v:.decimals$}");
    // 2.50 -> 2.5, 1.0 -> 1
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Small text standing up from the baseline where a bar would be.
fn vertical_note(x: f64, bottom: f64, text: &str, colour: &str, tip: Option<&str>) -> String {
    let tip = tip
        .map(|t| format!("<title>{}</title>", esc(t)))
        .unwrap_or_default();
    format!(
        r#"<text transform="translate({:.1} {:.1}) rotate(-90)" font-size="10" fill="{colour}">{tip}{}</text>"#,
        x + 3.5,
        bottom - 4.0,
        esc(text)
    )
}

/// Text safe in XML content and in double-quoted attributes.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 at all.
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::{Format, fixture, render};
    use super::*;

    /// A small well-formedness check: one root, every tag closed in order,
    /// attributes quoted, only the five predefined entities (and numeric ones).
    fn well_formed(xml: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = xml.strip_prefix("<?xml").ok_or("no XML declaration")?;
        rest = &rest[rest.find("?>").ok_or("unclosed declaration")? + 2..];
        let mut roots = 0;
        while let Some(lt) = rest.find('<') {
            check_text(&rest[..lt])?;
            if stack.is_empty() && !rest[..lt].trim().is_empty() {
                return Err(format!("text outside the root: {:?}", &rest[..lt]));
            }
            rest = &rest[lt + 1..];
            // A '>' inside a quoted attribute value would end the tag early; find
            // the real end by walking the quotes.
            let mut end = None;
            let mut quote = None;
            for (i, ch) in rest.char_indices() {
                match (quote, ch) {
                    (None, '"' | '\'') => quote = Some(ch),
                    (Some(q), c) if c == q => quote = None,
                    (None, '>') => {
                        end = Some(i);
                        break;
                    }
                    (None, '<') => return Err(format!("'<' inside a tag: {:.40}", rest)),
                    _ => {}
                }
            }
            let end = end.ok_or("unclosed tag")?;
            let tag = &rest[..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop().ok_or(format!("</{name}> closes nothing"))?;
                if open != name.trim() {
                    return Err(format!("<{open}> closed by </{name}>"));
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
            {
                return Err(format!("bad tag name in <{tag}>"));
            }
            check_attributes(&body[name.len()..])?;
            if stack.is_empty() {
                roots += 1;
            }
            seen.push(name.clone());
            if !self_closing {
                stack.push(name);
            }
        }
        check_text(rest)?;
        if !rest.trim().is_empty() {
            return Err("text after the root".into());
        }
        match (stack.last(), roots) {
            (Some(open), _) => Err(format!("<{open}> never closed")),
            (None, 1) => Ok(seen),
            (None, n) => Err(format!("{n} root elements")),
        }
    }

    fn check_text(t: &str) -> Result<(), String> {
        if t.contains('>') {
            return Err(format!("raw '>' in text {t:?}"));
        }
        let mut rest = t;
        while let Some(amp) = rest.find('&') {
            rest = &rest[amp + 1..];
            let semi = rest.find(';').ok_or(format!("bare '&' in {t:?}"))?;
            let entity = &rest[..semi];
            let numeric = entity.strip_prefix('#').is_some_and(|n| {
                n.parse::<u32>().is_ok()
                    || n.strip_prefix('x')
                        .is_some_and(|h| u32::from_str_radix(h, 16).is_ok())
            });
            if !numeric && !["amp", "lt", "gt", "quot", "apos"].contains(&entity) {
                return Err(format!("unknown entity &{entity}; in {t:?}"));
            }
        }
        Ok(())
    }

    fn check_attributes(mut a: &str) -> Result<(), String> {
        let mut names = Vec::new();
        loop {
            a = a.trim_start();
            if a.is_empty() {
                return Ok(());
            }
            let eq = a
                .find('=')
                .ok_or(format!("attribute without value: {a:?}"))?;
            let name = a[..eq].trim();
            if names.contains(&name) {
                return Err(format!("attribute {name} twice"));
            }
            names.push(name);
            let v = &a[eq + 1..];
            let q = v
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'')
                .ok_or(format!("unquoted {name}"))?;
            let close = v[1..].find(q).ok_or(format!("unterminated {name}"))?;
            let value = &v[1..1 + close];
            if value.contains('<') {
                return Err(format!("'<' in attribute {name}"));
            }
            check_text(&value.replace('>', ""))?;
            a = &v[close + 2..];
        }
    }

    #[test]
    fn the_checker_catches_what_it_should() {
        let ok =
            "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><rect/></g><text>a &amp; b</text></svg>\n";
        assert!(well_formed(ok).is_ok());
        for bad in [
            "<?xml?><svg><g></svg>",
            "<?xml?><svg></g></svg>",
            "<?xml?><svg><text>a & b</text></svg>",
            "<?xml?><svg a=1></svg>",
            "<?xml?><svg a=\"1\" a=\"2\"></svg>",
            "<?xml?><svg></svg><svg></svg>",
            "<?xml?><svg><text>&nbsp;</text></svg>",
            "<?xml?><svg>",
        ] {
            assert!(well_formed(bad).is_err(), "{bad}");
        }
    }

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
        assert!(svg.contains(">IPv4 TCP</tspan>") || svg.contains(">IPv4 TCP Sender</text>"));
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

    /// The main job's eleven paths once shared colours (fast/raw with
    /// none/raw, fast/speedtest with normal/raw): every legend swatch differs.
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
    fn empty_results_still_draw() {
        let mut r = fixture::results();
        r.paths.clear();
        let svg = render(&r, Format::Svg, None);
        well_formed(&svg).unwrap();
        assert!(svg.contains("no results to plot"));
    }

    #[test]
    fn axis_steps() {
        assert_eq!(nice_axis(955.0), (200.0, 1000.0));
        assert_eq!(nice_axis(13.2), (2.5, 15.0));
        assert_eq!(nice_axis(0.4), (0.1, 0.4));
        assert_eq!(nice_axis(0.0), (0.2, 1.0));
        assert_eq!(tick(2.5, 2.5), "2.5");
        assert_eq!(tick(1000.0, 200.0), "1000");
        assert_eq!(tick(0.30000000000000004, 0.1), "0.3");
    }

    /// Writes two charts for a look: `REPORT_SVG_OUT=/tmp/chart cargo test
    /// --lib report::svg -- --ignored` writes /tmp/chart-paths.svg and
    /// /tmp/chart-matrix.svg; render them with `rsvg-convert x.svg -o x.png`.
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
