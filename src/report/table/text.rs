//! The matrix as aligned text, after the seed's own listing of each path:
//! columns padded to their widest value, group labels ruled over their columns.

use super::matrix::{Matrix, heading, matrix};
use crate::measure::model::Results;
use crate::report::{mbit, one_line, seed_order};
use std::fmt::Write;

/// The seed's listing of one path: `IPv4 TCP Sender (941 Mbit/s)`, the best
/// run, one line per cell in the seed's order.
pub(crate) fn listing(p: &crate::measure::model::PathResult) -> Vec<String> {
    let mut cells: Vec<_> = p.cells.iter().collect();
    cells.sort_by_key(|c| seed_order(&c.cell));
    cells
        .iter()
        .map(|c| match &c.error {
            Some(e) => format!("{} (failed: {})", c.cell.title(), one_line(e)),
            None => format!("{} ({} Mbit/s)", c.cell.title(), mbit(c.best_bps)),
        })
        .collect()
}

pub(super) fn text_matrix(r: &Results, baseline: Option<&str>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Format, fixture, render};

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
}
