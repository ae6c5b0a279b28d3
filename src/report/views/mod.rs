//! Views: the results organised by the question a set of paths answers, the
//! way a person reads a study, instead of one matrix of every path by every
//! cell. [`views`] is pure: results in, views out; the text report
//! (`table::view_text`) lays them out and the HTML page draws them.
//!
//! Which views a run gets is recognised from its paths' labels, scenarios and
//! ends, never from a topology's particular names; each view's file says its
//! rule. A topology cannot name its own views yet.

mod column;
mod compared;
mod families;
mod other_paths;
mod predictions;
mod published;
mod scenarios;
mod tunnels;
mod view;

pub use column::Column;
pub(crate) use predictions::predictions;
pub use view::{Figures, Metric, Point, Row, Series, Timeline, Verdict, View, ViewKind};

/// Milliseconds as every view writes them (also used outside the views).
pub(crate) use crate::report::numbers::ms;

use crate::measure::results::Results;

/// The run's views, in the order a reader takes them: published figures,
/// scenarios, tunnels, families, then the paths no view covers.
pub fn views(r: &Results) -> Vec<View> {
    views_with_baseline(r, None)
}

/// As [`views`]; with `baseline` (a path's label, `--baseline`) the last view
/// holds every path against that one, whatever the others cover.
pub fn views_with_baseline(r: &Results, baseline: Option<&str>) -> Vec<View> {
    let mut out = Vec::new();
    out.extend(published::published(r));
    out.extend(predictions(r));
    let mut compared = Vec::new();
    compared.extend(scenarios::scenarios(r));
    compared.extend(tunnels::tunnels(r));
    compared.extend(families::families(r));
    let mut covered = vec![false; r.paths.len()];
    for row in compared.iter().flat_map(|v| &v.rows) {
        if let Some(p) = row.path {
            covered[p] = true;
        }
    }
    out.extend(compared);
    let base = baseline.and_then(|b| r.paths.iter().position(|p| p.label() == b));
    let rest: Vec<usize> = match base {
        Some(_) => (0..r.paths.len()).collect(),
        None => (0..r.paths.len()).filter(|&i| !covered[i]).collect(),
    };
    if !rest.is_empty() {
        let all = rest.len() == r.paths.len();
        out.push(other_paths::other_paths(
            r,
            &rest,
            base.unwrap_or(rest[0]),
            all,
        ));
    }
    out
}

/// The index of `s` in `v`, pushed at the end where it is not there yet.
fn index_of(v: &mut Vec<String>, s: String) -> usize {
    match v.iter().position(|x| *x == s) {
        Some(i) => i,
        None => {
            v.push(s);
            v.len() - 1
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::{Row, View};

    pub(crate) fn ids(v: &[View]) -> Vec<&str> {
        v.iter().map(|v| v.id.as_str()).collect()
    }

    /// The row of path `label` and cell `key` in `v`.
    pub(crate) fn row<'a>(v: &'a View, label: &str, key: &str) -> &'a Row {
        v.rows
            .iter()
            .find(|r| r.label == label && r.cell.key() == key)
            .unwrap_or_else(|| panic!("no row {label} {key} in {}", v.id))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{ids, row};
    use super::*;
    use crate::report::table::WIDTH;
    use crate::report::{Format, fixture, render};

    #[test]
    fn the_main_jobs_views_in_reading_order() {
        let v = views(&fixture::main_job());
        assert_eq!(
            ids(&v),
            [
                "published",
                "scenarios-raw",
                "scenarios-native-ipv6-dslite",
                "tunnels-fast",
                "families-fast-dslite",
                "families-softwire-userspace-dslite",
                "paths",
            ]
        );
        let kinds: Vec<ViewKind> = v.iter().map(|v| v.kind).collect();
        use ViewKind::*;
        assert_eq!(
            kinds,
            [
                Published, Scenarios, Scenarios, Tunnels, Families, Families, Paths
            ]
        );
    }

    #[test]
    fn every_line_of_the_main_jobs_text_fits_120_columns() {
        let calibrated = render(&fixture::calibrated(), Format::Text, None);
        for l in calibrated.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} chars: {l}",
                l.chars().count()
            );
        }
        let r = fixture::main_job();
        let text = render(&r, Format::Text, None);
        for l in text.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} chars: {l}",
                l.chars().count()
            );
        }
        // Every view, also with the widest labels a topology might give.
        let mut wide = r.clone();
        for p in &mut wide.paths {
            p.path = format!("{}-with-a-rather-long-name", p.path);
            p.scenario = p
                .scenario
                .as_ref()
                .map(|s| format!("{s}-and-a-long-scenario"));
        }
        for v in views(&wide) {
            for l in crate::report::table::view_text(&v).lines() {
                assert!(l.chars().count() <= WIDTH, "{}: {l}", v.id);
            }
        }
        // Latency columns are there when the results have latency, not otherwise.
        assert!(text.contains("  idle  load"), "{text}");
        let mut bare = r.clone();
        for p in &mut bare.paths {
            p.idle_latency.clear();
            for c in &mut p.cells {
                c.latency = None;
            }
        }
        let text = render(&bare, Format::Text, None);
        assert!(!text.contains("idle"), "{text}");
        assert!(!text.contains("Round trips"), "{text}");
    }

    #[test]
    fn the_small_fixture_and_a_chosen_baseline() {
        let r = fixture::results();
        // raw and wg share their ends: one tunnel view covers both.
        assert_eq!(ids(&views(&r)), ["tunnels"]);
        // A baseline asked for: every path against it as well.
        let v = views_with_baseline(&r, Some("wg"));
        assert_eq!(ids(&v), ["tunnels", "paths"]);
        assert_eq!(v[1].title, "All paths");
        let raw = row(&v[1], "raw", "ipv4.tcp.sender");
        assert_eq!(Column::Ratio.text(raw), "3.24");
        // One path: all paths, no ratio column.
        let mut one = r.clone();
        one.paths.truncate(1);
        let v = views(&one);
        assert_eq!(ids(&v), ["paths"]);
        assert_eq!(v[0].question, "What did path raw carry?");
        assert!(!v[0].columns.contains(&Column::Ratio));
        assert!(
            views(&Results {
                paths: Vec::new(),
                ..r
            })
            .is_empty()
        );
    }

    #[test]
    #[ignore]
    fn print_the_main_job() {
        println!("{}", render(&fixture::main_job(), Format::Text, None));
    }
}
