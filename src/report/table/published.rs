//! The published figures as GitHub markdown, under the matrix: the NVR500 study's
//! table with each figure's verdict ([`crate::report::reference`]), then the
//! model's predictions for the cells nobody published.

use crate::measure::results::Results;
use crate::report::cells::udp_figure;
use crate::report::md::{md_escape as esc, md_table};
use crate::report::numbers::{mbit, percent, plain};
use crate::report::reference::{
    Basis, Comparison, Outcome, compare, deviation, legend, measured_cell, streams_lines, summary,
    title, unpredicted_lines,
};
use crate::report::views::{View, predictions};
use crate::report::wire::line_rate;
use crate::topology::reference::Reference;
use std::fmt::Write;

/// The published figures and the predictions; `None` without a reference.
pub(super) fn markdown(r: &Results) -> Option<String> {
    let reference = r.reference.as_ref()?;
    let mut out = format!("### {}\n\n", esc(&title(reference)));
    let legend: Vec<String> = legend(r, reference).iter().map(|l| esc(l)).collect();
    out.push_str(&legend.join("\n"));
    out.push_str("\n\n");
    let n = if reference.marks_calibration { 7 } else { 6 };
    let table: Vec<Vec<String>> =
        std::iter::once(HEADER[..n].iter().map(|h| h.to_string()).collect())
            .chain(rows(r, reference))
            .map(|row: Vec<String>| row.iter().map(|s| esc(s)).collect())
            .collect();
    out.push_str(&md_table(&table, &LEFT[..n]));
    let _ = writeln!(out, "\n{}", esc(&summary(r, reference)));
    for lines in [unpredicted_lines(reference), streams_lines(r)] {
        if !lines.is_empty() {
            out.push('\n');
            for l in lines {
                let _ = writeln!(out, "- {}", esc(&l));
            }
        }
    }
    if let Some(v) = predictions(r) {
        out.push('\n');
        out.push_str(&view_markdown(&v));
    }
    Some(out)
}

/// A view as a markdown section: its title, legend and table, the first
/// column written only where it changes.
fn view_markdown(v: &View) -> String {
    let mut out = format!("### {}\n\n", esc(&v.title));
    let legend: Vec<String> = v.legend.iter().map(|l| esc(l)).collect();
    out.push_str(&legend.join("\n"));
    out.push_str("\n\n");
    let mut last = String::new();
    let table: Vec<Vec<String>> =
        std::iter::once(v.columns.iter().map(|c| c.header().to_string()).collect())
            .chain(v.rows.iter().map(|row| {
                v.columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let t = c.text(row);
                        if i == 0 {
                            if t == last {
                                return String::new();
                            }
                            last = t.clone();
                        }
                        t
                    })
                    .collect()
            }))
            .map(|row: Vec<String>| row.iter().map(|s| esc(s)).collect())
            .collect();
    let left: Vec<bool> = v.columns.iter().map(|c| c.left()).collect();
    out.push_str(&md_table(&table, &left));
    out
}

const HEADER: [&str; 7] = [
    "path",
    "cell",
    "published",
    "measured",
    "ratio",
    "tolerance",
    "basis",
];

/// Columns written left-aligned; the figures are right-aligned.
const LEFT: [bool; 7] = [true, true, false, false, false, true, true];

/// The section's rows: path (on a group's first row only), cell, published,
/// measured, ratio, the verdict, and where the reference marks calibration
/// the basis.
fn rows(r: &Results, reference: &Reference) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut last_path = "";
    for c in compare(r, reference) {
        let f = c.figure;
        let path = if f.path == last_path {
            String::new()
        } else {
            f.path.clone()
        };
        last_path = &f.path;
        let [measured, ratio, verdict] = outcome(r, reference, &c);
        let mut row = vec![
            path,
            f.cell.title(),
            plain(f.published_bps / 1e6),
            measured,
            ratio,
            verdict,
        ];
        if let Some(b) = c.basis {
            row.push(basis(r, &c, b));
        }
        out.push(row);
    }
    out
}

/// A comparison's measured figure (UDP with what its run received and
/// lost), ratio and verdict.
fn outcome(r: &Results, reference: &Reference, c: &Comparison) -> [String; 3] {
    let f = c.figure;
    match &c.outcome {
        Outcome::NotMeasured => ["-".into(), "-".into(), "not measured".into()],
        Outcome::Failed(_) => ["-".into(), "-".into(), "failed".into()],
        Outcome::Measured { bps, ratio, within } => [
            match measured_cell(r, f).and_then(udp_figure) {
                Some(u) => format!(
                    "{}{} ({} rcvd, {} % lost)",
                    mbit(*bps),
                    if u.sender_limited {
                        " sender-limited"
                    } else {
                        ""
                    },
                    mbit(u.received),
                    percent(u.loss)
                ),
                None => mbit(*bps),
            },
            if ratio.is_finite() {
                format!("{ratio:.2}")
            } else {
                "?".into()
            },
            if *within {
                "ok".into()
            } else {
                format!(
                    "OUT ({} %)",
                    deviation(*ratio, reference.tolerance.of(f.cell.protocol))
                )
            },
        ],
    }
}

/// The basis; a raw cell the line rate predicts says so, with the
/// formula's figure.
fn basis(r: &Results, c: &Comparison, b: Basis) -> String {
    let f = c.figure;
    let by_line_rate = r
        .paths
        .iter()
        .find(|p| p.label() == f.path)
        .zip(measured_cell(r, f))
        .and_then(|(p, x)| line_rate(p, x))
        .filter(|_| b == Basis::Predicted);
    match by_line_rate {
        Some(w) => format!("predicted (line rate {})", mbit(w)),
        None => b.word().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{self, with_calibration, with_reference};
    use crate::report::{Format, render};

    #[test]
    fn no_section_without_a_reference() {
        assert_eq!(markdown(&fixture::results()), None);
    }

    #[test]
    fn markdown_section() {
        let md = render(&with_reference(), Format::Md, None);
        let plain = render(&fixture::results(), Format::Md, None);
        let section = md.strip_prefix(&plain).unwrap_or_else(|| panic!("{md}"));
        assert!(
            section.starts_with("\n### Published (the NVR500 study, best of 5) vs measured\n\n"),
            "{section}"
        );
        assert!(
            section.contains(
                "\n| path | cell               | published |                   measured | ratio | tolerance    |\n\
                 | :--- | :----------------- | --------: | -------------------------: | ----: | :----------- |\n\
                 | raw  | IPv4 TCP Sender    |       941 |                        941 |  1.00 | ok           |\n\
                 |      | IPv4 TCP Receiver  |       790 |                        940 |  1.19 | OUT (+19 %)  |\n\
                 |      | IPv4 UDP Sender    |       347 | 350 (347 rcvd, 0.9 % lost) |  1.01 | ok           |\n"
            ),
            "{section}"
        );
        assert!(
            section.contains("\n\n4 of 6 cells within tolerance (TCP +-15 %, UDP +-25 %); 2 not measured, 1 failed\n\n- raw IPv4 TCP Sender: 6 streams 941 Mbit/s = 1.00x one stream (941)\n"),
            "{section}"
        );
    }

    #[test]
    fn markdown_marks_the_basis_and_lists_predictions() {
        let md = render(&with_calibration(), Format::Md, None);
        for want in [
            "| path | cell               | published |                   measured | ratio | tolerance    | basis      |\n\
             | :--- | :----------------- | --------: | -------------------------: | ----: | :----------- | :--------- |\n\
             | raw  | IPv4 TCP Sender    |       941 |                        941 |  1.00 | ok           | calibrated |\n",
            "|      | IPv4 TCP Sender x6 |    656.69 |                        941 |  1.43 | OUT (+43 %)  | predicted  |\n",
            "\n1 of 2 calibrated cells reproduced within tolerance (1 not measured); 3 of 4 predicted cells \
             within tolerance (1 not measured, 1 failed); tolerance TCP +-15 %, UDP +-25 %\n\n\
             - not predicted: RBBS speed test, published 300 Mbit/s: its limit is the NGN's test server\n",
            "\n### Predictions for cells nobody published\n\n",
            "| path | cell              |                   measured | limited by                                            |\n\
             | :--- | :---------------- | -------------------------: | :---------------------------------------------------- |\n\
             | raw  | IPv6 TCP Sender   |                        928 |                                                       |\n\
             | wg   | IPv4 TCP Receiver |                        470 |                                                       |\n\
             |      | IPv4 UDP Sender   | 120 (118 rcvd, 1.5 % lost) | router fast path ipv4 udp upload ceiling 29.43 Mbit/s |\n",
        ] {
            assert!(md.contains(want), "{want}\nnot in\n{md}");
        }
        // Unmarked: no basis column and no predictions, however many ceilings.
        let mut r = with_reference();
        r.paths[1].cells[2].model_limit = with_calibration().paths[1].cells[2].model_limit.clone();
        let md = render(&r, Format::Md, None);
        assert!(!md.contains("basis") && !md.contains("Predictions"), "{md}");
    }
}
