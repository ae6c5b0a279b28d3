//! The published view ([`ViewKind::Published`]): the topology's `[reference]`
//! figures beside the measured ones (the NVR500 study's table), per path and cell,
//! with the ratio and the verdict against the tolerance. Where the reference
//! marks calibration, each row is also `calibrated` or `predicted`
//! ([`Column::Basis`]).

use super::{Column, Figures, Metric, Point, Row, Series, Verdict, View, ViewKind, index_of};
use crate::measure::results::Results;
use crate::report::cells::{study_order, udp_figure};
use crate::report::reference::{self, Comparison, Outcome, compare};
use crate::report::wire;
use crate::topology::reference::Reference;
use crate::vocab::Cell;

/// The published view; `None` without a reference.
pub(super) fn published(r: &Results) -> Option<View> {
    let reference = r.reference.as_ref()?;
    let mut categories: Vec<String> = Vec::new();
    let mut rows: Vec<Row> = compare(r, reference)
        .iter()
        .map(|c| row(r, reference, c, &mut categories))
        .collect();
    let categories = in_study_order(&categories, &mut rows);
    let series = series(r, &rows, categories.len());
    let mut notes = vec![reference::summary(r, reference)];
    notes.extend(reference::unpredicted_lines(reference));
    notes.extend(reference::streams_lines(r));
    let mut view = View {
        kind: ViewKind::Published,
        id: "published".into(),
        title: reference::title(reference),
        question: "Does each measured figure agree with the published one?".into(),
        columns: vec![
            Column::Path,
            Column::Cell,
            Column::Published,
            Column::Measured,
            Column::Ratio,
            Column::Verdict,
        ],
        categories,
        rows,
        series,
        legend: reference::legend(r, reference),
        notes,
        timelines: Vec::new(),
    };
    add_wire_and_basis(&mut view, reference);
    Some(view)
}

/// One published figure's row: what the run measured for it, the ratio and
/// the verdict, or why there is none.
fn row(r: &Results, reference: &Reference, c: &Comparison, categories: &mut Vec<String>) -> Row {
    let f = c.figure;
    let path = r.paths.iter().position(|p| p.label() == f.path);
    let cell = path.and_then(|i| r.paths[i].cell(&f.cell));
    let mut figures = Figures {
        published_bps: Some(f.published_bps),
        basis: c.basis,
        wire_limit: cell.and_then(|x| x.wire_limit.clone()),
        line_rate: path
            .zip(cell)
            .and_then(|(i, x)| wire::line_rate(&r.paths[i], x)),
        ..Figures::default()
    };
    match &c.outcome {
        Outcome::NotMeasured => figures.verdict = Some(Verdict::NotMeasured),
        Outcome::Failed(e) => {
            figures.verdict = Some(Verdict::Failed);
            figures.failed = Some(e.clone());
        }
        Outcome::Measured { bps, ratio, within } => {
            figures.rate_bps = Some(*bps);
            figures.at_underlay = path
                .zip(cell)
                .is_some_and(|(i, x)| crate::report::hosts::marked(r, &r.paths[i], x));
            figures.ratio = Some(*ratio);
            figures.udp = cell.and_then(udp_figure);
            figures.verdict = Some(if *within {
                Verdict::Within
            } else {
                Verdict::Out(reference::deviation(
                    *ratio,
                    reference.tolerance.of(f.cell.protocol),
                ))
            });
        }
    }
    Row {
        category: index_of(categories, f.cell.title()),
        path,
        label: f.path.clone(),
        short: f.path.clone(),
        cell: f.cell,
        baseline: None,
        figures,
    }
}

/// The categories in the NVR500 study's order, as the chart's axis reads them, with
/// the rows pointed at them anew (the rows themselves stay in the file's order).
fn in_study_order(categories: &[String], rows: &mut [Row]) -> Vec<String> {
    let mut order: Vec<(Cell, usize)> = rows.iter().map(|r| (r.cell, r.category)).collect();
    order.sort_by_key(|(c, _)| study_order(c));
    order.dedup_by_key(|(_, i)| *i);
    let remap: Vec<usize> = (0..categories.len())
        .map(|old| order.iter().position(|(_, i)| *i == old).unwrap_or(old))
        .collect();
    for row in rows.iter_mut() {
        row.category = remap[row.category];
    }
    order.iter().map(|(_, i)| categories[*i].clone()).collect()
}

/// Per path, in the rows' order, its published figures and its measured ones.
fn series(r: &Results, rows: &[Row], categories: usize) -> Vec<Series> {
    let mut labels: Vec<&String> = Vec::new();
    for row in rows {
        if !labels.contains(&&row.label) {
            labels.push(&row.label);
        }
    }
    let mut series = Vec::new();
    for label in labels {
        let path = r.paths.iter().position(|p| &p.label() == label);
        let mut measured = vec![None; categories];
        let mut published = vec![None; categories];
        for row in rows.iter().filter(|x| &x.label == label) {
            measured[row.category] = row.figures.plotted_bps().map(Point::flat);
            published[row.category] = row.figures.published_bps.map(Point::flat);
        }
        series.push(Series {
            label: format!("{label} published"),
            path,
            metric: Metric::Published,
            points: published,
        });
        series.push(Series {
            label: label.clone(),
            path,
            metric: Metric::Rate,
            points: measured,
        });
    }
    series
}

/// The wire limit's column, legend and notes where a row has one; the basis
/// column where the reference marks calibration or the line rate predicts a
/// row.
fn add_wire_and_basis(view: &mut View, reference: &Reference) {
    let limits: Vec<_> = view
        .rows
        .iter()
        .filter_map(|x| x.figures.wire_limit.as_ref())
        .collect();
    if !limits.is_empty() {
        view.columns.push(Column::WireLimit);
        view.legend.push(wire::LEGEND.into());
        view.notes.extend(wire::notes(limits));
    }
    let line_rate = view.rows.iter().any(|x| x.figures.line_rate.is_some());
    if reference.marks_calibration || line_rate {
        view.columns.push(Column::Basis);
    }
    if line_rate {
        view.legend.push(wire::LINE_RATE_LEGEND.into());
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{ids, row};
    use super::super::{Column, Metric, ViewKind, views};
    use crate::report::fixture::{self, with_calibration, with_reference};
    use crate::report::{Format, render};
    use crate::topology::reference::Unpredicted;

    const SECTION: &str = "\
Published (the NVR500 study, best of 5) vs measured
===================================================
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
    fn the_basis_column_and_the_predictions_as_text() {
        // The published view with its basis column, the summary, what the
        // lab does not predict, then the predictions.
        let text = render(&with_calibration(), Format::Text, None);
        let at = text.find("ratio: measured / published").unwrap();
        let end = text.find("\nraw across").unwrap_or(text.len());
        let section = &text[at..end];
        assert!(section.starts_with(CALIBRATED_SECTION), "{section}");
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
    fn the_main_jobs_published_figures_in_the_files_order() {
        let v = views(&fixture::main_job());
        let pb = &v[0];
        assert_eq!(
            (pb.kind, pb.id.as_str()),
            (ViewKind::Published, "published")
        );
        assert_eq!(pb.rows.len(), 25);
        assert_eq!(Column::Verdict.text(&pb.rows[0]), "ok");
        assert_eq!(
            Column::Measured.text(row(pb, "fast/raw", "ipv4.udp.sender")),
            "32.7 (32.4 rcvd, 1.0 % lost)"
        );
        assert_eq!(
            Column::Verdict.text(row(pb, "fast/raw", "ipv4.tcp.receiver")),
            "OUT (-25 %)"
        );
        assert_eq!(
            pb.notes,
            [
                "24 of 25 cells within tolerance (TCP +-15 %, UDP +-25 %)",
                "fast/speedtest IPv6 TCP Receiver: 6 streams 650 Mbit/s = 2.61x one stream (249)"
            ]
        );
        // Published and measured series per path, categories in the NVR500 study's order.
        assert_eq!(pb.series[0].label, "none/raw published");
        assert_eq!(pb.series[0].metric, Metric::Published);
        assert_eq!(pb.series[1].metric, Metric::Rate);
        assert_eq!(pb.categories[0], "IPv4 TCP Sender");
        assert_eq!(pb.categories.last().unwrap(), "IPv6 TCP Receiver x6");
    }

    #[test]
    fn a_basis_per_row_where_the_reference_marks_calibration() {
        let r = fixture::calibrated();
        let pb = &views(&r)[0];
        assert_eq!(pb.columns.last(), Some(&Column::Basis));
        assert_eq!(
            Column::Basis.text(row(pb, "fast/raw", "ipv4.tcp.sender")),
            "calibrated"
        );
        assert_eq!(
            Column::Basis.text(row(pb, "fast/raw", "ipv4.udp.sender")),
            "predicted"
        );
        // No calibration marks: no basis, and no predictions view.
        let mut unmarked = r.clone();
        unmarked.reference.as_mut().unwrap().marks_calibration = false;
        let v = views(&unmarked);
        assert!(!ids(&v).contains(&"predictions"));
        assert!(!v[0].columns.contains(&Column::Basis));
    }
}
