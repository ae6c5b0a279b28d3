//! The families views ([`ViewKind::Families`]): in one scenario, a path that
//! measures only IPv4 against one with the same ends that measures only IPv6
//! (IPv4 over DS-Lite against native IPv6, the NVR500 study's question), cell by cell
//! of the same protocol, direction and streams.

use super::compared::{Compared, Member};
use super::{View, ViewKind};
use crate::measure::results::{PathResult, Results};
use crate::report::words::words;
use crate::vocab::{Cell, Family};

/// Per scenario and ends, each path of only IPv4 against the path of only
/// IPv6 that shares the most protocol, direction and stream cells with it.
pub(super) fn families(r: &Results) -> Vec<View> {
    let mut pairs: Vec<(usize, Vec<usize>)> = Vec::new(); // (IPv6 path, IPv4 paths)
    for (a, p4) in r.paths.iter().enumerate() {
        if !only(p4, Family::Ipv4) {
            continue;
        }
        if let Some(b) = ipv6_counterpart(r, p4) {
            match pairs.iter_mut().find(|(x, _)| *x == b) {
                Some((_, v)) => v.push(a),
                None => pairs.push((b, vec![a])),
            }
        }
    }
    pairs
        .into_iter()
        .map(|(b, fours)| view(r, b, &fours))
        .collect()
}

/// Whether `p` measures cells, all of family `f`.
fn only(p: &PathResult, f: Family) -> bool {
    !p.cells.is_empty() && p.cells.iter().all(|c| c.cell.family == f)
}

/// The path of only IPv6 with the ends and scenario of `p4` that shares the
/// most protocol, direction and stream cells with it; the first on a tie.
fn ipv6_counterpart(r: &Results, p4: &PathResult) -> Option<usize> {
    let shape = |c: &Cell| (c.protocol, c.direction, c.streams);
    r.paths
        .iter()
        .enumerate()
        .filter(|(_, p6)| {
            only(p6, Family::Ipv6)
                && p6.scenario == p4.scenario
                && p6.from == p4.from
                && p6.to == p4.to
        })
        .map(|(i, p6)| {
            let shared = p4
                .cells
                .iter()
                .filter(|c| p6.cells.iter().any(|d| shape(&d.cell) == shape(&c.cell)))
                .count();
            (i, shared)
        })
        .filter(|(_, n)| *n > 0)
        .fold(None, |acc: Option<(usize, usize)>, (i, n)| match acc {
            Some((_, m)) if m >= n => acc,
            _ => Some((i, n)),
        })
        .map(|(i, _)| i)
}

/// The IPv4 paths `fours` against the IPv6 path `b`.
fn view(r: &Results, b: usize, fours: &[usize]) -> View {
    let base = &r.paths[b];
    let names: Vec<String> = fours.iter().map(|&i| r.paths[i].path.clone()).collect();
    let mut members = vec![Member {
        path: b,
        baseline: None,
    }];
    members.extend(fours.iter().map(|&i| Member {
        path: i,
        baseline: Some(b),
    }));
    let in_scenario = match &base.scenario {
        Some(s) => format!(", scenario {s}"),
        None => String::new(),
    };
    let id = match &base.scenario {
        Some(s) => format!("families-{s}-{}", names.join("-")),
        None => format!("families-{}", names.join("-")),
    };
    Compared {
        kind: ViewKind::Families,
        id,
        title: format!(
            "IPv4 on {} against IPv6 on {}{in_scenario}",
            words(&names),
            base.path
        ),
        question: format!(
            "What does IPv4 on {} cost against IPv6 on {}, both from {} to {}{}?",
            words(&names),
            base.path,
            base.from,
            base.to,
            in_scenario.replace(", scenario", " in scenario")
        ),
        members,
        one_scenario: base.scenario.is_some(),
        legend: vec![format!(
            "Ratios (*): an IPv4 cell's median divided by {}'s IPv6 cell of the same protocol, direction and streams.",
            base.label()
        )],
    }
    .view(r)
}

#[cfg(test)]
mod tests {
    use super::super::testing::row;
    use super::super::{Column, views};
    use crate::report::fixture;
    use crate::vocab::Cell;

    #[test]
    fn ipv4_over_the_softwire_against_native_ipv6() {
        let v = views(&fixture::main_job());
        let f = &v[4];
        assert_eq!(f.id, "families-fast-dslite");
        assert_eq!(
            f.title,
            "IPv4 on dslite against IPv6 on native-ipv6, scenario fast"
        );
        assert_eq!(f.categories[0], "TCP Sender");
        let d = row(f, "fast/dslite", "ipv4.tcp.sender");
        assert!(d.figures.across_family);
        assert_eq!(
            d.baseline,
            Some((
                "fast/native-ipv6".into(),
                Cell::parse_key("ipv6.tcp.sender").unwrap()
            ))
        );
        assert_eq!(Column::Ratio.text(d), "0.98*");
        assert_eq!(d.figures.overhead_bytes, Some((40, 40)));
        assert_eq!(
            f.rows[0].cell.key(),
            "ipv6.tcp.sender",
            "the baseline first"
        );
    }
}
