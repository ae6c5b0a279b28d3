//! `[reference]`: figures published for the paths a file measures (the NVR500 study's
//! table), which every report of a run prints beside the measured ones
//! (`RawReference` shows the section). It belongs to the whole file:
//! scenarios cannot change it, and a path label names the scenario it was
//! published for.

use super::raw::{RawReference, RawTopology, RawUnpredicted};
use super::{KeyPath, Problem};
use crate::vocab::{Cell, Proto};
use serde::{Deserialize, Serialize};

/// Figures someone published for cells of paths (the NVR500 study's table), and how
/// far a measurement may be from them and still reproduce them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// Where the figures come from, in a few words.
    pub source: Option<String>,
    pub tolerance: Tolerance,
    /// In the order the topology file lists them.
    pub figures: Vec<PublishedFigure>,
    /// The file says which figures the lab's device models were calibrated
    /// from (its `calibrated` key, even empty): every figure not marked
    /// [`PublishedFigure::calibrated`] is then a prediction. False: the file
    /// does not say, and reports mark neither.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marks_calibration: bool,
    /// Published figures the lab does not predict, in the file's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpredicted: Vec<Unpredicted>,
}

/// A published figure the lab does not predict, and why: reports print it,
/// and compare nothing with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unpredicted {
    /// What was measured, in the publisher's words.
    pub what: String,
    pub published_bps: f64,
    /// Why the lab has no prediction for it.
    pub why: String,
}

/// How far, in percent either way, a measured figure may be from the
/// published one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub tcp_percent: f64,
    pub udp_percent: f64,
}

impl Tolerance {
    /// TCP repeats well between rigs; a UDP figure is the edge of a loss
    /// threshold and moves more.
    pub const DEFAULT: Tolerance = Tolerance {
        tcp_percent: 15.0,
        udp_percent: 25.0,
    };

    pub fn of(&self, p: Proto) -> f64 {
        match p {
            Proto::Tcp => self.tcp_percent,
            Proto::Udp => self.udp_percent,
        }
    }
}

/// One published figure: a cell of a path, in bit/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PublishedFigure {
    /// The path as reports name it: `PATH`, or `SCENARIO/PATH`.
    pub path: String,
    pub cell: Cell,
    pub published_bps: f64,
    /// A device model of the lab was calibrated from this figure (listed in
    /// `calibrated`): it reproduces the figure by construction, so measuring
    /// it again checks the emulation, and only the other figures test the
    /// model. False in results that carry no calibration marks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibrated: bool,
}

/// A published rate below this is a figure written without its unit ("941"
/// for 941 Mbit/s): no study publishes bit/s.
const MIN_RATE: u64 = 1000;

/// The labels of every path `tunbench run` measures from this file: `PATH`, or
/// `SCENARIO/PATH` for each scenario a `[[measure]]` runs in. Read from the raw
/// file, so a `[[measure]]` with problems of its own still names its path.
pub fn path_labels(raw: &RawTopology) -> Vec<String> {
    let scenarios: Vec<&String> = match &raw.scenarios {
        Some(toml::Value::Table(t)) => t.keys().collect(),
        _ => Vec::new(),
    };
    let mut labels: Vec<String> = Vec::new();
    let mut add = |l: String| {
        if !labels.contains(&l) {
            labels.push(l);
        }
    };
    if scenarios.is_empty() {
        for m in &raw.measure {
            add(m.name.clone().unwrap_or_else(|| "raw".into()));
        }
    }
    for s in scenarios {
        for m in &raw.measure {
            if m.scenarios.as_ref().is_none_or(|only| only.contains(s)) {
                add(format!("{s}/{}", m.name.as_deref().unwrap_or("raw")));
            }
        }
    }
    labels
}

/// Resolve `[reference]` against the labels of the paths the file measures.
pub fn resolve(
    r: &RawReference,
    labels: &[String],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Reference {
    let tolerance = tolerance(r, at, p);
    let (mut figures, published) = figures(r, labels, at, p);
    if let Some(list) = &r.calibrated {
        for (path, cell) in calibrated(list, &published, &at.key("calibrated"), p) {
            for f in figures.iter_mut() {
                if f.path == path && f.cell == cell {
                    f.calibrated = true;
                }
            }
        }
    }
    let unpredicted_at = at.key("unpredicted");
    let unpredicted = r
        .unpredicted
        .iter()
        .enumerate()
        .filter_map(|(i, u)| unpredicted(u, &unpredicted_at.index(i), p))
        .collect();
    Reference {
        source: r.source.clone(),
        tolerance,
        figures,
        marks_calibration: r.calibrated.is_some(),
        unpredicted,
    }
}

/// Percent either way per protocol: the defaults, or what the file says.
fn tolerance(r: &RawReference, at: &KeyPath, p: &mut Vec<Problem>) -> Tolerance {
    let mut tolerance = Tolerance::DEFAULT;
    if let Some(t) = &r.tolerance {
        for (key, given, slot) in [
            ("tcp", t.tcp, &mut tolerance.tcp_percent),
            ("udp", t.udp, &mut tolerance.udp_percent),
        ] {
            let Some(v) = given else { continue };
            if (0.0..=100.0).contains(&v) {
                *slot = v;
            } else {
                p.push(Problem::new(
                    &at.key("tolerance").key(key),
                    format!("tolerance {key} = {v} %; use 0 to 100 (percent either way)"),
                ));
            }
        }
    }
    tolerance
}

/// The figures with a valid cell and rate, in the file's order; and every
/// cell the file publishes, rate valid or not: what `calibrated` may name (a
/// bad rate is its own problem, not the calibration's).
fn figures<'r>(
    r: &'r RawReference,
    labels: &[String],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> (Vec<PublishedFigure>, Vec<(&'r str, Cell)>) {
    let figures_at = at.key("figures");
    if r.figures.0.is_empty() {
        p.push(Problem::new(
            at,
            "[reference] has no figures; add [reference.figures.\"PATH\"] with \"CELL\" = \"RATE\" lines, e.g. \"ipv4.tcp.sender\" = \"941M\"",
        ));
    }
    let mut figures = Vec::new();
    let mut published: Vec<(&str, Cell)> = Vec::new();
    for (label, cells) in &r.figures.0 {
        let lat = figures_at.key(label);
        if !labels.contains(label) {
            p.push(Problem::new(&lat, unknown_path(label, labels)));
        }
        let mut seen: Vec<(Cell, &str)> = Vec::new();
        for (key, value) in &cells.0 {
            let cat = lat.key(key);
            let Some(cell) = Cell::parse_key(key) else {
                p.push(Problem::new(
                    &cat,
                    format!(
                        "{}; a cell is FAMILY.PROTOCOL.DIRECTION[.pSTREAMS], e.g. ipv4.tcp.sender or ipv6.tcp.receiver.p6",
                        Cell::key_problem(key)
                    ),
                ));
                continue;
            };
            if let Some((_, first)) = seen.iter().find(|(c, _)| *c == cell) {
                p.push(Problem::new(
                    &cat,
                    format!("\"{key}\" is the same cell as \"{first}\""),
                ));
                continue;
            }
            seen.push((cell, key));
            published.push((label, cell));
            if let Some(bps) = rate(value, &cat, p) {
                figures.push(PublishedFigure {
                    path: label.clone(),
                    cell,
                    published_bps: bps as f64,
                    calibrated: false,
                });
            }
        }
    }
    (figures, published)
}

/// The cells `calibrated` names, each one that has a published figure, once;
/// a problem at `calibrated[i]` for every other entry.
fn calibrated(
    list: &[toml::Value],
    published: &[(&str, Cell)],
    at: &KeyPath,
    p: &mut Vec<Problem>,
) -> Vec<(String, Cell)> {
    const FORM: &str = "a calibrated cell is \"PATH:CELL\" with PATH as in [reference.figures], \
                        e.g. \"fast/raw:ipv4.tcp.sender\"";
    let mut out: Vec<(String, Cell)> = Vec::new();
    let mut first_at: Vec<usize> = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let eat = at.index(i);
        let Some(s) = v.as_str() else {
            p.push(Problem::new(&eat, format!("{v} is not a string; {FORM}")));
            continue;
        };
        let Some((path, key)) = s.rsplit_once(':') else {
            p.push(Problem::new(&eat, format!("\"{s}\" has no ':'; {FORM}")));
            continue;
        };
        let Some(cell) = Cell::parse_key(key) else {
            p.push(Problem::new(
                &eat,
                format!(
                    "{} in \"{s}\"; a cell is FAMILY.PROTOCOL.DIRECTION[.pSTREAMS], e.g. ipv4.tcp.sender",
                    Cell::key_problem(key)
                ),
            ));
            continue;
        };
        if let Some(j) = out.iter().position(|(q, c)| q == path && *c == cell) {
            p.push(Problem::new(
                &eat,
                format!(
                    "\"{s}\" is the same cell as {}: list each calibrated cell once",
                    at.index(first_at[j])
                ),
            ));
            continue;
        }
        if !published.contains(&(path, cell)) {
            p.push(Problem::new(&eat, no_figure(path, &cell, published)));
            continue;
        }
        out.push((path.to_string(), cell));
        first_at.push(i);
    }
    out
}

/// Why a calibrated entry names nothing published, with what it could name.
fn no_figure(path: &str, cell: &Cell, published: &[(&str, Cell)]) -> String {
    let of_path: Vec<String> = published
        .iter()
        .filter(|(q, _)| *q == path)
        .map(|(_, c)| c.key())
        .collect();
    if !of_path.is_empty() {
        return format!(
            "{path} has no published figure for {}; a calibrated cell must be one of [reference.figures.\"{path}\"]: {}",
            cell.key(),
            of_path.join(", ")
        );
    }
    let mut paths: Vec<&str> = Vec::new();
    for (q, _) in published {
        if !paths.contains(q) {
            paths.push(q);
        }
    }
    format!(
        "no published figures for path \"{path}\"; a calibrated cell must be one of [reference.figures]; its paths: {}",
        if paths.is_empty() {
            "(none)".to_string()
        } else {
            paths.join(", ")
        }
    )
}

/// One `[[reference.unpredicted]]`, with a problem for each key it lacks or
/// has wrong.
fn unpredicted(u: &RawUnpredicted, at: &KeyPath, p: &mut Vec<Problem>) -> Option<Unpredicted> {
    let text = |v: &Option<String>, key: &str, what: &str, p: &mut Vec<Problem>| match v {
        Some(s) if !s.trim().is_empty() => Some(s.clone()),
        Some(_) => {
            p.push(Problem::new(
                &at.key(key),
                format!("{key} is empty; say {what}"),
            ));
            None
        }
        None => {
            p.push(Problem::new(
                at,
                format!("an unpredicted figure needs {key}: {what}"),
            ));
            None
        }
    };
    let what = text(&u.what, "what", "what was measured", p);
    let figure = match &u.figure {
        Some(v) => rate(v, &at.key("figure"), p),
        None => {
            p.push(Problem::new(
                at,
                "an unpredicted figure needs figure: the published rate, e.g. \"300M\"",
            ));
            None
        }
    };
    let why = text(&u.why, "why", "why the lab does not predict it", p);
    Some(Unpredicted {
        what: what?,
        published_bps: figure? as f64,
        why: why?,
    })
}

fn unknown_path(label: &str, labels: &[String]) -> String {
    if labels.is_empty() {
        return format!("no path \"{label}\" is measured: the file has no [[measure]]");
    }
    let scenario_hint = match (label.contains('/'), labels[0].contains('/')) {
        (false, true) => "; in a file with scenarios a path is SCENARIO/PATH",
        (true, false) => "; the file has no scenarios, so a path is just its [[measure]] name",
        _ => "",
    };
    format!(
        "no path \"{label}\" is measured{scenario_hint}; paths: {}",
        labels.join(", ")
    )
}

/// A rate as everywhere in a topology: "941M" (K, M, G, T, 1000-based) or a
/// number of bit/s.
fn rate(v: &toml::Value, at: &KeyPath, p: &mut Vec<Problem>) -> Option<u64> {
    let r = match v {
        toml::Value::String(s) => crate::vocab::units::parse_rate(s),
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        _ => Err("a published rate is a string such as \"941M\" or a number of bit/s".into()),
    };
    match r {
        Ok(r) if r >= MIN_RATE => Some(r),
        Ok(r) => {
            p.push(Problem::new(
                at,
                format!("{r} bit/s is below 1K; write the unit, e.g. \"{r}M\" for Mbit/s"),
            ));
            None
        }
        Err(e) => {
            p.push(Problem::new(at, e));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tolerance;
    use crate::topology::{parse_str, scenario::scenarios_str};
    use crate::vocab::Cell;
    use std::path::Path;

    const BASE: &str = r#"
name = "ref"
[nodes.a]
kind = "host"
[nodes.b]
kind = "router"
[[links]]
a = { port = "a:eth0", ipv4 = "198.18.0.1/24" }
b = { port = "b:eth0", ipv4 = "198.18.0.2/24" }
[[measure]]
from = "a"
to = "b"
families = ["ipv4"]
"#;

    /// The file's problems as `LINE:COL: at: message`, one per line.
    fn problems(text: &str) -> Vec<String> {
        match parse_str(text, Path::new("r.toml")) {
            Ok(_) => Vec::new(),
            Err(e) => {
                e.0.iter()
                    .map(|d| format!("{}:{}: {}: {}", d.line, d.column, d.at, d.message))
                    .collect()
            }
        }
    }

    #[test]
    fn figures_keep_the_files_order_and_tolerance_defaults() {
        let text = format!(
            "{BASE}\n[reference]\nsource = \"the NVR500 study\"\n[reference.figures.raw]\n\
             \"ipv4.udp.sender\" = \"347M\"\n\"ipv4.tcp.sender\" = \"941M\"\n\
             \"ipv4.tcp.receiver.p6\" = 656690000\n"
        );
        let t = parse_str(&text, Path::new("r.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = t.reference.unwrap();
        assert_eq!(r.source.as_deref(), Some("the NVR500 study"));
        assert_eq!(r.tolerance, Tolerance::DEFAULT);
        let got: Vec<(String, String, f64)> = r
            .figures
            .iter()
            .map(|f| (f.path.clone(), f.cell.key(), f.published_bps))
            .collect();
        assert_eq!(
            got,
            [
                ("raw".into(), "ipv4.udp.sender".into(), 347e6),
                ("raw".into(), "ipv4.tcp.sender".into(), 941e6),
                ("raw".into(), "ipv4.tcp.receiver.p6".into(), 656.69e6),
            ]
        );
        let one = format!(
            "{BASE}\n[reference]\ntolerance = {{ udp = 40 }}\n[reference.figures.raw]\n\"ipv4.tcp.sender\" = \"656.69M\"\n"
        );
        let r = parse_str(&one, Path::new("r.toml"))
            .unwrap()
            .reference
            .unwrap();
        assert_eq!(
            (r.tolerance.tcp_percent, r.tolerance.udp_percent),
            (15.0, 40.0)
        );
        assert_eq!(r.figures[0].published_bps, 656.69e6);
        assert!(
            parse_str(BASE, Path::new("r.toml"))
                .unwrap()
                .reference
                .is_none()
        );
    }

    #[test]
    fn bad_cells_rates_and_tolerances_are_located() {
        let text = format!(
            "{BASE}\n[reference]\ntolerance = {{ tcp = 150, udp = -1 }}\n[reference.figures.raw]\n\
             \"ipv4.tcp.upload\" = \"941M\"\n\"ipv4.udp.sender\" = \"fast\"\n\
             \"ipv4.tcp.sender\" = \"941\"\n\"ipv4.udp.receiver\" = 9.5e8\n\
             \"ipv4.tcp.receiver\" = \"940M\"\n\"ipv4.tcp.receiver.p1\" = \"940M\"\n"
        );
        assert_eq!(
            problems(&text),
            [
                "16:21: reference.tolerance.tcp: tolerance tcp = 150 %; use 0 to 100 (percent either way)",
                "16:32: reference.tolerance.udp: tolerance udp = -1 %; use 0 to 100 (percent either way)",
                "18:21: reference.figures.raw.\"ipv4.tcp.upload\": unknown direction 'upload' in 'ipv4.tcp.upload' \
                 (sender or receiver); a cell is FAMILY.PROTOCOL.DIRECTION[.pSTREAMS], e.g. ipv4.tcp.sender or ipv6.tcp.receiver.p6",
                "19:21: reference.figures.raw.\"ipv4.udp.sender\": \"fast\" is not a number with an optional K, M, G or T suffix",
                "20:21: reference.figures.raw.\"ipv4.tcp.sender\": 941 bit/s is below 1K; write the unit, e.g. \"941M\" for Mbit/s",
                "21:23: reference.figures.raw.\"ipv4.udp.receiver\": a published rate is a string such as \"941M\" or a number of bit/s",
                "23:26: reference.figures.raw.\"ipv4.tcp.receiver.p1\": \"ipv4.tcp.receiver.p1\" is the same cell as \"ipv4.tcp.receiver\"",
            ]
        );
    }

    #[test]
    fn unknown_keys_paths_and_empty_sections() {
        let text = format!("{BASE}\n[reference]\nsorce = \"typo\"\n");
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("16:1: reference.sorce: unknown field `sorce`"),
            "{p:?}"
        );
        let text = format!("{BASE}\n[reference]\ntolerance = {{ tcp = 10, sctp = 5 }}\n");
        let p = problems(&text);
        assert!(p[0].contains("unknown field `sctp`"), "{p:?}");

        let text = format!("{BASE}\n[reference.figures.wg]\n\"ipv4.tcp.sender\" = \"1G\"\n");
        assert_eq!(
            problems(&text),
            ["15:20: reference.figures.wg: no path \"wg\" is measured; paths: raw"]
        );
        let text =
            format!("{BASE}\n[reference.figures.\"fast/raw\"]\n\"ipv4.tcp.sender\" = \"1G\"\n");
        assert_eq!(
            problems(&text),
            [
                "15:20: reference.figures.\"fast/raw\": no path \"fast/raw\" is measured; the file has no scenarios, \
                 so a path is just its [[measure]] name; paths: raw"
            ]
        );
        let text = format!("{BASE}\n[reference]\nsource = \"nothing\"\n");
        let p = problems(&text);
        assert!(
            p[0].starts_with("15:2: reference: [reference] has no figures"),
            "{p:?}"
        );
        let text = format!("{BASE}\n[reference]\nfigures = {{ raw = \"941M\" }}\n");
        let p = problems(&text);
        assert!(p[0].contains("expected a table"), "{p:?}");
    }

    const SCENARIOS: &str = r#"
[scenarios.fast]
[scenarios.normal]
description = "no fast path"

[reference]
source = "the NVR500 study"
[reference.figures."fast/raw"]
"ipv4.tcp.sender" = "824M"
[reference.figures."normal/raw"]
"ipv4.tcp.sender" = "384M"
"#;

    #[test]
    fn the_reference_belongs_to_the_file_not_to_its_scenarios() {
        let text = format!("{BASE}{SCENARIOS}");
        let t = parse_str(&text, Path::new("r.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = t.reference.unwrap();
        let labels: Vec<&str> = r.figures.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(labels, ["fast/raw", "normal/raw"]);
        assert_eq!(
            r.figures[1].cell,
            Cell::parse_key("ipv4.tcp.sender").unwrap()
        );
        // Each scenario's lab is the file without it: the run's results get it
        // once, from the file.
        let s = scenarios_str(
            &text,
            Path::new("r.toml"),
            crate::topology::kernel::KernelFacts::FULL,
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        for sc in &s {
            assert!(sc.topology.reference.is_none(), "{}", sc.name);
            assert!(!sc.text.contains("reference"), "{}", sc.text);
        }

        let plain = format!("{BASE}{}", SCENARIOS.replace("fast/raw", "raw"));
        assert_eq!(
            problems(&plain),
            [
                "21:20: reference.figures.raw: no path \"raw\" is measured; in a file with scenarios a path is \
                 SCENARIO/PATH; paths: fast/raw, normal/raw"
            ]
        );
        // A [[measure]] only in one scenario has a path only there.
        let only = text.replace(
            "families = [\"ipv4\"]",
            "families = [\"ipv4\"]\nscenarios = [\"fast\"]",
        );
        let p = problems(&only);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].ends_with("no path \"normal/raw\" is measured; paths: fast/raw"),
            "{p:?}"
        );

        let changed = format!("{text}\n[scenarios.fast.reference]\nsource = \"mine\"\n");
        let p = problems(&changed);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("scenarios.fast.reference: a scenario cannot change reference"),
            "{p:?}"
        );
    }

    const CALIBRATED: &str = r#"
[reference]
source = "the NVR500 study"
calibrated = ["fast/raw:ipv4.tcp.sender", "normal/raw:ipv4.tcp.sender.p1"]
[reference.figures."fast/raw"]
"ipv4.tcp.sender" = "824M"
"ipv4.tcp.receiver" = "939M"
[reference.figures."normal/raw"]
"ipv4.tcp.sender" = "384M"

[[reference.unpredicted]]
what = "RBBS multi-session speed test (FLET'S), with or without the NVR500"
figure = "300M"
why = "its limit is the NGN's test server, which the lab does not model"
"#;

    fn scenarios_and(reference: &str) -> String {
        format!("{BASE}\n[scenarios.fast]\n[scenarios.normal]\n{reference}")
    }

    #[test]
    fn calibrated_cells_are_marked_and_unpredicted_figures_kept() {
        let text = scenarios_and(CALIBRATED);
        let t = parse_str(&text, Path::new("r.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = t.reference.unwrap();
        assert!(r.marks_calibration);
        let marks: Vec<(String, bool)> = r
            .figures
            .iter()
            .map(|f| (format!("{}:{}", f.path, f.cell), f.calibrated))
            .collect();
        // ".p1" is the one-stream cell: the same as writing none.
        assert_eq!(
            marks,
            [
                ("fast/raw:ipv4.tcp.sender".into(), true),
                ("fast/raw:ipv4.tcp.receiver".into(), false),
                ("normal/raw:ipv4.tcp.sender".into(), true),
            ]
        );
        assert_eq!(
            r.unpredicted,
            [super::Unpredicted {
                what: "RBBS multi-session speed test (FLET'S), with or without the NVR500".into(),
                published_bps: 300e6,
                why: "its limit is the NGN's test server, which the lab does not model".into(),
            }]
        );

        // An empty list still says the file marks calibration: every figure a
        // prediction.
        let none = scenarios_and(&CALIBRATED.replace(
            "calibrated = [\"fast/raw:ipv4.tcp.sender\", \"normal/raw:ipv4.tcp.sender.p1\"]",
            "calibrated = []",
        ));
        let r = parse_str(&none, Path::new("r.toml"))
            .unwrap()
            .reference
            .unwrap();
        assert!(r.marks_calibration);
        assert!(r.figures.iter().all(|f| !f.calibrated));

        // Without the key nothing is marked, and the saved form is as before.
        let unmarked = format!("{BASE}{SCENARIOS}");
        let r = parse_str(&unmarked, Path::new("r.toml"))
            .unwrap()
            .reference
            .unwrap();
        assert!(!r.marks_calibration);
        assert!(r.figures.iter().all(|f| !f.calibrated));
        assert!(r.unpredicted.is_empty());
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            !json.contains("calibrat") && !json.contains("unpredicted"),
            "{json}"
        );
        // A reference saved before calibration marks existed still reads.
        let old: super::Reference = serde_json::from_str(&json).unwrap();
        assert_eq!(old, r);
    }

    #[test]
    fn bad_calibrated_entries_are_located() {
        let bad = CALIBRATED.replace(
            "calibrated = [\"fast/raw:ipv4.tcp.sender\", \"normal/raw:ipv4.tcp.sender.p1\"]",
            "calibrated = [\"fast/raw:ipv4.tcp.sender\", \"fast/raw\", 7, \"fast/raw:ipv4.tcp.upload\",\n\
             \"fast/raw:ipv4.udp.sender\", \"none/raw:ipv4.tcp.sender\", \"fast/raw:ipv4.tcp.sender.p1\"]",
        );
        let text = scenarios_and(&bad);
        assert_eq!(
            problems(&text),
            [
                "20:43: reference.calibrated[1]: \"fast/raw\" has no ':'; a calibrated cell is \"PATH:CELL\" \
                 with PATH as in [reference.figures], e.g. \"fast/raw:ipv4.tcp.sender\"",
                "20:55: reference.calibrated[2]: 7 is not a string; a calibrated cell is \"PATH:CELL\" \
                 with PATH as in [reference.figures], e.g. \"fast/raw:ipv4.tcp.sender\"",
                "20:58: reference.calibrated[3]: unknown direction 'upload' in 'ipv4.tcp.upload' (sender or receiver) \
                 in \"fast/raw:ipv4.tcp.upload\"; a cell is FAMILY.PROTOCOL.DIRECTION[.pSTREAMS], e.g. ipv4.tcp.sender",
                "21:1: reference.calibrated[4]: fast/raw has no published figure for ipv4.udp.sender; a calibrated \
                 cell must be one of [reference.figures.\"fast/raw\"]: ipv4.tcp.sender, ipv4.tcp.receiver",
                "21:29: reference.calibrated[5]: no published figures for path \"none/raw\"; a calibrated cell \
                 must be one of [reference.figures]; its paths: fast/raw, normal/raw",
                "21:57: reference.calibrated[6]: \"fast/raw:ipv4.tcp.sender.p1\" is the same cell as \
                 reference.calibrated[0]: list each calibrated cell once",
            ]
        );
        // A figure whose rate is wrong is still a published cell: its rate is
        // the one problem.
        let text = scenarios_and(&CALIBRATED.replace("\"824M\"", "\"fast\""));
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("reference.figures.\"fast/raw\".\"ipv4.tcp.sender\""),
            "{p:?}"
        );
        let text = scenarios_and(&CALIBRATED.replace("calibrated = [", "calibrated = \"x\"\n#["));
        let p = problems(&text);
        assert!(
            p[0].contains("reference.calibrated") && p[0].contains("expected a sequence"),
            "{p:?}"
        );
    }

    #[test]
    fn unpredicted_figures_need_what_figure_and_why() {
        let entries = "\n[[reference.unpredicted]]\nwhat = \"speed test\"\nfigure = \"300\"\n\
                       \n[[reference.unpredicted]]\nfigure = \"300M\"\nwhy = \"\"\n\
                       \n[[reference.unpredicted]]\nwhat = \"x\"\nwhy = \"y\"\nfgure = 1\n";
        let text = format!(
            "{BASE}\n[reference]\n[reference.figures.raw]\n\"ipv4.tcp.sender\" = \"941M\"\n{entries}"
        );
        let p = problems(&text);
        assert_eq!(p.len(), 1, "unknown keys are reported first: {p:?}");
        assert!(
            p[0].starts_with("30:1: reference.unpredicted[2].fgure: unknown field `fgure`"),
            "{p:?}"
        );
        let text = text.replace("fgure = 1\n", "");
        assert_eq!(
            problems(&text),
            [
                "21:10: reference.unpredicted[0].figure: 300 bit/s is below 1K; write the unit, e.g. \"300M\" for Mbit/s",
                "20:1: reference.unpredicted[0]: an unpredicted figure needs why: why the lab does not predict it",
                "24:1: reference.unpredicted[1]: an unpredicted figure needs what: what was measured",
                "25:7: reference.unpredicted[1].why: why is empty; say why the lab does not predict it",
                "28:1: reference.unpredicted[2]: an unpredicted figure needs figure: the published rate, e.g. \"300M\"",
            ]
        );
    }
}
