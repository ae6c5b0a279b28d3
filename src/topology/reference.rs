//! `[reference]`: figures published for the paths a file measures (the seed's
//! table), which every report of a run prints beside the measured ones.
//!
//! ```toml
//! [reference]
//! source = "the seed document: Yamaha NVR500 study, Jan/Feb 2020, best of 5 iperf3 runs"
//! tolerance = { tcp = 15, udp = 25 }      # percent either way; these are the defaults
//! [reference.figures."none/raw"]           # a path as reports name it: SCENARIO/PATH or PATH
//! "ipv4.tcp.sender" = "941M"               # a cell as --expect names it; a rate in bit/s
//! ```
//!
//! The section belongs to the whole file: scenarios cannot change it, and a
//! path label names the scenario it was published for.

use super::raw::{RawReference, RawTopology};
use super::{KeyPath, Problem};
use crate::vocab::{Cell, Proto};
use serde::{Deserialize, Serialize};

/// Figures someone published for cells of paths (the seed's table), and how
/// far a measurement may be from them and still reproduce them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// Where the figures come from, in a few words.
    pub source: Option<String>,
    pub tolerance: Tolerance,
    /// In the order the topology file lists them.
    pub figures: Vec<PublishedFigure>,
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
    let figures_at = at.key("figures");
    if r.figures.0.is_empty() {
        p.push(Problem::new(
            at,
            "[reference] has no figures; add [reference.figures.\"PATH\"] with \"CELL\" = \"RATE\" lines, e.g. \"ipv4.tcp.sender\" = \"941M\"",
        ));
    }
    let mut figures = Vec::new();
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
            if let Some(bps) = rate(value, &cat, p) {
                figures.push(PublishedFigure {
                    path: label.clone(),
                    cell,
                    published_bps: bps as f64,
                });
            }
        }
    }
    Reference {
        source: r.source.clone(),
        tolerance,
        figures,
    }
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
            "{BASE}\n[reference]\nsource = \"the seed\"\n[reference.figures.raw]\n\
             \"ipv4.udp.sender\" = \"347M\"\n\"ipv4.tcp.sender\" = \"941M\"\n\
             \"ipv4.tcp.receiver.p6\" = 656690000\n"
        );
        let t = parse_str(&text, Path::new("r.toml")).unwrap_or_else(|e| panic!("{e}"));
        let r = t.reference.unwrap();
        assert_eq!(r.source.as_deref(), Some("the seed"));
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
source = "the seed"
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
        let s = scenarios_str(&text, Path::new("r.toml")).unwrap();
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
}
