//! Several hosts' results of one lab merged into one (`tunbench report
//! A.json B.json ...`): in a lab placed on several hosts each host's `run
//! --host` measures the paths that start on it, and the report is read whole.
//!
//! The parts must be of the same lab, and no path (label, from, to) may be in
//! two of them. The merge keeps the paths in file order; the underlays too,
//! every measurement of them (a measurement repeated exactly is kept once),
//! so the report lists each host's figure and a cell is held to the first
//! measurement of its underlay; the notes once each, in order. It measured
//! from the earliest start to the latest end (`seconds` is that span, as the
//! hosts may have measured at once). Where the parts differ in what the
//! heading states (tool, topology file, runs per cell, seconds per run) the
//! first part's is kept and a note says so; the reference is the first
//! part's that has one. The merge has no `host`; a note says which host
//! measured which paths.

use crate::measure::results::{PathResult, Results};
use std::path::{Path, PathBuf};

/// Why parts cannot be merged (bad input: exit 2).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("no results to merge")]
    Nothing,
    #[error(
        "{} is of lab {lab}, but {} is of lab {first_lab}: merge the results of one lab",
        file.display(),
        first_file.display()
    )]
    Lab {
        first_file: PathBuf,
        first_lab: String,
        file: PathBuf,
        lab: String,
    },
    #[error(
        "path {path} ({from} -> {to}) is in both {} and {}: each path must be measured by one part",
        first_file.display(),
        file.display()
    )]
    DuplicatePath {
        path: String,
        from: String,
        to: String,
        first_file: PathBuf,
        file: PathBuf,
    },
}

/// One part: the file it was read from (only to name it) and its results.
pub type Part = (PathBuf, Results);

/// The parts as one set of results; one part is returned as it is.
pub fn merge(parts: Vec<Part>) -> Result<Results, MergeError> {
    let Some((_, first)) = parts.first() else {
        return Err(MergeError::Nothing);
    };
    if parts.len() == 1 {
        return Ok(first.clone());
    }
    check(&parts)?;
    let mut merged = Results {
        host: None,
        paths: Vec::new(),
        underlays: Vec::new(),
        phases: Vec::new(),
        notes: Vec::new(),
        ..first.clone()
    };
    merged.started = parts.iter().map(|(_, r)| r.started).min().unwrap_or(0);
    let end = parts
        .iter()
        .map(|(_, r)| r.started as f64 + r.seconds)
        .fold(0.0, f64::max);
    merged.seconds = end - merged.started as f64;
    merged.reference = parts.iter().find_map(|(_, r)| r.reference.clone());
    for (_, r) in &parts {
        merged.paths.extend(r.paths.iter().cloned());
        for u in &r.underlays {
            if !merged.underlays.contains(u) {
                merged.underlays.push(u.clone());
            }
        }
        for n in &r.notes {
            if !merged.notes.contains(n) {
                merged.notes.push(n.clone());
            }
        }
    }
    merged.notes.extend(differences(&parts));
    merged.notes.push(who_measured_what(&parts));
    Ok(merged)
}

/// Every part of the first's lab; no path in two parts.
fn check(parts: &[Part]) -> Result<(), MergeError> {
    let (first_file, first) = &parts[0];
    for (file, r) in &parts[1..] {
        if r.lab != first.lab {
            return Err(MergeError::Lab {
                first_file: first_file.clone(),
                first_lab: first.lab.clone(),
                file: file.clone(),
                lab: r.lab.clone(),
            });
        }
    }
    let key = |p: &PathResult| (p.label(), p.from.clone(), p.to.clone());
    let mut seen: Vec<((String, String, String), &PathBuf)> = Vec::new();
    for (file, r) in parts {
        for p in &r.paths {
            let k = key(p);
            if let Some((_, first_file)) = seen.iter().find(|(s, _)| *s == k) {
                return Err(MergeError::DuplicatePath {
                    path: k.0,
                    from: k.1,
                    to: k.2,
                    first_file: (*first_file).clone(),
                    file: file.clone(),
                });
            }
            seen.push((k, file));
        }
    }
    Ok(())
}

/// What a part states, as text to compare.
type Fact = dyn Fn(&Results) -> String;

/// A note for each thing the heading states that the parts do not agree on:
/// the tool, the topology file's name, runs per cell, seconds per run.
fn differences(parts: &[Part]) -> Vec<String> {
    let file_name = |r: &Results| {
        r.topology
            .as_deref()
            .map(|t| {
                Path::new(t)
                    .file_name()
                    .map_or(t.to_string(), |n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "none".into())
    };
    let facts: [(&str, &Fact); 4] = [
        ("tools", &|r| r.tool.clone()),
        ("topology files", &file_name),
        ("runs per cell", &|r| r.runs_per_cell.to_string()),
        ("seconds per run", &|r| r.duration_per_run.to_string()),
    ];
    let mut notes = Vec::new();
    for (what, fact) in facts {
        let values: Vec<String> = parts.iter().map(|(_, r)| fact(r)).collect();
        if values.iter().all(|v| *v == values[0]) {
            continue;
        }
        let each: Vec<String> = parts
            .iter()
            .zip(&values)
            .map(|((file, _), v)| format!("{v} ({})", shown(file)))
            .collect();
        notes.push(format!(
            "the merged parts differ in {what}: {}; the heading gives the first's",
            each.join(", ")
        ));
    }
    notes
}

/// "host pc measured raw, wireguard; host router measured no path"; a part
/// without a host is named by its file.
fn who_measured_what(parts: &[Part]) -> String {
    let each: Vec<String> = parts
        .iter()
        .map(|(file, r)| {
            let who = match &r.host {
                Some(h) => format!("host {h}"),
                None => format!("the results in {}", shown(file)),
            };
            let paths: Vec<String> = r.paths.iter().map(PathResult::label).collect();
            if paths.is_empty() {
                format!("{who} measured no path")
            } else {
                format!("{who} measured {}", paths.join(", "))
            }
        })
        .collect();
    format!("merged from {} parts: {}", parts.len(), each.join("; "))
}

/// A part's file as a note names it: its file name.
fn shown(file: &Path) -> String {
    file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn parts(files: &[&str], results: impl IntoIterator<Item = Results>) -> Vec<Part> {
        files.iter().map(PathBuf::from).zip(results).collect()
    }

    /// The three hosts' parts merge into the whole lab: paths in file order,
    /// each underlay once, the span of the runs, no host, and who measured
    /// what.
    #[test]
    fn the_parts_of_a_split_lab_merge_into_the_whole() {
        let [pc, router, server] = fixture::placed_parts();
        let m = merge(parts(
            &["pc.json", "router.json", "server.json"],
            [pc, router, server],
        ))
        .unwrap();
        let whole = fixture::placed();
        assert_eq!(m.paths, whole.paths);
        assert_eq!(m.underlays, whole.underlays, "router's repeats dropped");
        assert_eq!(m.host, None);
        assert_eq!(m.started, whole.started);
        // pc from 0 to 512 s, router from 600 s to 1112 s.
        assert_eq!(m.seconds, 1112.0);
        assert_eq!(
            m.notes,
            [
                "merged from 3 parts: host pc measured raw; host router measured wg; host server measured no path"
            ]
        );
        // One part is the part as it is.
        let [pc, ..] = fixture::placed_parts();
        assert_eq!(merge(parts(&["pc.json"], [pc.clone()])).unwrap(), pc);
        assert_eq!(merge(Vec::new()), Err(MergeError::Nothing));
    }

    #[test]
    fn a_path_in_two_parts_is_refused_naming_both_files() {
        let [pc, mut router, _] = fixture::placed_parts();
        router.paths.push(pc.paths[0].clone());
        let e = merge(parts(&["a/pc.json", "b/router.json"], [pc, router])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "path raw (lan1 -> lan2) is in both a/pc.json and b/router.json: each path must be measured by one part"
        );
        // The same label between other ends is another path.
        let [pc, mut router, _] = fixture::placed_parts();
        let mut other = pc.paths[0].clone();
        other.from = "lan3".into();
        router.paths.push(other);
        assert_eq!(
            merge(parts(&["a", "b"], [pc, router])).unwrap().paths.len(),
            3
        );
    }

    #[test]
    fn parts_of_other_labs_are_refused_naming_files_and_labs() {
        let [pc, mut router, _] = fixture::placed_parts();
        router.lab = "office".into();
        let e = merge(parts(&["pc.json", "router.json"], [pc, router])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "router.json is of lab office, but pc.json is of lab home: merge the results of one lab"
        );
    }

    /// What the heading states is the first part's; a difference is noted.
    /// Notes are kept once, in order; the reference is the first there is.
    #[test]
    fn differences_are_noted_and_notes_kept_once() {
        let [mut pc, mut router, _] = fixture::placed_parts();
        pc.notes = vec!["a".into(), "b".into()];
        router.notes = vec!["b".into(), "c".into()];
        router.runs_per_cell = 5;
        router.topology = Some("/etc/tunbench/nvr500-home.toml".into());
        router.reference = fixture::with_reference().reference;
        let m = merge(parts(
            &["pc.json", "/tmp/router.json"],
            [pc, router.clone()],
        ))
        .unwrap();
        assert_eq!(m.runs_per_cell, 3);
        assert_eq!(m.topology.as_deref(), Some("nvr500-home.toml"));
        assert_eq!(m.reference, router.reference);
        assert_eq!(
            m.notes,
            [
                "a",
                "b",
                "c",
                "the merged parts differ in runs per cell: 3 (pc.json), 5 (router.json); the heading gives the first's",
                "merged from 2 parts: host pc measured raw; host router measured wg",
            ]
        );
        // Another topology file's name is noted, as is a part without a host.
        let [pc, mut router, _] = fixture::placed_parts();
        router.topology = Some("other.toml".into());
        router.host = None;
        let m = merge(parts(&["pc.json", "router.json"], [pc, router])).unwrap();
        assert_eq!(
            m.notes,
            [
                "the merged parts differ in topology files: nvr500-home.toml (pc.json), other.toml (router.json); the heading gives the first's",
                "merged from 2 parts: host pc measured raw; the results in router.json measured wg",
            ]
        );
    }
}
