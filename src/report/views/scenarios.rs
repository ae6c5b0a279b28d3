//! The scenarios views ([`ViewKind::Scenarios`]): a path name measured in
//! two scenarios or more (`raw` in `none`, `fast` and `normal`), each scenario
//! against the first; path names measured in the same scenarios share a view.

use super::View;
use super::ViewKind;
use super::compared::{Compared, Member};
use crate::measure::results::Results;
use crate::report::words::words;

/// One view per set of scenarios that path names were measured in, two or
/// more.
pub(super) fn scenarios(r: &Results) -> Vec<View> {
    groups(r)
        .into_iter()
        .map(|(scenarios, names)| view(r, &scenarios, &names))
        .collect()
}

/// (scenarios, the path names measured in exactly those), in the results'
/// order.
fn groups(r: &Results) -> Vec<(Vec<String>, Vec<String>)> {
    // (path name, its scenarios in the results' order)
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    for p in &r.paths {
        let Some(s) = &p.scenario else { continue };
        match names.iter_mut().find(|(n, _)| *n == p.path) {
            Some((_, v)) => {
                if !v.contains(s) {
                    v.push(s.clone());
                }
            }
            None => names.push((p.path.clone(), vec![s.clone()])),
        }
    }
    let mut groups: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for (n, s) in names.into_iter().filter(|(_, s)| s.len() >= 2) {
        match groups.iter_mut().find(|(g, _)| *g == s) {
            Some((_, v)) => v.push(n),
            None => groups.push((s, vec![n])),
        }
    }
    groups
}

/// The paths `names` in each of `scen`, against the same name in the first
/// scenario it was measured in.
fn view(r: &Results, scen: &[String], names: &[String]) -> View {
    let find = |n: &str, s: &str| {
        r.paths
            .iter()
            .position(|p| p.path == n && p.scenario.as_deref() == Some(s))
    };
    let mut members = Vec::new();
    for n in names {
        let Some(first) = scen.iter().find_map(|s| find(n, s)) else {
            continue;
        };
        for s in scen {
            if let Some(i) = find(n, s) {
                members.push(Member {
                    path: i,
                    baseline: (i != first).then_some(first),
                });
            }
        }
    }
    let who = match names.len() {
        1 => format!("path {}", names[0]),
        _ => format!("each of the paths {}", words(names)),
    };
    Compared {
        kind: ViewKind::Scenarios,
        id: format!("scenarios-{}", names.join("-")),
        title: format!("{} across scenarios {}", names.join(", "), words(scen)),
        question: format!(
            "How does {who} change from scenario {} to {}?",
            scen[0],
            words(&scen[1..])
        ),
        members,
        one_scenario: false,
        legend: vec![format!(
            "Ratios: a path's median divided by its median in scenario {}.",
            scen[0]
        )],
    }
    .view(r)
}

#[cfg(test)]
mod tests {
    use super::super::testing::row;
    use super::super::views;
    use crate::report::fixture;
    use crate::vocab::Cell;

    #[test]
    fn raw_across_scenarios_cell_by_cell() {
        let v = views(&fixture::main_job());
        // Fast and normal against no router, cell by cell.
        let s = &v[1];
        assert_eq!(s.id, "scenarios-raw");
        assert_eq!(s.title, "raw across scenarios none, fast and normal");
        assert_eq!(
            s.question,
            "How does path raw change from scenario none to fast and normal?"
        );
        let normal = row(s, "normal/raw", "ipv4.tcp.sender");
        assert_eq!(
            normal.baseline,
            Some((
                "none/raw".into(),
                Cell::parse_key("ipv4.tcp.sender").unwrap()
            ))
        );
        let ratio = normal.figures.ratio.unwrap();
        assert!(
            (ratio - 384.0 * 0.99 / (941.0 * 0.99)).abs() < 1e-9,
            "{ratio}"
        );
        assert_eq!(row(s, "none/raw", "ipv4.tcp.sender").figures.ratio, None);
        assert_eq!(s.rows.len(), 24, "3 scenarios x 8 cells");
        assert_eq!(s.categories.len(), 8);
    }
}
