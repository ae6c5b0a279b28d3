//! Published figures beside measured ones: the topology's `[reference]` (the
//! NVR500 study's table) against the run, cell by cell ([`compare()`]), the sentences
//! the reports write around them, and `--expect-reference` ([`check()`]).
//!
//! Where the reference says which figures the lab's device models were
//! calibrated from, each comparison is [`Basis`] `calibrated` (agreement
//! checks the emulation) or `predicted` (a test of the model). Figures the lab
//! does not predict (`[[reference.unpredicted]]`) are listed with the reason.

mod check;
mod compare;
mod sentences;

pub use check::check;
pub use compare::{Basis, Comparison, Outcome, compare, published, unpublished};
pub(crate) use compare::{deviation, measured_cell};
pub(crate) use sentences::{legend, streams_lines, summary, title, unpredicted_lines};
