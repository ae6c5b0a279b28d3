//! Each published figure against the run: the measured cell it is read
//! from, the ratio, whether it is within tolerance, and whether the lab's
//! models were calibrated from it ([`Basis`]).
//!
//! A measured figure is read the way the NVR500 study defined its own
//! ([`measured_bps`]): for TCP the best of the runs; for UDP the searched rate.

use crate::measure::results::{CellResult, Results};
use crate::report::cells::{measured_bps, study_order};
use crate::report::words::one_line;
use crate::topology::reference::{PublishedFigure, Reference};
use crate::vocab::Cell;

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

/// Every published figure against the run: grouped by path in the order the
/// file lists them, cells in the NVR500 study's order within a path.
pub fn compare<'a>(r: &Results, reference: &'a Reference) -> Vec<Comparison<'a>> {
    let mut paths: Vec<&str> = Vec::new();
    for f in &reference.figures {
        if !paths.contains(&f.path.as_str()) {
            paths.push(&f.path);
        }
    }
    let mut figures: Vec<&PublishedFigure> = reference.figures.iter().collect();
    figures.sort_by_key(|f| {
        (
            paths.iter().position(|p| *p == f.path),
            study_order(&f.cell),
        )
    });
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
pub(crate) fn measured_cell<'r>(
    r: &'r Results,
    figure: &PublishedFigure,
) -> Option<&'r CellResult> {
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
/// index, cell) in the results' path order, cells in the NVR500 study's order. Failed
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
        cells.sort_by_key(|c| study_order(&c.cell));
        out.extend(cells.into_iter().map(|c| (i, c)));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{with_calibration, with_reference};

    #[test]
    fn grouped_by_path_in_the_files_order() {
        let r = with_reference();
        let keys: Vec<String> = compare(&r, r.reference.as_ref().unwrap())
            .iter()
            .map(|c| format!("{}:{}", c.figure.path, c.figure.cell))
            .collect();
        // The NVR500 study's order within a path.
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
    }

    #[test]
    fn ratios_verdicts_and_what_was_not_measured() {
        let r = with_reference();
        let all = compare(&r, r.reference.as_ref().unwrap());
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
    }

    #[test]
    fn the_tolerances_edge_is_within() {
        // A decimal shows when whole percent would not look out.
        assert_eq!(deviation(1.154, 15.0), "+15.4");
        assert_eq!(deviation(1.23, 15.0), "+23");
        assert_eq!(deviation(0.6, 25.0), "-40");
        let mut edge = with_reference();
        edge.reference.as_mut().unwrap().tolerance.tcp_percent = 19.0;
        let o = &compare(&edge, edge.reference.as_ref().unwrap())[1].outcome;
        assert!(matches!(o, Outcome::Measured { within: true, .. }), "{o:?}");
    }

    #[test]
    fn calibrated_and_predicted_cells_are_marked() {
        let r = with_calibration();
        let bases: Vec<String> = compare(&r, r.reference.as_ref().unwrap())
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
        // Without marks, no cell has a basis.
        let plain = with_reference();
        assert!(
            compare(&plain, plain.reference.as_ref().unwrap())
                .iter()
                .all(|c| c.basis.is_none())
        );
    }

    #[test]
    fn unpublished_cells_only_where_calibration_is_marked() {
        let r = with_calibration();
        let keys: Vec<String> = unpublished(&r)
            .iter()
            .map(|(i, c)| format!("{}:{}", r.paths[*i].label(), c.cell))
            .collect();
        // wg's failed cell predicts nothing.
        assert_eq!(
            keys,
            [
                "raw:ipv6.tcp.sender",
                "wg:ipv4.tcp.receiver",
                "wg:ipv4.udp.sender",
                "wg:ipv4.udp.receiver"
            ]
        );
        assert!(unpublished(&with_reference()).is_empty());
    }
}
