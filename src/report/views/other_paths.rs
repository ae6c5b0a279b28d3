//! The paths view ([`ViewKind::Paths`]): every path no other view covers,
//! against the first of them; or, with an explicit baseline, every path
//! against it. With nothing recognised at all, this is the one view: all paths.

use super::compared::{Compared, Member};
use super::{View, ViewKind};
use crate::measure::results::Results;
use crate::report::reference::streams_lines;
use crate::report::words::words;

/// `paths` against path `base`; `all` when they are every path of the run.
pub(super) fn other_paths(r: &Results, paths: &[usize], base: usize, all: bool) -> View {
    let members: Vec<Member> = paths
        .iter()
        .map(|&i| Member {
            path: i,
            baseline: (i != base).then_some(base),
        })
        .collect();
    let labels: Vec<String> = paths.iter().map(|&i| r.paths[i].label()).collect();
    let base_label = r.paths[base].label();
    let question = if paths.len() == 1 {
        format!("What did path {} carry?", labels[0])
    } else {
        format!("How do {} compare with {base_label}?", words(&labels))
    };
    let mut legend = Vec::new();
    if paths.len() > 1 {
        legend.push(format!(
            "Ratios: a path's median divided by {base_label}'s; * where {base_label} measures only the other family (its cell of the same protocol and direction)."
        ));
    }
    let mut v = Compared {
        kind: ViewKind::Paths,
        id: "paths".into(),
        title: if all { "All paths" } else { "Other paths" }.to_string(),
        question,
        members,
        one_scenario: false,
        legend,
    }
    .view(r);
    // Several streams against one, for these paths only.
    let own: Vec<String> = labels.iter().map(|l| format!("{l} ")).collect();
    v.notes.extend(
        streams_lines(r)
            .into_iter()
            .filter(|l| own.iter().any(|o| l.starts_with(o))),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::super::views;
    use crate::report::fixture;

    #[test]
    fn what_no_view_covers() {
        let v = views(&fixture::main_job());
        // The speed test's path, 6 streams against one.
        let p = &v[6];
        assert_eq!(p.title, "Other paths");
        assert!(p.rows.iter().all(|r| r.label == "fast/speedtest"));
        assert_eq!(
            p.notes,
            ["fast/speedtest IPv6 TCP Receiver: 6 streams 650 Mbit/s = 2.61x one stream (249)"]
        );
    }
}
