//! The seed's listing and the matrix table, as aligned text and as GitHub
//! markdown. Both read one [`Matrix`], so they always agree.

use super::{
    baseline_index, mbit, one_line, ordered_cells, percent, step_down_notes, udp_figure, utc,
};
use crate::measure::model::Results;
use crate::vocab::{Cell, Family, Proto};
use std::fmt::Write;

/// The table before it is laid out: rows = cells; per path best, median,
/// min-max (and the UDP rate with its loss when any cell is UDP); then one ratio
/// column per non-baseline path.
struct Matrix {
    /// (label, number of columns it spans), the first over the cell column.
    groups: Vec<(String, usize)>,
    /// Column names under the groups; the first is the cell.
    columns: Vec<String>,
    /// The same with the path in front ("raw best"), for a one-row header.
    long_columns: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Footnotes: the errors of failed cells, referenced as `failed [n]`.
    notes: Vec<String>,
    /// What the figures are, in one sentence per line.
    legend: Vec<String>,
}

fn matrix(r: &Results, baseline: Option<&str>) -> Matrix {
    let mut legend = Vec::new();
    let base = match baseline_index(r, baseline) {
        Ok(i) => i,
        Err(e) => {
            if baseline.is_some() {
                legend.push(format!("Baseline: {e}; using the first path."));
            }
            0
        }
    };
    let cells = ordered_cells(r);
    let with_udp = cells.iter().any(|c| c.protocol == Proto::Udp);
    let per_path = if with_udp { 5 } else { 4 };

    let mut groups = vec![(String::new(), 1)];
    let mut columns = vec!["cell".to_string()];
    let mut long_columns = columns.clone();
    let names: &[&str] = if with_udp {
        &["best", "median", "min-max", "-b / rcvd (loss)", "cpu c/s"]
    } else {
        &["best", "median", "min-max", "cpu c/s"]
    };
    for p in &r.paths {
        groups.push((p.label(), per_path));
        for n in names {
            columns.push(n.to_string());
            long_columns.push(format!("{} {n}", p.label()));
        }
    }
    let others: Vec<usize> = (0..r.paths.len()).filter(|&i| i != base).collect();
    if !others.is_empty() {
        groups.push(("ratio".to_string(), others.len()));
        for &i in &others {
            let name = format!("{}/{}", r.paths[i].label(), r.paths[base].label());
            columns.push(name.clone());
            long_columns.push(name);
        }
    }

    let mut notes = Vec::new();
    let mut rows = Vec::new();
    let mut across_family = false;
    for c in &cells {
        let mut row = vec![c.title()];
        for p in &r.paths {
            let mut figures = match p.cell(c) {
                None => vec!["-".to_string(); 3],
                Some(cr) => match &cr.error {
                    Some(e) => {
                        notes.push(format!("{} {}: {}", p.label(), c.title(), one_line(e)));
                        vec![
                            format!("failed [{}]", notes.len()),
                            String::new(),
                            String::new(),
                        ]
                    }
                    None => vec![
                        mbit(cr.best_bps),
                        mbit(cr.median_bps),
                        format!("{}-{}", mbit(cr.min_bps), mbit(cr.max_bps)),
                    ],
                },
            };
            if with_udp {
                let figure = p.cell(c).filter(|cr| cr.error.is_none()).and_then(|cr| {
                    let f = udp_figure(cr)?;
                    let mut s = format!(
                        "{}{} / {} ({} %)",
                        mbit(f.offered),
                        if f.sender_limited { "s" } else { "" },
                        mbit(f.received),
                        percent(f.loss)
                    );
                    let steps = step_down_notes(cr);
                    if !steps.is_empty() {
                        notes.push(format!("{} {}: {}", p.label(), c.title(), steps.join("; ")));
                        s += &format!(" [{}]", notes.len());
                    }
                    Some(s)
                });
                figures.push(figure.unwrap_or_default());
            }
            // CPU of the client and the server, so a limit of the ends shows (the
            // seed's low UDP sender figures were its server's receive limit).
            figures.push(
                p.cell(c)
                    .filter(|cr| !cr.runs.is_empty())
                    .map(cpu)
                    .unwrap_or_default(),
            );
            row.extend(figures);
        }
        // A baseline that measures only the other family (native IPv6 against
        // IPv4 over a softwire, the seed's DS-Lite comparison) is compared with
        // its cell of the same protocol, direction and streams, marked `*`.
        let (of_base, across) = match r.paths.get(base) {
            Some(p) => match p.cell(c) {
                Some(b) => (Some(b), false),
                None if !p.cells.iter().any(|x| x.cell.family == c.family) => {
                    let other = Cell {
                        family: match c.family {
                            Family::Ipv4 => Family::Ipv6,
                            Family::Ipv6 => Family::Ipv4,
                        },
                        ..*c
                    };
                    (p.cell(&other), true)
                }
                None => (None, false),
            },
            None => (None, false),
        };
        for &i in &others {
            let ratio = match (r.paths[i].cell(c), of_base) {
                (Some(a), Some(b))
                    if a.error.is_none() && b.error.is_none() && b.median_bps > 0.0 =>
                {
                    across_family |= across;
                    format!(
                        "{:.2}{}",
                        a.median_bps / b.median_bps,
                        if across { "*" } else { "" }
                    )
                }
                _ => "-".to_string(),
            };
            row.push(ratio);
        }
        rows.push(row);
    }

    let runs = r.runs_per_cell;
    legend.push(format!(
        "Mbit/s: best of {runs} run{} (the seed's rule), median, min-max.",
        if runs == 1 { "" } else { "s" }
    ));
    if with_udp {
        let threshold = r
            .paths
            .iter()
            .flat_map(|p| &p.cells)
            .find_map(|c| c.search.as_ref())
            .map(|s| format!(" within {} %", s.loss_threshold_percent))
            .unwrap_or_default();
        legend.push(format!(
            "UDP: received rate; -b / rcvd (loss): the figure, the highest offered rate at which a full-length run kept its receiver-side loss{threshold}, then what that run received and lost."
        ));
        let limited = r
            .paths
            .iter()
            .flat_map(|p| &p.cells)
            .filter(|c| c.error.is_none())
            .any(|c| udp_figure(c).is_some_and(|f| f.sender_limited));
        if limited {
            legend.push(
                "s: the sender could not offer more; that figure is the sending end's limit, not the path's."
                    .to_string(),
            );
        }
    }
    legend.push(
        "cpu c/s: median CPU use of the client and the server, percent of one core.".to_string(),
    );
    if !others.is_empty() {
        legend.push(format!(
            "Ratios: a path's median divided by {}'s.",
            r.paths[base].label()
        ));
    }
    if across_family {
        legend.push(format!(
            "*: {} measures only the other family; divided by its cell of the same protocol and direction (IPv4 over a softwire against native IPv6).",
            r.paths[base].label()
        ));
    }
    Matrix {
        groups,
        columns,
        long_columns,
        rows,
        notes,
        legend,
    }
}

fn cpu(cr: &crate::measure::model::CellResult) -> String {
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let c = median(cr.runs.iter().map(|r| r.cpu_client).collect());
    let s = median(cr.runs.iter().map(|r| r.cpu_server).collect());
    format!("{c:.0}/{s:.0}")
}

/// The first line of text and markdown: what was measured, where, when.
fn heading(r: &Results) -> String {
    let mut h = format!("{}: lab {}", r.tool, r.lab);
    if let Some(t) = &r.topology {
        let _ = write!(h, " ({t})");
    }
    if r.started != 0 {
        let _ = write!(h, ", started {}", utc(r.started));
    }
    let _ = write!(
        h,
        ", {} run{} x {} s per cell",
        r.runs_per_cell,
        if r.runs_per_cell == 1 { "" } else { "s" },
        r.duration_per_run
    );
    h
}

/// The seed's listing of one path: `IPv4 TCP Sender (941 Mbit/s)`, the best
/// run, one line per cell in the seed's order.
pub(crate) fn listing(p: &crate::measure::model::PathResult) -> Vec<String> {
    let mut cells: Vec<_> = p.cells.iter().collect();
    cells.sort_by_key(|c| super::seed_order(&c.cell));
    cells
        .iter()
        .map(|c| match &c.error {
            Some(e) => format!("{} (failed: {})", c.cell.title(), one_line(e)),
            None => format!("{} ({} Mbit/s)", c.cell.title(), mbit(c.best_bps)),
        })
        .collect()
}

/// The text report: the listing and the matrix, then the published figures
/// and the run's notes where there are any.
pub(crate) fn text(r: &Results, baseline: Option<&str>) -> String {
    let mut out = text_matrix(r, baseline);
    if let Some(section) = super::reference::text(r) {
        out.push('\n');
        out.push_str(&section);
    }
    if !r.notes.is_empty() {
        out.push('\n');
        for n in &r.notes {
            let _ = writeln!(out, "Note: {n}");
        }
    }
    out
}

fn text_matrix(r: &Results, baseline: Option<&str>) -> String {
    let mut out = heading(r);
    out.push('\n');
    if r.paths.is_empty() {
        out.push_str("\nno paths measured\n");
        return out;
    }
    for p in &r.paths {
        let mut addrs: Vec<&str> = [&p.ipv4, &p.ipv6]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if addrs.is_empty() {
            addrs.push("no address");
        }
        let _ = writeln!(
            out,
            "\n{}: {} -> {} ({})",
            p.label(),
            p.from,
            p.to,
            addrs.join(", ")
        );
        for line in listing(p) {
            out.push_str(&line);
            out.push('\n');
        }
    }

    let m = matrix(r, baseline);
    out.push('\n');
    for l in &m.legend {
        out.push_str(l);
        out.push('\n');
    }
    out.push('\n');
    let widths = widths(&m);
    let gap = |i: usize| {
        if group_starts(&m).contains(&i) {
            "   "
        } else {
            "  "
        }
    };

    // The group line: each label over its columns, ruled to their width.
    let mut line = String::new();
    let mut col = 0;
    for (label, span) in &m.groups {
        let width: usize = (col..col + span).map(|i| widths[i]).sum::<usize>()
            + (col + 1..col + span).map(|i| gap(i).len()).sum::<usize>();
        if col > 0 {
            line.push_str(gap(col));
        }
        if label.is_empty() {
            line.push_str(&" ".repeat(width));
        } else {
            let dashes = width.saturating_sub(label.chars().count() + 1);
            line.push_str(label);
            if dashes > 0 {
                line.push(' ');
                line.push_str(&"-".repeat(dashes));
            }
        }
        col += span;
    }
    out.push_str(line.trim_end());
    out.push('\n');

    let mut emit = |cells: &[String]| {
        let mut line = String::new();
        for (i, s) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(s.chars().count());
            if i == 0 {
                line.push_str(s);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str(gap(i));
                line.push_str(&" ".repeat(pad));
                line.push_str(s);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    emit(&m.columns);
    for row in &m.rows {
        emit(row);
    }
    if !m.notes.is_empty() {
        out.push('\n');
        for (i, n) in m.notes.iter().enumerate() {
            let _ = writeln!(out, "[{}] {n}", i + 1);
        }
    }
    out
}

/// The first column of every group after the cell column.
fn group_starts(m: &Matrix) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut col = 0;
    for (_, span) in &m.groups {
        if col > 0 {
            starts.push(col);
        }
        col += span;
    }
    starts
}

/// Column widths: the widest value, widened so each group's label fits over its
/// columns (with a rule of at least three dashes over a group of several).
fn widths(m: &Matrix) -> Vec<usize> {
    let mut w: Vec<usize> = m.columns.iter().map(|c| c.chars().count()).collect();
    for row in &m.rows {
        for (i, s) in row.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let mut col = 0;
    for (label, span) in &m.groups {
        if !label.is_empty() {
            let need = label.chars().count() + if *span > 1 { 4 } else { 0 };
            let have: usize = (col..col + span).map(|i| w[i]).sum::<usize>() + 2 * (span - 1);
            if need > have {
                w[col + span - 1] += need - have;
            }
        }
        col += span;
    }
    w
}

/// The markdown report: the matrix, then the published figures and the run's
/// notes where there are any.
pub(crate) fn markdown(r: &Results, baseline: Option<&str>) -> String {
    let mut out = markdown_matrix(r, baseline);
    if let Some(section) = super::reference::markdown(r) {
        out.push('\n');
        out.push_str(&section);
    }
    for n in &r.notes {
        let _ = write!(out, "\nNote: {}\n", md_escape(n));
    }
    out
}

fn markdown_matrix(r: &Results, baseline: Option<&str>) -> String {
    let mut out = format!("## {}\n", md_escape(&heading(r)));
    if r.paths.is_empty() {
        out.push_str("\nno paths measured\n");
        return out;
    }
    let m = matrix(r, baseline);
    out.push('\n');
    out.push_str(&m.legend.join("\n"));
    out.push_str("\n\n");

    let header = m.long_columns.clone();
    let rows: Vec<Vec<String>> = std::iter::once(header)
        .chain(m.rows.iter().cloned())
        .map(|row| row.iter().map(|s| md_escape(s)).collect())
        .collect();
    let mut left = vec![false; rows[0].len()];
    left[0] = true;
    out.push_str(&md_table(&rows, &left));
    if !m.notes.is_empty() {
        out.push('\n');
        for (i, n) in m.notes.iter().enumerate() {
            let _ = writeln!(out, "- \\[{}\\] {}", i + 1, md_escape(n));
        }
    }
    out
}

/// A GitHub markdown table of already escaped cells, the first row its header,
/// every column padded to its widest cell; `left` says which columns are
/// left-aligned (the others are right-aligned).
pub(crate) fn md_table(rows: &[Vec<String>], left: &[bool]) -> String {
    let Some(header) = rows.first() else {
        return String::new();
    };
    let mut w = vec![3; header.len()];
    for row in rows {
        for (i, s) in row.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let line = |row: &[String]| {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if left[i] {
                    format!("{s:<0$}", w[i])
                } else {
                    format!("{s:>0$}", w[i])
                }
            })
            .collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = line(header);
    let rule: Vec<String> = w
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            if left[i] {
                format!(":{}", "-".repeat(n - 1))
            } else {
                format!("{}:", "-".repeat(n - 1))
            }
        })
        .collect();
    out.push_str(&format!("| {} |\n", rule.join(" | ")));
    for row in &rows[1..] {
        out.push_str(&line(row));
    }
    out
}

/// Markdown-safe text for a table cell or a line: pipes and the characters
/// that would start emphasis or HTML are escaped.
pub(crate) fn md_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '|' | '\\' | '*' | '_' | '`' | '<' | '>' | '[' | ']') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::super::{Format, fixture, render};
    use super::*;

    #[test]
    fn seed_listing_lines() {
        let r = fixture::results();
        assert_eq!(
            listing(&r.paths[0]),
            [
                "IPv4 TCP Sender (941 Mbit/s)",
                "IPv4 TCP Receiver (940 Mbit/s)",
                "IPv4 UDP Sender (347 Mbit/s)",
                "IPv4 UDP Receiver (955 Mbit/s)",
                "IPv6 TCP Sender (928 Mbit/s)",
                "IPv4 TCP Sender x6 (941 Mbit/s)",
            ]
        );
        assert_eq!(
            listing(&r.paths[1]),
            [
                "IPv4 TCP Sender (292 Mbit/s)",
                "IPv4 TCP Receiver (470 Mbit/s)",
                "IPv4 UDP Sender (118 Mbit/s)",
                "IPv4 UDP Receiver (480 Mbit/s)",
                "IPv6 TCP Sender (failed: connecting to [fd00:9::2]:5201: connection refused)",
            ]
        );
        let text = render(&r, Format::Text, None);
        assert!(text.contains(
            "\nraw: lan1 -> lan2 (192.168.1.2, 2001:db8:1::2)\nIPv4 TCP Sender (941 Mbit/s)\n"
        ));
        assert!(text.starts_with(
            "tunbench 0.1.0: lab home (nvr500-home.toml), started 2020-02-01 12:30 UTC, 3 runs x 10 s per cell\n"
        ));
    }

    #[test]
    fn seed_figures_keep_three_significant_digits() {
        let mut r = fixture::results();
        let cells = &mut r.paths[0].cells;
        cells[0].best_bps = 12.431e9;
        cells[1].best_bps = 32.71e6;
        let l = listing(&r.paths[0]);
        assert!(
            l.contains(&"IPv4 TCP Sender x6 (12400 Mbit/s)".to_string()),
            "{l:?}"
        );
        assert!(
            l.contains(&"IPv6 TCP Sender (32.7 Mbit/s)".to_string()),
            "{l:?}"
        );
    }

    /// The table's row for `title`, split on runs of two or more spaces.
    fn row<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{title}  ")))
            .unwrap_or_else(|| panic!("no row {title} in\n{text}"));
        line.split("  ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    #[test]
    fn a_stepped_down_or_sender_limited_udp_figure_says_so() {
        use crate::measure::model::Trial;
        use crate::vocab::Cell;
        let mut r = fixture::results();
        let c = r.paths[0]
            .cells
            .iter_mut()
            .find(|c| c.cell == Cell::parse_key("ipv4.udp.sender").unwrap())
            .unwrap();
        let run = |offered: f64, received: f64| Trial {
            offered_bps: offered * 1e6,
            received_bps: received * 1e6,
            lost_percent: 100.0 * (offered - received) / offered,
            out_of_order: 0,
            remeasured: false,
            sender_limited: false,
        };
        // The search found 400; a full-length run there lost 15 %, so 350.
        let s = c.search.as_mut().unwrap();
        s.confirmations = vec![run(400.0, 340.0), run(350.0, 347.0)];
        c.runs[0].sender_limited = true;
        let text = render(&r, Format::Text, None);
        assert_eq!(
            row(&text, "IPv4 UDP Sender")[4],
            "350s / 347 (0.9 %) [1]",
            "{text}"
        );
        assert!(
            text.contains("\n[1] raw IPv4 UDP Sender: a full-length run at 400 Mbit/s received 340 and lost 15.0 % (over 10 %): stepped down to 350 Mbit/s\n"),
            "{text}"
        );
        assert!(
            text.contains("\ns: the sender could not offer more;"),
            "{text}"
        );
        assert!(!render(&fixture::results(), Format::Text, None).contains("\ns: "));
    }

    #[test]
    fn matrix_rows_ratios_udp_and_failures() {
        let text = render(&fixture::results(), Format::Text, None);
        assert_eq!(
            row(&text, "IPv4 TCP Sender"),
            [
                "IPv4 TCP Sender",
                "941",
                "939",
                "930-941",
                "20/30",
                "292",
                "290",
                "280-292",
                "20/30",
                "0.31"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 TCP Receiver"),
            [
                "IPv4 TCP Receiver",
                "940",
                "938",
                "936-940",
                "20/30",
                "470",
                "469",
                "468-470",
                "20/30",
                "0.50"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 UDP Sender"),
            [
                "IPv4 UDP Sender",
                "347",
                "340",
                "330-347",
                "350 / 347 (0.9 %)",
                "40/90",
                "118",
                "115",
                "110-118",
                "120 / 118 (1.5 %)",
                "40/90",
                "0.34"
            ]
        );
        assert_eq!(
            row(&text, "IPv6 TCP Sender"),
            [
                "IPv6 TCP Sender",
                "928",
                "925",
                "920-928",
                "20/30",
                "failed [1]",
                "-"
            ]
        );
        assert_eq!(
            row(&text, "IPv4 TCP Sender x6"),
            [
                "IPv4 TCP Sender x6",
                "941",
                "940",
                "936-941",
                "20/30",
                "-",
                "-",
                "-",
                "-"
            ]
        );
        assert!(text.contains(
            "\n[1] wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused\n"
        ));
        assert!(text.contains("Ratios: a path's median divided by raw's.\n"));
        assert!(text.contains("loss within 10 %"));
    }

    #[test]
    fn columns_are_aligned() {
        let text = render(&fixture::results(), Format::Text, None);
        let table: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("cell "))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(table.len(), 7, "{text}");
        // Right-aligned figures: every row's best-of-raw ends in the same column
        // as the header's "best".
        let end = table[0].find("best").unwrap() + "best".len();
        for l in &table[1..] {
            assert!(l[..end].ends_with(|c: char| c.is_ascii_digit()), "{l}");
        }
        let groups = text
            .lines()
            .find(|l| l.trim_start().starts_with("raw -"))
            .unwrap();
        assert!(groups.contains(" wg -"), "{groups}");
        assert!(groups.ends_with(" ratio"), "{groups}");
        // Labels sit over their groups: "wg" starts where wg's best column begins.
        let wg = groups.find(" wg -").unwrap() + 1;
        assert!(table[0][..wg].ends_with("   "), "{}", table[0]);
    }

    #[test]
    fn another_baseline_turns_the_ratios() {
        let text = render(&fixture::results(), Format::Text, Some("wg"));
        let r = row(&text, "IPv4 TCP Sender");
        assert_eq!(r.last(), Some(&"3.24"), "{text}");
        assert!(text.contains("raw/wg"));
        let text = render(&fixture::results(), Format::Text, Some("gre"));
        assert!(text.contains("Baseline: no path gre; paths: raw, wg; using the first path."));
        assert!(text.contains("wg/raw"));
    }

    #[test]
    fn a_baseline_of_the_other_family_is_compared_across_families() {
        use crate::vocab::Family;
        let mut r = fixture::results();
        // raw: native IPv6 only; wg: IPv4 only (a softwire's path).
        r.paths[0].cells.retain(|c| c.cell.family == Family::Ipv6);
        r.paths[1].cells.retain(|c| c.cell.family == Family::Ipv4);
        let text = render(&r, Format::Text, None);
        let v4 = row(&text, "IPv4 TCP Sender");
        assert!(v4.last().is_some_and(|x| x.ends_with('*')), "{text}");
        assert!(
            text.contains("*: raw measures only the other family"),
            "{text}"
        );
        let v6 = row(&text, "IPv6 TCP Sender");
        assert_eq!(v6.last(), Some(&"-"), "{text}");
    }

    #[test]
    fn one_path_has_no_ratio_columns() {
        let mut r = fixture::results();
        r.paths.truncate(1);
        let text = render(&r, Format::Text, None);
        assert!(!text.contains("ratio"), "{text}");
        assert_eq!(
            row(&text, "IPv4 TCP Sender"),
            ["IPv4 TCP Sender", "941", "939", "930-941", "20/30"]
        );
        r.paths.clear();
        assert!(render(&r, Format::Text, None).ends_with("\nno paths measured\n"));
    }

    #[test]
    fn markdown_table() {
        let md = render(&fixture::results(), Format::Md, None);
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines[0].starts_with("## tunbench 0.1.0: lab home"), "{md}");
        let header = lines.iter().position(|l| l.starts_with("| cell")).unwrap();
        let cols = |l: &str| -> Vec<String> {
            l.trim_matches('|')
                .split(" | ")
                .map(|s| s.trim().to_string())
                .collect()
        };
        assert_eq!(
            cols(lines[header]),
            [
                "cell",
                "raw best",
                "raw median",
                "raw min-max",
                "raw -b / rcvd (loss)",
                "raw cpu c/s",
                "wg best",
                "wg median",
                "wg min-max",
                "wg -b / rcvd (loss)",
                "wg cpu c/s",
                "wg/raw"
            ]
        );
        assert!(
            lines[header + 1].starts_with("| :---"),
            "{}",
            lines[header + 1]
        );
        assert!(lines[header + 1].ends_with("-: |"), "{}", lines[header + 1]);
        assert_eq!(
            cols(lines[header + 2]),
            [
                "IPv4 TCP Sender",
                "941",
                "939",
                "930-941",
                "",
                "20/30",
                "292",
                "290",
                "280-292",
                "",
                "20/30",
                "0.31"
            ]
        );
        // Every row has the same number of cells, and the same length.
        let table: Vec<&str> = lines[header..]
            .iter()
            .take_while(|l| l.starts_with('|'))
            .copied()
            .collect();
        assert_eq!(table.len(), 8);
        for l in &table {
            assert_eq!(l.len(), table[0].len(), "{l}");
            assert_eq!(l.matches(" | ").count(), 11, "{l}");
        }
        assert!(md.contains("\n- \\[1\\] wg IPv6 TCP Sender: connecting to \\[fd00:9::2\\]:5201: connection refused\n"), "{md}");
    }

    #[test]
    fn markdown_escapes_pipes() {
        let mut r = fixture::results();
        r.paths[1].cells[4].error = Some("a | b".into());
        let md = render(&r, Format::Md, None);
        assert!(md.contains("a \\| b"), "{md}");
    }
}
