//! Holding expectations against [`Results`]: finding the paths and cells they
//! name, comparing the figure, and saying in one line per [`Failure`] by how
//! much it missed. A path label may contain a slash (`fast/raw`), so which
//! slash divides a ratio is settled against the results' paths.

use super::expectation::{Expectation, Op, Percentile, Phase, Statistic, Subject, Way};
use crate::measure::results::{CellResult, PathResult, Results};
use crate::report::baseline_index;
use crate::report::cells::study_order;
use crate::report::numbers::{ms, percent, rate, sig};
use crate::report::words::{one_line, path_list};
use crate::vocab::Cell;
use std::fmt;

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
            Subject::Latency {
                path,
                phase,
                way,
                percentile,
            } => {
                let path = named_or_baseline(r, path.as_deref(), baseline);
                if let Err((measured, message)) = check_latency(x, path, phase, *way, *percentile) {
                    failures.push(fail(None, measured, message));
                }
            }
            Subject::Cell {
                path,
                cell,
                statistic,
            } => {
                let path = named_or_baseline(r, path.as_deref(), baseline);
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
                        cells.sort_by_key(study_order);
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

fn check_latency(
    x: &Expectation,
    path: Result<&PathResult, String>,
    phase: &Phase,
    way: Way,
    percentile: Percentile,
) -> Result<(), Miss> {
    let p = path.map_err(|m| (None, m))?;
    let v = latency_figure(p, phase, way, percentile)?;
    if holds(x, v) {
        return Ok(());
    }
    Err((Some(v), format!("measured {} ms, {}", ms(v), miss(x, v))))
}

/// The latency figure (ms) a latency expectation reads on path `p`, or why
/// there is none.
pub fn latency_figure(
    p: &PathResult,
    phase: &Phase,
    way: Way,
    percentile: Percentile,
) -> Result<f64, (Option<f64>, String)> {
    let why_none =
        "measured without latency (--no-latency, latency = false, or a server outside the lab)";
    let l = match phase {
        Phase::Loaded(cell) => figure_of(p, cell)?.latency.as_ref().ok_or_else(|| {
            (
                None,
                format!("{cell} on {} has no latency: {why_none}", p.label()),
            )
        })?,
        Phase::Idle(family) => p
            .idle_latency
            .iter()
            .find(|(f, _)| f == family)
            .map(|(_, l)| l)
            .ok_or_else(|| {
                (
                    None,
                    format!(
                        "{} has no idle {} latency: {why_none}",
                        p.label(),
                        family.title()
                    ),
                )
            })?,
    };
    if l.received == 0 {
        return Err((
            None,
            format!("no probe came back on {} ({} sent)", p.label(), l.sent),
        ));
    }
    let spread = way.of(l).ok_or_else(|| {
        (
            None,
            format!(
                "{} has no one-way delay {}: only round trips toward a server outside the lab, whose clock is not the lab's",
                p.label(),
                way.word()
            ),
        )
    })?;
    Ok(percentile.of(spread))
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
        keys.sort_by_key(|c| study_order(c));
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

/// The path an expectation names, or the baseline when it names none.
fn named_or_baseline<'a>(
    r: &'a Results,
    label: Option<&str>,
    baseline: Option<&str>,
) -> Result<&'a PathResult, String> {
    match label {
        Some(label) => find_path(r, label),
        None => baseline_index(r, baseline).map(|i| &r.paths[i]),
    }
}

fn find_path<'a>(r: &'a Results, label: &str) -> Result<&'a PathResult, String> {
    r.paths
        .iter()
        .find(|p| p.label() == label)
        .ok_or_else(|| format!("no path {label}; paths: {}", path_list(r)))
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
        path_list(r)
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
        Subject::Latency { .. } => format!("{} ms", ms(x.value)),
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
    use super::*;
    use crate::report::expect::parse;
    use crate::report::fixture;

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
    fn latency_under_load_and_idle() {
        // raw's IPv6 TCP upload: RTT median 3.5 ms, p99 6.3, one way 1.75.
        assert!(failures(&["raw:ipv6.tcp.sender.latency.p99 <= 7ms"]).is_empty());
        assert!(failures(&["ipv6.tcp.sender.latency <= 3.5"]).is_empty());
        assert!(failures(&["raw:ipv6.tcp.sender.latency.forward.median == 1.75ms"]).is_empty());
        assert!(failures(&["raw:ipv4.idle.latency.max <= 125us"]).is_empty());
        assert_eq!(
            failures(&["raw:ipv6.tcp.sender.latency.p99 <= 5ms"]),
            ["raw:ipv6.tcp.sender.latency.p99 <= 5ms: measured 6.30 ms, 26.0 % over"]
        );
        assert_eq!(
            failures(&["wg:ipv4.idle.latency >= 1ms"]),
            ["wg:ipv4.idle.latency >= 1ms: measured 0.40 ms, 60.0 % short"]
        );
    }

    #[test]
    fn a_cell_or_path_without_latency_says_why() {
        assert_eq!(
            failures(&["raw:ipv4.tcp.sender.latency <= 5ms"]),
            [
                "raw:ipv4.tcp.sender.latency <= 5ms: ipv4.tcp.sender on raw has no latency: measured without latency (--no-latency, latency = false, or a server outside the lab)"
            ]
        );
        assert_eq!(
            failures(&["wg:ipv6.idle.latency <= 5ms"]),
            [
                "wg:ipv6.idle.latency <= 5ms: wg has no idle IPv6 latency: measured without latency (--no-latency, latency = false, or a server outside the lab)"
            ]
        );
        let f = failures(&["wg:ipv6.tcp.sender.latency <= 5ms"]);
        assert!(f[0].contains("ipv6.tcp.sender failed on wg"), "{f:?}");
        let mut r = fixture::results();
        r.paths[0].idle_latency[0].1.forward_ms = None;
        let f = check(
            &r,
            &[parse("raw:ipv4.idle.latency.forward <= 1ms").unwrap()],
        );
        assert!(
            f[0].message.contains("no one-way delay forward"),
            "{}",
            f[0]
        );
        r.paths[0].idle_latency[0].1.received = 0;
        let f = check(&r, &[parse("raw:ipv4.idle.latency <= 1ms").unwrap()]);
        assert_eq!(f[0].message, "no probe came back on raw (1000 sent)");
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
