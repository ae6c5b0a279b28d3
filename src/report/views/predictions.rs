//! The predictions view ([`ViewKind::Predictions`]): where the reference marks
//! calibration (the lab has a model), every measured cell nobody published a
//! figure for: the model's prediction, untested, with the device-model
//! ceiling that limits it where the run recorded one ([`Column::LimitedBy`]).

use super::{Column, Figures, Metric, Point, Row, Series, View, ViewKind, index_of};
use crate::measure::results::Results;
use crate::report::cells::{loss_within, measured_bps, study_order, udp_figure};
use crate::report::reference::unpublished;
use crate::report::wire;
use crate::vocab::Cell;

/// Every measured cell nobody published a figure for, where the reference
/// marks calibration: the lab model's predictions, each with the ceiling that
/// limits it where the run recorded one. `None` where there are none.
pub(crate) fn predictions(r: &Results) -> Option<View> {
    let cells = unpublished(r);
    if cells.is_empty() {
        return None;
    }
    let mut order: Vec<Cell> = cells.iter().map(|(_, c)| c.cell).collect();
    order.sort_by_key(study_order);
    order.dedup();
    let mut categories: Vec<String> = Vec::new();
    for c in &order {
        index_of(&mut categories, c.title());
    }
    let rows: Vec<Row> = cells
        .iter()
        .map(|&(i, c)| {
            let label = r.paths[i].label();
            Row {
                category: index_of(&mut categories, c.cell.title()),
                path: Some(i),
                short: label.clone(),
                label,
                cell: c.cell,
                baseline: None,
                figures: Figures {
                    rate_bps: Some(measured_bps(c)),
                    at_underlay: crate::report::hosts::marked(r, &r.paths[i], c),
                    udp: udp_figure(c),
                    model_limit: c.model_limit.clone(),
                    wire_limit: c.wire_limit.clone(),
                    ..Figures::default()
                },
            }
        })
        .collect();
    let mut view = View {
        kind: ViewKind::Predictions,
        id: "predictions".into(),
        title: "Predictions for cells nobody published".into(),
        question: "What does the lab's model predict where no figure was published?".into(),
        columns: vec![Column::Path, Column::Cell, Column::Measured],
        series: series(&rows, categories.len()),
        categories,
        rows,
        timelines: Vec::new(),
        legend: vec![legend(r)],
        notes: Vec::new(),
    };
    add_limits(&mut view);
    Some(view)
}

/// One bar series per path, in the rows' order.
fn series(rows: &[Row], categories: usize) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for row in rows {
        let i = match series.iter().position(|s| s.label == row.label) {
            Some(i) => i,
            None => {
                series.push(Series {
                    label: row.label.clone(),
                    path: row.path,
                    metric: Metric::Rate,
                    points: vec![None; categories],
                });
                series.len() - 1
            }
        };
        series[i].points[row.category] = row.figures.plotted_bps().map(Point::flat);
    }
    series
}

fn legend(r: &Results) -> String {
    format!(
        "Mbit/s; measured: TCP the best run, UDP the highest offered rate at which a full-length run kept its loss{} \
         (the best run where there was no search), with what that run received (what the chart plots) and lost. Nobody published these cells: each figure is the lab model's \
         prediction, not tested against a published one.",
        loss_within(r)
    )
}

/// The columns, legend and notes of the model's ceilings and the wire
/// limits, where a row has one.
fn add_limits(view: &mut View) {
    if view.rows.iter().any(|x| x.figures.model_limit.is_some()) {
        view.columns.push(Column::LimitedBy);
        view.legend.push(
            "limited by: the tightest ceiling the lab's device models put on the cell's traffic, as the run \
             recorded it; empty where it recorded none."
                .to_string(),
        );
    }
    let limits: Vec<_> = view
        .rows
        .iter()
        .filter_map(|x| x.figures.wire_limit.as_ref())
        .collect();
    if !limits.is_empty() {
        view.columns.push(Column::WireLimit);
        view.legend.push(wire::LEGEND.into());
        view.notes = wire::notes(limits);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{ids, row};
    use super::super::{Column, Metric, ViewKind, views};
    use super::*;
    use crate::report::fixture;

    #[test]
    fn predictions_for_the_cells_nobody_published() {
        let r = fixture::calibrated();
        let v = views(&r);
        // The predictions right after the published figures; the other views
        // as without marks.
        let mut without = ids(&views(&fixture::main_job()))
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        without.insert(1, "predictions".into());
        assert_eq!(ids(&v), without);
        let p = &v[1];
        assert_eq!(p.kind, ViewKind::Predictions);
        assert_eq!(
            p.columns,
            [
                Column::Path,
                Column::Cell,
                Column::Measured,
                Column::LimitedBy
            ]
        );
        // Every measured cell without a published figure, none with one.
        let published = r.reference.as_ref().unwrap();
        let want: usize = r
            .paths
            .iter()
            .map(|x| {
                x.cells
                    .iter()
                    .filter(|c| {
                        !published
                            .figures
                            .iter()
                            .any(|f| f.path == x.label() && f.cell == c.cell)
                    })
                    .count()
            })
            .sum();
        assert_eq!(p.rows.len(), want);
        assert_eq!(want, 28, "the fixture's unpublished cells");
        let dslite = row(p, "fast/dslite", "ipv4.udp.sender");
        assert_eq!(dslite.figures.rate_bps, Some(30e6), "the searched rate");
        assert_eq!(
            Column::LimitedBy.text(dslite),
            "nvr500 fast path ipv4 udp upload ceiling 30.12 Mbit/s"
        );
        assert_eq!(
            Column::LimitedBy.text(row(p, "fast/wireguard", "ipv4.tcp.sender")),
            "nvr500 fast path ipv4 tcp upload ceiling 824 Mbit/s"
        );
        assert_eq!(
            Column::LimitedBy.text(row(p, "fast/ikev2", "ipv4.tcp.sender")),
            ""
        );
        // One bar series per path.
        assert_eq!(p.series.len(), 7);
        assert!(p.series.iter().all(|s| s.metric == Metric::Rate));

        // No calibration marks, no predictions: a cell's ceiling alone says
        // nothing about a model it was predicted by.
        let mut unmarked = r.clone();
        unmarked.reference.as_mut().unwrap().marks_calibration = false;
        assert_eq!(predictions(&unmarked), None);
    }
}
