//! CI expectations (`--expect`): a threshold on one cell's figure, or on the
//! ratio of two paths' figures, checked against [`Results`](crate::measure::results::Results).
//!
//! ```text
//! ipv4.tcp.sender >= 500M              the cell on the baseline path
//! wg:ipv4.tcp.sender > 100M            the cell on path wg
//! wg/raw >= 0.2                        wg's over raw's, for every cell both have
//! wg/raw:ipv4.tcp.sender >= 0.2        ... for one cell
//! ```
//!
//! Figures are compared on the **median** of a cell's runs: it is what a rerun
//! most likely reproduces, so a CI gate on it flakes least. A cell key may end
//! in `.best` (the NVR500 study's rule), `.min` or `.max` to compare that instead.
//!
//! What an expectation is ([`Expectation`]) is written once in `expectation`;
//! `parse` reads one from its text and `check` holds it against the results,
//! each failure one line ([`Failure`]).

mod check;
mod expectation;
mod parse;

pub use check::{Failure, check, check_with_baseline, latency_figure};
pub use expectation::{Expectation, Op, Percentile, Phase, Statistic, Subject, Way};
pub use parse::{FORMS, parse};
