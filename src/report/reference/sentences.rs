//! The sentences around the comparisons: the section's title and legend, the
//! summary of verdicts, the figures the lab does not predict, and how several
//! streams compare with one.

use super::{Basis, Comparison, Outcome, compare};
use crate::measure::results::{CellResult, Results};
use crate::report::cells::{loss_within, measured_bps, study_order};
use crate::report::numbers::{mbit, plain};
use crate::topology::reference::{Reference, Tolerance, Unpredicted};
use crate::vocab::{Cell, Proto};
use std::fmt::Write;

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

/// The published view's title, with the figures' source where the file names it.
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
    let tolerance = tolerances(&reference.tolerance);
    if reference.marks_calibration {
        return format!(
            "{}; {}; tolerance {tolerance}",
            basis_summary(&all, Basis::Calibrated),
            basis_summary(&all, Basis::Predicted),
        );
    }
    let t = Tally::of(all.iter().map(|c| &c.outcome));
    let mut s = format!(
        "{} of {} cells within tolerance ({tolerance})",
        t.within, t.measured
    );
    if let Some(rest) = t.rest() {
        let _ = write!(s, "; {rest}");
    }
    s
}

/// The summary of one basis: "9 of 10 predicted cells within tolerance (1
/// failed)", "no calibrated cells".
fn basis_summary(all: &[Comparison], basis: Basis) -> String {
    let word = basis.word();
    let of: Vec<&Outcome> = all
        .iter()
        .filter(|c| c.basis == Some(basis))
        .map(|c| &c.outcome)
        .collect();
    if of.is_empty() {
        return format!("no {word} cells");
    }
    let t = Tally::of(of.into_iter());
    let (within, measured) = (t.within, t.measured);
    let mut s = match basis {
        Basis::Calibrated => {
            format!("{within} of {measured} {word} cells reproduced within tolerance")
        }
        Basis::Predicted => format!("{within} of {measured} {word} cells within tolerance"),
    };
    if let Some(rest) = t.rest() {
        let _ = write!(s, " ({rest})");
    }
    s
}

/// The outcomes of some comparisons, counted.
struct Tally {
    within: usize,
    measured: usize,
    missing: usize,
    failed: usize,
}

impl Tally {
    fn of<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> Tally {
        let mut t = Tally {
            within: 0,
            measured: 0,
            missing: 0,
            failed: 0,
        };
        for o in outcomes {
            match o {
                Outcome::Measured { within, .. } => {
                    t.measured += 1;
                    t.within += usize::from(*within);
                }
                Outcome::NotMeasured => t.missing += 1,
                Outcome::Failed(_) => t.failed += 1,
            }
        }
        t
    }

    /// "1 not measured, 2 failed"; `None` where nothing is missing or failed.
    fn rest(&self) -> Option<String> {
        let mut rest = Vec::new();
        if self.missing > 0 {
            rest.push(format!("{} not measured", self.missing));
        }
        if self.failed > 0 {
            rest.push(format!("{} failed", self.failed));
        }
        (!rest.is_empty()).then(|| rest.join(", "))
    }
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
        many.sort_by_key(|c| study_order(&c.cell));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{self, with_calibration, with_reference};

    #[test]
    fn the_summary_counts_verdicts() {
        let r = with_reference();
        assert_eq!(
            summary(&r, r.reference.as_ref().unwrap()),
            "4 of 6 cells within tolerance (TCP +-15 %, UDP +-25 %); 2 not measured, 1 failed"
        );
    }

    #[test]
    fn calibrated_and_predicted_cells_are_counted_apart() {
        let r = with_calibration();
        assert_eq!(
            summary(&r, r.reference.as_ref().unwrap()),
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
}
