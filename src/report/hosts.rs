//! What a lab placed on several hosts adds to a report: the underlays
//! measured between its hosts, the hosts each path crosses, and the cells
//! whose best run reached the tightest underlay on their way
//! ([`Results::at_underlay_capacity`]), marked [`MARK`] and explained once in
//! a note. Results of one machine have none of it, and their reports are as
//! before.

use crate::measure::results::{AT_UNDERLAY_CAPACITY, CellResult, PathResult, Results};
use crate::report::numbers::mbit;
use crate::report::words::one_line;

/// After a rate that reached the underlay's capacity.
pub(crate) const MARK: &str = "^";

/// The section's title in every format.
pub(crate) const TITLE: &str = "Underlay between hosts";

/// The section: what was measured, a line per underlay, a line per path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Section {
    pub(crate) legend: String,
    /// "pc -> router: upload 9400 Mbit/s, download 9300 Mbit/s (198.18.230.1 and 198.18.230.2)".
    pub(crate) underlays: Vec<String>,
    /// "raw: pc -> router -> server".
    pub(crate) paths: Vec<String>,
}

/// The section, where the results have underlays or paths that cross hosts.
pub(crate) fn section(r: &Results) -> Option<Section> {
    let placed = r.paths.iter().any(|p| !p.hosts.is_empty());
    if r.underlays.is_empty() && !placed {
        return None;
    }
    let underlays = r
        .underlays
        .iter()
        .map(|u| {
            let way =
                |bps: Option<f64>| bps.map_or("failed".into(), |b| format!("{} Mbit/s", mbit(b)));
            let mut line = format!(
                "{} -> {}: upload {}, download {} ({} and {})",
                u.from_host,
                u.to_host,
                way(u.upload_bps),
                way(u.download_bps),
                u.from_address,
                u.to_address
            );
            if let Some(e) = &u.error {
                line.push_str(&format!(": {}", one_line(e)));
            }
            line
        })
        .collect();
    let paths = if placed {
        r.paths.iter().map(hosts_line).collect()
    } else {
        Vec::new()
    };
    Some(Section {
        legend: "TCP, one stream, each way between the hosts' underlay addresses, measured \
                 before the cells: upload from the first host to the second, download back. \
                 The hosts each path's packets cross, a tunnel's by its outer packets."
            .into(),
        underlays,
        paths,
    })
}

/// "raw: pc -> router -> server"; a path on one host stays there.
fn hosts_line(p: &PathResult) -> String {
    match p.hosts.as_slice() {
        [] => format!("{}: hosts not known", p.label()),
        [one] => format!("{}: stays on host {one}", p.label()),
        many => format!("{}: {}", p.label(), many.join(" -> ")),
    }
}

/// Whether a cell is marked: its best run reached the underlay's capacity.
pub(crate) fn marked(r: &Results, p: &PathResult, c: &CellResult) -> bool {
    r.at_underlay_capacity(p, c).is_some()
}

/// [`MARK`] for a marked cell, else nothing.
pub(crate) fn mark(r: &Results, p: &PathResult, c: &CellResult) -> &'static str {
    if marked(r, p, c) { MARK } else { "" }
}

/// The notes that explain [`MARK`]: one per underlay some cell reached.
pub(crate) fn notes(r: &Results) -> Vec<String> {
    let mut limits: Vec<(f64, String, String)> = Vec::new();
    for p in &r.paths {
        for c in &p.cells {
            if let Some(l) = r.at_underlay_capacity(p, c)
                && !limits.contains(&l)
            {
                limits.push(l);
            }
        }
    }
    limits
        .into_iter()
        .map(|(bps, a, b)| {
            format!(
                "{MARK} at {:.0} % or more of the underlay from {a} to {b} ({} Mbit/s): \
                 the figure may be the underlay's, not the path's",
                AT_UNDERLAY_CAPACITY * 100.0,
                mbit(bps)
            )
        })
        .collect()
}

/// The run's notes, then the notes that explain [`MARK`]: what every
/// format prints under its report.
pub(crate) fn all_notes(r: &Results) -> Vec<String> {
    let mut all = r.notes.clone();
    all.extend(notes(r));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn the_underlays_and_the_hosts_each_path_crosses() {
        let s = section(&fixture::placed()).unwrap();
        assert_eq!(
            s.underlays,
            [
                "pc -> router: upload 9400 Mbit/s, download 9300 Mbit/s (198.18.230.1 and 198.18.230.2)",
                "router -> server: upload 1000 Mbit/s, download 2000 Mbit/s (198.18.230.2 and 198.18.230.3)",
                "pc -> server: upload failed, download failed (198.18.230.1 and 198.18.230.3): \
                 connecting to 198.18.230.3:5201: connection refused",
            ]
        );
        assert_eq!(
            s.paths,
            ["raw: pc -> router -> server", "wg: pc -> router -> server"]
        );
        assert_eq!(section(&fixture::results()), None, "one machine");
    }

    /// raw's TCP sender cells (best 941 and 928 Mbit/s) reach the 1000 Mbit/s
    /// from router to server; nothing else does: one note explains both.
    #[test]
    fn cells_at_the_underlays_capacity_are_marked_and_explained_once() {
        let r = fixture::placed();
        let marked: Vec<String> = r
            .paths
            .iter()
            .flat_map(|p| p.cells.iter().map(move |c| (p, c)))
            .filter(|(p, c)| marked(&r, p, c))
            .map(|(p, c)| format!("{} {}", p.label(), c.cell.key()))
            .collect();
        assert_eq!(
            marked,
            [
                "raw ipv4.tcp.sender.p6",
                "raw ipv6.tcp.sender",
                "raw ipv4.tcp.sender"
            ]
        );
        assert_eq!(
            notes(&r),
            [
                "^ at 90 % or more of the underlay from router to server (1000 Mbit/s): \
              the figure may be the underlay's, not the path's"
            ]
        );
        assert!(notes(&fixture::results()).is_empty());
    }
}
