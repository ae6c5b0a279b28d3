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

use super::hosts;
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
    if let Some(section) = hosts::section(r) {
        out.push('\n');
        out.push_str(&text::hosts_text(&section));
    }
    for v in super::views::views_with_baseline(r, baseline) {
        out.push('\n');
        out.push_str(&view_text::view_text(&v));
    }
    let notes = hosts::all_notes(r);
    if !notes.is_empty() {
        out.push('\n');
        for n in &notes {
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
    if let Some(section) = hosts::section(r) {
        out.push('\n');
        out.push_str(&markdown::hosts_markdown(&section));
    }
    if let Some(section) = published::markdown(r) {
        out.push('\n');
        out.push_str(&section);
    }
    for n in &hosts::all_notes(r) {
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

    /// A lab placed on several hosts: the underlays and the hosts crossed
    /// after where each path goes, the cells at the underlay's capacity
    /// marked, and one note that says what the mark means.
    #[test]
    fn underlays_hosts_crossed_and_marks() {
        let r = crate::report::fixture::placed();
        let text = render(&r, Format::Text, None);
        assert!(
            text.contains(
                "wg: lan1 -> lan2 (10.9.0.2, fd00:9::2)\n\
                 \n\
                 Underlay between hosts\n\
                 ======================\n"
            ),
            "{text}"
        );
        for line in [
            "\npc -> router: upload 9400 Mbit/s, download 9300 Mbit/s (198.18.230.1 and 198.18.230.2)\n",
            "\nraw: pc -> router -> server\nwg: pc -> router -> server\n\n",
            // raw's IPv4 TCP sender (median 939) marked, its receiver not.
            "\nIPv4 TCP Sender     raw          939^                      0.05\n",
            "\nIPv4 TCP Receiver   raw          938                       0.05\n",
            "\n                    wg    failed [1]       -\n",
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
        let note = "^ at 90 % or more of the underlay from router to server (1000 Mbit/s): \
                    the figure may be the underlay's, not the path's";
        assert!(
            text.ends_with(
                "\n\nNote: ^ at 90 % or more of the underlay from router to server (1000 Mbit/s): \
                 the figure may be the underlay's, not\n      the path's\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("Note: ^").count(), 1, "{text}");

        let md = render(&r, Format::Md, None);
        assert!(md.contains("\n### Underlay between hosts\n\n"), "{md}");
        assert!(md.contains("\n- raw: pc -\\> router -\\> server\n"), "{md}");
        assert!(md.contains("| IPv4 TCP Sender    |     941^ |"), "{md}");
        assert!(
            md.ends_with(&format!("\nNote: {}\n", crate::report::md::md_escape(note))),
            "{md}"
        );

        let html = render(&r, Format::Html, None);
        assert!(html.contains("<li><a href=\"#underlays\">Underlay between hosts</a></li>"));
        assert!(
            html.contains("<li>raw: pc -&gt; router -&gt; server</li>"),
            "{html}"
        );
        assert!(html.contains("<td class=\"num\">939^</td>"), "{html}");
        assert!(html.contains("<li>^ at 90 % or more of the underlay from router to server"));
        // One machine: none of it.
        for f in [Format::Text, Format::Md, Format::Html, Format::Csv] {
            let one = render(&crate::report::fixture::results(), f, None);
            for absent in ["Underlay", "underlay", "^"] {
                assert!(!one.contains(absent), "{absent} in {f:?}: {one}");
            }
        }
    }
}
