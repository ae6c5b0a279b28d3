//! CI expectations (`--expect`): a threshold on one cell's figure, or on the
//! ratio of two paths' figures, checked against [`Results`].
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
//! in `.best` (the seed's rule), `.min` or `.max` to compare that instead.
//!
//! A path label may contain a slash (`fast/raw` in a scenario), so which slash
//! divides a ratio is settled against the paths the results have; `fast/raw:CELL`
//! with a rate (`500M`) is a cell on path `fast/raw`.

use super::{baseline_index, one_line, percent, rate, seed_order, sig};
use crate::measure::model::{CellResult, PathResult, Results};
use crate::vocab::Cell;
use std::fmt;
use std::str::FromStr;

/// The valid forms, shown with every parse error and meant for `--help`.
pub const FORMS: &str = "\
valid forms (compared on the median of the runs):
  CELL OP RATE                    ipv4.tcp.sender >= 500M        on the baseline path
  PATH:CELL OP RATE               wg:ipv4.tcp.sender > 100M
  PATH/BASELINE OP RATIO          wg/raw >= 0.2                  every cell both paths have
  PATH/BASELINE:CELL OP RATIO     wg/raw:ipv4.tcp.sender >= 0.2
CELL is FAMILY.PROTOCOL.DIRECTION[.pSTREAMS] with ipv4|ipv6, tcp|udp, sender|receiver,
  e.g. ipv6.udp.receiver or ipv4.tcp.sender.p6; append .best, .min or .max to compare
  that instead of the median
OP is >=, >, <=, < or == (== holds to the precision written: == 0.31 means 0.305 to 0.315)
RATE is in bit/s with an optional K, M or G (1000-based): 500M is 500000000 bit/s;
  a bare number is bit/s";

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Ge,
    Gt,
    Le,
    Lt,
    Eq,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Ge => ">=",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Lt => "<",
            Op::Eq => "==",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// Which figure of a cell's runs is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Statistic {
    #[default]
    Median,
    /// The seed's rule.
    Best,
    Min,
    Max,
}

impl Statistic {
    pub fn word(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::Best => "best",
            Statistic::Min => "min",
            Statistic::Max => "max",
        }
    }

    pub fn of(self, c: &CellResult) -> f64 {
        match self {
            Statistic::Median => c.median_bps,
            Statistic::Best => c.best_bps,
            Statistic::Min => c.min_bps,
            Statistic::Max => c.max_bps,
        }
    }
}

/// What an expectation measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// `CELL` or `PATH:CELL`: one cell's figure in bit/s, on the baseline path
    /// when `path` is `None`.
    Cell {
        path: Option<String>,
        cell: Cell,
        statistic: Statistic,
    },
    /// `A/B` or `A/B:CELL`: A's figure divided by B's, for one cell or for
    /// every cell both paths have.
    Ratio {
        numerator: String,
        denominator: String,
        cell: Option<Cell>,
        statistic: Statistic,
    },
}

/// One parsed `--expect`.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub subject: Subject,
    pub op: Op,
    /// bit/s for a cell, a plain number for a ratio.
    pub value: f64,
    /// How far from `value` `==` still holds: half a unit of the last digit
    /// written.
    pub tolerance: f64,
    /// As written, for messages: `ipv4.tcp.sender >= 500M`.
    pub text: String,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Expectation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse(s)
    }
}

/// Parse one expectation; the error says what is wrong and lists the valid
/// forms. Usable as a clap `value_parser`.
pub fn parse(s: &str) -> Result<Expectation, String> {
    parse_inner(s.trim()).map_err(|problem| format!("{problem}\n{FORMS}"))
}

fn parse_inner(s: &str) -> Result<Expectation, String> {
    if s.is_empty() {
        return Err("empty expectation".to_string());
    }
    let is_op = |c: char| matches!(c, '<' | '>' | '=' | '!');
    let at = s
        .find(is_op)
        .ok_or_else(|| format!("no comparison operator in '{s}'"))?;
    let len = s[at..].find(|c: char| !is_op(c)).unwrap_or(s.len() - at);
    let op = match &s[at..at + len] {
        ">=" => Op::Ge,
        ">" => Op::Gt,
        "<=" => Op::Le,
        "<" => Op::Lt,
        "==" => Op::Eq,
        "=" => {
            return Err(format!(
                "'=' in '{s}' is not an operator; write == to compare for equality"
            ));
        }
        other => return Err(format!("unknown operator '{other}' in '{s}'")),
    };
    let lhs = s[..at].trim();
    let rhs = s[at + len..].trim();
    if lhs.is_empty() {
        return Err(format!("nothing to compare before '{op}' in '{s}'"));
    }
    if rhs.is_empty() {
        return Err(format!("no value after '{op}' in '{s}'"));
    }
    let value = parse_value(rhs)?;

    let subject = match lhs.rsplit_once(':') {
        None if lhs.contains('/') => {
            let (numerator, denominator) = split_ratio(lhs)?;
            Subject::Ratio {
                numerator,
                denominator,
                cell: None,
                statistic: Statistic::Median,
            }
        }
        None => {
            let (cell, statistic) = parse_cell(lhs).map_err(|e| {
                if lhs.contains('.') {
                    e
                } else {
                    format!("{e}; to name a path, write {lhs}:CELL")
                }
            })?;
            Subject::Cell {
                path: None,
                cell,
                statistic,
            }
        }
        Some((prefix, key)) => {
            let (prefix, key) = (prefix.trim(), key.trim());
            if prefix.is_empty() {
                return Err(format!("no path before ':' in '{lhs}'"));
            }
            if key.is_empty() {
                return Err(format!("no cell after ':' in '{lhs}'"));
            }
            let (cell, statistic) = parse_cell(key)?;
            // A rate can only be compared with a cell's figure, so a slash with a
            // rate is part of a path's label (fast/raw in a scenario).
            if prefix.contains('/') && !value.rate {
                let (numerator, denominator) = split_ratio(prefix)?;
                Subject::Ratio {
                    numerator,
                    denominator,
                    cell: Some(cell),
                    statistic,
                }
            } else {
                Subject::Cell {
                    path: Some(prefix.to_string()),
                    cell,
                    statistic,
                }
            }
        }
    };
    if value.rate && matches!(subject, Subject::Ratio { .. }) {
        return Err(format!(
            "'{lhs}' is a ratio, compared with a plain number such as 0.2, not a rate ('{rhs}')"
        ));
    }
    Ok(Expectation {
        subject,
        op,
        value: value.value,
        tolerance: value.tolerance,
        text: format!("{lhs} {op} {rhs}"),
    })
}

struct Value {
    value: f64,
    tolerance: f64,
    /// Written with a unit (K, M, G, bit/s): only a cell's figure compares with it.
    rate: bool,
}

fn parse_value(s: &str) -> Result<Value, String> {
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (&s[..digits], s[digits..].trim());
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("'{s}' is not a number (values are 0 or more, e.g. 0.2 or 500M)"))?;
    let (multiplier, rest) = match unit.chars().next() {
        Some('k' | 'K') => (1e3, &unit[1..]),
        Some('m' | 'M') => (1e6, &unit[1..]),
        Some('g' | 'G') => (1e9, &unit[1..]),
        Some('t' | 'T') => (1e12, &unit[1..]),
        _ => (1.0, unit),
    };
    if !matches!(rest, "" | "bit/s" | "bps" | "b/s") {
        return Err(format!(
            "unknown unit '{unit}' in '{s}'; use K, M or G (1000-based, bit/s), e.g. 500M"
        ));
    }
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    Ok(Value {
        value: value * multiplier,
        tolerance: 0.5 * 10f64.powi(-(decimals as i32)) * multiplier,
        rate: !unit.is_empty(),
    })
}

/// `wg/raw` as ("wg", "raw"); with more slashes (scenario labels) the middle
/// one, and [`check`] tries the others against the results' paths.
fn split_ratio(s: &str) -> Result<(String, String), String> {
    let slashes: Vec<usize> = s.match_indices('/').map(|(i, _)| i).collect();
    let at = slashes[(slashes.len() - 1) / 2];
    let (a, b) = (s[..at].trim(), s[at + 1..].trim());
    if a.is_empty() || b.is_empty() {
        return Err(format!("'{s}' is not a ratio of two paths such as wg/raw"));
    }
    Ok((a.to_string(), b.to_string()))
}

fn parse_cell(s: &str) -> Result<(Cell, Statistic), String> {
    let mut parts: Vec<&str> = s.split('.').collect();
    let statistic = match parts.last().copied() {
        Some("best") => Statistic::Best,
        Some("median") => Statistic::Median,
        Some("min") => Statistic::Min,
        Some("max") => Statistic::Max,
        _ => Statistic::Median,
    };
    if parts.len() > 1 && parts.last().copied() == Some(statistic.word()) {
        parts.pop();
    }
    if let Some(c) = Cell::parse_key(&parts.join(".")) {
        return Ok((c, statistic));
    }
    let problem = Cell::parts_problem(&parts, s);
    Err(if problem.starts_with("bad stream count") {
        format!("{problem}, or unknown statistic (best, median, min, max)")
    } else {
        problem
    })
}

/// An expectation that did not hold, or could not be checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The expectation as written.
    pub expectation: String,
    /// The cell it failed on, when it is about more than one.
    pub cell: Option<Cell>,
    /// The figure it was checked against: bit/s, or a ratio; `None` when there
    /// was none to check (an unknown path or cell, a failed cell).
    pub measured: Option<f64>,
    /// Everything after the expectation: "measured 412.3 Mbit/s, 17.5 % short".
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}: ", self.expectation)?;
        if let Some(c) = &self.cell {
            write!(f, "{c}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Check expectations against the results, the first path the baseline.
pub fn check(r: &Results, e: &[Expectation]) -> Vec<Failure> {
    check_with_baseline(r, e, None)
}

/// Check expectations against the results; `baseline` is the label of the
/// path that a cell without `PATH:` is read from (the first path when `None`).
/// Each failure is one line, naming the expectation and by how much it missed.
pub fn check_with_baseline(r: &Results, e: &[Expectation], baseline: Option<&str>) -> Vec<Failure> {
    let mut failures = Vec::new();
    for x in e {
        let fail = |cell: Option<Cell>, measured: Option<f64>, message: String| Failure {
            expectation: x.text.clone(),
            cell,
            measured,
            message,
        };
        match &x.subject {
            Subject::Cell {
                path,
                cell,
                statistic,
            } => {
                let path = match path {
                    Some(label) => find_path(r, label),
                    None => baseline_index(r, baseline).map(|i| &r.paths[i]),
                };
                if let Err(m) = check_cell(x, path, cell, *statistic) {
                    let (measured, message) = m;
                    failures.push(fail(None, measured, message));
                }
            }
            Subject::Ratio {
                numerator,
                denominator,
                cell,
                statistic,
            } => {
                let pair = match resolve_ratio(r, numerator, denominator) {
                    Ok(pair) => pair,
                    Err(message) => {
                        // `fast/raw:CELL`: no ratio of two paths, but a path.
                        let joined = format!("{numerator}/{denominator}");
                        match (cell, find_path(r, &joined)) {
                            (Some(c), Ok(p)) => {
                                if let Err((measured, message)) =
                                    check_cell(x, Ok(p), c, *statistic)
                                {
                                    failures.push(fail(None, measured, message));
                                }
                            }
                            _ => failures.push(fail(None, None, message)),
                        }
                        continue;
                    }
                };
                let (a, b) = pair;
                match cell {
                    Some(c) => {
                        if let Err((measured, message)) = check_ratio(x, a, b, c, *statistic) {
                            failures.push(fail(None, measured, message));
                        }
                    }
                    None => {
                        let mut cells: Vec<Cell> = a
                            .cells
                            .iter()
                            .map(|c| c.cell)
                            .filter(|c| b.cell(c).is_some())
                            .collect();
                        cells.sort_by_key(seed_order);
                        if cells.is_empty() {
                            failures.push(fail(
                                None,
                                None,
                                format!("{} and {} have no cell in common", a.label(), b.label()),
                            ));
                        }
                        for c in cells {
                            if let Err((measured, message)) = check_ratio(x, a, b, &c, *statistic) {
                                failures.push(fail(Some(c), measured, message));
                            }
                        }
                    }
                }
            }
        }
    }
    failures
}

type Miss = (Option<f64>, String);

fn check_cell(
    x: &Expectation,
    path: Result<&PathResult, String>,
    cell: &Cell,
    statistic: Statistic,
) -> Result<(), Miss> {
    let p = path.map_err(|m| (None, m))?;
    let c = figure_of(p, cell)?;
    let v = statistic.of(c);
    if holds(x, v) {
        return Ok(());
    }
    Err((Some(v), format!("measured {}, {}", rate(v, 4), miss(x, v))))
}

fn check_ratio(
    x: &Expectation,
    a: &PathResult,
    b: &PathResult,
    cell: &Cell,
    statistic: Statistic,
) -> Result<(), Miss> {
    let (ca, cb) = (figure_of(a, cell)?, figure_of(b, cell)?);
    let (va, vb) = (statistic.of(ca), statistic.of(cb));
    if vb.is_nan() || vb <= 0.0 {
        return Err((
            None,
            format!(
                "{}'s {} of {cell} is {}: no ratio",
                b.label(),
                statistic.word(),
                rate(vb, 4)
            ),
        ));
    }
    let v = va / vb;
    if holds(x, v) {
        return Ok(());
    }
    Err((
        Some(v),
        format!(
            "measured {} = {} {} / {} {}, {}",
            sig(v, 3),
            a.label(),
            rate(va, 4),
            b.label(),
            rate(vb, 4),
            miss(x, v)
        ),
    ))
}

/// The cell on the path, if it has a figure.
fn figure_of<'a>(p: &'a PathResult, cell: &Cell) -> Result<&'a CellResult, Miss> {
    let Some(c) = p.cell(cell) else {
        let mut keys: Vec<&Cell> = p.cells.iter().map(|c| &c.cell).collect();
        keys.sort_by_key(|c| seed_order(c));
        let keys: Vec<String> = keys.iter().map(|c| c.key()).collect();
        return Err((
            None,
            format!(
                "no cell {cell} on {}; cells: {}",
                p.label(),
                if keys.is_empty() {
                    "(none)".to_string()
                } else {
                    keys.join(", ")
                }
            ),
        ));
    };
    match &c.error {
        Some(e) => Err((
            None,
            format!("{cell} failed on {}: {}", p.label(), one_line(e)),
        )),
        None => Ok(c),
    }
}

fn find_path<'a>(r: &'a Results, label: &str) -> Result<&'a PathResult, String> {
    r.paths
        .iter()
        .find(|p| p.label() == label)
        .ok_or_else(|| format!("no path {label}; paths: {}", super::path_list(r)))
}

/// The two paths of a ratio: as split, or at whichever slash names two paths.
fn resolve_ratio<'a>(
    r: &'a Results,
    numerator: &str,
    denominator: &str,
) -> Result<(&'a PathResult, &'a PathResult), String> {
    if let (Ok(a), Ok(b)) = (find_path(r, numerator), find_path(r, denominator)) {
        return Ok((a, b));
    }
    let joined = format!("{numerator}/{denominator}");
    for (i, _) in joined.match_indices('/') {
        if let (Ok(a), Ok(b)) = (find_path(r, &joined[..i]), find_path(r, &joined[i + 1..])) {
            return Ok((a, b));
        }
    }
    let missing: Vec<&str> = [numerator, denominator]
        .into_iter()
        .filter(|l| find_path(r, l).is_err())
        .collect();
    Err(format!(
        "no path{} {}; paths: {}",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", "),
        super::path_list(r)
    ))
}

fn holds(x: &Expectation, v: f64) -> bool {
    match x.op {
        Op::Ge => v >= x.value,
        Op::Gt => v > x.value,
        Op::Le => v <= x.value,
        Op::Lt => v < x.value,
        // A relative slack for the float arithmetic of the suffix and ratio.
        Op::Eq => (v - x.value).abs() <= x.tolerance * (1.0 + 1e-9),
    }
}

/// By how much `v` missed, in the direction the operator wanted.
fn miss(x: &Expectation, v: f64) -> String {
    if !v.is_finite() {
        return "not a number".to_string();
    }
    let limit = match &x.subject {
        Subject::Cell { .. } => rate(x.value, 4),
        Subject::Ratio { .. } => sig(x.value, 3),
    };
    if x.value == 0.0 || v == x.value {
        return match x.op {
            Op::Gt => format!("not above {limit}"),
            Op::Lt => format!("not below {limit}"),
            Op::Ge => format!("below {limit}"),
            Op::Le => format!("above {limit}"),
            Op::Eq => format!("not {limit}"),
        };
    }
    let by = (v - x.value).abs() / x.value * 100.0;
    let word = match x.op {
        Op::Ge | Op::Gt => "short",
        Op::Le | Op::Lt => "over",
        Op::Eq if v < x.value => "under",
        Op::Eq => "over",
    };
    format!("{} % {word}", percent(by))
}

#[cfg(test)]
mod tests {
    use super::super::fixture;
    use super::*;

    fn cell(key: &str) -> Cell {
        Cell::parse_key(key).unwrap()
    }

    #[test]
    fn every_form_parses() {
        let e = parse("ipv4.tcp.sender >= 500M").unwrap();
        assert_eq!(
            e.subject,
            Subject::Cell {
                path: None,
                cell: cell("ipv4.tcp.sender"),
                statistic: Statistic::Median
            }
        );
        assert_eq!((e.op, e.value), (Op::Ge, 500e6));
        assert_eq!(e.to_string(), "ipv4.tcp.sender >= 500M");

        let e = parse("wg:ipv4.tcp.sender > 100M").unwrap();
        assert_eq!(
            e.subject,
            Subject::Cell {
                path: Some("wg".into()),
                cell: cell("ipv4.tcp.sender"),
                statistic: Statistic::Median
            }
        );
        assert_eq!((e.op, e.value), (Op::Gt, 100e6));

        let e = parse("wg/raw >= 0.2").unwrap();
        assert_eq!(
            e.subject,
            Subject::Ratio {
                numerator: "wg".into(),
                denominator: "raw".into(),
                cell: None,
                statistic: Statistic::Median
            }
        );
        assert_eq!(e.value, 0.2);

        let e = parse("wg/raw:ipv6.udp.receiver.p6 <= 1.5").unwrap();
        assert_eq!(
            e.subject,
            Subject::Ratio {
                numerator: "wg".into(),
                denominator: "raw".into(),
                cell: Some(cell("ipv6.udp.receiver.p6")),
                statistic: Statistic::Median
            }
        );
        assert_eq!((e.op, e.value), (Op::Le, 1.5));

        // Operators, spacing, suffixes.
        for (s, op, v) in [
            ("ipv4.tcp.sender<1G", Op::Lt, 1e9),
            ("ipv4.tcp.sender == 941.5M", Op::Eq, 941.5e6),
            ("ipv4.tcp.sender>=2.5g", Op::Ge, 2.5e9),
            ("ipv4.tcp.sender > 800k", Op::Gt, 800e3),
            ("ipv4.tcp.sender > 800Kbit/s", Op::Gt, 800e3),
            ("ipv4.tcp.sender > 300Mbps", Op::Gt, 300e6),
            ("ipv4.tcp.sender > 1000000", Op::Gt, 1e6),
            ("  ipv4.tcp.sender   <=   5 M ", Op::Le, 5e6),
        ] {
            let e = parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!((e.op, e.value), (op, v), "{s}");
        }
        assert_eq!(
            parse("ipv4.tcp.sender<1G").unwrap().text,
            "ipv4.tcp.sender < 1G"
        );
    }

    #[test]
    fn statistics_and_tolerance() {
        let e = parse("ipv4.tcp.sender.best >= 900M").unwrap();
        assert!(matches!(
            e.subject,
            Subject::Cell {
                statistic: Statistic::Best,
                ..
            }
        ));
        let e = parse("raw:ipv4.tcp.sender.p6.min >= 900M").unwrap();
        assert!(matches!(
            e.subject,
            Subject::Cell { statistic: Statistic::Min, cell, .. } if cell.streams == 6
        ));
        assert_eq!(parse("wg/raw == 0.31").unwrap().tolerance, 0.005);
        assert_eq!(parse("ipv4.tcp.sender == 500M").unwrap().tolerance, 0.5e6);
    }

    #[test]
    fn a_slash_with_a_rate_is_a_scenario_path() {
        let e = parse("fast/raw:ipv4.tcp.sender >= 500M").unwrap();
        assert_eq!(
            e.subject,
            Subject::Cell {
                path: Some("fast/raw".into()),
                cell: cell("ipv4.tcp.sender"),
                statistic: Statistic::Median
            }
        );
        let e = parse("fast/wg/fast/raw >= 0.2").unwrap();
        assert!(matches!(
            &e.subject,
            Subject::Ratio { numerator, denominator, .. } if numerator == "fast/wg" && denominator == "fast/raw"
        ));
    }

    #[test]
    fn bad_expressions_say_what_and_show_the_forms() {
        for (s, what) in [
            ("", "empty expectation"),
            (
                "ipv4.tcp.sender 500M",
                "no comparison operator in 'ipv4.tcp.sender 500M'",
            ),
            (
                "ipv4.tcp.sender = 500M",
                "'=' in 'ipv4.tcp.sender = 500M' is not an operator; write == to compare",
            ),
            ("ipv4.tcp.sender => 500M", "unknown operator '=>'"),
            ("ipv4.tcp.sender != 500M", "unknown operator '!='"),
            (">= 500M", "nothing to compare before '>='"),
            ("ipv4.tcp.sender >=", "no value after '>='"),
            ("ipv4.tcp.sender >= fast", "'fast' is not a number"),
            ("ipv4.tcp.sender >= -5M", "'-5M' is not a number"),
            (
                "ipv4.tcp.sender >= 500X",
                "unknown unit 'X' in '500X'; use K, M or G",
            ),
            ("ipv4.tcp.sender >= 5MB", "unknown unit 'MB'"),
            (
                "ipv5.tcp.sender >= 500M",
                "unknown family 'ipv5' in 'ipv5.tcp.sender' (ipv4 or ipv6)",
            ),
            ("ipv4.sctp.sender >= 500M", "unknown protocol 'sctp'"),
            (
                "ipv4.tcp.upload >= 500M",
                "unknown direction 'upload' in 'ipv4.tcp.upload' (sender or receiver)",
            ),
            ("ipv4.tcp.sender.x6 >= 500M", "bad stream count 'x6'"),
            ("ipv4.tcp >= 500M", "'ipv4.tcp' is not a cell"),
            (
                "raw >= 500M",
                "'raw' is not a cell; to name a path, write raw:CELL",
            ),
            (":ipv4.tcp.sender >= 5M", "no path before ':'"),
            ("wg: >= 5M", "no cell after ':'"),
            (
                "wg/raw >= 500M",
                "'wg/raw' is a ratio, compared with a plain number such as 0.2, not a rate ('500M')",
            ),
            ("/raw >= 0.2", "'/raw' is not a ratio of two paths"),
            ("wg/ >= 0.2", "'wg/' is not a ratio of two paths"),
        ] {
            let e = parse(s).expect_err(s);
            assert!(e.starts_with(what), "{s}: {e}");
            assert!(e.contains("\nvalid forms"), "{s}: {e}");
            assert!(e.contains("wg/raw:ipv4.tcp.sender >= 0.2"), "{s}: {e}");
        }
    }

    fn failures(exprs: &[&str]) -> Vec<String> {
        let e: Vec<Expectation> = exprs.iter().map(|s| parse(s).unwrap()).collect();
        check(&fixture::results(), &e)
            .iter()
            .map(|f| f.to_string())
            .collect()
    }

    #[test]
    fn cells_on_the_baseline_and_named_paths() {
        // raw ipv4.tcp.sender: median 939, best 941, min 930 Mbit/s.
        assert!(
            failures(&[
                "ipv4.tcp.sender >= 500M",
                "ipv4.tcp.sender > 938M",
                "ipv4.tcp.sender < 1G",
                "ipv4.tcp.sender <= 939M",
                "ipv4.tcp.sender == 939M",
                "ipv4.tcp.sender == 0.94G",
                // To the precision written: 1G is 0.5G to 1.5G.
                "ipv4.tcp.sender == 1G",
                "ipv4.tcp.sender.best >= 941M",
                "ipv4.tcp.sender.min > 929M",
                "wg:ipv4.tcp.sender > 100M",
                "wg:ipv4.udp.sender >= 115000000",
                "raw:ipv4.tcp.sender.p6 >= 900M",
            ])
            .is_empty()
        );
        assert_eq!(
            failures(&["ipv4.tcp.sender >= 1.1384G"]),
            ["ipv4.tcp.sender >= 1.1384G: measured 939.0 Mbit/s, 17.5 % short"]
        );
        assert_eq!(
            failures(&["wg:ipv4.tcp.sender > 500M"]),
            ["wg:ipv4.tcp.sender > 500M: measured 290.0 Mbit/s, 42.0 % short"]
        );
        assert_eq!(
            failures(&["ipv4.tcp.sender <= 900M"]),
            ["ipv4.tcp.sender <= 900M: measured 939.0 Mbit/s, 4.3 % over"]
        );
        assert_eq!(
            failures(&["ipv4.tcp.sender == 0.90G", "ipv4.tcp.sender == 1.000G"]),
            [
                "ipv4.tcp.sender == 0.90G: measured 939.0 Mbit/s, 4.3 % over",
                "ipv4.tcp.sender == 1.000G: measured 939.0 Mbit/s, 6.1 % under"
            ]
        );
        assert_eq!(
            failures(&["ipv4.tcp.sender > 939M", "ipv4.tcp.sender > 0"]),
            ["ipv4.tcp.sender > 939M: measured 939.0 Mbit/s, not above 939.0 Mbit/s"]
        );
        assert_eq!(
            failures(&["ipv4.tcp.sender.best >= 1G"]),
            ["ipv4.tcp.sender.best >= 1G: measured 941.0 Mbit/s, 5.9 % short"]
        );
    }

    #[test]
    fn the_baseline_can_be_chosen() {
        let e = [parse("ipv4.tcp.sender >= 500M").unwrap()];
        let r = fixture::results();
        assert!(check_with_baseline(&r, &e, Some("raw")).is_empty());
        let f = check_with_baseline(&r, &e, Some("wg"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].measured, Some(290e6));
        assert_eq!(
            check_with_baseline(&r, &e, Some("gre"))[0].to_string(),
            "ipv4.tcp.sender >= 500M: no path gre; paths: raw, wg"
        );
    }

    #[test]
    fn ratios_for_one_cell_and_for_every_cell() {
        // wg/raw medians: tcp.sender 0.309, tcp.receiver 0.500, udp.sender 0.338,
        // udp.receiver 0.495; ipv6.tcp.sender failed on wg; p6 only on raw.
        assert!(
            failures(&[
                "wg/raw:ipv4.tcp.sender >= 0.3",
                "wg/raw:ipv4.tcp.sender == 0.31"
            ])
            .is_empty()
        );
        assert_eq!(
            failures(&["wg/raw:ipv4.tcp.sender >= 0.4"]),
            [
                "wg/raw:ipv4.tcp.sender >= 0.4: measured 0.309 = wg 290.0 Mbit/s / raw 939.0 Mbit/s, 22.8 % short"
            ]
        );
        assert_eq!(
            failures(&["wg/raw >= 0.34"]),
            [
                "wg/raw >= 0.34: ipv4.tcp.sender: measured 0.309 = wg 290.0 Mbit/s / raw 939.0 Mbit/s, 9.2 % short",
                "wg/raw >= 0.34: ipv4.udp.sender: measured 0.338 = wg 115.0 Mbit/s / raw 340.0 Mbit/s, 0.5 % short",
                "wg/raw >= 0.34: ipv6.tcp.sender: ipv6.tcp.sender failed on wg: connecting to [fd00:9::2]:5201: connection refused",
            ]
        );
        let r = fixture::results();
        let f = check(&r, &[parse("raw/wg <= 2").unwrap()]);
        let cells: Vec<String> = f.iter().map(|f| f.cell.unwrap().key()).collect();
        assert_eq!(
            cells,
            [
                "ipv4.tcp.sender",
                "ipv4.udp.sender",
                "ipv4.udp.receiver",
                "ipv6.tcp.sender"
            ]
        );
        assert!((f[0].measured.unwrap() - 939.0 / 290.0).abs() < 1e-9);
        assert!(f[1].to_string().ends_with(", 47.8 % over"), "{}", f[1]);
        // Best instead of median for one cell.
        assert!(failures(&["wg/raw:ipv4.tcp.sender.best >= 0.31"]).is_empty());
    }

    #[test]
    fn unknown_paths_and_cells_are_failures() {
        assert_eq!(
            failures(&["gre:ipv4.tcp.sender > 1M"]),
            ["gre:ipv4.tcp.sender > 1M: no path gre; paths: raw, wg"]
        );
        assert_eq!(
            failures(&["gre/raw >= 0.2"]),
            ["gre/raw >= 0.2: no path gre; paths: raw, wg"]
        );
        assert_eq!(
            failures(&["gre/ipip >= 0.2"]),
            ["gre/ipip >= 0.2: no paths gre, ipip; paths: raw, wg"]
        );
        assert_eq!(
            failures(&["wg:ipv6.udp.receiver > 1M"]),
            [
                "wg:ipv6.udp.receiver > 1M: no cell ipv6.udp.receiver on wg; cells: ipv4.tcp.sender, \
                 ipv4.tcp.receiver, ipv4.udp.sender, ipv4.udp.receiver, ipv6.tcp.sender"
            ]
        );
        assert_eq!(
            failures(&["wg/raw:ipv4.tcp.sender.p6 > 0.5"]),
            [
                "wg/raw:ipv4.tcp.sender.p6 > 0.5: no cell ipv4.tcp.sender.p6 on wg; cells: ipv4.tcp.sender, \
              ipv4.tcp.receiver, ipv4.udp.sender, ipv4.udp.receiver, ipv6.tcp.sender"
            ]
        );
        assert_eq!(
            failures(&["wg:ipv6.tcp.sender > 1M"]),
            [
                "wg:ipv6.tcp.sender > 1M: ipv6.tcp.sender failed on wg: connecting to [fd00:9::2]:5201: connection refused"
            ]
        );
        let mut r = fixture::results();
        r.paths.clear();
        let f = check(&r, &[parse("ipv4.tcp.sender > 1M").unwrap()]);
        assert_eq!(
            f[0].to_string(),
            "ipv4.tcp.sender > 1M: no paths in the results"
        );
    }

    #[test]
    fn no_common_cells_and_zero_denominators() {
        let mut r = fixture::results();
        r.paths[1].cells.truncate(0);
        let f = check(&r, &[parse("wg/raw >= 0.2").unwrap()]);
        assert_eq!(
            f[0].to_string(),
            "wg/raw >= 0.2: wg and raw have no cell in common"
        );
        let mut r = fixture::results();
        r.paths[0].cells[5].median_bps = 0.0;
        let f = check(&r, &[parse("wg/raw:ipv4.tcp.sender >= 0.2").unwrap()]);
        assert_eq!(
            f[0].to_string(),
            "wg/raw:ipv4.tcp.sender >= 0.2: raw's median of ipv4.tcp.sender is 0 bit/s: no ratio"
        );
    }

    #[test]
    fn scenario_paths_with_slashes() {
        let mut r = fixture::results();
        r.paths[0].scenario = Some("fast".into());
        r.paths[1].scenario = Some("fast".into());
        let run = |s: &str| -> Vec<String> {
            check(&r, &[parse(s).unwrap()])
                .iter()
                .map(|f| f.to_string())
                .collect()
        };
        assert!(run("fast/raw:ipv4.tcp.sender >= 500M").is_empty());
        assert!(run("fast/wg/fast/raw:ipv4.tcp.sender >= 0.3").is_empty());
        assert_eq!(
            run("fast/wg/fast/raw:ipv4.tcp.sender >= 0.4"),
            [
                "fast/wg/fast/raw:ipv4.tcp.sender >= 0.4: measured 0.309 = fast/wg 290.0 Mbit/s / fast/raw 939.0 Mbit/s, 22.8 % short"
            ]
        );
        // A bare number after a scenario path's cell: bit/s on that path.
        assert!(run("fast/raw:ipv4.tcp.sender >= 500000000").is_empty());
        // Three slashes split anywhere that names two paths.
        let mut r = r.clone();
        r.paths[1].scenario = None;
        let run = |s: &str| -> Vec<String> {
            check(&r, &[parse(s).unwrap()])
                .iter()
                .map(|f| f.to_string())
                .collect()
        };
        assert!(
            run("wg/fast/raw >= 0.3")
                .iter()
                .all(|f| f.contains("ipv6.tcp.sender failed"))
        );
    }
}
