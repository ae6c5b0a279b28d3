//! Reports: what a person reads and what a CI checks, all rendered from
//! [`Results`] and nothing else, so `tunbench report RESULTS.json` re-renders a
//! saved measurement exactly as the measuring run would have. [`Format`] lists
//! the formats; every rendering ends with a newline.
//!
//! The text report and the HTML page show [`views`], one per question the
//! paths answer; markdown and CSV the full matrix; [`mod@reference`] compares
//! the topology's published figures with the run (`--expect-reference`), and
//! [`expect`] checks CI expectations (`--expect`).

mod cells;
pub mod chart;
mod csv;
mod draw;
pub mod expect;
pub mod graph;
mod hosts;
pub mod html;
mod md;
pub mod merge;
mod numbers;
pub mod reference;
mod svg;
mod table;
pub mod views;
mod wire;
mod words;

pub(crate) use cells::ordered_cells;
pub use cells::{UdpFigure, cell_summary};
pub(crate) use numbers::{percent, rate_unit, sig, utc};
pub(crate) use words::one_line;

use crate::measure::results::Results;
use std::path::{Path, PathBuf};
/// The output formats of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// One view per question the paths answer, each within 120 columns.
    Text,
    /// The saved form; `tunbench report` reads it back.
    Json,
    /// One row per path and cell, figures in bit/s.
    Csv,
    /// The full matrix as GitHub markdown, then the published figures.
    Md,
    /// A grouped bar chart (cells x paths) of the medians, whiskers for min-max.
    Svg,
    /// One self-contained page: every view's charts and table, the notes, the
    /// topology's graph.
    Html,
}

/// Render `r` in format `f`. `baseline` is the label of the path
/// ([`PathResult::label`](crate::measure::results::PathResult::label)) that ratio
/// columns divide by; the first path when `None`. A baseline that names no path
/// falls back to the first path with a note in the output: check it first with
/// [`baseline_index`] to reject it as bad input.
pub fn render(r: &Results, f: Format, baseline: Option<&str>) -> String {
    match f {
        Format::Text => table::text(r, baseline),
        Format::Md => table::markdown(r, baseline),
        Format::Csv => csv::render(r),
        Format::Json => json(r),
        Format::Svg => svg::render(r),
        Format::Html => html::page(
            r,
            baseline,
            Err("it was not given to this rendering".into()),
        ),
    }
}

/// The index of the baseline path: the path labelled `baseline`, or the first
/// path when `None`. The error names the unknown label and lists the paths.
pub fn baseline_index(r: &Results, baseline: Option<&str>) -> Result<usize, String> {
    match baseline {
        None if r.paths.is_empty() => Err("no paths in the results".to_string()),
        None => Ok(0),
        Some(b) => r
            .paths
            .iter()
            .position(|p| p.label() == b)
            .ok_or_else(|| format!("no path {b}; paths: {}", words::path_list(r))),
    }
}

fn json(r: &Results) -> String {
    // Results derives Serialize, has no maps and so no non-string keys: this
    // cannot fail (non-finite floats are written as null).
    let mut s = serde_json::to_string_pretty(r).expect("Results always serialises");
    s.push('\n');
    s
}

/// Why saved results could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading results from {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{}:{line}:{column}: not tunbench results: {message} \
         (expected the JSON that `tunbench measure --format json` writes)",
        path.display()
    )]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// Read results saved with `--format json`.
pub fn load(path: impl AsRef<Path>) -> Result<Results, LoadError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|error| LoadError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    parse_json(&text, path)
}

/// Parse saved results; `path` only names them in errors.
pub fn parse_json(text: &str, path: &Path) -> Result<Results, LoadError> {
    serde_json::from_str(text).map_err(|e| {
        // serde_json appends " at line L column C" to its message; the location
        // is already in front.
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        LoadError::Parse {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message,
        }
    })
}

#[cfg(test)]
pub(crate) mod fixture;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips() {
        let r = fixture::results();
        let s = render(&r, Format::Json, None);
        assert!(s.ends_with("}\n"));
        let back = parse_json(&s, Path::new("r.json")).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn load_names_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.json");
        let e = load(&missing).unwrap_err().to_string();
        assert!(e.starts_with("reading results from "), "{e}");
        assert!(e.contains("missing.json"), "{e}");

        let iperf = dir.path().join("iperf3.json");
        std::fs::write(&iperf, "{\n  \"start\": {}\n}\n").unwrap();
        let e = load(&iperf).unwrap_err().to_string();
        assert!(
            e.contains("iperf3.json:3:1: not tunbench results: missing field `tool`"),
            "{e}"
        );
        assert!(e.contains("tunbench measure --format json"), "{e}");

        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "{\"tool\": ").unwrap();
        let e = load(&broken).unwrap_err().to_string();
        assert!(
            e.contains("broken.json:1:9: not tunbench results: EOF"),
            "{e}"
        );

        let good = dir.path().join("good.json");
        std::fs::write(&good, render(&fixture::results(), Format::Json, None)).unwrap();
        assert_eq!(load(&good).unwrap(), fixture::results());
    }

    #[test]
    fn without_a_reference_nor_notes_json_says_nothing_of_them() {
        let json = render(&fixture::results(), Format::Json, None);
        assert!(!json.contains("\"reference\""), "{json}");
        assert!(!json.contains("\"notes\""), "{json}");
    }

    #[test]
    fn json_round_trips_with_a_reference_and_notes() {
        let mut r = fixture::with_reference();
        r.notes = vec!["the router is a model calibrated from the NVR500 study's figures".into()];
        let s = render(&r, Format::Json, None);
        assert!(s.contains("\"published_bps\": 656690000.0"), "{s}");
        assert_eq!(parse_json(&s, Path::new("r.json")).unwrap(), r);
        // Results saved before there were references read as having none.
        let old = render(&fixture::results(), Format::Json, None);
        let back = parse_json(&old, Path::new("old.json")).unwrap();
        assert_eq!((back.reference, back.notes.len()), (None, 0));
    }

    #[test]
    fn json_keeps_the_marks_the_limits_and_the_unpredicted() {
        let r = fixture::with_calibration();
        let s = render(&r, Format::Json, None);
        for want in [
            "\"calibrated\": true",
            "\"marks_calibration\": true",
            "\"unpredicted\": [",
            "\"why\": \"its limit is the NGN's test server\"",
            "\"model_limit\": {\n",
            "\"what\": \"router fast path ipv4 udp upload ceiling\"",
        ] {
            assert!(s.contains(want), "{want} not in {s}");
        }
        assert_eq!(parse_json(&s, Path::new("r.json")).unwrap(), r);
        // Unmarked results say nothing of it.
        let s = render(&fixture::with_reference(), Format::Json, None);
        for absent in [
            "\"calibrated\"",
            "marks_calibration",
            "unpredicted",
            "model_limit",
        ] {
            assert!(!s.contains(absent), "{absent} in {s}");
        }
    }

    #[test]
    fn baseline_by_label() {
        let r = fixture::results();
        assert_eq!(baseline_index(&r, None), Ok(0));
        assert_eq!(baseline_index(&r, Some("wg")), Ok(1));
        assert_eq!(
            baseline_index(&r, Some("gre")),
            Err("no path gre; paths: raw, wg".to_string())
        );
    }
}

#[cfg(test)]
mod print_for_a_look {
    #[test]
    #[ignore]
    fn print() {
        let r = super::fixture::results();
        for f in [super::Format::Text, super::Format::Md, super::Format::Csv] {
            println!("=====\n{}", super::render(&r, f, None));
        }
    }
}
