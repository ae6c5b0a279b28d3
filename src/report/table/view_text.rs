//! A view ([`crate::report::views::View`]) as text that fits a terminal of
//! [`WIDTH`] columns: its title ruled, the question and the legend wrapped, one
//! table of a row per path and cell (the first column written only where it
//! changes), then footnotes for failed cells and the view's notes.

use crate::report::hosts::MARK;
use crate::report::views::{Column, Row, View};
use crate::report::words::one_line;
use std::fmt::Write;

/// The widest line a view writes.
pub(crate) const WIDTH: usize = 120;

pub(crate) fn view_text(v: &View) -> String {
    let mut out = String::new();
    let title: String = v.title.chars().take(WIDTH).collect();
    let _ = writeln!(out, "{title}\n{}", "=".repeat(title.chars().count()));
    for line in wrap(&v.question, WIDTH) {
        let _ = writeln!(out, "{line}");
    }
    for l in &v.legend {
        for line in wrap(l, WIDTH) {
            let _ = writeln!(out, "{line}");
        }
    }
    out.push('\n');

    let mut footnotes: Vec<String> = Vec::new();
    let mut table: Vec<Vec<String>> = vec![v.columns.iter().map(|c| c.header().into()).collect()];
    // A failed cell's footnote goes beside its rate, or its verdict.
    let note_at = v
        .columns
        .iter()
        .position(|c| *c == Column::Rate)
        .or_else(|| v.columns.iter().position(|c| *c == Column::Verdict));
    let mut last_first = String::new();
    // Where a rate is marked, the others keep their digits in line with it.
    let marks = v.rows.iter().any(|r| r.figures.at_underlay);
    for row in &v.rows {
        let mut cells = Vec::new();
        for (i, c) in v.columns.iter().enumerate() {
            let mut s = c.text(row);
            if i == 0 {
                if s == last_first {
                    s = String::new();
                } else {
                    last_first = s.clone();
                }
            }
            if let (true, Some(f)) = (note_at == Some(i), footnote(row)) {
                footnotes.push(f);
                s = format!("{s} [{}]", footnotes.len());
            }
            if marks
                && matches!(c, Column::Rate | Column::Measured)
                && !s.is_empty()
                && !s.ends_with(MARK)
            {
                s.push(' ');
            }
            cells.push(s);
        }
        table.push(cells);
    }
    for line in layout(&table, &v.columns) {
        let _ = writeln!(out, "{line}");
    }
    if !footnotes.is_empty() || !v.notes.is_empty() {
        out.push('\n');
    }
    for (i, f) in footnotes.iter().enumerate() {
        for line in wrap(&format!("[{}] {f}", i + 1), WIDTH) {
            let _ = writeln!(out, "{line}");
        }
    }
    if !footnotes.is_empty() && !v.notes.is_empty() {
        out.push('\n');
    }
    for n in &v.notes {
        for line in wrap(n, WIDTH) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// Why a row's cell failed, for a footnote: "wg IPv6 TCP Sender: ...".
pub(crate) fn footnote(row: &Row) -> Option<String> {
    let e = row.figures.failed.as_ref()?;
    Some(format!(
        "{} {}: {}",
        row.label,
        row.cell.title(),
        one_line(e)
    ))
}

/// The table's lines: columns padded to their widest value, two spaces
/// apart; text left-aligned, figures right-aligned. A table wider than
/// [`WIDTH`] has its widest text column cut (`~` marks a cut value).
fn layout(table: &[Vec<String>], columns: &[Column]) -> Vec<String> {
    let n = columns.len();
    let mut w = vec![0; n];
    for row in table {
        for (i, s) in row.iter().enumerate() {
            w[i] = w[i].max(s.chars().count());
        }
    }
    let total = |w: &[usize]| w.iter().sum::<usize>() + 2 * n.saturating_sub(1);
    while total(&w) > WIDTH {
        let Some(i) = (0..n)
            .filter(|&i| columns[i].left() && w[i] > 8)
            .max_by_key(|&i| w[i])
        else {
            break;
        };
        w[i] -= (total(&w) - WIDTH).min(w[i] - 8);
    }
    table
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (i, s) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let s = cut(s, w[i]);
                let pad = " ".repeat(w[i] - s.chars().count());
                if columns[i].left() {
                    line.push_str(&s);
                    line.push_str(&pad);
                } else {
                    line.push_str(&pad);
                    line.push_str(&s);
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('~');
    t
}

/// `text` in lines of at most `width` characters, broken at spaces (a word
/// longer than a line is cut).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let extra = if line.is_empty() { 0 } else { 1 };
        if !line.is_empty() && line.chars().count() + extra + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        while line.chars().count() > width {
            let head: String = line.chars().take(width).collect();
            let rest: String = line.chars().skip(width).collect();
            lines.push(head);
            line = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use crate::report::{Format, fixture, render};

    #[test]
    fn a_failed_cell_is_footnoted() {
        let text = render(&fixture::results(), Format::Text, None);
        assert!(
            text.contains("\n                    wg    failed [1]      -\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "\n[1] wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused\n"
            ),
            "{text}"
        );
    }
}
