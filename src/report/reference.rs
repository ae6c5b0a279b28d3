//! Published figures beside measured ones: the topology's `[reference]` (the
//! seed's table) against the run, cell by cell, with the ratio and whether it
//! is within tolerance; then how several streams compare with one.
//!
//! A measured figure is read the way the seed defined its own: for TCP the
//! best of the runs; for UDP the highest offered rate whose loss stayed within
//! the threshold (the search's result), or the best run when there was no
//! search.
//!
//! Where the reference says which figures the lab's device models were
//! calibrated from (`calibrated`), each comparison is marked [`Basis`]
//! `calibrated` (a replay: agreement checks the emulation) or `predicted` (a
//! test of the model), and the summary counts them apart. Figures the lab does
//! not predict (`[[reference.unpredicted]]`) are listed with the reason and
//! compared with nothing.
//!
//! [`check`] is `--expect-reference`: every measured cell within tolerance,
//! calibrated and predicted alike.

use super::expect::Failure;
use super::md::{md_escape, md_table};
use super::{loss_within, mbit, one_line, percent, rate, seed_order, sig, udp_figure, udp_rate};
use crate::measure::results::{CellResult, Results};
use crate::topology::reference::{PublishedFigure, Reference, Tolerance, Unpredicted};
use crate::vocab::{Cell, Proto};
use std::fmt::Write;

/// What became of one published figure in the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The run has no such path, or the path no such cell.
    NotMeasured,
    /// The cell was measured and failed, with its error.
    Failed(String),
    Measured {
        bps: f64,
        /// Measured over published.
        ratio: f64,
        within: bool,
    },
}

/// Whether the lab's device models were set from a published figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The models were calibrated from it: measuring it again replays the
    /// calibration, so agreement checks the emulation, not the model.
    Calibrated,
    /// The models were not set from it: agreement tests their prediction.
    Predicted,
}

impl Basis {
    pub fn word(self) -> &'static str {
        match self {
            Basis::Calibrated => "calibrated",
            Basis::Predicted => "predicted",
        }
    }

    /// A figure's basis where the reference marks calibration; `None` where
    /// the file does not say.
    pub fn of(reference: &Reference, f: &PublishedFigure) -> Option<Basis> {
        reference.marks_calibration.then_some(if f.calibrated {
            Basis::Calibrated
        } else {
            Basis::Predicted
        })
    }
}

/// One published figure and what the run measured for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison<'a> {
    pub figure: &'a PublishedFigure,
    pub outcome: Outcome,
    /// Calibrated or predicted, where the reference says.
    pub basis: Option<Basis>,
}

/// A cell's figure as the seed's table has it.
pub fn measured_bps(c: &CellResult) -> f64 {
    match c.cell.protocol {
        Proto::Tcp => c.best_bps,
        Proto::Udp => udp_rate(c).filter(|r| *r > 0.0).unwrap_or(c.best_bps),
    }
}

/// Every published figure against the run: grouped by path in the order the
/// file lists them, cells in the seed's order within a path.
pub fn compare<'a>(r: &Results, reference: &'a Reference) -> Vec<Comparison<'a>> {
    let mut paths: Vec<&str> = Vec::new();
    for f in &reference.figures {
        if !paths.contains(&f.path.as_str()) {
            paths.push(&f.path);
        }
    }
    let mut figures: Vec<&PublishedFigure> = reference.figures.iter().collect();
    figures.sort_by_key(|f| (paths.iter().position(|p| *p == f.path), seed_order(&f.cell)));
    figures
        .into_iter()
        .map(|figure| {
            let outcome = match measured_cell(r, figure) {
                None => Outcome::NotMeasured,
                Some(c) => match &c.error {
                    Some(e) => Outcome::Failed(one_line(e)),
                    None => {
                        let bps = measured_bps(c);
                        let ratio = bps / figure.published_bps;
                        let tolerance = reference.tolerance.of(figure.cell.protocol);
                        Outcome::Measured {
                            bps,
                            ratio,
                            within: ((ratio - 1.0) * 100.0).abs() <= tolerance + 1e-9,
                        }
                    }
                },
            };
            Comparison {
                figure,
                outcome,
                basis: Basis::of(reference, figure),
            }
        })
        .collect()
}

/// The cell of the run that a published figure is compared with.
fn measured_cell<'r>(r: &'r Results, figure: &PublishedFigure) -> Option<&'r CellResult> {
    r.paths
        .iter()
        .find(|p| p.label() == figure.path)
        .and_then(|p| p.cell(&figure.cell))
}

/// The published figure for a path's cell, if there is one.
pub fn published<'a>(
    reference: &'a Reference,
    label: &str,
    cell: &Cell,
) -> Option<&'a PublishedFigure> {
    reference
        .figures
        .iter()
        .find(|f| f.path == label && f.cell == *cell)
}

/// Every measured cell with no published figure, where the reference marks
/// calibration (so the lab has a model whose prediction the cell is): (path
/// index, cell) in the results' path order, cells in the seed's order. Failed
/// cells predict nothing and are left out. Empty where the reference does not
/// mark calibration.
pub fn unpublished(r: &Results) -> Vec<(usize, &CellResult)> {
    let Some(reference) = r.reference.as_ref().filter(|x| x.marks_calibration) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, p) in r.paths.iter().enumerate() {
        let label = p.label();
        let mut cells: Vec<&CellResult> = p
            .cells
            .iter()
            .filter(|c| c.error.is_none() && published(reference, &label, &c.cell).is_none())
            .collect();
        cells.sort_by_key(|c| seed_order(&c.cell));
        out.extend(cells.into_iter().map(|c| (i, c)));
    }
    out
}

/// "not predicted: WHAT, published 300 Mbit/s: WHY", one per unpredicted figure.
pub(crate) fn unpredicted_lines(reference: &Reference) -> Vec<String> {
    reference
        .unpredicted
        .iter()
        .map(
            |Unpredicted {
                 what,
                 published_bps,
                 why,
             }| {
                format!(
                    "not predicted: {what}, published {} Mbit/s: {why}",
                    plain(published_bps / 1e6)
                )
            },
        )
        .collect()
}

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
        let (measured, ratio, verdict) = match &c.outcome {
            Outcome::NotMeasured => ("-".into(), "-".into(), "not measured".into()),
            Outcome::Failed(_) => ("-".into(), "-".into(), "failed".into()),
            Outcome::Measured { bps, ratio, within } => (
                // A UDP figure with what its run received and lost.
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
            ),
        };
        let mut row = vec![
            path,
            f.cell.title(),
            plain(f.published_bps / 1e6),
            measured,
            ratio,
            verdict,
        ];
        if let Some(b) = c.basis {
            // A raw cell the line rate predicts says so, with the formula's figure.
            let line_rate = r
                .paths
                .iter()
                .find(|p| p.label() == f.path)
                .zip(measured_cell(r, f))
                .and_then(|(p, x)| super::wire::line_rate(p, x))
                .filter(|_| b == Basis::Predicted);
            row.push(match line_rate {
                Some(w) => format!("predicted (line rate {})", mbit(w)),
                None => b.word().to_string(),
            });
        }
        out.push(row);
    }
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

/// The same section as GitHub markdown.
pub(crate) fn markdown(r: &Results) -> Option<String> {
    let reference = r.reference.as_ref()?;
    let esc = md_escape;
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
    let unpredicted = unpredicted_lines(reference);
    if !unpredicted.is_empty() {
        out.push('\n');
        for l in unpredicted {
            let _ = writeln!(out, "- {}", esc(&l));
        }
    }
    let streams = streams_lines(r);
    if !streams.is_empty() {
        out.push('\n');
        for l in streams {
            let _ = writeln!(out, "- {}", esc(&l));
        }
    }
    if let Some(v) = super::views::predictions(r) {
        let _ = write!(out, "\n### {}\n\n", esc(&v.title));
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
                            // The path on a group's first row only, as above.
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
    }
    Some(out)
}

pub(crate) fn title(reference: &Reference) -> String {
    match &reference.source {
        Some(s) => format!("Published ({s}) vs measured"),
        None => "Published vs measured".to_string(),
    }
}

/// What the figures are, one sentence a line.
pub(crate) fn legend(r: &Results, reference: &Reference) -> Vec<String> {
    let threshold = loss_within(r);
    let mut measured = "Mbit/s; measured: TCP the best run".to_string();
    if reference
        .figures
        .iter()
        .any(|f| f.cell.protocol == Proto::Udp)
    {
        let _ = write!(
            measured,
            ", UDP the highest offered rate at which a full-length run kept its loss{threshold}, with what that run received and lost (the best run where there was no search)"
        );
    }
    measured.push('.');
    let mut out = vec![
        measured,
        format!(
            "ratio: measured / published; ok within {}.",
            tolerances(&reference.tolerance)
        ),
    ];
    if reference.marks_calibration {
        out.push(
            "basis: calibrated, the lab's device models were set from this figure, so agreeing with it \
             checks the emulation; predicted, they were not, so agreeing with it tests the model."
                .to_string(),
        );
    }
    out
}

/// "TCP +-15 %, UDP +-25 %".
fn tolerances(t: &Tolerance) -> String {
    format!(
        "TCP +-{} %, UDP +-{} %",
        plain(t.tcp_percent),
        plain(t.udp_percent)
    )
}

/// "9 of 11 cells within tolerance (TCP +-15 %, UDP +-25 %); 1 not measured";
/// where the reference marks calibration, calibrated and predicted cells
/// apart: "14 of 14 calibrated cells reproduced within tolerance; 9 of 10
/// predicted cells within tolerance (1 failed); tolerance TCP +-15 %, UDP
/// +-25 %".
pub(crate) fn summary(r: &Results, reference: &Reference) -> String {
    let all = compare(r, reference);
    if reference.marks_calibration {
        let part = |basis: Basis| {
            let of: Vec<&Outcome> = all
                .iter()
                .filter(|c| c.basis == Some(basis))
                .map(|c| &c.outcome)
                .collect();
            let count = |f: &dyn Fn(&Outcome) -> bool| of.iter().filter(|o| f(o)).count();
            let within = count(&|o| matches!(o, Outcome::Measured { within: true, .. }));
            let measured = count(&|o| matches!(o, Outcome::Measured { .. }));
            let missing = count(&|o| *o == Outcome::NotMeasured);
            let failed = count(&|o| matches!(o, Outcome::Failed(_)));
            let word = basis.word();
            if of.is_empty() {
                return format!("no {word} cells");
            }
            let mut s = match basis {
                Basis::Calibrated => {
                    format!("{within} of {measured} {word} cells reproduced within tolerance")
                }
                Basis::Predicted => format!("{within} of {measured} {word} cells within tolerance"),
            };
            let mut rest = Vec::new();
            if missing > 0 {
                rest.push(format!("{missing} not measured"));
            }
            if failed > 0 {
                rest.push(format!("{failed} failed"));
            }
            if !rest.is_empty() {
                let _ = write!(s, " ({})", rest.join(", "));
            }
            s
        };
        return format!(
            "{}; {}; tolerance {}",
            part(Basis::Calibrated),
            part(Basis::Predicted),
            tolerances(&reference.tolerance)
        );
    }
    let count = |f: &dyn Fn(&Outcome) -> bool| all.iter().filter(|c| f(&c.outcome)).count();
    let within = count(&|o| matches!(o, Outcome::Measured { within: true, .. }));
    let measured = count(&|o| matches!(o, Outcome::Measured { .. }));
    let missing = count(&|o| *o == Outcome::NotMeasured);
    let failed = count(&|o| matches!(o, Outcome::Failed(_)));
    let mut s = format!(
        "{within} of {measured} cells within tolerance ({})",
        tolerances(&reference.tolerance)
    );
    let mut rest = Vec::new();
    if missing > 0 {
        rest.push(format!("{missing} not measured"));
    }
    if failed > 0 {
        rest.push(format!("{failed} failed"));
    }
    if !rest.is_empty() {
        let _ = write!(s, "; {}", rest.join(", "));
    }
    s
}

/// For every path with a cell of several streams and the same cell with one:
/// "fast/raw IPv6 TCP Receiver: 6 streams 650 Mbit/s = 2.61x one stream (249)".
pub(crate) fn streams_lines(r: &Results) -> Vec<String> {
    let mut out = Vec::new();
    for p in &r.paths {
        let mut many: Vec<&CellResult> = p
            .cells
            .iter()
            .filter(|c| c.cell.streams > 1 && c.error.is_none())
            .collect();
        many.sort_by_key(|c| seed_order(&c.cell));
        for m in many {
            let one = Cell {
                streams: 1,
                ..m.cell
            };
            let Some(o) = p.cell(&one).filter(|o| o.error.is_none()) else {
                continue;
            };
            let (vm, vo) = (measured_bps(m), measured_bps(o));
            if vo <= 0.0 {
                continue;
            }
            out.push(format!(
                "{} {}: {} streams {} Mbit/s = {:.2}x one stream ({})",
                p.label(),
                one.title(),
                m.cell.streams,
                mbit(vm),
                vm / vo,
                mbit(vo)
            ));
        }
    }
    out
}

/// `--expect-reference`: a failure for every measured cell outside tolerance
/// and every cell that failed; one when no published figure was measured at
/// all (a gate that compares nothing is not passed). Empty without a reference.
pub fn check(r: &Results) -> Vec<Failure> {
    let Some(reference) = &r.reference else {
        return Vec::new();
    };
    let all = compare(r, reference);
    let mut failures = Vec::new();
    for c in &all {
        let f = c.figure;
        let fail = |measured: Option<f64>, message: String| Failure {
            expectation: match c.basis {
                Some(b) => format!("reference {} ({})", f.path, b.word()),
                None => format!("reference {}", f.path),
            },
            cell: Some(f.cell),
            measured,
            message,
        };
        match &c.outcome {
            Outcome::NotMeasured | Outcome::Measured { within: true, .. } => {}
            Outcome::Failed(e) => failures.push(fail(None, format!("failed: {e}"))),
            Outcome::Measured { bps, ratio, .. } => {
                let tolerance = reference.tolerance.of(f.cell.protocol);
                failures.push(fail(
                    Some(*bps),
                    format!(
                        "measured {} against published {} (ratio {}, {} %, outside +-{} %)",
                        rate(*bps, 4),
                        rate(f.published_bps, 4),
                        sig(*ratio, 3),
                        deviation(*ratio, tolerance),
                        plain(tolerance)
                    ),
                ));
            }
        }
    }
    if !all.is_empty() && all.iter().all(|c| c.outcome == Outcome::NotMeasured) {
        failures.push(Failure {
            expectation: "reference".into(),
            cell: None,
            measured: None,
            message: format!(
                "none of the {} published figures was measured; paths: {}",
                all.len(),
                super::path_list(r)
            ),
        });
    }
    failures
}

/// How far a ratio is from 1, signed, in whole percent ("+23"); with a decimal
/// where whole percent would look within the tolerance ("+15.4" against 15).
pub(crate) fn deviation(ratio: f64, tolerance: f64) -> String {
    let d = (ratio - 1.0) * 100.0;
    if !d.is_finite() {
        return "?".to_string();
    }
    if d.abs().round() <= tolerance {
        format!("{d:+.1}")
    } else {
        format!("{d:+.0}")
    }
}

/// A number as written: no exponent, no trailing zeros ("941", "656.69", "32.7").
fn plain(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::super::{Format, fixture, parse_json, render};
    use super::*;
    use std::path::Path;

    fn figure(path: &str, key: &str, mbit: f64) -> PublishedFigure {
        PublishedFigure {
            path: path.into(),
            cell: Cell::parse_key(key).unwrap(),
            published_bps: mbit * 1e6,
            calibrated: false,
        }
    }

    /// The report fixture with published figures: raw within and out of
    /// tolerance, UDP compared on its searched rate, a 6-stream cell, a cell
    /// the run did not measure, a path it did not measure, and wg's failed cell.
    fn with_reference() -> Results {
        let mut r = fixture::results();
        r.reference = Some(Reference {
            source: Some("the seed document, best of 5".into()),
            tolerance: Tolerance::DEFAULT,
            figures: vec![
                figure("raw", "ipv4.udp.sender", 347.0),
                figure("raw", "ipv4.tcp.sender", 941.0),
                figure("raw", "ipv4.tcp.receiver", 790.0),
                figure("raw", "ipv4.udp.receiver", 955.0),
                figure("raw", "ipv4.tcp.sender.p6", 656.69),
                figure("raw", "ipv6.udp.receiver", 940.0),
                figure("wg", "ipv4.tcp.sender", 300.0),
                figure("wg", "ipv6.tcp.sender", 280.0),
                figure("gre", "ipv4.tcp.sender", 500.0),
            ],
            marks_calibration: false,
            unpredicted: Vec::new(),
        });
        r
    }

    const SECTION: &str = "\
Published (the seed document, best of 5) vs measured
====================================================
Does each measured figure agree with the published one?
Mbit/s; measured: TCP the best run, UDP the highest offered rate at which a full-length run kept its loss within 10 %,
with what that run received and lost (the best run where there was no search).
ratio: measured / published; ok within TCP +-15 %, UDP +-25 %.

path  cell                published                    measured  ratio  tolerance
raw   IPv4 TCP Sender           941                         941   1.00  ok
      IPv4 TCP Receiver         790                         940   1.19  OUT (+19 %)
      IPv4 UDP Sender           347  350 (347 rcvd, 0.9 % lost)   1.01  ok
      IPv4 UDP Receiver         955  960 (955 rcvd, 0.5 % lost)   1.01  ok
      IPv6 UDP Receiver         940                           -      -  not measured
      IPv4 TCP Sender x6     656.69                         941   1.43  OUT (+43 %)
wg    IPv4 TCP Sender           300                         292   0.97  ok
      IPv6 TCP Sender           280                           -      -  failed [1]
gre   IPv4 TCP Sender           500                           -      -  not measured

[1] wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused

4 of 6 cells within tolerance (TCP +-15 %, UDP +-25 %); 2 not measured, 1 failed
raw IPv4 TCP Sender: 6 streams 941 Mbit/s = 1.00x one stream (941)
";

    #[test]
    fn the_published_view_first() {
        let r = with_reference();
        let text = render(&r, Format::Text, None);
        let plain = render(&fixture::results(), Format::Text, None);
        // The report without a reference, the published view after where
        // each path goes.
        let paths = "wg: lan1 -> lan2 (10.9.0.2, fd00:9::2)\n\n";
        let at = plain.find(paths).unwrap() + paths.len();
        assert_eq!(
            text,
            format!("{}{SECTION}\n{}", &plain[..at], &plain[at..]),
            "{text}"
        );
    }

    #[test]
    fn ratios_verdicts_and_what_was_not_measured() {
        let r = with_reference();
        let all = compare(&r, r.reference.as_ref().unwrap());
        let keys: Vec<String> = all
            .iter()
            .map(|c| format!("{}:{}", c.figure.path, c.figure.cell))
            .collect();
        // Grouped by path in the file's order; the seed's order within a path.
        assert_eq!(
            keys,
            [
                "raw:ipv4.tcp.sender",
                "raw:ipv4.tcp.receiver",
                "raw:ipv4.udp.sender",
                "raw:ipv4.udp.receiver",
                "raw:ipv6.udp.receiver",
                "raw:ipv4.tcp.sender.p6",
                "wg:ipv4.tcp.sender",
                "wg:ipv6.tcp.sender",
                "gre:ipv4.tcp.sender",
            ]
        );
        // UDP is compared on the searched rate (350), not the best run (347).
        assert_eq!(
            all[2].outcome,
            Outcome::Measured {
                bps: 350e6,
                ratio: 350.0 / 347.0,
                within: true
            }
        );
        assert!(matches!(
            all[1].outcome,
            Outcome::Measured { within: false, .. }
        ));
        assert_eq!(all[4].outcome, Outcome::NotMeasured);
        assert!(matches!(&all[7].outcome, Outcome::Failed(e) if e.contains("connection refused")));
        assert_eq!(all[8].outcome, Outcome::NotMeasured);

        // Without a search, a UDP cell's figure is its best run.
        let mut bare = r.paths[0].cells[3].clone();
        assert_eq!(bare.cell.key(), "ipv4.udp.sender");
        bare.search = None;
        for run in &mut bare.runs {
            run.offered_bps = None;
        }
        assert_eq!(measured_bps(&bare), 347e6);

        // The tolerance's edge is within; a decimal shows when whole percent
        // would not look out.
        assert_eq!(deviation(1.154, 15.0), "+15.4");
        assert_eq!(deviation(1.23, 15.0), "+23");
        assert_eq!(deviation(0.6, 25.0), "-40");
        let mut edge = with_reference();
        edge.reference.as_mut().unwrap().tolerance.tcp_percent = 19.0;
        let o = &compare(&edge, edge.reference.as_ref().unwrap())[1].outcome;
        assert!(matches!(o, Outcome::Measured { within: true, .. }), "{o:?}");
    }

    #[test]
    fn markdown_section() {
        let md = render(&with_reference(), Format::Md, None);
        let plain = render(&fixture::results(), Format::Md, None);
        let section = md.strip_prefix(&plain).unwrap_or_else(|| panic!("{md}"));
        assert!(
            section.starts_with("\n### Published (the seed document, best of 5) vs measured\n\n"),
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
    fn several_streams_against_one() {
        let mut r = fixture::results();
        r.paths[0].scenario = Some("fast".into());
        let p6 = &mut r.paths[0].cells[0];
        assert_eq!(p6.cell.key(), "ipv4.tcp.sender.p6");
        p6.best_bps = 650e6;
        r.paths[0]
            .cells
            .iter_mut()
            .find(|c| c.cell.key() == "ipv4.tcp.sender")
            .unwrap()
            .best_bps = 249e6;
        assert_eq!(
            streams_lines(&r),
            ["fast/raw IPv4 TCP Sender: 6 streams 650 Mbit/s = 2.61x one stream (249)"]
        );
        // A path without the one-stream cell has no line.
        r.paths[0]
            .cells
            .retain(|c| c.cell.key() != "ipv4.tcp.sender");
        assert!(streams_lines(&r).is_empty());
    }

    #[test]
    fn without_a_reference_reports_are_as_before() {
        let r = fixture::results();
        assert_eq!(markdown(&r), None);
        assert!(check(&r).is_empty());
        let json = render(&r, Format::Json, None);
        assert!(!json.contains("\"reference\""), "{json}");
        assert!(!json.contains("\"notes\""), "{json}");
    }

    #[test]
    fn json_round_trips_with_a_reference_and_notes() {
        let mut r = with_reference();
        r.notes = vec!["the router is a model calibrated from the seed's figures".into()];
        let s = render(&r, Format::Json, None);
        assert!(s.contains("\"published_bps\": 656690000.0"), "{s}");
        assert_eq!(parse_json(&s, Path::new("r.json")).unwrap(), r);
        // Results saved before there were references read as having none.
        let old = render(&fixture::results(), Format::Json, None);
        let back = parse_json(&old, Path::new("old.json")).unwrap();
        assert_eq!((back.reference, back.notes.len()), (None, 0));
    }

    #[test]
    fn notes_under_the_report() {
        let mut r = with_reference();
        r.notes = vec![
            "the router is a model calibrated from the seed's figures".into(),
            "a_b".into(),
        ];
        let text = render(&r, Format::Text, None);
        assert!(
            text.ends_with(
                "refused\n\nNote: the router is a model calibrated from the seed's figures\nNote: a_b\n"
            ),
            "{text}"
        );
        let md = render(&r, Format::Md, None);
        assert!(md.ends_with("(941)\n\nNote: the router is a model calibrated from the seed's figures\n\nNote: a\\_b\n"), "{md}");
        // Notes without a reference come right after the last view.
        r.reference = None;
        let text = render(&r, Format::Text, None);
        assert!(text.ends_with("connection refused\n\nNote: the router is a model calibrated from the seed's figures\nNote: a_b\n"), "{text}");
    }

    #[test]
    fn expect_reference_fails_on_cells_out_of_tolerance_and_failed_cells() {
        let r = with_reference();
        let f: Vec<String> = check(&r).iter().map(|f| f.to_string()).collect();
        assert_eq!(
            f,
            [
                "reference raw: ipv4.tcp.receiver: measured 940.0 Mbit/s against published 790.0 Mbit/s \
                 (ratio 1.19, +19 %, outside +-15 %)",
                "reference raw: ipv4.tcp.sender.p6: measured 941.0 Mbit/s against published 656.7 Mbit/s \
                 (ratio 1.43, +43 %, outside +-15 %)",
                "reference wg: ipv6.tcp.sender: failed: connecting to [fd00:9::2]:5201: connection refused",
            ]
        );
        assert_eq!(check(&r)[0].measured, Some(940e6));

        // Within tolerance everywhere (what was not measured does not count).
        let mut ok = r.clone();
        let reference = ok.reference.as_mut().unwrap();
        reference.figures.retain(|f| {
            !matches!(
                f.cell.key().as_str(),
                "ipv4.tcp.receiver" | "ipv4.tcp.sender.p6"
            )
        });
        reference.figures.retain(|f| f.path != "wg");
        assert!(check(&ok).is_empty(), "{:?}", check(&ok));

        // Nothing measured at all is no pass.
        let mut none = r.clone();
        none.reference
            .as_mut()
            .unwrap()
            .figures
            .retain(|f| f.path == "gre");
        let f: Vec<String> = check(&none).iter().map(|f| f.to_string()).collect();
        assert_eq!(
            f,
            ["reference: none of the 1 published figures was measured; paths: raw, wg"]
        );
    }

    /// The fixture with published figures, marked: raw's IPv4 TCP cells (one
    /// within tolerance, one out) and a cell the run did not measure were
    /// calibrated from; the rest are predictions. A figure the lab does not
    /// predict, and a model ceiling on a cell nobody published.
    fn with_calibration() -> Results {
        let mut r = with_reference();
        let reference = r.reference.as_mut().unwrap();
        reference.marks_calibration = true;
        for f in &mut reference.figures {
            f.calibrated = f.path == "raw"
                && matches!(
                    f.cell.key().as_str(),
                    "ipv4.tcp.sender" | "ipv4.tcp.receiver" | "ipv6.udp.receiver"
                );
        }
        reference.unpredicted.push(Unpredicted {
            what: "RBBS speed test".into(),
            published_bps: 300e6,
            why: "its limit is the NGN's test server".into(),
        });
        let udp = &mut r.paths[1].cells[2];
        assert_eq!(udp.cell.key(), "ipv4.udp.sender");
        udp.model_limit = Some(crate::measure::results::ModelLimit {
            what: "router fast path ipv4 udp upload ceiling".into(),
            bps: 29.43e6,
        });
        r
    }

    const CALIBRATED_SECTION: &str = "\
ratio: measured / published; ok within TCP +-15 %, UDP +-25 %.
basis: calibrated, the lab's device models were set from this figure, so agreeing with it checks the emulation;
predicted, they were not, so agreeing with it tests the model.

path  cell                published                    measured  ratio  tolerance     basis
raw   IPv4 TCP Sender           941                         941   1.00  ok            calibrated
      IPv4 TCP Receiver         790                         940   1.19  OUT (+19 %)   calibrated
      IPv4 UDP Sender           347  350 (347 rcvd, 0.9 % lost)   1.01  ok            predicted
      IPv4 UDP Receiver         955  960 (955 rcvd, 0.5 % lost)   1.01  ok            predicted
      IPv6 UDP Receiver         940                           -      -  not measured  calibrated
      IPv4 TCP Sender x6     656.69                         941   1.43  OUT (+43 %)   predicted
wg    IPv4 TCP Sender           300                         292   0.97  ok            predicted
      IPv6 TCP Sender           280                           -      -  failed [1]    predicted
gre   IPv4 TCP Sender           500                           -      -  not measured  predicted

[1] wg IPv6 TCP Sender: connecting to [fd00:9::2]:5201: connection refused

1 of 2 calibrated cells reproduced within tolerance (1 not measured); 3 of 4 predicted cells within tolerance (1 not
measured, 1 failed); tolerance TCP +-15 %, UDP +-25 %
not predicted: RBBS speed test, published 300 Mbit/s: its limit is the NGN's test server
raw IPv4 TCP Sender: 6 streams 941 Mbit/s = 1.00x one stream (941)

Predictions for cells nobody published
======================================
What does the lab's model predict where no figure was published?
Mbit/s; measured: TCP the best run, UDP the highest offered rate at which a full-length run kept its loss within 10 %
(the best run where there was no search), with what that run received (what the chart plots) and lost. Nobody published
these cells: each figure is the lab model's prediction, not tested against a published one.
limited by: the tightest ceiling the lab's device models put on the cell's traffic, as the run recorded it; empty where
it recorded none.

path  cell                                 measured  limited by
raw   IPv6 TCP Sender                           928
wg    IPv4 TCP Receiver                         470
      IPv4 UDP Sender    120 (118 rcvd, 1.5 % lost)  router fast path ipv4 udp upload ceiling 29.43 Mbit/s
      IPv4 UDP Receiver  500 (480 rcvd, 3.0 % lost)
";

    #[test]
    fn calibrated_and_predicted_cells_are_marked_and_counted_apart() {
        let r = with_calibration();
        let reference = r.reference.as_ref().unwrap();
        let bases: Vec<String> = compare(&r, reference)
            .iter()
            .map(|c| format!("{}:{} {:?}", c.figure.path, c.figure.cell, c.basis))
            .collect();
        assert_eq!(
            bases,
            [
                "raw:ipv4.tcp.sender Some(Calibrated)",
                "raw:ipv4.tcp.receiver Some(Calibrated)",
                "raw:ipv4.udp.sender Some(Predicted)",
                "raw:ipv4.udp.receiver Some(Predicted)",
                "raw:ipv6.udp.receiver Some(Calibrated)",
                "raw:ipv4.tcp.sender.p6 Some(Predicted)",
                "wg:ipv4.tcp.sender Some(Predicted)",
                "wg:ipv6.tcp.sender Some(Predicted)",
                "gre:ipv4.tcp.sender Some(Predicted)",
            ]
        );
        assert_eq!(
            summary(&r, reference),
            "1 of 2 calibrated cells reproduced within tolerance (1 not measured); 3 of 4 predicted cells \
             within tolerance (1 not measured, 1 failed); tolerance TCP +-15 %, UDP +-25 %"
        );
        // Nothing calibrated, or nothing predicted, is said so.
        let mut all = r.clone();
        for f in &mut all.reference.as_mut().unwrap().figures {
            f.calibrated = true;
        }
        assert_eq!(
            summary(&all, all.reference.as_ref().unwrap()),
            "4 of 6 calibrated cells reproduced within tolerance (2 not measured, 1 failed); no predicted cells; \
             tolerance TCP +-15 %, UDP +-25 %"
        );
        // Without marks, no cell has a basis and the summary is as before.
        let plain = with_reference();
        assert!(
            compare(&plain, plain.reference.as_ref().unwrap())
                .iter()
                .all(|c| c.basis.is_none())
        );

        // The text report: the published view with its basis column, the
        // summary, what the lab does not predict, then the predictions.
        let text = render(&r, Format::Text, None);
        let at = text.find("ratio: measured / published").unwrap();
        let end = text.find("\nraw across").unwrap_or(text.len());
        let section = &text[at..end];
        assert!(section.starts_with(CALIBRATED_SECTION), "{section}");
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

    #[test]
    fn unpredicted_figures_without_calibration_marks() {
        let mut r = with_reference();
        r.reference.as_mut().unwrap().unpredicted.push(Unpredicted {
            what: "RBBS speed test".into(),
            published_bps: 300e6,
            why: "the NGN's test server".into(),
        });
        let text = render(&r, Format::Text, None);
        let line = "not predicted: RBBS speed test, published 300 Mbit/s: the NGN's test server\n";
        assert!(
            text.contains(&format!("1 failed\n{line}raw IPv4 TCP Sender: 6 streams")),
            "{text}"
        );
        assert!(
            !text.contains("basis") && !text.contains("Predictions"),
            "{text}"
        );
        // Otherwise it is the report without them.
        let plain = render(&with_reference(), Format::Text, None);
        assert_eq!(text.replacen(line, "", 1), plain);
    }

    #[test]
    fn expect_reference_checks_both_kinds_and_names_the_basis() {
        let f: Vec<String> = check(&with_calibration())
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(
            f,
            [
                "reference raw (calibrated): ipv4.tcp.receiver: measured 940.0 Mbit/s against published \
                 790.0 Mbit/s (ratio 1.19, +19 %, outside +-15 %)",
                "reference raw (predicted): ipv4.tcp.sender.p6: measured 941.0 Mbit/s against published \
                 656.7 Mbit/s (ratio 1.43, +43 %, outside +-15 %)",
                "reference wg (predicted): ipv6.tcp.sender: failed: connecting to [fd00:9::2]:5201: connection refused",
            ]
        );
    }

    #[test]
    fn json_keeps_the_marks_the_limits_and_the_unpredicted() {
        let r = with_calibration();
        let s = render(&r, Format::Json, None);
        for want in [
            "\"calibrated\": true",
            "\"marks_calibration\": true",
            "\"unpredicted\": [",
            "\"why\": \"its limit is the NGN's test server\"",
            "\"model_limit\": {\n",
            "\"what\": \"router fast path ipv4 udp upload ceiling\"",
        ] {
            assert!(s.contains(want), "{want} not in {s}");
        }
        assert_eq!(parse_json(&s, Path::new("r.json")).unwrap(), r);
        // Unmarked results say nothing of it.
        let s = render(&with_reference(), Format::Json, None);
        for absent in [
            "\"calibrated\"",
            "marks_calibration",
            "unpredicted",
            "model_limit",
        ] {
            assert!(!s.contains(absent), "{absent} in {s}");
        }
    }
}
