//! Reading an `--expect` from its text: the operator, the value with its unit
//! and precision, and which path, ratio and cell the left side names. Every
//! error says what is wrong and lists the valid forms ([`FORMS`]).

use super::expectation::{Expectation, Op, Percentile, Phase, Statistic, Subject, Way};
use crate::vocab::Cell;
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
  a bare number is bit/s
latency (from the probes, idle and under each cell's load):
  [PATH:]CELL.latency[.WAY][.STAT] OP TIME     fast/raw:ipv4.tcp.sender.latency.p99 <= 20ms
  [PATH:]FAMILY.idle.latency[.WAY][.STAT] OP TIME    ipv4.idle.latency <= 1ms
  WAY is rtt (the default), forward (to the target) or reverse; STAT is median (the
  default), p90, p99, max, min or mean; TIME is in ms (a bare number), us or s";

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
    if lhs.split(['.', ':']).any(|w| w == "latency") {
        let subject = parse_latency(lhs)?;
        let (value, tolerance) = parse_time(rhs)?;
        return Ok(Expectation {
            subject,
            op,
            value,
            tolerance,
            text: format!("{lhs} {op} {rhs}"),
        });
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

/// A value as written: the number, its unit (trimmed), and half a unit of its
/// last digit; `what` says what it should have been when it is no number.
fn number_and_unit<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str, f64), String> {
    let digits = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = (&s[..digits], s[digits..].trim());
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("'{s}' is not {what}"))?;
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    Ok((value, unit, 0.5 * 10f64.powi(-(decimals as i32))))
}

fn parse_value(s: &str) -> Result<Value, String> {
    let (value, unit, half) =
        number_and_unit(s, "a number (values are 0 or more, e.g. 0.2 or 500M)")?;
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
    Ok(Value {
        value: value * multiplier,
        tolerance: half * multiplier,
        rate: !unit.is_empty(),
    })
}

/// A latency's left side: the path (before a ':', or before the first
/// `.ipv4` / `.ipv6`), then the cell or `FAMILY.idle`, then `latency` and its
/// way and statistic.
fn parse_latency(lhs: &str) -> Result<Subject, String> {
    let (path, key) = match lhs.rsplit_once(':') {
        Some((p, k)) => (Some(p.trim()), k.trim()),
        None => match ["ipv4.", "ipv6."]
            .iter()
            .filter_map(|f| lhs.find(&format!(".{f}")))
            .min()
        {
            Some(i) => (Some(&lhs[..i]), &lhs[i + 1..]),
            None => (None, lhs),
        },
    };
    if path == Some("") {
        return Err(format!("no path before the cell in '{lhs}'"));
    }
    let parts: Vec<&str> = key.split('.').collect();
    let at = parts
        .iter()
        .position(|w| *w == "latency")
        .ok_or_else(|| format!("'{key}' has no '.latency' after its cell"))?;
    let (before, after) = (&parts[..at], &parts[at + 1..]);
    let phase = match before {
        [family, "idle"] => Phase::Idle(match *family {
            "ipv4" => crate::vocab::Family::Ipv4,
            "ipv6" => crate::vocab::Family::Ipv6,
            f => return Err(format!("unknown family '{f}' in '{key}' (ipv4 or ipv6)")),
        }),
        [] => return Err(format!("no cell before '.latency' in '{lhs}'")),
        cell => Phase::Loaded(
            Cell::parse_key(&cell.join("."))
                .ok_or_else(|| Cell::parts_problem(cell, &cell.join(".")))?,
        ),
    };
    let mut way = Way::Rtt;
    let mut percentile = Percentile::Median;
    let mut rest = after;
    if let Some(w) = rest.first().and_then(|w| {
        [Way::Rtt, Way::Forward, Way::Reverse]
            .into_iter()
            .find(|x| x.word() == *w)
    }) {
        way = w;
        rest = &rest[1..];
    }
    if let Some(p) = rest
        .first()
        .and_then(|w| Percentile::ALL.into_iter().find(|x| x.word() == *w))
    {
        percentile = p;
        rest = &rest[1..];
    }
    if let Some(w) = rest.first() {
        return Err(format!(
            "unknown latency figure '{w}' in '{lhs}' (rtt, forward or reverse, then median, p90, p99, max, min or mean)"
        ));
    }
    Ok(Subject::Latency {
        path: path.map(str::to_string),
        phase,
        way,
        percentile,
    })
}

/// A time as milliseconds, with half a unit of the last digit written: `20ms`,
/// `500us`, `0.02s`; a bare number is milliseconds.
fn parse_time(s: &str) -> Result<(f64, f64), String> {
    let (value, unit, half) = number_and_unit(s, "a time (e.g. 20ms, 500us, 0.1s)")?;
    let scale = match unit {
        "" | "ms" => 1.0,
        "us" | "µs" => 1e-3,
        "s" => 1e3,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{s}': a latency is compared with a time in ms, us or s, e.g. 20ms"
            ));
        }
    };
    Ok((value * scale, half * scale))
}

/// `wg/raw` as ("wg", "raw"); with more slashes (scenario labels) the middle
/// one, and [`check`](fn@super::check) tries the others against the results' paths.
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

#[cfg(test)]
mod tests {
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
    fn latency_forms_parse() {
        let lat = |s: &str| {
            let e = parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            match e.subject {
                Subject::Latency {
                    path,
                    phase,
                    way,
                    percentile,
                } => (path, phase, way, percentile, e.value),
                other => panic!("{s}: {other:?}"),
            }
        };
        let loaded = Phase::Loaded(cell("ipv4.tcp.sender"));
        // The form, the path before the cell with a dot, and with ':'.
        for s in [
            "fast/raw.ipv4.tcp.sender.latency.p99 <= 20ms",
            "fast/raw:ipv4.tcp.sender.latency.p99 <= 20ms",
            "fast/raw:ipv4.tcp.sender.latency.rtt.p99 <= 20",
        ] {
            assert_eq!(
                lat(s),
                (
                    Some("fast/raw".into()),
                    loaded,
                    Way::Rtt,
                    Percentile::P99,
                    20.0
                ),
                "{s}"
            );
        }
        assert_eq!(
            lat("ipv4.tcp.sender.latency < 0.5s"),
            (None, loaded, Way::Rtt, Percentile::Median, 500.0)
        );
        assert_eq!(
            lat("wg:ipv6.udp.receiver.p6.latency.forward.max <= 1500us"),
            (
                Some("wg".into()),
                Phase::Loaded(cell("ipv6.udp.receiver.p6")),
                Way::Forward,
                Percentile::Max,
                1.5
            )
        );
        assert_eq!(
            lat("raw:ipv6.idle.latency.reverse >= 0.01ms"),
            (
                Some("raw".into()),
                Phase::Idle(crate::vocab::Family::Ipv6),
                Way::Reverse,
                Percentile::Median,
                0.01
            )
        );
        assert_eq!(
            parse("ipv4.idle.latency == 40.0ms").unwrap().tolerance,
            0.05
        );
        for (s, what) in [
            (
                "ipv4.tcp.sender.latency <= 20M",
                "unknown unit 'M' in '20M': a latency is compared with a time",
            ),
            (
                "ipv4.tcp.sender.latency.p95 <= 20ms",
                "unknown latency figure 'p95'",
            ),
            ("ipv4.tcp.latency <= 20ms", "'ipv4.tcp' is not a cell"),
            ("ipv5.idle.latency <= 20ms", "unknown family 'ipv5'"),
            ("raw:latency <= 20ms", "no cell before '.latency'"),
            (":ipv4.idle.latency <= 1ms", "no path before the cell"),
        ] {
            let e = parse(s).expect_err(s);
            assert!(e.starts_with(what), "{s}: {e}");
            assert!(e.contains("CELL.latency[.WAY][.STAT]"), "{s}: {e}");
        }
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
}
