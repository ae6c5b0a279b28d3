//! The matrix as a GitHub markdown table, one header row with the path in
//! front of each column name.

use super::matrix::{heading, matrix};
use crate::measure::results::Results;
use crate::report::hosts::{Section, TITLE};
use crate::report::md::{md_escape, md_table};
use std::fmt::Write;

pub(super) fn markdown_matrix(r: &Results, baseline: Option<&str>) -> String {
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

/// The underlays between hosts and the hosts each path crosses: a list
/// each, under a heading of the matrix's sections' level.
pub(super) fn hosts_markdown(s: &Section) -> String {
    let mut out = format!("### {TITLE}\n\n{}\n", md_escape(&s.legend));
    for list in [&s.underlays, &s.paths] {
        if !list.is_empty() {
            out.push('\n');
        }
        for line in list {
            let _ = writeln!(out, "- {}", md_escape(line));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::report::{Format, fixture, render};

    #[test]
    fn markdown_table() {
        let r = crate::report::table::matrix::tests::without_probes(fixture::results());
        let md = render(&r, Format::Md, None);
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
