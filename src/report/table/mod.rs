//! The text and markdown reports. `text` prints the views
//! ([`super::views`]) laid out by `view_text`; `markdown` lays out the full
//! matrix (`matrix`: the figures before they are laid out) as a GitHub table,
//! then the published figures ([`super::reference`]); both end with the run's
//! notes.

mod markdown;
mod matrix;
mod published;
mod text;
mod view_text;

pub(crate) use matrix::heading;
pub(crate) use text::path_line;
pub(crate) use view_text::footnote;
#[cfg(test)]
pub(crate) use view_text::{WIDTH, view_text};

use super::md::md_escape;
use crate::measure::results::Results;
use std::fmt::Write;

/// The text report: the heading, where each path goes, then one view per
/// question ([`super::views`]), each within 120 columns, and the run's
/// notes. The full matrix is in `md`, `csv` and `json`.
pub(crate) fn text(r: &Results, baseline: Option<&str>) -> String {
    let mut out = matrix::heading(r);
    out.push('\n');
    if r.paths.is_empty() {
        out.push_str("\nno paths measured\n");
    } else {
        out.push('\n');
        for p in &r.paths {
            let _ = writeln!(out, "{}", text::path_line(p));
        }
    }
    for v in super::views::views_with_baseline(r, baseline) {
        out.push('\n');
        out.push_str(&view_text::view_text(&v));
    }
    if !r.notes.is_empty() {
        out.push('\n');
        for n in &r.notes {
            let lines = view_text::wrap(&format!("Note: {n}"), view_text::WIDTH - 6);
            let _ = writeln!(out, "{}", lines.join("\n      "));
        }
    }
    out
}

/// The markdown report: the matrix, then the published figures and the run's
/// notes where there are any.
pub(crate) fn markdown(r: &Results, baseline: Option<&str>) -> String {
    let mut out = markdown::markdown_matrix(r, baseline);
    if let Some(section) = published::markdown(r) {
        out.push('\n');
        out.push_str(&section);
    }
    for n in &r.notes {
        let _ = write!(out, "\nNote: {}\n", md_escape(n));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::report::fixture::with_reference;
    use crate::report::{Format, render};

    #[test]
    fn notes_under_the_report() {
        let mut r = with_reference();
        r.notes = vec![
            "the router is a model calibrated from the NVR500 study's figures".into(),
            "a_b".into(),
        ];
        let text = render(&r, Format::Text, None);
        assert!(
            text.ends_with(
                "refused\n\nNote: the router is a model calibrated from the NVR500 study's figures\nNote: a_b\n"
            ),
            "{text}"
        );
        let md = render(&r, Format::Md, None);
        assert!(md.ends_with("(941)\n\nNote: the router is a model calibrated from the NVR500 study's figures\n\nNote: a\\_b\n"), "{md}");
        // Notes without a reference come right after the last view.
        r.reference = None;
        let text = render(&r, Format::Text, None);
        assert!(text.ends_with("connection refused\n\nNote: the router is a model calibrated from the NVR500 study's figures\nNote: a_b\n"), "{text}");
    }
}
