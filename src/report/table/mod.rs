//! The text and markdown reports. Both read one matrix (`matrix`: the figures
//! before they are laid out), so they always agree; `text` lays it out as
//! aligned text after the seed's listing, `markdown` as a GitHub table. Here
//! each report is put together: the matrix, then the published figures
//! ([`super::reference`]) and the run's notes where there are any.

mod markdown;
mod matrix;
mod text;

use super::md::md_escape;
use crate::measure::model::Results;
use std::fmt::Write;

/// The text report: the listing and the matrix, then the published figures
/// and the run's notes where there are any.
pub(crate) fn text(r: &Results, baseline: Option<&str>) -> String {
    let mut out = text::text_matrix(r, baseline);
    if let Some(section) = super::reference::text(r) {
        out.push('\n');
        out.push_str(&section);
    }
    if !r.notes.is_empty() {
        out.push('\n');
        for n in &r.notes {
            let _ = writeln!(out, "Note: {n}");
        }
    }
    out
}

/// The markdown report: the matrix, then the published figures and the run's
/// notes where there are any.
pub(crate) fn markdown(r: &Results, baseline: Option<&str>) -> String {
    let mut out = markdown::markdown_matrix(r, baseline);
    if let Some(section) = super::reference::markdown(r) {
        out.push('\n');
        out.push_str(&section);
    }
    for n in &r.notes {
        let _ = write!(out, "\nNote: {}\n", md_escape(n));
    }
    out
}
