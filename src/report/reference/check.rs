//! `--expect-reference`: every measured cell within tolerance, calibrated
//! and predicted alike, each miss one [`Failure`].

use super::{Outcome, compare, deviation};
use crate::measure::results::Results;
use crate::report::expect::Failure;
use crate::report::numbers::{plain, rate, sig};
use crate::report::words::path_list;

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
                path_list(r)
            ),
        });
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture::{self, with_calibration, with_reference};

    #[test]
    fn without_a_reference_nothing_fails() {
        assert!(check(&fixture::results()).is_empty());
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
}
